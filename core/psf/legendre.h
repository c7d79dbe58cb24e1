// Legendre series, the parameterisation of every PSF quantity in DESI files
// (EXTRACTION.md §1): u = 2 (w - wmin) / (wmax - wmin) - 1, value = sum_k c_k P_k(u).
#pragma once

namespace spex {

// Maps w from [wmin, wmax] to u in [-1, 1].
inline double legendreU(double w, double wmin, double wmax) {
  return 2.0 * (w - wmin) / (wmax - wmin) - 1.0;
}

// sum_{k < n} c[k] P_k(u) by the three-term recurrence
// (k+1) P_{k+1} = (2k+1) u P_k - k P_{k-1}.
inline double legendreSum(const double* c, int n, double u) {
  if (n <= 0) return 0.0;
  double p0 = 1.0, p1 = u;
  double s = c[0];
  if (n > 1) s += c[1] * u;
  for (int k = 1; k + 1 < n; ++k) {
    const double p2 = ((2 * k + 1) * u * p1 - k * p0) / (k + 1);
    s += c[k + 1] * p2;
    p0 = p1;
    p1 = p2;
  }
  return s;
}

} // namespace spex
