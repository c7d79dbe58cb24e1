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

namespace {

// 4 doubles as one value (two SSE2 or one AVX2 register), loaded from any address.
typedef double Lanes4 __attribute__((vector_size(32), aligned(8), may_alias));
typedef long long LanesI4 __attribute__((vector_size(32), aligned(8), may_alias));

// erf and the Gaussian in four lanes for gaussHermiteBasis (docs/benchmarks.md, "CPU
// engine, ninth pass"): glibc's erf and exp, one edge at a time, were half of a spot's
// cost. Coefficients from scripts/erf-coefficients.py (mpmath, 40 digits):
// erfc(a) exp(a^2) on [0, 6]: its Chebyshev interpolant of degree 36 as monomials in
// s = (a - 3) / 3 (relative error 5.9e-16 at 3001 points).
constexpr double kErfcP[37] = {
    0.17900115118138996, -0.16311678002151858, 0.142959340438842,
    -0.12094463749606493, 0.09906616324252379, -0.07876250731237058,
    0.06091096778917804, -0.04590395878613259, 0.03376577028907917,
    -0.024276376768126898, 0.017080907843158553, -0.011774406364613469,
    0.007959757260148748, -0.005281800311798947, 0.0034430514248856795,
    -0.002206622573382757, 0.001391170461384414, -0.0008628951857883638,
    0.0005275437155441694, -0.0003193687802325848, 0.00018951887293468283,
    -0.00010727476911184216, 6.239392903502488e-05, -4.254644433369358e-05,
    2.3423877821408776e-05, -3.3242023255238985e-06, 2.4830353515266154e-06,
    -1.168229307674573e-05, 5.730786484146185e-06, 5.110737140544727e-06,
    -2.3524847691420445e-06, -3.4181880911001145e-06, 1.624160024546943e-06,
    9.685244672507572e-07, -4.552429101242442e-07, -1.9586436999021826e-07,
    9.332016256988621e-08};
// ln 2 as a head with its low 20 bits zero (k ln2Hi exact for |k| < 2^20) and a tail.
constexpr double kLn2Hi = 0.6931471804855391, kLn2Lo = 7.440617110012397e-11;
constexpr double kLog2e = 1.4426950408889634;
// 1 / k!, k = 0..13.
constexpr double kExpTaylor[14] = {
    1.0, 1.0, 0.5,
    0.16666666666666666, 0.041666666666666664, 0.008333333333333333,
    0.001388888888888889, 0.0001984126984126984, 2.48015873015873e-05,
    2.7557319223985893e-06, 2.755731922398589e-07, 2.505210838544172e-08,
    2.08767569878681e-09, 1.6059043836821613e-10};

// Both below work on G groups of four lanes at once (G a constant, so the groups stay in
// registers), each step of a polynomial applied to every group before the next step: the
// groups' chains of multiply-adds are independent and overlap instead of each waiting out
// its own 14 or 37 dependent steps. (Arrays, not vectors by value: clang 14 rejects
// 32-byte vectors passed or returned by value in plain x86-64 code.)
constexpr int kMaxGroups = 16;

// exp(y) for y <= 0: y = k ln2 + r, |r| <= ln2 / 2, e^r by its Taylor polynomial of degree
// 13 (truncation < 5e-18), times 2^k from the exponent bits; 0 below -700 (glibc's
// subnormals there are < 1e-304). Within ~2 ulp of exp.
template <int ng>
inline __attribute__((always_inline)) void expNegN(const Lanes4* y, Lanes4* out) {
  const Lanes4 lim = {-700.0, -700.0, -700.0, -700.0};
  const double magic = 6755399441055744.0; // 1.5 * 2^52: adding it rounds to an integer
  const Lanes4 m4 = {magic, magic, magic, magic};
  Lanes4 kb[ng], r[ng], p[ng];
#pragma GCC unroll 4
  for (int g = 0; g < ng; ++g) {
    const Lanes4 yc = y[g] < lim ? lim : y[g];
    kb[g] = yc * kLog2e + m4;
    const Lanes4 k = kb[g] - m4;
    r[g] = (yc - k * kLn2Hi) - k * kLn2Lo;
    p[g] = r[g] * kExpTaylor[13] + kExpTaylor[12];
  }
  for (int i = 11; i >= 0; --i) {
#pragma GCC unroll 4
    for (int g = 0; g < ng; ++g) p[g] = p[g] * r[g] + kExpTaylor[i];
  }
#pragma GCC unroll 4
  for (int g = 0; g < ng; ++g) {
    const LanesI4 ki = (LanesI4)kb[g] - (LanesI4)m4;
    const Lanes4 scale = (Lanes4)((ki + 1023) << 52);
    out[g] = (Lanes4)(~(LanesI4)(y[g] < lim) & (LanesI4)(p[g] * scale));
  }
}

// erf(x) = 1 - exp(-x^2) G(|x|) with G = erfc e^(x^2) by one polynomial on [0, 6]
// (relative error < 6e-16 evaluated in doubles); 1 beyond 6 (erfc(6) = 2e-17); the sign
// of x. The absolute error, < 6e-16 against glibc's erf, is what the basis's differences
// of erf see (near 0 erf's relative error is larger than glibc's; its absolute error is
// a few ulp of 1).
template <int ng>
inline __attribute__((always_inline)) void erfN(const Lanes4* x, Lanes4* out) {
  const LanesI4 signBit = {(long long)0x8000000000000000ull, (long long)0x8000000000000000ull,
                           (long long)0x8000000000000000ull, (long long)0x8000000000000000ull};
  const Lanes4 one = {1, 1, 1, 1}, six = {6, 6, 6, 6}, zero = {0, 0, 0, 0};
  Lanes4 sv[ng], gp[ng], na2[ng], ex[ng];
#pragma GCC unroll 4
  for (int g = 0; g < ng; ++g) {
    const Lanes4 a = (Lanes4)((LanesI4)x[g] & ~signBit);
    const Lanes4 ac = a < six ? a : six;
    sv[g] = (ac - 3.0) * (1.0 / 3.0);
    na2[g] = -(ac * ac);
    gp[g] = sv[g] * kErfcP[36] + kErfcP[35];
  }
  for (int i = 34; i >= 0; --i) {
#pragma GCC unroll 4
    for (int g = 0; g < ng; ++g) gp[g] = gp[g] * sv[g] + kErfcP[i];
  }
  expNegN<ng>(na2, ex);
#pragma GCC unroll 4
  for (int g = 0; g < ng; ++g) {
    const Lanes4 a = (Lanes4)((LanesI4)x[g] & ~signBit);
    const Lanes4 r = one - (a < six ? ex[g] * gp[g] : zero);
    out[g] = (Lanes4)((LanesI4)r | ((LanesI4)x[g] & signBit));
  }
}

// erfN and expNegN over any number of groups, three at a time.
inline __attribute__((always_inline)) void erfAny(const Lanes4* x, Lanes4* out, int ng) {
  int g = 0;
  for (; g + 3 <= ng; g += 3) erfN<3>(x + g, out + g);
  if (ng - g == 2) erfN<2>(x + g, out + g);
  if (ng - g == 1) erfN<1>(x + g, out + g);
}
inline __attribute__((always_inline)) void expNegAny(const Lanes4* y, Lanes4* out, int ng) {
  int g = 0;
  for (; g + 3 <= ng; g += 3) expNegN<3>(y + g, out + g);
  if (ng - g == 2) expNegN<2>(y + g, out + g);
  if (ng - g == 1) expNegN<1>(y + g, out + g);
}

} // namespace

SPEX_CLONES void gaussHermiteBasis(int deg, int hsize, double d, double sigma, double* out) {
  // EXTRACTION.md §2: pixel edges c - 0.5, c + 0.5 for c = -hsize..hsize, normalised
  // t = (edge - d) / sigma. Degree 0 is the Gaussian integral over the pixel; degree
  // k >= 1 is the integral of He_k(t) g(t), i.e. He_{k-1}(t_lo) g(t_lo) - He_{k-1}(t_hi) g(t_hi).
  const int n = 2 * hsize + 1;
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  constexpr double kInvSqrt2Pi = 0.39894228040143267794;
  // Edge values shared by neighbouring pixels: n + 1 edges. erf and the Gaussian of every
  // edge, four edges a group (erfN, expNegN: < 6e-16 absolute from glibc's, which took one
  // call per edge and half of a spot's time).
  const int ng = (n + 1 + 3) / 4; // n <= 61 (validate: hsize <= 30), so ng <= 16
  Lanes4 tt[kMaxGroups], tx[kMaxGroups], ty[kMaxGroups], ef[kMaxGroups], ge[kMaxGroups];
  for (int g = 0; g < ng; ++g) {
    Lanes4 t;
    for (int l = 0; l < 4; ++l) t[l] = ((4 * g + l - hsize) - 0.5 - d) / sigma;
    tt[g] = t;
    tx[g] = t * kInvSqrt2;
    ty[g] = -0.5 * t * t;
  }
  erfAny(tx, ef, ng);
  expNegAny(ty, ge, ng);
  // He_{k-1} g at every edge, k = 1..deg, in the groups' lanes (probabilists' recurrence
  // He_{k+1} = t He_k - k He_{k-1}); each product formed once, shared by the two pixels
  // beside its edge (as the scalar form computed it twice).
  double erfEdge[64 + 4], q[16][64 + 4];
  for (int g = 0; g < ng; ++g) {
    const Lanes4 t = tt[g], gg = ge[g] * kInvSqrt2Pi;
    Lanes4 hm1 = {0, 0, 0, 0}, h = {1, 1, 1, 1};
    for (int k = 0; k < deg; ++k) {
      *reinterpret_cast<Lanes4*>(q[k] + 4 * g) = h * gg;
      const Lanes4 hn = t * h - double(k) * hm1;
      hm1 = h;
      h = hn;
    }
    *reinterpret_cast<Lanes4*>(erfEdge + 4 * g) = ef[g];
  }
  for (int c = 0; c < n; ++c) out[c] = 0.5 * (erfEdge[c + 1] - erfEdge[c]);
  for (int k = 1; k <= deg; ++k) {
    const double* qk = q[k - 1];
    double* o = out + k * n;
    for (int c = 0; c < n; ++c) o[c] = qk[c] - qk[c + 1];
  }
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
