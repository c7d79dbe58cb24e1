#include "truth_on_grid.h"

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
  // Truth density at bin j of the result's grid, j may lie beyond it (the truth often
  // extends further); NaN where the truth has no bin there.
  auto densityAt = [&](int j) {
    const double w = r.wave.at(j);
    const long t = std::lround((w - truth.wave[0]) / dwt);
    if (t < 0 || t >= long(truth.wave.size()) || t >= truth.phot.cols) return nan;
    if (std::abs(truth.wave[t] - w) > 1e-3 * std::abs(dwt)) return nan;
    return truth.phot(trow, int(t)) / dwt; // PHOT is photons per bin; the frame per Angstrom
  };
  const int nw = r.nwave;
  QVector<double> dens(nw, nan);
  bool any = false;
  for (int j = 0; j < nw; ++j) {
    dens[j] = densityAt(j);
    any = any || !std::isnan(dens[j]);
  }
  if (plain) *plain = dens;
  if (convolved) {
    convolved->fill(nan, nw);
    const int nd = r.ndiag;
    auto isCovered = [&](int j) { return j >= 0 && j < nw && (r.covered.empty() || r.covered(rrow, j)); };
    if (!r.resolution.empty() && r.resolution.n1 == 2 * nd + 1) {
      for (int i = 0; i < nw; ++i) {
        if (!isCovered(i)) continue;
        // Row i of R: R[i, j] = RESOLUTION[fiber, k, j] with j = i + nd - k (the
        // dia_matrix layout of EXTRACTION.md §4.6). At the edge of an extracted range
        // the columns j beyond it were never stored, yet the flux there is R f over
        // all of R's row (its rows sum to 1, §4.5): leaving them out made truth ⊗ R
        // dip at every range edge. R changes slowly along a diagonal, so a missing
        // R[i, j] is taken from the nearest stored column of the same diagonal, and
        // it multiplies the truth beyond the range. Where that truth does not exist
        // the bin is NaN (unknown), not a smaller number.
        double sum = 0;
        bool ok = true;
        for (int k = 0; k <= 2 * nd; ++k) {
          const int j = i + nd - k;
          int col = j;
          const int step = j < i ? 1 : -1;
          while (col != i && !isCovered(col)) col += step;
          const double rv = r.resolution(rrow, k, col);
          if (rv == 0) continue;
          const double d = j >= 0 && j < nw ? dens[j] : densityAt(j);
          if (std::isnan(d)) {
            ok = false;
            break;
          }
          sum += rv * d;
        }
        if (ok) (*convolved)[i] = sum;
      }
    }
  }
  return any;
}

} // namespace spex
