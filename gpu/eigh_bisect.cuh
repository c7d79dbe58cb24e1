// Per-thread code of syevBatched's bisection method (SyevMethod::Bisect,
// batched_eigh.h; docs/benchmarks.md, "Issue 12, eighth round"), written
// __host__ __device__ so that tests/gpu/test_eigh_bisect.cpp runs it on the host, each
// phase (the code between two barriers) for every thread in turn, against LAPACK.
//
// Pass 2 (syevBisectKernel, a thread per eigenvalue) on the tridiagonal (d, e) of pass 1
// (with SyevValues::DivisionFree, the default, or Newton the eigenvalues come instead
// from syevSturmValuesKernel before it, by bisection on the division-free count below;
// pass 2 then only ranks them and computes the vectors):
//   - split: e(i) = 0 where |e(i)| <= eps ||T|| (a perturbation of eps ||T||, the
//     backward error QL has anyway); row j's unreduced block [s, t] owns the
//     eigenvalues s..t, thread j finds the (j - s)-th of its block;
//   - quadsection on Sturm counts (dstebz/dlaneg: q(i) = (d(i) - x) - e(i-1)^2 / q(i-1),
//     a pivot |q| <= pivmin taken as -pivmin): three counts a step, interleaved (the
//     latency of one), two bits a step, from the block's Gershgorin interval down to a
//     width of eps ||T||: ~27 steps;
//   - the vector by a twisted factorization of T - lambda (Fernando; Parlett-Dhillon):
//     D+ from the top, D- from the bottom, twist r at the least |gamma(r)|, then
//     z(r) = 1, z(i) = -e(i) / D+(i) z(i+1) above, z(i+1) = -e(i) / D-(i+1) z(i) below:
//     (T - lambda) z = gamma(r) e_r, one inverse-iteration step from the best start.
//     Where a neighbour of lambda in its block lies within kTightGap eps ||T|| the
//     twisted vectors of the two would be nearly the same one, so such a member
//     instead takes two inverse-iteration steps (the twisted factorization as the
//     solver) from its own pseudo-random start: independent vectors spanning the
//     cluster's space.
//   - eigenvalues ranked ascending (ties by index); vector j goes to column rank(j).
// Pass 3 by Newton-Schulz (syevOrthoNsKernel, the default): see "Pass 3 by Newton-Schulz"
// below; the same argument holds for its symmetric mixing.
// Pass 3 by CholQR (syevOrthoFormKernel, SyevOrtho::CholQR): CholQR on the vectors X (G = X^T X = R^T R,
// X <- X R^-1), a second time where the first Gram matrix departs from I by more than
// kSecondPass; then Z = Q X. Why this keeps C^-1/2 = V f(Lambda) V^T accurate without any cluster
// threshold: for two computed pairs, (lambda_a - lambda_b) x_a^T x_b = x_a^T r_b - r_a^T x_b
// with r = T x - lambda x, so |G_ab| <= (|r_a| + |r_b|) / |lambda_a - lambda_b|, and
// R^-1 = I - (strict upper G) + O(G^2) mixes x_b into x_a by ~G_ab, which adds
// |G_ab| |lambda_a - lambda_b| <= |r_a| + |r_b| ~ eps ||T|| to the residual: vectors
// are mixed in proportion to how close their eigenvalues are, whatever the spectrum's
// grading. So V is orthonormal to rounding with residuals of a few eps ||T||: a
// backward-stable decomposition of T + E, |E| ~ eps ||T||, as QL gives, and
// C^-1/2 carries the same ~eps cond / 2 relative error as LAPACK's.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define SPEX_BI_HD __host__ __device__ __forceinline__
#else
#define SPEX_BI_HD inline
#endif

namespace spex::gpu::bisect {

constexpr double kEpsB = 2.220446049250313e-16;
// Adjacent eigenvalues of a block closer than this many eps ||T|| take the cluster path.
constexpr double kTightGap = 30.0;
// Inverse-iteration steps of a cluster member.
constexpr int kClusterIterations = 3;

// 1 / x to ~1 ulp: rcp.approx and two Newton steps on the device (the IEEE division is
// a subroutine call on the Sturm count's serial chain), the division on the host.
// |x| >= pivmin keeps it clear of the flush-to-zero range.
SPEX_BI_HD double recip(double x) {
#if defined(__CUDA_ARCH__)
  double y;
  asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(y) : "d"(x));
  double r = fma(-x, y, 1.0);
  y = fma(y, r, y);
  r = fma(-x, y, 1.0);
  return fma(y, r, y);
#else
  return 1.0 / x;
#endif
}

// Scalars of one matrix (thread 0 of setup).
// (No initializers: it lives in shared memory.)
struct Scalars {
  double tnorm;  // max row sum of |T| (Gershgorin)
  double pivmin; // smallest pivot magnitude of a Sturm count / factorization
  double atol;   // bisection width
  double tight;  // cluster gap
};

// Setup, one thread: e split where |e(i)| <= eps ||T||, e2 = e^2, the scalars. d, e of
// order n (e(n - 1) ignored).
SPEX_BI_HD void setup(int n, const double* d, double* e, double* e2, Scalars& sc) {
  double t = 0;
  for (int i = 0; i < n; ++i) {
    const double r = fabs(d[i]) + (i > 0 ? fabs(e[i - 1]) : 0.0) + (i + 1 < n ? fabs(e[i]) : 0.0);
    t = fmax(t, r);
  }
  sc.tnorm = t;
  const double split = kEpsB * t;
  for (int i = 0; i + 1 < n; ++i) {
    if (fabs(e[i]) <= split) e[i] = 0.0;
    e2[i] = e[i] * e[i];
  }
  if (n > 0) {
    e[n - 1] = 0.0;
    e2[n - 1] = 0.0;
  }
  // A pivot below pivmin moves d by at most 2 pivmin, far below eps ||T||; e^2 / pivmin
  // stays finite.
  sc.pivmin = fmax(1e-10 * kEpsB * t, 1e-290);
  sc.atol = kEpsB * t;
  sc.tight = kTightGap * kEpsB * t;
}

// Unreduced block [s, t] holding row j (e split by setup).
SPEX_BI_HD void blockOf(int n, const double* e, int j, int& s, int& t) {
  s = j;
  while (s > 0 && e[s - 1] != 0.0) --s;
  t = j;
  while (t + 1 < n && e[t] != 0.0) ++t;
}

// Eigenvalues of block [s, t] below x (Sturm count, LAPACK's pivot guard).
SPEX_BI_HD int sturmCount(const double* d, const double* e2, int s, int t, double x, double pivmin) {
  double q = d[s] - x;
  if (fabs(q) <= pivmin) q = -pivmin;
  int c = q < 0.0;
  for (int i = s + 1; i <= t; ++i) {
    q = (d[i] - x) - e2[i - 1] * recip(q);
    if (fabs(q) <= pivmin) q = -pivmin;
    c += q < 0.0;
  }
  return c;
}

// Counts below three points at once (three independent chains: the latency of one).
SPEX_BI_HD void sturmCount3(const double* d, const double* e2, int s, int t, double x1, double x2, double x3,
                            double pivmin, int& c1, int& c2, int& c3) {
  double q1 = d[s] - x1, q2 = d[s] - x2, q3 = d[s] - x3;
  if (fabs(q1) <= pivmin) q1 = -pivmin;
  if (fabs(q2) <= pivmin) q2 = -pivmin;
  if (fabs(q3) <= pivmin) q3 = -pivmin;
  int a1 = q1 < 0.0, a2 = q2 < 0.0, a3 = q3 < 0.0;
  for (int i = s + 1; i <= t; ++i) {
    const double di = d[i], ei = e2[i - 1];
    q1 = (di - x1) - ei * recip(q1);
    q2 = (di - x2) - ei * recip(q2);
    q3 = (di - x3) - ei * recip(q3);
    if (fabs(q1) <= pivmin) q1 = -pivmin;
    if (fabs(q2) <= pivmin) q2 = -pivmin;
    if (fabs(q3) <= pivmin) q3 = -pivmin;
    a1 += q1 < 0.0;
    a2 += q2 < 0.0;
    a3 += q3 < 0.0;
  }
  c1 = a1;
  c2 = a2;
  c3 = a3;
}

// The k-th (from 0) eigenvalue of block [s, t] to a width of atol: quadsection (three
// counts a step, two bits), bisection for the last steps where the quarter points
// round onto the ends. counts: steps taken (for the benchmark notes).
SPEX_BI_HD double bisectEigenvalue(const double* d, const double* e, const double* e2, int s, int t, int k,
                                   const Scalars& sc, int* counts = nullptr) {
  double lo = d[s], hi = d[s];
  for (int i = s; i <= t; ++i) {
    const double r = (i > s ? fabs(e[i - 1]) : 0.0) + (i < t ? fabs(e[i]) : 0.0);
    lo = fmin(lo, d[i] - r);
    hi = fmax(hi, d[i] + r);
  }
  // Widened as dstebz does, so that rounding in the counts cannot put an eigenvalue
  // outside.
  const double w = 2.0 * kEpsB * sc.tnorm * (t - s + 1) + 2.0 * sc.pivmin;
  lo -= w;
  hi += w;
  int steps = 0;
  while (hi - lo > sc.atol) {
    const double h = hi - lo;
    const double x1 = lo + 0.25 * h, x2 = lo + 0.5 * h, x3 = hi - 0.25 * h;
    ++steps;
    if (x1 > lo && x1 < x2 && x2 < x3 && x3 < hi) {
      int c1, c2, c3;
      sturmCount3(d, e2, s, t, x1, x2, x3, sc.pivmin, c1, c2, c3);
      if (c1 > k)
        hi = x1;
      else if (c2 > k)
        lo = x1, hi = x2;
      else if (c3 > k)
        lo = x2, hi = x3;
      else
        lo = x3;
      continue;
    }
    if (x2 <= lo || x2 >= hi) break;
    if (sturmCount(d, e2, s, t, x2, sc.pivmin) > k)
      hi = x2;
    else
      lo = x2;
  }
  if (counts) *counts += steps;
  return 0.5 * (lo + hi);
}

// ---------------------------------------------------------------------------------
// Eigenvalues by bisection on the division-free Sturm count (SyevValues::DivisionFree;
// docs/benchmarks.md, Issue 12, ninth round, eighval). Run by syevSturmValuesKernel, a
// thread per eigenvalue, before syevBisectKernel, which then only ranks them and
// computes the vectors.
//
// The count is the number of sign changes of the leading principal minors of T - x,
// p(i) = (d(i) - x) p(i-1) - e(i-1)^2 p(i-2) (Barth, Martin and Wilkinson 1967): one
// FADD, one DMUL and one DFMA a row, the DFMA the row's only step on the serial chain
// (e^2 p(i-2) is known a row early), against the ratio form's reciprocal, two Newton
// steps, pivot guard and count. Backward error: each rounding of a row is a relative
// perturbation of (d(i) - x) or of e(i-1)^2 (a rounding of p(i) itself moves into the
// next two rows' factors), i.e. T + E with |E| of a few eps (|d| + |x|) <= few eps ||T||,
// as for the ratio form, so the bisection widths, the cluster rule and the twisted
// vectors' argument above are unchanged. Range: the block is scaled by a power of two to
// ||T|| in [1, 2) (unitScale; exact), and the pair (p(i-1), p(i)) by a power of two to
// max |p| in [1, 2) every kRescaleRows rows (exact, signs kept). A row grows the pair by
// at most |d - x| + e^2 < 8 and, with every unsplit |e| > eps ||T|| (setup), shrinks its
// larger member by at most e^2 / 8 >= 6e-33 (|d - x| < 4, e^2 >= eps^2), so 8 rows stay
// inside [2e-258, 4e7], clear of underflow and overflow. A zero
// p(i) needs no guard: p(i+1) = -e^2 p(i-1) has the sign opposite to p(i-1), so the zero
// adds exactly one change over the two rows whichever sign it carries.
constexpr int kRescaleRows = 8;

// Row i of the scaled tridiagonal as the count reads it: d(i) and e(i - 1)^2 (0 for the
// block's first row), one 16-byte shared-memory load a row.
struct alignas(16) DiagE2 {
  double d, e2;
};

// The high 32 bits of x (sign, exponent, top of the mantissa) and the double with high
// word h and low word 0.
SPEX_BI_HD int hiWord(double x) {
#if defined(__CUDA_ARCH__)
  return __double2hiint(x);
#else
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return int(u >> 32);
#endif
}
SPEX_BI_HD double fromHiWord(int h) {
#if defined(__CUDA_ARCH__)
  return __hiloint2double(h, 0);
#else
  const std::uint64_t u = std::uint64_t(std::uint32_t(h)) << 32;
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

// The power of two 2^k with tnorm 2^k in [1, 2) (1 for tnorm 0 or not finite; k within
// +-1000 so that the scale and its inverse are normal).
SPEX_BI_HD double unitScale(double tnorm) {
  const int h = hiWord(tnorm) & 0x7ff00000;
  if (!(tnorm > 0.0) || h == 0x7ff00000) return 1.0;
  int k = 1023 - (h >> 20); // tnorm in [2^(E - 1023), 2^(E - 1022))
  k = k < -1000 ? -1000 : (k > 1000 ? 1000 : k);
  return fromHiWord((1023 + k) << 20);
}

// p0, p1 scaled by the power of two that brings max(|p0|, |p1|) into [1, 2).
SPEX_BI_HD void rescalePair(double& p0, double& p1) {
  const int h0 = hiWord(p0) & 0x7ff00000, h1 = hiWord(p1) & 0x7ff00000;
  const double f = fromHiWord(0x7fe00000 - (h0 > h1 ? h0 : h1)); // 2^(1023 - E)
  p0 *= f;
  p1 *= f;
}

// One row of the division-free count: p(i) = (d(i) - x) p(i-1) - e(i-1)^2 p(i-2), c
// counting the sign changes of the sequence (from the sign bits).
SPEX_BI_HD void countRow(const DiagE2 row, double x, double& p0, double& p1, unsigned& c) {
  const double p = fma(row.d - x, p1, -(row.e2 * p0));
  c += unsigned(hiWord(p) ^ hiWord(p1)) >> 31;
  p0 = p1;
  p1 = p;
}

// The same row with the derivative q = dp/dx beside it (q(i) = (d(i) - x) q(i-1)
// - e(i-1)^2 q(i-2) - p(i-1)), for Newton's steps.
SPEX_BI_HD void countRowNewton(const DiagE2 row, double x, double& p0, double& p1, double& q0, double& q1,
                               unsigned& c) {
  const double a = row.d - x;
  const double p = fma(a, p1, -(row.e2 * p0));
  const double q = fma(a, q1, -fma(row.e2, q0, p1));
  c += unsigned(hiWord(p) ^ hiWord(p1)) >> 31;
  p0 = p1;
  p1 = p;
  q0 = q1;
  q1 = q;
}

// Eigenvalues of block [s, t] below x: sign changes of p(s - 1) = 1, p(s), ..., p(t)
// (de scaled by unitScale, x in the same units; de[i].e2 = e(i - 1)^2). The change
// between p(i - 1) and p(i) is the sign bit of hiWord(p(i - 1)) ^ hiWord(p(i)).
SPEX_BI_HD int sturmCountDivisionFree(const DiagE2* de, int s, int t, double x) {
  double p0 = 1.0, p1 = de[s].d - x;
  unsigned c = unsigned(hiWord(p1)) >> 31;
  int i = s + 1;
  for (; i + kRescaleRows - 1 <= t; i += kRescaleRows) {
    for (int r = 0; r < kRescaleRows; ++r) { // a constant trip count: unrolled by nvcc
      countRow(de[i + r], x, p0, p1, c);
    }
    rescalePair(p0, p1);
  }
  for (; i <= t; ++i) {
    countRow(de[i], x, p0, p1, c);
  }
  return int(c);
}

// The Gershgorin interval of block [s, t] of the scaled tridiagonal (de, e), widened
// as dstebz does, so that rounding in the counts cannot put an eigenvalue outside.
SPEX_BI_HD void gershgorinBracket(const DiagE2* de, const double* e, int s, int t, double tnorm, double& lo,
                                  double& hi) {
  lo = de[s].d;
  hi = de[s].d;
  for (int i = s; i <= t; ++i) {
    const double r = (i > s ? fabs(e[i - 1]) : 0.0) + (i < t ? fabs(e[i]) : 0.0);
    lo = fmin(lo, de[i].d - r);
    hi = fmax(hi, de[i].d + r);
  }
  const double w = 2.0 * kEpsB * tnorm * (t - s + 1);
  lo -= w;
  hi += w;
}

// The k-th (from 0) eigenvalue of block [s, t] by bisection on sturmCountDivisionFree to
// a width of eps tnorm, in the units of de, e (scaled: tnorm in [1, 2)). One count a
// step (its chain is one DFMA a row, so quadsection's three interleaved counts for two
// bits would cost 1.5 times the FP64 work for no latency to hide); ~53 steps. counts:
// steps taken (for the benchmark notes).
SPEX_BI_HD double bisectEigenvalueDivisionFree(const DiagE2* de, const double* e, int s, int t, int k,
                                               double tnorm, int* counts = nullptr) {
  double lo, hi;
  gershgorinBracket(de, e, s, t, tnorm, lo, hi);
  const double atol = kEpsB * tnorm;
  int steps = 0;
  while (hi - lo > atol) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    ++steps;
    if (sturmCountDivisionFree(de, s, t, mid) > k)
      hi = mid;
    else
      lo = mid;
  }
  if (counts) *counts += steps;
  return 0.5 * (lo + hi);
}

// The count and, with it, the Newton correction p(t) / p'(t) at x (delta; x - delta is
// Newton's next point): p' by the differentiated recurrence p'(i) = (d(i) - x) p'(i-1)
// - p(i-1) - e(i-1)^2 p'(i-2), two more DFMAs a row. The four values are rescaled
// together by the power of two that brings the largest into [1, 2) (p' / p stays below
// ~n / (eps ||T||) in practice, so p keeps the range argument above with room to spare).
SPEX_BI_HD void rescaleQuad(double& p0, double& p1, double& q0, double& q1) {
  const int h0 = hiWord(p0) & 0x7ff00000, h1 = hiWord(p1) & 0x7ff00000;
  const int g0 = hiWord(q0) & 0x7ff00000, g1 = hiWord(q1) & 0x7ff00000;
  const int a = h0 > h1 ? h0 : h1, b = g0 > g1 ? g0 : g1;
  const double f = fromHiWord(0x7fe00000 - (a > b ? a : b));
  p0 *= f;
  p1 *= f;
  q0 *= f;
  q1 *= f;
}
SPEX_BI_HD int sturmCountNewton(const DiagE2* de, int s, int t, double x, double& delta) {
  double p0 = 1.0, p1 = de[s].d - x, q0 = 0.0, q1 = -1.0;
  unsigned c = unsigned(hiWord(p1)) >> 31;
  int i = s + 1;
  for (; i + kRescaleRows - 1 <= t; i += kRescaleRows) {
    for (int r = 0; r < kRescaleRows; ++r) { // a constant trip count: unrolled by nvcc
      countRowNewton(de[i + r], x, p0, p1, q0, q1, c);
    }
    rescaleQuad(p0, p1, q0, q1);
  }
  for (; i <= t; ++i) {
    countRowNewton(de[i], x, p0, p1, q0, q1, c);
  }
  delta = p1 / q1;
  return int(c);
}

// The k-th (from 0) eigenvalue of block [s, t] as bisectEigenvalueDivisionFree finds it
// (a bracket [lo, hi] with count(lo) <= k < count(hi), returned as its midpoint once its
// width is at most eps tnorm), but once the bracket holds eigenvalue k alone (the counts
// at its ends differ by one) the next point is Newton's, x - p/p', pushed eps tnorm / 2
// further in the step's direction so that the bracket closes around the root from both
// sides once Newton is that close: quadratic convergence in place of a bit a step. A
// Newton point outside the bracket, or a correction that did not halve since the last
// one (a slow approach past a near neighbour), takes the midpoint instead, so the
// bracket shrinks at least as fast as every other bisection step. Same result
// guarantee as bisection; the counts are the same function. counts: evaluations.
SPEX_BI_HD double newtonEigenvalueDivisionFree(const DiagE2* de, const double* e, int s, int t, int k, double tnorm,
                                               int* counts = nullptr) {
  double lo, hi;
  gershgorinBracket(de, e, s, t, tnorm, lo, hi);
  const double atol = kEpsB * tnorm;
  int clo = 0, chi = t - s + 1, steps = 0;
  double x = 0.5 * (lo + hi), dPrev = HUGE_VAL;
  while (hi - lo > atol) {
    if (!(x > lo && x < hi)) x = 0.5 * (lo + hi);
    if (x <= lo || x >= hi) break;
    ++steps;
    const bool isolated = chi - clo == 1;
    double delta = 0.0;
    const int c = isolated ? sturmCountNewton(de, s, t, x, delta) : sturmCountDivisionFree(de, s, t, x);
    if (c > k) {
      hi = x;
      chi = c;
    } else {
      lo = x;
      clo = c;
    }
    double next = 0.5 * (lo + hi);
    if (isolated) {
      const double y = x - delta - (c > k ? 0.5 * atol : -0.5 * atol);
      const double ad = fabs(delta);
      if (ad <= 0.5 * dPrev && y > lo && y < hi) next = y; // NaN fails both
      dPrev = ad;
    }
    x = next;
  }
  if (counts) *counts += steps;
  return 0.5 * (lo + hi);
}

// Row j of the values kernel's scaled copy (after setup split e): de[j] = (d(j) scale,
// (e(j - 1) scale)^2), e(j) scaled in place. Every thread its own row; reads e(j - 1)
// unscaled, so e is scaled after a barrier (scaleRowE).
SPEX_BI_HD void scaleRowDE(const double* d, const double* e, int j, double scale, DiagE2* de) {
  const double em = j > 0 ? e[j - 1] * scale : 0.0;
  de[j].d = d[j] * scale;
  de[j].e2 = em * em;
}
SPEX_BI_HD void scaleRowE(double* e, int j, double scale) { e[j] *= scale; }

// A pseudo-random start entry in [-1, 1) (splitmix64 of the matrix's row and vector).
SPEX_BI_HD double startEntry(int j, int i) {
  std::uint64_t z = (std::uint64_t(j) << 32) + std::uint64_t(i) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return double(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

// Strided per-thread vectors: element i of thread j's vector at base[i * ld + j]
// (a warp's threads touch consecutive doubles).
struct Col {
  double* base;
  int ld, j;
  SPEX_BI_HD double& operator[](int i) const { return base[(long long)i * ld + j]; }
};

// D+ of T - lambda on block [s, t], from the top, into P[s .. t]: each pivot kept at
// least pm in size (dstebz's guard: a pivot that small becomes -pm). Both vector
// routines begin with it.
SPEX_BI_HD void dPlus(const double* d, const double* e2, int s, int t, double lambda, double pm, Col P) {
  double q = d[s] - lambda;
  if (fabs(q) <= pm) q = -pm;
  P[s] = q;
  for (int i = s; i < t; ++i) {
    q = (d[i + 1] - lambda) - e2[i] * recip(q);
    if (fabs(q) <= pm) q = -pm;
    P[i + 1] = q;
  }
}

// Eigenvector of block [s, t] for the shift lambda into x (rows s..t; rows outside are
// not touched), unit 2-norm. P, M: D+ and D- (per-thread scratch). Not cluster: the
// twisted vector. Cluster (dstein): three inverse-iteration steps from the start
// startEntry(j, .), each solve followed by modified Gram-Schmidt against the cluster's
// earlier members (unit vectors on the same block: member p before this one is column
// rank[j - 1 - p] of x's base, p < nprev), the shift already pushed past the earlier
// members' by the caller.
SPEX_BI_HD void twistedVector(const double* d, const double* e, const double* e2, int s, int t, double lambda,
                              const Scalars& sc, bool cluster, int j, Col x, Col P, Col M, const int* rank,
                              int nprev) {
  const double pm = sc.pivmin;
  // D+ from the top, D- from the bottom, gamma and the twist r.
  dPlus(d, e2, s, t, lambda, pm, P);
  double q = d[t] - lambda;
  if (fabs(q) <= pm) q = -pm;
  M[t] = q;
  int r = t;
  double best = fabs(q + P[t] - (d[t] - lambda));
  for (int i = t - 1; i >= s; --i) {
    q = (d[i] - lambda) - e2[i] * recip(q);
    if (fabs(q) <= pm) q = -pm;
    M[i] = q;
    const double g = fabs(q + P[i] - (d[i] - lambda));
    if (g < best) {
      best = g;
      r = i;
    }
  }
  if (!cluster) {
    // z(r) = 1, then outwards by products (no chain through a division).
    double z = 1.0, z2 = 1.0;
    x[r] = 1.0;
    for (int i = r - 1; i >= s; --i) {
      z = -(e[i] * recip(P[i])) * z;
      x[i] = z;
      z2 += z * z;
    }
    z = 1.0;
    for (int i = r; i < t; ++i) {
      z = -(e[i] * recip(M[i + 1])) * z;
      x[i + 1] = z;
      z2 += z * z;
    }
    const double inv = 1.0 / sqrt(z2);
    for (int i = s; i <= t; ++i) x[i] *= inv;
    return;
  }
  // (T - lambda) y = b by the twisted factorization at r: forward elimination above r,
  // backward below, row r, then back-substitution outwards. x holds b, then the
  // eliminated right-hand side, then the solution.
  double gr = d[r] - lambda;
  if (r > s) gr -= e2[r - 1] * recip(P[r - 1]);
  if (r < t) gr -= e2[r] * recip(M[r + 1]);
  if (fabs(gr) <= pm) gr = -pm;
  for (int i = s; i <= t; ++i) x[i] = startEntry(j, i);
  for (int it = 0; it < kClusterIterations; ++it) {
    // Gram-Schmidt against the earlier members (before the solve: the start; after it:
    // below), then the solve.
    for (int p = 0; p < nprev; ++p) {
      const Col prev{x.base, x.ld, rank[j - 1 - p]};
      double dot = 0.0;
      for (int i = s; i <= t; ++i) dot += x[i] * prev[i];
      for (int i = s; i <= t; ++i) x[i] -= dot * prev[i];
    }
    double y = 0.0;
    for (int i = s; i < r; ++i) {
      y = x[i] - (i > s ? e[i - 1] * recip(P[i - 1]) * y : 0.0);
      x[i] = y;
    }
    const double ya = r > s ? e[r - 1] * recip(P[r - 1]) * y : 0.0;
    y = 0.0;
    for (int i = t; i > r; --i) {
      y = x[i] - (i < t ? e[i] * recip(M[i + 1]) * y : 0.0);
      x[i] = y;
    }
    const double yb = r < t ? e[r] * recip(M[r + 1]) * y : 0.0;
    const double xr = (x[r] - ya - yb) / gr;
    x[r] = xr;
    double xmax = fabs(xr), xv = xr;
    for (int i = r - 1; i >= s; --i) {
      xv = (x[i] - e[i] * xv) * recip(P[i]);
      x[i] = xv;
      xmax = fmax(xmax, fabs(xv));
    }
    xv = xr;
    for (int i = r + 1; i <= t; ++i) {
      xv = (x[i] - e[i - 1] * xv) * recip(M[i]);
      x[i] = xv;
      xmax = fmax(xmax, fabs(xv));
    }
    const double inv = 1.0 / xmax;
    for (int i = s; i <= t; ++i) x[i] *= inv;
  }
  for (int p = 0; p < nprev; ++p) {
    const Col prev{x.base, x.ld, rank[j - 1 - p]};
    double dot = 0.0;
    for (int i = s; i <= t; ++i) dot += x[i] * prev[i];
    for (int i = s; i <= t; ++i) x[i] -= dot * prev[i];
  }
  double x2 = 0.0;
  for (int i = s; i <= t; ++i) x2 += x[i] * x[i];
  const double inv = 1.0 / sqrt(x2);
  for (int i = s; i <= t; ++i) x[i] *= inv;
}

SPEX_BI_HD void clusterSolveSlots(int n, const double* __restrict__ ep, int s, int t, int r, double gr, int j,
                                  double* __restrict__ xp, int ldx, const double* __restrict__ sp, int lds,
                                  const double* base, const int* rank, int nprev);

// twistedVector with its per-thread scratch in one column S (shared memory on the
// device, SyevVectors::Shared; docs/benchmarks.md, Issue 12, ninth round, eighvec) in
// place of D+ and D- in global memory: the same arithmetic in the same order, so the
// same vector to the bit. Slot i of S holds D+(i) after the forward pass; the backward
// pass reads it for gamma(i) and leaves D-(i) in its place; once the twist r is known,
// D+ is recomputed over s .. r - 1 (the same recurrence: the same values), so S holds
// D+ above r and D- below it, all that the twisted vector and the cluster's solves
// read. Not cluster: the unnormalised z(i) then goes into slot i as it is formed, and x
// is written once, scaled, in a single pass of stores over all n rows (zero outside
// [s, t]), no global load. Cluster: the solves as twistedVector's on x (a borrowed
// shared column, or the workspace: borrowedColumn), rank[k] naming the column of x's
// base that holds thread k's vector, all n rows of x written (zero outside [s, t]).
SPEX_BI_HD void twistedVectorSlots(int n, const double* d, const double* e, const double* e2, int s, int t,
                                   double lambda, const Scalars& sc, bool cluster, int j, Col x, Col S,
                                   const int* rank, int nprev) {
  const double pm = sc.pivmin;
  dPlus(d, e2, s, t, lambda, pm, S);
  double q = d[t] - lambda;
  if (fabs(q) <= pm) q = -pm;
  int r = t;
  double best = fabs(q + S[t] - (d[t] - lambda));
  S[t] = q;
  for (int i = t - 1; i >= s; --i) {
    q = (d[i] - lambda) - e2[i] * recip(q);
    if (fabs(q) <= pm) q = -pm;
    const double g = fabs(q + S[i] - (d[i] - lambda));
    S[i] = q;
    if (g < best) {
      best = g;
      r = i;
    }
  }
  // D+ over s .. r - 1 again.
  if (r > s) {
    q = d[s] - lambda;
    if (fabs(q) <= pm) q = -pm;
    S[s] = q;
    for (int i = s; i < r - 1; ++i) {
      q = (d[i + 1] - lambda) - e2[i] * recip(q);
      if (fabs(q) <= pm) q = -pm;
      S[i + 1] = q;
    }
  }
  if (!cluster) {
    // Four rows' D+/D- and e loaded before the four rows' stores (the compiler may not
    // move a load of S past a store to it): the same operations in the same order.
    double z = 1.0, z2 = 1.0;
    S[r] = 1.0;
    int i = r - 1;
    for (; i - 3 >= s; i -= 4) {
      double p[4], f[4];
      for (int k = 0; k < 4; ++k) {
        p[k] = S[i - k];
        f[k] = e[i - k];
      }
      for (int k = 0; k < 4; ++k) {
        z = -(f[k] * recip(p[k])) * z;
        S[i - k] = z;
        z2 += z * z;
      }
    }
    for (; i >= s; --i) {
      z = -(e[i] * recip(S[i])) * z;
      S[i] = z;
      z2 += z * z;
    }
    z = 1.0;
    i = r;
    for (; i + 3 < t; i += 4) {
      double p[4], f[4];
      for (int k = 0; k < 4; ++k) {
        p[k] = S[i + k + 1];
        f[k] = e[i + k];
      }
      for (int k = 0; k < 4; ++k) {
        z = -(f[k] * recip(p[k])) * z;
        S[i + k + 1] = z;
        z2 += z * z;
      }
    }
    for (; i < t; ++i) {
      z = -(e[i] * recip(S[i + 1])) * z;
      S[i + 1] = z;
      z2 += z * z;
    }
    const double inv = 1.0 / sqrt(z2);
    i = 0;
    for (; i + 3 < n; i += 4) {
      double v[4];
      for (int k = 0; k < 4; ++k) v[k] = S[i + k];
      for (int k = 0; k < 4; ++k) x[i + k] = i + k >= s && i + k <= t ? v[k] * inv : 0.0;
    }
    for (; i < n; ++i) x[i] = i >= s && i <= t ? S[i] * inv : 0.0;
    return;
  }
  double gr = d[r] - lambda;
  if (r > s) gr -= e2[r - 1] * recip(S[r - 1]);
  if (r < t) gr -= e2[r] * recip(S[r + 1]);
  if (fabs(gr) <= pm) gr = -pm;
  clusterSolveSlots(n, e, s, t, r, gr, j, &x[0], x.ld, &S[0], S.ld, x.base, rank, nprev);
}

// twistedVectorSlots' cluster member (dstein's steps as twistedVector's, the same
// arithmetic in the same order) on raw pointers: xp = x's column (stride ldx), sp = the
// D+/D- column (stride lds), ep = e, declared apart (__restrict__: the solves' reloads
// of D+/D- and e may run ahead of the stores to x). base + rank[k] (stride ldx): the
// column of earlier member k.
SPEX_BI_HD void clusterSolveSlots(int n, const double* __restrict__ ep, int s, int t, int r, double gr, int j,
                                  double* __restrict__ xp, int ldx, const double* __restrict__ sp, int lds,
                                  const double* base, const int* rank, int nprev) {
  auto X = [&](int i) -> double& { return xp[(long long)i * ldx]; };
  auto P = [&](int i) { return sp[(long long)i * lds]; };
  for (int i = s; i <= t; ++i) X(i) = startEntry(j, i);
  for (int it = 0; it < kClusterIterations; ++it) {
    for (int p = 0; p < nprev; ++p) {
      const double* prev = base + rank[j - 1 - p];
      double dot = 0.0;
      for (int i = s; i <= t; ++i) dot += X(i) * prev[(long long)i * ldx];
      for (int i = s; i <= t; ++i) X(i) -= dot * prev[(long long)i * ldx];
    }
    // Each sweep loads x four rows ahead of the four rows' stores (the compiler may not
    // move a load of x past a store to it): the same operations in the same order.
    double y = 0.0, b[4];
    int i = s;
    for (; i + 3 < r; i += 4) {
      for (int k = 0; k < 4; ++k) b[k] = X(i + k);
      for (int k = 0; k < 4; ++k) {
        y = b[k] - (i + k > s ? ep[i + k - 1] * recip(P(i + k - 1)) * y : 0.0);
        X(i + k) = y;
      }
    }
    for (; i < r; ++i) {
      y = X(i) - (i > s ? ep[i - 1] * recip(P(i - 1)) * y : 0.0);
      X(i) = y;
    }
    const double ya = r > s ? ep[r - 1] * recip(P(r - 1)) * y : 0.0;
    y = 0.0;
    i = t;
    for (; i - 3 > r; i -= 4) {
      for (int k = 0; k < 4; ++k) b[k] = X(i - k);
      for (int k = 0; k < 4; ++k) {
        y = b[k] - (i - k < t ? ep[i - k] * recip(P(i - k + 1)) * y : 0.0);
        X(i - k) = y;
      }
    }
    for (; i > r; --i) {
      y = X(i) - (i < t ? ep[i] * recip(P(i + 1)) * y : 0.0);
      X(i) = y;
    }
    const double yb = r < t ? ep[r] * recip(P(r + 1)) * y : 0.0;
    const double xr = (X(r) - ya - yb) / gr;
    X(r) = xr;
    double xmax = fabs(xr), xv = xr;
    i = r - 1;
    for (; i - 3 >= s; i -= 4) {
      for (int k = 0; k < 4; ++k) b[k] = X(i - k);
      for (int k = 0; k < 4; ++k) {
        xv = (b[k] - ep[i - k] * xv) * recip(P(i - k));
        X(i - k) = xv;
        xmax = fmax(xmax, fabs(xv));
      }
    }
    for (; i >= s; --i) {
      xv = (X(i) - ep[i] * xv) * recip(P(i));
      X(i) = xv;
      xmax = fmax(xmax, fabs(xv));
    }
    xv = xr;
    i = r + 1;
    for (; i + 3 <= t; i += 4) {
      for (int k = 0; k < 4; ++k) b[k] = X(i + k);
      for (int k = 0; k < 4; ++k) {
        xv = (b[k] - ep[i + k - 1] * xv) * recip(P(i + k));
        X(i + k) = xv;
        xmax = fmax(xmax, fabs(xv));
      }
    }
    for (; i <= t; ++i) {
      xv = (X(i) - ep[i - 1] * xv) * recip(P(i));
      X(i) = xv;
      xmax = fmax(xmax, fabs(xv));
    }
    const double inv = 1.0 / xmax;
    for (int i = s; i <= t; ++i) X(i) *= inv;
  }
  for (int p = 0; p < nprev; ++p) {
    const double* prev = base + rank[j - 1 - p];
    double dot = 0.0;
    for (int i = s; i <= t; ++i) dot += X(i) * prev[(long long)i * ldx];
    for (int i = s; i <= t; ++i) X(i) -= dot * prev[(long long)i * ldx];
  }
  double x2 = 0.0;
  for (int i = s; i <= t; ++i) x2 += X(i) * X(i);
  const double inv = 1.0 / sqrt(x2);
  for (int i = 0; i < n; ++i) X(i) = i >= s && i <= t ? X(i) * inv : 0.0;
}

// Where cluster member j keeps its vector during the cluster rounds of
// syevBisectSharedKernel: a column of the shared scratch that a thread of no cluster
// (member[k] = -1) has finished with after the first round, the c-th such column for
// the c-th cluster thread in index order, so that its solves and Gram-Schmidt run in
// shared memory; -1 (x in the workspace, as before) for every thread of the matrix
// when its cluster threads outnumber the others. member: clusterMember's of all n.
SPEX_BI_HD int borrowedColumn(int n, const int* member, int j) {
  int clustered = 0, before = 0;
  for (int k = 0; k < n; ++k) {
    clustered += member[k] >= 0;
    before += k < j && member[k] >= 0;
  }
  if (2 * clustered > n || member[j] < 0) return -1;
  for (int k = 0; k < n; ++k)
    if (member[k] < 0 && before-- == 0) return k;
  return -1;
}

// Cluster bookkeeping for eigenvalue j of block [s, t] (lam ascending within a block):
// its index m among the chain of neighbours closer than tight (0: the chain's first,
// -1: no close neighbour at all) and its shift, pushed at least pert past the shift of
// the member before (dstein), so that no two members iterate with the same shift.
SPEX_BI_HD int clusterMember(const double* lam, int s, int t, int j, const Scalars& sc, double& shift) {
  const bool below = j > s && lam[j] - lam[j - 1] <= sc.tight;
  const bool above = j < t && lam[j + 1] - lam[j] <= sc.tight;
  shift = lam[j];
  if (!below) return above ? 0 : -1;
  int c = j, last = j;
  while (c > s && lam[c] - lam[c - 1] <= sc.tight) --c;
  while (last < t && lam[last + 1] - lam[last] <= sc.tight) ++last;
  const double pert = 10.0 * kEpsB * sc.tnorm;
  double sh = lam[c];
  for (int i = c + 1; i <= j; ++i) sh = fmax(lam[i], sh + pert);
  // Never past the cluster's last eigenvalue: a long chain of pushed shifts would
  // otherwise drift towards the next eigenvalue outside it.
  shift = fmin(sh, lam[last]);
  return j - c;
}

// Rank of eigenvalue j among lam[0..n) (ascending, ties by index).
SPEX_BI_HD int rankOf(int n, const double* lam, int j) {
  const double l = lam[j];
  int k = 0;
  for (int i = 0; i < n; ++i) k += (lam[i] < l) || (lam[i] == l && i < j);
  return k;
}

// Pass 3: CholQR on X (n x n, column-major, leading dimension ldx), all in shared
// memory, 256 threads. gramTile: G = X^T X, thread (tr, tc) of a 16 x 16 grid forming
// G(tr + 16 k, tc + 16 l), k, l < 5 (n <= 80), row-major in G (leading dimension ldg).
constexpr int kOrthoThreads = 256;
constexpr int kOrthoMaxN = 80;

// Returns this thread's max |G - I| (whether a second CholQR pass is needed).
SPEX_BI_HD double gramTile(int n, const double* X, int ldx, double* G, int ldg, int tid) {
  const int lane = tid & 31, tc = lane & 15, tr = ((tid >> 5) << 1) | (lane >> 4);
  double g[5][5];
  for (int k = 0; k < 5; ++k)
    for (int l = 0; l < 5; ++l) g[k][l] = 0.0;
  for (int r = 0; r < n; ++r) {
    double a[5], b[5];
    for (int k = 0; k < 5; ++k) {
      const int c = tr + 16 * k;
      a[k] = c < n ? X[c * ldx + r] : 0.0;
    }
    for (int l = 0; l < 5; ++l) {
      const int c = tc + 16 * l;
      b[l] = c < n ? X[c * ldx + r] : 0.0;
    }
    for (int k = 0; k < 5; ++k)
      for (int l = 0; l < 5; ++l) g[k][l] = fma(a[k], b[l], g[k][l]);
  }
  double off = 0.0;
  for (int k = 0; k < 5; ++k)
    for (int l = 0; l < 5; ++l) {
      const int i = tr + 16 * k, c = tc + 16 * l;
      if (i < n && c < n) {
        G[i * ldg + c] = g[k][l];
        off = fmax(off, fabs(g[k][l] - (i == c ? 1.0 : 0.0)));
      }
    }
  return off;
}
// A second CholQR pass runs where the unit vectors' Gram matrix departs from I by more
// than this (CholQR loses ~eps cond(X)^2 of orthogonality; below it cond(X) < 1.01).
constexpr double kSecondPass = 1e-4;

// One step j of CholQR after the Gram matrix (256 threads as a 16 x 16 grid (tr, tc),
// a barrier between steps): with row j of G as steps 0 .. j - 1 left it (u, pivot
// p = u(j)), the Cholesky update of the trailing upper triangle G(i, l) -= u(i) u(l) / p
// (i > j, l >= i; i = tr, l = tc mod 16) and X(:, l) -= X(:, j) u(l) / p for l > j
// (l = tr, rows tc mod 16): X <- X R^-1 but for the column scaling (cholScale). No
// division or modulo in the index arithmetic, one barrier a step. A pivot <= 1e-20
// (the vectors are unit: X rank-deficient) is reported in *fail (j + 1) and skipped.
SPEX_BI_HD void cholQrStep(int n, double* G, int ldg, double* X, int ldx, int j, int tid, int* fail) {
  const int lane = tid & 31, tc = lane & 15, tr = ((tid >> 5) << 1) | (lane >> 4);
  const double p = G[j * ldg + j];
  const bool bad = !(p > 1e-20);
  if (bad) {
    if (tid == 0 && *fail == 0) *fail = j + 1;
    return;
  }
  const double pi = 1.0 / p;
  const double* u = G + j * ldg;
  for (int i = j + 1 + ((tr - j - 1) & 15); i < n; i += 16) {
    const double gi = u[i] * pi;
    double* gr = G + i * ldg;
    for (int l = i + ((tc - i) & 15); l < n; l += 16) gr[l] -= gi * u[l];
  }
  const double* xj = X + j * ldx;
  for (int l = j + 1 + ((tr - j - 1) & 15); l < n; l += 16) {
    const double f = u[l] * pi;
    double* xl = X + l * ldx;
    for (int r = tc; r < n; r += 16) xl[r] -= xj[r] * f;
  }
}
// X(:, j) /= sqrt(p_j) (the pivots on G's diagonal, final after their steps).
SPEX_BI_HD void cholScale(int n, const double* G, int ldg, double* X, int ldx, int tid, int nt) {
  for (int c = tid >> 4; c < n; c += nt >> 4) {
    const double p = G[c * ldg + c];
    const double s = p > 1e-20 ? 1.0 / sqrt(p) : 1.0;
    for (int r = tid & 15; r < n; r += 16) X[c * ldx + r] *= s;
  }
}

// Pass 3 by Newton-Schulz (SyevOrtho::NewtonSchulz; syevOrthoNsKernel, docs/benchmarks.md,
// "Issue 12, ninth round (eighns)"). 160 threads a matrix: thread t is lane q = t & 3 of
// group g = t >> 2 (< 40), holding rows R = g and g + 40 and columns c = q + 4 j (j < 20)
// of an 80 x 80 tile. X (the unit vectors of T) sits in shared memory with leading
// dimension kNsLdx = 81 (odd: a group's 8 rows and a lane's 4 columns fall in distinct
// banks), 80 columns, its rows and columns n .. 79 zero, so no index is ever clamped.
// With G = X^T X = I + E: while max |E| > kNsTol, X <- X (I - E / 2) (one Newton-Schulz
// step: G' = I - 3/4 E^2 + 1/4 E^3), or a CholQR pass where max |E| > kNsMax (there
// |E|_2 <= n max |E| may be near 1, where the iteration converges slowly or not at all)
// or the steps did not get below kNsTol; then the last step straight into registers,
// Z^T = (X (I - E / 2))^T, and the reflectors applied to those rows (Z^T = X^T
// H_{n-3} ... H_0) with 4 lanes a row (two shuffles a reflector and row instead of
// syevFormQKernel's four across 16 lanes). Accuracy: the step mixes x_b into x_a by
// -E_ab / 2, symmetric in a and b, so the bound of pass 3's comment above holds as for
// CholQR (the residual grows by |E_ab| |lambda_a - lambda_b| / 2 <= (|r_a| + |r_b|) / 2);
// it is the Lowdin (closest orthonormal) direction rather than CholQR's ordered one.
// E is formed as G - I (exact), so the correction X E / 2 is rounded relative to itself:
// one rounding of X + X E / 2 per entry.
constexpr int kNsThreads = 160;
constexpr int kNsCols = 20;  // columns a lane at most (NC: 19 where n <= 76, so 74 wastes less)
constexpr int kNsGroups = 40;
constexpr int kNsLdx = 81;   // X and G in shared memory: 80 x 81 each
constexpr int kNsLdv = 80;   // the reflectors (in X's place after the last step)
// max |G - I| below which one more step gives orthogonality to rounding: the step leaves
// (3/4) E^2, entries <= (3/4) n max|E|^2 = 5.6e-17 at n = 74.
constexpr double kNsTol = 1e-9;
// Above this a CholQR pass first: n max |E| <= 0.8 < 1 keeps the iteration contracting.
constexpr double kNsMax = 1e-2;
// Newton-Schulz steps before a CholQR pass is taken anyway, and passes at most.
constexpr int kNsCholAfter = 3;
constexpr int kNsMaxPasses = 6;

// NC columns a lane (4 NC >= n; 19 or 20). G = X^T X (rows g, g + 40, columns q + 4 j
// (all 4 NC of them: zero outside n), row-major
// with leading dimension kNsLdx. Returns this thread's max |G - I| within n x n. G(R, c)
// and G(c, R) are the same products in the same order: G is symmetric to the bit.
template <int NC>
SPEX_BI_HD double nsGram(int n, const double* Xs, double* G, int g, int q) {
  double acc[2][NC];
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < NC; ++j) acc[r][j] = 0.0;
  const double* x0 = Xs + g * kNsLdx;
  const double* x1 = Xs + (g + kNsGroups) * kNsLdx;
  const double* xc = Xs + q * kNsLdx;
  for (int r = 0; r < n; ++r) {
    const double a0 = x0[r], a1 = x1[r];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < NC; ++j) {
      const double b = xc[4 * j * kNsLdx + r];
      acc[0][j] = fma(a0, b, acc[0][j]);
      acc[1][j] = fma(a1, b, acc[1][j]);
    }
  }
  double off = 0.0;
  for (int r = 0; r < 2; ++r) {
    const int R = g + kNsGroups * r;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < NC; ++j) {
      const int c = q + 4 * j;
      G[R * kNsLdx + c] = acc[r][j];
      if (R < n && c < n) off = fmax(off, fabs(acc[r][j] - (R == c ? 1.0 : 0.0)));
    }
  }
  return off;
}

// One Newton-Schulz step into registers: z[r][j] = (X (I - E / 2))(c, R), R = g + 40 r,
// c = q + 4 j: row R of the new X^T (zero where R or c >= n).
template <int NC>
SPEX_BI_HD void nsProduct(int n, const double* Xs, const double* G, int g, int q, double (&z)[2][NC]) {
  double acc[2][NC];
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < NC; ++j) acc[r][j] = 0.0;
  // Rows R >= n are discarded: R1 clamped so that only G's written columns are read.
  const int R0 = g < n ? g : n - 1, R1 = g + kNsGroups < n ? g + kNsGroups : n - 1;
  for (int m = 0; m < n; ++m) {
    const double e0 = G[m * kNsLdx + R0] - (m == R0 ? 1.0 : 0.0);
    const double e1 = G[m * kNsLdx + R1] - (m == R1 ? 1.0 : 0.0);
    const double* xm = Xs + m * kNsLdx + q;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < NC; ++j) {
      const double x = xm[4 * j];
      acc[0][j] = fma(x, e0, acc[0][j]);
      acc[1][j] = fma(x, e1, acc[1][j]);
    }
  }
  for (int r = 0; r < 2; ++r) {
    const double* xr = Xs + (g + kNsGroups * r) * kNsLdx + q;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < NC; ++j) z[r][j] = fma(-0.5, acc[r][j], xr[4 * j]);
  }
}

// The step's result back into X (after a barrier: every thread's nsProduct has read X).
template <int NC>
SPEX_BI_HD void nsStore(int n, double* Xs, int g, int q, const double (&z)[2][NC]) {
  for (int r = 0; r < 2; ++r) {
    const int R = g + kNsGroups * r;
    if (R >= n) continue;
    for (int j = 0; j < NC; ++j) {
      const int c = q + 4 * j;
      if (c < n) Xs[R * kNsLdx + c] = z[r][j];
    }
  }
}

// cholQrStep for any thread count nt (the Newton-Schulz kernel's rare CholQR pass, on
// its layout: G row-major and X column-major, leading dimension kNsLdx): the same
// updates, a flat index over the trailing triangle and over X's trailing columns.
SPEX_BI_HD void cholQrStepAny(int n, double* G, double* X, int j, int tid, int nt, int* fail) {
  const double p = G[j * kNsLdx + j];
  if (!(p > 1e-20)) {
    if (tid == 0 && *fail == 0) *fail = j + 1;
    return;
  }
  const double pi = 1.0 / p;
  const double* u = G + j * kNsLdx;
  const int w = n - j - 1;
  for (int t = tid; t < w * w; t += nt) {
    const int a = t / w, b = t - a * w;
    if (b < a) continue;
    const int i = j + 1 + a, l = j + 1 + b;
    G[i * kNsLdx + l] -= (u[i] * pi) * u[l];
  }
  const double* xj = X + j * kNsLdx;
  for (int t = tid; t < w * n; t += nt) {
    const int a = t / n, r = t - a * n;
    const int l = j + 1 + a;
    X[l * kNsLdx + r] -= xj[r] * (u[l] * pi);
  }
}

// The reflectors (pass 1's, as syevFormQKernel reads them) applied to the rows a lane
// group holds, last first: z <- z H_{n-3} ... H_0 with H_i = I - tau_i v_i v_i^T,
// v_i(c) = V[i kNsLdv + c] (1 at c = i + 1, 0 above it and from n on). L lanes of one
// group at once (the device: L = 1, lane q, the 4 partial dot products summed by sum,
// two shuffles; the host emulation: L = 4 from q = 0, sum adds them as the shuffles do).
// A reflector touches columns >= i + 1 only: phase J takes the reflectors i with
// (i + 1) / 4 = J and columns j >= J (unrolled on the device: half the FMAs).
template <int L, int NC, class Sum>
SPEX_BI_HD void nsApplyReflectors(int n, const double* V, const double* tau, int q, double (&z)[L][2][NC], Sum sum) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int J = NC - 1; J >= 0; --J) {
    const int iHi = n - 3 < 4 * J + 2 ? n - 3 : 4 * J + 2;
    const int iLo = 4 * J - 1 > 0 ? 4 * J - 1 : 0;
    for (int i = iHi; i >= iLo; --i) {
      const double* v = V + i * kNsLdv + q;
      double p[L][2];
      for (int x = 0; x < L; ++x) {
        double a0 = 0.0, a1 = 0.0, b0 = 0.0, b1 = 0.0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int j = J; j < NC; ++j) {
          const double vj = v[x + 4 * j];
          if ((j - J) & 1) {
            b0 = fma(z[x][0][j], vj, b0);
            b1 = fma(z[x][1][j], vj, b1);
          } else {
            a0 = fma(z[x][0][j], vj, a0);
            a1 = fma(z[x][1][j], vj, a1);
          }
        }
        p[x][0] = a0 + b0;
        p[x][1] = a1 + b1;
      }
      sum(p);
      const double t = tau[i];
      for (int x = 0; x < L; ++x) {
        const double s0 = t * p[x][0], s1 = t * p[x][1];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int j = J; j < NC; ++j) {
          const double vj = v[x + 4 * j];
          z[x][0][j] = fma(-s0, vj, z[x][0][j]);
          z[x][1][j] = fma(-s1, vj, z[x][1][j]);
        }
      }
    }
  }
}

} // namespace spex::gpu::bisect
