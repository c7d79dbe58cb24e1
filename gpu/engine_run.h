// Internal to the CUDA engine (cuda_engine.cpp and its parts): one extract() call's
// work for one device and that device's state during the call, and the steps
// CudaEngine::run takes on each device, in order:
//   prefetch      (engine_prefetch.cpp)    timeline, PSF, corner and spot tables, image
//   reserveAhead  (engine_reserve.cpp)     frame arrays and batch workspaces, beside the copy
//   runDevice     (engine_run_device.cpp)  the batches, the overlapped download, D2H
#pragma once

#include "cuda_engine.h"
#include "engine_device.h"
#include "kernel_tracer.h"

#include "core/extract/engine.h"

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

namespace spex::gpu {

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
  // CudaEngineOptions::planAhead (with wantCorners): the whole plan made here instead
  // (launchPlanAhead, finishPlanAhead; corners then holds only the range), ready once
  // the corners are published; null when the request is not a valid plan.
  bool planAhead = false;
  PatchPlan aheadSkeleton;
  std::shared_ptr<const PatchPlan> aheadPlan;
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

// The layout of a request's batches on one device (runDevice, reserveAhead).
struct BatchLayout {
  int n = 0, F = 0, nb = 0, maxBoxArea = 0, maxKept = 1, ntodo = 0;
  bool noise = false, keptEigh = false, tiles = false;
};

// Opens the device's timeline and uploads the PSF and the image (a whole frame with
// rowUpload: by row blocks, returning once the upload is under way); on failure the
// run's waiters (corners, allocations) are released before the error is rethrown.
void prefetch(CudaEngine::Device& dev, DeviceRun& run, const ExtractionRequest& req, std::size_t budget,
              ProfileRecorder& rec, KernelTracer* tracer);

// The frame arrays of nfw (rows x bins) values, the resolution's nk times that and,
// when npixModel > 0, the model image, allocated (not zeroed).
void reserveFrameArrays(CudaEngine::Device& dev, std::size_t nfw, int nk, std::size_t npixModel);

// Sizes the batch and allocates every workspace for it; returns the batch size.
int sizeWorkspaces(CudaEngine::Device& dev, const CudaEngineOptions& opt, const BatchLayout& L,
                   ProfileRecorder& rec);

// A whole frame on one device: its arrays and workspaces allocated ahead (engine_reserve.cpp).
void reserveAhead(CudaEngine::Device& dev, const CudaEngineOptions& opt, const ExtractionRequest& req,
                  const PatchPlan& plan, ProfileRecorder& rec);

// The device's share of the request (job): batches, retries, results into `result`.
void runDevice(CudaEngine::Device& dev, DeviceRun& run, const CudaEngineOptions& opt, DeviceJob& job,
               ExtractionResult& result, const std::shared_future<void>& allocated, bool directModel,
               ProfileRecorder& rec, const CancelToken& cancel, const std::function<void()>& beforeBatches);

} // namespace spex::gpu
