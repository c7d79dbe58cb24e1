#include "engine.h"

#include "../parallel.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <limits>
#include <cmath>

namespace spex {

void ExtractionResult::allocate(const PatchPlan& plan, int nd, bool withModel, int npixX,
                                int npixY) {
  fiberMin = plan.fiberMin;
  nfiber = plan.nFiber;
  nwave = plan.wave.n;
  ndiag = nd;
  wave = plan.wave;
  params = plan.params;
  flux = Array2D<double>(nfiber, nwave);
  ivar = Array2D<double>(nfiber, nwave);
  mask = Array2D<uint32_t>(nfiber, nwave);
  resolution = Array3D<double>(nfiber, 2 * nd + 1, nwave);
  chi2pix = Array2D<double>(nfiber, nwave);
  pixmaskFraction = Array2D<double>(nfiber, nwave);
  deconvolved = Array2D<double>(nfiber, nwave);
  covered = Array2D<uint8_t>(nfiber, nwave);
  if (withModel)
    model = Array2D<double>(npixY, npixX);
  else
    model.reset();
}

namespace {

// Per Angstrom and the frame mask rules for bins [F0, F1) x [W0, W1); see finalizeFrame.
FinalizeCounts finalizeRows(ExtractionResult& r, int F0, int F1, int W0, int W1) {
  const double dw = r.wave.dw;
  // Per Angstrom (EXTRACTION.md §5): flux /= dw, ivar *= dw^2. Anything non-finite
  // (a failed patch) becomes flux 0, ivar 0 so no NaN reaches a frame.
  // A frame stores float32: anything beyond its range would become Inf on disk.
  constexpr double kFloatMax = double(std::numeric_limits<float>::max());
  FinalizeCounts c;
  for (int f = F0; f < F1; ++f)
    for (int w = W0; w < W1; ++w) {
      if (!r.covered(f, w)) continue;
      double& fl = r.flux(f, w);
      double& iv = r.ivar(f, w);
      fl /= dw;
      iv *= dw * dw;
      bool bad = false;
      if (!(std::abs(fl) <= kFloatMax) || !(iv >= 0 && iv <= kFloatMax)) {
        fl = 0;
        iv = 0;
        bad = true;
        ++c.nonFinite;
      }
      double& chi = r.chi2pix(f, w);
      if (!(std::abs(chi) <= kFloatMax)) chi = 0;
      const double pm = r.pixmaskFraction(f, w);
      uint32_t m = 0;
      if (pm > 0.5) m |= kSomeBadPix;
      if (pm >= 1.0 - 1e-9) m |= kAllBadPix; // spot sums carry rounding of ~1e-15
      // ivar 0 with usable pixels: the patch failed (its outputs are zeroed).
      if (bad || (iv == 0 && !(m & kAllBadPix))) {
        m |= kNoData;
        ++c.noData;
        for (int d = 0; d < r.resolution.n1; ++d)
          if (!std::isfinite(r.resolution(f, d, w))) r.resolution(f, d, w) = 0;
      }
      // BAD2DFIT as desi_extract_spectra sets it (desispec.scripts.extract, every
      // path): chi2pix > 100. (SpexLab's earlier rule, 5x the medians over fibers and
      // over wavelengths, flagged bins desispec does not; docs/desi.md "Masks".)
      if (chi > kBad2DFitChi2) m |= kBad2DFit;
      r.mask(f, w) = m;
    }
  return c;
}

bool clampRegion(const ExtractionResult& r, FrameRegion& g) {
  if (g.f1 < 0 || g.w1 < 0 || g.f1 <= g.f0 || g.w1 <= g.w0) g = FrameRegion{0, r.nfiber, 0, r.nwave};
  g.f0 = std::max(0, g.f0);
  g.f1 = std::min(r.nfiber, g.f1);
  g.w0 = std::max(0, g.w0);
  g.w1 = std::min(r.nwave, g.w1);
  return g.f1 > g.f0 && g.w1 > g.w0;
}

} // namespace

FinalizeCounts finalizeRegion(ExtractionResult& r, FrameRegion g) {
  if (!clampRegion(r, g)) return {};
  return finalizeRows(r, g.f0, g.f1, g.w0, g.w1);
}

void finalizeFrame(ExtractionResult& r, FrameRegion g) {
  r.noDataBins = r.nonFiniteBins = 0;
  if (!clampRegion(r, g)) return;
  // A few patches' worth of bins is done in microseconds on the calling thread;
  // starting threads for it would cost more (and, on a loaded machine, milliseconds).
  const int threads = double(g.f1 - g.f0) * (g.w1 - g.w0) >= 65536 ? 0 : 1;
  std::atomic<long> noData{0}, nonFinite{0};
  parallelFor(g.f1 - g.f0, [&](int a0, int a1) {
    const FinalizeCounts c = finalizeRows(r, g.f0 + a0, g.f0 + a1, g.w0, g.w1);
    noData += c.noData;
    nonFinite += c.nonFinite;
  }, threads);
  r.noDataBins = noData.load();
  r.nonFiniteBins = nonFinite.load();
}

FrameRegion keptRegion(const PatchPlan& plan, int i) {
  const Patch& p = plan.patches[std::size_t(i)];
  return {p.fiber0 - plan.fiberMin, p.fiber0 - plan.fiberMin + p.nfiber, p.wave0, p.wave0 + p.nwave};
}

void updateModelImage(ExtractionResult& r, const PatchPlan& plan, const std::vector<int>& changed) {
  if (!r.model || r.modelTiles.size() != plan.patches.size()) return;
  Array2D<double>& m = *r.model;
  // The rows the changed boxes touch, and per row the merged x spans to redo.
  int y0 = m.rows, y1 = 0;
  for (int i : changed) {
    const PixelBox& b = plan.patches[std::size_t(i)].box;
    if (b.empty()) continue;
    y0 = std::min(y0, std::max(0, b.y0));
    y1 = std::max(y1, std::min(m.rows, b.y1));
  }
  if (y1 <= y0) return;
  // Tiles that reach those rows, in plan order (the order of the sum).
  std::vector<int> tiles;
  for (std::size_t i = 0; i < plan.patches.size(); ++i) {
    const PixelBox& b = plan.patches[i].box;
    if (!r.modelTiles[i].empty() && b.y1 > y0 && b.y0 < y1) tiles.push_back(int(i));
  }
  std::vector<std::pair<int, int>> spans;
  for (int y = y0; y < y1; ++y) {
    spans.clear();
    for (int i : changed) {
      const PixelBox& b = plan.patches[std::size_t(i)].box;
      if (y >= b.y0 && y < b.y1 && !b.empty()) spans.emplace_back(std::max(0, b.x0), std::min(m.cols, b.x1));
    }
    if (spans.empty()) continue;
    std::sort(spans.begin(), spans.end());
    std::size_t k = 0;
    for (std::size_t j = 1; j < spans.size(); ++j) {
      if (spans[j].first <= spans[k].second) spans[k].second = std::max(spans[k].second, spans[j].second);
      else spans[++k] = spans[j];
    }
    spans.resize(k + 1);
    double* row = m.row(y);
    for (const auto& s : spans) std::fill(row + s.first, row + s.second, 0.0);
    for (int i : tiles) {
      const PixelBox& b = plan.patches[std::size_t(i)].box;
      if (y < b.y0 || y >= b.y1) continue;
      const Array2D<double>& t = r.modelTiles[std::size_t(i)];
      const double* src = t.row(y - b.y0);
      for (const auto& s : spans) {
        const int a = std::max(s.first, b.x0), e = std::min(s.second, b.x1);
        for (int x = a; x < e; ++x) row[x] += src[x - b.x0];
      }
    }
  }
}

namespace {
bool sameShape(const ExtractionResult& a, const ExtractionResult& b) {
  return a.fiberMin == b.fiberMin && a.nfiber == b.nfiber && a.nwave == b.nwave && a.ndiag == b.ndiag &&
         a.wave.wmin == b.wave.wmin && a.wave.dw == b.wave.dw && a.flux.rows == b.nfiber &&
         a.flux.cols == b.nwave;
}
} // namespace

void mergePatches(ExtractionResult& into, ExtractionResult&& from, const PatchPlan& plan,
                  const std::vector<int>& patches) {
  if (!sameShape(into, from)) {
    into = std::move(from);
    into.lastPatches = patches;
    return;
  }
  bool overlap = false;
  const int nk = into.resolution.n1;
  for (int i : patches) {
    const FrameRegion g = keptRegion(plan, i);
    for (int f = g.f0; f < g.f1; ++f)
      for (int w = g.w0; w < g.w1; ++w) {
        if (into.covered(f, w)) overlap = true;
        into.flux(f, w) = from.flux(f, w);
        into.ivar(f, w) = from.ivar(f, w);
        into.mask(f, w) = from.mask(f, w);
        into.chi2pix(f, w) = from.chi2pix(f, w);
        into.pixmaskFraction(f, w) = from.pixmaskFraction(f, w);
        into.deconvolved(f, w) = from.deconvolved(f, w);
        into.covered(f, w) = from.covered(f, w);
        for (int d = 0; d < nk; ++d) into.resolution(f, d, w) = from.resolution(f, d, w);
      }
  }
  // Diagnostics: the new ones replace those of the same patches.
  std::vector<PatchDiagnostics> kept;
  for (const PatchDiagnostics& d : into.patches)
    if (std::find(patches.begin(), patches.end(), d.patch) == patches.end()) kept.push_back(d);
  kept.insert(kept.end(), from.patches.begin(), from.patches.end());
  std::sort(kept.begin(), kept.end(), [](const PatchDiagnostics& a, const PatchDiagnostics& b) { return a.patch < b.patch; });
  into.patches = std::move(kept);
  // Without tiles a model can only add up when the patches are new; patches done again
  // replace the model (what was modelled of other patches is dropped with it).
  if (from.model) {
    if (into.model && !overlap && into.model->size() == from.model->size())
      for (std::size_t k = 0; k < into.model->size(); ++k) into.model->data[k] += from.model->data[k];
    else
      into.model = std::move(from.model);
  }
  into.modelTiles.clear();
  into.engine = from.engine;
  into.psferr = from.psferr;
  into.profile = std::move(from.profile);
  into.cancelled = from.cancelled;
  into.noDataBins = from.noDataBins;
  into.nonFiniteBins = from.nonFiniteBins;
  into.nonFinitePixels = from.nonFinitePixels;
  into.lastPatches = patches;
}

void Engine::extractInto(const ExtractionRequest& request, ExtractionResult& into, ProgressSink& progress,
                         const CancelToken& cancel) {
  if (!request.accumulate || !request.patches) {
    into = extract(request, progress, cancel);
    if (request.patches) into.lastPatches = *request.patches;
    return;
  }
  // The patches are final in `into` only after the merge: report them then.
  struct Held : ProgressSink {
    std::mutex m;
    std::vector<int> done;
    void patchDone(int patch, int, int) override {
      std::lock_guard lock(m);
      done.push_back(patch);
    }
  } held;
  ExtractionResult fresh = extract(request, held, cancel);
  const auto plan = requestPlan(request);
  mergePatches(into, std::move(fresh), *plan, *request.patches);
  const int total = int(request.patches->size());
  int n = 0;
  for (int p : held.done) progress.patchDone(p, ++n, total);
}

} // namespace spex
