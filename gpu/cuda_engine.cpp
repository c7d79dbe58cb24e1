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
#include "engine_run.h"
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
using gpu::DeviceJob;
using gpu::DeviceRun;
using gpu::prefetch;
using gpu::reserveAhead;
using gpu::runDevice;

namespace {

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
      w->bisectEigh = m_options.eigh == CudaEngineOptions::Eigh::Bisect;
      w->warpReduce = m_options.eighReduce == CudaEngineOptions::EighReduce::Warp;
      w->newtonSchulzEigh = m_options.newtonSchulzEigh;
      w->eighValues = m_options.eighValues;
      w->sharedEighVectors = m_options.sharedEighVectors;
      w->selected = m_options.selectedInverse;
      w->fusedSelected = m_options.fusedSelectedInverse;
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

bool sameParams(const PatchParams& a, const PatchParams& b) {
  auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  return a.bundlesize == b.bundlesize && a.nsubbundles == b.nsubbundles && a.nwavestep == b.nwavestep &&
         a.wavepadFrac == b.wavepadFrac && a.pixpadFrac == b.pixpadFrac && same(a.regularize, b.regularize) &&
         same(a.psferr, b.psferr) && a.mode == b.mode;
}

// A kept result extractInto can write into as it is: the plan's frame, the model (and,
// with `tiles`, its tiles) when asked for.
bool shapedFor(const ExtractionResult& r, const PatchPlan& plan, const GaussHermitePsf& psf, bool model,
               bool tiles) {
  const std::size_t nfw = std::size_t(plan.nFiber) * std::size_t(std::max(plan.wave.n, 0));
  return r.nfiber == plan.nFiber && r.fiberMin == plan.fiberMin && r.nwave == plan.wave.n &&
         r.ndiag == psf.hsizeY && r.wave.wmin == plan.wave.wmin && r.wave.wmax == plan.wave.wmax &&
         r.wave.dw == plan.wave.dw && r.wave.n == plan.wave.n && sameParams(r.params, plan.params) &&
         r.flux.rows == plan.nFiber && r.flux.cols == plan.wave.n && r.resolution.n0 == plan.nFiber &&
         r.resolution.n1 == 2 * psf.hsizeY + 1 && r.resolution.n2 == plan.wave.n &&
         r.flux.size() == nfw && r.ivar.size() == nfw && r.mask.size() == nfw && r.chi2pix.size() == nfw &&
         r.pixmaskFraction.size() == nfw && r.deconvolved.size() == nfw && r.covered.size() == nfw &&
         r.resolution.size() == nfw * std::size_t(2 * psf.hsizeY + 1) && r.model.has_value() == model &&
         (!model || (r.model->rows == psf.npixY && r.model->cols == psf.npixX &&
                     r.model->size() == std::size_t(psf.npixY) * std::size_t(psf.npixX) &&
                     (!tiles || r.modelTiles.size() == plan.patches.size())));
}

// CudaEngineOptions::keepResult: everything of a kept result but its frame arrays (and
// their shape) as in a new one. The arrays stay where they are (a view may be reading
// them: the workbench's live result). Every field ExtractionResult has beside the
// arrays and the shape must be here.
void resetAllButArrays(ExtractionResult& r) {
  const ExtractionResult fresh;
  r.engine = fresh.engine;
  r.psferr = fresh.psferr;
  r.modelTiles.clear();
  r.lastPatches.clear();
  r.patches.clear();
  r.profile = Profile{};
  r.fibers.clear();
  r.heliocor = fresh.heliocor;
  r.nonFinitePixels = fresh.nonFinitePixels;
  r.noDataBins = fresh.noDataBins;
  r.nonFiniteBins = fresh.nonFiniteBins;
  r.cancelled = fresh.cancelled;
}

// CudaEngineOptions::keepResult, after the request: every bin it did not fill (not
// covered: patches not asked for, not launched, rows of no device) gets what a new
// result holds there, zero, in every array. The covered bins were all written (the
// devices' rows of every array come back whole or by wave steps that hold them, and
// the finalize sets their mask).
void clearUncovered(ExtractionResult& r) {
  const int nk = r.resolution.n1;
  for (int f = 0; f < r.nfiber; ++f) {
    const uint8_t* c = r.covered.row(f);
    if (!std::memchr(c, 0, std::size_t(r.nwave))) continue;
    for (int w = 0; w < r.nwave; ++w) {
      if (c[w]) continue;
      r.flux(f, w) = 0;
      r.ivar(f, w) = 0;
      r.mask(f, w) = 0;
      r.chi2pix(f, w) = 0;
      r.pixmaskFraction(f, w) = 0;
      r.deconvolved(f, w) = 0;
      for (int d = 0; d < nk; ++d) r.resolution(f, d, w) = 0;
    }
  }
}

} // namespace

ExtractionResult CudaEngine::extract(const ExtractionRequest& req, ProgressSink& progress,
                                     const CancelToken& cancel) {
  ExtractionResult result;
  run(req, result, false, false, progress, cancel);
  return result;
}

void CudaEngine::extractInto(const ExtractionRequest& req, ExtractionResult& into, ProgressSink& progress,
                             const CancelToken& cancel) {
  if (req.accumulate && req.patches) {
    run(req, into, true, false, progress, cancel);
  } else if (m_options.keepResult) {
    run(req, into, false, true, progress, cancel);
    if (req.patches) into.lastPatches = *req.patches; // as Engine::extractInto
  } else {
    Engine::extractInto(req, into, progress, cancel);
  }
}

void CudaEngine::run(const ExtractionRequest& req, ExtractionResult& result, bool into, bool keep,
                     ProgressSink& progress, const CancelToken& cancel) {
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
    if (deviceCorners) {
      runs[0]->wantCorners = true;
      // The plan ahead: a whole frame, where the plan alone waits for the corners.
      runs[0]->planAhead = m_options.planAhead && !req.patches;
    }
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
        if (runs[0]->aheadPlan)
          planHeld = runs[0]->aheadPlan;
        else if (runs[0]->cornersOk && !runs[0]->planAhead)
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
    if (req.patches)
      todo = *req.patches;
    else
      for (const Patch& p : plan.patches) todo.push_back(p.index);
    std::sort(todo.begin(), todo.end());
    todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
    // keep: from here on the caller's result is this request's: a new one, or the kept
    // one with its frame arrays where they are when they have the plan's shape. A
    // failure leaves it empty (new) or zeroed (kept) rather than half written. Declared
    // before the allocator, so it acts after the allocator's thread is joined.
    bool kept = false; // keep: the frame arrays are reused
    struct EmptyOnFailure {
      ExtractionResult& r;
      const bool& kept;
      bool armed = false;
      int unwinding = std::uncaught_exceptions();
      ~EmptyOnFailure() {
        if (!armed || std::uncaught_exceptions() <= unwinding) return;
        if (!kept) {
          r = ExtractionResult{};
          return;
        }
        resetAllButArrays(r);
        std::fill(r.covered.data.begin(), r.covered.data.end(), uint8_t(0));
        clearUncovered(r);
        if (r.model) std::fill(r.model->data.begin(), r.model->data.end(), 0.0);
      }
    } emptyOnFailure{result, kept};
    ExtractionResult stale; // keep, another shape: what the result held, freed on the allocator's thread
    if (keep) {
      kept = shapedFor(result, plan, psf, req.model, false);
      if (kept) {
        resetAllButArrays(result);
      } else {
        stale = std::move(result);
        result = ExtractionResult{};
      }
      emptyOnFailure.armed = true;
    }
    // A kept model is zeroed unless one device downloads it whole (runDevice's D2H):
    // several devices add theirs into it.
    const bool zeroModel = kept && req.model && (m_devices.size() > 1 || todo.empty());
    // The frame's host arrays (~150 MB, zeroed and paged in: tens of ms) are made on
    // their own thread while the devices work; runDevice waits for them before its D2H.
    std::promise<void> allocPromise;
    const std::shared_future<void> allocated = allocPromise.get_future().share();
    // extractInto: a kept result of the plan's shape is written in place.
    const bool shaped = into && shapedFor(result, plan, psf, req.model, true);
    std::thread allocator;
    if (shaped) {
      allocPromise.set_value();
    } else {
      allocator = std::thread([&] {
        try {
          rec.setThreadLaneName("allocate");
          if (kept) {
            // The kept arrays: only `covered` starts at zero (the request's patches set
            // it; clearUncovered zeroes the rest after them).
            ScopedRange r(&rec, "clear");
            std::fill(result.covered.data.begin(), result.covered.data.end(), uint8_t(0));
            if (zeroModel) std::fill(result.model->data.begin(), result.model->data.end(), 0.0);
          } else {
            ScopedRange r(&rec, "allocate");
            stale = ExtractionResult{}; // a result of another shape goes first
            result.allocate(plan, psf.hsizeY, req.model, psf.npixX, psf.npixY);
            result.modelTiles.clear();
            if (into && req.model) result.modelTiles.resize(plan.patches.size());
          }
          allocPromise.set_value();
        } catch (...) {
          allocPromise.set_exception(std::current_exception());
        }
        try {
          stale = ExtractionResult{}; // beside the devices' work
        } catch (...) {
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
    if (kept) {
      ScopedRange r(&rec, "clear uncovered");
      clearUncovered(result);
    }
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
