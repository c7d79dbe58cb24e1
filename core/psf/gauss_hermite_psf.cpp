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

namespace {
// 4 doubles as one value (two SSE2 or one AVX2 register), loaded from any address.
typedef double Lanes4 __attribute__((vector_size(32), aligned(8), may_alias));
} // namespace

SPEX_CLONES void GaussHermitePsf::spotValues(int fiber, double w, int& xcOut, int& ycOut, double* v) const {
  const int nx = spotNx(), ny = spotNy();
  const double xx = x(fiber, w), yy = y(fiber, w);
  xcOut = floorToInt(xx - hsizeX + 0.5);
  ycOut = floorToInt(yy - hsizeY + 0.5);

  // Sub-pixel offsets of the centre from the centre pixel, in [-0.5, 0.5).
  // ((x + 0.5) mod 1) - 0.5 with a floor-based modulo, right for negative x too.
  const double dx = (xx + 0.5) - std::floor(xx + 0.5) - 0.5;
  const double dy = (yy + 0.5) - std::floor(yy + 0.5) - 0.5;
  const double sx = ghSigX.eval(fiber, w), sy = ghSigY.eval(fiber, w);

  double bx[16 * 64], by[16 * 64];
  gaussHermiteBasis(ghdegX, hsizeX, dx, sx, bx);
  gaussHermiteBasis(ghdegY, hsizeY, dy, sy, by);

  // spot[iy, ix] = sum_j By_j[iy] * (sum_i GH_ij Bx_i[ix]): the column sums of every j
  // first (zero-padded to a multiple of four columns), then each row once, its j terms
  // added in registers in the order j = 0, 1, ... (as the pass-per-j form did), clipped
  // and summed in four lanes on the way (docs/benchmarks.md, "CPU engine, ninth pass").
  const int nx4 = (nx + 3) & ~3;
  const double u = legendreU(w, ghSigX.wavemin, ghSigX.wavemax);
  alignas(32) double colSum[16 * 64];
  for (int j = 0; j <= ghdegY; ++j) {
    double* cs = colSum + j * nx4;
    std::fill(cs, cs + nx4, 0.0);
    for (int i = 0; i <= ghdegX; ++i) {
      const LegendreSet& c = ghCoeff(i, j);
      const double a = legendreSum(c.coeff.row(fiber), c.coeff.cols,
                                   c.wavemin == ghSigX.wavemin && c.wavemax == ghSigX.wavemax
                                       ? u
                                       : legendreU(w, c.wavemin, c.wavemax));
      if (a == 0.0) continue;
      const double* b = bx + i * nx;
      for (int ix = 0; ix < nx; ++ix) cs[ix] += a * b[ix];
    }
  }
  // Clip negatives and normalise to unit sum (EXTRACTION.md §2). The sum runs in four
  // lanes (lane = column mod 4; columns past nx are zero) and the lanes are added at the
  // end, instead of one serial chain of nx ny additions (latency-bound); the last bits of
  // the sum, hence of every value, differ from the serial order's (a relative 1e-16 scale
  // of the whole spot, far inside the normalisation's own n eps).
  const Lanes4 zero4 = {0, 0, 0, 0};
  Lanes4 sum4 = zero4;
  double sumTail = 0.0;
  const int nxv = nx & ~3;
  for (int iy = 0; iy < ny; ++iy) {
    double* row = v + std::size_t(iy) * nx;
    int ix = 0;
    for (; ix < nxv; ix += 4) {
      Lanes4 acc = zero4;
      for (int j = 0; j <= ghdegY; ++j) {
        const double f = by[j * ny + iy];
        acc += f * *reinterpret_cast<const Lanes4*>(colSum + j * nx4 + ix);
      }
      acc = acc < zero4 ? zero4 : acc;
      sum4 += acc;
      *reinterpret_cast<Lanes4*>(row + ix) = acc;
    }
    for (; ix < nx; ++ix) {
      double acc = 0.0;
      for (int j = 0; j <= ghdegY; ++j) acc += by[j * ny + iy] * colSum[j * nx4 + ix];
      if (acc < 0.0) acc = 0.0;
      sumTail += acc;
      row[ix] = acc;
    }
  }
  const double sum = ((sum4[0] + sum4[1]) + (sum4[2] + sum4[3])) + sumTail;
  if (sum > 0.0) {
    const double inv = 1.0 / sum;
    const std::size_t ns = std::size_t(nx) * ny;
    for (std::size_t i = 0; i < ns; ++i) v[i] *= inv;
  }
}

// After spotValues: clang refuses a target_clones function used before its definition.
void GaussHermitePsf::spotInto(int fiber, double w, Spot& out) const {
  const std::size_t ns = std::size_t(spotNx()) * spotNy();
  out.nx = spotNx();
  out.ny = spotNy();
  if (out.v.size() != ns) out.v.resize(ns); // every value is written by spotValues
  spotValues(fiber, w, out.xc, out.yc, out.v.data());
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
