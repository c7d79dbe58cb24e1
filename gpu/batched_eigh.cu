// syevBatched (batched_eigh.h): one thread block per matrix, everything in shared
// memory. Counts for n = 74 (docs/benchmarks.md, version 9): tridiagonalisation and
// forming Q are 2 x 72 steps of a matrix-vector product and a rank-1/rank-2 update
// (3 barriers a step); the QL iteration does ~0.75 n^2 rotations whose scalar chain
// is serial (thread 0), while warps 1-3 apply the previous sweep's rotations to the
// rows of Q (one barrier a sweep, two rotation buffers).
#include "batched_eigh.h"

#include "core/errors.h"
#include "kernels.h"

#include <string>

namespace spex::gpu {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxQlIterations = 60; // per eigenvalue (LAPACK dsteqr allows 30 n in all)

__device__ __forceinline__ double warpSum(double x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// One implicit-QL sweep on the tridiagonal (d, e: e[i] couples i and i+1), as in
// dsteqr / tqli: finds the first unreduced block from l on, runs one shifted sweep
// over it and records its rotations (C[i], S[i] act on columns i, i+1 of Q, applied
// for i = hi down to lo). Returns 1 with a sweep recorded, 0 when every eigenvalue
// has converged, -1 when eigenvalue l did not converge (l, iter: thread 0's state).
__device__ __forceinline__ int qlSweep(int n, double* d, double* e, double* C, double* S, int& l, int& iter,
                       int& hi, int& lo) {
  constexpr double eps = 2.220446049250313e-16;
  while (l < n) {
    int m = l;
    for (; m < n - 1; ++m)
      if (fabs(e[m]) <= eps * (fabs(d[m]) + fabs(d[m + 1]))) break;
    if (m == l) {
      ++l;
      iter = 0;
      continue;
    }
    if (++iter > kMaxQlIterations) return -1;
    double g = (d[l + 1] - d[l]) / (2.0 * e[l]);
    double r = hypot(g, 1.0);
    g = d[m] - d[l] + e[l] / (g + copysign(r, g));
    double s = 1.0, c = 1.0, p = 0.0;
    int i = m - 1;
    bool split = false;
    for (; i >= l; --i) {
      const double f = s * e[i], b = c * e[i];
      // sqrt of the sum of squares, not hypot: the entries of a decorrelation block are
      // far from overflow, and this is the serial chain of the whole solver.
      r = sqrt(f * f + g * g);
      e[i + 1] = r;
      if (r == 0.0) { // the block splits here: the rotations so far stand
        d[i + 1] -= p;
        e[m] = 0.0;
        split = true;
        break;
      }
      const double rr = 1.0 / r;
      s = f * rr;
      c = g * rr;
      g = d[i + 1] - p;
      r = (d[i] - g) * s + 2.0 * c * b;
      p = s * r;
      d[i + 1] = g + p;
      g = c * r - b;
      C[i] = c;
      S[i] = s;
    }
    hi = m - 1;
    lo = split ? i + 1 : l;
    if (!split) {
      d[l] -= p;
      e[l] = g;
      e[m] = 0.0;
    }
    if (hi >= lo) return 1;
  }
  return 0;
}

// prof (optional): thread 0 of each block adds its clock cycles per stage and its QL
// sweeps and rotations (SyevProfile order).
__global__ void __launch_bounds__(kThreads, 4) syevKernel(int n, double* Ag, int lda, long long strideA,
                                                       double* Wg, int* info, unsigned long long* prof) {
  extern __shared__ double sh[];
  const int ld = n; // column-major: a thread per row walks a column without bank conflicts
  double* a = sh;
  double* d = a + n * n;
  double* e = d + n;
  double* tau = e + n;
  double* v = tau + n;
  double* p = v + n;
  double* cs = p + n; // [2][n] rotation buffers
  double* sn = cs + 2 * n;
  int* rank = reinterpret_cast<int*>(sn + 2 * n);
  __shared__ int sCount[2], sHi[2], sLo[2], sFail;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5, nw = nt >> 5;
  double* A = Ag + (long long)blockIdx.x * strideA;
  __shared__ long long clk[5]; // thread 0's stage clocks (prof only)
  __shared__ unsigned long long sweeps, rotations; // thread 0's (prof only)
  if (prof && tid == 0) {
    clk[0] = clock64();
    sweeps = rotations = 0;
  }

  // The lower triangle, mirrored: both halves are kept up to date below.
  for (int t = tid; t < n * n; t += nt) {
    const int c = t / n, r = t - c * n;
    a[c * ld + r] = r >= c ? A[(long long)c * lda + r] : A[(long long)r * lda + c];
  }
  __syncthreads();

  // Householder tridiagonalisation (dsytd2, lower): H_i = I - tau_i v v^T with
  // v = (1, a(i+2:n, i) / (alpha - beta)) annihilates a(i+2:n, i).
  for (int i = 0; i + 2 < n; ++i) {
    double ss = 0.0;
    for (int r = i + 2 + lane; r < n; r += 32) ss += a[i * ld + r] * a[i * ld + r];
    ss = warpSum(ss); // every warp the same: no barrier needed for the scalars
    const double alpha = a[i * ld + i + 1];
    double t = 0.0, beta = alpha, scal = 0.0;
    if (ss > 0.0) {
      beta = -copysign(sqrt(alpha * alpha + ss), alpha);
      t = (beta - alpha) / beta;
      scal = 1.0 / (alpha - beta);
    }
    for (int r = i + 1 + tid; r < n; r += nt) v[r] = r == i + 1 ? 1.0 : a[i * ld + r] * scal;
    if (tid == 0) {
      d[i] = a[i * ld + i];
      e[i] = beta;
      tau[i] = t;
    }
    __syncthreads();
    // p = tau A22 v
    for (int r = i + 1 + tid; r < n; r += nt) {
      double s = 0.0;
      for (int c = i + 1; c < n; ++c) s += a[c * ld + r] * v[c];
      p[r] = t * s;
    }
    __syncthreads();
    // A22 -= v w^T + w v^T with w = p - (tau/2)(p^T v) v; the reflector into column i.
    double k = 0.0;
    for (int r = i + 1 + lane; r < n; r += 32) k += p[r] * v[r];
    k = 0.5 * t * warpSum(k);
    if (t != 0.0)
      for (int c = i + 1 + warp; c < n; c += nw) { // a warp per column, lanes down it
        const double vc = v[c], wc = p[c] - k * vc;
        for (int r = i + 1 + lane; r < n; r += 32) {
          const double vr = v[r];
          a[c * ld + r] -= vr * wc + (p[r] - k * vr) * vc;
        }
      }
    for (int r = i + 2 + tid; r < n; r += nt) a[i * ld + r] = v[r];
    __syncthreads();
  }
  if (prof && tid == 0) clk[1] = clock64();
  if (tid == 0) {
    if (n >= 2) {
      d[n - 2] = a[(n - 2) * ld + n - 2];
      e[n - 2] = a[(n - 2) * ld + n - 1];
    }
    d[n - 1] = a[(n - 1) * ld + n - 1];
    e[n - 1] = 0.0;
  }
  __syncthreads();

  // Q = H_0 ... H_{n-3} in place (dorgtr 'L' -> dorg2r on Q' = a(1:n, 1:n)), backwards:
  // Q'(i:, i+1:) = H_i Q'(i:, i+1:), then column i of Q' from v_i alone. Reflector i
  // stays in column i of a until step i - 1 overwrites it.
  for (int r = 1 + tid; r < n; r += nt) a[(n - 1) * ld + r] = r == n - 1 ? 1.0 : 0.0;
  __syncthreads();
  for (int i = n - 3; i >= 0; --i) {
    for (int c = i + 2 + warp; c < n; c += nw) { // p_c = v^T Q'(:, c), a warp per column
      double s = 0.0;
      for (int r = i + 1 + lane; r < n; r += 32) s += (r == i + 1 ? 1.0 : a[i * ld + r]) * a[c * ld + r];
      s = warpSum(s);
      if (lane == 0) p[c] = s;
    }
    __syncthreads();
    const double t = tau[i];
    for (int c = i + 2 + warp; c < n; c += nw) {
      const double tp = t * p[c];
      for (int r = i + 1 + lane; r < n; r += 32) a[c * ld + r] -= tp * (r == i + 1 ? 1.0 : a[i * ld + r]);
    }
    for (int r = 1 + tid; r < n; r += nt)
      a[(i + 1) * ld + r] = r < i + 1 ? 0.0 : (r == i + 1 ? 1.0 - t : -t * a[i * ld + r]);
    __syncthreads();
  }
  for (int r = tid; r < n; r += nt) {
    a[r] = r == 0 ? 1.0 : 0.0;
    if (r) a[r * ld] = 0.0;
  }
  __syncthreads();
  if (prof && tid == 0) clk[2] = clock64();

  // Implicit QL. Thread 0 computes sweep s + 1 while warps 1.. apply sweep s to the
  // rows of Q (each row independent: a thread per row, the column pair in registers).
  int l = 0, iter = 0;
  if (tid == 0) {
    int hi = 0, lo = 0;
    sFail = 0;
    sCount[0] = qlSweep(n, d, e, cs, sn, l, iter, hi, lo);
    sHi[0] = hi;
    sLo[0] = lo;
    if (sCount[0] < 0) sFail = l + 1;
  }
  __syncthreads();
  for (int it = 0;; ++it) {
    const int cur = it & 1, nxt = cur ^ 1;
    if (sCount[cur] <= 0) break;
    if (warp == 0) {
      if (tid == 0) {
        int hi = 0, lo = 0;
        const int r = qlSweep(n, d, e, cs + nxt * n, sn + nxt * n, l, iter, hi, lo);
        if (prof) {
          ++sweeps;
          rotations += sHi[cur] - sLo[cur] + 1;
        }
        sCount[nxt] = r;
        sHi[nxt] = hi;
        sLo[nxt] = lo;
        if (r < 0) sFail = l + 1;
      }
    } else {
      const double* C = cs + cur * n;
      const double* S = sn + cur * n;
      const int hi = sHi[cur], lo = sLo[cur];
      for (int row = tid - 32; row < n; row += nt - 32) {
        double z1 = a[(hi + 1) * ld + row];
        for (int i = hi; i >= lo; --i) {
          const double z0 = a[i * ld + row], c = C[i], s = S[i];
          a[(i + 1) * ld + row] = s * z0 + c * z1;
          z1 = c * z0 - s * z1;
        }
        a[lo * ld + row] = z1;
      }
    }
    __syncthreads();
  }

  if (prof && tid == 0) clk[3] = clock64();
  // Ascending order (ties by index), as LAPACK returns them.
  for (int k = tid; k < n; k += nt) {
    const double dk = d[k];
    int rk = 0;
    for (int j = 0; j < n; ++j) rk += (d[j] < dk) || (d[j] == dk && j < k);
    rank[k] = rk;
    Wg[(long long)blockIdx.x * n + rk] = dk;
  }
  __syncthreads();
  for (int t = tid; t < n * n; t += nt) {
    const int k = t / n, r = t - k * n;
    A[(long long)rank[k] * lda + r] = a[k * ld + r];
  }
  if (tid == 0) info[blockIdx.x] = sFail;
  if (prof && tid == 0) {
    clk[4] = clock64();
    for (int k = 0; k < 4; ++k) atomicAdd(prof + k, (unsigned long long)(clk[k + 1] - clk[k]));
    atomicAdd(prof + 4, sweeps);
    atomicAdd(prof + 5, rotations);
  }
}


void launchSyev(int n, double* A, int lda, long long strideA, double* W, int* info, int batch,
                cudaStream_t stream, unsigned long long* prof) {
  if (n < 1 || n > kSyevMaxN || lda < n || strideA < (long long)lda * n || batch < 0)
    throw GpuError("syevBatched: bad arguments (n " + std::to_string(n) + ", lda " +
                   std::to_string(lda) + ", stride " + std::to_string(strideA) + ", batch " +
                   std::to_string(batch) + "; n must be 1.." + std::to_string(kSyevMaxN) + ")");
  if (batch == 0) return;
  const std::size_t shm = sizeof(double) * (std::size_t(n) * n + 10 * std::size_t(n));
  SPEX_CUDA(cudaFuncSetAttribute(syevKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm)));
  syevKernel<<<batch, kThreads, shm, stream>>>(n, A, lda, strideA, W, info, prof);
  SPEX_CUDA_LAUNCH("syevKernel");
}

} // namespace

void syevBatched(int n, double* A, int lda, long long strideA, double* W, int* info, int batch,
                 cudaStream_t stream) {
  launchSyev(n, A, lda, strideA, W, info, batch, stream, nullptr);
}

SyevProfile syevBatchedProfile(int n, double* A, int lda, long long strideA, double* W, int* info,
                               int batch) {
  unsigned long long* prof = nullptr;
  SPEX_CUDA(cudaMalloc(&prof, 6 * sizeof(unsigned long long)));
  SyevProfile out;
  try {
    SPEX_CUDA(cudaMemset(prof, 0, 6 * sizeof(unsigned long long)));
    cudaEvent_t a, b;
    SPEX_CUDA(cudaEventCreate(&a));
    SPEX_CUDA(cudaEventCreate(&b));
    SPEX_CUDA(cudaEventRecord(a, nullptr));
    launchSyev(n, A, lda, strideA, W, info, batch, nullptr, prof);
    SPEX_CUDA(cudaEventRecord(b, nullptr));
    SPEX_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    SPEX_CUDA(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    unsigned long long h[6];
    SPEX_CUDA(cudaMemcpy(h, prof, sizeof h, cudaMemcpyDeviceToHost));
    const double nb = batch > 0 ? batch : 1;
    out.seconds = ms * 1e-3;
    out.tridiagonalCycles = h[0] / nb;
    out.formQCycles = h[1] / nb;
    out.qlCycles = h[2] / nb;
    out.writeCycles = h[3] / nb;
    out.sweeps = h[4] / nb;
    out.rotations = h[5] / nb;
  } catch (...) {
    cudaFree(prof);
    throw;
  }
  cudaFree(prof);
  return out;
}


} // namespace spex::gpu
