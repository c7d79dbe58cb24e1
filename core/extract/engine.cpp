#include "engine.h"

#include "../parallel.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <cmath>
#include <vector>

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
double median(std::vector<double>& v) {
  if (v.empty()) return 0.0;
  const std::size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + m, v.end());
  if (v.size() % 2) return v[m];
  const double hi = v[m];
  const double lo = *std::max_element(v.begin(), v.begin() + m);
  return 0.5 * (lo + hi);
}
} // namespace

void finalizeFrame(ExtractionResult& r) {
  const double dw = r.wave.dw;
  // Per Angstrom (EXTRACTION.md §5): flux /= dw, ivar *= dw^2. Anything non-finite
  // (a failed patch) becomes flux 0, ivar 0 so no NaN reaches a frame.
  // A frame stores float32: anything beyond its range would become Inf on disk.
  constexpr double kFloatMax = double(std::numeric_limits<float>::max());
  std::atomic<long> noData{0}, nonFinite{0};
  parallelFor(r.nfiber, [&](int f0, int f1) {
    long nd = 0, nf = 0;
    for (int f = f0; f < f1; ++f)
      for (int w = 0; w < r.nwave; ++w) {
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
  });
  r.noDataBins = noData.load();
  r.nonFiniteBins = nonFinite.load();
  // BAD2DFIT: chi2pix above 5x the median over fibers at that wavelength and above 5x
  // the median over wavelengths of that fiber (medians over covered bins). The
  // per-wavelength medians read a transposed copy, so every median reads contiguously.
  const int nf = r.nfiber, nw = r.nwave;
  std::vector<double> chiT(std::size_t(nf) * nw);
  std::vector<char> covT(chiT.size());
  parallelFor(nw, [&](int w0, int w1) {
    for (int f = 0; f < nf; ++f)
      for (int w = w0; w < w1; ++w) {
        chiT[std::size_t(w) * nf + f] = r.chi2pix(f, w);
        covT[std::size_t(w) * nf + f] = r.covered(f, w) ? 1 : 0;
      }
  });
  std::vector<double> medW(nw, 0.0), medF(nf, 0.0);
  parallelFor(nw, [&](int w0, int w1) {
    std::vector<double> tmp;
    for (int w = w0; w < w1; ++w) {
      tmp.clear();
      for (int f = 0; f < nf; ++f)
        if (covT[std::size_t(w) * nf + f]) tmp.push_back(chiT[std::size_t(w) * nf + f]);
      medW[w] = median(tmp);
    }
  });
  parallelFor(nf, [&](int f0, int f1) {
    std::vector<double> tmp;
    for (int f = f0; f < f1; ++f) {
      tmp.clear();
      for (int w = 0; w < nw; ++w)
        if (r.covered(f, w)) tmp.push_back(r.chi2pix(f, w));
      medF[f] = median(tmp);
      for (int w = 0; w < nw; ++w)
        if (r.covered(f, w) && r.chi2pix(f, w) > 5 * medW[w] && r.chi2pix(f, w) > 5 * medF[f])
          r.mask(f, w) |= kBad2DFit;
    }
  }, 0, 4);
}

} // namespace spex
