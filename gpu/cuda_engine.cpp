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
// A whole frame (CudaEngineOptions::overlapEnds, docs/design.md "Pipeline ends"): the
// image goes up by row blocks on a stream of its own while the batches start, the
// patches in wavelength order, each batch waiting for its last row block; each wave
// step's bins come back (download stream, pinned ring) and are finalized on host
// threads while later batches run (downloadSteps); D2H at the end only for the model
// image, or for a retry or a cancelled run.
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
#include <condition_variable>
#include <cstdio>
#include <cstring>
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
  long noData = 0, nonFinite = 0; // finalizeRegion counts of the patches (into, finalized)
  // CudaEngineOptions::overlapEnds: the device finalized its rows itself (wave step by
  // wave step as they came back); noData and nonFinite count them.
  bool finalized = false;
};

// CudaEngineOptions::overlapEnds: rows of the image per upload block (~17 MB of image
// and ivar for a DESI CCD, 16 blocks: the first batches, in wavelength order, need
// the first two or three).
constexpr int kRowsPerUploadBlock = 258;

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
    dev->spotKernel = m_options.spotWarps ? gpu::SpotKernel::Warp : gpu::SpotKernel::Block;
    SPEX_CUDA(cudaSetDevice(d));
    SPEX_CUDA(cudaStreamCreateWithFlags(&dev->main, cudaStreamNonBlocking));
    if (m_options.overlapEnds) {
      SPEX_CUDA(cudaStreamCreateWithFlags(&dev->upload, cudaStreamNonBlocking));
      SPEX_CUDA(cudaStreamCreateWithFlags(&dev->download, cudaStreamNonBlocking));
    }
    for (int k = 0; k < m_options.streams; ++k) {
      auto w = std::make_unique<Workspace>();
      w->potrf = !m_options.blockedCholesky;
      w->cusolverEigh = m_options.eigh == CudaEngineOptions::Eigh::Cusolver;
      w->selected = m_options.selectedInverse;
      w->choleskyColumns = m_options.choleskyColumns;
      w->normalKernel = m_options.normalKernel;
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
  explicit DeviceRun(EventPool& pool) : tl(pool), pool(pool), upTl(pool) {}
  DeviceTimeline tl;
  EventPool& pool;
  // CudaEngineOptions::overlapEnds on a whole frame (rowUpload): the prefetch thread
  // goes on uploading the image in row blocks on dev.upload (its own timeline, upTl)
  // after publishing `started`, while runDevice enqueues the batches: rows
  // [0, rowEnd[k]) are on the device once blockDone[k] completes, and that event is
  // recorded once blockRecorded[k] (blocks may finish out of order, each event covers
  // every block before its own). Everything of the run the prefetch touches before
  // `started` (tl, the event pool, the device's arrays) is runDevice's after it.
  bool rowUpload = false;
  int uploadLane = -1, downloadLane = -1;
  DeviceTimeline upTl;
  std::vector<cudaEvent_t> blockDone;
  std::vector<int> rowEnd;
  std::mutex m;
  std::condition_variable cv;
  std::vector<char> blockRecorded;
  bool uploadEnded = false, uploadFailed = false;
  std::promise<void> startedPromise;
  std::future<void> started = startedPromise.get_future();
  bool startedPublished = false;
  void publishStarted() {
    if (startedPublished) return;
    startedPublished = true;
    startedPromise.set_value();
  }
  // The prefetch thread's last act (failed: it threw).
  void endUpload(bool failed) {
    {
      std::lock_guard lock(m);
      uploadEnded = true;
      uploadFailed = failed;
    }
    cv.notify_all();
    publishStarted();
  }
  void blockReady(int k) {
    {
      std::lock_guard lock(m);
      blockRecorded[std::size_t(k)] = 1;
    }
    cv.notify_all();
  }
  // The event after which rows [0, y1) are on the device, once it is recorded (null
  // when no row is needed). Throws when the upload failed (run() then reports why).
  cudaEvent_t waitRows(int y1) {
    if (y1 <= 0 || rowEnd.empty()) return nullptr;
    int k = 0;
    while (k + 1 < int(rowEnd.size()) && rowEnd[std::size_t(k)] < y1) ++k;
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return blockRecorded[std::size_t(k)] || uploadEnded; });
    if (!blockRecorded[std::size_t(k)]) throw GpuError("the image upload stopped before row " + std::to_string(y1));
    return blockDone[std::size_t(k)];
  }
  // Until the prefetch thread no longer uses the device's stager.
  void waitUploadEnded() {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return uploadEnded; });
  }
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
    for (cudaEvent_t e : blockDone) pool.release(e);
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
  if (run.rowUpload) {
    run.uploadLane = rec.lane("cuda:" + std::to_string(dev.index) + " upload");
    run.downloadLane = rec.lane("cuda:" + std::to_string(dev.index) + " download");
  }
  if (tracer) {
    run.tl.setTracer(tracer);
    run.upTl.setTracer(tracer);
    tracer->addStream(dev.index, dev.main, run.mainLane);
    for (auto& w : dev.ws) tracer->addStream(dev.index, w->stream, w->lane);
    if (run.rowUpload) {
      tracer->addStream(dev.index, dev.upload, run.uploadLane);
      tracer->addStream(dev.index, dev.download, run.downloadLane);
    }
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
      gpu::launchSpotTable(run.psf, st, req.wave.wmin, req.wave.dw, w0.stream, dev.spotKernel);
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
  if (run.rowUpload) {
    // The image by row blocks beside runDevice (CudaEngineOptions::overlapEnds): all
    // the run's shared state this thread needs is taken before `started`.
    if (!psfUploaded)
      run.tl.phase(kPhaseH2D, run.mainLane, -1, dev.main, [&] { gpu::uploadPsf(*req.psf, dev, dev.main, run.psf); });
    run.publishAllocs();
    for (int y = 0; y < image.ny; y += kRowsPerUploadBlock) {
      run.blockDone.push_back(run.pool.acquire());
      run.rowEnd.push_back(std::min(image.ny, y + kRowsPerUploadBlock));
    }
    run.blockRecorded.assign(run.rowEnd.size(), 0);
    run.uploaded = true;
    run.upTl.phase(kPhaseH2D, run.uploadLane, -1, dev.upload, [&] {
      run.publishStarted(); // the phase's events are taken
      gpu::uploadImageRows(image, dev, dev.upload, kRowsPerUploadBlock, [&](int k, int) {
        SPEX_CUDA(cudaEventRecord(run.blockDone[std::size_t(k)], dev.upload));
        run.blockReady(k);
      });
    });
    return;
  }
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

// CudaEngineOptions::overlapEnds, after the batches of job.todo (in wavelength order,
// batch b = positions [b P, b P + P) on workspace b % W, its end batchDone[b]) are
// enqueued: each wave step (the patches of one wave0, contiguous in todo) is copied
// back as soon as the batches holding it are done, on dev.download into a slot of the
// stager's pinned ring (2D copies of its bins of every row of the device), up to 8
// steps in flight; T host threads (the stager's count), each with its share of the
// rows, copy each step into result (once `allocated`), mark it covered and finalize
// it (finalizeRegion) while later batches run. This thread queues the copies and hands
// a slot back to the next step once every worker is done with it. false (nothing
// done) when the ring holds fewer than two slots.
bool downloadSteps(CudaEngine::Device& dev, DeviceRun& run, const DeviceJob& job, ExtractionResult& result,
                   const std::shared_future<void>& allocated, int P, int W, int nk,
                   const std::vector<cudaEvent_t>& batchDone, long& noData, long& nonFinite, ProfileRecorder& rec) {
  const PatchPlan& plan = *job.plan;
  struct Step {
    int first = 0, end = 0; // positions in todo
    int c0 = 0, c1 = 0;     // its bins
  };
  std::vector<Step> steps;
  const int ntodo = int(job.todo.size());
  for (int i = 0; i < ntodo; ++i) {
    const Patch& p = plan.patches[job.todo[i]];
    if (steps.empty() || p.wave0 != steps.back().c0) steps.push_back(Step{i, i, p.wave0, p.wave0});
    steps.back().end = i + 1;
    steps.back().c1 = std::max(steps.back().c1, p.wave0 + p.nwave);
  }
  const int nrow = job.rowHi - job.rowLo, nwave = plan.wave.n;
  int maxCols = 0;
  for (const Step& st : steps) maxCols = std::max(maxCols, st.c1 - st.c0);
  const std::size_t slotDoubles = std::size_t(nrow) * maxCols * (5 + nk);
  std::size_t ringBytes = 0;
  char* ring = dev.stager.borrowRing(dev.index, ringBytes);
  const int nslots = int(std::min<std::size_t>(8, ringBytes / std::max<std::size_t>(slotDoubles * sizeof(double), 1)));
  if (nslots < 2 || slotDoubles == 0 || nrow <= 0) return false;
  ScopedRange whole(&rec, "download and finalize");
  std::vector<cudaEvent_t> slotDone;
  struct EventsBack {
    EventPool& pool;
    std::vector<cudaEvent_t>& v;
    ~EventsBack() {
      for (cudaEvent_t e : v) pool.release(e);
    }
  } back{dev.events, slotDone};
  for (int k = 0; k < nslots; ++k) slotDone.push_back(dev.events.acquire());
  auto slot = [&](int k) { return reinterpret_cast<double*>(ring) + std::size_t(k % nslots) * slotDoubles; };
  const std::size_t b = sizeof(double), spitch = std::size_t(nwave) * b;
  const double* src[5] = {dev.flux.get(), dev.ivarOut.get(), dev.chi2pix.get(), dev.pixmask.get(), dev.deconv.get()};
  Array2D<double>* dst[5] = {&result.flux, &result.ivar, &result.chi2pix, &result.pixmaskFraction,
                             &result.deconvolved};
  const int nsteps = int(steps.size());

  // Shared between this thread and the workers, under m: steps queued, and per step how
  // many workers are done with it; stop: this thread failed.
  const int T = std::clamp(dev.stager.threads(), 1, nrow);
  std::mutex m;
  std::condition_variable cv;
  int queued = 0;
  bool stop = false;
  std::vector<int> finished(std::size_t(nsteps), 0);
  std::vector<long> workerNoData(std::size_t(T), 0), workerNonFinite(std::size_t(T), 0);
  std::vector<std::exception_ptr> workerErrors(static_cast<std::size_t>(T));
  auto worker = [&](int t) {
    const int r0 = int(std::int64_t(nrow) * t / T), r1 = int(std::int64_t(nrow) * (t + 1) / T);
    for (int s = 0; s < nsteps; ++s) {
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return queued > s || stop; });
        if (queued <= s) return;
      }
      try {
        if (!workerErrors[std::size_t(t)] && r1 > r0) {
          SPEX_CUDA(cudaSetDevice(dev.index));
          SPEX_CUDA(cudaEventSynchronize(slotDone[std::size_t(s % nslots)]));
          const Step& st = steps[std::size_t(s)];
          const double* h = slot(s);
          const std::size_t cols = std::size_t(st.c1 - st.c0), per = std::size_t(nrow) * cols;
          for (int a = 0; a < 5; ++a)
            for (int r = r0; r < r1; ++r)
              std::memcpy(&(*dst[a])(job.rowLo + r, st.c0), h + a * per + std::size_t(r) * cols, cols * b);
          for (int r = r0; r < r1; ++r)
            for (int d = 0; d < nk; ++d)
              std::memcpy(&result.resolution(job.rowLo + r, d, st.c0),
                          h + 5 * per + (std::size_t(r) * nk + d) * cols, cols * b);
          for (int i = st.first; i < st.end; ++i) {
            const Patch& p = plan.patches[job.todo[i]];
            for (int f = 0; f < p.nfiber; ++f) {
              const int row = p.fiber0 + f - plan.fiberMin;
              if (row - job.rowLo < r0 || row - job.rowLo >= r1) continue;
              for (int k = 0; k < p.nwave; ++k) result.covered(row, p.wave0 + k) = 1;
            }
          }
          const FinalizeCounts c = finalizeRegion(result, FrameRegion{job.rowLo + r0, job.rowLo + r1, st.c0, st.c1});
          workerNoData[std::size_t(t)] += c.noData;
          workerNonFinite[std::size_t(t)] += c.nonFinite;
        }
      } catch (...) {
        workerErrors[std::size_t(t)] = std::current_exception();
      }
      {
        std::lock_guard lock(m);
        ++finished[std::size_t(s)];
      }
      cv.notify_all();
    }
  };
  std::vector<std::thread> workers;
  auto stopWorkers = [&] {
    {
      std::lock_guard lock(m);
      stop = true;
    }
    cv.notify_all();
    for (auto& th : workers)
      if (th.joinable()) th.join();
  };
  try {
    for (int q = 0; q < nsteps; ++q) {
      if (q == nslots) { // the ring is full: the workers start on the first steps
        allocated.get();
        for (int t = 0; t < T; ++t) workers.emplace_back(worker, t);
      }
      if (q >= nslots) { // slot q % nslots: every worker done with step q - nslots
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return finished[std::size_t(q - nslots)] == T; });
      }
      const Step& st = steps[std::size_t(q)];
      // Every batch up to the step's last, on each workspace (streams run in order).
      const int last = (st.end - 1) / P;
      for (int k = 0; k < W && last - k >= 0; ++k)
        SPEX_CUDA(cudaStreamWaitEvent(dev.download, batchDone[std::size_t(last - k)], 0));
      double* h = slot(q);
      const std::size_t cols = std::size_t(st.c1 - st.c0), per = std::size_t(nrow) * cols;
      run.tl.phase(kPhaseD2H, run.downloadLane, q, dev.download, [&] {
        for (int a = 0; a < 5; ++a)
          SPEX_CUDA(cudaMemcpy2DAsync(h + a * per, cols * b, src[a] + st.c0, spitch, cols * b, std::size_t(nrow),
                                      cudaMemcpyDeviceToHost, dev.download));
        SPEX_CUDA(cudaMemcpy2DAsync(h + 5 * per, cols * b, dev.res.get() + st.c0, spitch, cols * b,
                                    std::size_t(nrow) * nk, cudaMemcpyDeviceToHost, dev.download));
      });
      SPEX_CUDA(cudaEventRecord(slotDone[std::size_t(q % nslots)], dev.download));
      {
        std::lock_guard lock(m);
        queued = q + 1;
      }
      cv.notify_all();
    }
    if (workers.empty()) {
      allocated.get();
      for (int t = 0; t < T; ++t) workers.emplace_back(worker, t);
    }
    for (auto& th : workers) th.join();
  } catch (...) {
    stopWorkers();
    throw;
  }
  for (auto& e : workerErrors)
    if (e) std::rethrow_exception(e);
  for (int t = 0; t < T; ++t) {
    noData += workerNoData[std::size_t(t)];
    nonFinite += workerNonFinite[std::size_t(t)];
  }
  return true;
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
  // CudaEngineOptions::overlapEnds: the image is still going up by row blocks; patches
  // in wavelength order (CCD rows), then plan order, so the first batches need only the
  // first rows and each wave step's bins are done early (the frame is the same: every
  // patch is solved alone, and a batch's shape is the same; docs/design.md).
  const bool overlap = run.rowUpload && !job.into;
  if (overlap)
    std::stable_sort(job.todo.begin(), job.todo.end(),
                     [&](int a, int b) { return plan.patches[a].wave0 < plan.patches[b].wave0; });
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
    if (!spotsMade) gpu::launchSpotTable(dpsf, st, plan.wave.wmin, plan.wave.dw, ms, dev.spotKernel);
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
  std::vector<cudaEvent_t> batchDone; // overlap: each batch's end on its stream
  struct EventsBack {
    EventPool& pool;
    std::vector<cudaEvent_t>& v;
    ~EventsBack() {
      for (cudaEvent_t e : v) pool.release(e);
    }
  } batchEventsBack{dev.events, batchDone};
  beforeBatches();
  std::optional<ScopedRange> enqueueRange(std::in_place, &rec, "enqueue batches");
  for (int first = 0; first < ntodo; first += P, ++batchId) {
    if (cancel.cancelled()) break;
    Workspace& w = *dev.ws[batchId % W];
    const int count = std::min(P, ntodo - first);
    const BatchShape shape = shapeOf(count, [&](int k) { return first + k; });
    if (overlap) {
      // The batch reads image rows below its boxes' last: wait for that row block only.
      int y1 = 0;
      for (int i = first; i < first + count; ++i) y1 = std::max(y1, table[i].y1);
      if (const cudaEvent_t rows = run.waitRows(y1)) SPEX_CUDA(cudaStreamWaitEvent(w.stream, rows, 0));
    }
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
    if (overlap) {
      batchDone.push_back(dev.events.acquire());
      SPEX_CUDA(cudaEventRecord(batchDone.back(), w.stream));
    }
    launched = first + count;
  }
  enqueueRange.reset();
  // overlap: each wave step's bins of the frame back and finalized as soon as its
  // batches are done, while later batches run (false: the whole rows at the end).
  bool stepsDone = false;
  long stepNoData = 0, stepNonFinite = 0;
  if (overlap) {
    run.waitUploadEnded(); // the stager (its pinned ring) is free again
    if (launched == ntodo && ntodo > 0)
      stepsDone =
          downloadSteps(dev, run, job, result, allocated, P, W, nk, batchDone, stepNoData, stepNonFinite, rec);
  }
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
  // overlap: the frame's bins are on the host already unless a patch was retried (its
  // bins changed on the device after its wave step came back) or the run was cut short.
  const bool framesBack = overlap && stepsDone && retry.empty();
  if (!framesBack || req.model) tl.phase(kPhaseD2H, mainLane, -1, ms, [&] {
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
    gpu::downloadFrame(dev, result, std::size_t(job.rowLo) * nwave, framesBack ? 0 : std::size_t(nrow) * nwave,
                       nk, model, npixImg);
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
  if (overlap) {
    job.finalized = true;
    if (framesBack) {
      job.noData = stepNoData;
      job.nonFinite = stepNonFinite;
    } else { // the raw rows again, finalized whole
      ScopedRange r(&rec, "finalize");
      const FinalizeCounts c = finalizeRegion(result, FrameRegion{job.rowLo, job.rowHi, 0, nwave});
      job.noData = c.noData;
      job.nonFinite = c.nonFinite;
    }
  }
  if (job.into)
    for (int i = 0; i < launched; ++i) {
      const FinalizeCounts c = finalizeRegion(result, keptRegion(plan, job.todo[i]));
      job.noData += c.noData;
      job.nonFinite += c.nonFinite;
    }
  job.done = launched;
  job.cancelled = launched < ntodo;
  SPEX_CUDA(cudaStreamSynchronize(ms)); // the patch table's host copy goes out of scope
  if (overlap) {
    SPEX_CUDA(cudaStreamSynchronize(dev.upload));
    SPEX_CUDA(cudaStreamSynchronize(dev.download));
    run.upTl.flush(rec, run.t0, run.hostT0);
  }
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
    // A whole frame (CudaEngineOptions::overlapEnds): the image goes up by row blocks
    // while the batches start (DeviceRun::rowUpload).
    if (m_options.overlapEnds && !req.patches)
      for (auto& r : runs) r->rowUpload = true;
    std::vector<std::exception_ptr> prefetchErrors(m_devices.size());
    std::vector<std::thread> prefetchers;
    struct JoinAll {
      std::vector<std::thread>& v;
      ~JoinAll() {
        for (auto& t : v)
          if (t.joinable()) t.join();
      }
    } joinPrefetchers{prefetchers}; // a row upload may outlive runDevice's failure
    for (std::size_t d = 0; d < m_devices.size(); ++d)
      prefetchers.emplace_back([&, d] {
        try {
          prefetch(*m_devices[d], *runs[d], req, m_options.memoryBudgetBytes, rec, tracer.get());
        } catch (...) {
          prefetchErrors[d] = std::current_exception();
        }
        runs[d]->endUpload(prefetchErrors[d] != nullptr);
      });
    auto joinPrefetch = [&] {
      for (auto& t : prefetchers)
        if (t.joinable()) t.join();
    };
    // Until each device's prefetch is done, or (row upload) under way; an error of it
    // is rethrown (one in the row upload itself: after runDevice, which meets it).
    auto awaitPrefetch = [&] {
      bool failed = false, uploading = false;
      for (auto& r : runs) {
        r->started.wait();
        std::lock_guard lock(r->m);
        failed = failed || r->uploadFailed;
        uploading = uploading || !r->uploadEnded;
      }
      if (failed || !uploading) {
        joinPrefetch();
        for (auto& e : prefetchErrors)
          if (e) std::rethrow_exception(e);
      }
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
    joinReserver();
    awaitPrefetch();
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

    bool finalizedOnDevices = false; // every device finalized its rows (overlapEnds)
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
      joinPrefetch(); // a row upload's failure is the cause of runDevice's
      for (auto& e : prefetchErrors)
        if (e) std::rethrow_exception(e);
      for (auto& e : errors)
        if (e) std::rethrow_exception(e);
      finalizedOnDevices = true;
      for (const DeviceJob& j : jobs) finalizedOnDevices = finalizedOnDevices && (j.todo.empty() || j.finalized);
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
    } else if (!finalizedOnDevices) {
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
