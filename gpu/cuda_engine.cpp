// CudaEngine: host orchestration. Reads nothing, computes nothing per patch: it
// uploads, launches and copies back (see cuda_engine.h). Its parts, each in its own
// file: per-device state and batch workspaces (engine_device.h,
// engine_workspace.cpp), transfers through pinned staging (engine_transfers.cpp,
// staging.h), the batch pipeline (batch_pipeline.h: batch_solve.cpp,
// batch_decorrelate.cpp), the batched linear algebra (batched_cholesky.h,
// batched_fiber_blocks.h, batched_eigh.h), the device timeline (device_timeline.h)
// and discovery (device_discovery.cpp). Per device:
//   H2D       image and ivar (pinned staging), PSF coefficients, patch table (stream 0)
//   spots     every (fiber, bin) stamp the device's patches use, once; each patch's
//             fiber coupling width (read back: the band its batch is solved on)
//   per batch of P patches (P from the memory budget), alternating between
//   workspaces (streams 1..W): gpu::enqueueBatch
//     normal equations  sparse A^T W A, y, fluxweight, pixmask_fraction, prior
//     solve             Cholesky on the batch's block band, f = L^-T L^-1 y by block
//                       substitution (or through L^-1 whole: selectedInverse off)
//     decorrelate       fiber blocks of iCov^-1 (selected inversion on the band),
//                       their eigen-pairs, C_s^-1/2, flux,
//                       ivar, resolution into the frame
//     chi2pix           model over the box, chi2pix, pixmask, f, model image
//   retry     patches whose Cholesky failed, once, with regularize = 1e-4
//   D2H       the device's rows of the frame arrays and the model image (pinned staging)
#include "cuda_engine.h"

#include "batch_pipeline.h"
#include "device_discovery.h"
#include "engine_device.h"
#include "kernel_tracer.h"

#include "core/errors.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

namespace spex {

using gpu::BatchShape;
using gpu::BatchView;
using gpu::DevFrame;
using gpu::DevPatch;
using gpu::DevPsf;
using gpu::SpotTable;
using gpu::checkCublas;
using gpu::checkCusolver;
using gpu::DeviceTimeline;
using gpu::EventPool;
using gpu::Workspace;
using gpu::kPhaseD2H;
using gpu::kPhaseH2D;
using gpu::kPhaseSpots;

namespace {

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
  // extractInto with `accumulate`: the result is the caller's, already shaped; only the
  // patches' kept bins are written (and finalized) and, with a model, their model
  // tiles (ExtractionResult::modelTiles) instead of a CCD-sized model image.
  bool into = false;
  long noData = 0, nonFinite = 0; // finalizeRegion counts of the patches (into)
};

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CudaEngineOptions::warmUp on one device: the first batched DGEMMs of the process
// (cuBLAS's first-use work: ~50 ms on an H100 in the first batch's Cholesky panel, cold
// process, docs/benchmarks.md), in the two layouts the blocked Cholesky and L^-1 call,
// on 74 x 74 blocks (a DESI patch's fiber block), on a handle and stream of its own.
// Errors are ignored (the extraction meets the same ones and reports them).
void warmUpDevice(int device) {
  cudaStream_t s = nullptr;
  cublasHandle_t h = nullptr;
  double* buf = nullptr;
  try {
    SPEX_CUDA(cudaSetDevice(device));
    SPEX_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    checkCublas(cublasCreate(&h), "cublasCreate");
    checkCublas(cublasSetStream(h, s), "cublasSetStream");
    constexpr int nb = 74, batch = 8;
    const long long blk = 4LL * nb * nb; // the largest operand, 2 nb x 2 nb
    SPEX_CUDA(cudaMalloc(&buf, std::size_t(3 * blk * batch) * sizeof(double)));
    SPEX_CUDA(cudaMemsetAsync(buf, 0, std::size_t(3 * blk * batch) * sizeof(double), s));
    double* A = buf;
    double* B = buf + blk * batch;
    double* C = buf + 2 * blk * batch;
    const double one = 1.0, zero = 0.0, minus = -1.0;
    // panel and trailing update (N, T), then L X (N, N)
    checkCublas(cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, 2 * nb, nb, nb, &one, A, 2 * nb, blk,
                                          B, nb, blk, &zero, C, 2 * nb, blk, batch),
                "cublasDgemmStridedBatched (warm-up)");
    checkCublas(cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, 2 * nb, 2 * nb, nb, &minus, A, 2 * nb,
                                          blk, B, 2 * nb, blk, &one, C, 2 * nb, blk, batch),
                "cublasDgemmStridedBatched (warm-up)");
    checkCublas(cublasDgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, nb, 2 * nb, nb, &one, A, nb, blk, B,
                                          nb, blk, &zero, C, nb, blk, batch),
                "cublasDgemmStridedBatched (warm-up)");
    SPEX_CUDA(cudaStreamSynchronize(s));
  } catch (...) {
  }
  if (buf) cudaFree(buf);
  if (h) cublasDestroy(h);
  if (s) cudaStreamDestroy(s);
  cudaGetLastError();
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
      w->selected = m_options.selectedInverse;
      w->choleskyColumns = m_options.choleskyColumns;
      w->normalPairs = m_options.normalPairs;
      SPEX_CUDA(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
      if (m_options.gemm == CudaEngineOptions::Gemm::Cublas) { // else the engine's GEMMs: no handle
        checkCublas(cublasCreate(&w->cublas), "cublasCreate");
        checkCublas(cublasSetStream(w->cublas, w->stream), "cublasSetStream");
      }
      checkCusolver(cusolverDnCreate(&w->solver), "cusolverDnCreate");
      checkCusolver(cusolverDnSetStream(w->solver, w->stream), "cusolverDnSetStream");
      checkCusolver(cusolverDnCreateParams(&w->params), "cusolverDnCreateParams");
      dev->ws.push_back(std::move(w));
    }
    m_devices.push_back(std::move(dev));
  }
  if (m_options.warmUp && m_options.gemm == CudaEngineOptions::Gemm::Cublas) {
    std::vector<int> devices = m_options.gpus;
    m_warm = std::make_unique<std::thread>([this, devices] {
      m_warmStartNs = steadyNs();
      for (int d : devices) warmUpDevice(d);
      m_warmEndNs = steadyNs();
    });
  }
}

CudaEngine::~CudaEngine() { joinWarmUp(); }

void CudaEngine::joinWarmUp() {
  if (m_warm && m_warm->joinable()) m_warm->join();
}

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
  // The plan's corner table, evaluated on this device while the image uploads
  // (extract() asks device 0 when the request carries no plan): ready once published.
  bool wantCorners = false;
  bool cornersOk = false;
  PlanCorners corners;
  std::promise<void> cornersPromise;
  std::future<void> cornersReady = cornersPromise.get_future();
  bool cornersPublished = false;
  // The spot table over the corners' range, started on workspace 0's stream right
  // after them (a whole frame on one device): runDevice reuses it when its patches'
  // range lies inside, after spotsDone.
  bool wantSpots = false;
  bool spotsReady = false;
  SpotTable spots;
  // Image rectangle to upload (gpu::uploadImage): the bounding rectangle of the
  // requested patches' boxes, or all (imgY1 < 0, imgX1 < 0).
  int imgY0 = 0, imgY1 = -1, imgX0 = 0, imgX1 = -1;
  cudaEvent_t spotsDone = nullptr;
  // Published once the prefetch allocates nothing more on the device (before the
  // image's copy, or at its end): reserveAhead may then allocate beside it.
  std::promise<void> allocsPromise;
  std::future<void> allocsDone = allocsPromise.get_future();
  bool allocsPublished = false;
  void publishCorners() {
    if (cornersPublished) return;
    cornersPublished = true;
    cornersPromise.set_value();
  }
  void publishAllocs() {
    if (allocsPublished) return;
    allocsPublished = true;
    allocsPromise.set_value();
  }
  ~DeviceRun() {
    if (t0) pool.release(t0);
    if (spotsDone) pool.release(spotsDone);
  }
};

// Opens the device's timeline and uploads the PSF and the image; where asked, evaluates
// the plan's corner table between the two. Runs on its own thread while the host
// builds the patch plan, so the copies are off the critical path.
void prefetchInputs(CudaEngine::Device& dev, DeviceRun& run, const ExtractionRequest& req,
                    std::size_t budget, ProfileRecorder& rec, gpu::KernelTracer* tracer) {
  SPEX_CUDA(cudaSetDevice(dev.index));
  rec.setThreadLaneName("prefetch cuda:" + std::to_string(dev.index));
  ScopedRange whole(&rec, "prefetch");
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
  bool psfUploaded = false;
  if (run.wantCorners || run.wantSpots) { // both evaluate the PSF on the device
    run.tl.phase(kPhaseH2D, run.mainLane, -1, dev.main,
                 [&] { gpu::uploadPsf(*req.psf, dev, dev.main, run.psf); });
    psfUploaded = true;
  }
  if (run.wantCorners)
    run.tl.phase(gpu::kPhasePlanCorners, run.mainLane, -1, dev.main,
                 [&] { run.cornersOk = gpu::computePlanCorners(dev, run.psf, req, budget, run.corners); });
  run.publishCorners();
  if (run.wantSpots && run.cornersOk && !dev.ws.empty()) {
    // Every stamp of the frame, while the host finishes the plan and the image uploads
    // on the main stream.
    Workspace& w0 = *dev.ws[0];
    SpotTable& st = run.spots;
    run.tl.phase(kPhaseSpots, w0.lane, -1, w0.stream, [&] {
      st.f0 = run.corners.f0;
      st.nf = run.corners.f1 - run.corners.f0;
      st.k0 = run.corners.k0;
      st.nk = run.corners.k1 - run.corners.k0;
      st.nx = req.psf->spotNx();
      st.ny = req.psf->spotNy();
      const std::size_t nspot = std::size_t(st.nf) * st.nk;
      gpu::makeRoom(dev, dev.spotV.growth(nspot * st.nx * st.ny) + dev.corner.growth(nspot), budget);
      dev.spotV.need(nspot * st.nx * st.ny, &dev.held, "spot table");
      dev.corner.need(nspot, &dev.held, "spot corners");
      dev.track();
      st.v = dev.spotV.get();
      st.corner = dev.corner.get();
      gpu::launchSpotTable(run.psf, st, req.wave.wmin, req.wave.dw, w0.stream);
    });
    run.spotsDone = run.pool.acquire();
    SPEX_CUDA(cudaEventRecord(run.spotsDone, w0.stream));
    run.spotsReady = true;
  }
  const Image& image = *req.image;
  const std::size_t npixImg = std::size_t(image.ny) * image.nx;
  if (image.pix.size() != npixImg || image.ivar.size() != npixImg)
    return; // validateRequest reports it; runDevice never starts
  gpu::reserveImage(image, dev, budget);
  if (psfUploaded) run.publishAllocs(); // the image's copy below allocates nothing
  run.tl.phase(kPhaseH2D, run.mainLane, -1, dev.main, [&] {
    gpu::uploadImage(image, dev, run.imgY0, run.imgY1, run.imgX0, run.imgX1);
    if (!psfUploaded) gpu::uploadPsf(*req.psf, dev, dev.main, run.psf);
  });
  run.uploaded = true;
}

void prefetch(CudaEngine::Device& dev, DeviceRun& run, const ExtractionRequest& req,
              std::size_t budget, ProfileRecorder& rec, gpu::KernelTracer* tracer) {
  try {
    prefetchInputs(dev, run, req, budget, rec, tracer);
  } catch (...) {
    run.publishCorners(); // extract() may be waiting for them
    run.publishAllocs();
    throw;
  }
  run.publishAllocs();
}

// The layout of a request's batches on one device (runDevice, reserveAhead).
struct BatchLayout {
  int n = 0, F = 0, nb = 0, maxBoxArea = 0, maxKept = 1, ntodo = 0;
  bool noise = false, keptEigh = false, tiles = false;
};

// The frame arrays of nfw (rows x bins) values, the resolution's nk times that and,
// when npixModel > 0, the model image, allocated (not zeroed).
void reserveFrameArrays(CudaEngine::Device& dev, std::size_t nfw, int nk, std::size_t npixModel) {
  for (auto* a : {&dev.flux, &dev.ivarOut, &dev.chi2pix, &dev.pixmask, &dev.deconv})
    a->need(nfw, &dev.held, "frame arrays");
  dev.res.need(nfw * nk, &dev.held, "resolution");
  if (npixModel) dev.model.need(npixModel, &dev.held, "model image");
  dev.track();
}

// Sizes the batch and allocates every workspace for it (after the request's fixed
// arrays); returns the batch size P and records the split in dev.plan. Throws GpuError
// when the budget cannot hold one patch per stream.
int sizeWorkspaces(CudaEngine::Device& dev, const CudaEngineOptions& opt, const BatchLayout& L,
                   ProfileRecorder& rec) {
  // Batch size (CudaEngineOptions::memoryBudgetBytes): what the budget leaves after
  // the request's fixed arrays, over the workspaces, capped at the target batch that
  // keeps the card busy and at two batches per workspace (so transfers and phases of
  // neighbouring batches overlap). Workspace sizes are estimated first, then checked
  // against what the allocations really hold (library workspaces included).
  const int W = int(dev.ws.size());
  const int n = L.n, F = L.F, nb = L.nb, maxKept = L.maxKept, ntodo = L.ntodo;
  const bool noise = L.noise, keptEigh = L.keptEigh, tiles = L.tiles;
  const std::size_t budget = opt.memoryBudgetBytes ? opt.memoryBudgetBytes : kCudaDefaultMemoryBudget;
  std::size_t wsHeld = 0;
  for (auto& w : dev.ws) wsHeld += w->bytes();
  const std::size_t fixed = dev.held - wsHeld;
  std::size_t per = gpu::bytesPerPatch(n, F, nb, L.maxBoxArea, noise, opt.selectedInverse);
  if (keptEigh)
    per += std::size_t(maxKept) * (std::size_t(nb) * nb + nb) * (dev.ws[0]->cusolverEigh ? 2 : 1) * sizeof(double);
  if (tiles) per += std::size_t(L.maxBoxArea) * sizeof(double); // Workspace::tile
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
  key.n = n, key.F = F, key.nb = nb, key.maxBoxArea = L.maxBoxArea, key.maxKept = maxKept;
  key.W = W, key.noise = noise, key.keptEigh = keptEigh, key.budget = budget, key.fixed = fixed;
  if (dev.fit.same(key)) P = std::min(P, dev.fit.batch);
  auto wsBytes = [&] {
    std::size_t b = 0;
    for (auto& w : dev.ws) b += w->bytes();
    return b;
  };
  dev.limit = budget; // the workspaces' allocations check it (DeviceArray::reserve)
  std::optional<ScopedRange> wsRange(std::in_place, &rec, "workspaces");
  for (;;) {
    bool ok = true, larger = false; // larger: workspaces kept from an earlier, larger batch
    for (auto& w : dev.ws) {
      larger = larger || w->capacity > P;
      if (w->capacity < P || w->n != n || w->F != F || w->nb != nb ||
          w->maxBoxArea < L.maxBoxArea || (noise && !w->noise)) {
        // A new layout (a bundle edge's patch has one fiber fewer) reuses the buffers
        // where they are large enough: reserveWorkspace only grows them.
        if (!gpu::reserveWorkspace(*w, dev, P, n, F, nb, L.maxBoxArea, noise)) {
          ok = false;
          break;
        }
      }
      // Eigen-pairs of the kept fiber blocks (CudaEngineOptions::eigh).
      if (keptEigh &&
          (w->maxKept < maxKept || w->K.capacity() < std::size_t(w->capacity) * maxKept * nb * nb) &&
          !gpu::reserveKeptEigh(*w, dev, w->capacity, nb, maxKept)) {
        ok = false;
        break;
      }
    }
    if (ok) break;
    // Over the budget (the library workspaces were larger than estimated) or out of
    // device memory: release, shrink the batch and try again.
    for (auto& w : dev.ws) gpu::releaseWorkspace(*w, dev);
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
  for (auto& w : dev.ws) {
    w->tiles = tiles;
    if (tiles) w->tile.need(std::size_t(P) * L.maxBoxArea, &dev.held, "model tiles");
  }
  wsRange.reset();
  dev.track();
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

  return P;
}

// A whole frame on one device: its frame arrays, patch table and batch workspaces
// allocated on their own thread while the prefetch copies the image (in a fresh
// context ~1.6 GB of cudaMalloc, 40-60 ms, that runDevice would otherwise make after
// the copy). Call once the prefetch allocates nothing more (DeviceRun::allocsDone) and
// join before runDevice, which then finds them allocated (or allocates what is
// missing: anything that fails here is left to it). The same layout and batch size as
// runDevice's; nothing is done where the fixed arrays would pass the budget.
void reserveAhead(CudaEngine::Device& dev, const CudaEngineOptions& opt, const ExtractionRequest& req,
                  const PatchPlan& plan, ProfileRecorder& rec) {
  try {
    if (plan.patches.empty() || dev.ws.empty()) return;
    SPEX_CUDA(cudaSetDevice(dev.index));
    rec.setThreadLaneName("reserve ahead cuda:" + std::to_string(dev.index));
    ScopedRange whole(&rec, "reserve ahead");
    const GaussHermitePsf& psf = *req.psf;
    int F = 1, nb = plan.patches[0].nwavePad, maxBox = 1, maxKept = 1, rowLo = INT32_MAX, rowHi = INT32_MIN;
    for (const Patch& p : plan.patches) {
      if (p.nwavePad != nb) return; // runDevice says so
      F = std::max(F, p.nfiberPad);
      maxBox = std::max(maxBox, p.box.width() * p.box.height());
      maxKept = std::max(maxKept, p.nfiber);
      rowLo = std::min(rowLo, p.fiber0 - plan.fiberMin);
      rowHi = std::max(rowHi, p.fiber0 + p.nfiber - plan.fiberMin);
    }
    const int ntodo = int(plan.patches.size()), nk = 2 * psf.hsizeY + 1;
    const bool noise = req.params.mode == Decorrelation::Noise;
    const std::size_t nfw = std::size_t(rowHi - rowLo) * plan.wave.n;
    const std::size_t npixModel = req.model ? std::size_t(psf.npixY) * psf.npixX : 0;
    const std::size_t budget = opt.memoryBudgetBytes ? opt.memoryBudgetBytes : kCudaDefaultMemoryBudget;
    std::size_t g = dev.patches.growth(ntodo) + (opt.bandedSolve ? dev.coupling.growth(ntodo) : 0) +
                    dev.res.growth(nfw * nk) + (npixModel ? dev.model.growth(npixModel) : 0);
    for (auto* a : {&dev.flux, &dev.ivarOut, &dev.chi2pix, &dev.pixmask, &dev.deconv}) g += a->growth(nfw);
    if (dev.held + g > budget) return;
    dev.patches.need(ntodo, &dev.held, "patch table");
    if (opt.bandedSolve) dev.coupling.need(ntodo, &dev.held, "fiber coupling");
    reserveFrameArrays(dev, nfw, nk, npixModel);
    const bool keptEigh = opt.eigh != CudaEngineOptions::Eigh::Jacobi && !noise;
    sizeWorkspaces(dev, opt, BatchLayout{F * nb, F, nb, maxBox, maxKept, ntodo, noise, keptEigh, false}, rec);
  } catch (...) {
    cudaGetLastError(); // runDevice meets and reports the same
  }
}

// Runs one device's share. Writes the device's rows of result (disjoint from other
// devices) and its diagnostics into job.
// `allocated` becomes ready once result's host arrays exist (they are allocated on
// another thread while the device works); nothing of result is touched before.
void runDevice(CudaEngine::Device& dev, DeviceRun& run, const CudaEngineOptions& opt,
               DeviceJob& job, ExtractionResult& result, const std::shared_future<void>& allocated,
               bool directModel, ProfileRecorder& rec, const CancelToken& cancel,
               const std::function<void()>& beforeBatches) {
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

  // With `into` and a model: per-patch model tiles instead of the CCD-sized image.
  const bool tiles = req.model && job.into;
  const bool wholeModel = req.model && !job.into;
  SpotTable st;
  DevFrame fr;
  const DevPsf dpsf = run.psf;
  tl.phase(kPhaseH2D, mainLane, -1, ms, [&] {
    gpu::makeRoom(dev, dev.patches.growth(std::max(ntodo, 1)), opt.memoryBudgetBytes);
    dev.patches.need(std::max(ntodo, 1), &dev.held, "patch table");
    SPEX_CUDA(cudaMemcpyAsync(dev.patches.get(), table.data(), ntodo * sizeof(DevPatch),
                              cudaMemcpyHostToDevice, ms));
  });

  // The spot table the prefetch started, where it covers these patches.
  const bool spotsMade = run.spotsReady && fLo >= run.spots.f0 && fHi <= run.spots.f0 + run.spots.nf &&
                         kLo >= run.spots.k0 && kHi <= run.spots.k0 + run.spots.nk;
  tl.phase(kPhaseSpots, mainLane, -1, ms, [&] {
    if (spotsMade) {
      st = run.spots;
      SPEX_CUDA(cudaStreamWaitEvent(ms, run.spotsDone, 0));
    } else {
      st.f0 = fLo;
      st.nf = fHi - fLo;
      st.k0 = kLo;
      st.nk = kHi - kLo;
      st.nx = psf.spotNx();
      st.ny = psf.spotNy();
    }
    const std::size_t nspot = std::size_t(st.nf) * st.nk;
    {
      const std::size_t nfw = std::size_t(nrow) * nwave;
      std::size_t g = dev.spotV.growth(nspot * st.nx * st.ny) + dev.corner.growth(nspot) +
                      dev.res.growth(nfw * nk) + (wholeModel ? dev.model.growth(npixImg) : 0) +
                      (opt.bandedSolve ? dev.coupling.growth(std::max(ntodo, 1)) : 0);
      for (auto* a : {&dev.flux, &dev.ivarOut, &dev.chi2pix, &dev.pixmask, &dev.deconv}) g += a->growth(nfw);
      gpu::makeRoom(dev, g, opt.memoryBudgetBytes);
    }
    dev.spotV.need(nspot * st.nx * st.ny, &dev.held, "spot table");
    dev.corner.need(nspot, &dev.held, "spot corners");
    dev.track();
    st.v = dev.spotV.get();
    st.corner = dev.corner.get();
    if (!spotsMade) gpu::launchSpotTable(dpsf, st, plan.wave.wmin, plan.wave.dw, ms);
    if (opt.bandedSolve && ntodo > 0) {
      // Each patch's fiber coupling, for the batches' band (read back before they start).
      dev.coupling.need(ntodo, &dev.held, "fiber coupling");
      gpu::launchFiberCoupling(dev.patches.get(), ntodo, st, nb, dev.coupling.get(), ms);
      SPEX_CUDA(cudaMemcpyAsync(dev.hCoupling.get(ntodo), dev.coupling.get(), ntodo * sizeof(int),
                                cudaMemcpyDeviceToHost, ms));
    }
    // Frame arrays of this device's rows, zeroed (failed patches stay zero).
    const std::size_t nfw = std::size_t(nrow) * nwave;
    reserveFrameArrays(dev, nfw, nk, wholeModel ? npixImg : 0);
    for (auto* a : {&dev.flux, &dev.ivarOut, &dev.chi2pix, &dev.pixmask, &dev.deconv})
      SPEX_CUDA(cudaMemsetAsync(a->get(), 0, nfw * sizeof(double), ms));
    SPEX_CUDA(cudaMemsetAsync(dev.res.get(), 0, nfw * nk * sizeof(double), ms));
    if (wholeModel) SPEX_CUDA(cudaMemsetAsync(dev.model.get(), 0, npixImg * sizeof(double), ms));
  });
  fr.flux = dev.flux.get();
  fr.ivar = dev.ivarOut.get();
  fr.resolution = dev.res.get();
  fr.chi2pix = dev.chi2pix.get();
  fr.pixmask = dev.pixmask.get();
  fr.deconvolved = dev.deconv.get();
  fr.model = wholeModel ? dev.model.get() : nullptr;
  fr.nrow = nrow;
  fr.nwave = nwave;
  fr.ndiag = nd;

  const cudaEvent_t ready = dev.events.acquire();
  SPEX_CUDA(cudaEventRecord(ready, ms));
  for (auto& w : dev.ws) SPEX_CUDA(cudaStreamWaitEvent(w->stream, ready, 0));

  int maxKept = 1;
  for (const DevPatch& d : table) maxKept = std::max(maxKept, d.nfiber);
  const bool keptEigh = opt.eigh != CudaEngineOptions::Eigh::Jacobi && !noise;
  const int W = int(dev.ws.size());
  const int P = sizeWorkspaces(dev, opt, BatchLayout{n, F, nb, job.maxBoxArea, maxKept, ntodo, noise, keptEigh, tiles},
                               rec);

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
  const std::size_t mba = std::size_t(job.maxBoxArea);
  double* hTiles = tiles ? dev.hTiles.get(std::size_t(std::max(ntodo, 1)) * mba) : nullptr;
  // The shape of a batch of patches idx(0 .. count-1): its widest fiber coupling (the
  // band it is solved on; F - 1, dense, without bandedSolve) and the blocks it keeps.
  const int* hCoupling = nullptr;
  if (opt.bandedSolve && ntodo > 0) {
    ScopedRange r(&rec, "wait for the couplings");
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
  beforeBatches();
  std::optional<ScopedRange> enqueueRange(std::in_place, &rec, "enqueue batches");
  for (int first = 0; first < ntodo; first += P, ++batchId) {
    if (cancel.cancelled()) break;
    Workspace& w = *dev.ws[batchId % W];
    const int count = std::min(P, ntodo - first);
    const BatchShape shape = shapeOf(count, [&](int k) { return first + k; });
    gpu::enqueueBatch(w, v, dev.patches.get(), first, count, req.params.regularize, shape, tl, batchId);
    SPEX_CUDA(cudaMemcpyAsync(hInfo + first, w.info.get(), count * sizeof(int),
                              cudaMemcpyDeviceToHost, w.stream));
    SPEX_CUDA(cudaMemcpyAsync(hChi2 + first, w.chi2.get(), count * sizeof(double),
                              cudaMemcpyDeviceToHost, w.stream));
    if (tiles)
      SPEX_CUDA(cudaMemcpyAsync(hTiles + std::size_t(first) * mba, w.tile.get(), count * mba * sizeof(double),
                                cudaMemcpyDeviceToHost, w.stream));
    for (int i = first; i < first + count; ++i) {
      batchOf[i] = batchId;
      laneOf[i] = w.lane;
    }
    launched = first + count;
  }
  enqueueRange.reset();
  {
    ScopedRange r(&rec, "wait for the batches");
    for (auto& w : dev.ws) SPEX_CUDA(cudaStreamSynchronize(w->stream));
  }

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
    std::vector<double> rTiles(tiles ? retry.size() * mba : 0);
    for (int first = 0; first < int(rt.size()); first += P) {
      const int count = std::min(P, int(rt.size()) - first);
      const BatchShape shape = shapeOf(count, [&](int k) { return retry[first + k]; });
      gpu::enqueueBatch(w, v, dev.retryPatches.get(), first, count, kRetryRegularize, shape, tl, batchId++);
      SPEX_CUDA(cudaMemcpyAsync(rInfo.data() + first, w.info.get(), count * sizeof(int),
                                cudaMemcpyDeviceToHost, w.stream));
      SPEX_CUDA(cudaMemcpyAsync(rChi2.data() + first, w.chi2.get(), count * sizeof(double),
                                cudaMemcpyDeviceToHost, w.stream));
      if (tiles)
        SPEX_CUDA(cudaMemcpyAsync(rTiles.data() + std::size_t(first) * mba, w.tile.get(),
                                  count * mba * sizeof(double), cudaMemcpyDeviceToHost, w.stream));
      SPEX_CUDA(cudaStreamSynchronize(w.stream));
    }
    for (std::size_t r = 0; r < retry.size(); ++r) {
      const int i = retry[r];
      regularized[i] = 1;
      failed[i] = rInfo[r] != 0;
      hChi2[i] = failed[i] ? 0.0 : rChi2[r];
      if (tiles) std::copy_n(rTiles.data() + r * mba, mba, hTiles + std::size_t(i) * mba);
    }
  }

  // D2H: this device's rows of the frame, and the model image.
  allocated.get(); // rethrows the allocation's failure
  // into: the launched patches' bins [cLo, cHi) of this device's rows, as a block per
  // array (gpu::downloadColumns, pinned: a few patches) or whole rows in `part`.
  int cLo = 0, cHi = 0;
  if (job.into) {
    cLo = nwave;
    for (int i = 0; i < launched; ++i) {
      const Patch& p = plan.patches[job.todo[i]];
      cLo = std::min(cLo, p.wave0);
      cHi = std::max(cHi, p.wave0 + p.nwave);
    }
    cLo = std::min(cLo, cHi);
  }
  const double* cols = nullptr;
  ExtractionResult part;
  tl.phase(kPhaseD2H, mainLane, -1, ms, [&] {
    if (job.into) {
      if (gpu::downloadColumns(dev, nrow, nwave, nk, cLo, cHi, cols)) return;
      part.flux = Array2D<double>(nrow, nwave);
      part.ivar = Array2D<double>(nrow, nwave);
      part.chi2pix = Array2D<double>(nrow, nwave);
      part.pixmaskFraction = Array2D<double>(nrow, nwave);
      part.deconvolved = Array2D<double>(nrow, nwave);
      part.resolution = Array3D<double>(nrow, nk, nwave);
      gpu::downloadFrame(dev, part, 0, std::size_t(nrow) * nwave, nk, nullptr, 0);
      return;
    }
    double* model = nullptr;
    if (req.model) {
      if (!directModel) job.model = Array2D<double>(image.ny, image.nx);
      model = directModel ? result.model->data.data() : job.model.data.data();
    }
    gpu::downloadFrame(dev, result, std::size_t(job.rowLo) * nwave, std::size_t(nrow) * nwave, nk, model,
                       npixImg);
  });
  SPEX_CUDA(cudaStreamSynchronize(ms));
  if (job.into) {
    // The launched patches' kept bins into the caller's result, finalized there, and
    // their model tiles. Value (array a, row rl, bin k), resolution (rl, d, k):
    const std::size_t cw = std::size_t(cHi - cLo), per = std::size_t(nrow) * cw;
    const Array2D<double>* arr[5] = {&part.flux, &part.ivar, &part.chi2pix, &part.pixmaskFraction,
                                     &part.deconvolved};
    auto at = [&](int a, int rl, int k) -> double {
      if (cols) return cols[a * per + std::size_t(rl) * cw + std::size_t(k - cLo)];
      return (*arr[a])(rl, k);
    };
    auto resAt = [&](int rl, int d, int k) -> double {
      if (cols) return cols[5 * per + (std::size_t(rl) * nk + d) * cw + std::size_t(k - cLo)];
      return part.resolution(rl, d, k);
    };
    for (int i = 0; i < launched; ++i) {
      const Patch& p = plan.patches[job.todo[i]];
      for (int s = 0; s < p.nfiber; ++s) {
        const int rf = p.fiber0 + s - plan.fiberMin, rl = rf - job.rowLo;
        for (int k = p.wave0; k < p.wave0 + p.nwave; ++k) {
          result.flux(rf, k) = at(0, rl, k);
          result.ivar(rf, k) = at(1, rl, k);
          result.chi2pix(rf, k) = at(2, rl, k);
          result.pixmaskFraction(rf, k) = at(3, rl, k);
          result.deconvolved(rf, k) = at(4, rl, k);
          for (int d = 0; d < nk; ++d) result.resolution(rf, d, k) = resAt(rl, d, k);
        }
      }
      if (tiles) {
        Array2D<double>& t = result.modelTiles[std::size_t(p.index)];
        if (t.rows != p.box.height() || t.cols != p.box.width()) t = Array2D<double>(p.box.height(), p.box.width());
        std::copy_n(hTiles + std::size_t(i) * mba, t.size(), t.data.begin());
      }
    }
  }

  gpu::collectDiagnostics(plan, job.todo, launched, hChi2, regularized, failed, batchOf, laneOf, batchId, tl,
                          result, job.diags);
  if (job.into)
    for (int i = 0; i < launched; ++i) {
      const FinalizeCounts c = finalizeRegion(result, keptRegion(plan, job.todo[i]));
      job.noData += c.noData;
      job.nonFinite += c.nonFinite;
    }
  job.done = launched;
  job.cancelled = launched < ntodo;
  SPEX_CUDA(cudaStreamSynchronize(ms)); // the patch table's host copy goes out of scope
  tl.flush(rec, run.t0, run.hostT0);
  dev.events.release(ready);
}

} // namespace

namespace {

bool sameParams(const PatchParams& a, const PatchParams& b) {
  auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  return a.bundlesize == b.bundlesize && a.nsubbundles == b.nsubbundles && a.nwavestep == b.nwavestep &&
         a.wavepadFrac == b.wavepadFrac && a.pixpadFrac == b.pixpadFrac && same(a.regularize, b.regularize) &&
         same(a.psferr, b.psferr) && a.mode == b.mode;
}

// A kept result extractInto can write into as it is: the plan's frame, the model (and
// its tiles) when asked for.
bool shapedFor(const ExtractionResult& r, const PatchPlan& plan, const GaussHermitePsf& psf, bool model) {
  return r.nfiber == plan.nFiber && r.fiberMin == plan.fiberMin && r.nwave == plan.wave.n &&
         r.ndiag == psf.hsizeY && r.wave.wmin == plan.wave.wmin && r.wave.wmax == plan.wave.wmax &&
         r.wave.dw == plan.wave.dw && r.wave.n == plan.wave.n && sameParams(r.params, plan.params) &&
         r.flux.rows == plan.nFiber && r.flux.cols == plan.wave.n && r.resolution.n0 == plan.nFiber &&
         r.resolution.n1 == 2 * psf.hsizeY + 1 && r.resolution.n2 == plan.wave.n &&
         r.model.has_value() == model &&
         (!model || (r.model->rows == psf.npixY && r.model->cols == psf.npixX &&
                     r.modelTiles.size() == plan.patches.size()));
}

} // namespace

ExtractionResult CudaEngine::extract(const ExtractionRequest& req, ProgressSink& progress,
                                     const CancelToken& cancel) {
  ExtractionResult result;
  run(req, result, false, progress, cancel);
  return result;
}

void CudaEngine::extractInto(const ExtractionRequest& req, ExtractionResult& into, ProgressSink& progress,
                             const CancelToken& cancel) {
  if (!req.accumulate || !req.patches) {
    Engine::extractInto(req, into, progress, cancel);
    return;
  }
  run(req, into, true, progress, cancel);
}

void CudaEngine::run(const ExtractionRequest& req, ExtractionResult& result, bool into, ProgressSink& progress,
                     const CancelToken& cancel) {
  ProfileRecorder rec;
  rec.setThreadLaneName("main");
  // The kernel profile: CUPTI records from here until the devices are idle.
  std::unique_ptr<gpu::KernelTracer> tracer;
  if (req.profileKernels) tracer = std::make_unique<gpu::KernelTracer>(rec);
  // The request's plan is used where it is (a copy is ~0.3 MB per request).
  std::shared_ptr<const PatchPlan> planHeld;
  std::vector<int> todo;
  {
    ScopedRange whole(&rec, "extract");
    if (!req.psf) throw InputError("extraction request has no PSF");
    if (!req.image) throw InputError("extraction request has no image");
    // Upload the image and the PSF to every device while the host plans.
    std::vector<std::unique_ptr<DeviceRun>> runs;
    for (std::size_t d = 0; d < m_devices.size(); ++d)
      runs.push_back(std::make_unique<DeviceRun>(m_devices[d]->events));
    // Without a plan in the request, device 0 evaluates the plan's corner table (~90 %
    // of the plan's host time) while the image uploads.
    const bool deviceCorners = !req.plan && !runs.empty();
    if (deviceCorners) runs[0]->wantCorners = true;
    // A whole frame on one device: its spot table too, right after the corners, or
    // over the range of the request's plan (the CLI makes it while the engine starts).
    if (!req.patches && m_devices.size() == 1 && !runs.empty()) {
      if (deviceCorners) {
        runs[0]->wantSpots = true;
      } else if (req.plan && !req.plan->patches.empty()) {
        // The padded fibers and bins of every patch (runDevice's extent for the whole
        // plan); the plan is checked only later, so fibers outside the PSF start none.
        int f0 = INT32_MAX, f1 = INT32_MIN, k0 = INT32_MAX, k1 = INT32_MIN;
        for (const Patch& p : req.plan->patches) {
          f0 = std::min(f0, p.fiberPad0);
          f1 = std::max(f1, p.fiberPad0 + p.nfiberPad);
          k0 = std::min(k0, p.wavePad0);
          k1 = std::max(k1, p.wavePad0 + p.nwavePad);
        }
        if (f0 >= 0 && f1 > f0 && f1 <= req.psf->nfiber && k1 > k0) {
          DeviceRun& r0 = *runs[0];
          r0.corners.f0 = f0, r0.corners.f1 = f1, r0.corners.k0 = k0, r0.corners.k1 = k1;
          r0.cornersOk = true;
          r0.wantSpots = true;
        }
      }
    }
    // A patch list with its plan: only the bounding rectangle of the patches' boxes is
    // uploaded (whole rows when it is large: gpu::uploadImage).
    if (req.patches && req.plan) {
      int y0 = INT32_MAX, y1 = INT32_MIN, x0 = INT32_MAX, x1 = INT32_MIN;
      bool valid = true;
      for (int i : *req.patches) {
        if (i < 0 || i >= int(req.plan->patches.size())) {
          valid = false; // validateRequest says which
          break;
        }
        const PixelBox& b = req.plan->patches[std::size_t(i)].box;
        if (b.empty()) continue;
        y0 = std::min(y0, b.y0);
        y1 = std::max(y1, b.y1);
        x0 = std::min(x0, b.x0);
        x1 = std::max(x1, b.x1);
      }
      if (valid)
        for (auto& r : runs) {
          const bool any = y1 > y0 && x1 > x0;
          r->imgY0 = any ? y0 : 0;
          r->imgY1 = any ? y1 : 0;
          r->imgX0 = any ? x0 : 0;
          r->imgX1 = any ? x1 : 0;
        }
    }
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
    std::thread reserver;
    auto joinReserver = [&] {
      if (reserver.joinable()) reserver.join();
    };
    try {
      ScopedRange r(&rec, "plan");
      if (deviceCorners) {
        runs[0]->cornersReady.wait();
        if (runs[0]->cornersOk)
          planHeld = std::make_shared<const PatchPlan>(
              makePatchPlan(*req.psf, req.wave, req.fiberMin, req.nFiber, req.params, runs[0]->corners));
        else
          planHeld = requestPlan(req);
      } else {
        planHeld = requestPlan(req); // the request's plan, checked (built only when it has none)
      }
      validateRequest(req, *planHeld);
      // A whole frame on one device: its arrays and workspaces allocated beside the
      // image's copy (reserveAhead).
      if (m_options.reserveAhead && !req.patches && m_devices.size() == 1)
        reserver = std::thread([&] {
          runs[0]->allocsDone.wait();
          reserveAhead(*m_devices[0], m_options, req, *planHeld, rec);
        });
    } catch (...) {
      joinPrefetch();
      joinReserver();
      throw;
    }
    joinPrefetch();
    joinReserver();
    for (auto& e : prefetchErrors)
      if (e) std::rethrow_exception(e);
    const PatchPlan& plan = *planHeld;
    // The warm-up's first DGEMMs come before the first batch's (CudaEngineOptions::
    // warmUp): each device's runDevice waits for it once its workspaces are allocated.
    std::once_flag warmJoined;
    const std::function<void()> beforeBatches = [&] {
      std::call_once(warmJoined, [&] {
        if (!m_warm) return;
        ScopedRange r(&rec, "wait for the warm-up");
        joinWarmUp();
        if (!m_warmReported && m_warmEndNs > m_warmStartNs) {
          m_warmReported = true;
          const int64_t shift = rec.nowNs() - steadyNs(); // steady clock -> the recorder's
          rec.add({"warm-up (first DGEMMs)", std::max<int64_t>(0, m_warmStartNs + shift),
                   std::max<int64_t>(0, m_warmEndNs + shift), rec.lane("engine warm-up"), 0, -1});
        }
      });
    };
    const GaussHermitePsf& psf = *req.psf;
    // The frame's host arrays (~150 MB, zeroed and paged in: tens of ms) are made on
    // their own thread while the devices work; runDevice waits for them before its D2H.
    std::promise<void> allocPromise;
    const std::shared_future<void> allocated = allocPromise.get_future().share();
    // extractInto: a kept result of the plan's shape is written in place.
    const bool shaped = into && shapedFor(result, plan, psf, req.model);
    std::thread allocator;
    if (shaped) {
      allocPromise.set_value();
    } else {
      allocator = std::thread([&] {
        try {
          rec.setThreadLaneName("allocate");
          ScopedRange r(&rec, "allocate");
          result.allocate(plan, psf.hsizeY, req.model, psf.npixX, psf.npixY);
          result.modelTiles.clear();
          if (into && req.model) result.modelTiles.resize(plan.patches.size());
          allocPromise.set_value();
        } catch (...) {
          allocPromise.set_exception(std::current_exception());
        }
      });
    }
    struct Join {
      std::thread& t;
      ~Join() {
        if (t.joinable()) t.join();
      }
    } joinAllocator{allocator};
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
        j.into = into;
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
          runDevice(*m_devices[d], *runs[d], m_options, jobs[d], result, allocated, directModel, rec, cancel,
                    beforeBatches);
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
      allocated.get();
      {
        ScopedRange r(&rec, "assemble");
        if (into) {
          // The requested patches' diagnostics are replaced; the others' kept.
          std::vector<PatchDiagnostics> keep;
          for (const PatchDiagnostics& d : result.patches)
            if (!std::binary_search(todo.begin(), todo.end(), d.patch)) keep.push_back(d);
          result.patches = std::move(keep);
          result.cancelled = false;
          result.noDataBins = result.nonFiniteBins = 0;
        }
        for (DeviceJob& j : jobs) {
          result.noDataBins += j.noData;
          result.nonFiniteBins += j.nonFinite;
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
    allocated.get();
    if (into) {
      // Bins were finalized patch by patch (runDevice); the model image is redone
      // inside the boxes of the patches that finished.
      if (req.model) {
        ScopedRange r(&rec, "model image");
        std::vector<int> finished;
        for (const PatchDiagnostics& d : result.patches)
          if (std::binary_search(todo.begin(), todo.end(), d.patch)) finished.push_back(d.patch);
        updateModelImage(result, plan, finished);
      }
      result.lastPatches = *req.patches;
    } else {
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
