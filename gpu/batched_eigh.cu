// syevBatched (batched_eigh.h) in three passes. Counts for n = 74 (docs/benchmarks.md,
// versions 9-11): the reduction is 2 x 72 steps of a matrix-vector product and a
// rank-1/rank-2 update (3 and 2 barriers a step); the QL iteration does ~1.05 n^2
// rotations whose scalar chain is serial, so it runs a thread per matrix and records
// the rotations; applying them is independent per row of Q.
#include "batched_eigh.h"

#include "core/errors.h"
#include "kernels.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace spex::gpu {

namespace {

constexpr int kReduceThreads = 128;
constexpr int kChunk = 512; // record entries staged in shared memory at a time (apply pass)
constexpr int kApplyMaxThreads = ((kSyevMaxN + 31) / 32) * 32;
constexpr int kMaxQlIterations = 60; // per eigenvalue (LAPACK dsteqr allows 30 n in all)
constexpr double kEps = 2.220446049250313e-16;

// Workspace of one matrix (stride S doubles, even): [0] record entries used, or -1
// when the record overflowed; [1] QL failure (0 or l + 1); [2, 2 + n) d and
// [2 + n, 2 + 2n) e of the tridiagonal (pass 1); [2 + 2n, 2 + 3n) the eigenvalues
// (pass 2, unsorted); from recordStart(n) the record: per sweep a header (hi, lo)
// then its rotations (c, s) for i = hi down to lo, each acting on columns i, i + 1.
__host__ __device__ constexpr long long recordStart(int n) { return (2 + 3LL * n + 1) & ~1LL; }

__device__ __forceinline__ double warpSum(double x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// One rotation of an implicit QL sweep at i (dsteqr / tqli), shared by pass 2 and pass
// 3's fallback. The compiler may contract the two call sites differently, which moves
// eigenvectors of repeated eigenvalues within their space and nothing else
// (docs/benchmarks.md, version 15).
// From e(i), d(i), d(i + 1) and the sweep's state (s, c, p, g): returns r = the new
// e(i + 1), 0 where the block splits (then nothing else changes), else updates the
// state and sets dnew = the new d(i + 1). r and 1/r come from one rsqrt (the entries
// of a decorrelation block are far from overflow, and this is the serial chain of the
// whole solver).
__device__ __forceinline__ double qlRotation(double ei, double di, double di1, double& s, double& c,
                                             double& p, double& g, double& dnew) {
  const double f = s * ei, bb = c * ei;
  const double q = f * f + g * g;
  const double rr = q > 0.0 ? rsqrt(q) : 0.0;
  const double r = q * rr;
  if (r == 0.0) return 0.0;
  s = f * rr;
  c = g * rr;
  const double gg = di1 - p;
  const double t = (di - gg) * s + 2.0 * c * bb;
  p = s * t;
  dnew = gg + p;
  g = c * t - bb;
  return r;
}

// Pass 1: Householder tridiagonalisation and Q, one block per matrix. Column-major in
// shared memory with an odd leading dimension, so that a thread per row and a thread
// per column both walk without bank conflicts.
__global__ void __launch_bounds__(kReduceThreads, 4)
    syevReduceKernel(int n, double* Ag, int lda, long long strideA, double* work, long long S,
                     unsigned long long* prof) {
  extern __shared__ double sh[];
  const int ld = n | 1;
  double* a = sh;
  double* d = a + n * ld;
  double* e = d + n;
  double* tau = e + n;
  double* v = tau + n;
  double* p = v + n;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31;
  double* A = Ag + (long long)blockIdx.x * strideA;
  long long clk0 = 0, clk1 = 0;
  if (prof && tid == 0) clk0 = clock64();

  // The lower triangle, mirrored: both halves are kept up to date below.
  for (int t = tid; t < n * n; t += nt) {
    const int c = t / n, r = t - c * n;
    a[c * ld + r] = r >= c ? A[(long long)c * lda + r] : A[(long long)r * lda + c];
  }
  __syncthreads();

  // dsytd2, lower: H_i = I - tau_i v v^T with v = (1, a(i+2:n, i) / (alpha - beta))
  // annihilates a(i+2:n, i).
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
    // p = tau A22 v, a thread per row, four independent partial sums.
    for (int r = i + 1 + tid; r < n; r += nt) {
      double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
      int c = i + 1;
      for (; c + 3 < n; c += 4) {
        s0 += a[c * ld + r] * v[c];
        s1 += a[(c + 1) * ld + r] * v[c + 1];
        s2 += a[(c + 2) * ld + r] * v[c + 2];
        s3 += a[(c + 3) * ld + r] * v[c + 3];
      }
      for (; c < n; ++c) s0 += a[c * ld + r] * v[c];
      p[r] = t * ((s0 + s1) + (s2 + s3));
    }
    __syncthreads();
    // A22 -= v w^T + w v^T with w = p - (tau/2)(p^T v) v; the reflector into column i.
    // A thread per row, four columns loaded before any is stored (shared-memory
    // latency, not arithmetic, is what a step costs).
    double k = 0.0;
    for (int r = i + 1 + lane; r < n; r += 32) k += p[r] * v[r];
    k = 0.5 * t * warpSum(k);
    if (t != 0.0)
      for (int r = i + 1 + tid; r < n; r += nt) {
        const double vr = v[r], wr = p[r] - k * vr;
        int c = i + 1;
        for (; c + 3 < n; c += 4) {
          double x[4], vc[4], wc[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            x[q] = a[(c + q) * ld + r];
            vc[q] = v[c + q];
            wc[q] = p[c + q] - k * vc[q];
          }
#pragma unroll
          for (int q = 0; q < 4; ++q) a[(c + q) * ld + r] = x[q] - (vr * wc[q] + wr * vc[q]);
        }
        for (; c < n; ++c) {
          const double vc = v[c], wc = p[c] - k * vc;
          a[c * ld + r] -= vr * wc + wr * vc;
        }
        if (r >= i + 2) a[i * ld + r] = vr;
      }
    else
      for (int r = i + 2 + tid; r < n; r += nt) a[i * ld + r] = v[r];
    __syncthreads();
  }
  if (prof && tid == 0) clk1 = clock64();
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
    // p_c = v^T Q'(:, c), a thread per column, four independent partial sums.
    const double* vi = a + i * ld;
    for (int c = i + 2 + tid; c < n; c += nt) {
      const double* col = a + c * ld;
      double s0 = col[i + 1], s1 = 0.0, s2 = 0.0, s3 = 0.0;
      int r = i + 2;
      for (; r + 3 < n; r += 4) {
        s0 += vi[r] * col[r];
        s1 += vi[r + 1] * col[r + 1];
        s2 += vi[r + 2] * col[r + 2];
        s3 += vi[r + 3] * col[r + 3];
      }
      for (; r < n; ++r) s0 += vi[r] * col[r];
      p[c] = (s0 + s1) + (s2 + s3);
    }
    __syncthreads();
    // Q'(i+1:, i+2:) -= tau v p^T, a thread per row, four columns in flight; then
    // column i + 1 from v alone.
    const double t = tau[i];
    for (int r = 1 + tid; r < n; r += nt) {
      if (r >= i + 1) {
        const double vr = r == i + 1 ? 1.0 : vi[r];
        int c = i + 2;
        for (; c + 3 < n; c += 4) {
          double x[4], pc[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            x[q] = a[(c + q) * ld + r];
            pc[q] = t * p[c + q];
          }
#pragma unroll
          for (int q = 0; q < 4; ++q) a[(c + q) * ld + r] = x[q] - pc[q] * vr;
        }
        for (; c < n; ++c) a[c * ld + r] -= t * p[c] * vr;
      }
      a[(i + 1) * ld + r] = r < i + 1 ? 0.0 : (r == i + 1 ? 1.0 - t : -t * vi[r]);
    }
    __syncthreads();
  }
  for (int r = tid; r < n; r += nt) {
    a[r] = r == 0 ? 1.0 : 0.0;
    if (r) a[r * ld] = 0.0;
  }
  __syncthreads();
  if (prof && tid == 0) {
    const long long clk2 = clock64();
    atomicAdd(prof + 0, (unsigned long long)(clk1 - clk0));
    atomicAdd(prof + 1, (unsigned long long)(clk2 - clk1));
  }
  for (int t = tid; t < n * n; t += nt) {
    const int c = t / n, r = t - c * n;
    A[(long long)c * lda + r] = a[c * ld + r];
  }
  double* wk = work + (long long)blockIdx.x * S;
  for (int r = tid; r < n; r += nt) {
    wk[2 + r] = d[r];
    wk[2 + n + r] = e[r];
  }
}

// Pass 2: implicit QL with shifts (dsteqr / tqli) on the tridiagonal, one thread per
// matrix, d and e in shared memory ([i][lane]: conflict-free whatever i each lane is
// at). Records every sweep's rotations; stops recording (and leaves the matrix to
// pass 3's own QL) when its share of the workspace is full.
// kQlLanes matrices per block (one warp): 1 where the batch fits the GPU in one wave
// (lanes of one warp would wait for each other's branches), 8 for large batches.
template <int kQlLanes>
__global__ void __launch_bounds__(kQlLanes) syevQlKernel(int n, int batch, double* work, long long S,
                                                         unsigned long long* prof) {
  extern __shared__ double sh[];
  const int lane = threadIdx.x, b = blockIdx.x * kQlLanes + lane;
  if (b >= batch) return; // no barriers below
  double* wk = work + (long long)b * S;
  double* d = sh + lane;                 // d(i) = d[i * kQlLanes]
  double* e = sh + n * kQlLanes + lane;  // e(i) = e[i * kQlLanes]
#define D_(i) d[(i) * kQlLanes]
#define E_(i) e[(i) * kQlLanes]
  const long long clk0 = prof ? clock64() : 0;
  for (int i = 0; i < n; ++i) {
    D_(i) = wk[2 + i];
    E_(i) = wk[2 + n + i];
  }
  const long long R0 = recordStart(n);
  double2* rec = reinterpret_cast<double2*>(wk + R0);
  const long long cap = (S - R0) / 2;
  long long used = 0, sweeps = 0, rotations = 0;
  int fail = 0, l = 0, iter = 0;
  bool overflow = false;
  while (l < n) {
    // The first negligible e(m) from l on, four candidates' loads at a time.
    int m = l;
    for (;;) {
      if (m + 4 <= n - 1) {
        double ee[4], dd[5];
#pragma unroll
        for (int q = 0; q < 4; ++q) ee[q] = E_(m + q);
#pragma unroll
        for (int q = 0; q < 5; ++q) dd[q] = D_(m + q);
        int q = 0;
        while (q < 4 && !(fabs(ee[q]) <= kEps * (fabs(dd[q]) + fabs(dd[q + 1])))) ++q;
        m += q;
        if (q < 4) break;
      } else {
        for (; m < n - 1; ++m)
          if (fabs(E_(m)) <= kEps * (fabs(D_(m)) + fabs(D_(m + 1)))) break;
        break;
      }
    }
    if (m == l) {
      ++l;
      iter = 0;
      continue;
    }
    if (++iter > kMaxQlIterations) {
      fail = l + 1;
      break;
    }
    if (used + 1 + (m - l) > cap) {
      overflow = true;
      break;
    }
    double g = (D_(l + 1) - D_(l)) / (2.0 * E_(l));
    double r = hypot(g, 1.0);
    g = D_(m) - D_(l) + E_(l) / (g + copysign(r, g));
    double s = 1.0, c = 1.0, p = 0.0;
    int i = m - 1;
    bool split = false;
    long long k = used + 1;
    // e(i), d(i), d(i + 1) of the next rotation are loaded one rotation ahead (a
    // rotation writes only e(i + 1) and d(i + 1)).
    double ei = E_(i), di = D_(i), di1 = D_(i + 1);
    for (; i >= l; --i) {
      const double en = i > 0 ? E_(i - 1) : 0.0, dn = i > 0 ? D_(i - 1) : 0.0;
      double dnew = 0.0;
      r = qlRotation(ei, di, di1, s, c, p, g, dnew);
      E_(i + 1) = r;
      if (r == 0.0) { // the block splits here: the rotations so far stand
        D_(i + 1) = di1 - p;
        E_(m) = 0.0;
        split = true;
        break;
      }
      D_(i + 1) = dnew;
      rec[k++] = make_double2(c, s);
      ei = en;
      di1 = di;
      di = dn;
    }
    const int hi = m - 1, lo = split ? i + 1 : l;
    if (!split) {
      D_(l) -= p;
      E_(l) = g;
      E_(m) = 0.0;
    }
    if (hi >= lo) {
      rec[used] = make_double2(double(hi), double(lo));
      used = k;
      ++sweeps;
      rotations += hi - lo + 1;
    }
  }
  wk[0] = overflow ? -1.0 : double(used);
  wk[1] = double(fail);
  for (int i = 0; i < n; ++i) wk[2 + 2 * n + i] = D_(i);
#undef D_
#undef E_
  if (prof) {
    atomicAdd(prof + 2, (unsigned long long)(clock64() - clk0));
    atomicAdd(prof + 4, (unsigned long long)sweeps);
    atomicAdd(prof + 5, (unsigned long long)rotations);
    if (overflow) atomicAdd(prof + 6, 1ull);
  }
}

// One implicit-QL sweep (thread 0 of pass 3's fallback): finds the first unreduced
// block from l on, runs one shifted sweep over it and leaves its rotations in C, S
// (C[i], S[i] act on columns i, i + 1 of Q, applied for i = hi down to lo). Returns
// 1 with a sweep, 0 when every eigenvalue has converged, -1 when eigenvalue l did not
// converge. The same arithmetic as pass 2.
__device__ int qlSweep(int n, double* d, double* e, double* C, double* S, int& l, int& iter, int& hi,
                       int& lo) {
  while (l < n) {
    int m = l;
    for (; m < n - 1; ++m)
      if (fabs(e[m]) <= kEps * (fabs(d[m]) + fabs(d[m + 1]))) break;
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
      double dnew = 0.0;
      r = qlRotation(e[i], d[i], d[i + 1], s, c, p, g, dnew);
      e[i + 1] = r;
      if (r == 0.0) {
        d[i + 1] -= p;
        e[m] = 0.0;
        split = true;
        break;
      }
      d[i + 1] = dnew;
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

// Pass 3: Q from pass 1 (in A), the recorded rotations applied to its rows (a thread
// per row; the record goes through shared memory kChunk entries at a time, loaded by
// all threads at once, and each thread takes four rotations and the four columns they
// need at a time), then the eigenvalues sorted ascending with their vectors. A matrix whose record overflowed runs the QL here: thread 0
// computes sweep s + 1 while warps 1.. apply sweep s.
__global__ void __launch_bounds__(kApplyMaxThreads)
    syevApplyKernel(int n, double* Ag, int lda, long long strideA, double* Wg, int* info,
                    const double* __restrict__ work, long long S, unsigned long long* prof) {
  extern __shared__ double sh[];
  const int ld = n;
  double* a = sh;
  double* d = a + n * n;
  double* e = d + n;
  double* cs = e + n; // [2][n] rotation buffers (fallback)
  double* sn = cs + 2 * n;
  int* rank = reinterpret_cast<int*>(sn + 2 * n);
  double2* buf = reinterpret_cast<double2*>(sh + ((std::size_t(n) * n + 7 * n + 1) & ~std::size_t(1)));
  __shared__ int sCount[2], sHi[2], sLo[2], sFail;
  const int tid = threadIdx.x, nt = blockDim.x, warp = tid >> 5;
  double* A = Ag + (long long)blockIdx.x * strideA;
  const double* wk = work + (long long)blockIdx.x * S;
  long long clk0 = 0;
  if (prof && tid == 0) clk0 = clock64();
  for (int t = tid; t < n * n; t += nt) {
    const int c = t / n, r = t - c * n;
    a[c * ld + r] = A[(long long)c * lda + r];
  }
  const long long total = (long long)wk[0];
  if (total >= 0) {
    for (int k = tid; k < n; k += nt) d[k] = wk[2 + 2 * n + k];
    if (tid == 0) sFail = int(wk[1]);
    __syncthreads();
    const double2* rec = reinterpret_cast<const double2*>(wk + recordStart(n));
    const int row = tid;
    int i = 0, lo = 0;
    bool in = false; // inside a sweep: i is the next rotation's column
    double z1 = 0.0;
    for (long long base = 0; base < total; base += kChunk) {
      const int cnt = int(min((long long)kChunk, total - base));
      __syncthreads(); // the last chunk consumed
      for (int t = tid; t < cnt; t += nt) buf[t] = rec[base + t];
      __syncthreads();
      if (row >= n) continue;
      for (int j = 0; j < cnt;) {
        if (!in) {
          const double2 h = buf[j++];
          i = int(h.x);
          lo = int(h.y);
          z1 = a[(i + 1) * ld + row];
          in = true;
          continue;
        }
        int avail = min(i - lo + 1, cnt - j);
        // Columns i .. i-3 are read before i+1 .. i-2 are written: in the sweep's own
        // order each column is read before it is written, so the values are the same.
        for (; avail >= 4; avail -= 4, j += 4, i -= 4) {
          double2 g[4];
          double z[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            g[q] = buf[j + q];
            z[q] = a[(i - q) * ld + row];
          }
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            a[(i - q + 1) * ld + row] = g[q].y * z[q] + g[q].x * z1;
            z1 = g[q].x * z[q] - g[q].y * z1;
          }
        }
        for (; avail > 0; --avail, ++j, --i) {
          const double2 g = buf[j];
          const double z0 = a[i * ld + row];
          a[(i + 1) * ld + row] = g.y * z0 + g.x * z1;
          z1 = g.x * z0 - g.y * z1;
        }
        if (i < lo) {
          a[lo * ld + row] = z1;
          in = false;
        }
      }
    }
    __syncthreads();
  } else {
    for (int k = tid; k < n; k += nt) {
      d[k] = wk[2 + k];
      e[k] = wk[2 + n + k];
    }
    __syncthreads();
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
          sCount[nxt] = r;
          sHi[nxt] = hi;
          sLo[nxt] = lo;
          if (r < 0) sFail = l + 1;
        }
      } else {
        const double* C = cs + cur * n;
        const double* Sv = sn + cur * n;
        const int hi = sHi[cur], lo = sLo[cur];
        for (int row = tid - 32; row < n; row += nt - 32) {
          double z1 = a[(hi + 1) * ld + row];
          for (int i = hi; i >= lo; --i) {
            const double z0 = a[i * ld + row], c = C[i], s = Sv[i];
            a[(i + 1) * ld + row] = s * z0 + c * z1;
            z1 = c * z0 - s * z1;
          }
          a[lo * ld + row] = z1;
        }
      }
      __syncthreads();
    }
  }

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
  if (prof && tid == 0) atomicAdd(prof + 3, (unsigned long long)(clock64() - clk0));
}

std::string shape(int n, int lda, long long strideA, int batch) {
  return "n " + std::to_string(n) + ", lda " + std::to_string(lda) + ", stride " + std::to_string(strideA) +
         ", batch " + std::to_string(batch);
}

// ev (optional): 4 events recorded around the three passes.
void launchSyev(int n, double* A, int lda, long long strideA, double* W, int* info, int batch, double* work,
                std::size_t lwork, cudaStream_t stream, unsigned long long* prof, cudaEvent_t* ev,
                int qlLanes = 0) {
  if (n < 1 || n > kSyevMaxN || lda < n || strideA < (long long)lda * n || batch < 0)
    throw GpuError("syevBatched: bad arguments (" + shape(n, lda, strideA, batch) + "; n must be 1.." +
                   std::to_string(kSyevMaxN) + ")");
  if (batch == 0) return;
  const std::size_t need = syevBatchedMinWorkspace(n, batch);
  if (!work || lwork < need || reinterpret_cast<std::uintptr_t>(work) % 16 != 0)
    throw GpuError("syevBatched: workspace of " + std::to_string(lwork) + " doubles" +
                   (work ? "" : " (null)") + " is too small or not 16-byte aligned; " + shape(n, lda, strideA, batch) +
                   " needs at least " + std::to_string(need));
  const long long S = (long long)(lwork / std::size_t(batch)) & ~1LL;
  const std::size_t shm1 = sizeof(double) * (std::size_t(n) * (n | 1) + 5 * std::size_t(n));
  // The QL pass: one matrix per block while the batch fits the GPU at once.
  int dev = 0, sms = 0;
  SPEX_CUDA(cudaGetDevice(&dev));
  SPEX_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int lanes = qlLanes > 0 ? qlLanes : batch <= 32 * sms ? 1 : 8;
  if (lanes != 1 && lanes != 2 && lanes != 4 && lanes != 8)
    throw GpuError("syevBatched: QL lanes " + std::to_string(lanes) + " (1, 2, 4 or 8)");
  const std::size_t shm2 = sizeof(double) * 2 * std::size_t(n) * lanes;
  const std::size_t shm3 = sizeof(double) * (((std::size_t(n) * n + 7 * n + 1) & ~std::size_t(1)) + 2 * kChunk);
  const int threads3 = std::max(64, (n + 31) / 32 * 32);
  SPEX_CUDA(cudaFuncSetAttribute(syevReduceKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm1)));
  SPEX_CUDA(cudaFuncSetAttribute(syevApplyKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm3)));
  if (ev) SPEX_CUDA(cudaEventRecord(ev[0], stream));
  syevReduceKernel<<<batch, kReduceThreads, shm1, stream>>>(n, A, lda, strideA, work, S, prof);
  SPEX_CUDA_LAUNCH("syevReduceKernel");
  if (ev) SPEX_CUDA(cudaEventRecord(ev[1], stream));
  switch (lanes) {
  case 1: syevQlKernel<1><<<batch, 1, shm2, stream>>>(n, batch, work, S, prof); break;
  case 2: syevQlKernel<2><<<(batch + 1) / 2, 2, shm2, stream>>>(n, batch, work, S, prof); break;
  case 4: syevQlKernel<4><<<(batch + 3) / 4, 4, shm2, stream>>>(n, batch, work, S, prof); break;
  default: syevQlKernel<8><<<(batch + 7) / 8, 8, shm2, stream>>>(n, batch, work, S, prof); break;
  }
  SPEX_CUDA_LAUNCH("syevQlKernel");
  if (ev) SPEX_CUDA(cudaEventRecord(ev[2], stream));
  syevApplyKernel<<<batch, threads3, shm3, stream>>>(n, A, lda, strideA, W, info, work, S, prof);
  SPEX_CUDA_LAUNCH("syevApplyKernel");
  if (ev) SPEX_CUDA(cudaEventRecord(ev[3], stream));
}

} // namespace

std::size_t syevBatchedMinWorkspace(int n, int batch) {
  if (n < 1 || batch < 1) return 0;
  return std::size_t(batch) * std::size_t(recordStart(n));
}

std::size_t syevBatchedWorkspace(int n, int batch, long long rotationsPerMatrix) {
  if (n < 1 || batch < 1) return 0;
  if (rotationsPerMatrix <= 0) rotationsPerMatrix = 2LL * n * n;
  // Entries: the rotations and a header per sweep (fewer sweeps than 4 n in practice).
  return std::size_t(batch) * std::size_t(recordStart(n) + 2 * (rotationsPerMatrix + 4LL * n));
}

void syevBatched(int n, double* A, int lda, long long strideA, double* W, int* info, int batch, double* work,
                 std::size_t lwork, cudaStream_t stream) {
  launchSyev(n, A, lda, strideA, W, info, batch, work, lwork, stream, nullptr, nullptr);
}

SyevProfile syevBatchedProfile(int n, double* A, int lda, long long strideA, double* W, int* info, int batch,
                               double* work, std::size_t lwork, int qlLanes) {
  unsigned long long* prof = nullptr;
  SPEX_CUDA(cudaMalloc(&prof, 8 * sizeof(unsigned long long)));
  cudaEvent_t ev[4] = {};
  SyevProfile out;
  try {
    SPEX_CUDA(cudaMemset(prof, 0, 8 * sizeof(unsigned long long)));
    for (cudaEvent_t& e : ev) SPEX_CUDA(cudaEventCreate(&e));
    launchSyev(n, A, lda, strideA, W, info, batch, work, lwork, nullptr, prof, ev, qlLanes);
    SPEX_CUDA(cudaEventSynchronize(ev[3]));
    float ms[3] = {};
    for (int k = 0; k < 3; ++k) SPEX_CUDA(cudaEventElapsedTime(&ms[k], ev[k], ev[k + 1]));
    unsigned long long h[8];
    SPEX_CUDA(cudaMemcpy(h, prof, sizeof h, cudaMemcpyDeviceToHost));
    const double nb = batch > 0 ? batch : 1;
    out.reduceSeconds = ms[0] * 1e-3;
    out.qlSeconds = ms[1] * 1e-3;
    out.applySeconds = ms[2] * 1e-3;
    out.seconds = out.reduceSeconds + out.qlSeconds + out.applySeconds;
    out.tridiagonalCycles = h[0] / nb;
    out.formQCycles = h[1] / nb;
    out.qlCycles = h[2] / nb;
    out.applyCycles = h[3] / nb;
    out.sweeps = h[4] / nb;
    out.rotations = h[5] / nb;
    out.fallbacks = (long long)h[6];
  } catch (...) {
    for (cudaEvent_t e : ev)
      if (e) cudaEventDestroy(e);
    cudaFree(prof);
    throw;
  }
  for (cudaEvent_t e : ev) cudaEventDestroy(e);
  cudaFree(prof);
  return out;
}

} // namespace spex::gpu
