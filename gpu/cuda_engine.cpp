// CudaEngine: host orchestration. Reads nothing, computes nothing per patch: it
// uploads, launches and copies back (see cuda_engine.h). Device memory, the device
// timeline (pooled events), device discovery and the batched linear algebra live in
// their own files (device_memory.h, device_timeline.h, device_discovery.cpp,
// batched_cholesky.h, batched_eigh.h). Per device:
//   H2D       image, PSF coefficients, patch table          (stream 0)
//   spots     every (fiber, bin) stamp the device's patches use, once; each patch's
//             fiber coupling width (read back: the band its batch is solved on)
//   per batch of P patches (P from the memory budget), alternating between
//   workspaces (streams 1..W):
//     normal equations  sparse A^T W A, y, fluxweight, pixmask_fraction, prior
//     solve             Cholesky and L^-1 on the batch's block band
//                       (potrfBlockBandedBatched, trtriBlockBandedBatched), f = L^-T L^-1 y
//     decorrelate       fiber blocks of iCov^-1 (batched GEMMs), their eigen-pairs
//                       (syevBatched), C_s^-1/2, flux, ivar, resolution into the frame
//     chi2pix           model over the box, chi2pix, pixmask, f, model image
//   retry     patches whose Cholesky failed, once, with regularize = 1e-4
//   D2H       the device's rows of the frame arrays and the model image
#include "cuda_engine.h"

#include "batched_cholesky.h"
#include "batched_eigh.h"
#include "device_discovery.h"
#include "device_memory.h"
#include "device_timeline.h"
#include "kernel_tracer.h"
#include "kernels.h"

#include "core/errors.h"
#include "core/image.h"
#include "core/psf/gauss_hermite_psf.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <functional>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

namespace spex {

using gpu::BatchView;
using gpu::DevFrame;
using gpu::DevLegendre;
using gpu::DevPatch;
using gpu::DevPsf;
using gpu::SpotTable;
using gpu::checkCublas;
using gpu::checkCusolver;
using gpu::DeviceArray;
using gpu::DeviceTimeline;
using gpu::EventPool;
using gpu::PinnedArray;

// One workspace: a stream, its library handles and the batch buffers.
struct Workspace {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  cusolverDnParams_t params = nullptr;
  int lane = 0;
  int capacity = 0; // patches the buffers hold for the current layout
  int n = 0, F = 0, nb = 0, maxBoxArea = 0;
  bool noise = false;
  bool syevLoop = false; // no batched syev of this size: syevd per patch
  bool potrf = false;    // Cholesky by cusolverDnDpotrfBatched instead of the blocked one
  bool cusolverEigh = false; // kept fiber blocks by cusolverDnXsyevBatched, not syevBatched
  DeviceArray<double> A, X, T, C, y, fw, pm, f, mbuf, cbuf, chi2, E, W, syevWork;
  DeviceArray<double> K, KW, kWork; // library eigensolver of the kept fiber blocks
  std::vector<char> kHostWork;
  int maxKept = 0;
  DeviceArray<double*> Aptr;
  DeviceArray<int> info, info2;
  std::vector<char> syevHostWork;

  // Device bytes the buffers hold now.
  std::size_t bytes() const {
    std::size_t b = 0;
    for (const DeviceArray<double>* a : {&A, &X, &T, &C, &y, &fw, &pm, &f, &mbuf, &cbuf, &chi2, &E,
                                         &W, &syevWork, &K, &KW, &kWork})
      b += a->capacity() * sizeof(double);
    return b + Aptr.capacity() * sizeof(double*) + (info.capacity() + info2.capacity()) * sizeof(int);
  }
};

struct CudaEngine::Device {
  int index = 0;
  std::size_t held = 0;      // bytes allocated by the engine now
  std::size_t peak = 0;
  cudaStream_t main = nullptr;
  std::vector<std::unique_ptr<Workspace>> ws;
  DeviceArray<double> pix, ivar, pool, spotV, flux, ivarOut, res, chi2pix, pixmask, deconv, model;
  DeviceArray<DevLegendre> sets;
  DeviceArray<int2> corner;
  DeviceArray<DevPatch> patches, retryPatches;
  DeviceArray<int> coupling; // per patch of the request (CudaEngineOptions::bandedSolve)
  PinnedArray<int> hInfo, hCoupling;
  PinnedArray<double> hChi2;
  EventPool events; // the timeline's and the streams' synchronisation events
  CudaMemoryPlan plan; // of the last extraction
  std::size_t limit = SIZE_MAX; // workspaces may not take held past this (the budget)
  // The batch that last fitted the budget for a layout, so a warm call does not try
  // a larger one again (the library workspaces are only known once allocated).
  struct Fit {
    int n = 0, F = 0, nb = 0, maxBoxArea = 0, maxKept = 0, W = 0;
    bool noise = false, keptEigh = false;
    std::size_t budget = 0, fixed = 0;
    int batch = 0;
    bool same(const Fit& o) const {
      return n == o.n && F == o.F && nb == o.nb && maxBoxArea == o.maxBoxArea && maxKept == o.maxKept &&
             W == o.W && noise == o.noise && keptEigh == o.keptEigh && budget == o.budget && fixed == o.fixed;
    }
  } fit;

  void track() { peak = std::max(peak, held); }
  ~Device() {
    cudaSetDevice(index);
    for (auto& w : ws) {
      if (w->params) cusolverDnDestroyParams(w->params);
      if (w->solver) cusolverDnDestroy(w->solver);
      if (w->cublas) cublasDestroy(w->cublas);
      if (w->stream) cudaStreamDestroy(w->stream);
    }
    if (main) cudaStreamDestroy(main);
  }
};

namespace {

// Bytes of batch workspace one patch needs.
std::size_t bytesPerPatch(int n, int F, int nb, int maxBoxArea, bool noise) {
  std::size_t d = 2 * std::size_t(n) * n            // A, X
                  + std::size_t(nb) * std::max(F - 1, 1) * nb // T
                  + std::size_t(F) * nb * nb         // C
                  + 4 * std::size_t(n)               // y, fw, pm, f
                  + 2 * std::size_t(maxBoxArea) + 1; // mbuf, cbuf, chi2
  if (noise) d += std::size_t(n) * n + n;            // E, W (syev workspace extra)
  return d * sizeof(double) + sizeof(double*) + 2 * sizeof(int);
}

// Allocates ws for `cap` patches of the layout; false when the device ran out.
bool reserveWorkspace(Workspace& w, CudaEngine::Device& dev, int cap, int n, int F, int nb,
                      int maxBoxArea, bool noise) {
  std::size_t* h = &dev.held;
  const std::size_t L = dev.limit;
  const std::size_t P = std::size_t(cap);
  const bool layoutChanged = w.n != n || w.F != F || w.nb != nb;
  bool ok = w.A.reserve(P * n * n, h, L) && w.X.reserve(P * n * n, h, L) &&
            w.T.reserve(P * nb * std::max(F - 1, 1) * nb, h, L) && w.C.reserve(P * F * nb * nb, h, L) &&
            w.y.reserve(P * n, h, L) && w.fw.reserve(P * n, h, L) && w.pm.reserve(P * n, h, L) &&
            w.f.reserve(P * n, h, L) && w.mbuf.reserve(P * maxBoxArea, h, L) &&
            w.cbuf.reserve(P * maxBoxArea, h, L) && w.chi2.reserve(P, h, L) && w.Aptr.reserve(P, h, L) &&
            w.info.reserve(P, h, L) && w.info2.reserve(P, h, L);
  if (ok && noise) ok = w.E.reserve(P * n * n, h, L) && w.W.reserve(P * n, h, L);
  if (!ok) return false;
  dev.track();
  if (layoutChanged || cap > w.capacity) {
    // X's blocks above the diagonal are never written: they must stay zero for the
    // GEMMs that build L^-1.
    SPEX_CUDA(cudaMemsetAsync(w.X.get(), 0, w.X.capacity() * sizeof(double), w.stream));
    std::vector<double*> ptrs(P);
    for (std::size_t p = 0; p < P; ++p) ptrs[p] = w.A.get() + p * n * n;
    SPEX_CUDA(cudaMemcpyAsync(w.Aptr.get(), ptrs.data(), P * sizeof(double*),
                              cudaMemcpyHostToDevice, w.stream));
    SPEX_CUDA(cudaStreamSynchronize(w.stream));
  }
  if (noise) {
    std::size_t dBytes = 0, hBytes = 0;
    const cusolverStatus_t st = cusolverDnXsyevBatched_bufferSize(
        w.solver, w.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F,
        w.E.get(), n, CUDA_R_64F, w.W.get(), CUDA_R_64F, &dBytes, &hBytes, cap);
    w.syevLoop = st != CUSOLVER_STATUS_SUCCESS;
    if (w.syevLoop) {
      // This cuSOLVER has no batched syev for this size: one syevd per patch.
      int lwork = 0;
      checkCusolver(cusolverDnDsyevd_bufferSize(w.solver, CUSOLVER_EIG_MODE_VECTOR,
                                                CUBLAS_FILL_MODE_LOWER, n, w.E.get(), n,
                                                w.W.get(), &lwork),
                    "cusolverDnDsyevd_bufferSize");
      dBytes = std::size_t(lwork) * sizeof(double);
    }
    if (!w.syevWork.reserve(dBytes / sizeof(double) + 1, h, L)) return false;
    w.syevHostWork.resize(std::max<std::size_t>(hBytes, 1));
    dev.track();
  }
  w.capacity = cap;
  w.n = n;
  w.F = F;
  w.nb = nb;
  w.maxBoxArea = maxBoxArea;
  w.noise = noise;
  return true;
}

void releaseWorkspace(Workspace& w, CudaEngine::Device& dev) {
  std::size_t* h = &dev.held;
  for (DeviceArray<double>* a : {&w.A, &w.X, &w.T, &w.C, &w.y, &w.fw, &w.pm, &w.f, &w.mbuf,
                                 &w.cbuf, &w.chi2, &w.E, &w.W, &w.syevWork, &w.K, &w.KW, &w.kWork})
    a->release(h);
  w.Aptr.release(h);
  w.info.release(h);
  w.info2.release(h);
  w.capacity = 0;
  w.maxKept = 0;
}

// Before the request's fixed arrays grow by `growth` bytes: where that would take
// the engine past its budget, the batch workspaces go first (runDevice sizes them
// again from what is left), so the engine's peak stays within the budget.
void makeRoom(CudaEngine::Device& dev, std::size_t growth, std::size_t budget) {
  if (growth && dev.held + growth > budget)
    for (auto& w : dev.ws) releaseWorkspace(*w, dev);
}

// Kept fiber blocks and their eigen-pairs for `cap` patches of maxKept blocks each
// (K, KW, info2), and cuSOLVER's workspace when it solves them.
bool reserveKeptEigh(Workspace& w, CudaEngine::Device& dev, int cap, int nb, int maxKept) {
  std::size_t* h = &dev.held;
  const std::size_t L = dev.limit;
  const std::size_t m = std::size_t(cap) * maxKept;
  if (!w.K.reserve(m * nb * nb, h, L) || !w.KW.reserve(m * nb, h, L) || !w.info2.reserve(m, h, L))
    return false;
  w.maxKept = maxKept;
  if (!w.cusolverEigh) {
    dev.track();
    return true;
  }
  std::size_t dBytes = 0, hBytes = 0;
  checkCusolver(cusolverDnXsyevBatched_bufferSize(w.solver, w.params, CUSOLVER_EIG_MODE_VECTOR,
                                                  CUBLAS_FILL_MODE_LOWER, nb, CUDA_R_64F,
                                                  w.K.get(), nb, CUDA_R_64F, w.KW.get(),
                                                  CUDA_R_64F, &dBytes, &hBytes, int64_t(m)),
                "cusolverDnXsyevBatched_bufferSize (fiber blocks)");
  if (!w.kWork.reserve(dBytes / sizeof(double) + 1, h, L)) return false;
  w.kHostWork.resize(std::max<std::size_t>(hBytes, 1));
  w.maxKept = maxKept;
  dev.track();
  return true;
}

// Uploads the PSF as a coefficient pool and set descriptors (kernels.h DevPsf).
void uploadPsf(const GaussHermitePsf& psf, CudaEngine::Device& dev, cudaStream_t s, DevPsf& out) {
  std::vector<double> pool;
  std::vector<DevLegendre> sets;
  auto add = [&](const LegendreSet& l) {
    DevLegendre d;
    d.offset = int(pool.size());
    d.ncoeff = l.coeff.cols;
    d.wmin = l.wavemin;
    d.wmax = l.wavemax;
    pool.insert(pool.end(), l.coeff.data.begin(), l.coeff.data.end());
    sets.push_back(d);
  };
  add(psf.xTrace);
  add(psf.yTrace);
  add(psf.ghSigX);
  add(psf.ghSigY);
  for (int i = 0; i <= psf.ghdegX; ++i)
    for (int j = 0; j <= psf.ghdegY; ++j) add(psf.ghCoeff(i, j));
  dev.pool.need(pool.size(), &dev.held, "PSF coefficients");
  dev.sets.need(sets.size(), &dev.held, "PSF sets");
  SPEX_CUDA(cudaMemcpyAsync(dev.pool.get(), pool.data(), pool.size() * sizeof(double),
                            cudaMemcpyHostToDevice, s));
  SPEX_CUDA(cudaMemcpyAsync(dev.sets.get(), sets.data(), sets.size() * sizeof(DevLegendre),
                            cudaMemcpyHostToDevice, s));
  SPEX_CUDA(cudaStreamSynchronize(s)); // the host vectors go out of scope
  out.pool = dev.pool.get();
  out.sets = dev.sets.get();
  out.nfiber = psf.nfiber;
  out.hsizeX = psf.hsizeX;
  out.hsizeY = psf.hsizeY;
  out.degX = psf.ghdegX;
  out.degY = psf.ghdegY;
}

constexpr double kRetryRegularize = 1e-4; // EXTRACTION.md §4.3

// What one device does for its share of a request.
struct DeviceJob {
  const ExtractionRequest* req = nullptr;
  const PatchPlan* plan = nullptr;
  std::vector<int> todo;   // patch indices, plan order
  int rowLo = 0, rowHi = 0; // output rows (fiber - plan.fiberMin)
  int F = 0, nb = 0, maxBoxArea = 0;
  double psferr = 0.01;
  // outputs
  std::vector<PatchDiagnostics> diags;
  Array2D<double> model; // this device's model image when several devices share a frame
  bool cancelled = false;
  int done = 0;
};

const char* kPhaseH2D = "H2D";
const char* kPhaseSpots = "spots";
const char* kPhaseNormal = "normal equations";
const char* kPhaseSolve = "solve";
const char* kPhaseDecorrelate = "decorrelate";
const char* kPhaseChi2 = "chi2pix";
const char* kPhaseD2H = "D2H";

// What the host knows of a batch's patches: the fiber coupling width to solve on
// (F - 1: dense) and the fiber blocks any of them keeps, [keptLo, keptHi).
struct BatchShape {
  int w = 0;
  int keptLo = 0, keptHi = 0;
};

// The batch pipeline on workspace w for patches [first, first + count) of `table`.
void launchBatch(Workspace& w, BatchView v, const DevPatch* table, int first, int count,
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
  v.W = w.W.get();
  const int n = v.n, nb = v.nb, F = v.F;
  const long long nn = (long long)n * n;
  cudaStream_t s = w.stream;

  tl.phase(kPhaseNormal, w.lane, batchId, s, [&] {
    SPEX_CUDA(cudaMemsetAsync(v.A, 0, sizeof(double) * nn * count, s));
    SPEX_CUDA(cudaMemsetAsync(v.y, 0, sizeof(double) * n * count, s));
    SPEX_CUDA(cudaMemsetAsync(v.fw, 0, sizeof(double) * n * count, s));
    SPEX_CUDA(cudaMemsetAsync(v.pm, 0, sizeof(double) * n * count, s));
    gpu::launchNormalEquations(v, s);
    gpu::launchPrior(v, s);
    if (v.noise) // keep iCov with its prior: noise mode decorrelates it whole
      SPEX_CUDA(cudaMemcpyAsync(w.E.get(), v.A, sizeof(double) * nn * count,
                                cudaMemcpyDeviceToDevice, s));
  });
  tl.phase(kPhaseSolve, w.lane, batchId, s, [&] {
    const long long sT = gpu::blockBandedScratch(F, nb);
    tl.phase("cholesky", w.lane, batchId, s, [&] {
      if (w.potrf) {
        checkCusolver(cusolverDnDpotrfBatched(w.solver, CUBLAS_FILL_MODE_LOWER, n, w.Aptr.get(), n,
                                              v.info, count),
                      "cusolverDnDpotrfBatched");
        return;
      }
      // On the batch's block band (gpu/batched_cholesky.h); its steps timed apart
      // (nested ranges; a profile sums them per name).
      gpu::potrfBlockBandedBatched(w.cublas, F, nb, shape.w, v.A, v.X, v.T, sT, v.info, count, s,
                                   [&](const char* step, const std::function<void()>& work) {
                                     tl.phase(step, w.lane, batchId, s, work, 2);
                                   });
    }, 1);
    tl.phase("inverse", w.lane, batchId, s, [&] {
      if (w.potrf) gpu::launchTriangularInverseDiag(v, s); // else the Cholesky made X_kk
      // potrf's factor is dense (its zeros outside the band are computed, not kept).
      gpu::trtriBlockBandedBatched(w.cublas, F, nb, w.potrf ? F - 1 : shape.w, v.A, v.X, v.T, sT, count, s);
    }, 1);
    gpu::launchSolveFlux(v, s);
  });
  tl.phase(kPhaseDecorrelate, w.lane, batchId, s, [&] {
    const double one = 1.0, zero = 0.0;
    if (!v.noise) {
      // C_s = X(s0:, s)^T X(s0:, s): the fiber blocks of iCov^-1 (X lower triangular),
      // for the blocks some patch of the batch keeps.
      tl.phase("fiber blocks", w.lane, batchId, s, [&] {
      for (int f = shape.keptLo; f < shape.keptHi; ++f) {
        const long long o = (long long)f * nb * (n + 1);
        checkCublas(cublasDgemmStridedBatched(w.cublas, CUBLAS_OP_T, CUBLAS_OP_N, nb, nb,
                                              n - f * nb, &one, v.X + o, n, nn, v.X + o, n, nn,
                                              &zero, v.C + (long long)f * nb * nb, nb,
                                              (long long)F * nb * nb, count),
                    "cublasDgemmStridedBatched (C_s)");
      }
      }, 1);
      if (v.givenEigen) {
        v.K = w.K.get();
        v.KW = w.KW.get();
        tl.phase("eigh", w.lane, batchId, s, [&] {
          gpu::launchGatherKeptBlocks(v, s);
          if (!w.cusolverEigh) {
            // Its workspace (the rotation record) is A: the factor is not needed after the
            // solve, and count patches' A hold ~n^2 / maxKept doubles per fiber block.
            gpu::syevBatched(nb, v.K, nb, (long long)nb * nb, v.KW, w.info2.get(), count * v.maxKept,
                             w.A.get(), w.A.capacity(), s);
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
               [&] { gpu::launchDecorrelateSignal(v, s); }, 1);
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
      gpu::launchNoiseScale(v, w.E.get(), s); // eigenvectors scaled by w^1/4
      // Q = (V w^1/4)(V w^1/4)^T = iCov^1/2 into A (L is no longer needed).
      checkCublas(cublasDgemmStridedBatched(w.cublas, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one,
                                            w.E.get(), n, nn, w.E.get(), n, nn, &zero, v.A, n, nn,
                                            count),
                  "cublasDgemmStridedBatched (Q)");
      gpu::launchNoiseOutputs(v, s);
    }
  });
  tl.phase(kPhaseChi2, w.lane, batchId, s, [&] { gpu::launchChi2Model(v, s); });
}

} // namespace

// ---------------------------------------------------------------------------------

CudaEngine::CudaEngine(CudaEngineOptions options) : m_options(std::move(options)) {
  std::string why;
  if (!cudaAvailable(&why)) throw GpuError("CUDA engine unavailable: " + why);
  int count = 0;
  SPEX_CUDA(cudaGetDeviceCount(&count));
  if (m_options.gpus.empty())
    for (int d = 0; d < count; ++d) m_options.gpus.push_back(d);
  if (m_options.streams < 1) m_options.streams = 1;
  if (m_options.memoryBudgetBytes == 0) m_options.memoryBudgetBytes = kCudaDefaultMemoryBudget;
  for (int d : m_options.gpus) {
    if (d < 0 || d >= count)
      throw GpuError("GPU " + std::to_string(d) + " does not exist (" + std::to_string(count) +
                     " device(s) visible)");
    cudaDeviceProp prop{};
    SPEX_CUDA(cudaGetDeviceProperties(&prop, d));
    if (prop.major < gpu::kMinComputeMajor)
      throw GpuError("GPU " + std::to_string(d) + " (" + prop.name + ") has compute capability " +
                     std::to_string(prop.major) + "." + std::to_string(prop.minor) +
                     "; this build needs 8.0 or newer");
    auto dev = std::make_unique<Device>();
    dev->index = d;
    SPEX_CUDA(cudaSetDevice(d));
    SPEX_CUDA(cudaStreamCreateWithFlags(&dev->main, cudaStreamNonBlocking));
    for (int k = 0; k < m_options.streams; ++k) {
      auto w = std::make_unique<Workspace>();
      w->potrf = !m_options.blockedCholesky;
      w->cusolverEigh = m_options.eigh == CudaEngineOptions::Eigh::Cusolver;
      SPEX_CUDA(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
      checkCublas(cublasCreate(&w->cublas), "cublasCreate");
      checkCublas(cublasSetStream(w->cublas, w->stream), "cublasSetStream");
      checkCusolver(cusolverDnCreate(&w->solver), "cusolverDnCreate");
      checkCusolver(cusolverDnSetStream(w->solver, w->stream), "cusolverDnSetStream");
      checkCusolver(cusolverDnCreateParams(&w->params), "cusolverDnCreateParams");
      dev->ws.push_back(std::move(w));
    }
    m_devices.push_back(std::move(dev));
  }
}

CudaEngine::~CudaEngine() = default;

std::string CudaEngine::name() const {
  std::string s = "cuda:";
  for (std::size_t i = 0; i < m_options.gpus.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(m_options.gpus[i]);
  }
  return s;
}

std::vector<std::size_t> CudaEngine::peakDeviceBytes() const {
  std::vector<std::size_t> v;
  for (const auto& d : m_devices) v.push_back(d->peak);
  return v;
}

std::vector<CudaMemoryPlan> CudaEngine::memoryPlans() const {
  std::vector<CudaMemoryPlan> v;
  for (const auto& d : m_devices) v.push_back(d->plan);
  return v;
}

namespace {

// Per-device state of one extract() call: the timeline and its time origin, and the
// PSF uploaded by prefetch().
struct DeviceRun {
  explicit DeviceRun(EventPool& pool) : tl(pool), pool(pool) {}
  DeviceTimeline tl;
  EventPool& pool;
  cudaEvent_t t0 = nullptr;
  int64_t hostT0 = 0;
  int mainLane = 0;
  DevPsf psf;
  bool uploaded = false;
  ~DeviceRun() {
    if (t0) pool.release(t0);
  }
};

// Opens the device's timeline and uploads the image and the PSF. Runs on its own
// thread while the host builds the patch plan, so the copies are off the critical path.
void prefetch(CudaEngine::Device& dev, DeviceRun& run, const ExtractionRequest& req,
              std::size_t budget, ProfileRecorder& rec, gpu::KernelTracer* tracer) {
  SPEX_CUDA(cudaSetDevice(dev.index));
  const std::string prefix = "cuda:" + std::to_string(dev.index) + " stream ";
  run.mainLane = rec.lane(prefix + "0");
  for (std::size_t k = 0; k < dev.ws.size(); ++k)
    dev.ws[k]->lane = rec.lane(prefix + std::to_string(k + 1));
  if (tracer) {
    run.tl.setTracer(tracer);
    tracer->addStream(dev.index, dev.main, run.mainLane);
    for (auto& w : dev.ws) tracer->addStream(dev.index, w->stream, w->lane);
  }
  // Time origin: an event the host has waited for.
  run.t0 = run.pool.acquire();
  SPEX_CUDA(cudaEventRecord(run.t0, dev.main));
  SPEX_CUDA(cudaEventSynchronize(run.t0));
  run.hostT0 = rec.nowNs();
  const Image& image = *req.image;
  const std::size_t npixImg = std::size_t(image.ny) * image.nx;
  if (image.pix.size() != npixImg || image.ivar.size() != npixImg)
    return; // validateRequest reports it; runDevice never starts
  run.tl.phase(kPhaseH2D, run.mainLane, -1, dev.main, [&] {
    makeRoom(dev, dev.pix.growth(npixImg) + dev.ivar.growth(npixImg), budget);
    dev.pix.need(npixImg, &dev.held, "image");
    dev.ivar.need(npixImg, &dev.held, "image ivar");
    dev.track();
    SPEX_CUDA(cudaMemcpyAsync(dev.pix.get(), image.pix.data.data(), npixImg * sizeof(double),
                              cudaMemcpyHostToDevice, dev.main));
    SPEX_CUDA(cudaMemcpyAsync(dev.ivar.get(), image.ivar.data.data(), npixImg * sizeof(double),
                              cudaMemcpyHostToDevice, dev.main));
    uploadPsf(*req.psf, dev, dev.main, run.psf);
  });
  run.uploaded = true;
}

// Runs one device's share. Writes the device's rows of result (disjoint from other
// devices) and its diagnostics into job.
void runDevice(CudaEngine::Device& dev, DeviceRun& run, const CudaEngineOptions& opt,
               DeviceJob& job, ExtractionResult& result, bool directModel, ProfileRecorder& rec,
               const CancelToken& cancel) {
  const ExtractionRequest& req = *job.req;
  const PatchPlan& plan = *job.plan;
  const GaussHermitePsf& psf = *req.psf;
  const Image& image = *req.image;
  SPEX_CUDA(cudaSetDevice(dev.index));
  if (!run.uploaded) throw GpuError("cuda:" + std::to_string(dev.index) + ": inputs not uploaded");
  const int mainLane = run.mainLane;
  DeviceTimeline& tl = run.tl;
  cudaStream_t ms = dev.main;

  const int ntodo = int(job.todo.size());
  const int F = job.F, nb = job.nb, n = F * nb;
  const bool noise = req.params.mode == Decorrelation::Noise;
  const int nrow = job.rowHi - job.rowLo, nwave = plan.wave.n, nd = psf.hsizeY, nk = 2 * nd + 1;
  const std::size_t npixImg = std::size_t(image.ny) * image.nx;

  // Patch table and spot-table extent.
  std::vector<DevPatch> table(ntodo);
  int fLo = INT32_MAX, fHi = INT32_MIN, kLo = INT32_MAX, kHi = INT32_MIN;
  for (int i = 0; i < ntodo; ++i) {
    const Patch& p = plan.patches[job.todo[i]];
    DevPatch& d = table[i];
    d.fiberPad0 = p.fiberPad0;
    d.nfiberPad = p.nfiberPad;
    d.wavePad0 = p.wavePad0;
    d.keptFiberOff = p.keptFiberOffset();
    d.nfiber = p.nfiber;
    d.keptWaveOff = p.keptWaveOffset();
    d.nwave = p.nwave;
    d.outFiber = p.fiber0 - plan.fiberMin - job.rowLo;
    d.outWave = p.wave0;
    d.x0 = p.box.x0;
    d.x1 = p.box.x1;
    d.y0 = p.box.y0;
    d.y1 = p.box.y1;
    fLo = std::min(fLo, p.fiberPad0);
    fHi = std::max(fHi, p.fiberPad0 + p.nfiberPad);
    kLo = std::min(kLo, p.wavePad0);
    kHi = std::max(kHi, p.wavePad0 + p.nwavePad);
  }

  SpotTable st;
  DevFrame fr;
  const DevPsf dpsf = run.psf;
  tl.phase(kPhaseH2D, mainLane, -1, ms, [&] {
    makeRoom(dev, dev.patches.growth(std::max(ntodo, 1)), opt.memoryBudgetBytes);
    dev.patches.need(std::max(ntodo, 1), &dev.held, "patch table");
    SPEX_CUDA(cudaMemcpyAsync(dev.patches.get(), table.data(), ntodo * sizeof(DevPatch),
                              cudaMemcpyHostToDevice, ms));
  });

  tl.phase(kPhaseSpots, mainLane, -1, ms, [&] {
    st.f0 = fLo;
    st.nf = fHi - fLo;
    st.k0 = kLo;
    st.nk = kHi - kLo;
    st.nx = psf.spotNx();
    st.ny = psf.spotNy();
    const std::size_t nspot = std::size_t(st.nf) * st.nk;
    {
      const std::size_t nfw = std::size_t(nrow) * nwave;
      std::size_t g = dev.spotV.growth(nspot * st.nx * st.ny) + dev.corner.growth(nspot) +
                      dev.res.growth(nfw * nk) + (req.model ? dev.model.growth(npixImg) : 0) +
                      (opt.bandedSolve ? dev.coupling.growth(std::max(ntodo, 1)) : 0);
      for (auto* a : {&dev.flux, &dev.ivarOut, &dev.chi2pix, &dev.pixmask, &dev.deconv}) g += a->growth(nfw);
      makeRoom(dev, g, opt.memoryBudgetBytes);
    }
    dev.spotV.need(nspot * st.nx * st.ny, &dev.held, "spot table");
    dev.corner.need(nspot, &dev.held, "spot corners");
    dev.track();
    st.v = dev.spotV.get();
    st.corner = dev.corner.get();
    gpu::launchSpotTable(dpsf, st, plan.wave.wmin, plan.wave.dw, ms);
    if (opt.bandedSolve && ntodo > 0) {
      // Each patch's fiber coupling, for the batches' band (read back before they start).
      dev.coupling.need(ntodo, &dev.held, "fiber coupling");
      gpu::launchFiberCoupling(dev.patches.get(), ntodo, st, nb, dev.coupling.get(), ms);
      SPEX_CUDA(cudaMemcpyAsync(dev.hCoupling.get(ntodo), dev.coupling.get(), ntodo * sizeof(int),
                                cudaMemcpyDeviceToHost, ms));
    }
    // Frame arrays of this device's rows, zeroed (failed patches stay zero).
    const std::size_t nfw = std::size_t(nrow) * nwave;
    for (auto* a : {&dev.flux, &dev.ivarOut, &dev.chi2pix, &dev.pixmask, &dev.deconv}) {
      a->need(nfw, &dev.held, "frame arrays");
      SPEX_CUDA(cudaMemsetAsync(a->get(), 0, nfw * sizeof(double), ms));
    }
    dev.res.need(nfw * nk, &dev.held, "resolution");
    SPEX_CUDA(cudaMemsetAsync(dev.res.get(), 0, nfw * nk * sizeof(double), ms));
    if (req.model) {
      dev.model.need(npixImg, &dev.held, "model image");
      SPEX_CUDA(cudaMemsetAsync(dev.model.get(), 0, npixImg * sizeof(double), ms));
    }
    dev.track();
  });
  fr.flux = dev.flux.get();
  fr.ivar = dev.ivarOut.get();
  fr.resolution = dev.res.get();
  fr.chi2pix = dev.chi2pix.get();
  fr.pixmask = dev.pixmask.get();
  fr.deconvolved = dev.deconv.get();
  fr.model = req.model ? dev.model.get() : nullptr;
  fr.nrow = nrow;
  fr.nwave = nwave;
  fr.ndiag = nd;

  const cudaEvent_t ready = dev.events.acquire();
  SPEX_CUDA(cudaEventRecord(ready, ms));
  for (auto& w : dev.ws) SPEX_CUDA(cudaStreamWaitEvent(w->stream, ready, 0));

  // Batch size (CudaEngineOptions::memoryBudgetBytes): what the budget leaves after
  // the request's fixed arrays, over the workspaces, capped at the target batch that
  // keeps the card busy and at two batches per workspace (so transfers and phases of
  // neighbouring batches overlap). Workspace sizes are estimated first, then checked
  // against what the allocations really hold (library workspaces included).
  const int W = int(dev.ws.size());
  int maxKept = 1;
  for (const DevPatch& d : table) maxKept = std::max(maxKept, d.nfiber);
  const bool keptEigh = opt.eigh != CudaEngineOptions::Eigh::Jacobi && !noise;
  const std::size_t budget = opt.memoryBudgetBytes ? opt.memoryBudgetBytes : kCudaDefaultMemoryBudget;
  std::size_t wsHeld = 0;
  for (auto& w : dev.ws) wsHeld += w->bytes();
  const std::size_t fixed = dev.held - wsHeld;
  std::size_t per = bytesPerPatch(n, F, nb, job.maxBoxArea, noise);
  if (keptEigh)
    per += std::size_t(maxKept) * (std::size_t(nb) * nb + nb) * (dev.ws[0]->cusolverEigh ? 2 : 1) * sizeof(double);
  auto budgetError = [&](const std::string& what) {
    const double MiB = 1024.0 * 1024.0;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "CUDA memory budget %.0f MiB on cuda:%d is too small: %s (frame arrays %.0f MiB, "
                  "one patch per stream %d x %.1f MiB); raise the budget (--gpu-memory)",
                  double(budget) / MiB, dev.index, what.c_str(), double(fixed) / MiB, W,
                  double(per) / MiB);
    return GpuError(buf);
  };
  if (fixed + std::size_t(W) * per > budget)
    throw budgetError("it must hold the frame arrays and one patch per stream");
  int P = int(std::min<std::size_t>((budget - fixed) / (std::size_t(W) * per), 65535));
  P = std::min(P, opt.maxBatch > 0 ? opt.maxBatch : kCudaTargetBatch);
  P = std::min(P, std::max(std::min(64, ntodo), (ntodo + 2 * W - 1) / (2 * W)));
  P = std::max(P, 1);
  CudaEngine::Device::Fit key;
  key.n = n, key.F = F, key.nb = nb, key.maxBoxArea = job.maxBoxArea, key.maxKept = maxKept;
  key.W = W, key.noise = noise, key.keptEigh = keptEigh, key.budget = budget, key.fixed = fixed;
  if (dev.fit.same(key)) P = std::min(P, dev.fit.batch);
  auto wsBytes = [&] {
    std::size_t b = 0;
    for (auto& w : dev.ws) b += w->bytes();
    return b;
  };
  dev.limit = budget; // the workspaces' allocations check it (DeviceArray::reserve)
  for (;;) {
    bool ok = true, larger = false; // larger: workspaces kept from an earlier, larger batch
    for (auto& w : dev.ws) {
      larger = larger || w->capacity > P;
      if (w->capacity < P || w->n != n || w->F != F || w->nb != nb ||
          w->maxBoxArea < job.maxBoxArea || (noise && !w->noise)) {
        if (w->capacity && (w->n != n || w->F != F || w->nb != nb)) releaseWorkspace(*w, dev);
        if (!reserveWorkspace(*w, dev, P, n, F, nb, job.maxBoxArea, noise)) {
          ok = false;
          break;
        }
      }
      // Eigen-pairs of the kept fiber blocks (CudaEngineOptions::eigh).
      if (keptEigh &&
          (w->maxKept < maxKept || w->K.capacity() < std::size_t(w->capacity) * maxKept * nb * nb) &&
          !reserveKeptEigh(*w, dev, w->capacity, nb, maxKept)) {
        ok = false;
        break;
      }
    }
    if (ok) break;
    // Over the budget (the library workspaces were larger than estimated) or out of
    // device memory: release, shrink the batch and try again.
    for (auto& w : dev.ws) releaseWorkspace(*w, dev);
    if (larger) continue; // first the same batch, allocated afresh
    if (P == 1) {
      std::size_t freeB = 0, totalB = 0;
      cudaMemGetInfo(&freeB, &totalB);
      throw budgetError("one patch per stream does not fit beside the frame arrays (the device has " +
                        std::to_string(freeB >> 20) + " MiB free)");
    }
    P = std::max(1, std::min(P - 1, P * 7 / 8));
  }
  dev.limit = SIZE_MAX;
  key.batch = P;
  dev.fit = key;
  dev.plan = CudaMemoryPlan{};
  dev.plan.device = dev.index;
  dev.plan.budgetBytes = budget;
  dev.plan.fixedBytes = fixed;
  dev.plan.batchBytes = wsBytes();
  dev.plan.perPatchBytes = per;
  dev.plan.streams = W;
  dev.plan.batch = P;
  dev.plan.batches = (ntodo + P - 1) / P;

  BatchView v;
  v.givenEigen = keptEigh ? 1 : 0;
  v.maxKept = maxKept;
  v.F = F;
  v.nb = nb;
  v.n = n;
  v.spots = st;
  v.pix = dev.pix.get();
  v.ivar = dev.ivar.get();
  v.npixX = image.nx;
  v.npixY = image.ny;
  v.psferr = job.psferr;
  v.maxBoxArea = job.maxBoxArea;
  v.out = fr;
  v.noise = noise ? 1 : 0;

  int* hInfo = dev.hInfo.get(std::max(ntodo, 1));
  double* hChi2 = dev.hChi2.get(std::max(ntodo, 1));
  // The shape of a batch of patches idx(0 .. count-1): its widest fiber coupling (the
  // band it is solved on; F - 1, dense, without bandedSolve) and the blocks it keeps.
  const int* hCoupling = nullptr;
  if (opt.bandedSolve && ntodo > 0) {
    SPEX_CUDA(cudaStreamSynchronize(ms)); // the couplings, measured with the spot table
    hCoupling = dev.hCoupling.get(ntodo);
  }
  auto shapeOf = [&](int count, auto idx) {
    BatchShape b;
    b.w = hCoupling ? 0 : F - 1;
    b.keptLo = F;
    for (int k = 0; k < count; ++k) {
      const int i = idx(k);
      if (hCoupling) b.w = std::max(b.w, hCoupling[i]);
      b.keptLo = std::min(b.keptLo, table[i].keptFiberOff);
      b.keptHi = std::max(b.keptHi, table[i].keptFiberOff + table[i].nfiber);
    }
    if (hCoupling) dev.plan.maxCoupling = std::max(dev.plan.maxCoupling, b.w);
    b.w = std::clamp(b.w, std::min(1, F - 1), F - 1);
    if (b.w < F - 1) ++dev.plan.bandedBatches;
    return b;
  };
  std::vector<int> batchOf(ntodo, -1);
  std::vector<int> laneOf(ntodo, 0);
  int launched = 0, batchId = 0;
  for (int first = 0; first < ntodo; first += P, ++batchId) {
    if (cancel.cancelled()) break;
    Workspace& w = *dev.ws[batchId % W];
    const int count = std::min(P, ntodo - first);
    const BatchShape shape = shapeOf(count, [&](int k) { return first + k; });
    launchBatch(w, v, dev.patches.get(), first, count, req.params.regularize, shape, tl, batchId);
    SPEX_CUDA(cudaMemcpyAsync(hInfo + first, w.info.get(), count * sizeof(int),
                              cudaMemcpyDeviceToHost, w.stream));
    SPEX_CUDA(cudaMemcpyAsync(hChi2 + first, w.chi2.get(), count * sizeof(double),
                              cudaMemcpyDeviceToHost, w.stream));
    for (int i = first; i < first + count; ++i) {
      batchOf[i] = batchId;
      laneOf[i] = w.lane;
    }
    launched = first + count;
  }
  for (auto& w : dev.ws) SPEX_CUDA(cudaStreamSynchronize(w->stream));

  // EXTRACTION.md §4.3: patches whose Cholesky failed, once more with regularize 1e-4.
  std::vector<int> retry;
  for (int i = 0; i < launched; ++i)
    if (hInfo[i] != 0) retry.push_back(i);
  std::vector<char> regularized(ntodo, 0), failed(ntodo, 0);
  if (!retry.empty()) {
    std::vector<DevPatch> rt(retry.size());
    for (std::size_t r = 0; r < retry.size(); ++r) rt[r] = table[retry[r]];
    dev.retryPatches.need(rt.size(), &dev.held, "retry table");
    Workspace& w = *dev.ws[0];
    SPEX_CUDA(cudaMemcpyAsync(dev.retryPatches.get(), rt.data(), rt.size() * sizeof(DevPatch),
                              cudaMemcpyHostToDevice, w.stream));
    std::vector<int> rInfo(retry.size());
    std::vector<double> rChi2(retry.size());
    for (int first = 0; first < int(rt.size()); first += P) {
      const int count = std::min(P, int(rt.size()) - first);
      const BatchShape shape = shapeOf(count, [&](int k) { return retry[first + k]; });
      launchBatch(w, v, dev.retryPatches.get(), first, count, kRetryRegularize, shape, tl, batchId++);
      SPEX_CUDA(cudaMemcpyAsync(rInfo.data() + first, w.info.get(), count * sizeof(int),
                                cudaMemcpyDeviceToHost, w.stream));
      SPEX_CUDA(cudaMemcpyAsync(rChi2.data() + first, w.chi2.get(), count * sizeof(double),
                                cudaMemcpyDeviceToHost, w.stream));
      SPEX_CUDA(cudaStreamSynchronize(w.stream));
    }
    for (std::size_t r = 0; r < retry.size(); ++r) {
      const int i = retry[r];
      regularized[i] = 1;
      failed[i] = rInfo[r] != 0;
      hChi2[i] = failed[i] ? 0.0 : rChi2[r];
    }
  }

  // D2H: this device's rows of the frame, and the model image.
  tl.phase(kPhaseD2H, mainLane, -1, ms, [&] {
    for (auto& w : dev.ws) {
      const cudaEvent_t e = dev.events.acquire();
      SPEX_CUDA(cudaEventRecord(e, w->stream));
      SPEX_CUDA(cudaStreamWaitEvent(ms, e, 0));
      dev.events.release(e); // reusable once recorded again: the wait is already enqueued
    }
    const std::size_t nfw = std::size_t(nrow) * nwave, off = std::size_t(job.rowLo) * nwave;
    auto get = [&](double* dst, const DeviceArray<double>& src, std::size_t count) {
      SPEX_CUDA(cudaMemcpyAsync(dst, src.get(), count * sizeof(double), cudaMemcpyDeviceToHost, ms));
    };
    get(result.flux.data.data() + off, dev.flux, nfw);
    get(result.ivar.data.data() + off, dev.ivarOut, nfw);
    get(result.chi2pix.data.data() + off, dev.chi2pix, nfw);
    get(result.pixmaskFraction.data.data() + off, dev.pixmask, nfw);
    get(result.deconvolved.data.data() + off, dev.deconv, nfw);
    get(result.resolution.data.data() + off * nk, dev.res, nfw * nk);
    if (req.model) {
      if (directModel) {
        get(result.model->data.data(), dev.model, npixImg);
      } else {
        job.model = Array2D<double>(image.ny, image.nx);
        get(job.model.data.data(), dev.model, npixImg);
      }
    }
  });
  SPEX_CUDA(cudaStreamSynchronize(ms));

  // Diagnostics and coverage.
  for (int i = 0; i < launched; ++i) {
    const Patch& p = plan.patches[job.todo[i]];
    PatchDiagnostics d;
    d.patch = p.index;
    d.chi2 = hChi2[i];
    d.regularized = regularized[i];
    d.failed = failed[i];
    d.lane = laneOf[i];
    job.diags.push_back(d);
    for (int s = 0; s < p.nfiber; ++s)
      for (int k = 0; k < p.nwave; ++k) result.covered(p.fiber0 + s - plan.fiberMin, p.wave0 + k) = 1;
  }
  // Per-patch time: its batch's device time shared equally.
  {
    std::vector<double> batchSeconds(batchId, 0.0);
    std::vector<int> batchCount(batchId, 0);
    for (int i = 0; i < launched; ++i) ++batchCount[batchOf[i]];
    for (std::size_t k = 0; k < job.diags.size(); ++k) {
      const int b = batchOf[k];
      if (batchSeconds[b] == 0.0) batchSeconds[b] = tl.seconds(laneOf[k], b);
      job.diags[k].seconds = batchSeconds[b] / std::max(1, batchCount[b]);
    }
  }
  job.done = launched;
  job.cancelled = launched < ntodo;
  SPEX_CUDA(cudaStreamSynchronize(ms)); // the patch table's host copy goes out of scope
  tl.flush(rec, run.t0, run.hostT0);
  dev.events.release(ready);
}

} // namespace

ExtractionResult CudaEngine::extract(const ExtractionRequest& req, ProgressSink& progress,
                                     const CancelToken& cancel) {
  ProfileRecorder rec;
  rec.setThreadLaneName("main");
  // The kernel profile: CUPTI records from here until the devices are idle.
  std::unique_ptr<gpu::KernelTracer> tracer;
  if (req.profileKernels) tracer = std::make_unique<gpu::KernelTracer>(rec);
  ExtractionResult result;
  PatchPlan plan;
  std::vector<int> todo;
  {
    ScopedRange whole(&rec, "extract");
    if (!req.psf) throw InputError("extraction request has no PSF");
    if (!req.image) throw InputError("extraction request has no image");
    // Upload the image and the PSF to every device while the host plans.
    std::vector<std::unique_ptr<DeviceRun>> runs;
    for (std::size_t d = 0; d < m_devices.size(); ++d)
      runs.push_back(std::make_unique<DeviceRun>(m_devices[d]->events));
    std::vector<std::exception_ptr> prefetchErrors(m_devices.size());
    std::vector<std::thread> prefetchers;
    for (std::size_t d = 0; d < m_devices.size(); ++d)
      prefetchers.emplace_back([&, d] {
        try {
          prefetch(*m_devices[d], *runs[d], req, m_options.memoryBudgetBytes, rec, tracer.get());
        } catch (...) {
          prefetchErrors[d] = std::current_exception();
        }
      });
    auto joinPrefetch = [&] {
      for (auto& t : prefetchers)
        if (t.joinable()) t.join();
    };
    try {
      ScopedRange r(&rec, "plan");
      plan = *requestPlan(req); // the request's plan, checked (built only when it has none)
      validateRequest(req, plan);
    } catch (...) {
      joinPrefetch();
      throw;
    }
    joinPrefetch();
    for (auto& e : prefetchErrors)
      if (e) std::rethrow_exception(e);
    const GaussHermitePsf& psf = *req.psf;
    result.allocate(plan, psf.hsizeY, req.model, psf.npixX, psf.npixY);
    result.engine = name();
    result.psferr = effectivePsfErr(req);
    result.nonFinitePixels = req.image->nonFinitePixels;
    if (req.patches)
      todo = *req.patches;
    else
      for (const Patch& p : plan.patches) todo.push_back(p.index);
    std::sort(todo.begin(), todo.end());
    todo.erase(std::unique(todo.begin(), todo.end()), todo.end());

    if (!todo.empty()) {
      // Uniform batch layout over the chosen patches (kernels.h).
      int F = 1, nb = plan.patches[todo[0]].nwavePad, maxBox = 1;
      for (int i : todo) {
        const Patch& p = plan.patches[i];
        F = std::max(F, p.nfiberPad);
        if (p.nwavePad != nb) throw GpuError("patches of one plan differ in nwavePad");
        maxBox = std::max(maxBox, p.box.width() * p.box.height());
      }
      // Split by bundle across devices, balancing patch counts.
      const int ndev = std::min<int>(int(m_devices.size()), int(todo.size()));
      std::vector<DeviceJob> jobs(ndev);
      {
        std::size_t start = 0;
        for (int d = 0; d < ndev; ++d) {
          std::size_t end = d == ndev - 1 ? todo.size() : (todo.size() * (d + 1)) / ndev;
          // Move the cut to a bundle boundary so devices own disjoint fiber rows.
          while (end < todo.size() && end > start &&
                 plan.patches[todo[end]].bundle == plan.patches[todo[end - 1]].bundle)
            ++end;
          DeviceJob& j = jobs[d];
          j.todo.assign(todo.begin() + start, todo.begin() + end);
          start = end;
        }
      }
      std::vector<std::exception_ptr> errors(ndev);
      std::vector<std::thread> threads;
      int active = 0;
      for (int d = 0; d < ndev; ++d) {
        DeviceJob& j = jobs[d];
        if (j.todo.empty()) continue;
        ++active;
        j.req = &req;
        j.plan = &plan;
        j.F = F;
        j.nb = nb;
        j.maxBoxArea = maxBox;
        j.psferr = result.psferr;
        j.rowLo = INT32_MAX;
        j.rowHi = INT32_MIN;
        for (int i : j.todo) {
          const Patch& p = plan.patches[i];
          j.rowLo = std::min(j.rowLo, p.fiber0 - plan.fiberMin);
          j.rowHi = std::max(j.rowHi, p.fiber0 + p.nfiber - plan.fiberMin);
        }
      }
      const bool directModel = active <= 1;
      auto work = [&](int d) {
        try {
          runDevice(*m_devices[d], *runs[d], m_options, jobs[d], result, directModel, rec, cancel);
        } catch (...) {
          errors[d] = std::current_exception();
        }
      };
      if (active <= 1) {
        for (int d = 0; d < ndev; ++d)
          if (!jobs[d].todo.empty()) work(d);
      } else {
        for (int d = 0; d < ndev; ++d)
          if (!jobs[d].todo.empty()) threads.emplace_back(work, d);
        for (auto& t : threads) t.join();
      }
      for (auto& e : errors)
        if (e) std::rethrow_exception(e);
      {
        ScopedRange r(&rec, "assemble");
        for (DeviceJob& j : jobs) {
          result.patches.insert(result.patches.end(), j.diags.begin(), j.diags.end());
          result.cancelled = result.cancelled || j.cancelled;
          if (req.model && !directModel && !j.model.empty())
            for (std::size_t i = 0; i < j.model.data.size(); ++i)
              result.model->data[i] += j.model.data[i];
        }
        std::sort(result.patches.begin(), result.patches.end(),
                  [](const PatchDiagnostics& a, const PatchDiagnostics& b) { return a.patch < b.patch; });
      }
    }
    {
      ScopedRange r(&rec, "finalize");
      finalizeFrame(result);
    }
    // Progress: the patches are reported once the frame is back on the host.
    const int total = int(todo.size());
    int done = 0;
    for (const PatchDiagnostics& d : result.patches) progress.patchDone(d.patch, ++done, total);
  }
  result.profile = rec.finish();
  if (tracer) tracer->finish(result.profile);
  return result;
}

std::unique_ptr<Engine> makeCudaEngine(const std::vector<int>& gpus) {
  CudaEngineOptions o;
  o.gpus = gpus;
  return std::make_unique<CudaEngine>(o);
}

std::unique_ptr<Engine> makeCudaEngine(const CudaEngineOptions& options) {
  return std::make_unique<CudaEngine>(options);
}

} // namespace spex
