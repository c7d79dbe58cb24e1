// The divide-and-conquer geometry (EXTRACTION.md §3): wavelength grid, bundles,
// sub-bundles, patches with their padding and CCD pixel boxes. Both engines and the
// views use this one plan; nothing else computes patch geometry.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

namespace spex {

struct GaussHermitePsf;

// w_i = wmin + i dw for i = 0 .. n-1, n = len(arange(wmin, wmax + dw/2, dw)).
struct WaveGrid {
  double wmin = 0;
  double wmax = 0;
  double dw = 0.8;
  int n = 0;

  static WaveGrid fromRange(double wmin, double wmax, double dw); // throws InputError
  int size() const { return n; }
  double at(int i) const { return wmin + i * dw; }
  double last() const { return at(n - 1); }
};

enum class Decorrelation {
  Signal, // per-fiber blocks of C^-1/2 (B&S eqs 17-19), the default
  Noise   // Q = (C^-1)^1/2 over the whole patch (--decorrelate-fibers)
};

struct PatchParams {
  int bundlesize = 25;
  int nsubbundles = 5;
  int nwavestep = 50;
  double wavepadFrac = 0.2;  // wavepad = 10 + int(10 * wavepadFrac)
  double pixpadFrac = 0.8;
  double regularize = 0.0;
  double psferr = std::numeric_limits<double>::quiet_NaN(); // NaN: the PSF's PSFERR
  Decorrelation mode = Decorrelation::Signal;

  int wavepad() const { return 10 + int(10 * wavepadFrac); }
  void validate() const; // throws InputError
};

// Half-open CCD pixel box [x0, x1) x [y0, y1).
struct PixelBox {
  int x0 = 0, x1 = 0, y0 = 0, y1 = 0;
  int width() const { return x1 - x0; }
  int height() const { return y1 - y0; }
  bool empty() const { return x1 <= x0 || y1 <= y0; }
  bool contains(int x, int y) const { return x >= x0 && x < x1 && y >= y0 && y < y1; }
};

struct Patch {
  int index = 0;      // position in PatchPlan::patches
  int bundle = 0;     // absolute bundle number (fiber / bundlesize)
  int subbundle = 0;  // within the bundle
  int fiber0 = 0;     // first kept fiber (PSF fiber index)
  int nfiber = 0;     // kept fibers
  int fiberPad0 = 0;  // first solved fiber (one neighbour inside the bundle, if any)
  int nfiberPad = 0;  // solved fibers
  int wave0 = 0;      // first kept bin (index into the request's WaveGrid)
  int nwave = 0;      // kept bins (< nwavestep for the last patch)
  int wavePad0 = 0;   // first solved bin (grid index; may be negative or beyond n)
  int nwavePad = 0;   // solved bins: nwavestep + 2 wavepad for every patch
  PixelBox box;       // pixels used, clipped to the CCD
  bool clipped = false; // the unclipped box reached beyond the CCD

  int nunknown() const { return nfiberPad * nwavePad; }
  int keptFiberOffset() const { return fiber0 - fiberPad0; }
  int keptWaveOffset() const { return wave0 - wavePad0; }
};

struct PatchPlan {
  WaveGrid wave;
  int fiberMin = 0;   // first extracted fiber
  int nFiber = 0;     // extracted fibers
  PatchParams params;
  int wavepad = 0;
  int npixX = 0, npixY = 0;
  std::vector<Patch> patches;

  // Patch indices whose kept region intersects fibers [f0, f1) x bins [w0, w1).
  std::vector<int> patchesInRegion(int f0, int f1, int w0, int w1) const;
  // Patch whose kept region holds (fiber, bin), or -1.
  int patchAt(int fiber, int bin) const;
  // Wavelength of a solved bin (grid index k, may lie outside [0, n)).
  double waveAt(int k) const { return wave.at(k); }
  // The one selection rule of the workbench: the selected patches that exist in this
  // plan, else every patch holding a selected fiber; sorted, no repeats (empty: none).
  std::vector<int> patchesForSelection(const std::vector<int>& patches, const std::vector<int>& fibers) const;
};

// The grid desi_extract_spectra uses without -w: the PSF HDU's WAVEMIN..WAVEMAX
// (not the traces' domain) in steps of 0.8 A, both ends included
// (arange(WAVEMIN, WAVEMAX + dw/2, dw)); r0 of 20201214: 5543..7827, 2856 bins.
WaveGrid defaultFrameGrid(const GaussHermitePsf& psf);

// Builds the plan for fibers [fiberMin, fiberMin + nFiber) of the PSF on grid wave.
// Bundles are aligned to the PSF's fibers (bundle b = fibers b*bundlesize ...); the
// padding fiber on each side must lie in the same bundle and in the PSF.
// Throws InputError for fibers outside the PSF, wavelengths outside its domain, or
// bad parameters.
PatchPlan makePatchPlan(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin, int nFiber,
                        const PatchParams& params);

// The stamp corners a plan is made from: (xc, yc) of every (fiber, grid bin) in
// fibers [f0, f1) x bins [k0, k1) (bins may run past the grid: the padding), at
// [(f - f0) * (k1 - k0) + (k - k0)], as GaussHermitePsf::corner gives them at
// wave.at(k). Evaluating them is ~90 % of makePatchPlan; the CUDA engine has the
// device evaluate them (the same Legendre recurrences) while it uploads the image.
struct PlanCorners {
  int f0 = 0, f1 = 0, k0 = 0, k1 = 0;
  std::vector<int> x, y;
};
// The range makePatchPlan evaluates (x and y left empty); f1 <= f0 when the fibers
// are not a valid range of the PSF (makePatchPlan then says what is wrong).
PlanCorners planCornerRange(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin, int nFiber,
                            const PatchParams& params);
// The same plan from corners evaluated elsewhere; they must cover
// planCornerRange(...) exactly (InputError otherwise).
PatchPlan makePatchPlan(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin, int nFiber,
                        const PatchParams& params, const PlanCorners& corners);

// The plan in two steps (the CUDA engine's plan ahead: the device takes the corners'
// extents, so only ~8 ints a patch come back instead of the whole corner table).
// A patch's extents: the min and max of the stamp corners (xc, yc) of its padded
// fibers at its padded bins (pad) and at its core window, bins wave0 .. wave0 +
// nwavestep (core, also for the last, shorter patch); {xmin, xmax, ymin, ymax} each,
// the spot size not added.
struct PatchExtents {
  int pad[4];
  int core[4];
};
// The plan without its boxes: every patch's fibers and bins (box empty, clipped
// false), checked as makePatchPlan checks them (InputError).
PatchPlan makePatchSkeleton(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin, int nFiber,
                            const PatchParams& params);
// The extents of every patch of a skeleton (plan order) from corners covering
// planCornerRange (InputError otherwise): what the device's extents kernel computes.
std::vector<PatchExtents> patchExtents(const PatchPlan& skeleton, const GaussHermitePsf& psf,
                                       const PlanCorners& corners);
// Sets the skeleton's boxes (and clipped) from one PatchExtents per patch: the plan
// makePatchPlan makes, patch for patch (InputError when the counts differ).
void setPatchBoxes(PatchPlan& skeleton, const GaussHermitePsf& psf, const std::vector<PatchExtents>& extents);

} // namespace spex
