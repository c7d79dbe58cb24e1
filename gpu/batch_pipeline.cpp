// enqueueBatch (batch_pipeline.h): the normal equations and chi2pix phases, and the
// solve and decorrelation of batch_solve.cpp and batch_decorrelate.cpp in between.
#include "batch_pipeline.h"

namespace spex::gpu {

void enqueueBatch(Workspace& w, BatchView v, const DevPatch* table, int first, int count,
                  double regularize, const BatchShape& shape, DeviceTimeline& tl, int batchId) {
  v.patches = table + first;
  v.count = count;
  v.regularize = regularize;
  v.A = w.A.get();
  v.X = w.X.get();
  v.T = w.T.get();
  v.C = w.C.get();
  v.y = w.y.get();
  v.fw = w.fw.get();
  v.pm = w.pm.get();
  v.f = w.f.get();
  v.info = w.info.get();
  v.mbuf = w.mbuf.get();
  v.cbuf = w.cbuf.get();
  v.chi2 = w.chi2.get();
  v.tiles = w.tiles ? w.tile.get() : nullptr;
  v.W = w.W.get();
  const int n = v.n;
  const long long nn = (long long)n * n;
  cudaStream_t s = w.stream;

  // What the later steps read of A: the lower triangle's block band the factor is
  // computed on (cuSOLVER's potrf: all of it), and in noise mode the whole lower
  // triangle (iCov decorrelated whole, cuSOLVER's syev with the lower fill).
  v.band = (w.potrf || v.noise) ? v.F - 1 : shape.w;
  tl.phase(kPhaseNormal, w.lane, batchId, s, [&] {
    using NK = CudaEngineOptions::NormalKernel;
    if ((w.normalKernel == NK::Tree || w.normalKernel == NK::Lean) && normalEquationsLeanFit(v)) {
      launchNormalEquationsLean(v, s, w.normalKernel == NK::Tree); // writes all it must: no memsets
    } else if (w.normalKernel == NK::Tile && normalEquationsTileFit(v)) {
      launchNormalEquationsTile(v, s); // writes all it must: no memsets
    } else if (w.normalKernel != NK::Scan && normalEquationsPairsFit(v)) {
      launchNormalEquationsPairs(v, s); // writes all it must: no memsets
    } else {
      SPEX_CUDA(cudaMemsetAsync(v.A, 0, sizeof(double) * nn * count, s));
      SPEX_CUDA(cudaMemsetAsync(v.y, 0, sizeof(double) * n * count, s));
      SPEX_CUDA(cudaMemsetAsync(v.fw, 0, sizeof(double) * n * count, s));
      SPEX_CUDA(cudaMemsetAsync(v.pm, 0, sizeof(double) * n * count, s));
      launchNormalEquations(v, s);
    }
    launchPrior(v, s);
    if (v.noise) // keep iCov with its prior: noise mode decorrelates it whole
      SPEX_CUDA(cudaMemcpyAsync(w.E.get(), v.A, sizeof(double) * nn * count,
                                cudaMemcpyDeviceToDevice, s));
  });
  enqueueSolve(w, v, shape, tl, batchId);
  enqueueDecorrelate(w, v, shape, tl, batchId);
  tl.phase(kPhaseChi2, w.lane, batchId, s, [&] { launchChi2Model(v, s); });
}

} // namespace spex::gpu
