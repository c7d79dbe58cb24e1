// The solve phase of a batch (batch_pipeline.h enqueueSolve): Cholesky of iCov on the
// batch's block band (batched_cholesky.h; cusolverDnDpotrfBatched behind
// CudaEngineOptions::blockedCholesky = false), L^-1, and the deconvolved flux.
#include "batch_pipeline.h"

#include "batched_cholesky.h"

#include <functional>

namespace spex::gpu {

void enqueueSolve(Workspace& w, const BatchView& v, const BatchShape& shape, DeviceTimeline& tl,
                  int batchId) {
  const int n = v.n, nb = v.nb, F = v.F, count = v.count;
  cudaStream_t s = w.stream;
  tl.phase(kPhaseSolve, w.lane, batchId, s, [&] {
    const long long sT = blockBandedScratch(F, nb);
    tl.phase("cholesky", w.lane, batchId, s, [&] {
      if (w.potrf) {
        checkCusolver(cusolverDnDpotrfBatched(w.solver, CUBLAS_FILL_MODE_LOWER, n, w.Aptr.get(), n,
                                              v.info, count),
                      "cusolverDnDpotrfBatched");
        return;
      }
      // On the batch's block band (gpu/batched_cholesky.h); its steps timed apart
      // (nested ranges; a profile sums them per name).
      potrfBlockBandedBatched(w.cublas, F, nb, shape.w, v.A, v.X, v.T, sT, v.info, count, s,
                              [&](const char* step, const std::function<void()>& work) {
                                tl.phase(step, w.lane, batchId, s, work, 2);
                              });
    }, 1);
    tl.phase("inverse", w.lane, batchId, s, [&] {
      if (w.potrf) launchTriangularInverseDiag(v, s); // else the Cholesky made X_kk
      // potrf's factor is dense (its zeros outside the band are computed, not kept).
      trtriBlockBandedBatched(w.cublas, F, nb, w.potrf ? F - 1 : shape.w, v.A, v.X, v.T, sT, count, s);
    }, 1);
    launchSolveFlux(v, s);
  });
}

} // namespace spex::gpu
