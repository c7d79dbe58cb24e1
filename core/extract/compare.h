// Agreement statistics between two extractions, in the style of gpu_specter's
// compare-frame: fractions of bins with |fa - fb| / sqrt(var_a + var_b) below
// 1e-5 .. 1, ivar and resolution agreement, maximum deviations.
#pragma once

#include "engine.h"

#include <array>
#include <string>

namespace spex {

struct FrameComparison {
  static constexpr std::array<double, 6> kThresholds{1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
  long nbins = 0;                      // bins compared (both have ivar > 0)
  std::array<double, 6> fractionBelow{}; // per threshold
  double maxPull = 0;                  // max |fa - fb| / sqrt(va + vb)
  int maxPullFiber = -1, maxPullBin = -1; // FIBER number (ExtractionResult::fiberNumber), bin
  double maxRelIvar = 0;               // max |ia - ib| / max(ia, ib)
  double maxResolution = 0;            // max |Ra - Rb|
  long maskDifferences = 0;            // bins whose MASK differs
  std::string toText() const;          // the table printed by `spexlab-cli compare`
  std::string toJson() const;
};

// Throws InputError when shapes, wavelength grids, first spectra or (when both know
// them) FIBER numbers differ. Only bins covered by
// both results are compared (covered arrays empty means all).
FrameComparison compareFrames(const ExtractionResult& a, const ExtractionResult& b);

} // namespace spex
