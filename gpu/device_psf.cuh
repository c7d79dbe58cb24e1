// Device-side PSF evaluation: Legendre series and the pixel-integrated Gauss-Hermite
// basis (EXTRACTION.md §1-§2). The CUDA twins of core/psf/legendre.h and
// gaussHermiteBasis in core/psf/gauss_hermite_psf.cpp, with the same recurrences in
// the same order; tests/gpu/test_device_psf.cpp compares them value by value.
#pragma once

#include "kernels.h"

namespace spex::gpu {

__device__ __forceinline__ double legendreUDev(double w, double wmin, double wmax) {
  return 2.0 * (w - wmin) / (wmax - wmin) - 1.0;
}

// sum_{k < n} c[k] P_k(u), (k+1) P_{k+1} = (2k+1) u P_k - k P_{k-1}.
__device__ __forceinline__ double legendreSumDev(const double* c, int n, double u) {
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

__device__ __forceinline__ double evalSet(const DevPsf& psf, int set, int fiber, double w) {
  const DevLegendre d = psf.sets[set];
  return legendreSumDev(psf.pool + d.offset + (long long)fiber * d.ncoeff, d.ncoeff,
                        legendreUDev(w, d.wmin, d.wmax));
}

// Edge quantities of the basis for edge e (0..n): erf(t/sqrt2), g(t) and
// He_0..He_{deg-1}(t) with t = ((e - hsize) - 0.5 - d) / sigma.
__device__ __forceinline__ void basisEdge(int e, int deg, int hsize, double d, double sigma,
                                          double* erfOut, double* gOut, double* he) {
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  constexpr double kInvSqrt2Pi = 0.39894228040143267794;
  const double t = ((e - hsize) - 0.5 - d) / sigma;
  *erfOut = erf(t * kInvSqrt2);
  *gOut = exp(-0.5 * t * t) * kInvSqrt2Pi;
  double hm1 = 0.0, h = 1.0;
  for (int k = 0; k < deg; ++k) {
    he[k] = h;
    const double hn = t * h - k * hm1;
    hm1 = h;
    h = hn;
  }
}

} // namespace spex::gpu
