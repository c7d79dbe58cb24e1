// Host <-> device transfers of the CUDA engine (engine_device.h): the PSF tables, the
// image and ivar (H2D, through the pinned stager, staging.h) and the frame arrays and
// model image (D2H, likewise).
#include "engine_device.h"
#include "psf_pack.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace spex::gpu {

void uploadPsf(const GaussHermitePsf& psf, CudaEngine::Device& dev, cudaStream_t s, DevPsf& out) {
  PackedPsf packed = packPsf(psf);
  // A warm engine asked again with the same PSF (the workbench's selections) keeps the
  // tables already on the device: the packed tables are compared byte for byte with
  // those uploaded last (~1 MB, far less than the copies and their synchronisation).
  const bool same = dev.psfUploaded && dev.pool.get() == dev.psfPoolAt && dev.sets.get() == dev.psfSetsAt &&
                    packed.pool.size() == dev.psfPool.size() && packed.sets.size() == dev.psfSets.size() &&
                    std::memcmp(packed.pool.data(), dev.psfPool.data(), packed.pool.size() * sizeof(double)) == 0 &&
                    std::memcmp(packed.sets.data(), dev.psfSets.data(), packed.sets.size() * sizeof(DevLegendre)) == 0;
  if (!same) {
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

void uploadImage(const Image& image, CudaEngine::Device& dev, std::size_t budget, int y0, int y1) {
  const std::size_t npix = std::size_t(image.ny) * image.nx;
  makeRoom(dev, dev.pix.growth(npix) + dev.ivar.growth(npix), budget);
  dev.pix.need(npix, &dev.held, "image");
  dev.ivar.need(npix, &dev.held, "image ivar");
  dev.track();
  if (y1 < 0 || y1 > image.ny) y1 = image.ny;
  y0 = std::clamp(y0, 0, y1);
  const std::size_t off = std::size_t(y0) * image.nx, count = std::size_t(y1 - y0) * image.nx;
  if (count == 0) return;
  dev.stager.upload({CopySegment{dev.pix.get() + off, image.pix.data.data() + off, count * sizeof(double)},
                     CopySegment{dev.ivar.get() + off, image.ivar.data.data() + off, count * sizeof(double)}},
                    dev.main, dev.index);
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

} // namespace spex::gpu
