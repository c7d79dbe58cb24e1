// Frame arrays and batch workspaces of a device's run (engine_run.h).
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

} // namespace spex::gpu
