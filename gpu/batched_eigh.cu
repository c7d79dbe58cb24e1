// syevBatched (batched_eigh.h) in three passes. Counts for n = 74 (docs/benchmarks.md,
// versions 9-11 and Issue 12, fifth round): the reduction is 2 x 72 steps of a
// matrix-vector product and a rank-1/rank-2 update (the fused kernel: 2 barriers a
// tridiagonalisation step; Q in registers, none); the QL iteration does ~1.05 n^2
// rotations whose scalar chain is serial, so it runs a thread per matrix and records
// the rotations; applying them is independent per row of Q.
#include "batched_eigh.h"
#include "eigh_bisect.cuh"
#include "eigh_reduce_warp.cuh"

#include "core/errors.h"
#include "kernels.h"

#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace spex::gpu {

namespace {

constexpr int kReduceThreads = 192; // two threads a row (or column) of the matrix-vector steps
constexpr int kApplyGroup = 4; // recorded sweeps applied together (pass 3)
constexpr int kApplyMaxThreads = ((kSyevMaxN + 31) / 32) * 32;
constexpr int kMaxQlIterations = 60; // per eigenvalue (LAPACK dsteqr allows 30 n in all)
constexpr double kEps = 2.220446049250313e-16;

// Workspace of one matrix (stride S doubles, even): [0] sweeps recorded, or -1 when
// the record overflowed; [1] QL failure (0 or l + 1); [2, 2 + n) d and [2 + n, 2 + 2n)
// e of the tridiagonal (pass 1); [2 + 2n, 2 + 3n) the eigenvalues (pass 2, unsorted);
// from recordStart(n) the record, n entries (double2) a sweep: entry i in [lo, hi] the
// rotation (c, s) acting on columns i, i + 1 (applied for i = hi down to lo), entry
// n - 1 the header (hi, lo); entries outside [lo, hi] are not written. The fixed
// stride lets pass 3 fetch a group of sweeps without parsing the ones before it.
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
// whole solver). The textbook step t = (d(i) - gg) s + 2 c bb, g' = c t - bb needs
// four dependent operations after 1/r; with s = f/r, c = g/r it is t = u/r with
// u = (d(i) - gg) f + 2 g bb, known before 1/r, so g' = (g u)(1/r)^2 - bb and
// p' = s t = (f u)(1/r)^2: from one rsqrt to the next the chain is (1/r)^2, g', f^2 + g^2.
// Nothing is branched on before the split test. (Issue 12, fourth round: the branch-free
// form took the QL of a 995-block batch from 1.38 to 1.19 ms on an H100; the shorter
// chain then gained nothing measurable, so the FP64 arithmetic is not what a rotation
// waits for. Agreement with LAPACK is unchanged.)
__device__ __forceinline__ double qlRotation(double ei, double di, double di1, double& s, double& c,
                                             double& p, double& g, double& dnew) {
  const double f = s * ei, bb = c * ei;
  const double q = fma(g, g, f * f);
  const double gg = di1 - p;
  const double u = fma(di - gg, f, g * (bb + bb));
  const double rr = rsqrt(q);
  const double r = q > 0.0 ? q * rr : 0.0;
  const double rr2 = rr * rr;
  const double gn = fma(g * u, rr2, -bb);
  const double pn = (f * u) * rr2;
  if (r == 0.0) return 0.0;
  s = f * rr;
  c = g * rr;
  p = pn;
  g = gn;
  dnew = gg + pn;
  return r;
}

// Q = H_0 ... H_{n-3} from the reflectors in the columns of a (pass 1's shared-memory
// form, 192 threads): in place, backwards (dorgtr 'L' -> dorg2r on Q' = a(1:n, 1:n)),
// two barriers a step. p: n doubles of scratch.
__device__ void formQShared(int n, double* a, int ld, const double* tau, double* p, int tid, int nt, int half,
                            int hr, int nh, unsigned pair) {
  // Q = H_0 ... H_{n-3} in place (dorgtr 'L' -> dorg2r on Q' = a(1:n, 1:n)), backwards:
  // Q'(i:, i+1:) = H_i Q'(i:, i+1:), then column i of Q' from v_i alone. Reflector i
  // stays in column i of a until step i - 1 overwrites it.
  for (int r = 1 + tid; r < n; r += nt) a[(n - 1) * ld + r] = r == n - 1 ? 1.0 : 0.0;
  __syncthreads();
  for (int i = n - 3; i >= 0; --i) {
    // p_c = v^T Q'(:, c), a lane pair per column (rows [rb, re) each), four
    // independent partial sums.
    const double* vi = a + i * ld;
    const int rm = (i + 2 + n) >> 1, rb = half ? rm : i + 2, re = half ? n : rm;
    for (int c = i + 2 + hr; c < n; c += nh) {
      const double* col = a + c * ld;
      double s0 = half ? 0.0 : col[i + 1], s1 = 0.0, s2 = 0.0, s3 = 0.0;
      int r = rb;
      for (; r + 3 < re; r += 4) {
        s0 += vi[r] * col[r];
        s1 += vi[r + 1] * col[r + 1];
        s2 += vi[r + 2] * col[r + 2];
        s3 += vi[r + 3] * col[r + 3];
      }
      for (; r < re; ++r) s0 += vi[r] * col[r];
      double sum = (s0 + s1) + (s2 + s3);
      sum += __shfl_xor_sync(pair, sum, 16);
      if (!half) p[c] = sum;
    }
    __syncthreads();
    // Q'(i+1:, i+2:) -= tau v p^T, a lane pair per row (columns [qb, qe) each), four
    // columns in flight; then column i + 1 from v alone.
    const double t = tau[i];
    const int qb = half ? rm : i + 2, qe = half ? n : rm;
    for (int r = 1 + hr; r < n; r += nh) {
      if (r >= i + 1) {
        const double vr = r == i + 1 ? 1.0 : vi[r];
        int c = qb;
        for (; c + 3 < qe; c += 4) {
          double x[4], pc[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            x[q] = a[(c + q) * ld + r];
            pc[q] = t * p[c + q];
          }
#pragma unroll
          for (int q = 0; q < 4; ++q) a[(c + q) * ld + r] = x[q] - pc[q] * vr;
        }
        for (; c < qe; ++c) a[c * ld + r] -= t * p[c] * vr;
      }
      if (!half) a[(i + 1) * ld + r] = r < i + 1 ? 0.0 : (r == i + 1 ? 1.0 - t : -t * vi[r]);
    }
    __syncthreads();
  }
  for (int r = tid; r < n; r += nt) {
    a[r] = r == 0 ? 1.0 : 0.0;
    if (r) a[r * ld] = 0.0;
  }
  __syncthreads();
}

// Pass 1: Householder tridiagonalisation and Q, one block per matrix. Column-major in
// shared memory with an odd leading dimension, so that a thread per row and a thread
// per column both walk without bank conflicts. Each row (or column) of a step is taken
// by a pair of lanes (j, j + 16 of a warp), each over half of the columns (rows), their
// partial dot products added by one shuffle: a step's serial loops are half as long (issue 12,
// fourth round).
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
  // Lanes j and j + 16 of a warp share a row (column): each half-warp then reads 16
  // consecutive rows of one column, free of bank conflicts.
  const int half = lane >> 4, hr = ((tid >> 5) << 4) + (lane & 15), nh = nt >> 1;
  const unsigned pair = (1u << lane) | (1u << (lane ^ 16));
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
    // p = tau A22 v, a lane pair per row (columns [cb, ce) each), four independent
    // partial sums.
    const int cm = (i + 2 + n) >> 1, cb = half ? cm : i + 1, ce = half ? n : cm;
    for (int r = i + 1 + hr; r < n; r += nh) {
      double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
      int c = cb;
      for (; c + 3 < ce; c += 4) {
        s0 += a[c * ld + r] * v[c];
        s1 += a[(c + 1) * ld + r] * v[c + 1];
        s2 += a[(c + 2) * ld + r] * v[c + 2];
        s3 += a[(c + 3) * ld + r] * v[c + 3];
      }
      for (; c < ce; ++c) s0 += a[c * ld + r] * v[c];
      double sum = (s0 + s1) + (s2 + s3);
      sum += __shfl_xor_sync(pair, sum, 16);
      if (!half) p[r] = t * sum;
    }
    __syncthreads();
    // A22 -= v w^T + w v^T with w = p - (tau/2)(p^T v) v; the reflector into column i.
    // A thread per row, four columns loaded before any is stored (shared-memory
    // latency, not arithmetic, is what a step costs).
    double k = 0.0;
    for (int r = i + 1 + lane; r < n; r += 32) k += p[r] * v[r];
    k = 0.5 * t * warpSum(k);
    if (t != 0.0)
      for (int r = i + 1 + hr; r < n; r += nh) {
        const double vr = v[r], wr = p[r] - k * vr;
        int c = cb;
        for (; c + 3 < ce; c += 4) {
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
        for (; c < ce; ++c) {
          const double vc = v[c], wc = p[c] - k * vc;
          a[c * ld + r] -= vr * wc + wr * vc;
        }
        if (!half && r >= i + 2) a[i * ld + r] = vr;
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

  formQShared(n, a, ld, tau, p, tid, nt, half, hr, nh, pair);
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

// Q = H_0 H_1 ... H_{n-3} in registers (n <= kTileMaxN; issue 12, fifth round): the
// 192 threads of pass 1 as a 12 x 16 grid, thread (tr, tc) holding Q's entries
// (tr + 12 k, tc + 16 l) for k in [K0, K0 + KN), l < kQCols. Every row of Q is
// e_r^T H_0 H_1 ... H_{n-3}, independent of the others: accumulated forwards,
// Q <- Q H_i: u = Q v by rows (partial sums over a thread's columns, reduced across the
// 16 lanes of a half-warp by shuffles), then Q -= tau u v^T. The reflectors are read
// from the columns of a (v_i(i + 1) = 1, v_i(r) = a(r, i) below), left untouched: no
// barrier at all; the rows go straight to A in global memory. Rows in three batches
// (k < 3, 3 <= k < 5, 5 <= k < 7) so that a batch's entries stay in registers at four
// blocks a multiprocessor (80 registers a thread).
constexpr int kQCols = 5;
constexpr int kTileMaxN = 80; // 16 kQCols, and <= 12 x 7 rows

__device__ __forceinline__ double halfWarpSum(double x) {
  for (int o = 8; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Q <- Q H_0 H_1 ... H_{n-3} on the KN rows a thread's half-warp holds (q[k][l]: column
// tc + 16 l): u = Q v by rows (partial sums over the thread's columns, reduced across
// the half-warp), then Q -= tau u v^T. Reflector i is column i of v (leading dimension
// ldv): v_i(i + 1) = 1, v_i(c) = v[i ldv + c] below, 0 above.
// kReverse: H_{n-3} first (Q^T's order; the bisection method's Z^T = V^T Q^T).
template <int KN, bool kReverse = false>
__device__ __forceinline__ void applyReflectorsToRows(int n, const double* v, int ldv, const double* tau, int tc,
                                                      double (&q)[KN][kQCols]) {
  for (int it = 0; it + 2 < n; ++it) {
    const int i = kReverse ? n - 3 - it : it;
    const double t = tau[i];
    double vc[kQCols];
#pragma unroll
    for (int l = 0; l < kQCols; ++l) {
      const int c = tc + 16 * l;
      vc[l] = c == i + 1 ? 1.0 : (c > i + 1 && c < n ? v[i * ldv + c] : 0.0);
    }
#pragma unroll
    for (int k = 0; k < KN; ++k) {
      double s = 0.0;
#pragma unroll
      for (int l = 0; l < kQCols; ++l) s = fma(q[k][l], vc[l], s);
      s = t * halfWarpSum(s);
#pragma unroll
      for (int l = 0; l < kQCols; ++l) q[k][l] -= s * vc[l];
    }
  }
}

template <int K0, int KN>
__device__ void formQTileRows(int n, const double* a, int ld, const double* tau, int tid, double* A, int lda) {
  const int lane = tid & 31, tc = lane & 15, tr = ((tid >> 5) << 1) | (lane >> 4);
  double q[KN][kQCols];
#pragma unroll
  for (int k = 0; k < KN; ++k)
#pragma unroll
    for (int l = 0; l < kQCols; ++l) q[k][l] = tr + 12 * (K0 + k) == tc + 16 * l ? 1.0 : 0.0;
  applyReflectorsToRows(n, a, ld, tau, tc, q);
#pragma unroll
  for (int k = 0; k < KN; ++k)
#pragma unroll
    for (int l = 0; l < kQCols; ++l) {
      const int r = tr + 12 * (K0 + k), c = tc + 16 * l;
      if (r < n && c < n) A[(long long)c * lda + r] = q[k][l];
    }
}

// Pass 1, fused (the default; issue 12, fifth round). Tridiagonalisation in two
// passes over the trailing matrix a step instead of three, and two barriers a step
// instead of three: step i's rank-2 update and step i + 1's matrix-vector product are
// one pass. Every warp first computes column i + 1 as step i's update leaves it (from
// a, v, p: a few entries a lane), hence reflector i + 1; then each pair of lanes
// updates its row of the trailing matrix (rows and columns >= i + 2) and accumulates
// the updated row against v_{i+1} at once. v and p are double-buffered. Entries are
// computed with syevReduceKernel's expressions; only the order of the dot products'
// additions differs. Q: in registers for n <= kTileMaxN (formQTileRows), else
// syevReduceKernel's shared-memory form (formQShared).
__global__ void __launch_bounds__(kReduceThreads, 4)
    syevReduceFusedKernel(int n, double* Ag, int lda, long long strideA, double* work, long long S,
                          unsigned long long* prof, int separateQ) {
  extern __shared__ double2 sh2[];
  double* sh = reinterpret_cast<double*>(sh2);
  const int ld = n | 1, n2 = (n + 1) & ~1;
  double* a = sh;
  double* d = a + ((n * ld + 1) & ~1);
  double* e = d + n2;
  double* tau = e + n2;
  double* v = tau + n2; // v_i and v_{i+1}, p_i and p_{i+1}: 16-byte aligned
  double* vn = v + n2;
  double* p = vn + n2;
  double* pn = p + n2;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31;
  const int half = lane >> 4, hr = ((tid >> 5) << 4) + (lane & 15), nh = nt >> 1;
  const unsigned pair = (1u << lane) | (1u << (lane ^ 16));
  double* A = Ag + (long long)blockIdx.x * strideA;
  long long clk0 = 0, clk1 = 0;
  if (prof && tid == 0) clk0 = clock64();

  for (int t = tid; t < n * n; t += nt) {
    const int c = t / n, r = t - c * n;
    a[c * ld + r] = r >= c ? A[(long long)c * lda + r] : A[(long long)r * lda + c];
  }
  __syncthreads();

  if (n >= 3) {
    // Reflector 0 from column 0, and p_0 = tau_0 A22 v_0 (as syevReduceKernel's step 0).
    double ss = 0.0;
    for (int r = 2 + lane; r < n; r += 32) ss += a[r] * a[r];
    ss = warpSum(ss);
    const double alpha = a[1];
    double t = 0.0, beta = alpha, scal = 0.0;
    if (ss > 0.0) {
      beta = -copysign(sqrt(alpha * alpha + ss), alpha);
      t = (beta - alpha) / beta;
      scal = 1.0 / (alpha - beta);
    }
    for (int r = 1 + tid; r < n; r += nt) v[r] = r == 1 ? 1.0 : a[r] * scal;
    if (tid == 0) {
      d[0] = a[0];
      e[0] = beta;
      tau[0] = t;
    }
    __syncthreads();
    const int cm = (2 + n) >> 1, cb = half ? cm : 1, ce = half ? n : cm;
    for (int r = 1 + hr; r < n; r += nh) {
      double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
      int c = cb;
      for (; c + 3 < ce; c += 4) {
        s0 += a[c * ld + r] * v[c];
        s1 += a[(c + 1) * ld + r] * v[c + 1];
        s2 += a[(c + 2) * ld + r] * v[c + 2];
        s3 += a[(c + 3) * ld + r] * v[c + 3];
      }
      for (; c < ce; ++c) s0 += a[c * ld + r] * v[c];
      double sum = (s0 + s1) + (s2 + s3);
      sum += __shfl_xor_sync(pair, sum, 16);
      if (!half) p[r] = t * sum;
    }
    __syncthreads();
  }
  for (int i = 0; i + 2 < n; ++i) {
    // State: v = v_i, p = p_i = tau_i A22 v_i (rows >= i + 1), d, e, tau up to i.
    const double t = tau[i];
    double k = 0.0;
    for (int r = i + 1 + lane; r < n; r += 32) k += p[r] * v[r];
    k = 0.5 * t * warpSum(k);
    if (i + 3 < n) {
      // Column j = i + 1 after step i's update, its reflector (every warp the same).
      const int j = i + 1;
      const double vj = v[j], wj = p[j] - k * vj;
      auto col = [&](int r) {
        const double vr = v[r], wr = p[r] - k * vr;
        return a[j * ld + r] - (vr * wj + wr * vj);
      };
      double ss = 0.0;
      for (int r = j + 2 + lane; r < n; r += 32) {
        const double x = col(r);
        ss += x * x;
      }
      ss = warpSum(ss);
      const double alpha = col(j + 1);
      double tn = 0.0, beta = alpha, scal = 0.0;
      if (ss > 0.0) {
        beta = -copysign(sqrt(alpha * alpha + ss), alpha);
        tn = (beta - alpha) / beta;
        scal = 1.0 / (alpha - beta);
      }
      for (int r = j + 1 + tid; r < n; r += nt) vn[r] = r == j + 1 ? 1.0 : col(r) * scal;
      if (tid == 0) {
        d[j] = col(j);
        e[j] = beta;
        tau[j] = tn;
      }
      __syncthreads();
      // Rows and columns >= i + 2: a -= v w^T + w v^T, and pn = tn * (updated a) vn; the
      // reflector v_i into column i. Columns in fours from an even one (v, p, vn read
      // two at a time).
      const int s0c = i + 2, cm = (s0c + n) >> 1, cb = half ? cm : s0c, ce = half ? n : cm;
      for (int r = s0c + hr; r < n; r += nh) {
        const double vr = v[r], wr = p[r] - k * vr;
        double acc[4] = {0.0, 0.0, 0.0, 0.0};
        int c = cb;
        if ((c & 1) && c < ce) {
          const double vc = v[c], wc = p[c] - k * vc;
          const double y = a[c * ld + r] - (vr * wc + wr * vc);
          a[c * ld + r] = y;
          acc[1] += y * vn[c];
          ++c;
        }
        for (; c + 3 < ce; c += 4) {
          double x[4], vc[4], pc[4], un[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) x[q] = a[(c + q) * ld + r];
          const double2 v01 = *reinterpret_cast<const double2*>(v + c), v23 = *reinterpret_cast<const double2*>(v + c + 2);
          const double2 p01 = *reinterpret_cast<const double2*>(p + c), p23 = *reinterpret_cast<const double2*>(p + c + 2);
          const double2 u01 = *reinterpret_cast<const double2*>(vn + c), u23 = *reinterpret_cast<const double2*>(vn + c + 2);
          vc[0] = v01.x, vc[1] = v01.y, vc[2] = v23.x, vc[3] = v23.y;
          pc[0] = p01.x, pc[1] = p01.y, pc[2] = p23.x, pc[3] = p23.y;
          un[0] = u01.x, un[1] = u01.y, un[2] = u23.x, un[3] = u23.y;
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const double wc = pc[q] - k * vc[q];
            const double y = x[q] - (vr * wc + wr * vc[q]);
            a[(c + q) * ld + r] = y;
            acc[q] += y * un[q];
          }
        }
        for (; c < ce; ++c) {
          const double vc = v[c], wc = p[c] - k * vc;
          const double y = a[c * ld + r] - (vr * wc + wr * vc);
          a[c * ld + r] = y;
          acc[0] += y * vn[c];
        }
        double sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        sum += __shfl_xor_sync(pair, sum, 16);
        if (!half) {
          pn[r] = tn * sum;
          a[i * ld + r] = vr;
        }
      }
      __syncthreads();
      double* tmp = v;
      v = vn;
      vn = tmp;
      tmp = p;
      p = pn;
      pn = tmp;
    } else {
      // The last step (i = n - 3): syevReduceKernel's update of rows and columns >= i + 1.
      const int cm = (i + 2 + n) >> 1, cb = half ? cm : i + 1, ce = half ? n : cm;
      for (int r = i + 1 + hr; r < n; r += nh) {
        const double vr = v[r], wr = p[r] - k * vr;
        for (int c = cb; c < ce; ++c) {
          const double vc = v[c], wc = p[c] - k * vc;
          a[c * ld + r] -= vr * wc + wr * vc;
        }
        if (!half && r >= i + 2) a[i * ld + r] = vr;
      }
      __syncthreads();
    }
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

  // Q: here in registers (n <= kTileMaxN), or by syevFormQKernel after this kernel
  // (separateQ: the reflectors go to A, tau to the eigenvalues' slot of the workspace),
  // or in shared memory (larger n).
  const bool tile = n <= kTileMaxN, inRegisters = tile && !separateQ;
  if (inRegisters) {
    formQTileRows<0, 3>(n, a, ld, tau, tid, A, lda);
    formQTileRows<3, 2>(n, a, ld, tau, tid, A, lda);
    formQTileRows<5, 2>(n, a, ld, tau, tid, A, lda);
  } else if (!tile) {
    formQShared(n, a, ld, tau, p, tid, nt, half, hr, nh, pair);
  }
  if (prof && tid == 0) {
    const long long clk2 = clock64();
    atomicAdd(prof + 0, (unsigned long long)(clk1 - clk0));
    atomicAdd(prof + 1, (unsigned long long)(clk2 - clk1));
  }
  if (!inRegisters)
    for (int t = tid; t < n * n; t += nt) {
      const int c = t / n, r = t - c * n;
      A[(long long)c * lda + r] = a[c * ld + r];
    }
  double* wk = work + (long long)blockIdx.x * S;
  if (tile && separateQ)
    for (int r = tid; r < n; r += nt) wk[2 + 2 * n + r] = tau[r];
  for (int r = tid; r < n; r += nt) {
    wk[2 + r] = d[r];
    wk[2 + n + r] = e[r];
  }
}


// Pass 1 by one warp a matrix (SyevReduce::Warp, n <= reducewarp::kMaxN; issue 12,
// ninth round; the code and why: eigh_reduce_warp.cuh). Leaves what
// syevReduceFusedKernel leaves with separateQ (reflectors in A, d, e and tau in the
// workspace), so pass 2 and 3 of either method follow unchanged. 32 threads and
// (n - 1)^2 + 4n doubles of shared memory a block: five blocks an SM at n = 74.
struct DeviceWarp {
  int l;
  __device__ __forceinline__ int lane() const { return l; }
  __device__ __forceinline__ double sum(double x) const { return warpSum(x); }
  __device__ __forceinline__ double bcast(double x, int src) const { return __shfl_sync(0xffffffffu, x, src); }
  __device__ __forceinline__ void sync() const { __syncwarp(); }
  __device__ __forceinline__ void copy8(double* dst, const double* src) const {
    __pipeline_memcpy_async(dst, src, sizeof(double));
  }
  __device__ __forceinline__ void copyWait() const {
    __pipeline_commit();
    __pipeline_wait_prior(0);
  }
};

__global__ void __launch_bounds__(32) syevReduceWarpKernel(int n, double* Ag, int lda, long long strideA, double* work,
                                                           long long S, unsigned long long* prof) {
  extern __shared__ double2 sh2[];
  long long clk0 = 0;
  if (prof && threadIdx.x == 0) clk0 = clock64();
  DeviceWarp w{int(threadIdx.x)};
  reducewarp::tridiagonalize(w, n, Ag + (long long)blockIdx.x * strideA, lda, work + (long long)blockIdx.x * S,
                             reinterpret_cast<double*>(sh2));
  if (prof && threadIdx.x == 0) atomicAdd(prof + 0, (unsigned long long)(clock64() - clk0));
}


// Q by its own kernel (the default where n <= 80; issue 12, fifth round): the
// reflectors syevReduceFusedKernel left in A (column i below row i + 1) and tau in the
// workspace; 256 threads as a 16 x 16 grid, thread (tr, tc) holding Q's entries
// (tr + 16 k, tc + 16 l), k, l < kQCols, accumulated forwards as in formQTileRows in
// one batch of rows: 100 registers a thread, two blocks a multiprocessor (at three, 80
// registers, it spilled and took 12.66 ms instead of 11.86 for a frame's reduction).
constexpr int kFormQThreads = 256;

__global__ void __launch_bounds__(kFormQThreads, 2)
    syevFormQKernel(int n, double* Ag, int lda, long long strideA, const double* __restrict__ work, long long S,
                    unsigned long long* prof) {
  extern __shared__ double2 sh2[];
  double* st = reinterpret_cast<double*>(sh2);
  const int ld = n | 1;
  double* tau = st + n * ld;
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31;
  const int tc = lane & 15, tr = ((tid >> 5) << 1) | (lane >> 4);
  double* A = Ag + (long long)blockIdx.x * strideA;
  const double* wk = work + (long long)blockIdx.x * S;
  long long clk0 = 0;
  if (prof && tid == 0) clk0 = clock64();
  for (int t = tid; t < n * n; t += nt) {
    const int c = t / n, r = t - c * n;
    if (r >= c + 2) st[c * ld + r] = A[(long long)c * lda + r];
  }
  for (int r = tid; r < n; r += nt) tau[r] = wk[2 + 2 * n + r];
  __syncthreads();
  double q[kQCols][kQCols];
#pragma unroll
  for (int k = 0; k < kQCols; ++k)
#pragma unroll
    for (int l = 0; l < kQCols; ++l) q[k][l] = tr + 16 * k == tc + 16 * l ? 1.0 : 0.0;
  applyReflectorsToRows(n, st, ld, tau, tc, q);
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kQCols; ++k)
#pragma unroll
    for (int l = 0; l < kQCols; ++l) {
      const int r = tr + 16 * k, c = tc + 16 * l;
      if (r < n && c < n) st[c * ld + r] = q[k][l];
    }
  __syncthreads();
  if (prof && tid == 0) atomicAdd(prof + 1, (unsigned long long)(clock64() - clk0));
  for (int t = tid; t < n * n; t += nt) {
    const int c = t / n, r = t - c * n;
    A[(long long)c * lda + r] = st[c * ld + r];
  }
}



// The bisection method (SyevMethod::Bisect; docs/benchmarks.md, Issue 12, eighth round;
// the per-thread code and why it is accurate: eigh_bisect.cuh). Workspace of a matrix
// from recordStart(n): X (n x n, element i of eigenvector c of T at X[i n + c]), then
// the per-thread scratch D+ and D- (n x n each, the same layout).
__host__ __device__ constexpr long long bisectWorkspace(int n) { return (recordStart(n) + 3LL * n * n + 1) & ~1LL; }

// Where syevSturmValuesKernel leaves the eigenvalues for syevBisectKernel: n doubles at
// the start of the D+ scratch (the first n entries of its row 0), which pass 2 reads into
// shared memory before any thread writes its D+.
__host__ __device__ constexpr long long valuesSlot(int n) { return recordStart(n) + (long long)n * n; }

// Matrices a block of syevSturmValuesKernel (n threads each, packed).
constexpr int kValuesMaxMats = 8;
constexpr int kValuesThreads = 256;
int valuesMatsPerBlock(int n) { return std::max(1, std::min(kValuesMaxMats, kValuesThreads / n)); }

// Pass 2a of the bisection method with SyevValues::DivisionFree or Newton
// (docs/benchmarks.md, Issue 12, ninth round; eigh_bisect.cuh): a thread per eigenvalue,
// `mats` (valuesMatsPerBlock) matrices a
// block packed n threads apart (3 of n = 74 in 224 threads: 222 lanes busy, where pass
// 2's 96 threads a matrix use 74). The tridiagonal split as pass 2 splits it (the same
// setup), scaled to ||T|| in [1, 2), eigenvalue j - s of row j's block by bisection on
// the division-free Sturm count (kNewton: Newton's steps once it is isolated), written
// unscaled to valuesSlot.
template <bool kNewton>
__global__ void __launch_bounds__(kValuesThreads) syevSturmValuesKernel(int n, int batch, int mats, double* work,
                                                                      long long S, unsigned long long* prof) {
  namespace bi = bisect;
  __shared__ bi::DiagE2 de[kValuesMaxMats][bi::kOrthoMaxN];
  __shared__ double d[kValuesMaxMats][bi::kOrthoMaxN], e[kValuesMaxMats][bi::kOrthoMaxN];
  __shared__ bi::Scalars sc[kValuesMaxMats];
  const int tid = threadIdx.x, m = tid / n, j = tid - m * n;
  const long long b = (long long)blockIdx.x * mats + m;
  const bool active = m < mats && b < batch;
  double* wk = work + b * S;
  long long clk0 = 0;
  if (prof && tid == 0) clk0 = clock64();
  if (active) {
    d[m][j] = wk[2 + j];
    e[m][j] = wk[2 + n + j];
  }
  __syncthreads();
  // The split as pass 2's (the same setup on the same d, e); its e^2 (de's place) unused.
  if (active && j == 0) bi::setup(n, d[m], e[m], &de[m][0].d, sc[m]);
  __syncthreads();
  const double scale = active ? bi::unitScale(sc[m].tnorm) : 1.0;
  if (active) bi::scaleRowDE(d[m], e[m], j, scale, de[m]);
  __syncthreads();
  if (active) bi::scaleRowE(e[m], j, scale);
  __syncthreads();
  int steps = 0;
  if (active) {
    int s, t;
    bi::blockOf(n, e[m], j, s, t);
    const double tn = sc[m].tnorm * scale;
    const double lam = kNewton ? bi::newtonEigenvalueDivisionFree(de[m], e[m], s, t, j - s, tn, &steps)
                               : bi::bisectEigenvalueDivisionFree(de[m], e[m], s, t, j - s, tn, &steps);
    wk[valuesSlot(n) + j] = lam * (1.0 / scale);
  }
  if (prof) {
    if (active) atomicAdd(prof + 4, (unsigned long long)steps);
    if (tid == 0) atomicAdd(prof + 14, (unsigned long long)(clock64() - clk0));
  }
}

// Pass 2's first steps, the same in both vector kernels: d and e from the workspace,
// the split (thread 0), each thread's block and eigenvalue (from the values kernel, or
// by quadsection on the ratio count), its rank into W, its cluster membership and
// shift. Returns the cluster rounds (the largest member index, -1 where none); steps:
// this thread's quadsection steps. The arrays are the kernel's shared memory.
template <bool kGivenValues>
__device__ __forceinline__ int bisectPrologue(int n, const double* wk, double* Wg, double* d, double* e, double* e2,
                                              double* lam, double* shift, int* rank, int* member, int* blkS,
                                              int* blkT, bisect::Scalars& sc, int& maxMember, int& steps) {
  namespace bi = bisect;
  const int tid = threadIdx.x, j = tid;
  for (int i = tid; i < n; i += blockDim.x) {
    d[i] = wk[2 + i];
    e[i] = wk[2 + n + i];
  }
  if (tid == 0) maxMember = -1;
  __syncthreads();
  if (tid == 0) bi::setup(n, d, e, e2, sc);
  __syncthreads();
  if (j < n) {
    int s, t;
    bi::blockOf(n, e, j, s, t);
    blkS[j] = s;
    blkT[j] = t;
    if (kGivenValues)
      lam[j] = wk[valuesSlot(n) + j];
    else
      lam[j] = bi::bisectEigenvalue(d, e, e2, s, t, j - s, sc, &steps);
  }
  __syncthreads();
  if (j < n) {
    rank[j] = bi::rankOf(n, lam, j);
    Wg[(long long)blockIdx.x * n + rank[j]] = lam[j];
    double sh;
    member[j] = bi::clusterMember(lam, blkS[j], blkT[j], j, sc, sh);
    shift[j] = sh;
    atomicMax(&maxMember, member[j]);
  }
  __syncthreads();
  return maxMember;
}

// Pass 2: a thread per eigenvalue (n <= kOrthoMaxN). Eigenvalues by bisection (the ratio
// form, quadsection) or, with kGivenValues, from syevSturmValuesKernel (valuesSlot), ranked
// ascending into W, the vectors of T into X (the cluster members in rounds, member m
// after members 0 .. m - 1 of its cluster).
template <bool kGivenValues>
__global__ void __launch_bounds__(96, 6) syevBisectKernel(int n, double* work, long long S, double* Wg,
                                                       unsigned long long* prof) {
  namespace bi = bisect;
  __shared__ double d[bi::kOrthoMaxN], e[bi::kOrthoMaxN], e2[bi::kOrthoMaxN], lam[bi::kOrthoMaxN],
      shift[bi::kOrthoMaxN];
  __shared__ int rank[bi::kOrthoMaxN], member[bi::kOrthoMaxN], blkS[bi::kOrthoMaxN], blkT[bi::kOrthoMaxN];
  __shared__ bi::Scalars sc;
  __shared__ int maxMember;
  const int tid = threadIdx.x, j = tid;
  double* wk = work + (long long)blockIdx.x * S;
  double* X = wk + recordStart(n);
  double* P = X + (long long)n * n;
  double* M = P + (long long)n * n;
  long long clk0 = 0;
  if (prof && tid == 0) clk0 = clock64();
  int steps = 0;
  const int rounds = bisectPrologue<kGivenValues>(n, wk, Wg, d, e, e2, lam, shift, rank, member, blkS, blkT, sc,
                                                  maxMember, steps);
  for (int m = -1; m <= rounds; ++m) {
    if (j < n && member[j] == m) {
      bi::twistedVector(d, e, e2, blkS[j], blkT[j], shift[j], sc, m >= 0, j, bi::Col{X, n, rank[j]},
                        bi::Col{P, n, j}, bi::Col{M, n, j}, rank, max(m, 0));
      // Rows outside the block are zero.
      for (int i = 0; i < n; ++i)
        if (i < blkS[j] || i > blkT[j]) X[(long long)i * n + rank[j]] = 0.0;
    }
    __syncthreads();
  }
  if (prof) {
    if (j < n) atomicAdd(prof + 4, (unsigned long long)steps);
    if (tid == 0) atomicAdd(prof + 2, (unsigned long long)(clock64() - clk0));
    if (tid == 0 && rounds > 0) atomicAdd(prof + 6, 1ull);
  }
}

// Pass 2 with its per-thread scratch in shared memory (SyevVectors::Shared;
// docs/benchmarks.md, Issue 12, ninth round, eighvec): syevBisectKernel but for the
// vectors, twistedVectorSlots on column j of an n x n shared array (element i at
// Sh[i n + j]: a warp's lanes on consecutive doubles) in place of D+ and D- in the
// workspace, x stored once (non-cluster). The same vectors to the bit. n^2 doubles of
// dynamic shared memory (43.8 KB at n = 74: 4 blocks an SM).
template <bool kGivenValues>
__global__ void __launch_bounds__(96, 4) syevBisectSharedKernel(int n, double* work, long long S, double* Wg,
                                                             unsigned long long* prof) {
  namespace bi = bisect;
  extern __shared__ double2 shv[];
  double* Sh = reinterpret_cast<double*>(shv);
  __shared__ double d[bi::kOrthoMaxN], e[bi::kOrthoMaxN], e2[bi::kOrthoMaxN], lam[bi::kOrthoMaxN],
      shift[bi::kOrthoMaxN];
  __shared__ int rank[bi::kOrthoMaxN], member[bi::kOrthoMaxN], blkS[bi::kOrthoMaxN], blkT[bi::kOrthoMaxN],
      col[bi::kOrthoMaxN];
  __shared__ bi::Scalars sc;
  __shared__ int maxMember;
  const int tid = threadIdx.x, j = tid;
  double* wk = work + (long long)blockIdx.x * S;
  double* X = wk + recordStart(n);
  long long clk0 = 0;
  if (prof && tid == 0) clk0 = clock64();
  int steps = 0;
  const int rounds = bisectPrologue<kGivenValues>(n, wk, Wg, d, e, e2, lam, shift, rank, member, blkS, blkT, sc,
                                                  maxMember, steps);
  // Cluster rounds: each member's x in a column of Sh that a thread of no cluster has
  // finished with (borrowedColumn; col[k] its column), or all of them in X.
  const int bc = rounds >= 0 && j < n ? bi::borrowedColumn(n, member, j) : -1;
  if (rounds >= 0 && j < n) col[j] = bc >= 0 ? bc : rank[j];
  for (int m = -1; m <= rounds; ++m) {
    if (j < n && member[j] == m) {
      if (m >= 0 && bc >= 0)
        bi::twistedVectorSlots(n, d, e, e2, blkS[j], blkT[j], shift[j], sc, true, j, bi::Col{Sh, n, bc},
                               bi::Col{Sh, n, j}, col, m);
      else
        bi::twistedVectorSlots(n, d, e, e2, blkS[j], blkT[j], shift[j], sc, m >= 0, j, bi::Col{X, n, rank[j]},
                               bi::Col{Sh, n, j}, col, max(m, 0));
    }
    // Only cluster rounds read other threads' columns.
    if (rounds >= 0) __syncthreads();
  }
  // The borrowed columns out to X.
  if (bc >= 0)
    for (int i = 0; i < n; ++i) X[(long long)i * n + rank[j]] = Sh[i * n + bc];
  if (prof) {
    if (j < n) atomicAdd(prof + 4, (unsigned long long)steps);
    if (tid == 0) atomicAdd(prof + 2, (unsigned long long)(clock64() - clk0));
    if (tid == 0 && rounds > 0) atomicAdd(prof + 6, 1ull);
  }
}

// Pass 3 of the bisection method, 256 threads a matrix: X (pass 2) orthonormalised by
// CholQR in shared memory, twice where the first Gram matrix is far from I
// (eigh_bisect.cuh), then Z = Q X by the register-tile
// form of syevFormQKernel run on Z^T = X^T H_{n-3} ... H_0 (the reflectors pass 1 left
// in A, tau in the workspace), written to A. info[b] = j + 1 where CholQR broke down.
__global__ void __launch_bounds__(bisect::kOrthoThreads, 2)
    syevOrthoFormKernel(int n, double* Ag, int lda, long long strideA, const double* __restrict__ work,
                        long long S, int* info, unsigned long long* prof) {
  namespace bi = bisect;
  extern __shared__ double2 sh2[];
  double* Xs = reinterpret_cast<double*>(sh2);
  const int ldx = n | 1, ld = n | 1;
  double* G = Xs + n * ldx;
  double* tauS = G + n * ld; // tau of the reflectors (after CholQR)
  __shared__ int fail;
  __shared__ unsigned long long offBits; // max |G - I| of the first Gram matrix (as bits: >= 0)
  const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31;
  const int tc = lane & 15, tr = ((tid >> 5) << 1) | (lane >> 4);
  double* A = Ag + (long long)blockIdx.x * strideA;
  const double* wk = work + (long long)blockIdx.x * S;
  const double* X = wk + recordStart(n);
  long long clk0 = 0;
  if (prof && tid == 0) clk0 = clock64();
  if (tid == 0) {
    fail = 0;
    offBits = 0;
  }
  for (int t = tid; t < n * n; t += nt) {
    const int i = t / n, c = t - i * n;
    Xs[c * ldx + i] = X[t];
  }
  __syncthreads();
  for (int pass = 0; pass < 2; ++pass) {
    const double off = bi::gramTile(n, Xs, ldx, G, ld, tid);
    if (pass == 0 && off > 0.0) atomicMax(&offBits, (unsigned long long)__double_as_longlong(off));
    __syncthreads();
    // The second pass only where the first Gram matrix was far from I (kSecondPass).
    if (pass == 1 && __longlong_as_double((long long)offBits) <= bi::kSecondPass) break;
    if (pass == 0 && prof && tid == 0 && __longlong_as_double((long long)offBits) > bi::kSecondPass)
      atomicAdd(prof + 5, 1ull);
    for (int j = 0; j < n; ++j) {
      bi::cholQrStep(n, G, ld, Xs, ldx, j, tid, &fail);
      __syncthreads();
    }
    bi::cholScale(n, G, ld, Xs, ldx, tid, nt);
    __syncthreads();
    if (__longlong_as_double((long long)offBits) <= bi::kSecondPass) break;
  }
  // The reflectors into G's place.
  for (int t = tid; t < n * n; t += nt) {
    const int c = t / n, r = t - c * n;
    if (r >= c + 2) G[c * ld + r] = A[(long long)c * lda + r];
  }
  for (int r = tid; r < n; r += nt) tauS[r] = wk[2 + 2 * n + r];
  __syncthreads();
  double q[kQCols][kQCols];
#pragma unroll
  for (int k = 0; k < kQCols; ++k)
#pragma unroll
    for (int l = 0; l < kQCols; ++l) {
      const int R = tr + 16 * k, C = tc + 16 * l;
      q[k][l] = R < n && C < n ? Xs[R * ldx + C] : 0.0;
    }
  applyReflectorsToRows<kQCols, true>(n, G, ld, tauS, tc, q);
#pragma unroll
  for (int k = 0; k < kQCols; ++k)
#pragma unroll
    for (int l = 0; l < kQCols; ++l) {
      const int R = tr + 16 * k, C = tc + 16 * l;
      if (R < n && C < n) A[(long long)R * lda + C] = q[k][l];
    }
  if (tid == 0) info[blockIdx.x] = fail;
  if (prof && tid == 0) atomicAdd(prof + 3, (unsigned long long)(clock64() - clk0));
}

// One double from global to shared memory without a register (cp.async, sm_80+; a plain
// copy below), and the wait for this thread's copies (a barrier must follow).
__device__ __forceinline__ void copyAsync8(double* dst, const double* src) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
               : "memory");
#else
  *dst = *src;
#endif
}
__device__ __forceinline__ void copyAsyncWait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\ncp.async.wait_all;\n" ::: "memory");
#endif
}

// The 4 lanes of a group's partial dot products summed (the order the host emulation
// of nsApplyReflectors uses: (p0 + p1) + (p2 + p3) on every lane).
struct GroupSum4 {
  __device__ __forceinline__ void operator()(double (&p)[1][2]) const {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      p[0][r] += __shfl_xor_sync(0xffffffffu, p[0][r], 1);
      p[0][r] += __shfl_xor_sync(0xffffffffu, p[0][r], 2);
    }
  }
};

// Pass 3 of the bisection method by Newton-Schulz (SyevOrtho::NewtonSchulz; the layout,
// thresholds and why: eigh_bisect.cuh), 160 threads a matrix, 2 blocks an SM (104 KB of
// shared memory each): X into shared memory, G = X^T X; while max |G - I| > kNsTol a
// Newton-Schulz step in place (or a CholQR pass where it is larger than kNsMax, or
// after kNsCholAfter steps), then the last step into registers (rows of Z^T), the
// reflectors into X's place, Z^T = X^T H_{n-3} ... H_0 in registers, written to A.
// prof + 5: matrices that took a CholQR pass; prof + 7: passes before the last step.
template <int NC>
__global__ void __launch_bounds__(bisect::kNsThreads, 2)
    syevOrthoNsKernel(int n, double* Ag, int lda, long long strideA, const double* __restrict__ work, long long S,
                      int* info, unsigned long long* prof) {
  namespace bi = bisect;
  extern __shared__ double2 sh2[];
  double* Xs = reinterpret_cast<double*>(sh2);
  double* G = Xs + 80 * bi::kNsLdx;
  double* tauS = G + 80 * bi::kNsLdx;
  __shared__ int fail;
  __shared__ unsigned long long offBits[2]; // max |G - I| (as bits: >= 0), by pass parity
  const int tid = threadIdx.x, nt = blockDim.x;
  const int q = tid & 3, g = tid >> 2;
  double* A = Ag + (long long)blockIdx.x * strideA;
  const double* wk = work + (long long)blockIdx.x * S;
  const double* X = wk + recordStart(n);
  long long clk0 = 0;
  if (prof && tid == 0) clk0 = clock64();
  // The reflectors are read after the orthogonalisation: to L2 now.
  for (int c = tid; c < n; c += nt)
    for (int r = 0; r < n; r += 16) asm volatile("prefetch.global.L2 [%0];" ::"l"(A + (long long)c * lda + r));
  if (tid == 0) {
    fail = 0;
    offBits[0] = 0;
  }
  // X into shared memory, its padding zero: copies in flight at once (cp.async), not one
  // HBM latency a row (call 1 of docs/benchmarks.md, eighns: the branchy loop of loads
  // and stores waited ~40 serialised loads a thread).
  for (int t = tid; t < 80 * 80; t += nt) {
    const int i = t / 80, c = t - i * 80;
    if (i < n && c < n)
      copyAsync8(Xs + c * bi::kNsLdx + i, X + i * n + c);
    else
      Xs[c * bi::kNsLdx + i] = 0.0;
  }
  copyAsyncWait();
  for (int r = tid; r < n; r += nt) tauS[r] = wk[2 + 2 * n + r];
  __syncthreads();
  // Phase stamps of thread 0 (shared memory: registers are at the limit).
  __shared__ long long clk[6];
  if (prof && tid == 0) {
    clk[0] = clk0;
    clk[1] = clock64();
  }
  double off = bi::nsGram<NC>(n, Xs, G, g, q);
  if (off > 0.0) atomicMax(&offBits[0], (unsigned long long)__double_as_longlong(off));
  __syncthreads();
  if (prof && tid == 0) clk[2] = clock64();
  double z[1][2][NC];
  bool chol = false;
  for (int pass = 0;; ++pass) {
    off = __longlong_as_double((long long)offBits[pass & 1]);
    if (off <= bi::kNsTol || pass >= bi::kNsMaxPasses) {
      if (prof && tid == 0) atomicAdd(prof + 7, (unsigned long long)pass);
      break;
    }
    if (tid == 0) offBits[(pass + 1) & 1] = 0;
    if (off > bi::kNsMax || pass >= bi::kNsCholAfter) {
      chol = true;
      for (int j = 0; j < n; ++j) {
        bi::cholQrStepAny(n, G, Xs, j, tid, nt, &fail);
        __syncthreads();
      }
      for (int c = tid >> 4; c < n; c += nt >> 4) {
        const double p = G[c * bi::kNsLdx + c];
        const double sc = p > 1e-20 ? 1.0 / sqrt(p) : 1.0;
        for (int r = tid & 15; r < n; r += 16) Xs[c * bi::kNsLdx + r] *= sc;
      }
    } else {
      bi::nsProduct<NC>(n, Xs, G, g, q, z[0]);
      __syncthreads();
      bi::nsStore<NC>(n, Xs, g, q, z[0]);
    }
    __syncthreads();
    off = bi::nsGram<NC>(n, Xs, G, g, q);
    if (off > 0.0) atomicMax(&offBits[(pass + 1) & 1], (unsigned long long)__double_as_longlong(off));
    __syncthreads();
  }
  if (prof && tid == 0 && chol) atomicAdd(prof + 5, 1ull);
  if (prof && tid == 0) clk[3] = clock64();
  bi::nsProduct<NC>(n, Xs, G, g, q, z[0]);
  __syncthreads();
  if (prof && tid == 0) clk[4] = clock64();
  // The reflectors into X's place: v_i(c), c < 80 (1 at i + 1, 0 elsewhere outside A's).
  // The reflectors' entries from L2 (prefetched at the start), copies in flight at once.
  double* V = Xs;
  for (int t = tid; t < (n - 2) * bi::kNsLdv; t += nt) {
    const int i = t / bi::kNsLdv, c = t - i * bi::kNsLdv;
    if (c > i + 1 && c < n)
      copyAsync8(V + t, A + (long long)i * lda + c);
    else
      V[t] = c == i + 1 ? 1.0 : 0.0;
  }
  copyAsyncWait();
  __syncthreads();
  if (prof && tid == 0) clk[5] = clock64();
  bi::nsApplyReflectors<1>(n, V, tauS, q, z, GroupSum4{});
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int R = g + bi::kNsGroups * r;
#pragma unroll
    for (int j = 0; j < NC; ++j) {
      const int c = q + 4 * j;
      if (R < n && c < n) A[(long long)R * lda + c] = z[0][r][j];
    }
  }
  if (tid == 0) info[blockIdx.x] = fail;
  if (prof && tid == 0) {
    const long long end = clock64();
    atomicAdd(prof + 3, (unsigned long long)(end - clk0));
    // Phases (thread 0): X in, Gram, passes, last step, reflectors in, apply and store.
    for (int k = 0; k < 5; ++k) atomicAdd(prof + 8 + k, (unsigned long long)(clk[k + 1] - clk[k]));
    atomicAdd(prof + 13, (unsigned long long)(end - clk[5]));
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
  const long long cap = (S - R0) / 2 / n; // sweeps the record holds
  long long sweeps = 0, rotations = 0;
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
    if (sweeps + 1 > cap) {
      overflow = true;
      break;
    }
    double2* row = rec + sweeps * n;
    double g = (D_(l + 1) - D_(l)) / (2.0 * E_(l));
    double r = hypot(g, 1.0);
    g = D_(m) - D_(l) + E_(l) / (g + copysign(r, g));
    double s = 1.0, c = 1.0, p = 0.0;
    int i = m - 1;
    bool split = false;
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
      row[i] = make_double2(c, s);
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
      row[n - 1] = make_double2(double(hi), double(lo));
      ++sweeps;
      rotations += hi - lo + 1;
    }
  }
  wk[0] = overflow ? -1.0 : double(sweeps);
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

// Pass 3's record path for one row of Q per thread: the recorded sweeps applied kG at
// a time (docs/benchmarks.md, Issue 12, fourth round). Sweep w's rotation at column i
// acts on columns i, i + 1; sweep w + 1's rotation at i + 1 only needs columns i + 1
// and i + 2 as sweep w leaves them, so stage k of a group (sweep w0 + k) runs one
// column behind stage k - 1 and takes its output straight from a register: a column
// of Q is read from shared memory once and written once per group instead of once per
// sweep, and the group runs as one stream of independent rotations per row. Every
// sweep of a group spans the group's range [L, B] with identity rotations (c, s) =
// (1, 0) outside its own [lo, hi] (an identity passes the carried column on exactly),
// so all stages step together; a stage of a sweep past the last is all identity.
// The group's rotations sit in shared memory as tab[(p + kG) * kG + k] for positions
// p in [-kG, n - 2 + kG] (the border positions are identities), loaded into registers
// by all threads while the group before runs, so the record's latency is hidden.
// The arithmetic per rotation and column is the scalar sweep's (explicit roundings),
// so every kG gives the same Q to the bit.
template <int kG>
__device__ __forceinline__ void applyRecordedSweeps(int n, double* a, int ld, const double2* __restrict__ rec,
                                                    int W, double2* tab, int tid, int nt) {
  const int row = tid;
  for (int t = tid; t < (n - 1 + 2 * kG) * kG; t += nt) tab[t] = make_double2(1.0, 0.0);
  // This thread's entries of a group's kG x n block of the record: (sweep k, column i).
  int fk[kG], fi[kG];
#pragma unroll
  for (int q = 0; q < kG; ++q) {
    const int f = tid + q * nt;
    fk[q] = f < kG * n ? f / n : kG;
    fi[q] = f < kG * n ? f - fk[q] * n : n;
  }
  double2 pv[kG], ph[kG]; // the entries and their sweeps' headers
  int hiK[kG], loK[kG];
  auto fetch = [&](int w0) {
#pragma unroll
    for (int k = 0; k < kG; ++k) {
      hiK[k] = -1;
      loK[k] = n;
      if (w0 + k < W) {
        const double2 h = rec[(long long)(w0 + k) * n + n - 1];
        hiK[k] = int(h.x);
        loK[k] = int(h.y);
      }
    }
#pragma unroll
    for (int q = 0; q < kG; ++q) {
      pv[q] = make_double2(1.0, 0.0);
      ph[q] = make_double2(-1.0, double(n));
      if (fk[q] < kG && fi[q] < n - 1 && w0 + fk[q] < W) {
        pv[q] = rec[(long long)(w0 + fk[q]) * n + fi[q]];
        ph[q] = rec[(long long)(w0 + fk[q]) * n + n - 1];
      }
    }
  };
  fetch(0);
  for (int w0 = 0; w0 < W; w0 += kG) {
    __syncthreads(); // the group before has read tab (and the borders are written)
    int L = n, B = -1;
#pragma unroll
    for (int k = 0; k < kG; ++k) {
      L = min(L, loK[k]);
      B = max(B, hiK[k]);
    }
#pragma unroll
    for (int q = 0; q < kG; ++q)
      if (fk[q] < kG && fi[q] < n - 1) {
        const bool in = fi[q] >= int(ph[q].y) && fi[q] <= int(ph[q].x);
        tab[(fi[q] + kG) * kG + fk[q]] = in ? pv[q] : make_double2(1.0, 0.0);
      }
    __syncthreads();
    if (w0 + kG < W) fetch(w0 + kG); // in flight while this group runs
    if (row >= n) continue;
    double carry[kG];
#pragma unroll
    for (int k = 0; k < kG; ++k) carry[k] = 0.0;
    // Stage 0 at column p0 (its first step only loads column B + 1 into its carry),
    // stage k at p0 + k; the last stage's output is column p0 + kG, final. Four steps
    // at a time, their columns read before any is written (a column is written kG
    // steps after it is read, so the values are the same): the 4 x kG rotations form
    // a wavefront whose critical path is 3 + kG rotations, not 4 kG (a step alone is
    // bound by the latency of its kG dependent FMAs).
    int p0 = B + 1;
    for (; p0 - 3 >= L - kG; p0 -= 4) {
      double in[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) in[u] = p0 - u >= L ? a[(p0 - u) * ld + row] : 0.0;
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const double2* t = tab + (p0 - u + kG) * kG;
#pragma unroll
        for (int k = 0; k < kG; ++k) {
          const double2 g = t[k * (kG + 1)];
          const double out = __fma_rn(g.y, in[u], __dmul_rn(g.x, carry[k]));
          carry[k] = __fma_rn(g.x, in[u], -__dmul_rn(g.y, carry[k]));
          in[u] = out;
        }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (p0 - u <= B - kG + 1) a[(p0 - u + kG) * ld + row] = in[u];
    }
    for (; p0 >= L - kG; --p0) {
      double in = p0 >= L ? a[p0 * ld + row] : 0.0;
      const double2* t = tab + (p0 + kG) * kG;
#pragma unroll
      for (int k = 0; k < kG; ++k) {
        const double2 g = t[k * (kG + 1)];
        const double out = __fma_rn(g.y, in, __dmul_rn(g.x, carry[k]));
        carry[k] = __fma_rn(g.x, in, -__dmul_rn(g.y, carry[k]));
        in = out;
      }
      if (p0 <= B - kG + 1) a[(p0 + kG) * ld + row] = in;
    }
  }
}

// Pass 3: Q from pass 1 (in A), the recorded rotations applied to its rows (a thread
// per row, applyRecordedSweeps), then the eigenvalues sorted ascending with their
// vectors. A matrix whose record overflowed runs the QL here: thread 0 computes sweep
// s + 1 while warps 1.. apply sweep s.
template <int kG>
__global__ void __launch_bounds__(kApplyMaxThreads, 2)
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
  double2* tab = reinterpret_cast<double2*>(sh + ((std::size_t(n) * n + 7 * n + 1) & ~std::size_t(1)));
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
    applyRecordedSweeps<kG>(n, a, ld, reinterpret_cast<const double2*>(wk + recordStart(n)), int(total), tab,
                            tid, nt);
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

// Pass 1 by syevReduceWarpKernel (n <= reducewarp::kMaxN).
void launchReduceWarp(int n, double* A, int lda, long long strideA, double* work, long long S, int batch,
                      cudaStream_t stream, unsigned long long* prof) {
  const std::size_t shm = sizeof(double) * std::size_t(reducewarp::sharedDoubles(n));
  SPEX_CUDA(cudaFuncSetAttribute(syevReduceWarpKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm)));
  SPEX_CUDA(cudaFuncSetAttribute(syevReduceWarpKernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 int(cudaSharedmemCarveoutMaxShared)));
  syevReduceWarpKernel<<<batch, 32, shm, stream>>>(n, A, lda, strideA, work, S, prof);
  SPEX_CUDA_LAUNCH("syevReduceWarpKernel");
}

// ev (optional): 5 events, 4 recorded around the three passes, the fifth between the
// bisection method's values kernel and pass 2 (where it runs).
void launchSyev(int n, double* A, int lda, long long strideA, double* W, int* info, int batch, double* work,
                std::size_t lwork, cudaStream_t stream, unsigned long long* prof, cudaEvent_t* ev,
                int qlLanes = 0, int applyGroup = 0, int reduce = 0, SyevMethod method = SyevMethod::Chain,
                SyevOrtho ortho = SyevOrtho::NewtonSchulz, SyevValues values = SyevValues::DivisionFree,
                SyevVectors vectors = SyevVectors::Shared) {
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
  if (reduce < 0 || reduce > 3)
    throw GpuError("syevBatched: reduce kernel " + std::to_string(reduce) + " (0, 1, 2 or 3)");
  if (method == SyevMethod::Bisect && n <= bisect::kOrthoMaxN) {
    // The bisection method (n <= 80; larger n run the chain below).
    if (S < bisectWorkspace(n))
      throw GpuError("syevBatched (bisect): workspace of " + std::to_string(lwork) + " doubles is too small; " +
                     shape(n, lda, strideA, batch) + " needs at least " +
                     std::to_string(syevBatchedBisectWorkspace(n, batch)));
    const std::size_t shm1 = sizeof(double) * (((std::size_t(n) * (n | 1) + 1) & ~std::size_t(1)) +
                                               7 * (std::size_t(n + 1) & ~std::size_t(1)));
    const bool ns = ortho == SyevOrtho::NewtonSchulz;
    const std::size_t shmO = ns ? sizeof(double) * (2 * 80 * std::size_t(bisect::kNsLdx) + 80)
                                : sizeof(double) * (2 * std::size_t(n) * (n | 1) + n);
    const bool warpReduce = reduce == 3; // n <= 80 here
    if (!warpReduce)
      SPEX_CUDA(cudaFuncSetAttribute(syevReduceFusedKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm1)));
    // Newton-Schulz: 19 columns a lane where they cover n (74: 5 % fewer FMAs in the
    // Gram and the step, 10 % fewer in the reflectors), else 20.
    auto nsKernel = n <= 4 * 19 ? syevOrthoNsKernel<19> : syevOrthoNsKernel<20>;
    SPEX_CUDA(cudaFuncSetAttribute(ns ? nsKernel : syevOrthoFormKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(shmO)));
    if (ev) SPEX_CUDA(cudaEventRecord(ev[0], stream));
    if (warpReduce)
      launchReduceWarp(n, A, lda, strideA, work, S, batch, stream, prof);
    else {
      syevReduceFusedKernel<<<batch, kReduceThreads, shm1, stream>>>(n, A, lda, strideA, work, S, prof, 1);
      SPEX_CUDA_LAUNCH("syevReduceFusedKernel");
    }
    if (ev) SPEX_CUDA(cudaEventRecord(ev[1], stream));
    if (values != SyevValues::Ratio) {
      const int mats = valuesMatsPerBlock(n);
      const dim3 grid((batch + mats - 1) / mats), block((mats * n + 31) / 32 * 32);
      if (values == SyevValues::Newton)
        syevSturmValuesKernel<true><<<grid, block, 0, stream>>>(n, batch, mats, work, S, prof);
      else
        syevSturmValuesKernel<false><<<grid, block, 0, stream>>>(n, batch, mats, work, S, prof);
      SPEX_CUDA_LAUNCH("syevSturmValuesKernel");
      if (ev) SPEX_CUDA(cudaEventRecord(ev[4], stream));
    } else {
      if (ev) SPEX_CUDA(cudaEventRecord(ev[4], stream));
    }
    const bool given = values != SyevValues::Ratio;
    if (vectors == SyevVectors::Shared) {
      const std::size_t shmV = sizeof(double) * std::size_t(n) * n;
      auto vk = given ? syevBisectSharedKernel<true> : syevBisectSharedKernel<false>;
      SPEX_CUDA(cudaFuncSetAttribute(vk, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shmV)));
      vk<<<batch, (n + 31) / 32 * 32, shmV, stream>>>(n, work, S, W, prof);
      SPEX_CUDA_LAUNCH("syevBisectSharedKernel");
    } else {
      if (given)
        syevBisectKernel<true><<<batch, (n + 31) / 32 * 32, 0, stream>>>(n, work, S, W, prof);
      else
        syevBisectKernel<false><<<batch, (n + 31) / 32 * 32, 0, stream>>>(n, work, S, W, prof);
      SPEX_CUDA_LAUNCH("syevBisectKernel");
    }
    if (ev) SPEX_CUDA(cudaEventRecord(ev[2], stream));
    if (ns) {
      nsKernel<<<batch, bisect::kNsThreads, shmO, stream>>>(n, A, lda, strideA, work, S, info, prof);
      SPEX_CUDA_LAUNCH("syevOrthoNsKernel");
    } else {
      syevOrthoFormKernel<<<batch, bisect::kOrthoThreads, shmO, stream>>>(n, A, lda, strideA, work, S, info, prof);
      SPEX_CUDA_LAUNCH("syevOrthoFormKernel");
    }
    if (ev) SPEX_CUDA(cudaEventRecord(ev[3], stream));
    return;
  }
  // Pass 1 (docs/benchmarks.md, Issue 12, fifth round): 0 the fused kernel, then Q by
  // syevFormQKernel where n <= 80; 2 the fused kernel forming Q itself (in registers
  // where n <= 80); 1 the three-pass kernel of the fourth round; 3 (ninth round) the
  // one-warp kernel, then Q by syevFormQKernel, where n <= 80 (else as 0).
  if (reduce == 3 && n > reducewarp::kMaxN) reduce = 0;
  const bool warpReduce = reduce == 3;
  const bool fused = reduce != 1;
  const bool separateQ = (reduce == 0 || warpReduce) && n <= kTileMaxN;
  const std::size_t shmQ = sizeof(double) * (std::size_t(n) * (n | 1) + n);
  const std::size_t n2 = std::size_t(n + 1) & ~std::size_t(1);
  const std::size_t shm1 = fused ? sizeof(double) * (((std::size_t(n) * (n | 1) + 1) & ~std::size_t(1)) + 7 * n2)
                                 : sizeof(double) * (std::size_t(n) * (n | 1) + 5 * std::size_t(n));
  // The QL pass: one matrix per block while the batch fits the GPU at once, else 32
  // (a warp's lanes) per block (docs/benchmarks.md, Issue 12, fourth round).
  int dev = 0, sms = 0;
  SPEX_CUDA(cudaGetDevice(&dev));
  SPEX_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int lanes = qlLanes > 0 ? qlLanes : batch <= 32 * sms ? 1 : 32;
  if (lanes != 1 && lanes != 2 && lanes != 4 && lanes != 8 && lanes != 16 && lanes != 32)
    throw GpuError("syevBatched: QL lanes " + std::to_string(lanes) + " (1, 2, 4, 8, 16 or 32)");
  const std::size_t shm2 = sizeof(double) * 2 * std::size_t(n) * lanes;
  const int group = applyGroup > 0 ? applyGroup : kApplyGroup;
  if (group != 1 && group != 4)
    throw GpuError("syevBatched: sweeps per group " + std::to_string(group) + " (1 or 4)");
  const std::size_t shm3 = sizeof(double) * (((std::size_t(n) * n + 7 * n + 1) & ~std::size_t(1)) +
                                             2 * std::size_t(n - 1 + 2 * group) * group);
  const int threads3 = std::max(64, (n + 31) / 32 * 32);
  auto applyKernel = group == 1 ? syevApplyKernel<1> : syevApplyKernel<4>;
  if (warpReduce) {
  } else if (fused)
    SPEX_CUDA(cudaFuncSetAttribute(syevReduceFusedKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm1)));
  else
    SPEX_CUDA(cudaFuncSetAttribute(syevReduceKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm1)));
  if (separateQ)
    SPEX_CUDA(cudaFuncSetAttribute(syevFormQKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shmQ)));
  SPEX_CUDA(cudaFuncSetAttribute(applyKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm3)));
  if (ev) SPEX_CUDA(cudaEventRecord(ev[0], stream));
  if (warpReduce) {
    launchReduceWarp(n, A, lda, strideA, work, S, batch, stream, prof);
  } else if (fused) {
    syevReduceFusedKernel<<<batch, kReduceThreads, shm1, stream>>>(n, A, lda, strideA, work, S, prof,
                                                                   separateQ ? 1 : 0);
    SPEX_CUDA_LAUNCH("syevReduceFusedKernel");
  } else {
    syevReduceKernel<<<batch, kReduceThreads, shm1, stream>>>(n, A, lda, strideA, work, S, prof);
    SPEX_CUDA_LAUNCH("syevReduceKernel");
  }
  if (separateQ) {
    syevFormQKernel<<<batch, kFormQThreads, shmQ, stream>>>(n, A, lda, strideA, work, S, prof);
    SPEX_CUDA_LAUNCH("syevFormQKernel");
  }
  if (ev) SPEX_CUDA(cudaEventRecord(ev[1], stream));
  switch (lanes) {
  case 1: syevQlKernel<1><<<batch, 1, shm2, stream>>>(n, batch, work, S, prof); break;
  case 2: syevQlKernel<2><<<(batch + 1) / 2, 2, shm2, stream>>>(n, batch, work, S, prof); break;
  case 4: syevQlKernel<4><<<(batch + 3) / 4, 4, shm2, stream>>>(n, batch, work, S, prof); break;
  case 8: syevQlKernel<8><<<(batch + 7) / 8, 8, shm2, stream>>>(n, batch, work, S, prof); break;
  case 16: syevQlKernel<16><<<(batch + 15) / 16, 16, shm2, stream>>>(n, batch, work, S, prof); break;
  default: syevQlKernel<32><<<(batch + 31) / 32, 32, shm2, stream>>>(n, batch, work, S, prof); break;
  }
  SPEX_CUDA_LAUNCH("syevQlKernel");
  if (ev) SPEX_CUDA(cudaEventRecord(ev[2], stream));
  applyKernel<<<batch, threads3, shm3, stream>>>(n, A, lda, strideA, W, info, work, S, prof);
  SPEX_CUDA_LAUNCH("syevApplyKernel");
  if (ev) SPEX_CUDA(cudaEventRecord(ev[3], stream));
}

} // namespace

std::size_t syevBatchedMinWorkspace(int n, int batch) {
  if (n < 1 || batch < 1) return 0;
  return std::size_t(batch) * std::size_t(recordStart(n));
}

std::size_t syevBatchedBisectWorkspace(int n, int batch) {
  if (n < 1 || batch < 1) return 0;
  return std::size_t(batch) * std::size_t(bisectWorkspace(n));
}

std::size_t syevBatchedWorkspace(int n, int batch, long long sweepsPerMatrix) {
  if (n < 1 || batch < 1) return 0;
  if (sweepsPerMatrix <= 0) sweepsPerMatrix = 3LL * n;
  // n entries of two doubles a sweep (docs/benchmarks.md: 2.03 n sweeps on average for
  // random SPD matrices of n = 74).
  return std::size_t(batch) * std::size_t(recordStart(n) + 2 * sweepsPerMatrix * n);
}

void syevBatched(int n, double* A, int lda, long long strideA, double* W, int* info, int batch, double* work,
                 std::size_t lwork, cudaStream_t stream, SyevMethod method, SyevOrtho ortho,
                 SyevValues values, SyevReduce reduce, SyevVectors vectors) {
  launchSyev(n, A, lda, strideA, W, info, batch, work, lwork, stream, nullptr, nullptr, 0, 0,
             reduce == SyevReduce::Warp ? 3 : 0, method, ortho, values, vectors);
}

SyevProfile syevBatchedProfile(int n, double* A, int lda, long long strideA, double* W, int* info, int batch,
                               double* work, std::size_t lwork, int qlLanes, int applyGroup, int reduce,
                               SyevMethod method, SyevOrtho ortho, SyevValues values, SyevVectors vectors) {
  unsigned long long* prof = nullptr;
  SPEX_CUDA(cudaMalloc(&prof, 16 * sizeof(unsigned long long)));
  cudaEvent_t ev[5] = {};
  SyevProfile out;
  try {
    SPEX_CUDA(cudaMemset(prof, 0, 16 * sizeof(unsigned long long)));
    for (cudaEvent_t& e : ev) SPEX_CUDA(cudaEventCreate(&e));
    launchSyev(n, A, lda, strideA, W, info, batch, work, lwork, nullptr, prof, ev, qlLanes, applyGroup, reduce,
               method, ortho, values, vectors);
    SPEX_CUDA(cudaEventSynchronize(ev[3]));
    float ms[3] = {};
    for (int k = 0; k < 3; ++k) SPEX_CUDA(cudaEventElapsedTime(&ms[k], ev[k], ev[k + 1]));
    unsigned long long h[16];
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
    out.orthoPasses = h[7] / nb;
    for (int k = 0; k < 6; ++k) out.orthoPhaseCycles[k] = h[8 + k] / nb;
    // The bisection method's values kernel (where it ran): its share of pass 2, and
    // thread 0's cycles a block of valuesMatsPerBlock(n) matrices.
    const bool valuesKernel = method == SyevMethod::Bisect && n <= bisect::kOrthoMaxN &&
                              values != SyevValues::Ratio && batch > 0;
    if (valuesKernel) {
      float mv = 0;
      SPEX_CUDA(cudaEventElapsedTime(&mv, ev[1], ev[4]));
      out.valuesSeconds = mv * 1e-3;
      const int mats = valuesMatsPerBlock(n);
      out.valuesCycles = double(h[14]) / double((batch + mats - 1) / mats);
    }
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
