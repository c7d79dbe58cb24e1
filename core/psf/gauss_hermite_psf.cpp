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
// cost. Coefficients generated with mpmath at 40 digits:
// generated: Chebyshev interpolants (degree 16, monomials in s = (a - c) / h) of
// erfc(a) exp(a^2) on [1, 2], [2, 3.5], [3.5, 6]; Taylor coefficients of erf(a) / a in a^2.
constexpr double kErfcC0 = 1.5, kErfcH0 = 0.5;
constexpr double kErfcP0[17] = {0.3215854164543175, -0.08181145886628002, 0.01903775996386935, -0.004116363162445659, 0.0008360838095667121, -0.0001608111733699307, 2.947085745299996e-05, -5.171328672722121e-06, 8.72304473829848e-07, -1.4191186135917107e-07, 2.2328417586062252e-08, -3.405938587821499e-09, 5.04654734183512e-10, -7.257032617086992e-11, 1.0201594788774491e-11, -1.512018061489917e-12, 2.0206514750441873e-13};
constexpr double kErfcC1 = 2.75, kErfcH1 = 0.75;
constexpr double kErfcP1[17] = {0.1936620962790687, -0.047428228170476094, 0.011114208555369105, -0.0025035488002977907, 0.0005440864558925703, -0.00011442715393072321, 2.3347542131509886e-05, -4.631705425368645e-06, 8.950251073955012e-07, -1.6874281363675855e-07, 3.108361702991619e-08, -5.602422802198463e-09, 9.887504078758795e-10, -1.7001807646468688e-10, 2.8878131329194236e-11, -5.421228567545658e-12, 8.851916068237646e-13};
constexpr double kErfcC2 = 4.75, kErfcH2 = 1.25;
constexpr double kErfcP2[17] = {0.11630270721024731, -0.02937931074770363, 0.00728332245151922, -0.0017736306582759893, 0.00042462964853971855, -0.00010002374593056676, 2.319761100590134e-05, -5.300369229868283e-06, 1.193833431655602e-06, -2.652046680494449e-07, 5.813633818412111e-08, -1.2589801133531088e-08, 2.6908532556174525e-09, -5.593570754440116e-10, 1.168400694051709e-10, -2.921164106630926e-11, 5.941010240226964e-12};
constexpr double kErfTaylor[20] = {1.1283791670955126, -0.37612638903183754, 0.11283791670955126, -0.026866170645131252, 0.005223977625442188, -0.0008548327023450853, 0.00012055332981789664, -1.492565035840625e-05, 1.6462114365889248e-06, -1.6365844691234924e-07, 1.4807192815879218e-08, -1.2290555301717928e-09, 9.422759064650411e-11, -6.7113668551641105e-12, 4.4632242632864775e-13, -2.7835162072109215e-14, 1.6342614095367152e-15, -9.063970842808673e-17, 4.763348040515068e-18, -2.3784598852774293e-19};
constexpr double kLn2Hi = 0.6931471804855391, kLn2Lo = 7.440617110012397e-11;
constexpr double kLog2e = 1.4426950408889634;
constexpr double kExpTaylor[14] = {1.0, 1.0, 0.5, 0.16666666666666666, 0.041666666666666664, 0.008333333333333333, 0.001388888888888889, 0.0001984126984126984, 2.48015873015873e-05, 2.7557319223985893e-06, 2.755731922398589e-07, 2.505210838544172e-08, 2.08767569878681e-09, 1.6059043836821613e-10};

// exp(y) for y <= 0: y = k ln2 + r, |r| <= ln2 / 2, e^r by its Taylor polynomial of degree
// 13 (truncation < 5e-18), times 2^k from the exponent bits; 0 below -700 (glibc's
// subnormals there are < 1e-304). Within ~2 ulp of exp.
// (In and out by reference: clang 14 rejects 32-byte vectors passed or returned by value
// in plain x86-64 code.)
inline __attribute__((always_inline)) void expNeg4(const Lanes4& yIn, Lanes4& out) {
  Lanes4 y = yIn;
  const Lanes4 lim = {-700.0, -700.0, -700.0, -700.0};
  const LanesI4 under = (LanesI4)(y < lim);
  y = y < lim ? lim : y;
  const double magic = 6755399441055744.0; // 1.5 * 2^52: adding it rounds to an integer
  const Lanes4 m4 = {magic, magic, magic, magic};
  const Lanes4 kb = y * kLog2e + m4;
  const Lanes4 k = kb - m4;
  const Lanes4 r = (y - k * kLn2Hi) - k * kLn2Lo;
  Lanes4 p = r * kExpTaylor[13] + kExpTaylor[12];
  for (int i = 11; i >= 0; --i) p = p * r + kExpTaylor[i];
  const LanesI4 ki = (LanesI4)kb - (LanesI4)m4;
  const Lanes4 scale = (Lanes4)((ki + 1023) << 52);
  out = (Lanes4)(~under & (LanesI4)(p * scale));
}

// erf(x): for |x| < 1 x times the Taylor series of erf(x) / x in x^2 (20 terms, the last
// < 1e-19); above, 1 - exp(-x^2) G(|x|) with G = erfc e^(x^2) interpolated on [1, 2],
// [2, 3.5], [3.5, 6] (relative error < 3e-16); 1 beyond 6 (erfc(6) = 2e-17). Absolute
// error ~2e-16 against glibc's erf, which is what the basis's differences of erf see.
inline __attribute__((always_inline)) void erf4(const Lanes4& x, Lanes4& out) {
  const LanesI4 signBit = {(long long)0x8000000000000000ull, (long long)0x8000000000000000ull,
                           (long long)0x8000000000000000ull, (long long)0x8000000000000000ull};
  const LanesI4 sign = (LanesI4)x & signBit;
  const Lanes4 a = (Lanes4)((LanesI4)x & ~signBit);
  const Lanes4 one = {1, 1, 1, 1}, six = {6, 6, 6, 6};
  // |x| < 1
  const Lanes4 a2 = a * a;
  Lanes4 t = a2 * kErfTaylor[19] + kErfTaylor[18];
  for (int i = 17; i >= 0; --i) t = t * a2 + kErfTaylor[i];
  const Lanes4 small = a * t;
  // |x| >= 1: the interval's centre, inverse half-width and coefficients chosen per lane
  const Lanes4 ac = a < six ? a : six;
  const Lanes4 two = {2, 2, 2, 2}, three5 = {3.5, 3.5, 3.5, 3.5};
  const LanesI4 in0 = (LanesI4)(ac < two), in1 = (LanesI4)(ac < three5) & ~in0, in2 = ~(in0 | in1);
#define SPEX_PICK(v0, v1, v2)                                                                          \
  ((Lanes4)((in0 & (LanesI4)(Lanes4{v0, v0, v0, v0})) | (in1 & (LanesI4)(Lanes4{v1, v1, v1, v1})) |         \
            (in2 & (LanesI4)(Lanes4{v2, v2, v2, v2}))))
  const Lanes4 sv = (ac - SPEX_PICK(kErfcC0, kErfcC1, kErfcC2)) * SPEX_PICK(1 / kErfcH0, 1 / kErfcH1, 1 / kErfcH2);
  Lanes4 g = SPEX_PICK(kErfcP0[16], kErfcP1[16], kErfcP2[16]);
  for (int i = 15; i >= 0; --i) g = g * sv + SPEX_PICK(kErfcP0[i], kErfcP1[i], kErfcP2[i]);
#undef SPEX_PICK
  const Lanes4 na2 = -(ac * ac);
  Lanes4 ex;
  expNeg4(na2, ex);
  const Lanes4 erfc = ex * g;
  const Lanes4 zero = {0, 0, 0, 0};
  const Lanes4 large = one - (a < six ? erfc : zero);
  const Lanes4 r = a < one ? small : large;
  out = (Lanes4)((LanesI4)r | sign);
}

} // namespace

SPEX_CLONES void gaussHermiteBasis(int deg, int hsize, double d, double sigma, double* out) {
  // EXTRACTION.md §2: pixel edges c - 0.5, c + 0.5 for c = -hsize..hsize, normalised
  // t = (edge - d) / sigma. Degree 0 is the Gaussian integral over the pixel; degree
  // k >= 1 is the integral of He_k(t) g(t), i.e. He_{k-1}(t_lo) g(t_lo) - He_{k-1}(t_hi) g(t_hi).
  const int n = 2 * hsize + 1;
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  constexpr double kInvSqrt2Pi = 0.39894228040143267794;
  // Edge values shared by neighbouring pixels: n + 1 edges.
  // erf and the Gaussian four edges at a time (erf4, expNeg4: ~2e-16 absolute from
  // glibc's, which took one call per edge and half of a spot's time).
  double erfEdge[64 + 4], gEdge[64 + 4], heEdge[64][16];
  for (int e = 0; e <= n; e += 4) {
    Lanes4 t;
    for (int l = 0; l < 4; ++l) t[l] = ((e + l - hsize) - 0.5 - d) / sigma;
    const Lanes4 tx = t * kInvSqrt2, y = -0.5 * t * t;
    Lanes4 ef, g;
    erf4(tx, ef);
    expNeg4(y, g);
    g *= kInvSqrt2Pi;
    for (int l = 0; l < 4; ++l) {
      erfEdge[e + l] = ef[l];
      gEdge[e + l] = g[l];
    }
  }
  for (int e = 0; e <= n; ++e) {
    const double t = ((e - hsize) - 0.5 - d) / sigma;
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
