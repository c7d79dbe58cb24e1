// Selected inversion and block-banded solve (batched_selected_inverse.h): by one fused
// kernel a matrix (selectedInverseFusedKernel, the default where the shapes fit), or by
// the GEMMs (four per block column, L_jj^-T L_jj^-1 among them) of batched_gemm.h
// (tensor cores, or cuBLAS where the caller passes a handle) with the mirrored diagonal
// blocks and the transposed copies in selectedDiagKernel; the substitutions below.
#include "batched_selected_inverse.h"

#include "batched_cholesky.h"
#include "batched_gemm.h"
#include "device_memory.h"
#include "dmma.cuh"
#include "kernels.h"

#include <algorithm>
#include <cstddef>
#include <string>

namespace spex::gpu {

namespace {

// Step j of the selected inversion, after its GEMMs (which left C_jj in A's diagonal
// block j). Thread block (0, b): C_jj's lower triangle mirrored, so the block is
// symmetric to the bit, over A's diagonal block j and into D block j. Thread block
// (i, b), i = 1 .. wj: A's block (j + i, j), now C_(j+i) j, transposed into block
// (j, j + i). Both through a shared tile (ld nb + 1: no bank conflicts either way).
__global__ void selectedDiagKernel(double* A, double* D, long long strideD, int nblk, int nb, int j) {
  extern __shared__ double sh[];
  const int b = blockIdx.y, role = blockIdx.x, ldt = nb + 1;
  const long long n = (long long)nblk * nb;
  double* Am = A + (std::size_t)b * n * n;
  const double* src = Am + (long long)(j + role) * nb + (long long)j * nb * n;
  for (int t = threadIdx.x; t < nb * nb; t += blockDim.x) {
    const int c = t / nb, r = t % nb;
    if (role > 0 || r >= c) sh[r + c * ldt] = src[r + c * n];
  }
  __syncthreads();
  if (role > 0) {
    double* dst = Am + (long long)j * nb + (long long)(j + role) * nb * n;
    for (int t = threadIdx.x; t < nb * nb; t += blockDim.x) {
      const int c = t / nb, r = t % nb;
      dst[r + c * n] = sh[c + r * ldt];
    }
    return;
  }
  double* Dj = D + (std::size_t)b * strideD + (std::size_t)j * nb * nb;
  double* Ajj = Am + (long long)j * nb * (n + 1);
  for (int t = threadIdx.x; t < nb * nb; t += blockDim.x) {
    const int c = t / nb, r = t % nb;
    const double v = r >= c ? sh[r + c * ldt] : sh[c + r * ldt];
    Ajj[r + c * n] = v;
    Dj[t] = v;
  }
}

// x = (L L^T)^-1 y for matrix blockIdx.x (batched_selected_inverse.h
// potrsBlockBandedBatched): z in shared memory, forward substitution by block rows
// (Q threads per row, each a share of its columns: L_ki's columns are read down the
// threads, coalesced), then backward (warp per row of L_ik^T, its lanes down L_ik's
// column).
__global__ void bandedSolveKernel(const double* A, const double* D, long long strideD, const double* y, double* x,
                                  int* info, int nblk, int nb, int w) {
  extern __shared__ double sh[];
  __shared__ int nonFinite;
  const int b = blockIdx.x;
  const long long n = (long long)nblk * nb;
  const double* Am = A + (std::size_t)b * n * n;
  const double* Dm = D + (std::size_t)b * strideD;
  double* z = sh;
  double* t = sh + n;
  double* part = sh + n + nb; // Q partial sums per row
  const int Q = blockDim.x >= 2 * nb ? blockDim.x / nb : 1;
  if (threadIdx.x == 0) nonFinite = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) z[i] = y[(std::size_t)b * n + i];
  __syncthreads();
  for (int k = 0; k < nblk; ++k) {
    // t = z_k - L(k, k-w : k) z(k-w : k): row r's columns split over Q threads.
    const long long c0 = (long long)(k > w ? k - w : 0) * nb, c1 = (long long)k * nb;
    for (int i = threadIdx.x; i < Q * nb; i += blockDim.x) {
      const int r = i % nb, q = i / nb;
      const double* row = Am + k * nb + r;
      double s = 0.0;
#pragma unroll 4
      for (long long c = c0 + q; c < c1; c += Q) s += row[c * n] * z[c];
      part[i] = s;
    }
    __syncthreads();
    for (int r = threadIdx.x; r < nb; r += blockDim.x) {
      double s = 0.0;
      for (int q = 0; q < Q; ++q) s += part[q * nb + r];
      t[r] = z[k * nb + r] - s;
    }
    __syncthreads();
    // z_k = L_kk^-1 t.
    const double* Dk = Dm + (std::size_t)k * nb * nb;
    for (int i = threadIdx.x; i < Q * nb; i += blockDim.x) {
      const int r = i % nb, q = i / nb;
      double s = 0.0;
      for (int c = q; c <= r; c += Q) s += Dk[r + c * nb] * t[c];
      part[i] = s;
    }
    __syncthreads();
    for (int r = threadIdx.x; r < nb; r += blockDim.x) {
      double s = 0.0;
      for (int q = 0; q < Q; ++q) s += part[q * nb + r];
      z[k * nb + r] = s;
    }
    __syncthreads();
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int k = nblk - 1; k >= 0; --k) {
    const long long c0 = (long long)(k + 1) * nb, c1 = (long long)(k + w < nblk - 1 ? k + w : nblk - 1) * nb + nb;
    for (int r = warp; r < nb; r += nw) {
      const double* col = Am + (long long)(k * nb + r) * n;
      double s = 0.0;
      for (long long c = c0 + lane; c < c1; c += 32) s += col[c] * z[c];
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0) t[r] = z[k * nb + r] - s;
    }
    __syncthreads();
    const double* Dk = Dm + (std::size_t)k * nb * nb;
    for (int r = warp; r < nb; r += nw) {
      double s = 0.0;
      for (int c = r + lane; c < nb; c += 32) s += Dk[c + r * nb] * t[c];
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0) z[k * nb + r] = s;
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const double v = z[i];
    x[(std::size_t)b * n + i] = v;
    if (!isfinite(v)) nonFinite = 1;
  }
  __syncthreads();
  if (threadIdx.x == 0 && nonFinite && info && info[b] == 0) info[b] = -1;
}

// ---- The fused selected inversion (SelectedInverseKernel::Fused) -----------------------
// One thread block of 10 warps per matrix, going up the block columns j = nblk - 1 ..
// jmin in one launch; G and Q = C(j+1 : j+wj, j+1 : j+wj) G (= -C_panel) stay in shared
// memory (row-major, leading dimension kLd, up to kRows rows), so the products of a
// block column never go through global memory; the operands read from global memory
// (L's panel, the window of C) go straight into DMMA fragments, two k-steps ahead (no
// staging: a fragment load of a column-major block is 8 whole sectors), and the next
// block column's L panel and D block are prefetched to L2. Per block column:
//   1. D_jj (= L_jj^-1) into Q's space (Ds, k-major, zero outside nb x nb);
//   2. G = L_panel Ds (warp s: rows 16 s .. 16 s + 15, 10 fragments of m16n8) into Gs, and
//      each warp's part of L_jj^-T L_jj^-1 = Ds^T Ds (a 16 x 40 piece of C_jj, 5
//      fragments), parked in A's diagonal block j;
//   3. Q = C_window G (warp s: rows 16 s.., all 80 columns) into Qs;
//   4. C_panel = -Q and its transpose into A;
//   5. C_jj = Ds^T Ds + Q^T G (the 5 fragments read back), through Gs mirrored into A's
//      diagonal block and D block j (symmetric to the bit).
// Needs nb <= kCols and min(w, nblk - 1) nb <= kRows, and the tensor cores (sm_80+).
namespace fusedinv {
constexpr int kLd = 88;     // shared-memory leading dimension (= 8 mod 16: fragment loads conflict-free)
constexpr int kRows = 160;  // rows of G and Q held: 10 strips of 16
constexpr int kCols = 80;   // nb <= 80: 10 fragments of 8 columns
constexpr int kWarps = 10;
constexpr int kThreads = 32 * kWarps;
constexpr std::size_t kShm = sizeof(double) * 2 * kRows * kLd; // 225 280 bytes: one block an SM
} // namespace fusedinv

// dmma1688 (dmma.cuh): acc += a b for one m16n8k8 fragment; the host never launches the
// fused kernel below sm_80.

// acc[f] += A B over k-steps of 8: loadA(ks, a) the A fragment of step ks (fetched two
// steps ahead: one step ahead left the fused kernel 1.3 ms slower a frame, docs/benchmarks.md
// "Issue 12, eighth round"), loadB(ks, f, b) fragment f's B.
template <int NF, class LoadA, class LoadB>
__device__ __forceinline__ void mmaSteps(double (&acc)[NF][4], int steps, LoadA loadA, LoadB loadB) {
  const auto step = [&](int ks, const double (&a)[4]) {
#pragma unroll
    for (int f = 0; f < NF; ++f) {
      double b[2];
      loadB(ks, f, b);
      dmma1688(acc[f], a, b);
    }
  };
  // Two k-steps of A in flight (a ring of three fragments, indexed statically).
  double a0[4], a1[4], a2[4];
  if (steps > 0) loadA(0, a0);
  if (steps > 1) loadA(1, a1);
  for (int ks = 0; ks < steps; ks += 3) {
    if (ks + 2 < steps) loadA(ks + 2, a2);
    step(ks, a0);
    if (ks + 1 >= steps) break;
    if (ks + 3 < steps) loadA(ks + 3, a0);
    step(ks + 1, a1);
    if (ks + 2 >= steps) break;
    if (ks + 4 < steps) loadA(ks + 4, a1);
    step(ks + 2, a2);
  }
}

// B fragment f of k-step ks from a k-major shared block (element (k, c) at s[k * kLd + c]),
// columns from c0.
__device__ __forceinline__ void sharedB(const double* s, int ks, int c0, int g, int t, double (&b)[2]) {
  b[0] = s[(ks * 8 + t) * fusedinv::kLd + c0 + g];
  b[1] = s[(ks * 8 + t + 4) * fusedinv::kLd + c0 + g];
}

// A fragment of k-step ks for rows r0 .. r0 + 15 of op(A) = S^T, S k-major in shared memory.
__device__ __forceinline__ void sharedAT(const double* s, int ks, int r0, int g, int t, double (&a)[4]) {
  using fusedinv::kLd;
  a[0] = s[(ks * 8 + t) * kLd + r0 + g];
  a[1] = s[(ks * 8 + t) * kLd + r0 + g + 8];
  a[2] = s[(ks * 8 + t + 4) * kLd + r0 + g];
  a[3] = s[(ks * 8 + t + 4) * kLd + r0 + g + 8];
}

// A fragment of k-step ks for rows r0 .. r0 + 15 of a column-major global block
// (element (r, k) at p[r + k * ld]), zero outside rows < m and k < kAll.
__device__ __forceinline__ void globalA(const double* p, long long ld, int m, int kAll, int ks, int r0, int g, int t,
                                        double (&a)[4]) {
  const int ra = r0 + g, rb = ra + 8, ka = ks * 8 + t, kb = ka + 4;
  a[0] = ra < m && ka < kAll ? p[ra + ka * ld] : 0.0;
  a[1] = rb < m && ka < kAll ? p[rb + ka * ld] : 0.0;
  a[2] = ra < m && kb < kAll ? p[ra + kb * ld] : 0.0;
  a[3] = rb < m && kb < kAll ? p[rb + kb * ld] : 0.0;
}

// Fragments (rows r0 + g, r0 + g + 8; columns c0 + 8 f + 2t, + 1) into a row-major shared block.
template <int NF>
__device__ __forceinline__ void storeShared(double* s, const double (&acc)[NF][4], int r0, int c0, int g, int t) {
  using fusedinv::kLd;
#pragma unroll
  for (int f = 0; f < NF; ++f) {
    *reinterpret_cast<double2*>(s + (r0 + g) * kLd + c0 + 8 * f + 2 * t) = make_double2(acc[f][0], acc[f][1]);
    *reinterpret_cast<double2*>(s + (r0 + g + 8) * kLd + c0 + 8 * f + 2 * t) = make_double2(acc[f][2], acc[f][3]);
  }
}

__device__ __forceinline__ void prefetchL2(const double* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

// The 5 fragments of a 16 x 40 piece (rows r0.., columns c0..) to and from a
// column-major global block (ld n), inside nb x nb only.
__device__ __forceinline__ void pieceToGlobal(double* p, long long ld, int nb, const double (&acc)[5][4], int r0,
                                              int c0, int g, int t) {
#pragma unroll
  for (int f = 0; f < 5; ++f)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = r0 + g + (e >> 1) * 8, c = c0 + 8 * f + 2 * t + (e & 1);
      if (r < nb && c < nb) p[r + c * ld] = acc[f][e];
    }
}

__device__ __forceinline__ void pieceFromGlobal(const double* p, long long ld, int nb, double (&acc)[5][4], int r0,
                                                int c0, int g, int t) {
#pragma unroll
  for (int f = 0; f < 5; ++f)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = r0 + g + (e >> 1) * 8, c = c0 + 8 * f + 2 * t + (e & 1);
      acc[f][e] = r < nb && c < nb ? p[r + c * ld] : 0.0;
    }
}

__global__ void __launch_bounds__(fusedinv::kThreads, 1)
    selectedInverseFusedKernel(double* A, double* D, long long strideD, int nblk, int nb, int w, int jmin,
                               int batch) {
  using namespace fusedinv;
  extern __shared__ __align__(16) double shm[];
  double* Gs = shm;                // G (rows < m), then C_jj
  double* Qs = shm + kRows * kLd;  // D_jj (k-major), then Q
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long n = (long long)nblk * nb;
  const int kd = (nb + 7) / 8;                      // k-steps over nb
  const int s3 = warp % 5, c3 = 40 * (warp / 5);    // this warp's 16 x 40 piece of C_jj
  const bool piece = 16 * s3 < nb && c3 < nb;
  for (int b = blockIdx.x; b < batch; b += gridDim.x) {
    double* Am = A + (std::size_t)b * n * n;
    double* Dm = D + (std::size_t)b * strideD;
    for (int j = nblk - 1; j >= jmin; --j) {
      const int wj = min(w, nblk - 1 - j), m = wj * nb, km = (m + 7) / 8, strips = (m + 15) / 16;
      double* Dj = Dm + (std::size_t)j * nb * nb;
      double* Ajj = Am + (long long)j * nb * (n + 1);
      // The next block column's L panel and D block (read once, from HBM) toward L2 while
      // this one is formed: its window was written here and is in L2 already.
      if (j > jmin) {
        const int jn = j - 1, mn = min(w, nblk - 1 - jn) * nb, lines = (mn + 15) / 16 + 1;
        const double* Pn = Am + (long long)jn * nb * (n + 1) + nb;
        if (mn > 0)
          for (int i = threadIdx.x; i < nb * lines; i += kThreads) {
            const int c = i / lines, r = min(16 * (i % lines), mn - 1);
            prefetchL2(Pn + r + c * n);
          }
        const double* Dn = Dm + (std::size_t)jn * nb * nb;
        for (int i = 16 * threadIdx.x; i < nb * nb; i += 16 * kThreads) prefetchL2(Dn + i);
      }
      // 1. Ds(k, c) = D_jj(k, c), zero outside nb x nb.
#pragma unroll 4
      for (int i = threadIdx.x; i < kCols * kCols; i += kThreads) {
        const int c = i / kCols, k = i % kCols;
        Qs[k * kLd + c] = k < nb && c < nb ? Dj[k + c * nb] : 0.0;
      }
      __syncthreads();
      // 2. G = L_panel L_jj^-1 into Gs; this warp's piece of L_jj^-T L_jj^-1 in cjj.
      if (warp < strips) {
        double acc[10][4] = {};
        const double* P = Ajj + nb;
        mmaSteps<10>(acc, kd, [&](int ks, double (&a)[4]) { globalA(P, n, m, nb, ks, 16 * warp, g, t, a); },
                     [&](int ks, int f, double (&bb)[2]) { sharedB(Qs, ks, 8 * f, g, t, bb); });
        storeShared<10>(Gs, acc, 16 * warp, 0, g, t);
      }
      if (piece) {
        // Parked in A's diagonal block j (L_jj is never read) and read back by the same
        // threads in step 5: held in registers through step 3 they spill (168 registers
        // a thread at 10 warps: 3 warps on some of the SM's 4 schedulers).
        double cjj[5][4] = {};
        mmaSteps<5>(cjj, kd, [&](int ks, double (&a)[4]) { sharedAT(Qs, ks, 16 * s3, g, t, a); },
                    [&](int ks, int f, double (&bb)[2]) { sharedB(Qs, ks, c3 + 8 * f, g, t, bb); });
        pieceToGlobal(Ajj, n, nb, cjj, 16 * s3, c3, g, t);
      }
      __syncthreads();
      if (m > 0) {
        // 3. Q = C(j+1 : j+wj, j+1 : j+wj) G into Qs.
        if (warp < strips) {
          double acc[10][4] = {};
          const double* W = Ajj + nb * (n + 1);
          mmaSteps<10>(acc, km, [&](int ks, double (&a)[4]) { globalA(W, n, m, m, ks, 16 * warp, g, t, a); },
                       [&](int ks, int f, double (&bb)[2]) { sharedB(Gs, ks, 8 * f, g, t, bb); });
          storeShared<10>(Qs, acc, 16 * warp, 0, g, t);
        }
        __syncthreads();
        // 4. C(j+1 : j+wj, j) = -Q (over L's panel) and C(j, j+1 : j+wj) = -Q^T.
        double* P = Ajj + nb;
        for (int i = threadIdx.x; i < m * nb; i += kThreads) {
          const int r = i % m, c = i / m;
          P[r + c * n] = -Qs[r * kLd + c];
        }
        double* U = Ajj + nb * n;
        for (int i = threadIdx.x; i < m * nb; i += kThreads) {
          const int c = i % nb, r = i / nb;
          U[c + r * n] = -Qs[r * kLd + c];
        }
      }
      // 5. C_jj = L_jj^-T L_jj^-1 + Q^T G (= L_jj^-T L_jj^-1 - C_panel^T G).
      double cjj[5][4] = {};
      if (piece) {
        pieceFromGlobal(Ajj, n, nb, cjj, 16 * s3, c3, g, t);
        mmaSteps<5>(cjj, km, [&](int ks, double (&a)[4]) { sharedAT(Qs, ks, 16 * s3, g, t, a); },
                    [&](int ks, int f, double (&bb)[2]) { sharedB(Gs, ks, c3 + 8 * f, g, t, bb); });
      }
      __syncthreads();
      if (piece) storeShared<5>(Gs, cjj, 16 * s3, c3, g, t);
      __syncthreads();
      // C_jj's lower triangle over both triangles of A's diagonal block j and D block j.
      for (int i = threadIdx.x; i < nb * nb; i += kThreads) {
        const int c = i / nb, r = i % nb;
        const double v = r >= c ? Gs[r * kLd + c] : Gs[c * kLd + r];
        Ajj[r + c * n] = v;
        Dj[i] = v;
      }
      __syncthreads();
    }
  }
}

std::string shape(int nblk, int nb, int w, int batch) {
  return "nblk " + std::to_string(nblk) + ", nb " + std::to_string(nb) + ", w " + std::to_string(w) + ", batch " +
         std::to_string(batch);
}

} // namespace

void potriSelectedBlockBandedBatched(cublasHandle_t cublas, int nblk, int nb, int w, int jmin, double* A,
                                     double* D, long long strideD, double* T, long long strideT, int batch,
                                     cudaStream_t stream, SelectedInverseKernel kernel) {
  if (nblk < 1 || nb < 1 || w < 0 || jmin < 0 || batch < 0 || !A || !D || !T ||
      strideD < (long long)nblk * nb * nb || strideT < blockBandedScratch(nblk, nb))
    throw GpuError("potriSelectedBlockBandedBatched: bad arguments (" + shape(nblk, nb, w, batch) + ", jmin " +
                   std::to_string(jmin) + ", strideD " + std::to_string(strideD) + ", strideT " +
                   std::to_string(strideT) + ")");
  if (batch == 0 || jmin >= nblk) return;
  if (kernel == SelectedInverseKernel::Fused && !cublas && fusedSelectedInverseTakes(nblk, nb, w)) {
    static_assert(fusedinv::kShm > 48 * 1024, "the fused kernel needs the opt-in shared memory");
    SPEX_CUDA(cudaFuncSetAttribute(selectedInverseFusedKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(fusedinv::kShm)));
    selectedInverseFusedKernel<<<std::min(batch, 65535), fusedinv::kThreads, fusedinv::kShm, stream>>>(
        A, D, strideD, nblk, nb, std::min(w, nblk - 1), jmin, batch);
    SPEX_CUDA_LAUNCH("selectedInverseFusedKernel");
    return;
  }
  const long long n = (long long)nblk * nb, nn = n * n, bb = (long long)nb * nb;
  const std::size_t shm = sizeof(double) * nb * (nb + 1);
  if (shm > 48 * 1024)
    SPEX_CUDA(cudaFuncSetAttribute(selectedDiagKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm)));
  for (int j = nblk - 1; j >= jmin; --j) {
    const int wj = std::min(w, nblk - 1 - j), m = wj * nb;
    double* Djj = D + j * bb;
    double* Ajj = A + (long long)j * nb * (n + 1);
    if (m > 0) {
      double* panel = Ajj + nb;            // L(j+1 : j+wj, j), then C(j+1 : j+wj, j)
      double* win = Ajj + nb * (n + 1);    // C(j+1 : j+wj, j+1 : j+wj), full
      gemmStridedBatched(cublas, Trans::N, Trans::N, m, nb, nb, 1.0, panel, int(n), nn, Djj, nb, strideD, 0.0, T,
                         m, strideT, batch, stream, "batched GEMM (G)");
      gemmStridedBatched(cublas, Trans::N, Trans::N, m, nb, m, -1.0, win, int(n), nn, T, m, strideT, 0.0, panel,
                         int(n), nn, batch, stream, "batched GEMM (C panel)");
      gemmStridedBatched(cublas, Trans::T, Trans::N, nb, nb, m, -1.0, panel, int(n), nn, T, m, strideT, 0.0, Ajj,
                         int(n), nn, batch, stream, "batched GEMM (C_jj)");
    }
    // C_jj += L_jj^-T L_jj^-1 (D's upper triangle is zero: a plain GEMM).
    gemmStridedBatched(cublas, Trans::T, Trans::N, nb, nb, nb, 1.0, Djj, nb, strideD, Djj, nb, strideD,
                       m > 0 ? 1.0 : 0.0, Ajj, int(n), nn, batch, stream, "batched GEMM (L_jj^-T L_jj^-1)");
    selectedDiagKernel<<<dim3(1 + wj, batch), 256, shm, stream>>>(A, D, strideD, nblk, nb, j);
    SPEX_CUDA_LAUNCH("selectedDiagKernel");
  }
}

bool fusedSelectedInverseTakes(int nblk, int nb, int w) {
  static const bool tensorCores = [] {
    int dev = 0, major = 0;
    return cudaGetDevice(&dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major >= 8;
  }();
  return tensorCores && nblk >= 1 && nb >= 1 && nb <= fusedinv::kCols && w >= 0 &&
         (long long)std::min(w, nblk - 1) * nb <= fusedinv::kRows;
}

void potrsBlockBandedBatched(int nblk, int nb, int w, const double* A, const double* D, long long strideD,
                             const double* y, double* x, int* info, int batch, cudaStream_t stream) {
  if (nblk < 1 || nb < 1 || w < 0 || batch < 0 || !A || !D || !y || !x || strideD < (long long)nblk * nb * nb)
    throw GpuError("potrsBlockBandedBatched: bad arguments (" + shape(nblk, nb, w, batch) + ", strideD " +
                   std::to_string(strideD) + ")");
  if (batch == 0) return;
  const std::size_t shm = sizeof(double) * (std::size_t(nblk) * nb + nb + std::max<std::size_t>(256 / nb, 1) * nb);
  if (shm > 48 * 1024)
    SPEX_CUDA(cudaFuncSetAttribute(bandedSolveKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm)));
  bandedSolveKernel<<<batch, 256, shm, stream>>>(A, D, strideD, y, x, info, nblk, nb, std::min(w, nblk - 1));
  SPEX_CUDA_LAUNCH("bandedSolveKernel");
}

} // namespace spex::gpu
