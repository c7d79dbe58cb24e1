// The decorrelation phase of a batch (batch_pipeline.h enqueueDecorrelate). Signal
// mode (EXTRACTION.md §4.4): the fiber blocks C_s of iCov^-1 the batch keeps (the
// selected inversion, batched_selected_inverse.h, or from X, batched_fiber_blocks.h),
// their eigen-pairs (batched_eigh.h syevBatched, or cusolverDnXsyevBatched), then
// C_s^-1/2 applied to flux, ivar and resolution. Noise mode: iCov^1/2 of the whole
// patch from cuSOLVER's eigen-pairs.
#include "batch_pipeline.h"

#include "batched_cholesky.h"
#include "batched_eigh.h"
#include "batched_fiber_blocks.h"
#include "batched_gemm.h"
#include "batched_selected_inverse.h"

namespace spex::gpu {

void enqueueDecorrelate(Workspace& w, BatchView v, const BatchShape& shape, DeviceTimeline& tl,
                        int batchId) {
  const int n = v.n, nb = v.nb, F = v.F, count = v.count;
  const long long nn = (long long)n * n;
  cudaStream_t s = w.stream;
  tl.phase(kPhaseDecorrelate, w.lane, batchId, s, [&] {
    if (!v.noise) {
      // The fiber blocks of iCov^-1 some patch of the batch keeps: by the selected
      // inversion, or C_s = X(s0:, s)^T X(s0:, s) (X = L^-1 lower triangular).
      tl.phase("fiber blocks", w.lane, batchId, s, [&] {
        if (w.selected) {
          // C_ss of the selected inversion on the factor's band (L_kk^-1 in C already);
          // blocks left of the first kept one are not formed.
          potriSelectedBlockBandedBatched(w.cublas, F, nb, w.potrf ? F - 1 : shape.w, shape.keptLo, v.A, v.C,
                                          (long long)F * nb * nb, v.T, blockBandedScratch(F, nb), count, s,
                                          w.fusedSelected ? SelectedInverseKernel::Fused : SelectedInverseKernel::Steps);
          return;
        }
        fiberBlocksBatched(w.cublas, F, nb, shape.keptLo, shape.keptHi, v.X, v.C, (long long)F * nb * nb,
                           count, s);
      }, 1);
      if (v.givenEigen) {
        v.K = w.K.get();
        v.KW = w.KW.get();
        tl.phase("eigh", w.lane, batchId, s, [&] {
          launchGatherKeptBlocks(v, s);
          if (!w.cusolverEigh) {
            // Its workspace (the rotation record) is A: the factor is not needed after the
            // solve, and count patches' A hold ~n^2 / maxKept doubles per fiber block. The
            // bisection method needs 3 nb^2 a block: where A is smaller (patches of one or
            // two fibers) the chain runs.
            const int blocks = count * v.maxKept;
            const bool bisect = w.bisectEigh && w.A.capacity() >= syevBatchedBisectWorkspace(nb, blocks);
            syevBatched(nb, v.K, nb, (long long)nb * nb, v.KW, w.info2.get(), blocks, w.A.get(), w.A.capacity(), s,
                        bisect ? SyevMethod::Bisect : SyevMethod::Chain,
                        w.newtonSchulzEigh ? SyevOrtho::NewtonSchulz : SyevOrtho::CholQR,
                        w.eighValues == CudaEngineOptions::EighValues::Ratio    ? SyevValues::Ratio
                        : w.eighValues == CudaEngineOptions::EighValues::Newton ? SyevValues::Newton
                                                                                : SyevValues::DivisionFree,
                        w.warpReduce ? SyevReduce::Warp : SyevReduce::Block,
                        w.sharedEighVectors ? SyevVectors::Shared : SyevVectors::Global);
            return;
          }
          checkCusolver(cusolverDnXsyevBatched(
                            w.solver, w.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER,
                            nb, CUDA_R_64F, v.K, nb, CUDA_R_64F, v.KW, CUDA_R_64F, w.kWork.get(),
                            w.kWork.capacity() * sizeof(double), w.kHostWork.data(),
                            w.kHostWork.size(), w.info2.get(), int64_t(count) * v.maxKept),
                        "cusolverDnXsyevBatched (fiber blocks)");
        }, 1);
      }
      tl.phase(v.givenEigen ? "apply Q" : "jacobi", w.lane, batchId, s,
               [&] { launchDecorrelateSignal(v, s); }, 1);
    } else {
      if (!w.syevLoop) {
        checkCusolver(cusolverDnXsyevBatched(w.solver, w.params, CUSOLVER_EIG_MODE_VECTOR,
                                             CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F, w.E.get(), n,
                                             CUDA_R_64F, w.W.get(), CUDA_R_64F, w.syevWork.get(),
                                             w.syevWork.capacity() * sizeof(double),
                                             w.syevHostWork.data(), w.syevHostWork.size(),
                                             w.info2.get(), count),
                      "cusolverDnXsyevBatched");
      } else {
        for (int p = 0; p < count; ++p)
          checkCusolver(cusolverDnDsyevd(w.solver, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER,
                                         n, w.E.get() + p * nn, n, w.W.get() + (long long)p * n,
                                         w.syevWork.get(), int(w.syevWork.capacity()),
                                         w.info2.get() + p),
                        "cusolverDnDsyevd");
      }
      launchNoiseScale(v, w.E.get(), s); // eigenvectors scaled by w^1/4
      // Q = (V w^1/4)(V w^1/4)^T = iCov^1/2 into A (L is no longer needed).
      gemmStridedBatched(w.cublas, Trans::N, Trans::T, n, n, n, 1.0, w.E.get(), n, nn, w.E.get(), n, nn, 0.0,
                         v.A, n, nn, count, s, "batched GEMM (Q)");
      launchNoiseOutputs(v, s);
    }
  });
}

} // namespace spex::gpu
