// Selected inversion and block-banded solve (batched_selected_inverse.h): the GEMMs
// (four per block column, L_jj^-T L_jj^-1 among them) by batched_gemm.h (tensor cores,
// or cuBLAS where the caller passes a handle); the mirrored
// diagonal blocks, the transposed copies and the substitutions in the kernels below.
#include "batched_selected_inverse.h"

#include "batched_cholesky.h"
#include "batched_gemm.h"
#include "device_memory.h"
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

std::string shape(int nblk, int nb, int w, int batch) {
  return "nblk " + std::to_string(nblk) + ", nb " + std::to_string(nb) + ", w " + std::to_string(w) + ", batch " +
         std::to_string(batch);
}

} // namespace

void potriSelectedBlockBandedBatched(cublasHandle_t cublas, int nblk, int nb, int w, int jmin, double* A,
                                     double* D, long long strideD, double* T, long long strideT, int batch,
                                     cudaStream_t stream) {
  if (nblk < 1 || nb < 1 || w < 0 || jmin < 0 || batch < 0 || !A || !D || !T ||
      strideD < (long long)nblk * nb * nb || strideT < blockBandedScratch(nblk, nb))
    throw GpuError("potriSelectedBlockBandedBatched: bad arguments (" + shape(nblk, nb, w, batch) + ", jmin " +
                   std::to_string(jmin) + ", strideD " + std::to_string(strideD) + ", strideT " +
                   std::to_string(strideT) + ")");
  if (batch == 0 || jmin >= nblk) return;
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
