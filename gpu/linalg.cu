// Batched dense linear algebra shaped for the patch systems (EXTRACTION.md §4.3-§4.6):
// inverses of the 74 x 74 diagonal blocks of the Cholesky factor (the rest of L^-1 is
// built by batched GEMMs on the host side), the deconvolved flux f = L^-T L^-1 y, and
// the signal decorrelation: a shared-memory parallel Jacobi eigensolver per fiber
// block C_s of iCov^-1, Q_s = C_s^-1/2 (B&S eqs 17-19), R_s = Q_s / s, ivar = s^2,
// flux = R_s f_s and the resolution diagonals, written straight into the frame.
#include "kernels.h"

#include <cstddef>

namespace spex::gpu {

namespace {

// Where a diagonal block's inverse goes (batched_cholesky.h DiagInverses).
struct DiagTarget {
  double* p;
  long long ld, step, stride;
};

// Xs = Ls^-1 for a lower-triangular nb x nb Ls, both row-major in shared memory.
// Column j of the inverse is independent of the others: thread j runs forward
// substitution for it (broadcast reads of Ls, consecutive banks in Xs). Only the
// lower triangle of Xs is written.
__device__ void invertLowerShared(const double* Ls, double* Xs, int nb) {
  for (int j = threadIdx.x; j < nb; j += blockDim.x) {
    Xs[j * nb + j] = 1.0 / Ls[j * nb + j];
    for (int i = j + 1; i < nb; ++i) {
      double s = 0.0;
      for (int m = j; m < i; ++m) s += Ls[i * nb + m] * Xs[m * nb + j];
      Xs[i * nb + j] = -s / Ls[i * nb + i];
    }
  }
}

// X_kk = L_kk^-1 for every diagonal block k of every patch; one block per (k, patch).
__global__ void triInvDiagKernel(BatchView b, DiagTarget d) {
  extern __shared__ double sh[];
  const int k = blockIdx.x, p = blockIdx.y, nb = b.nb, n = b.n;
  double* Ls = sh;
  double* Xs = sh + nb * nb;
  const double* A = b.A + (std::size_t)p * n * n + (std::size_t)k * nb * (n + 1);
  double* X = d.p + p * d.stride + k * d.step;
  for (int t = threadIdx.x; t < nb * nb; t += blockDim.x) {
    const int c = t / nb, r = t % nb; // column-major walk: coalesced global reads
    Ls[r * nb + c] = r >= c ? A[r + (std::size_t)c * n] : 0.0;
  }
  __syncthreads();
  invertLowerShared(Ls, Xs, nb);
  __syncthreads();
  for (int t = threadIdx.x; t < nb * nb; t += blockDim.x) {
    const int c = t / nb, r = t % nb;
    X[r + (std::size_t)c * d.ld] = r >= c ? Xs[r * nb + c] : 0.0; // upper stays zero for GEMMs
  }
}

// Blocked Cholesky, step k (cuda_engine.cpp launchBatch): factor the diagonal block
// A_kk = L_kk L_kk^T in shared memory (right-looking, one column per step), write L_kk
// into A and X_kk = L_kk^-1 into X (the first block of L^-1's diagonal, so the inverse
// needs no separate pass), one thread block per patch. A pivot that is not positive
// (or NaN) is a non-SPD patch: info = its global column + 1, like potrf, and the
// factorisation goes on with a unit pivot so nothing turns NaN.
__global__ void cholDiagKernel(BatchView b, int k, DiagTarget d) {
  extern __shared__ double sh[];
  __shared__ int bad;
  const int p = blockIdx.x, nb = b.nb, n = b.n;
  double* Ls = sh; // row-major
  double* Xs = sh + nb * nb;
  double* A = b.A + (std::size_t)p * n * n + (std::size_t)k * nb * (n + 1);
  double* X = d.p + p * d.stride + k * d.step;
  if (threadIdx.x == 0) bad = 0;
  for (int t = threadIdx.x; t < nb * nb; t += blockDim.x) {
    const int c = t / nb, r = t % nb;
    Ls[r * nb + c] = r >= c ? A[r + (std::size_t)c * n] : 0.0;
  }
  __syncthreads();
  for (int j = 0; j < nb; ++j) {
    if (threadIdx.x == 0) {
      double d = Ls[j * nb + j];
      if (!(d > 0.0)) {
        if (!bad) bad = j + 1;
        d = 1.0;
      }
      Ls[j * nb + j] = sqrt(d);
    }
    __syncthreads();
    const double rjj = 1.0 / Ls[j * nb + j];
    for (int i = j + 1 + threadIdx.x; i < nb; i += blockDim.x) Ls[i * nb + j] *= rjj;
    __syncthreads();
    // Trailing lower triangle, a row per warp, the row's columns over the lanes (no
    // integer division, no idle upper half).
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int r = j + 1 + warp; r < nb; r += nw) {
      const double lrj = Ls[r * nb + j];
      for (int c = j + 1 + lane; c <= r; c += 32) Ls[r * nb + c] -= lrj * Ls[c * nb + j];
    }
    __syncthreads();
  }
  invertLowerShared(Ls, Xs, nb);
  __syncthreads();
  for (int t = threadIdx.x; t < nb * nb; t += blockDim.x) {
    const int c = t / nb, r = t % nb;
    if (r >= c) A[r + (std::size_t)c * n] = Ls[r * nb + c];
    X[r + (std::size_t)c * d.ld] = r >= c ? Xs[r * nb + c] : 0.0; // upper stays zero for GEMMs
  }
  if (threadIdx.x == 0 && bad && b.info[p] == 0) b.info[p] = k * nb + bad;
}

// Block column k of the blocked Cholesky in one launch (batched_cholesky.h
// CholeskyKernel::fused and ::tiled), one thread block per patch: factor A_kk =
// L_kk L_kk^T in shared memory together with X_kk = L_kk^-1, then L_ik = A_ik L_kk^-T
// for the M rows of the panel below, nb rows at a time staged through the factor's
// buffer, written back into A (no scratch, no copy). Shared buffers row-major with an
// odd leading dimension (no bank conflicts down a column). Info and the unit pivot of
// a non-positive one as cholDiagKernel. nb <= kFusedMaxNb.
//
// Tiled = false (fused): a right-looking sweep of nb steps over the whole block, two
// barriers a step: at step j row j of the inverse is finished, X(j, 0:j) = Y(j, 0:j) /
// L_jj, and the rows below take Y(i, 0:j) -= L_ij X(j, 0:j) beside the trailing update
// (Y starts as the identity), so no separate triangular inversion.
//
// Tiled = true: the same factorisation blocked by kTile columns, four barriers a tile.
// (1) Warp 0 factors the tile's diagonal sub-block S = W^-1 W^-T in registers (lane r
// holds row r of S and of the identity beside it; the pivot chain runs on shuffles, no
// barrier), giving L_JJ and W = L_JJ^-1, the diagonal sub-block of X. (2) Every
// thread: the tile's rows of X, X_J(:, 0:c0) = W Y_J(:, 0:c0), and the sub-panel
// below, L_IJ = A_IJ W^T (computed into registers, then written). (3) Every row r
// below the tile, a pair of rows per warp and its columns over the lanes: Y(r, 0:c0+s)
// -= L(r, J) X_J and the trailing lower triangle A(r, c0+s:r) -= L(r, J) L(c, J)^T,
// each an s-long dot product. Same arithmetic as the sweep, regrouped
// (docs/benchmarks.md, "Cholesky latency (cholwarp)").
constexpr int kFusedMaxNb = 80; // the panel's register tile: 16 x 16 threads, 5 x 5 each
constexpr int kFusedThreads = 256;
constexpr int kTile = 16;    // columns of a tile (the warp's sub-block)
constexpr int kTileOut = 4;  // outputs of step (2) per thread
static_assert(kTile * (kFusedMaxNb - kTile) <= kTileOut * kFusedThreads, "step (2) outputs per thread");
constexpr unsigned kFullWarp = 0xffffffffu;

// S (row-major, leading dimension ld) = the R x C block at G (column-major, leading
// dimension n), only its lower triangle when Lower (zeros above), kStageDepth global
// loads in flight per thread before the first shared store (a loop of one load and
// one store waits a global latency per element: 22 of them a thread for 74 x 74).
constexpr int kStageDepth = 8;
template <bool Lower>
__device__ void stageBlock(double* S, int ld, const double* G, int n, int R, int C, int tid) {
  const int total = R * C;
  for (int t0 = tid; t0 < total; t0 += kStageDepth * kFusedThreads) {
    double v[kStageDepth];
#pragma unroll
    for (int u = 0; u < kStageDepth; ++u) {
      const int t = t0 + u * kFusedThreads, c = t / R, r = t % R; // column-major walk: coalesced
      v[u] = t < total && (!Lower || r >= c) ? G[r + (std::size_t)c * n] : 0.0;
    }
#pragma unroll
    for (int u = 0; u < kStageDepth; ++u) {
      const int t = t0 + u * kFusedThreads, c = t / R, r = t % R;
      if (t < total) S[r * ld + c] = v[u];
    }
  }
}

// Both variants compiled for two 256-thread blocks an SM (their 88 KB of shared memory
// allow two; the sweep needs 128 registers, 137 when its code is shared with the tiles
// and the register count is left free, which allows only one block an SM).
template <bool Tiled>
__global__ void __launch_bounds__(kFusedThreads, 2) cholColumnFusedKernel(BatchView b, int k, int M, DiagTarget d) {
  extern __shared__ double sh[];
  const int p = blockIdx.x, nb = b.nb, n = b.n, ld = nb | 1, tid = threadIdx.x, nt = blockDim.x;
  double* Ls = sh;           // A_kk, then L_kk (lower), then panel chunks
  double* Xs = sh + nb * ld; // Y, then L_kk^-1 (upper triangle zero)
  double* A = b.A + (std::size_t)p * n * n + (std::size_t)k * nb * (n + 1);
  double* X = d.p + p * d.stride + k * d.step;
  if constexpr (Tiled) {
    stageBlock<true>(Ls, ld, A, n, nb, nb, tid);
    for (int t = tid; t < nb * nb; t += nt) {
      const int r = t / nb, c = t % nb;
      Xs[r * ld + c] = r == c ? 1.0 : 0.0;
    }
  } else {
    for (int t = tid; t < nb * nb; t += nt) {
      const int c = t / nb, r = t % nb; // column-major walk: coalesced global reads
      Ls[r * ld + c] = r >= c ? A[r + (std::size_t)c * n] : 0.0;
      Xs[r * ld + c] = r == c ? 1.0 : 0.0;
    }
  }
  __syncthreads();
  int bad = 0; // thread 0's record of the first non-positive pivot
  const int lane = tid & 31, warp = tid >> 5, nw = nt >> 5;
  if constexpr (Tiled) {
    for (int c0 = 0; c0 < nb; c0 += kTile) {
      const int sb = min(kTile, nb - c0), r0 = c0 + sb, below = nb - r0;
      // (1) The diagonal sub-block and its inverse, lane r on row c0 + r.
      if (warp == 0) {
        double a[kTile], y[kTile];
        const int r = lane;
#pragma unroll
        for (int q = 0; q < kTile; ++q) {
          a[q] = (r < sb && q <= r) ? Ls[(c0 + r) * ld + c0 + q] : 0.0;
          y[q] = q == r ? 1.0 : 0.0;
        }
#pragma unroll
        for (int j = 0; j < kTile; ++j) {
          if (j >= sb) break; // the same on every lane
          double dj = __shfl_sync(kFullWarp, a[j], j);
          if (!(dj > 0.0)) {
            if (!bad) bad = c0 + j + 1;
            dj = 1.0;
          }
          // One reciprocal square root on the chain (<= 1 ulp), the pivot from it.
          const double rj = rsqrt(dj), sj = dj * rj;
          if (r == j) {
            a[j] = sj;
#pragma unroll
            for (int q = 0; q <= j; ++q) y[q] *= rj;
          } else if (r > j) {
            a[j] *= rj;
          }
          const double lrj = r > j ? a[j] : 0.0; // L(r, j) below the pivot, else nothing to do
#pragma unroll
          for (int c = j + 1; c < kTile; ++c) a[c] -= lrj * __shfl_sync(kFullWarp, a[j], c);
#pragma unroll
          for (int q = 0; q <= j; ++q) y[q] -= lrj * __shfl_sync(kFullWarp, y[q], j);
        }
        if (r < sb) {
#pragma unroll
          for (int q = 0; q < kTile; ++q)
            if (q <= r) {
              Ls[(c0 + r) * ld + c0 + q] = a[q];
              Xs[(c0 + r) * ld + c0 + q] = y[q];
            }
        }
      }
      __syncthreads();
      // (2) X_J(:, 0:c0) = W Y_J(:, 0:c0) and L_IJ = A_IJ W^T (W's upper triangle is zero).
      const int nout = sb * (c0 + below);
      double out[kTileOut];
#pragma unroll
      for (int u = 0; u < kTileOut; ++u) {
        const int t = tid + u * kFusedThreads;
        out[u] = 0.0;
        if (t < nout) {
          const int i = t % sb, v = t / sb;
          const double* w = Xs + (c0 + i) * ld + c0;
          double s = 0.0;
          if (v < c0) {
            const double* yv = Xs + c0 * ld + v;
            for (int m = 0; m < sb; ++m) s = fma(w[m], yv[m * ld], s);
          } else {
            const double* av = Ls + (v + sb) * ld + c0;
            for (int m = 0; m < sb; ++m) s = fma(av[m], w[m], s);
          }
          out[u] = s;
        }
      }
      __syncthreads();
#pragma unroll
      for (int u = 0; u < kTileOut; ++u) {
        const int t = tid + u * kFusedThreads;
        if (t < nout) {
          const int i = t % sb, v = t / sb;
          if (v < c0)
            Xs[(c0 + i) * ld + v] = out[u];
          else
            Ls[(v + sb) * ld + c0 + i] = out[u];
        }
      }
      __syncthreads();
      // (3) Rows below the tile, two a warp: Y(r, 0:r0) -= L(r, J) X_J, A(r, r0:r) -=
      // L(r, J) L(c, J)^T. Reads only the tile's columns of L and rows of X, which no
      // thread writes here.
      const int pairs = (below + 1) / 2;
      for (int pi = warp; pi < pairs; pi += nw) {
        const int ra = r0 + 2 * pi, rb = min(ra + 1, nb - 1);
        const bool hasB = ra + 1 < nb;
        double la[kTile], lb[kTile];
#pragma unroll
        for (int m = 0; m < kTile; ++m) {
          la[m] = m < sb ? Ls[ra * ld + c0 + m] : 0.0;
          lb[m] = m < sb ? Ls[rb * ld + c0 + m] : 0.0;
        }
        for (int c = lane; c <= rb; c += 32) {
          const bool isY = c < r0;
          const double* v = isY ? Xs + c0 * ld + c : Ls + c * ld + c0;
          const int st = isY ? ld : 1;
          double sa = 0.0, sbb = 0.0;
#pragma unroll
          for (int m = 0; m < kTile; ++m)
            if (m < sb) {
              const double x = v[m * st];
              sa = fma(la[m], x, sa);
              sbb = fma(lb[m], x, sbb);
            }
          double* tgt = isY ? Xs : Ls;
          if (c <= ra) tgt[ra * ld + c] -= sa;
          if (hasB) tgt[rb * ld + c] -= sbb;
        }
      }
      __syncthreads();
    }
  } else {
    for (int j = 0; j < nb; ++j) {
      double dj = Ls[j * ld + j];
      if (!(dj > 0.0)) {
        if (!bad) bad = j + 1;
        dj = 1.0;
      }
      const double sj = sqrt(dj), rj = 1.0 / sj;
      // Column j of L below the pivot, and row j of the inverse.
      for (int t = tid; t < nb; t += nt) {
        if (t < nb - j - 1)
          Ls[(j + 1 + t) * ld + j] *= rj;
        else
          Xs[j * ld + (t - (nb - j - 1))] *= rj;
      }
      __syncthreads();
      if (tid == 0) Ls[j * ld + j] = sj; // nobody reads the pivot in this phase
      // Rows below j, a row per warp: columns j+1..r of A_kk, columns 0..j of Y.
      for (int r = j + 1 + warp; r < nb; r += nw) {
        const double lrj = Ls[r * ld + j];
        for (int c = lane; c <= r; c += 32) {
          if (c > j)
            Ls[r * ld + c] -= lrj * Ls[c * ld + j];
          else
            Xs[r * ld + c] -= lrj * Xs[j * ld + c];
        }
      }
      __syncthreads();
    }
  }
  for (int t = tid; t < nb * nb; t += nt) {
    const int c = t / nb, r = t % nb;
    if (r >= c) A[r + (std::size_t)c * n] = Ls[r * ld + c];
    X[r + (std::size_t)c * d.ld] = r >= c ? Xs[r * ld + c] : 0.0; // upper stays zero for GEMMs
  }
  if (tid == 0 && bad && b.info[p] == 0) b.info[p] = k * nb + bad;
  // The panel: L_ik = A_ik X_kk^T, out(r, c) = sum_m P(r, m) X(c, m) (X's upper zero).
  const int tx = tid & 15, ty = tid >> 4; // lanes along rows: coalesced global writes
  for (int r0 = 0; r0 < M; r0 += nb) {
    const int R = min(nb, M - r0);
    double* P = A + nb + r0; // rows (k+1) nb + r0 .., columns of block k
    __syncthreads();          // Ls free (written out / previous chunk done)
    if constexpr (Tiled) {
      stageBlock<false>(Ls, ld, P, n, R, nb, tid);
    } else {
      for (int t = tid; t < R * nb; t += nt) {
        const int c = t / R, r = t % R;
        Ls[r * ld + c] = P[r + (std::size_t)c * n];
      }
    }
    __syncthreads();
    double acc[5][5];
#pragma unroll
    for (int a = 0; a < 5; ++a)
#pragma unroll
      for (int q = 0; q < 5; ++q) acc[a][q] = 0.0;
    int ra[5], cq[5];
#pragma unroll
    for (int a = 0; a < 5; ++a) {
      ra[a] = min(tx + 16 * a, R - 1) * ld;
      cq[a] = min(ty + 16 * a, nb - 1) * ld;
    }
    for (int m = 0; m < nb; ++m) {
      double pv[5], xv[5];
#pragma unroll
      for (int a = 0; a < 5; ++a) {
        pv[a] = Ls[ra[a] + m];
        xv[a] = Xs[cq[a] + m];
      }
#pragma unroll
      for (int a = 0; a < 5; ++a)
#pragma unroll
        for (int q = 0; q < 5; ++q) acc[a][q] = fma(pv[a], xv[q], acc[a][q]);
    }
#pragma unroll
    for (int a = 0; a < 5; ++a) {
      const int r = tx + 16 * a;
      if (r >= R) continue;
#pragma unroll
      for (int q = 0; q < 5; ++q) {
        const int c = ty + 16 * q;
        if (c < nb) P[r + (std::size_t)c * n] = acc[a][q];
      }
    }
  }
}

// A's panel below diagonal block k (rows (k+1) nb .. (k+1) nb + M, columns of block
// k) <- T, where T (M x nb, leading dimension M, stride sT per patch) holds
// A_panel L_kk^-T.
__global__ void copyPanelKernel(BatchView b, int k, int M, long long sT) {
  const int p = blockIdx.x, c = blockIdx.y, nb = b.nb, n = b.n;
  const double* T = b.T + (std::size_t)p * sT + (std::size_t)c * M;
  double* A = b.A + (std::size_t)p * n * n + (std::size_t)(k * nb + c) * n + (k + 1) * nb;
  for (int r = threadIdx.x; r < M; r += blockDim.x) A[r] = T[r];
}

// f = X^T (X y) with X = L^-1 lower triangular: z = X y (thread per row, coalesced
// column-major reads), then f_c = sum_{r >= c} X(r, c) z_r (warp per column).
__global__ void solveFluxKernel(BatchView b) {
  extern __shared__ double sh[];
  const int p = blockIdx.x, n = b.n;
  double* ys = sh;
  double* zs = sh + n;
  const double* X = b.X + (std::size_t)p * n * n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) ys[i] = b.y[(std::size_t)p * n + i];
  __syncthreads();
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    double s = 0.0;
    for (int c = 0; c <= r; ++c) s += X[r + (std::size_t)c * n] * ys[c];
    zs[r] = s;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int c = warp; c < n; c += nw) {
    double s = 0.0;
    for (int r = c + lane; r < n; r += 32) s += X[r + (std::size_t)c * n] * zs[r];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
      b.f[(std::size_t)p * n + c] = s;
      // A non-finite f fails the patch like a failed factorisation (patch_solver.cpp).
      if (!isfinite(s) && b.info[p] == 0) b.info[p] = -1;
    }
  }
}

constexpr int kJacobiThreads = 512;
constexpr int kMaxSweeps = 30;
// Rotate (p, q) while |a_pq| > tol sqrt(|a_pp a_qq|) (relative: keeps the small
// eigenvalues accurate, Demmel & Veselic 1992) and |a_pq| > kJacobiAbs max_i |a_ii|:
// below that an element is under the rounding of the matrix itself (LAPACK's syevd,
// which the CPU engine uses, is only backward stable to ~1e-16 ||C||).
constexpr double kJacobiTol = 1e-15;
constexpr double kJacobiAbs = 1e-17;
// Eigenvalues below this fraction of the largest are raised to it (EXTRACTION.md §4.4).
constexpr double kEigClip = 1e-14;

struct JacobiShared {
  int ld, npairMax;
  std::size_t oA, oV, oC, oS, oT, oApq, oP, oQ, oW, oF, total;
  __host__ __device__ explicit JacobiShared(int nb) {
    // ld = 1 (mod 16): a warp walking a column touches every bank once per half-warp.
    ld = ((nb + 14) / 16) * 16 + 1;
    npairMax = (nb + 1) / 2;
    oA = 0;
    oV = oA + (std::size_t)nb * ld;
    oC = oV + (std::size_t)nb * ld;
    oS = oC + npairMax;
    oT = oS + npairMax;
    oApq = oT + npairMax;
    oP = oApq + npairMax; // ints stored in double slots
    oQ = oP + npairMax;
    oW = oQ + npairMax;
    oF = oW + nb;
    total = oF + nb + 4;
  }
};

// Symmetric eigen-decomposition of the nb x nb matrix in A (row-major, ld), vectors
// accumulated in V; on return diag(A) holds the eigenvalues. Cyclic parallel Jacobi
// with the round-robin ordering: each round rotates nb/2 disjoint pairs, rows first,
// then columns and V; the 2x2 block of each pair is set exactly from the rotation.
__device__ unsigned long long g_jacobiSweeps = 0, g_jacobiBlocks = 0, g_jacobiMaxSweeps = 0;

__device__ void jacobiEigen(double* sh, int nb, const JacobiShared& L) {
  double* A = sh + L.oA;
  double* V = sh + L.oV;
  double* cs = sh + L.oC;
  double* sn = sh + L.oS;
  double* dpp = sh + L.oT;
  double* dqq = sh + L.oApq;
  int* P = reinterpret_cast<int*>(sh + L.oP);
  int* Q = reinterpret_cast<int*>(sh + L.oQ);
  const int ld = L.ld, tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
  const int nbe = nb + (nb & 1), npairs = nbe / 2;
  __shared__ int rotated;
  __shared__ double absTol;
  int sweep = 0;
  for (; sweep < kMaxSweeps; ++sweep) {
    if (tid == 0) {
      rotated = 0;
      double m = 0.0;
      for (int k = 0; k < nb; ++k) m = fmax(m, fabs(A[k * ld + k]));
      absTol = kJacobiAbs * m;
    }
    __syncthreads();
    for (int r = 0; r < nbe - 1; ++r) {
      if (tid < npairs) {
        // Round-robin (circle) pairing: position 0 fixed, the others rotate by r.
        auto player = [&](int pos) { return pos == 0 ? 0 : 1 + (pos - 1 + r) % (nbe - 1); };
        int p = player(tid), q = player(nbe - 1 - tid);
        if (p > q) {
          const int t = p;
          p = q;
          q = t;
        }
        double c = 1.0, s = 0.0, np = 0.0, nq = 0.0;
        bool active = false;
        if (q < nb) {
          const double apq = A[p * ld + q];
          const double app = A[p * ld + p], aqq = A[q * ld + q];
          if (fabs(apq) > kJacobiTol * sqrt(fabs(app * aqq)) && fabs(apq) > absTol &&
              fabs(apq) > 1e-300) {
            const double theta = (aqq - app) / (2.0 * apq);
            const double at = fabs(theta);
            const double t = at > 1e150 ? 0.5 / theta
                                        : (theta >= 0 ? 1.0 : -1.0) / (at + sqrt(theta * theta + 1.0));
            c = 1.0 / sqrt(t * t + 1.0);
            s = t * c;
            np = app - t * apq;
            nq = aqq + t * apq;
            active = true;
            rotated = 1;
          }
        }
        cs[tid] = c;
        sn[tid] = s;
        dpp[tid] = np;
        dqq[tid] = nq;
        P[tid] = active ? p : -1;
        Q[tid] = q;
      }
      __syncthreads();
      // Rows: A <- J^T A. A warp per pair, lanes along the row.
      for (int pr = warp; pr < npairs; pr += nw) {
        const int p = P[pr];
        if (p < 0) continue;
        const int q = Q[pr];
        const double c = cs[pr], s = sn[pr];
        double* rp = A + p * ld;
        double* rq = A + q * ld;
        for (int k = lane; k < nb; k += 32) {
          const double apk = rp[k], aqk = rq[k];
          rp[k] = c * apk - s * aqk;
          rq[k] = s * apk + c * aqk;
        }
      }
      __syncthreads();
      // Columns: A <- A J and V <- V J. The pair's own 2x2 block is set exactly from
      // the pre-round values: a'_pp = a_pp - t a_pq, a'_qq = a_qq + t a_pq, a'_pq = 0.
      for (int pr = warp; pr < npairs; pr += nw) {
        const int p = P[pr];
        if (p < 0) continue;
        const int q = Q[pr];
        const double c = cs[pr], s = sn[pr];
        for (int k = lane; k < nb; k += 32) {
          double* ak = A + k * ld;
          if (k == p) {
            ak[p] = dpp[pr];
            ak[q] = 0.0;
          } else if (k == q) {
            ak[q] = dqq[pr];
            ak[p] = 0.0;
          } else {
            const double akp = ak[p], akq = ak[q];
            ak[p] = c * akp - s * akq;
            ak[q] = s * akp + c * akq;
          }
          double* vk = V + k * ld;
          const double vkp = vk[p], vkq = vk[q];
          vk[p] = c * vkp - s * vkq;
          vk[q] = s * vkp + c * vkq;
        }
      }
      __syncthreads();
    }
    const int any = rotated;
    __syncthreads(); // everyone has read the flag before thread 0 resets it
    if (!any) break;
  }
  if (tid == 0) {
    atomicAdd(&g_jacobiSweeps, (unsigned long long)(sweep + 1));
    atomicAdd(&g_jacobiBlocks, 1ull);
    atomicMax(&g_jacobiMaxSweeps, (unsigned long long)(sweep + 1));
  }
}

// Signal decorrelation (EXTRACTION.md §4.4-§4.6) of fiber block s of patch p, for kept
// fibers only; outputs go straight into the frame arrays at the kept bins.
__global__ void __launch_bounds__(kJacobiThreads) decorrelateSignalKernel(BatchView b) {
  extern __shared__ double sh[];
  const int s = blockIdx.x, p = blockIdx.y, nb = b.nb;
  const DevPatch pt = b.patches[p];
  if (b.info[p] != 0) return; // failed Cholesky: the retry pass writes this patch
  if (s < pt.keptFiberOff || s >= pt.keptFiberOff + pt.nfiber) return;
  const JacobiShared L(nb);
  const int ld = L.ld, tid = threadIdx.x, nt = blockDim.x;
  double* A = sh + L.oA;
  double* V = sh + L.oV;
  double* w = sh + L.oW;
  double* fs = sh + L.oF;
  if (b.givenEigen) {
    // Eigen-pairs from cusolverDnXsyevBatched: vectors column-major in K, values in KW.
    const std::size_t slot = (std::size_t)p * b.maxKept + (s - pt.keptFiberOff);
    const double* K = b.K + slot * nb * nb;
    for (int t = tid; t < nb * nb; t += nt) {
      const int i = t % nb, k = t / nb;
      V[i * ld + k] = K[t];
    }
    for (int k = tid; k < nb; k += nt) A[k * ld + k] = b.KW[slot * nb + k];
  } else {
    const double* C = b.C + ((std::size_t)p * b.F + s) * nb * nb;
    for (int t = tid; t < nb * nb; t += nt) {
      const int i = t % nb, j = t / nb;
      A[i * ld + j] = 0.5 * (C[i + (std::size_t)j * nb] + C[j + (std::size_t)i * nb]);
      V[i * ld + j] = i == j ? 1.0 : 0.0;
    }
  }
  for (int t = tid; t < nb; t += nt) fs[t] = b.f[(std::size_t)p * b.n + s * nb + t];
  __syncthreads();
  if (!b.givenEigen) jacobiEigen(sh, nb, L);
  // w^-1/2 with eigenvalues clipped at kEigClip * max.
  __shared__ double wmax;
  if (tid == 0) {
    double m = A[0];
    for (int k = 1; k < nb; ++k) m = fmax(m, A[k * ld + k]);
    wmax = m;
  }
  __syncthreads();
  for (int k = tid; k < nb; k += nt) {
    const double wk = fmax(A[k * ld + k], kEigClip * wmax);
    w[k] = wk > 0.0 ? 1.0 / sqrt(wk) : 0.0;
  }
  __syncthreads();
  // Q = V diag(w) V^T into A (A's eigenvalues are no longer needed).
  for (int t = tid; t < nb * nb; t += nt) {
    const int i = t / nb, j = t % nb;
    if (j < i) continue;
    double q = 0.0;
    for (int k = 0; k < nb; ++k) q += V[i * ld + k] * w[k] * V[j * ld + k];
    A[i * ld + j] = q;
    A[j * ld + i] = q;
  }
  __syncthreads();
  // s_i = sum_j Q_ij; R = Q / s row-wise; ivar = s^2; flux = R f (as applyQ in
  // core/extract/patch_solver.cpp, operation for operation).
  double* rs = V; // V is free now: row sums in its first slots
  for (int i = tid; i < nb; i += nt) {
    double sum = 0.0;
    for (int j = 0; j < nb; ++j) sum += A[i * ld + j];
    rs[i] = sum;
  }
  __syncthreads();
  const DevFrame& o = b.out;
  const int row = pt.outFiber + (s - pt.keptFiberOff);
  for (int jj = tid; jj < pt.nwave; jj += nt) {
    const int i = pt.keptWaveOff + jj;
    const double inv = rs[i] != 0.0 ? 1.0 / rs[i] : 0.0;
    double fl = 0.0;
    for (int j = 0; j < nb; ++j) fl += A[i * ld + j] * inv * fs[j];
    const std::size_t q = (std::size_t)row * o.nwave + pt.outWave + jj;
    o.flux[q] = fl;
    o.ivar[q] = rs[i] * rs[i];
    o.deconvolved[q] = fs[i];
  }
  // RESOLUTION[row, k, j] = R[j - ndiag + k, j], k = 0 .. 2 ndiag (§4.6).
  const int nd = o.ndiag, nk = 2 * nd + 1;
  for (int t = tid; t < nk * pt.nwave; t += nt) {
    const int k = t / pt.nwave, jj = t % pt.nwave;
    const int j = pt.keptWaveOff + jj, i = j - nd + k;
    const double v = (i >= 0 && i < nb && rs[i] != 0.0) ? A[i * ld + j] / rs[i] : 0.0;
    o.resolution[((std::size_t)row * nk + k) * o.nwave + pt.outWave + jj] = v;
  }
}

// Noise mode (EXTRACTION.md §4.4, --decorrelate-fibers): E holds the eigenvectors of
// each whole iCov, W its eigenvalues (ascending). Column k of E is scaled by
// max(w_k, 1e-14 w_max)^1/4 so that E E^T = iCov^1/2.
__global__ void noiseScaleKernel(BatchView b, double* E) {
  const int p = blockIdx.y, n = b.n;
  const double* w = b.W + (std::size_t)p * n;
  const double floor = kEigClip * w[n - 1];
  double* e = E + (std::size_t)p * n * n;
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < n * n; t += gridDim.x * blockDim.x) {
    const int k = t / n;
    e[t] *= sqrt(sqrt(fmax(w[k], floor)));
  }
}

// Noise-mode outputs of kept fiber block s: Q = iCov^1/2 (in A, symmetric), s_i sums
// whole rows across fibers, flux = (Q f)_i / s_i, RESOLUTION from the fiber's
// diagonal block of R (as decorrelateNoise in core/extract/patch_solver.cpp).
__global__ void noiseOutputsKernel(BatchView b) {
  extern __shared__ double sh[];
  const int s = blockIdx.x, p = blockIdx.y, nb = b.nb, n = b.n;
  const DevPatch pt = b.patches[p];
  if (b.info[p] != 0) return;
  if (s < pt.keptFiberOff || s >= pt.keptFiberOff + pt.nfiber) return;
  const int nReal = pt.nfiberPad * nb, c0 = s * nb;
  const double* Q = b.A + (std::size_t)p * n * n;
  const double* f = b.f + (std::size_t)p * n;
  double* rs = sh;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const DevFrame& o = b.out;
  const int row = pt.outFiber + (s - pt.keptFiberOff);
  for (int i = warp; i < nb; i += nw) {
    const double* col = Q + (std::size_t)(c0 + i) * n; // row c0+i by symmetry
    double sum = 0.0, fl = 0.0;
    for (int j = lane; j < nReal; j += 32) {
      sum += col[j];
      fl += col[j] * f[j];
    }
    for (int off = 16; off > 0; off >>= 1) {
      sum += __shfl_xor_sync(0xffffffffu, sum, off);
      fl += __shfl_xor_sync(0xffffffffu, fl, off);
    }
    if (lane == 0) {
      rs[i] = sum;
      const int jj = i - pt.keptWaveOff;
      if (jj >= 0 && jj < pt.nwave) {
        const std::size_t q = (std::size_t)row * o.nwave + pt.outWave + jj;
        const double inv = sum != 0.0 ? 1.0 / sum : 0.0;
        o.flux[q] = fl * inv;
        o.ivar[q] = sum * sum;
        o.deconvolved[q] = f[c0 + i];
      }
    }
  }
  __syncthreads();
  const int nd = o.ndiag, nk = 2 * nd + 1;
  for (int t = threadIdx.x; t < nk * pt.nwave; t += blockDim.x) {
    const int k = t / pt.nwave, jj = t % pt.nwave;
    const int j = pt.keptWaveOff + jj, i = j - nd + k;
    const double v = (i >= 0 && i < nb && rs[i] != 0.0)
                         ? Q[(c0 + i) + (std::size_t)(c0 + j) * n] / rs[i]
                         : 0.0;
    o.resolution[((std::size_t)row * nk + k) * o.nwave + pt.outWave + jj] = v;
  }
}

// Eigenvalues of count symmetric nb x nb matrices (column-major, packed) by the same
// Jacobi solver, ascending; for measuring it against cuSOLVER.
__global__ void __launch_bounds__(kJacobiThreads) jacobiEigenvaluesKernel(const double* C, int nb,
                                                                         double* w) {
  extern __shared__ double sh[];
  const JacobiShared L(nb);
  const double* c = C + (std::size_t)blockIdx.x * nb * nb;
  for (int t = threadIdx.x; t < nb * nb; t += blockDim.x) {
    const int i = t % nb, j = t / nb;
    sh[L.oA + i * L.ld + j] = c[t];
    sh[L.oV + i * L.ld + j] = i == j ? 1.0 : 0.0;
  }
  __syncthreads();
  jacobiEigen(sh, nb, L);
  if (threadIdx.x == 0) { // insertion sort of nb values: test-only
    double* out = w + (std::size_t)blockIdx.x * nb;
    for (int k = 0; k < nb; ++k) {
      const double v = sh[L.oA + k * L.ld + k];
      int i = k;
      while (i > 0 && out[i - 1] > v) {
        out[i] = out[i - 1];
        --i;
      }
      out[i] = v;
    }
  }
}

// Packs the kept fiber blocks (symmetrised) into K for the library eigensolver;
// slots beyond a patch's kept fibers get the identity.
__global__ void gatherKeptBlocksKernel(BatchView b) {
  const int j = blockIdx.x, p = blockIdx.y, nb = b.nb;
  const DevPatch pt = b.patches[p];
  double* K = b.K + ((std::size_t)p * b.maxKept + j) * nb * nb;
  const bool real = j < pt.nfiber;
  const double* C = b.C + ((std::size_t)p * b.F + pt.keptFiberOff + (real ? j : 0)) * nb * nb;
  for (int t = threadIdx.x; t < nb * nb; t += blockDim.x) {
    const int r = t % nb, c = t / nb;
    K[t] = real ? 0.5 * (C[r + (std::size_t)c * nb] + C[c + (std::size_t)r * nb]) : (r == c ? 1.0 : 0.0);
  }
}

} // namespace

void launchTriangularInverseDiag(const BatchView& b, double* D, int ldD, long long stepD, long long strideD,
                                 cudaStream_t stream) {
  const std::size_t shm = sizeof(double) * 2 * b.nb * b.nb;
  SPEX_CUDA(cudaFuncSetAttribute(triInvDiagKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(shm)));
  triInvDiagKernel<<<dim3(b.F, b.count), 128, shm, stream>>>(b, DiagTarget{D, ldD, stepD, strideD});
  SPEX_CUDA_LAUNCH("triInvDiagKernel");
}

void launchCholeskyDiag(const BatchView& b, int k, double* D, int ldD, long long stepD, long long strideD,
                        cudaStream_t stream) {
  const std::size_t shm = sizeof(double) * 2 * b.nb * b.nb;
  if (shm > 48 * 1024)
    SPEX_CUDA(cudaFuncSetAttribute(cholDiagKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm)));
  cholDiagKernel<<<b.count, 256, shm, stream>>>(b, k, DiagTarget{D, ldD, stepD, strideD});
  SPEX_CUDA_LAUNCH("cholDiagKernel");
}

bool choleskyColumnFusedFits(int nb) { return nb >= 1 && nb <= kFusedMaxNb; }

void launchCholeskyColumnFused(const BatchView& b, int k, int M, double* D, int ldD, long long stepD,
                               long long strideD, bool tiled, cudaStream_t stream) {
  const std::size_t shm = sizeof(double) * 2 * b.nb * (b.nb | 1);
  auto* kernel = tiled ? cholColumnFusedKernel<true> : cholColumnFusedKernel<false>;
  if (shm > 48 * 1024)
    SPEX_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm)));
  kernel<<<b.count, kFusedThreads, shm, stream>>>(b, k, M, DiagTarget{D, ldD, stepD, strideD});
  SPEX_CUDA_LAUNCH("cholColumnFusedKernel");
}

void launchCopyPanel(const BatchView& b, int k, int M, long long sT, cudaStream_t stream) {
  copyPanelKernel<<<dim3(b.count, b.nb), 128, 0, stream>>>(b, k, M, sT);
  SPEX_CUDA_LAUNCH("copyPanelKernel");
}

void launchSolveFlux(const BatchView& b, cudaStream_t stream) {
  const std::size_t shm = sizeof(double) * 2 * b.n;
  if (shm > 48 * 1024)
    SPEX_CUDA(cudaFuncSetAttribute(solveFluxKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(shm)));
  solveFluxKernel<<<b.count, 256, shm, stream>>>(b);
  SPEX_CUDA_LAUNCH("solveFluxKernel");
}

void launchGatherKeptBlocks(const BatchView& b, cudaStream_t stream) {
  gatherKeptBlocksKernel<<<dim3(b.maxKept, b.count), 256, 0, stream>>>(b);
  SPEX_CUDA_LAUNCH("gatherKeptBlocksKernel");
}

void launchDecorrelateSignal(const BatchView& b, cudaStream_t stream) {
  const std::size_t shm = sizeof(double) * JacobiShared(b.nb).total;
  SPEX_CUDA(cudaFuncSetAttribute(decorrelateSignalKernel,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm)));
  decorrelateSignalKernel<<<dim3(b.F, b.count), kJacobiThreads, shm, stream>>>(b);
  SPEX_CUDA_LAUNCH("decorrelateSignalKernel");
}

} // namespace spex::gpu

namespace spex::gpu {

void launchJacobiEigenvalues(const double* C, int nb, int count, double* w, cudaStream_t stream) {
  const std::size_t shm = sizeof(double) * JacobiShared(nb).total;
  SPEX_CUDA(cudaFuncSetAttribute(jacobiEigenvaluesKernel,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm)));
  jacobiEigenvaluesKernel<<<count, kJacobiThreads, shm, stream>>>(C, nb, w);
  SPEX_CUDA_LAUNCH("jacobiEigenvaluesKernel");
}

JacobiStats jacobiStats(bool reset) {
  JacobiStats st;
  unsigned long long v[3] = {0, 0, 0};
  SPEX_CUDA(cudaMemcpyFromSymbol(&v[0], g_jacobiSweeps, sizeof(v[0])));
  SPEX_CUDA(cudaMemcpyFromSymbol(&v[1], g_jacobiBlocks, sizeof(v[1])));
  SPEX_CUDA(cudaMemcpyFromSymbol(&v[2], g_jacobiMaxSweeps, sizeof(v[2])));
  st.sweeps = v[0];
  st.blocks = v[1];
  st.maxSweeps = v[2];
  if (reset) {
    const unsigned long long z = 0;
    SPEX_CUDA(cudaMemcpyToSymbol(g_jacobiSweeps, &z, sizeof(z)));
    SPEX_CUDA(cudaMemcpyToSymbol(g_jacobiBlocks, &z, sizeof(z)));
    SPEX_CUDA(cudaMemcpyToSymbol(g_jacobiMaxSweeps, &z, sizeof(z)));
  }
  return st;
}

void launchNoiseScale(const BatchView& b, double* E, cudaStream_t stream) {
  noiseScaleKernel<<<dim3(128, b.count), 256, 0, stream>>>(b, E);
  SPEX_CUDA_LAUNCH("noiseScaleKernel");
}

void launchNoiseOutputs(const BatchView& b, cudaStream_t stream) {
  noiseOutputsKernel<<<dim3(b.F, b.count), 256, sizeof(double) * b.nb, stream>>>(b);
  SPEX_CUDA_LAUNCH("noiseOutputsKernel");
}

} // namespace spex::gpu
