// Block-banded Cholesky and L^-1 (batched_cholesky.h): the host side, batched GEMMs
// (batched_gemm.h) around the shared-memory diagonal-block kernels of linalg.cu.
#include "batched_cholesky.h"

#include "batched_gemm.h"
#include "core/errors.h"
#include "kernels.h"

#include <algorithm>
#include <string>

namespace spex::gpu {

namespace {

void checkArgs(const char* who, int nblk, int nb, int w, const void* A, const void* X, const void* T,
               long long strideT, int batch) {
  if (nblk < 1 || nb < 1 || w < 0 || batch < 0 || !A || !X || !T || strideT < blockBandedScratch(nblk, nb))
    throw GpuError(std::string(who) + ": bad arguments (nblk " + std::to_string(nblk) + ", nb " +
                   std::to_string(nb) + ", w " + std::to_string(w) + ", batch " + std::to_string(batch) +
                   ", scratch stride " + std::to_string(strideT) + " of at least " +
                   std::to_string(blockBandedScratch(std::max(nblk, 1), std::max(nb, 1))) + ")");
}

// The kernels of linalg.cu read their matrices through a BatchView.
BatchView view(int nblk, int nb, double* A, double* X, double* T, int* info, int batch) {
  BatchView v;
  v.F = nblk;
  v.nb = nb;
  v.n = nblk * nb;
  v.A = A;
  v.X = X;
  v.T = T;
  v.info = info;
  v.count = batch;
  return v;
}

} // namespace

long long blockBandedScratch(int nblk, int nb) { return (long long)nb * std::max(nblk - 1, 1) * nb; }

void potrfBlockBandedBatched(cublasHandle_t cublas, int nblk, int nb, int w, double* A, double* X,
                             double* T, long long strideT, int* info, int batch, cudaStream_t stream,
                             const BatchedStepHook& hook, CholeskyKernel kernel) {
  checkArgs("potrfBlockBandedBatched", nblk, nb, w, A, X, T, strideT, batch);
  potrfBlockBandedBatched(cublas, nblk, nb, w, A, DiagInverses::inX(X, nblk, nb), T, strideT, info, batch,
                          stream, hook, kernel);
}

void potrfBlockBandedBatched(cublasHandle_t cublas, int nblk, int nb, int w, double* A, const DiagInverses& inv,
                             double* T, long long strideT, int* info, int batch, cudaStream_t stream,
                             const BatchedStepHook& hook, CholeskyKernel kernel) {
  checkArgs("potrfBlockBandedBatched", nblk, nb, w, A, inv.p, T, strideT, batch);
  if (inv.ld < nb || inv.step < 0 || inv.stride < (long long)(nblk - 1) * inv.step + (long long)inv.ld * (nb - 1) + nb)
    throw GpuError("potrfBlockBandedBatched: bad layout of the diagonal blocks' inverses (ld " +
                   std::to_string(inv.ld) + ", step " + std::to_string(inv.step) + ", stride " +
                   std::to_string(inv.stride) + " for " + std::to_string(nblk) + " blocks of " +
                   std::to_string(nb) + ")");
  if (!info) throw GpuError("potrfBlockBandedBatched: info is null");
  if (batch == 0) return;
  auto step = [&](const char* name, const std::function<void()>& work) {
    if (hook)
      hook(name, work);
    else
      work();
  };
  const int n = nblk * nb;
  const long long nn = (long long)n * n;
  const BatchView v = view(nblk, nb, A, nullptr, T, info, batch);
  SPEX_CUDA(cudaMemsetAsync(info, 0, sizeof(int) * batch, stream));
  if (kernel != CholeskyKernel::steps && choleskyColumnFusedFits(nb)) {
    const bool tiled = kernel == CholeskyKernel::tiled;
    for (int k = 0; k < nblk; ++k) {
      // Diagonal block, L_kk^-1 and the panel's w blocks in one launch.
      const int M = std::max(0, std::min(n - (k + 1) * nb, w * nb));
      step("block column",
           [&] { launchCholeskyColumnFused(v, k, M, inv.p, inv.ld, inv.step, inv.stride, tiled, stream); });
      if (M <= 0) continue;
      const long long dk = (long long)k * nb * (n + 1);
      // A -= L_panel L_panel^T over the M x M window, the panel read from A itself.
      step("trailing update", [&] {
        gemmStridedBatched(cublas, Trans::N, Trans::T, M, M, nb, -1.0, A + dk + nb, n, nn, A + dk + nb, n, nn,
                           1.0, A + dk + (long long)nb * (n + 1), n, nn, batch, stream,
                           "batched GEMM (trailing)");
      });
    }
    return;
  }
  for (int k = 0; k < nblk; ++k) {
    step("diagonal block", [&] { launchCholeskyDiag(v, k, inv.p, inv.ld, inv.step, inv.stride, stream); });
    // The panel: the w blocks below diagonal block k (further down A and L are zero).
    const int M = std::min(n - (k + 1) * nb, w * nb);
    if (M <= 0) continue;
    const long long dk = (long long)k * nb * (n + 1);
    // L_ik = A_ik L_kk^-T = A_ik X_kk^T into T, then back into A.
    step("panel", [&] {
      gemmStridedBatched(cublas, Trans::N, Trans::T, M, nb, nb, 1.0, A + dk + nb, n, nn, inv.p + k * inv.step,
                         inv.ld, inv.stride, 0.0, T, M, strideT, batch, stream, "batched GEMM (panel)");
      launchCopyPanel(v, k, M, strideT, stream);
    });
    // A -= L_panel L_panel^T over the M x M window (a GEMM: twice a SYRK's flops, at
    // GEMM speed).
    step("trailing update", [&] {
      gemmStridedBatched(cublas, Trans::N, Trans::T, M, M, nb, -1.0, T, M, strideT, T, M, strideT, 1.0,
                         A + dk + (long long)nb * (n + 1), n, nn, batch, stream, "batched GEMM (trailing)");
    });
  }
}

void trtriBlockBandedBatched(cublasHandle_t cublas, int nblk, int nb, int w, const double* A, double* X,
                             double* T, long long strideT, int batch, cudaStream_t stream) {
  checkArgs("trtriBlockBandedBatched", nblk, nb, w, A, X, T, strideT, batch);
  if (batch == 0) return;
  const int n = nblk * nb;
  const long long nn = (long long)n * n;
  // Row block i: X(i, 0:i) = -X_ii L(i, j0:i) X(j0:i, 0:i), L(i, j) zero for j < i - w.
  for (int i = 1; i < nblk; ++i) {
    const int K = i * nb, j0 = std::max(0, i - w), KL = (i - j0) * nb;
    if (KL > 0)
      gemmStridedBatched(cublas, Trans::N, Trans::N, nb, K, KL, 1.0, A + (long long)i * nb + (long long)j0 * nb * n,
                         n, nn, X + (long long)j0 * nb, n, nn, 0.0, T, nb, strideT, batch, stream,
                         "batched GEMM (L X)");
    else // block diagonal (w = 0): T = 0, so this block row of X is zero
      gemmStridedBatched(cublas, Trans::N, Trans::N, nb, K, nb, 0.0, X + (long long)i * nb * (n + 1), n, nn,
                         X + (long long)i * nb, n, nn, 0.0, T, nb, strideT, batch, stream, "batched GEMM (zero T)");
    gemmStridedBatched(cublas, Trans::N, Trans::N, nb, K, nb, -1.0, X + (long long)i * nb * (n + 1), n, nn, T,
                       nb, strideT, 0.0, X + (long long)i * nb, n, nn, batch, stream, "batched GEMM (X_ii T)");
  }
}

} // namespace spex::gpu
