#include "spectrum_source.h"

#include <cmath>
#include <limits>

namespace spex {

bool truthOnGrid(const Truth& truth, const ExtractionResult& r, int fiber, QVector<double>* convolved,
                 QVector<double>* plain) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const int trow = fiber - truth.fiberMin;
  const int rrow = fiber - r.fiberMin;
  if (trow < 0 || trow >= truth.phot.rows || rrow < 0 || rrow >= r.nfiber || truth.wave.size() < 2)
    return false;
  const double dwt = truth.wave[1] - truth.wave[0];
  const int nw = r.nwave;
  QVector<double> dens(nw, nan);
  bool any = false;
  for (int j = 0; j < nw; ++j) {
    const double w = r.wave.at(j);
    const long t = std::lround((w - truth.wave[0]) / dwt);
    if (t < 0 || t >= long(truth.wave.size()) || t >= truth.phot.cols) continue;
    if (std::abs(truth.wave[t] - w) > 1e-3 * std::abs(dwt)) continue;
    // PHOT is photons per bin; the frame is per Angstrom.
    dens[j] = truth.phot(trow, int(t)) / dwt;
    any = true;
  }
  if (plain) *plain = dens;
  if (convolved) {
    convolved->fill(nan, nw);
    const int nd = r.ndiag;
    if (!r.resolution.empty() && r.resolution.n1 == 2 * nd + 1) {
      for (int i = 0; i < nw; ++i) {
        if (!r.covered.empty() && !r.covered(rrow, i)) continue;
        // Row i of R: R[i, j] = RESOLUTION[fiber, k, j] with j = i + nd - k (the
        // dia_matrix layout of EXTRACTION.md §4.6).
        double sum = 0;
        bool ok = true;
        for (int k = 0; k <= 2 * nd; ++k) {
          const int j = i + nd - k;
          if (j < 0 || j >= nw) continue;
          const double rv = r.resolution(rrow, k, j);
          if (rv == 0) continue;
          if (std::isnan(dens[j])) {
            ok = false;
            break;
          }
          sum += rv * dens[j];
        }
        if (ok) (*convolved)[i] = sum;
      }
    }
  }
  return any;
}

} // namespace spex
