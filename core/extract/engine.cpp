#include "engine.h"

#include "../parallel.h"

#include <algorithm>
#include <atomic>
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

void finalizeFrame(ExtractionResult& r, FrameRegion g) {
  if (g.f1 < 0 || g.w1 < 0 || g.f1 <= g.f0 || g.w1 <= g.w0) g = FrameRegion{0, r.nfiber, 0, r.nwave};
  const int F0 = std::max(0, g.f0), F1 = std::min(r.nfiber, g.f1);
  const int W0 = std::max(0, g.w0), W1 = std::min(r.nwave, g.w1);
  const double dw = r.wave.dw;
  // A few patches' worth of bins is done in microseconds on the calling thread;
  // starting threads for it would cost more (and, on a loaded machine, milliseconds).
  const int threads = double(F1 - F0) * (W1 - W0) >= 65536 ? 0 : 1;
  // Per Angstrom (EXTRACTION.md §5): flux /= dw, ivar *= dw^2. Anything non-finite
  // (a failed patch) becomes flux 0, ivar 0 so no NaN reaches a frame.
  // A frame stores float32: anything beyond its range would become Inf on disk.
  constexpr double kFloatMax = double(std::numeric_limits<float>::max());
  std::atomic<long> noData{0}, nonFinite{0};
  parallelFor(F1 - F0, [&](int a0, int a1) {
    long nd = 0, nf = 0;
    for (int f = F0 + a0; f < F0 + a1; ++f)
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
          ++nf;
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
          ++nd;
          for (int d = 0; d < r.resolution.n1; ++d)
            if (!std::isfinite(r.resolution(f, d, w))) r.resolution(f, d, w) = 0;
        }
        r.mask(f, w) = m;
      }
    noData += nd;
    nonFinite += nf;
  }, threads);
  r.noDataBins = noData.load();
  r.nonFiniteBins = nonFinite.load();
  // BAD2DFIT as desi_extract_spectra sets it (desispec.scripts.extract, every path):
  // chi2pix > 100. (SpexLab's earlier rule, 5x the medians over fibers and over
  // wavelengths, flagged bins desispec does not; docs/desi.md "Masks".)
  for (int f = F0; f < F1; ++f)
    for (int w = W0; w < W1; ++w)
      if (r.covered(f, w) && r.chi2pix(f, w) > kBad2DFitChi2) r.mask(f, w) |= kBad2DFit;
}

} // namespace spex
