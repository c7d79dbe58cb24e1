#include "engine.h"

#include "../parallel.h"

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

void finalizeFrame(ExtractionResult& r) {
  const double dw = r.wave.dw;
  // Per Angstrom (EXTRACTION.md §5): flux /= dw, ivar *= dw^2. Anything non-finite
  // (a failed patch) becomes flux 0, ivar 0 so no NaN reaches a frame.
  parallelFor(r.nfiber, [&](int f0, int f1) {
    for (int f = f0; f < f1; ++f)
      for (int w = 0; w < r.nwave; ++w) {
        if (!r.covered(f, w)) continue;
        double& fl = r.flux(f, w);
        double& iv = r.ivar(f, w);
        fl /= dw;
        iv *= dw * dw;
        if (!std::isfinite(fl) || !std::isfinite(iv) || iv < 0) {
          fl = 0;
          iv = 0;
        }
        if (!std::isfinite(r.chi2pix(f, w))) r.chi2pix(f, w) = 0;
        const double pm = r.pixmaskFraction(f, w);
        uint32_t m = 0;
        if (pm > 0.5) m |= kSomeBadPix;
        if (pm >= 1.0 - 1e-9) m |= kAllBadPix; // spot sums carry rounding of ~1e-15
        r.mask(f, w) = m;
      }
  });
  // BAD2DFIT as desi_extract_spectra sets it (desispec.scripts.extract, every path):
  // chi2pix > 100. (SpexLab's earlier rule, 5x the medians over fibers and over
  // wavelengths, flagged bins desispec does not; docs/desi.md "Masks".)
  for (std::size_t i = 0; i < r.mask.size(); ++i)
    if (r.covered.data[i] && r.chi2pix.data[i] > kBad2DFitChi2) r.mask.data[i] |= kBad2DFit;
}

} // namespace spex
