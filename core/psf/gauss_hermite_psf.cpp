#include "gauss_hermite_psf.h"

#include "../clones.h"
#include "../errors.h"
#include "legendre.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace spex {

double LegendreSet::eval(int fiber, double w) const {
  return legendreSum(coeff.row(fiber), coeff.cols, legendreU(w, wavemin, wavemax));
}

double GaussHermitePsf::waveMin() const {
  return std::max(xTrace.wavemin, std::max(yTrace.wavemin, ghSigX.wavemin));
}

double GaussHermitePsf::waveMax() const {
  return std::min(xTrace.wavemax, std::min(yTrace.wavemax, ghSigX.wavemax));
}

SPEX_CLONES void gaussHermiteBasis(int deg, int hsize, double d, double sigma, double* out) {
  // EXTRACTION.md §2: pixel edges c - 0.5, c + 0.5 for c = -hsize..hsize, normalised
  // t = (edge - d) / sigma. Degree 0 is the Gaussian integral over the pixel; degree
  // k >= 1 is the integral of He_k(t) g(t), i.e. He_{k-1}(t_lo) g(t_lo) - He_{k-1}(t_hi) g(t_hi).
  const int n = 2 * hsize + 1;
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  constexpr double kInvSqrt2Pi = 0.39894228040143267794;
  // Edge values shared by neighbouring pixels: n + 1 edges.
  double erfEdge[64], gEdge[64], heEdge[64][16];
  for (int e = 0; e <= n; ++e) {
    const double t = ((e - hsize) - 0.5 - d) / sigma;
    erfEdge[e] = std::erf(t * kInvSqrt2);
    gEdge[e] = std::exp(-0.5 * t * t) * kInvSqrt2Pi;
    // He_0 .. He_{deg-1}, probabilists' recurrence He_{k+1} = t He_k - k He_{k-1}.
    double hm1 = 0.0, h = 1.0;
    for (int k = 0; k < deg; ++k) {
      heEdge[e][k] = h;
      const double hn = t * h - k * hm1;
      hm1 = h;
      h = hn;
    }
  }
  for (int c = 0; c < n; ++c) out[c] = 0.5 * (erfEdge[c + 1] - erfEdge[c]);
  for (int k = 1; k <= deg; ++k)
    for (int c = 0; c < n; ++c)
      out[k * n + c] = heEdge[c][k - 1] * gEdge[c] - heEdge[c + 1][k - 1] * gEdge[c + 1];
}

namespace {
// floor(v) as an int, clamped: readPsf keeps traces within a few CCD sizes, but a PSF
// built in memory is not read, and a float-to-int conversion out of range is undefined.
int floorToInt(double v) {
  if (!(v > -1e9)) return -1000000000; // also NaN
  if (v > 1e9) return 1000000000;
  return int(std::floor(v));
}
} // namespace

void GaussHermitePsf::corner(int fiber, double w, int& xc, int& yc) const {
  const double xx = x(fiber, w), yy = y(fiber, w);
  xc = floorToInt(xx - hsizeX + 0.5);
  yc = floorToInt(yy - hsizeY + 0.5);
}

SPEX_CLONES void GaussHermitePsf::spotInto(int fiber, double w, Spot& out) const {
  const int nx = spotNx(), ny = spotNy();
  const double xx = x(fiber, w), yy = y(fiber, w);
  out.nx = nx;
  out.ny = ny;
  out.xc = floorToInt(xx - hsizeX + 0.5);
  out.yc = floorToInt(yy - hsizeY + 0.5);
  out.v.assign(std::size_t(nx) * ny, 0.0);

  // Sub-pixel offsets of the centre from the centre pixel, in [-0.5, 0.5).
  // ((x + 0.5) mod 1) - 0.5 with a floor-based modulo, right for negative x too.
  const double dx = (xx + 0.5) - std::floor(xx + 0.5) - 0.5;
  const double dy = (yy + 0.5) - std::floor(yy + 0.5) - 0.5;
  const double sx = ghSigX.eval(fiber, w), sy = ghSigY.eval(fiber, w);

  double bx[16 * 64], by[16 * 64];
  gaussHermiteBasis(ghdegX, hsizeX, dx, sx, bx);
  gaussHermiteBasis(ghdegY, hsizeY, dy, sy, by);

  // spot[iy, ix] = sum_j By_j[iy] * (sum_i GH_ij Bx_i[ix]).
  const double u = legendreU(w, ghSigX.wavemin, ghSigX.wavemax);
  double colSum[64];
  for (int j = 0; j <= ghdegY; ++j) {
    std::fill(colSum, colSum + nx, 0.0);
    for (int i = 0; i <= ghdegX; ++i) {
      const LegendreSet& c = ghCoeff(i, j);
      const double a = legendreSum(c.coeff.row(fiber), c.coeff.cols,
                                   c.wavemin == ghSigX.wavemin && c.wavemax == ghSigX.wavemax
                                       ? u
                                       : legendreU(w, c.wavemin, c.wavemax));
      if (a == 0.0) continue;
      const double* b = bx + i * nx;
      for (int ix = 0; ix < nx; ++ix) colSum[ix] += a * b[ix];
    }
    const double* b = by + j * ny;
    for (int iy = 0; iy < ny; ++iy) {
      double* row = out.v.data() + std::size_t(iy) * nx;
      const double f = b[iy];
      for (int ix = 0; ix < nx; ++ix) row[ix] += f * colSum[ix];
    }
  }
  // Clip negatives and normalise to unit sum (EXTRACTION.md §2).
  double sum = 0.0;
  for (double& v : out.v) {
    if (v < 0.0) v = 0.0;
    sum += v;
  }
  if (sum > 0.0)
    for (double& v : out.v) v /= sum;
}

Spot GaussHermitePsf::spot(int fiber, double w) const {
  Spot s;
  spotInto(fiber, w, s);
  return s;
}

double GaussHermitePsf::waveAtRow(int fiber, double row) const {
  if (fiber < 0 || fiber >= nfiber) return std::numeric_limits<double>::quiet_NaN();
  double lo = yTrace.wavemin, hi = yTrace.wavemax;
  double ylo = y(fiber, lo), yhi = y(fiber, hi);
  if (ylo > yhi) {
    std::swap(lo, hi);
    std::swap(ylo, yhi);
  }
  if (row < ylo || row > yhi) return std::numeric_limits<double>::quiet_NaN();
  // Bisection: y(w) is monotonic along a trace; 60 halvings reach double precision.
  for (int it = 0; it < 60; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (y(fiber, mid) < row)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

void GaussHermitePsf::validate() const {
  auto fail = [&](const std::string& what) {
    throw InputError("PSF" + (path.empty() ? std::string() : " '" + path + "'") + ": " + what);
  };
  if (nfiber <= 0) fail("no fibers");
  if (npixX <= 0 || npixY <= 0) fail("CCD size NPIX_X/NPIX_Y must be positive");
  if (hsizeX <= 0 || hsizeY <= 0 || hsizeX > 30 || hsizeY > 30)
    fail("HSIZEX/HSIZEY must be in 1..30, got " + std::to_string(hsizeX) + "/" +
         std::to_string(hsizeY));
  if (ghdegX < 0 || ghdegY < 0 || ghdegX > 14 || ghdegY > 14)
    fail("GHDEGX/GHDEGY must be in 0..14");
  auto checkSet = [&](const LegendreSet& s, const std::string& name) {
    if (s.coeff.rows != nfiber)
      fail(name + " has " + std::to_string(s.coeff.rows) + " fibers, expected " +
           std::to_string(nfiber));
    if (s.coeff.cols <= 0) fail(name + " has no coefficients");
    if (!(s.wavemin < s.wavemax)) fail(name + " WAVEMIN must be < WAVEMAX");
    for (double c : s.coeff.data)
      if (!std::isfinite(c)) fail(name + " has non-finite coefficients");
  };
  checkSet(xTrace, "XTRACE");
  checkSet(yTrace, "YTRACE");
  checkSet(ghSigX, "GHSIGX");
  checkSet(ghSigY, "GHSIGY");
  if (gh.size() != std::size_t(ghdegX + 1) * (ghdegY + 1))
    fail("expected " + std::to_string((ghdegX + 1) * (ghdegY + 1)) + " GH-i-j parameters, got " +
         std::to_string(gh.size()));
  for (int i = 0; i <= ghdegX; ++i)
    for (int j = 0; j <= ghdegY; ++j)
      checkSet(ghCoeff(i, j), "GH-" + std::to_string(i) + "-" + std::to_string(j));
  if (!(waveMin() < waveMax())) fail("trace and PSF wavelength domains do not overlap");
}

} // namespace spex
