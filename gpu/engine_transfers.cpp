// Host <-> device transfers of the CUDA engine (engine_device.h): the PSF tables, the
// image and ivar (H2D, through the pinned stager, staging.h) and the frame arrays and
// model image (D2H, likewise).
#include "engine_device.h"
#include "psf_pack.h"

#include "core/errors.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace spex::gpu {

void uploadPsf(const GaussHermitePsf& psf, CudaEngine::Device& dev, cudaStream_t s, DevPsf& out) {
  // A warm engine asked again with the same PSF (the workbench's selections) keeps the
  // tables already on the device: the PSF's sets are compared byte for byte with the
  // tables uploaded last (~1 MB read), without packing them again (a 1 MB allocation
  // and copy per request).
  const bool same = dev.psfUploaded && dev.pool.get() == dev.psfPoolAt && dev.sets.get() == dev.psfSetsAt &&
                    samePacked(psf, dev.psfPool, dev.psfSets);
  if (!same) {
    PackedPsf packed = packPsf(psf);
    dev.psfUploaded = false;
    dev.pool.need(packed.pool.size(), &dev.held, "PSF coefficients");
    dev.sets.need(packed.sets.size(), &dev.held, "PSF sets");
    SPEX_CUDA(cudaMemcpyAsync(dev.pool.get(), packed.pool.data(), packed.pool.size() * sizeof(double),
                              cudaMemcpyHostToDevice, s));
    SPEX_CUDA(cudaMemcpyAsync(dev.sets.get(), packed.sets.data(),
                              packed.sets.size() * sizeof(DevLegendre), cudaMemcpyHostToDevice, s));
    SPEX_CUDA(cudaStreamSynchronize(s)); // the host vectors are moved below
    dev.psfPool = std::move(packed.pool);
    dev.psfSets = std::move(packed.sets);
    dev.psfPoolAt = dev.pool.get();
    dev.psfSetsAt = dev.sets.get();
    dev.psfUploaded = true;
  }
  out = describePsf(psf, dev.pool.get(), dev.sets.get());
}

void reserveImage(const Image& image, CudaEngine::Device& dev, std::size_t budget) {
  const std::size_t npix = std::size_t(image.ny) * image.nx;
  makeRoom(dev, dev.pix.growth(npix) + dev.ivar.growth(npix), budget);
  dev.pix.need(npix, &dev.held, "image");
  dev.ivar.need(npix, &dev.held, "image ivar");
  dev.track();
}

void uploadImage(const Image& image, CudaEngine::Device& dev, int y0, int y1, int x0,
                 int x1) {
  if (y1 < 0 || y1 > image.ny) y1 = image.ny;
  y0 = std::clamp(y0, 0, y1);
  if (x1 < 0 || x1 > image.nx) x1 = image.nx;
  x0 = std::clamp(x0, 0, x1);
  const std::size_t rows = std::size_t(y1 - y0), width = std::size_t(x1 - x0);
  if (rows == 0 || width == 0) return;
  const std::size_t rect = rows * width, pitch = std::size_t(image.nx) * sizeof(double);
  if (width < std::size_t(image.nx) && 2 * rect * sizeof(double) < 2 * dev.stager.chunkBytes()) {
    // A few patches: only their boxes' bounding rectangle (a patch's box is ~1/50 of
    // its rows), packed into pinned memory on this thread and copied as two 2D
    // transfers; no staging threads. The last request's copy out of the buffer is
    // waited for first (it has normally finished long ago).
    if (dev.rectCopied) SPEX_CUDA(cudaEventSynchronize(dev.rectCopied));
    double* h = dev.hRect.get(2 * rect);
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t src = (std::size_t(y0) + r) * image.nx + x0;
      std::memcpy(h + r * width, image.pix.data.data() + src, width * sizeof(double));
      std::memcpy(h + rect + r * width, image.ivar.data.data() + src, width * sizeof(double));
    }
    const std::size_t off = std::size_t(y0) * image.nx + x0;
    SPEX_CUDA(cudaMemcpy2DAsync(dev.pix.get() + off, pitch, h, width * sizeof(double), width * sizeof(double),
                                rows, cudaMemcpyHostToDevice, dev.main));
    SPEX_CUDA(cudaMemcpy2DAsync(dev.ivar.get() + off, pitch, h + rect, width * sizeof(double),
                                width * sizeof(double), rows, cudaMemcpyHostToDevice, dev.main));
    if (!dev.rectCopied) SPEX_CUDA(cudaEventCreateWithFlags(&dev.rectCopied, cudaEventDisableTiming));
    SPEX_CUDA(cudaEventRecord(dev.rectCopied, dev.main));
    return;
  }
  const std::size_t off = std::size_t(y0) * image.nx, count = rows * image.nx;
  dev.stager.upload({CopySegment{dev.pix.get() + off, image.pix.data.data() + off, count * sizeof(double)},
                     CopySegment{dev.ivar.get() + off, image.ivar.data.data() + off, count * sizeof(double)}},
                    dev.main, dev.index);
}

void uploadImageRows(const Image& image, CudaEngine::Device& dev, cudaStream_t s, int rowsPerBlock,
                     const std::function<void(int block, int y1)>& rowsDone) {
  const int ny = image.ny, per = std::max(rowsPerBlock, 1);
  const std::size_t row = std::size_t(image.nx);
  std::vector<std::vector<CopySegment>> blocks;
  std::vector<int> ends;
  for (int y0 = 0; y0 < ny; y0 += per) {
    const int y1 = std::min(ny, y0 + per);
    const std::size_t off = std::size_t(y0) * row, count = std::size_t(y1 - y0) * row;
    blocks.push_back({CopySegment{dev.pix.get() + off, image.pix.data.data() + off, count * sizeof(double)},
                      CopySegment{dev.ivar.get() + off, image.ivar.data.data() + off, count * sizeof(double)}});
    ends.push_back(y1);
  }
  // Pieces of a whole chunk, as the plain upload (the threads never wait for each other).
  dev.stager.uploadBlocks(blocks, s, dev.index, dev.stager.chunkBytes(),
                          [&](int k) { rowsDone(k, ends[std::size_t(k)]); });
}

bool computePlanCorners(CudaEngine::Device& dev, const DevPsf& psf, const ExtractionRequest& req,
                        std::size_t budget, PlanCorners& out) {
  out = planCornerRange(*req.psf, req.wave, req.fiberMin, req.nFiber, req.params);
  const int nf = out.f1 - out.f0, nk = out.k1 - out.k0;
  if (nf <= 0 || nk <= 0) return false;
  const std::size_t N = std::size_t(nf) * nk;
  makeRoom(dev, dev.planCorners.growth(2 * N), budget);
  dev.planCorners.need(2 * N, &dev.held, "plan corners");
  dev.track();
  int* x = dev.planCorners.get();
  launchCornerTable(psf, out.f0, nf, out.k0, nk, req.wave.wmin, req.wave.dw, x, x + N, dev.main);
  out.x.resize(N);
  out.y.resize(N);
  dev.stager.download({CopySegment{out.x.data(), x, N * sizeof(int)}, CopySegment{out.y.data(), x + N, N * sizeof(int)}},
                      dev.main, dev.index);
  return true;
}

bool launchPlanAhead(CudaEngine::Device& dev, const DevPsf& psf, const ExtractionRequest& req, std::size_t budget,
                     PlanCorners& range, PatchPlan& skeleton) {
  range = planCornerRange(*req.psf, req.wave, req.fiberMin, req.nFiber, req.params);
  const int nf = range.f1 - range.f0, nk = range.k1 - range.k0;
  bool valid = nf > 0 && nk > 0;
  if (valid) {
    try {
      skeleton = makePatchSkeleton(*req.psf, req.wave, req.fiberMin, req.nFiber, req.params);
    } catch (const InputError&) {
      valid = false;
    }
  }
  if (!valid) {
    range = PlanCorners{};
    skeleton = PatchPlan{};
    return false; // makePatchPlan says what is wrong
  }
  const int count = int(skeleton.patches.size());
  const std::size_t N = std::size_t(nf) * nk;
  makeRoom(dev,
           dev.planCorners.growth(2 * N) + dev.planWindows.growth(5 * std::size_t(count)) +
               dev.planExtents.growth(8 * std::size_t(count)),
           budget);
  dev.planCorners.need(2 * N, &dev.held, "plan corners");
  dev.planWindows.need(5 * std::size_t(count), &dev.held, "plan windows");
  dev.planExtents.need(8 * std::size_t(count), &dev.held, "plan extents");
  dev.track();
  int* win = dev.hPlanWindows.get(5 * std::size_t(count));
  for (int i = 0; i < count; ++i) {
    const Patch& p = skeleton.patches[std::size_t(i)];
    int* w = win + 5 * std::size_t(i);
    w[0] = p.fiberPad0, w[1] = p.nfiberPad, w[2] = p.wavePad0, w[3] = p.nwavePad, w[4] = p.wave0;
  }
  int* x = dev.planCorners.get();
  SPEX_CUDA(cudaMemcpyAsync(dev.planWindows.get(), win, 5 * std::size_t(count) * sizeof(int), cudaMemcpyHostToDevice,
                            dev.main));
  launchCornerTable(psf, range.f0, nf, range.k0, nk, req.wave.wmin, req.wave.dw, x, x + N, dev.main);
  launchPatchExtents(x, x + N, range.f0, range.k0, nk, dev.planWindows.get(), count, req.params.nwavestep,
                     dev.planExtents.get(), dev.main);
  SPEX_CUDA(cudaMemcpyAsync(dev.hPlanExtents.get(8 * std::size_t(count)), dev.planExtents.get(),
                            8 * std::size_t(count) * sizeof(int), cudaMemcpyDeviceToHost, dev.main));
  return true;
}

void finishPlanAhead(CudaEngine::Device& dev, const GaussHermitePsf& psf, PatchPlan& skeleton) {
  SPEX_CUDA(cudaStreamSynchronize(dev.main));
  const std::size_t count = skeleton.patches.size();
  const int* e = dev.hPlanExtents.get(8 * count);
  std::vector<PatchExtents> ext(count);
  for (std::size_t i = 0; i < count; ++i)
    for (int j = 0; j < 4; ++j) {
      ext[i].pad[j] = e[8 * i + std::size_t(j)];
      ext[i].core[j] = e[8 * i + 4 + std::size_t(j)];
    }
  setPatchBoxes(skeleton, psf, ext);
}

void downloadFrame(CudaEngine::Device& dev, ExtractionResult& result, std::size_t off, std::size_t nfw,
                   int nk, double* model, std::size_t npix) {
  cudaStream_t ms = dev.main;
  for (auto& w : dev.ws) {
    const cudaEvent_t e = dev.events.acquire();
    SPEX_CUDA(cudaEventRecord(e, w->stream));
    SPEX_CUDA(cudaStreamWaitEvent(ms, e, 0));
    dev.events.release(e); // reusable once recorded again: the wait is already enqueued
  }
  const std::size_t b = sizeof(double);
  std::vector<CopySegment> segs{
      {result.flux.data.data() + off, dev.flux.get(), nfw * b},
      {result.ivar.data.data() + off, dev.ivarOut.get(), nfw * b},
      {result.chi2pix.data.data() + off, dev.chi2pix.get(), nfw * b},
      {result.pixmaskFraction.data.data() + off, dev.pixmask.get(), nfw * b},
      {result.deconvolved.data.data() + off, dev.deconv.get(), nfw * b},
      {result.resolution.data.data() + off * nk, dev.res.get(), nfw * nk * b}};
  if (model) segs.push_back({model, dev.model.get(), npix * b});
  dev.stager.download(segs, ms, dev.index);
}

bool downloadColumns(CudaEngine::Device& dev, int nrow, int nwave, int nk, int k0, int k1, const double*& out) {
  const std::size_t cols = std::size_t(std::max(k1 - k0, 0)), per = std::size_t(nrow) * cols;
  const std::size_t total = per * (5 + std::size_t(nk));
  if (total * sizeof(double) >= 2 * dev.stager.chunkBytes()) return false;
  cudaStream_t ms = dev.main;
  for (auto& w : dev.ws) {
    const cudaEvent_t e = dev.events.acquire();
    SPEX_CUDA(cudaEventRecord(e, w->stream));
    SPEX_CUDA(cudaStreamWaitEvent(ms, e, 0));
    dev.events.release(e);
  }
  double* h = dev.hColumns.get(std::max<std::size_t>(total, 1));
  out = h;
  if (per == 0) return true;
  const std::size_t b = sizeof(double), spitch = std::size_t(nwave) * b;
  const double* src[5] = {dev.flux.get(), dev.ivarOut.get(), dev.chi2pix.get(), dev.pixmask.get(), dev.deconv.get()};
  for (int a = 0; a < 5; ++a)
    SPEX_CUDA(cudaMemcpy2DAsync(h + a * per, cols * b, src[a] + k0, spitch, cols * b, std::size_t(nrow),
                                cudaMemcpyDeviceToHost, ms));
  SPEX_CUDA(cudaMemcpy2DAsync(h + 5 * per, cols * b, dev.res.get() + k0, spitch, cols * b,
                              std::size_t(nrow) * nk, cudaMemcpyDeviceToHost, ms));
  SPEX_CUDA(cudaStreamSynchronize(ms));
  return true;
}

} // namespace spex::gpu
