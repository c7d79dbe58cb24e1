// Patch-size sweep (issue #5): extract one region of a frame once per patch setting
// (nwavestep x nsubbundles x wavepadFrac) and per engine, and record how fast and how
// accurate each setting is, so the best patch size for a machine can be chosen from
// numbers instead of folklore. Accuracy is measured against the simulation's truth
// (pulls, EXTRACTION.md §7) or, for real data, against a reference extraction
// (compareFrames). Qt-free; the workbench's SweepView draws a SweepResult.
#pragma once

#include "../extract/engine.h"
#include "../io/frame_io.h"

#include <functional>
#include <string>
#include <vector>

namespace spex {

struct Image;
struct GaussHermitePsf;

// The part of the frame every setting extracts: PSF fibers [fiber0, fiber1) and
// wavelengths [waveMin, waveMax] (Angstrom, inclusive, snapped to grid bins). Each
// setting extracts the patches of its own plan that touch the region
// (PatchPlan::patchesInRegion); accuracy is measured over the region's bins only, so
// settings whose patches spill further are compared on the same bins.
struct SweepRegion {
  int fiber0 = 0, fiber1 = 0;
  double waveMin = 0, waveMax = 0;
};

struct SweepSpec {
  WaveGrid wave;          // the frame's grid (the plan of every setting is built on it)
  int fiberMin = 0;       // the frame's fibers (as ExtractionRequest)
  int nFiber = 0;
  PatchParams base;       // everything the sweep does not vary
  SweepRegion region;
  std::vector<int> nwavestep{50};
  std::vector<int> nsubbundles{5};
  std::vector<double> wavepadFrac{0.2};
  int threads = 0;        // CPU threads; 0: all cores
  int repeat = 1;         // extractions per setting; the wall is their median
  int edgeBins = -1;      // truth pulls skip this many bins at each grid end; -1: ndiag
};

// What a sweep measures accuracy against (at most one of the two; neither gives
// timing only).
struct SweepInputs {
  const Image* image = nullptr;
  const GaussHermitePsf* psf = nullptr;
  const Truth* truth = nullptr;                 // photons per bin on the same grid
  const ExtractionResult* reference = nullptr;  // e.g. the default setting on the CPU
};

enum class SweepMode { TimingOnly, Truth, Reference };
const char* sweepModeName(SweepMode m); // "timing", "truth", "reference"

struct SweepRow {
  // Setting
  std::string engine;
  int nwavestep = 0;
  int nsubbundles = 0;
  double wavepadFrac = 0;
  int wavepad = 0;
  // Cost
  int patches = 0;
  long bins = 0;            // covered bins, i.e. the work done (whole patches)
  double wallS = 0;         // median wall time of the extraction
  double throughput = 0;    // bins / wallS
  // Accuracy over the region's covered, unmasked bins
  long pullN = 0;           // truth: bins in the pull statistics
  double pullMean = 0;      // truth: mean of (flux - R truth/dw) sqrt(ivar)
  double pullStd = 0;       // truth: its standard deviation (1 when right)
  long refN = 0;            // reference: bins compared (compareFrames nbins)
  double refMaxPull = 0;    // reference: max |fa - fb| / sqrt(va + vb)
  double refFracBelow = 0;  // reference: fraction of bins below 0.01 sigma
  std::string error;        // non-empty: this setting failed (e.g. invalid parameters)
  // Per-patch diagnostics of the (last) extraction, plan indices of this setting; for
  // the workbench's CCD heatmap. Not written to CSV/JSON.
  std::vector<PatchDiagnostics> patchDiagnostics;
  // Profile of the (last) extraction, so a sweep's runs can be read on the workbench's
  // timeline like any other run. Not written to CSV/JSON.
  Profile profile;

  bool ok() const { return error.empty(); }
  // Lower is better: |mean| + |std - 1| of the truth pulls, the max pull against the
  // reference, 0 for timing-only sweeps.
  double score(SweepMode mode) const;
};

struct SweepResult {
  SweepMode mode = SweepMode::TimingOnly;
  SweepRegion region;
  int regionBins = 0;       // fibers x bins of the region
  bool cancelled = false;   // stopped early: rows holds the settings that finished
  std::vector<SweepRow> rows;

  // Highest-throughput row of each engine among its rows whose score is within
  // `tolerance` of that engine's best score (score units: pull mean/std deviation
  // for truth sweeps, sigma for reference sweeps). Failed rows never win. One row
  // per engine, in order of first appearance.
  std::vector<SweepRow> bestSettings(double tolerance = 0.02) const;

  std::string toCsv() const;   // header line + one line per row; numbers exact
  std::string toJson() const;  // {"mode":..,"region":{..},"rows":[{..}]}
  // Inverses of the writers (throw SpexError on malformed input).
  static SweepResult fromCsv(const std::string& text);
  static SweepResult fromJson(const std::string& text);
};

// Progress of a sweep. rowDone is set when a setting has finished (then patchesDone
// == patchesTotal); otherwise the call reports patches of the current setting.
// Called from engine worker threads: be quick and thread-safe.
struct SweepProgress {
  int row = 0;          // index of the current setting, 0-based
  int rows = 0;         // settings in the sweep (engines x values)
  int patchesDone = 0;
  int patchesTotal = 0;
  const SweepRow* rowDone = nullptr;
};
using SweepProgressFn = std::function<void(const SweepProgress&)>;

// Region bins [w0, w1) of a grid for wavelengths [waveMin, waveMax]; empty if none.
void regionBins(const WaveGrid& g, double waveMin, double waveMax, int& w0, int& w1);

// Pull statistics of a result against truth over bins that are covered, unmasked,
// with ivar > 0, inside [f0, f1) x [w0, w1), at least `edge` bins from the grid ends,
// and whose whole resolution window is covered (R t needs R's neighbouring columns).
struct PullStats {
  long n = 0;
  double mean = 0, std = 0;
};
PullStats truthPulls(const ExtractionResult& r, const Truth& truth, int f0, int f1, int w0, int w1,
                     int edge);

// Runs every setting on every engine (settings outer, engines inner, so a cancelled
// sweep has compared engines on the same settings). Throws InputError when the
// inputs or the region are unusable (nothing extracted); a setting that fails on
// its own is recorded with `error` and the sweep goes on.
SweepResult runSweep(const std::vector<Engine*>& engines, const SweepInputs& inputs,
                     const SweepSpec& spec, const SweepProgressFn& progress,
                     const CancelToken& cancel);

} // namespace spex
