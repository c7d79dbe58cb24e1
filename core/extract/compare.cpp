// Agreement statistics between two extractions (EXTRACTION.md §7, last item), in the
// style of gpu_specter's compare-frame.
#include "compare.h"

#include "../errors.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

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

FrameComparison compareFrames(const ExtractionResult& a, const ExtractionResult& b) {
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
  const bool haveRes = !a.resolution.empty() && !b.resolution.empty();
  if (haveRes) {
    requireSame("number of resolution diagonals", a.ndiag, b.ndiag);
    for (const ExtractionResult* r : {&a, &b})
      if (r->resolution.n0 != nf || r->resolution.n1 != 2 * r->ndiag + 1 || r->resolution.n2 != nw)
        throw InputError("cannot compare frames: RESOLUTION shape does not match the frame");
  }
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
      if (!(ia > 0 && ib > 0)) continue;
      ++c.nbins;
      // |fa - fb| / sqrt(var_a + var_b); a NaN pull counts as a disagreement.
      double pull = std::abs(a.flux(s, j) - b.flux(s, j)) / std::sqrt(1.0 / ia + 1.0 / ib);
      if (!std::isfinite(pull)) pull = INFINITY;
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

} // namespace spex
