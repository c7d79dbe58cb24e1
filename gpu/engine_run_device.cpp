// A device's share of a request (engine_run.h): its batches, the overlapped download
// of the wave steps, retries and the final D2H.
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
      // The phases done so far become ranges now, while the device works, rather than
      // all after the last kernel (they were ~3 ms of the frame's tail).
      run.tl.flushDone(rec, run.t0, run.hostT0);
    }
    if (workers.empty()) {
      allocated.get();
      for (int t = 0; t < T; ++t) workers.emplace_back(worker, t);
    }
    run.tl.flushDone(rec, run.t0, run.hostT0);
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

} // namespace

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

  {
    // The wave steps' workers marked the coverage of every patch already (framesBack).
    ScopedRange r(&rec, "diagnostics");
    gpu::collectDiagnostics(plan, job.todo, launched, hChi2, regularized, failed, batchOf, laneOf, batchId, tl,
                            result, job.diags, !framesBack);
  }
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
  ScopedRange timelineRange(&rec, "timeline");
  if (overlap) {
    SPEX_CUDA(cudaStreamSynchronize(dev.upload));
    SPEX_CUDA(cudaStreamSynchronize(dev.download));
    run.upTl.flush(rec, run.t0, run.hostT0);
  }
  tl.flush(rec, run.t0, run.hostT0);
  dev.events.release(ready);
}

} // namespace spex::gpu
