// Agreement statistics between two extractions, in the style of gpu_specter's
// compare-frame: fractions of bins with |fa - fb| / sqrt(var_a + var_b) below
// 1e-5 .. 1, ivar and resolution agreement, maximum deviations.
#pragma once

#include "engine.h"

#include <array>
#include <memory>
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

// The rule compareFrames counts, for one bin (row s, bin j of two results of the same
// shape): the signed pull (fa - fb) / sqrt(1/ia + 1/ib) where both cover the bin and
// both ivar > 0; NaN where the bin is not compared; +Inf where it is compared but the
// pull is not finite (compareFrames counts that as a disagreement).
double binPull(const ExtractionResult& a, const ExtractionResult& b, int s, int j);

// binPull of every bin, [nfiber, nwave]. Same checks as
// compareFrames (throws InputError when the shapes or grids differ).
Array2D<double> pullMap(const ExtractionResult& a, const ExtractionResult& b);

// Where two results overlap: the spectrum indices both hold and the wavelength bins
// both grids share (same bin width, grids offset by a whole number of bins).
struct FrameOverlap {
  int fiberMin = 0, nfiber = 0; // spectrum indices fiberMin .. fiberMin + nfiber - 1
  int firstBinA = 0, firstBinB = 0, nwave = 0; // the shared bins in a's and in b's grid
  bool whole = true;            // a and b are exactly the overlap (nothing cropped)
  // Empty when whole; else one line saying what each side has and what is compared,
  // e.g. "compared on the overlap: spectra 0-24 (a has 0-49) x 6000.0-6299.2 A, 375
  // bins (b has 6000.0-6500.0 A, 626 bins)".
  std::string description;
};

// Throws InputError naming what differs when the two cannot be compared on any
// overlap: other bin widths, grids offset by a fraction of a bin, no common spectra
// or wavelengths, other FIBER numbers on the same spectrum (frames of other petals),
// other numbers of resolution diagonals.
FrameOverlap findOverlap(const ExtractionResult& a, const ExtractionResult& b);

// The part of `r` inside the overlap, as a result of its own (flux, ivar, mask,
// resolution, covered, FIBERs, grid); `sideA` says which of the overlap's first bins
// is r's. Diagnostics, model and profile are left out.
ExtractionResult cropToOverlap(const ExtractionResult& r, const FrameOverlap& o, bool sideA);

// A run's own numbers: the bins of `r` inside the kept regions of the plan's patches in
// r.lastPatches, cropped to their bounding box, with ivar (and covered) zeroed on the
// box's other bins (they belong to earlier runs merged into the same result). Null when
// r does not match the plan's shape or the run kept no bin. The workbench keeps one per
// run (ExtractionJob computes it on its worker, beside the engine: a whole frame's copy
// is ~150 MB).
std::shared_ptr<ExtractionResult> runOwnBins(const ExtractionResult& r, const PatchPlan& plan);

} // namespace spex
