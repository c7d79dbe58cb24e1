// Step one of a device's run (engine_run.h): timeline, PSF, tables and the image.
#include "engine_run.h"

#include "batch_pipeline.h"

#include "core/errors.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <exception>
#include <string>
#include <thread>

namespace spex::gpu {

namespace {

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
  // The plan ahead: corners and extents enqueued, the spot table started beside them
  // (below), then the boxes set once the extents are back.
  const bool ahead = run.wantCorners && run.planAhead;
  if (ahead)
    run.tl.phase(gpu::kPhasePlanCorners, run.mainLane, -1, dev.main, [&] {
      run.cornersOk = gpu::launchPlanAhead(dev, run.psf, req, budget, run.corners, run.aheadSkeleton);
    });
  else if (run.wantCorners)
    run.tl.phase(gpu::kPhasePlanCorners, run.mainLane, -1, dev.main,
                 [&] { run.cornersOk = gpu::computePlanCorners(dev, run.psf, req, budget, run.corners); });
  if (!ahead) run.publishCorners();
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
  if (ahead) {
    if (run.cornersOk) {
      gpu::finishPlanAhead(dev, *req.psf, run.aheadSkeleton);
      run.aheadPlan = std::make_shared<const PatchPlan>(std::move(run.aheadSkeleton));
    }
    run.publishCorners();
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

} // namespace

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

} // namespace spex::gpu
