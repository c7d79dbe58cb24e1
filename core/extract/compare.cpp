// Agreement statistics between two extractions (EXTRACTION.md §7, last item), in the
// style of gpu_specter's compare-frame.
#include "compare.h"
#include "../plan/patch_plan.h"

#include "../errors.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace spex {

namespace {

void requireSame(const std::string& what, long a, long b) {
  if (a != b)
    throw InputError("cannot compare frames: " + what + " differs (" +
                     std::to_string(a) + " vs " + std::to_string(b) + ")");
}

template <class A>
void requireShape(const char* what, const A& a, int rows, int cols) {
  if (a.rows != rows || a.cols != cols)
    throw InputError(std::string("cannot compare frames: ") + what + " is " +
                     std::to_string(a.rows) + " x " + std::to_string(a.cols) + ", expected " +
                     std::to_string(rows) + " x " + std::to_string(cols));
}

void requireSameGrid(const WaveGrid& a, const WaveGrid& b) {
  const double tol = 1e-6 * std::max(std::abs(a.dw), 1e-12);
  if (a.n != b.n || std::abs(a.wmin - b.wmin) > tol ||
      std::abs(a.dw - b.dw) > 1e-9 * std::abs(a.dw)) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "cannot compare frames: wavelength grids differ (%.6f + %d x %.9g vs %.6f + %d x "
                  "%.9g)",
                  a.wmin, a.n, a.dw, b.wmin, b.n, b.dw);
    throw InputError(buf);
  }
}

} // namespace

namespace {

// compareFrames' preconditions; throws InputError naming what differs.
void requireComparable(const ExtractionResult& a, const ExtractionResult& b) {
  requireSame("number of fibers", a.nfiber, b.nfiber);
  requireSame("number of wavelengths", a.nwave, b.nwave);
  requireSame("first fiber", a.fiberMin, b.fiberMin);
  requireSameGrid(a.wave, b.wave);
  const int nf = a.nfiber, nw = a.nwave;
  // Same spectrum indices but other FIBERs: frames of different petals.
  if (a.fibers.size() == std::size_t(nf) && b.fibers.size() == std::size_t(nf))
    for (int s = 0; s < nf; ++s)
      requireSame("FIBER of row " + std::to_string(s), a.fibers[std::size_t(s)],
                  b.fibers[std::size_t(s)]);
  for (const ExtractionResult* r : {&a, &b}) {
    requireShape("FLUX", r->flux, nf, nw);
    requireShape("IVAR", r->ivar, nf, nw);
    if (!r->mask.empty()) requireShape("MASK", r->mask, nf, nw);
    if (!r->covered.empty()) requireShape("coverage", r->covered, nf, nw);
  }
  if (!a.resolution.empty() && !b.resolution.empty()) {
    requireSame("number of resolution diagonals", a.ndiag, b.ndiag);
    for (const ExtractionResult* r : {&a, &b})
      if (r->resolution.n0 != nf || r->resolution.n1 != 2 * r->ndiag + 1 || r->resolution.n2 != nw)
        throw InputError("cannot compare frames: RESOLUTION shape does not match the frame");
  }
}

} // namespace

double binPull(const ExtractionResult& a, const ExtractionResult& b, int s, int j) {
  const bool covered = (a.covered.empty() || a.covered(s, j)) && (b.covered.empty() || b.covered(s, j));
  const double ia = a.ivar(s, j), ib = b.ivar(s, j);
  if (!covered || !(ia > 0 && ib > 0)) return std::numeric_limits<double>::quiet_NaN();
  // (fa - fb) / sqrt(var_a + var_b); a NaN pull counts as a disagreement.
  const double pull = (a.flux(s, j) - b.flux(s, j)) / std::sqrt(1.0 / ia + 1.0 / ib);
  return std::isfinite(pull) ? pull : std::numeric_limits<double>::infinity();
}

Array2D<double> pullMap(const ExtractionResult& a, const ExtractionResult& b) {
  requireComparable(a, b);
  Array2D<double> m(a.nfiber, a.nwave);
  for (int s = 0; s < a.nfiber; ++s)
    for (int j = 0; j < a.nwave; ++j) m(s, j) = binPull(a, b, s, j);
  return m;
}

FrameComparison compareFrames(const ExtractionResult& a, const ExtractionResult& b) {
  requireComparable(a, b);
  const int nf = a.nfiber, nw = a.nwave;
  const bool haveRes = !a.resolution.empty() && !b.resolution.empty();
  const bool haveMask = !a.mask.empty() && !b.mask.empty();

  FrameComparison c;
  std::array<long, 6> below{};
  for (int s = 0; s < nf; ++s) {
    for (int j = 0; j < nw; ++j) {
      const bool covered =
          (a.covered.empty() || a.covered(s, j)) && (b.covered.empty() || b.covered(s, j));
      if (!covered) continue;
      const double ia = a.ivar(s, j), ib = b.ivar(s, j);
      if (std::max(ia, ib) > 0 || !std::isfinite(ia) || !std::isfinite(ib)) {
        const double rel = std::abs(ia - ib) / std::max(ia, ib);
        if (!(rel <= c.maxRelIvar)) c.maxRelIvar = std::isfinite(rel) ? rel : INFINITY;
      }
      if (haveMask && a.mask(s, j) != b.mask(s, j)) ++c.maskDifferences;
      if (haveRes)
        for (int k = 0; k < a.resolution.n1; ++k) {
          const double d = std::abs(a.resolution(s, k, j) - b.resolution(s, k, j));
          if (!(d <= c.maxResolution)) c.maxResolution = std::isfinite(d) ? d : INFINITY;
        }
      const double pull = std::abs(binPull(a, b, s, j));
      if (std::isnan(pull)) continue;
      ++c.nbins;
      for (std::size_t t = 0; t < FrameComparison::kThresholds.size(); ++t)
        if (pull < FrameComparison::kThresholds[t]) ++below[t];
      if (pull > c.maxPull || c.maxPullFiber < 0) {
        c.maxPull = pull;
        c.maxPullFiber = a.fiberNumber(s);
        c.maxPullBin = j;
      }
    }
  }
  for (std::size_t t = 0; t < below.size(); ++t)
    c.fractionBelow[t] = c.nbins > 0 ? double(below[t]) / double(c.nbins) : 0.0;
  return c;
}

namespace {

std::string spectraText(int first, int n) {
  return n == 1 ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(first + n - 1);
}

std::string waveText(const WaveGrid& g, int first, int n) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.1f-%.1f A, %d bin%s", g.at(first), g.at(first + n - 1), n, n == 1 ? "" : "s");
  return buf;
}

} // namespace

FrameOverlap findOverlap(const ExtractionResult& a, const ExtractionResult& b) {
  FrameOverlap o;
  if (a.nfiber <= 0 || a.nwave <= 0 || b.nfiber <= 0 || b.nwave <= 0)
    throw InputError("cannot compare frames: one of them is empty (" + std::to_string(a.nfiber) + " x " +
                     std::to_string(a.nwave) + " vs " + std::to_string(b.nfiber) + " x " +
                     std::to_string(b.nwave) + " fibers x wavelengths)");
  // Spectra: the common indices.
  const int lo = std::max(a.fiberMin, b.fiberMin);
  const int hi = std::min(a.fiberMin + a.nfiber, b.fiberMin + b.nfiber);
  if (hi <= lo)
    throw InputError("cannot compare frames: no common spectra (a holds " + spectraText(a.fiberMin, a.nfiber) +
                     ", b holds " + spectraText(b.fiberMin, b.nfiber) + ")");
  o.fiberMin = lo;
  o.nfiber = hi - lo;
  if (a.fibers.size() == std::size_t(a.nfiber) && b.fibers.size() == std::size_t(b.nfiber))
    for (int i = lo; i < hi; ++i) {
      const int fa = a.fibers[std::size_t(i - a.fiberMin)], fb = b.fibers[std::size_t(i - b.fiberMin)];
      if (fa != fb)
        throw InputError("cannot compare frames: spectrum " + std::to_string(i) + " is FIBER " + std::to_string(fa) +
                         " in a but FIBER " + std::to_string(fb) + " in b (frames of other petals?)");
    }
  // Wavelengths: the same bin width and a whole number of bins apart.
  if (std::abs(a.wave.dw - b.wave.dw) > 1e-9 * std::abs(a.wave.dw)) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "cannot compare frames: bin widths differ (%.9g A vs %.9g A)", a.wave.dw, b.wave.dw);
    std::string msg = buf;
    if (a.heliocor != b.heliocor) {
      std::snprintf(buf, sizeof buf, "; HELIOCOR %.9g vs %.9g: only one is barycentric-corrected", a.heliocor,
                    b.heliocor);
      msg += buf;
    }
    throw InputError(msg);
  }
  const double dw = a.wave.dw;
  const double shift = (b.wave.wmin - a.wave.wmin) / dw; // b's bin 0 is a's bin `shift`
  const long k = std::lround(shift);
  if (std::abs(b.wave.wmin - a.wave.wmin - double(k) * dw) > 1e-6 * std::max(std::abs(dw), 1e-12)) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "cannot compare frames: the wavelength grids are offset by %.4g of a bin (first bins %.6f and "
                  "%.6f A, width %.9g A)",
                  shift - std::floor(shift), a.wave.wmin, b.wave.wmin, dw);
    throw InputError(buf);
  }
  const long firstA = std::max(0L, k), endA = std::min(long(a.nwave), long(b.nwave) + k);
  if (endA <= firstA)
    throw InputError("cannot compare frames: no common wavelengths (a covers " + waveText(a.wave, 0, a.nwave) +
                     ", b covers " + waveText(b.wave, 0, b.nwave) + ")");
  o.firstBinA = int(firstA);
  o.firstBinB = int(firstA - k);
  o.nwave = int(endA - firstA);
  if (!a.resolution.empty() && !b.resolution.empty() && a.ndiag != b.ndiag)
    throw InputError("cannot compare frames: number of resolution diagonals differs (" + std::to_string(a.ndiag) +
                     " vs " + std::to_string(b.ndiag) + ")");
  o.whole = a.fiberMin == b.fiberMin && a.nfiber == b.nfiber && k == 0 && a.nwave == b.nwave;
  if (!o.whole) {
    std::string d = "compared on the overlap: spectra " + spectraText(o.fiberMin, o.nfiber);
    if (a.fiberMin != b.fiberMin || a.nfiber != b.nfiber)
      d += " (a has " + spectraText(a.fiberMin, a.nfiber) + ", b has " + spectraText(b.fiberMin, b.nfiber) + ")";
    d += " x " + waveText(a.wave, o.firstBinA, o.nwave);
    if (k != 0 || a.nwave != b.nwave)
      d += " (a has " + waveText(a.wave, 0, a.nwave) + ", b has " + waveText(b.wave, 0, b.nwave) + ")";
    o.description = d;
  }
  return o;
}

ExtractionResult cropToOverlap(const ExtractionResult& r, const FrameOverlap& o, bool sideA) {
  const int s0 = o.fiberMin - r.fiberMin, j0 = sideA ? o.firstBinA : o.firstBinB;
  const int nf = o.nfiber, nw = o.nwave;
  if (s0 < 0 || s0 + nf > r.nfiber || j0 < 0 || j0 + nw > r.nwave)
    throw InputError("cropToOverlap: the overlap is outside the result");
  ExtractionResult c;
  c.engine = r.engine;
  c.fiberMin = o.fiberMin;
  c.nfiber = nf;
  c.nwave = nw;
  c.ndiag = r.ndiag;
  c.wave = WaveGrid{r.wave.at(j0), r.wave.at(j0 + nw - 1), r.wave.dw, nw};
  c.params = r.params;
  c.psferr = r.psferr;
  c.heliocor = r.heliocor;
  c.cancelled = r.cancelled;
  if (r.fibers.size() == std::size_t(r.nfiber))
    c.fibers.assign(r.fibers.begin() + s0, r.fibers.begin() + s0 + nf);
  auto crop2 = [&](const auto& in, auto& out) {
    if (in.empty()) return;
    out = std::decay_t<decltype(out)>(nf, nw);
    for (int s = 0; s < nf; ++s)
      for (int j = 0; j < nw; ++j) out(s, j) = in(s0 + s, j0 + j);
  };
  crop2(r.flux, c.flux);
  crop2(r.ivar, c.ivar);
  crop2(r.mask, c.mask);
  crop2(r.covered, c.covered);
  crop2(r.chi2pix, c.chi2pix);
  if (!r.resolution.empty()) {
    c.resolution = Array3D<double>(nf, r.resolution.n1, nw);
    for (int s = 0; s < nf; ++s)
      for (int k = 0; k < r.resolution.n1; ++k)
        for (int j = 0; j < nw; ++j) c.resolution(s, k, j) = r.resolution(s0 + s, k, j0 + j);
  }
  return c;
}

std::string FrameComparison::toText() const {
  std::ostringstream o;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%-32s %ld\n", "bins compared (both ivar > 0)", nbins);
  o << buf;
  for (std::size_t t = 0; t < kThresholds.size(); ++t) {
    char label[64];
    std::snprintf(label, sizeof label, "|fa-fb|/sigma < %g", kThresholds[t]);
    std::snprintf(buf, sizeof buf, "%-32s %.6f\n", label, fractionBelow[t]);
    o << buf;
  }
  if (maxPullFiber >= 0)
    std::snprintf(buf, sizeof buf, "%-32s %.6g (fiber %d, bin %d)\n", "max |fa-fb|/sigma", maxPull,
                  maxPullFiber, maxPullBin);
  else
    std::snprintf(buf, sizeof buf, "%-32s -\n", "max |fa-fb|/sigma");
  o << buf;
  std::snprintf(buf, sizeof buf, "%-32s %.6g\n", "max |ia-ib|/max(ia,ib)", maxRelIvar);
  o << buf;
  std::snprintf(buf, sizeof buf, "%-32s %.6g\n", "max |Ra-Rb|", maxResolution);
  o << buf;
  std::snprintf(buf, sizeof buf, "%-32s %ld\n", "bins with different MASK", maskDifferences);
  o << buf;
  return o.str();
}

std::string FrameComparison::toJson() const {
  // Non-finite statistics (no bins compared) become null: JSON has no NaN.
  auto n = [](double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(); };
  nlohmann::ordered_json thresholds = nlohmann::ordered_json::array(), below = nlohmann::ordered_json::array();
  for (double t : kThresholds) thresholds.push_back(n(t));
  for (double f : fractionBelow) below.push_back(n(f));
  const nlohmann::ordered_json root = {{"nbins", nbins},
                               {"thresholds", std::move(thresholds)},
                               {"fractionBelow", std::move(below)},
                               {"maxPull", n(maxPull)},
                               {"maxPullFiber", maxPullFiber},
                               {"maxPullBin", maxPullBin},
                               {"maxRelIvar", n(maxRelIvar)},
                               {"maxResolution", n(maxResolution)},
                               {"maskDifferences", maskDifferences}};
  return root.dump();
}

std::shared_ptr<ExtractionResult> runOwnBins(const ExtractionResult& r, const PatchPlan& plan) {
  if (r.lastPatches.empty() || r.flux.empty()) return nullptr;
  if (r.fiberMin != plan.fiberMin || r.nfiber != plan.nFiber || r.nwave != plan.wave.n) return nullptr;
  FrameRegion box{r.nfiber, 0, r.nwave, 0}; // ends exclusive, as keptRegion's
  std::vector<FrameRegion> regions;
  for (int i : r.lastPatches) {
    if (i < 0 || i >= int(plan.patches.size())) continue;
    const FrameRegion k = keptRegion(plan, i);
    if (k.f1 <= k.f0 || k.w1 <= k.w0) continue;
    regions.push_back(k);
    box.f0 = std::min(box.f0, k.f0);
    box.f1 = std::max(box.f1, k.f1);
    box.w0 = std::min(box.w0, k.w0);
    box.w1 = std::max(box.w1, k.w1);
  }
  if (regions.empty()) return nullptr;
  FrameOverlap o;
  o.fiberMin = r.fiberMin + box.f0;
  o.nfiber = box.f1 - box.f0;
  o.firstBinA = o.firstBinB = box.w0;
  o.nwave = box.w1 - box.w0;
  o.whole = false;
  auto c = std::make_shared<ExtractionResult>(cropToOverlap(r, o, true));
  // Only this run's bins: the others in the box belong to earlier runs.
  Array2D<uint8_t> mine(c->nfiber, c->nwave);
  for (const FrameRegion& k : regions)
    for (int s = k.f0; s < k.f1; ++s)
      for (int j = k.w0; j < k.w1; ++j) mine(s - box.f0, j - box.w0) = 1;
  for (int s = 0; s < c->nfiber; ++s)
    for (int j = 0; j < c->nwave; ++j)
      if (!mine(s, j)) {
        if (!c->covered.empty()) c->covered(s, j) = 0;
        c->ivar(s, j) = 0;
      }
  c->lastPatches = r.lastPatches;
  return c;
}

} // namespace spex
