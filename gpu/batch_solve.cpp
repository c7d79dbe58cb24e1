// The solve phase of a batch (batch_pipeline.h enqueueSolve): Cholesky of iCov on the
// batch's block band (batched_cholesky.h; cusolverDnDpotrfBatched behind
// CudaEngineOptions::blockedCholesky = false), then the deconvolved flux. With the
// selected inversion (CudaEngineOptions::selectedInverse, the default) the diagonal
// blocks' inverses L_kk^-1 go into C and f = (L L^T)^-1 y by block substitution through
// the band (batched_selected_inverse.h); otherwise X = L^-1 whole and f = X^T X y.
#include "batch_pipeline.h"

#include "batched_cholesky.h"
#include "batched_selected_inverse.h"

#include <functional>

namespace spex::gpu {

void enqueueSolve(Workspace& w, const BatchView& v, const BatchShape& shape, DeviceTimeline& tl,
                  int batchId) {
  const int n = v.n, nb = v.nb, F = v.F, count = v.count;
  cudaStream_t s = w.stream;
  // The factor's band: potrf's factor is dense (its zeros outside the band are
  // computed, not kept).
  const int wL = w.potrf ? F - 1 : shape.w;
  const long long sC = (long long)F * nb * nb;
  const DiagInverses inv = w.selected ? DiagInverses::compact(v.C, nb, sC) : DiagInverses::inX(v.X, F, nb);
  tl.phase(kPhaseSolve, w.lane, batchId, s, [&] {
    const long long sT = blockBandedScratch(F, nb);
    tl.phase("cholesky", w.lane, batchId, s, [&] {
      if (w.potrf) {
        checkCusolver(cusolverDnDpotrfBatched(w.solver, CUBLAS_FILL_MODE_LOWER, n, w.Aptr.get(), n,
                                              v.info, count),
                      "cusolverDnDpotrfBatched");
        if (w.selected) launchTriangularInverseDiag(v, inv.p, inv.ld, inv.step, inv.stride, s);
        return;
      }
      // On the batch's block band (gpu/batched_cholesky.h); its steps timed apart
      // (nested ranges; a profile sums them per name).
      potrfBlockBandedBatched(w.cublas, F, nb, shape.w, v.A, inv, v.T, sT, v.info, count, s,
                              [&](const char* step, const std::function<void()>& work) {
                                tl.phase(step, w.lane, batchId, s, work, 2);
                              },
                              w.choleskyColumns == CudaEngineOptions::CholeskyColumns::Tiled   ? CholeskyKernel::tiled
                              : w.choleskyColumns == CudaEngineOptions::CholeskyColumns::Fused ? CholeskyKernel::fused
                                                                                               : CholeskyKernel::steps);
    }, 1);
    if (w.selected) {
      tl.phase("banded solve", w.lane, batchId, s,
               [&] { potrsBlockBandedBatched(F, nb, wL, v.A, v.C, sC, v.y, v.f, v.info, count, s); }, 1);
      return;
    }
    tl.phase("inverse", w.lane, batchId, s, [&] {
      if (w.potrf) launchTriangularInverseDiag(v, inv.p, inv.ld, inv.step, inv.stride, s); // else the Cholesky made X_kk
      trtriBlockBandedBatched(w.cublas, F, nb, wL, v.A, v.X, v.T, sT, count, s);
    }, 1);
    launchSolveFlux(v, s);
  });
}

} // namespace spex::gpu
