#include "sym_eigen.h"

#include "../clones.h"
#include "lapack.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

// See the 4-wide helpers above tridiagQL4.
#pragma GCC diagnostic ignored "-Wpsabi"

extern "C" void dstedc_(const char* compz, const int* n, double* d, double* e, double* z, const int* ldz,
                        double* work, const int* lwork, int* iwork, const int* liwork, int* info, std::size_t);



namespace spex {

namespace detail {

// Householder reflector H = I - tau v v^T with H x = (beta, 0, ..., 0) for x = x[0..m)
// (LAPACK's dlarfg): v[0] = 1 and v[1..m) overwrite x[1..m); returns tau, x[0] = beta.
// tau = 0 (H = I) when x[1..m) is zero.
double householder(int m, double* x) {
  if (m <= 1) return 0.0;
  double ss = 0;
  for (int r = 1; r < m; ++r) ss += x[r] * x[r];
  if (ss == 0.0) return 0.0;
  const double alpha = x[0];
  const double beta = -std::copysign(std::hypot(alpha, std::sqrt(ss)), alpha);
  const double tau = (beta - alpha) / beta;
  const double scale = 1.0 / (alpha - beta);
  for (int r = 1; r < m; ++r) x[r] *= scale;
  x[0] = beta;
  return tau;
}

// 4 doubles as one value (two SSE2 or one AVX2 register), any alignment.
typedef double Lanes4 __attribute__((vector_size(32), aligned(8), may_alias));


// sum of x[i] y[i], i < len, in four lanes and a scalar tail, added in a fixed order
// (the same order in both clones of the caller; the x86-64-v3 one fuses the multiply-adds,
// core/clones.h).
inline __attribute__((always_inline)) double dot4(int len, const double* x, const double* y) {
  Lanes4 acc = {0, 0, 0, 0};
  int i = 0;
  for (; i + 4 <= len; i += 4)
    acc += *reinterpret_cast<const Lanes4*>(x + i) * *reinterpret_cast<const Lanes4*>(y + i);
  double t = 0;
  for (; i < len; ++i) t += x[i] * y[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + t;
}

// p[lo..n) = A[lo..n, lo..n) v from the lower triangle of A (column-major, ld n): column
// c adds A[c.., c] v[c] to p[c..] (an axpy) and its strictly lower part's dot with v to p[c].
SPEX_CLONES void symv(int n, int lo, const double* __restrict a, const double* __restrict v,
                      double* __restrict p) {
  std::fill(p + lo, p + n, 0.0);
  for (int c = lo; c < n; ++c) {
    const double* col = a + std::size_t(c) * n;
    const double vc = v[c];
    for (int r = c; r < n; ++r) p[r] += col[r] * vc;
    p[c] += dot4(n - c - 1, col + c + 1, v + c + 1);
  }
}

// Columns c in [c0, c1) of the trailing block, rows [c, n) (the lower triangle):
// A -= v w^T + w v^T, and pn[c..n) += A_new[c.., c] vn[c] plus pn[c] += A_new[c+1.., c]
// . vn[c+1..] (the next step's matrix-vector product from the lower triangle) when vn is set.
SPEX_CLONES void rank2AndSymv(int n, int c0, int c1, double* __restrict a, const double* __restrict v,
                              const double* __restrict w, const double* __restrict vn,
                              double* __restrict pn) {
  for (int c = c0; c < c1; ++c) {
    double* col = a + std::size_t(c) * n;
    const double vc = v[c], wc = w[c];
    if (vn) {
      const double vnc = vn[c];
      const double x0 = col[c] - (v[c] * wc + w[c] * vc);
      col[c] = x0;
      pn[c] += x0 * vnc;
      // Rows below the diagonal in one pass: update, axpy into pn, and the dot with vn
      // in four lanes (scalar tail, lanes added in a fixed order, the same in both clones).
      const Lanes4 wcv = {wc, wc, wc, wc}, vcv = {vc, vc, vc, vc}, vncv = {vnc, vnc, vnc, vnc};
      Lanes4 acc = {0, 0, 0, 0};
      int r = c + 1;
      for (; r + 4 <= n; r += 4) {
        Lanes4& cr = *reinterpret_cast<Lanes4*>(col + r);
        const Lanes4 x = cr - (*reinterpret_cast<const Lanes4*>(v + r) * wcv +
                               *reinterpret_cast<const Lanes4*>(w + r) * vcv);
        cr = x;
        *reinterpret_cast<Lanes4*>(pn + r) += x * vncv;
        acc += x * *reinterpret_cast<const Lanes4*>(vn + r);
      }
      double t = 0;
      for (; r < n; ++r) {
        const double x = col[r] - (v[r] * wc + w[r] * vc);
        col[r] = x;
        pn[r] += x * vnc;
        t += x * vn[r];
      }
      pn[c] += ((acc[0] + acc[1]) + (acc[2] + acc[3])) + t;
    } else {
      for (int r = c; r < n; ++r) col[r] -= v[r] * wc + w[r] * vc;
    }
  }
}

// Rows r in (k, n) of Z (row-major, ld n): Z <- (I - tau v v^T) Z, via u = v^T Z.
// Four rows at a time, so u is loaded and stored once per four rows.
SPEX_CLONES void applyReflector(int n, int k, double tau, const double* __restrict v, double* __restrict zt,
                                double* __restrict u) {
  std::fill(u, u + n, 0.0);
  int r = k + 1;
  for (; r + 4 <= n; r += 4) {
    const double *z0 = zt + std::size_t(r) * n, *z1 = z0 + n, *z2 = z1 + n, *z3 = z2 + n;
    const double v0 = v[r], v1 = v[r + 1], v2 = v[r + 2], v3 = v[r + 3];
    for (int c = 0; c < n; ++c) u[c] += (v0 * z0[c] + v1 * z1[c]) + (v2 * z2[c] + v3 * z3[c]);
  }
  for (; r < n; ++r) {
    const double* zr = zt + std::size_t(r) * n;
    const double vr = v[r];
    for (int c = 0; c < n; ++c) u[c] += vr * zr[c];
  }
  r = k + 1;
  for (; r + 4 <= n; r += 4) {
    double *z0 = zt + std::size_t(r) * n, *z1 = z0 + n, *z2 = z1 + n, *z3 = z2 + n;
    const double s0 = tau * v[r], s1 = tau * v[r + 1], s2 = tau * v[r + 2], s3 = tau * v[r + 3];
    for (int c = 0; c < n; ++c) {
      const double uc = u[c];
      z0[c] -= s0 * uc;
      z1[c] -= s1 * uc;
      z2[c] -= s2 * uc;
      z3[c] -= s3 * uc;
    }
  }
  for (; r < n; ++r) {
    double* zr = zt + std::size_t(r) * n;
    const double sr = tau * v[r];
    for (int c = 0; c < n; ++c) zr[c] -= sr * u[c];
  }
}

// Rows r >= k of Z (row-major, ld n): Z <- H0 H1 Z with H1 = I - tau1 v1 v1^T (rows
// k+1.., reflector k) and H0 = I - tau0 v0 v0^T (rows k.., reflector k - 1), both in one
// pair of passes: a = v1^T Z and b = v0^T Z in one read of Z, u0 = b - tau1 (v0 . v1) a
// (= v0^T H1 Z), then Z -= tau1 v1 a^T + tau0 v0 u0^T in one read and write. u: 2 n.
SPEX_CLONES void applyTwoReflectors(int n, int k, double tau1, const double* __restrict v1, double tau0,
                                    const double* __restrict v0, double* __restrict zt,
                                    double* __restrict u) {
  double* a = u;
  double* b = u + n;
  {
    const double* zk = zt + std::size_t(k) * n;
    const double w0 = v0[k];
    for (int c = 0; c < n; ++c) {
      a[c] = 0.0;
      b[c] = w0 * zk[c];
    }
  }
  double v01 = 0;
  int r = k + 1;
  for (; r + 4 <= n; r += 4) {
    const double *z0 = zt + std::size_t(r) * n, *z1 = z0 + n, *z2 = z1 + n, *z3 = z2 + n;
    const double p0 = v1[r], p1 = v1[r + 1], p2 = v1[r + 2], p3 = v1[r + 3];
    const double q0 = v0[r], q1 = v0[r + 1], q2 = v0[r + 2], q3 = v0[r + 3];
    v01 += (q0 * p0 + q1 * p1) + (q2 * p2 + q3 * p3);
    for (int c = 0; c < n; ++c) {
      a[c] += (p0 * z0[c] + p1 * z1[c]) + (p2 * z2[c] + p3 * z3[c]);
      b[c] += (q0 * z0[c] + q1 * z1[c]) + (q2 * z2[c] + q3 * z3[c]);
    }
  }
  for (; r + 2 <= n; r += 2) {
    const double *z0 = zt + std::size_t(r) * n, *z1 = z0 + n;
    const double p0 = v1[r], p1 = v1[r + 1], q0 = v0[r], q1 = v0[r + 1];
    v01 += q0 * p0 + q1 * p1;
    for (int c = 0; c < n; ++c) {
      a[c] += p0 * z0[c] + p1 * z1[c];
      b[c] += q0 * z0[c] + q1 * z1[c];
    }
  }
  for (; r < n; ++r) {
    const double* zr = zt + std::size_t(r) * n;
    const double p0 = v1[r], q0 = v0[r];
    v01 += q0 * p0;
    for (int c = 0; c < n; ++c) {
      a[c] += p0 * zr[c];
      b[c] += q0 * zr[c];
    }
  }
  const double g = tau1 * v01;
  for (int c = 0; c < n; ++c) b[c] = tau0 * (b[c] - g * a[c]); // tau0 u0
  {
    double* zk = zt + std::size_t(k) * n;
    const double w0 = v0[k];
    for (int c = 0; c < n; ++c) zk[c] -= w0 * b[c];
  }
  for (r = k + 1; r + 4 <= n; r += 4) {
    double *z0 = zt + std::size_t(r) * n, *z1 = z0 + n, *z2 = z1 + n, *z3 = z2 + n;
    const double s0 = tau1 * v1[r], s1 = tau1 * v1[r + 1], s2 = tau1 * v1[r + 2], s3 = tau1 * v1[r + 3];
    const double q0 = v0[r], q1 = v0[r + 1], q2 = v0[r + 2], q3 = v0[r + 3];
    for (int c = 0; c < n; ++c) {
      const double ac = a[c], bc = b[c];
      z0[c] -= s0 * ac + q0 * bc;
      z1[c] -= s1 * ac + q1 * bc;
      z2[c] -= s2 * ac + q2 * bc;
      z3[c] -= s3 * ac + q3 * bc;
    }
  }
  for (; r + 2 <= n; r += 2) {
    double *z0 = zt + std::size_t(r) * n, *z1 = z0 + n;
    const double s0 = tau1 * v1[r], s1 = tau1 * v1[r + 1], q0 = v0[r], q1 = v0[r + 1];
    for (int c = 0; c < n; ++c) {
      const double ac = a[c], bc = b[c];
      z0[c] -= s0 * ac + q0 * bc;
      z1[c] -= s1 * ac + q1 * bc;
    }
  }
  for (; r < n; ++r) {
    double* zr = zt + std::size_t(r) * n;
    const double s0 = tau1 * v1[r], q0 = v0[r];
    for (int c = 0; c < n; ++c) zr[c] -= s0 * a[c] + q0 * b[c];
  }
}


// ---- Four tridiagonal eigenproblems of one size at once, one per lane ----------------

typedef long long Mask4 __attribute__((vector_size(32)));

// No helper here takes or returns a 4-wide vector by value: clang rejects such a call
// in the plain x86-64 build (the AVX-versus-SSE calling convention, an error there even
// where the helper is inlined; GCC only warns, -Wpsabi, silenced at the top of this
// file). Vectors go by reference.

static inline __attribute__((always_inline)) bool any4(const Mask4& m) { return (m[0] | m[1] | m[2] | m[3]) != 0; }
// Square root in lanes, in place, by SSE2's sqrtpd (baseline x86-64, so both clones have
// it; the per-element std::sqrt would keep errno's branch per lane).
static inline __attribute__((always_inline)) void sqrt4(Lanes4& x) {
#if defined(__x86_64__) && defined(__GNUC__)
  typedef double Half __attribute__((vector_size(16)));
  const Half lo = __builtin_ia32_sqrtpd(Half{x[0], x[1]}), hi = __builtin_ia32_sqrtpd(Half{x[2], x[3]});
  x = Lanes4{lo[0], lo[1], hi[0], hi[1]};
#else
  x = Lanes4{std::sqrt(x[0]), std::sqrt(x[1]), std::sqrt(x[2]), std::sqrt(x[3])};
#endif
}

// One sweep's rotations (c_i, s_i for i = M-1 down to l: columns i and i + 1) on every
// row of the four Z's, row-major (Z[N k + i]). Along a row the rotations form a chain
// (column i + 1 is final after step i, column i goes on to step i - 1), so four rows go
// together: four independent chains, one load and one store per row and step (applying
// each rotation to whole columns in turn loads and stores both columns).
static inline __attribute__((always_inline)) void rotateRows(int n, int l, int M, const Lanes4* C, const Lanes4* S,
                                                             Lanes4* Z) {
  const std::size_t N = std::size_t(n);
  int k = 0;
  for (; k + 4 <= n; k += 4) {
    Lanes4 *z0 = Z + N * k, *z1 = z0 + N, *z2 = z1 + N, *z3 = z2 + N;
    Lanes4 y0 = z0[M], y1 = z1[M], y2 = z2[M], y3 = z3[M];
    for (int i = M - 1; i >= l; --i) {
      const Lanes4 c = C[i], s = S[i];
      const Lanes4 x0 = z0[i], x1 = z1[i], x2 = z2[i], x3 = z3[i];
      z0[i + 1] = s * x0 + c * y0;
      z1[i + 1] = s * x1 + c * y1;
      z2[i + 1] = s * x2 + c * y2;
      z3[i + 1] = s * x3 + c * y3;
      y0 = c * x0 - s * y0;
      y1 = c * x1 - s * y1;
      y2 = c * x2 - s * y2;
      y3 = c * x3 - s * y3;
    }
    z0[l] = y0;
    z1[l] = y1;
    z2[l] = y2;
    z3[l] = y3;
  }
  for (; k < n; ++k) {
    Lanes4* z0 = Z + N * k;
    Lanes4 y0 = z0[M];
    for (int i = M - 1; i >= l; --i) {
      const Lanes4 x0 = z0[i];
      z0[i + 1] = S[i] * x0 + C[i] * y0;
      y0 = C[i] * x0 - S[i] * y0;
    }
    z0[l] = y0;
  }
}

// The lanes' bookkeeping between sweeps of tridiagQL4 and tridiagPWK4. Split point per
// lane: the first m >= l with e[m] negligible (dsteqr's test on the squares,
// e^2 <= eps^2 |d_m| |d_m+1| + safmin; kSquared: ee holds e, else e^2 as in PWK), n - 1
// where none is; a lane whose m is its l has converged there and moves on. A lane past
// 30 sweeps for one eigenvalue gives up (its e from l on set to 0, bit j of failed: it is
// solved again). [L, M]: the union of the unfinished lanes' ranges; L = n when every lane
// has all its eigenvalues. Inlined into each caller (and its clones), so its arithmetic
// is compiled as it was written there.
template <bool kSquared>
static inline __attribute__((always_inline)) void laneRanges(int n, const double* __restrict dd,
                                                             double* __restrict ee, int (&lj)[4], int (&iter)[4],
                                                             int (&ml)[4], unsigned& failed, int& L, int& M) {
  const double eps = std::numeric_limits<double>::epsilon() / 2; // dlamch('E')
  const double eps2 = eps * eps, safmin = std::numeric_limits<double>::min();
  for (int j = 0; j < 4; ++j) {
    for (;;) {
      int m = lj[j];
      for (; m + 1 < n; ++m) {
        const double em = ee[4 * m + j];
        if ((kSquared ? em * em : em) <= eps2 * std::abs(dd[4 * m + j]) * std::abs(dd[4 * (m + 1) + j]) + safmin)
          break;
      }
      ml[j] = std::min(m, n - 1);
      if (ml[j] != lj[j] || lj[j] >= n - 1) break;
      ++lj[j];
      iter[j] = 0;
    }
    if (ml[j] != lj[j] && ++iter[j] > 30) {
      failed |= 1u << j;
      for (int i = lj[j]; i < n; ++i) ee[4 * i + j] = 0.0;
      lj[j] = ml[j] = n - 1;
    }
  }
  L = n;
  M = 0;
  for (int j = 0; j < 4; ++j)
    if (ml[j] != lj[j]) {
      L = std::min(L, lj[j]);
      M = std::max(M, ml[j]);
    }
}

// Implicit QL with Wilkinson shifts (EISPACK's tql2; LAPACK's dsteqr in its QL
// direction, its convergence test) on four tridiagonal matrices of order n at once,
// lane j holding matrix j: d[4 i + j] its diagonal, e[4 i + j] its subdiagonal (e[4 (n
// - 1) + j] = 0), z[4 (n k + i) + j] component k of its eigenvector i (Z = I on entry
// is set here); rot: 8 n doubles of scratch (one sweep's rotations). Each lane has its
// own position l, split point m, shift and rotations; a sweep covers the union of the
// lanes' ranges, and a lane rotates by the identity outside its own [l, m) or once it
// has all its eigenvalues (c = 1, s = 0: exact,
// its numbers do not move). The latency of every step (a square root and two divisions
// in a chain) is paid once for the four matrices; each sweep's rotations are applied to
// Z after it, row by row (rotateRows). Eigenvalues come unsorted. Returns the
// lanes (bit j) that needed more than 30 sweeps for one eigenvalue (their results are
// garbage; the caller solves them again by dstedc).
// zz null: the eigenvalues alone (no rotations applied; the same eigenvalues, bit for bit).
SPEX_CLONES unsigned tridiagQL4(int n, double* __restrict dd, double* __restrict ee, double* __restrict zz,
                                double* __restrict rot) {
  Lanes4* D = reinterpret_cast<Lanes4*>(dd);
  Lanes4* E = reinterpret_cast<Lanes4*>(ee);
  Lanes4* Z = reinterpret_cast<Lanes4*>(zz);
  const std::size_t N = std::size_t(n);
  // Z row-major: Z[N k + i] is row k of column (eigenvector) i.
  const Lanes4 one = {1.0, 1.0, 1.0, 1.0}, zero4 = {0.0, 0.0, 0.0, 0.0};
  if (Z) {
    for (std::size_t i = 0; i < N * N; ++i) Z[i] = zero4;
    for (std::size_t i = 0; i < N; ++i) Z[i * N + i] = one;
  }
  Lanes4* C = reinterpret_cast<Lanes4*>(rot);
  Lanes4* S = C + N;
  // Each lane has its own position l (its eigenvalues 0..l-1 are found) and goes on to
  // l + 1 as soon as it has converged there, so no lane waits for the others' sweeps;
  // a sweep runs over the union of the lanes' ranges [l, m).
  int lj[4] = {0, 0, 0, 0}, iter[4] = {0, 0, 0, 0};
  unsigned failed = 0;
  for (;;) {
    // Split point per lane: the first m >= l with e[m] negligible (dsteqr's test,
    // |e|^2 <= eps^2 |d_m| |d_m+1| + safmin), n - 1 where none is; a lane whose m is its
    // l has converged there and moves on.
    int ml[4], L, M;
    laneRanges<true>(n, dd, ee, lj, iter, ml, failed, L, M);
    if (L == n) break; // every lane has all its eigenvalues
    const Lanes4 mlv = {double(ml[0]), double(ml[1]), double(ml[2]), double(ml[3])};
    const Lanes4 llv = {double(lj[0]), double(lj[1]), double(lj[2]), double(lj[3])};
    const Mask4 active = mlv != llv;
    // Wilkinson-type shift per lane (tql2's): from the leading 2 x 2 of its block.
    Lanes4 dl, dl1, dm, el;
    for (int j = 0; j < 4; ++j) {
      dl[j] = dd[4 * lj[j] + j];
      dl1[j] = dd[4 * std::min(lj[j] + 1, n - 1) + j];
      dm[j] = dd[4 * ml[j] + j];
      el[j] = active[j] ? ee[4 * lj[j] + j] : 1.0;
    }
    Lanes4 g = (dl1 - dl) / (2.0 * el);
    Lanes4 r = g * g + 1.0;
    sqrt4(r);
    g = dm - dl + el / (g + (g < 0 ? -r : r));
    Lanes4 s = one, c = one, p = zero4;
    Mask4 live = active;
    for (int i = M - 1; i >= L; --i) {
      const double di = double(i);
      const Lanes4 iv = {di, di, di, di};
      const Mask4 on = live & (iv < mlv) & (iv >= llv);
      const Lanes4 ei = E[i];
      const Lanes4 f = s * ei, b = c * ei;
      r = f * f + g * g;
      sqrt4(r);
      const Mask4 brk = on & (r == 0);
      const Mask4 go = on & ~brk;
      const Lanes4 rs = go ? r : one;
      const Lanes4 sn = f / rs, cn = g / rs;
      E[i + 1] = go ? r : E[i + 1];
      const Lanes4 g2 = D[i + 1] - p;
      const Lanes4 r2 = (D[i] - g2) * sn + 2.0 * cn * b;
      const Lanes4 pn = sn * r2;
      D[i + 1] = go ? g2 + pn : (brk ? D[i + 1] - p : D[i + 1]);
      const Lanes4 gn = cn * r2 - b;
      s = go ? sn : s;
      c = go ? cn : c;
      p = go ? pn : p;
      g = go ? gn : g;
      // The rotation of columns i and i + 1 of the four Z's (identity in the lanes not
      // rotating here), applied after the sweep.
      C[i] = go ? cn : one;
      S[i] = go ? sn : zero4;
      if (any4(brk)) { // underflow: the lane splits at m and looks for a new split
        for (int j = 0; j < 4; ++j)
          if (brk[j]) ee[4 * ml[j] + j] = 0.0;
        live &= ~brk;
      }
    }
    if (Z) rotateRows(n, L, M, C, S, Z);
    for (int j = 0; j < 4; ++j)
      if (live[j]) {
        dd[4 * lj[j] + j] -= p[j];
        ee[4 * lj[j] + j] = g[j];
        ee[4 * ml[j] + j] = 0.0;
      }
  }
  return failed;
}


// Eigenvalues alone of four tridiagonals, lane j holding matrix j (d[4 i + j], and
// e2[4 i + j] the squares of its subdiagonal, e2[4 (n - 1) + j] = 0), by the root-free
// QL of Pal, Walker and Kahan (LAPACK's dsterf in its QL direction; tql1's shifts): no
// square root and no rotation in a step, and one division on its chain (tridiagQL4's
// has a square root and a division). Lanes, splits, convergence test and the 30-sweep limit as tridiagQL4
// (dsteqr's test on the squares: e^2 <= eps^2 |d_m d_m+1| + safmin). Eigenvalues
// unsorted, each at a position inside its unreduced block. Returns the lanes (bit j)
// that needed more than 30 sweeps for one eigenvalue.
SPEX_CLONES unsigned tridiagPWK4(int n, double* __restrict dd, double* __restrict ee) {
  Lanes4* D = reinterpret_cast<Lanes4*>(dd);
  Lanes4* E = reinterpret_cast<Lanes4*>(ee);
  const Lanes4 one = {1.0, 1.0, 1.0, 1.0};
  int lj[4] = {0, 0, 0, 0}, iter[4] = {0, 0, 0, 0};
  unsigned failed = 0;
  for (;;) {
    int ml[4], L, M;
    laneRanges<false>(n, dd, ee, lj, iter, ml, failed, L, M);
    if (L == n) break;
    const Lanes4 mlv = {double(ml[0]), double(ml[1]), double(ml[2]), double(ml[3])};
    const Lanes4 llv = {double(lj[0]), double(lj[1]), double(lj[2]), double(lj[3])};
    const Mask4 active = mlv != llv;
    // dsterf's shift per lane, from the leading 2 x 2 of its block.
    Lanes4 dl, dl1, dm, e2l;
    for (int j = 0; j < 4; ++j) {
      dl[j] = dd[4 * lj[j] + j];
      dl1[j] = dd[4 * std::min(lj[j] + 1, n - 1) + j];
      dm[j] = dd[4 * ml[j] + j];
      e2l[j] = active[j] ? ee[4 * lj[j] + j] : 1.0;
    }
    Lanes4 rte = e2l;
    sqrt4(rte);
    Lanes4 sg = (dl1 - dl) / (2.0 * rte);
    Lanes4 r = sg * sg + 1.0;
    sqrt4(r);
    const Lanes4 sigma = dl - rte / (sg + (sg < 0 ? -r : r));
    Lanes4 gamma = dm - sigma, p = gamma * gamma, c = one, sn = {0.0, 0.0, 0.0, 0.0};
    for (int i = M - 1; i >= L; --i) {
      const double di = double(i);
      const Lanes4 iv = {di, di, di, di}, iv1 = {di + 1, di + 1, di + 1, di + 1};
      const Mask4 on = active & (iv < mlv) & (iv >= llv);
      // dsterf's step with its two divisions (c = p / r, s = bb / r, then gamma^2 / c) as
      // 1 / r and 1 / p, the latter off the chain (p is known at the step's start):
      // p_new = gamma^2 (r / p) (the same to rounding). p = 0 takes dsterf's p_new =
      // c_old bb (its c = 0).
      const Lanes4 bb = E[i];
      const Lanes4 rr = on ? p + bb : one;
      const Mask4 pz = p == 0;
      const Lanes4 rp = one / (pz ? one : p);
      const Mask4 wr = on & (iv1 < mlv); // e2(i + 1), not at i = m - 1
      E[i + 1] = wr ? sn * rr : E[i + 1];
      const Lanes4 q = one / rr;
      const Lanes4 alpha = D[i];
      const Lanes4 cn = p * q, snn = bb * q;
      const Lanes4 gn = cn * (alpha - sigma) - snn * gamma;
      D[i + 1] = on ? gamma + (alpha - gn) : D[i + 1];
      Lanes4 pn = pz ? c * bb : (gn * gn) * (rr * rp);
      // Where c = p / r is below 1e-290 (r / p may overflow; p tiny in the scaled lanes),
      // dsterf's own formula, per lane (rare: a branch, no division on the chain).
      const Mask4 slow = on & ~pz & ~(p > rr * 1e-290);
      if (any4(slow)) {
        const Mask4 cz = cn == 0;
        const Lanes4 cs = cz ? one : cn;
        const Lanes4 ps = cz ? c * bb : (gn * gn) / cs;
        pn = slow ? ps : pn;
      }
      c = on ? cn : c;
      sn = on ? snn : sn;
      gamma = on ? gn : gamma;
      p = on ? pn : p;
    }
    for (int j = 0; j < 4; ++j)
      if (active[j]) {
        ee[4 * lj[j] + j] = sn[j] * p[j];
        dd[4 * lj[j] + j] = sigma[j] + gamma[j];
      }
  }
  return failed;
}

// Eigenvectors of four tridiagonals (lane j: d[4 k + j], e[4 k + j], e = 0 where T splits
// and at k = n - 1) for the eigenvalues lam[4 i + j], eigenvalue i of lane j belonging to
// the unreduced block [bs[4 i + j], bt[4 i + j]] (row indices as doubles) of that lane:
// column i of Z (Z[4 (N k + i) + j], row-major per lane, as tridiagQL4 leaves it) gets the
// twisted vector of T - lambda (Fernando; Parlett-Dhillon; gpu/eigh_bisect.cuh's
// twistedVector per thread): D+ from the top (P), D- from the bottom, the twist r at the
// least |gamma(r)| within the block, z(r) = 1, z(k) = -e(k) / D+(k) z(k + 1) above r,
// z(k + 1) = -e(k) / D-(k + 1) z(k) below: (T - lambda) z = gamma(r) e_r, one step of
// inverse iteration from the best start. Rows outside the block come out 0 (e = 0 at
// its ends). A pivot |q| <= pivmin[j] is taken as -pivmin (dstebz's guard). K columns go
// together, so the chains of divisions (one a row) overlap. Unit 2-norm. scratch: 3 K n
// 4-wide vectors plus K n. Returns the lanes (bit j) with a vector not finite.
SPEX_CLONES unsigned twistedVectors4(int n, const double* __restrict dd, const double* __restrict ee,
                                     const double* __restrict lam, const double* __restrict bs,
                                     const double* __restrict bt, const double* __restrict pivmin,
                                     double* __restrict zz, double* __restrict scratch) {
  constexpr int K = 4;
  const std::size_t N = std::size_t(n);
  const Lanes4* D = reinterpret_cast<const Lanes4*>(dd);
  const Lanes4* E = reinterpret_cast<const Lanes4*>(ee);
  const Lanes4* LAM = reinterpret_cast<const Lanes4*>(lam);
  const Lanes4* BS = reinterpret_cast<const Lanes4*>(bs);
  const Lanes4* BT = reinterpret_cast<const Lanes4*>(bt);
  Lanes4* Z = reinterpret_cast<Lanes4*>(zz);
  Lanes4* P = reinterpret_cast<Lanes4*>(scratch); // P[K k + u]: D+(k) of column u
  Lanes4* RP = P + K * N;                         // 1 / D+
  Lanes4* RM = RP + K * N;                        // 1 / D-
  Lanes4* X = RM + K * N;                         // the vectors before scaling
  const Lanes4 one = {1.0, 1.0, 1.0, 1.0}, zero = {0.0, 0.0, 0.0, 0.0};
  const Lanes4 pm = {pivmin[0], pivmin[1], pivmin[2], pivmin[3]}, npm = -pm;
  const double inf = std::numeric_limits<double>::infinity();
  unsigned bad = 0;
  for (int i0 = 0; i0 < n; i0 += K) {
    const int kc = std::min(K, n - i0); // columns of this group (the rest repeat column i0)
    Lanes4 l[K], s[K], t[K], rp[K], rm[K], best[K], r[K], zu[K], nrm[K];
    for (int u = 0; u < K; ++u) {
      const int iu = i0 + (u < kc ? u : 0);
      l[u] = LAM[iu];
      s[u] = BS[iu];
      t[u] = BT[iu];
      rp[u] = zero;
      rm[u] = zero;
      best[u] = Lanes4{inf, inf, inf, inf};
      r[u] = t[u];
      zu[u] = zero;
      nrm[u] = zero;
    }
    // D+ from the top.
    for (int k = 0; k < n; ++k) {
      const Lanes4 dk = D[k];
      const Lanes4 e2 = k > 0 ? E[k - 1] * E[k - 1] : zero;
      for (int u = 0; u < K; ++u) {
        Lanes4 q = (dk - l[u]) - e2 * rp[u];
        q = ((q <= pm) & (q >= npm)) ? npm : q;
        P[K * k + u] = q;
        rp[u] = one / q;
        RP[K * k + u] = rp[u];
      }
    }
    // D- from the bottom; gamma(k) = D+(k) - e(k)^2 / D-(k + 1), the least |gamma| in the block.
    for (int k = n - 1; k >= 0; --k) {
      const Lanes4 dk = D[k], ek = E[k];
      const Lanes4 e2 = ek * ek;
      const double kd = double(k);
      const Lanes4 kv = {kd, kd, kd, kd};
      for (int u = 0; u < K; ++u) {
        const Lanes4 em = e2 * rm[u];
        const Lanes4 g = P[K * k + u] - em;
        const Lanes4 ag = g < 0 ? -g : g;
        const Mask4 better = (ag < best[u]) & (kv >= s[u]) & (kv <= t[u]);
        best[u] = better ? ag : best[u];
        r[u] = better ? kv : r[u];
        Lanes4 q = (dk - l[u]) - em;
        q = ((q <= pm) & (q >= npm)) ? npm : q;
        rm[u] = one / q;
        RM[K * k + u] = rm[u];
      }
    }
    // Above the twist (and the twist itself), from the bottom up: z(k) = -(e(k) / D+(k)) z(k + 1).
    for (int k = n - 1; k >= 0; --k) {
      const Lanes4 ek = E[k];
      const double kd = double(k);
      const Lanes4 kv = {kd, kd, kd, kd};
      for (int u = 0; u < K; ++u) {
        const Lanes4 a = -(ek * RP[K * k + u]) * zu[u];
        zu[u] = kv == r[u] ? one : (kv < r[u] ? a : zero);
        X[K * k + u] = zu[u];
      }
    }
    // Below the twist, from the top down: z(k) = -(e(k - 1) / D-(k)) z(k - 1); the norm.
    Lanes4 zd[K];
    for (int u = 0; u < K; ++u) zd[u] = zero;
    for (int k = 0; k < n; ++k) {
      const Lanes4 em1 = k > 0 ? E[k - 1] : zero;
      const double kd = double(k);
      const Lanes4 kv = {kd, kd, kd, kd};
      for (int u = 0; u < K; ++u) {
        const Lanes4 b = -(em1 * RM[K * k + u]) * zd[u];
        zd[u] = kv == r[u] ? one : (kv > r[u] ? b : zero);
        const Lanes4 x = kv > r[u] ? zd[u] : X[K * k + u];
        X[K * k + u] = x;
        nrm[u] += x * x;
      }
    }
    for (int u = 0; u < kc; ++u) {
      Lanes4 sc = nrm[u];
      sqrt4(sc);
      for (int j = 0; j < 4; ++j)
        if (!(sc[j] > 0) || !(sc[j] < inf)) bad |= 1u << j;
      sc = one / sc;
      Lanes4* col = Z + (i0 + u);
      for (int k = 0; k < n; ++k) col[N * k] = X[K * k + u] * sc;
    }
  }
  return bad;
}


// CholQR of the four lanes' Z (Z[N k + i] row k, column i, row-major per lane, as
// tridiagQL4 and twistedVectors4 leave it): G = Z^T Z = R^T R (upper Cholesky), Z <- Z
// R^-1; a second time in the lanes where the first G departs from I by more than 1e-4
// (CholQR loses ~eps cond(Z)^2 of orthogonality; below that cond(Z) < 1.01), as
// gpu/eigh_bisect.cuh's pass 3. Every step is lane-wise, so a lane's result does not
// depend on the others (a lane that needs no second pass keeps its first). g: 2 N^2 and
// zs: N^2 4-wide vectors of scratch. Returns the lanes (bit j) whose G is not positive
// definite or departs from I by 0.5 or more (vectors far from independent).
SPEX_CLONES unsigned cholQr4(int n, double* __restrict zz, double* __restrict gg, double* __restrict zs) {
  const std::size_t N = std::size_t(n);
  Lanes4* Z = reinterpret_cast<Lanes4*>(zz);
  Lanes4* G = reinterpret_cast<Lanes4*>(gg);
  Lanes4* Z0 = reinterpret_cast<Lanes4*>(zs);
  const Lanes4 one = {1.0, 1.0, 1.0, 1.0}, zero = {0.0, 0.0, 0.0, 0.0};
  unsigned bad = 0, again = 0;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      if (!again) break;
      for (std::size_t i = 0; i < N * N; ++i) Z0[i] = Z[i]; // the first pass's result
    }
    // G = Z^T Z, upper triangle (G[N a + b], b >= a), in 3 x 3 tiles (15 of the 16
    // registers; indices past n clamped to n - 1, those entries not stored).
    constexpr int TA = 3, TB = 3;
    for (int a0 = 0; a0 < n; a0 += TA) {
      int ia[TA];
      for (int u = 0; u < TA; ++u) ia[u] = std::min(a0 + u, n - 1);
      for (int b0 = a0; b0 < n; b0 += TB) {
        int ib[TB];
        for (int v = 0; v < TB; ++v) ib[v] = std::min(b0 + v, n - 1);
        Lanes4 acc[TA][TB];
        for (int u = 0; u < TA; ++u)
          for (int v = 0; v < TB; ++v) acc[u][v] = zero;
        for (int k = 0; k < n; ++k) {
          const Lanes4* zr = Z + N * k;
          Lanes4 za[TA], zb[TB];
          for (int u = 0; u < TA; ++u) za[u] = zr[ia[u]];
          for (int v = 0; v < TB; ++v) zb[v] = zr[ib[v]];
          for (int u = 0; u < TA; ++u)
            for (int v = 0; v < TB; ++v) acc[u][v] += za[u] * zb[v];
        }
        for (int u = 0; u < TA; ++u)
          for (int v = 0; v < TB; ++v)
            if (a0 + u < n && b0 + v < n && b0 + v >= a0 + u) G[N * (a0 + u) + b0 + v] = acc[u][v];
      }
    }
    Lanes4 off = zero;
    for (int a = 0; a < n; ++a)
      for (int b = a; b < n; ++b) {
        Lanes4 x = G[N * a + b] - (a == b ? one : zero);
        x = x < 0 ? -x : x;
        off = x > off ? x : off;
      }
    for (int j = 0; j < 4; ++j) {
      if (!(off[j] < 0.5)) bad |= 1u << j;
      if (pass == 0 && off[j] > 1e-4) again |= 1u << j;
    }
    // Upper Cholesky in place, by rows (row j of R in row j of G, 1 / R_jj on the
    // diagonal): row j of G less the rows above it, four at a time, each scaled by its
    // entry in column j (row j stays in L1, the rows above are streamed once). A lane
    // with a pivot <= 1e-20 (its unit vectors rank-deficient) is reported and gets pivot 1
    // so that its numbers stay finite. RT gets R transposed, for the solve.
    Lanes4* RT = G + N * N; // R^T, row b = column b of R, contiguous for the solve
    for (int j = 0; j < n; ++j) {
      Lanes4* gj = G + N * j;
      int i = 0;
      for (; i + 4 <= j; i += 4) {
        const Lanes4 *r0 = G + N * i, *r1 = r0 + N, *r2 = r1 + N, *r3 = r2 + N;
        const Lanes4 c0 = r0[j], c1 = r1[j], c2 = r2[j], c3 = r3[j];
        for (int b = j; b < n; ++b) gj[b] -= (c0 * r0[b] + c1 * r1[b]) + (c2 * r2[b] + c3 * r3[b]);
      }
      for (; i < j; ++i) {
        const Lanes4* r0 = G + N * i;
        const Lanes4 c0 = r0[j];
        for (int b = j; b < n; ++b) gj[b] -= c0 * r0[b];
      }
      Lanes4 p = gj[j];
      const Mask4 low = ~(p > 1e-20);
      for (int l = 0; l < 4; ++l)
        if (low[l]) bad |= 1u << l;
      p = low ? one : p;
      sqrt4(p);
      const Lanes4 rinv = one / p;
      gj[j] = rinv;
      for (int b = j + 1; b < n; ++b) {
        gj[b] *= rinv;
        RT[N * b + j] = gj[b];
      }
      RT[N * j + j] = rinv;
    }
    // Z <- Z R^-1 row by row (y R = x: y_b = (x_b - sum_{a<b} y_a R_ab) / R_bb), eight
    // rows together (row indices past n clamped: the duplicates compute and store the
    // same numbers).
    for (int k0 = 0; k0 < n; k0 += 8) {
      Lanes4* zr[8];
      for (int u = 0; u < 8; ++u) zr[u] = Z + N * std::min(k0 + u, n - 1);
      for (int b = 0; b < n; ++b) {
        const Lanes4* rb = RT + N * b;
        Lanes4 acc[8];
        for (int u = 0; u < 8; ++u) acc[u] = zr[u][b];
        for (int a = 0; a < b; ++a) {
          const Lanes4 rab = rb[a];
          for (int u = 0; u < 8; ++u) acc[u] -= zr[u][a] * rab;
        }
        const Lanes4 rinv = rb[b];
        for (int u = 0; u < 8; ++u) zr[u][b] = acc[u] * rinv;
      }
    }
    if (pass == 1) { // lanes that needed no second pass keep the first one's vectors
      Mask4 keep;
      for (int j = 0; j < 4; ++j) keep[j] = (again >> j) & 1u ? 0 : -1;
      for (std::size_t i = 0; i < N * N; ++i) Z[i] = keep ? Z0[i] : Z[i];
    }
  }
  return bad;
}


// ---- Householder reduction of four matrices at once, one per lane -------------------
// Lane-interleaved storage: X[4 i + j] is element i of matrix j; the working copies
// A[4 (r + N c) + j] (lower triangle). Loops run over rows with the four matrices in
// one vector, so no loop has a tail or a sum across lanes; dots keep two accumulators.

// householder() on each lane of x[0..m) (lane-interleaved): tau[j], beta in x[0], v
// scaled in x[1..m); a lane whose x[1..m) is zero keeps x and gets tau 0 (H = I).
SPEX_CLONES void householder4(int m, double* __restrict x, double* __restrict tau) {
  Lanes4* X = reinterpret_cast<Lanes4*>(x);
  if (m <= 1) {
    for (int j = 0; j < 4; ++j) tau[j] = 0.0;
    return;
  }
  Lanes4 s0 = {0, 0, 0, 0}, s1 = s0;
  int r = 1;
  for (; r + 2 <= m; r += 2) {
    s0 += X[r] * X[r];
    s1 += X[r + 1] * X[r + 1];
  }
  if (r < m) s0 += X[r] * X[r];
  const Lanes4 ss = s0 + s1;
  Lanes4 scale = {1, 1, 1, 1};
  for (int j = 0; j < 4; ++j) {
    if (ss[j] == 0.0) {
      tau[j] = 0.0;
      continue;
    }
    const double alpha = x[j];
    const double beta = -std::copysign(std::hypot(alpha, std::sqrt(ss[j])), alpha);
    tau[j] = (beta - alpha) / beta;
    scale[j] = 1.0 / (alpha - beta);
    x[j] = beta;
  }
  for (r = 1; r < m; ++r) X[r] *= scale;
}

// symv() in lanes: P[lo..n) = A[lo..n, lo..n) V from the lower triangles.
SPEX_CLONES void symv4(int n, int lo, const double* __restrict a, const double* __restrict v,
                       double* __restrict p) {
  const Lanes4* A = reinterpret_cast<const Lanes4*>(a);
  const Lanes4* V = reinterpret_cast<const Lanes4*>(v);
  Lanes4* P = reinterpret_cast<Lanes4*>(p);
  const std::size_t N = std::size_t(n);
  const Lanes4 zero = {0, 0, 0, 0};
  for (int r = lo; r < n; ++r) P[r] = zero;
  for (int c = lo; c < n; ++c) {
    const Lanes4* col = A + N * c;
    const Lanes4 vc = V[c];
    P[c] += col[c] * vc;
    Lanes4 acc0 = zero, acc1 = zero;
    int r = c + 1;
    for (; r + 2 <= n; r += 2) {
      P[r] += col[r] * vc;
      acc0 += col[r] * V[r];
      P[r + 1] += col[r + 1] * vc;
      acc1 += col[r + 1] * V[r + 1];
    }
    if (r < n) {
      P[r] += col[r] * vc;
      acc0 += col[r] * V[r];
    }
    P[c] += acc0 + acc1;
  }
}

// rank2AndSymv() in lanes: columns [c0, c1) of A -= V W^T + W V^T (rows c..n-1), and
// with VN set PN[c..n) += A_new[c.., c] VN[c] plus PN[c] += A_new[c+1.., c] . VN[c+1..].
SPEX_CLONES void rank2AndSymv4(int n, int c0, int c1, double* __restrict a, const double* __restrict v,
                               const double* __restrict w, const double* __restrict vn,
                               double* __restrict pn) {
  Lanes4* A = reinterpret_cast<Lanes4*>(a);
  const Lanes4* V = reinterpret_cast<const Lanes4*>(v);
  const Lanes4* W = reinterpret_cast<const Lanes4*>(w);
  const std::size_t N = std::size_t(n);
  const Lanes4 zero = {0, 0, 0, 0};
  for (int c = c0; c < c1; ++c) {
    Lanes4* col = A + N * c;
    const Lanes4 vc = V[c], wc = W[c];
    if (vn) {
      const Lanes4* VN = reinterpret_cast<const Lanes4*>(vn);
      Lanes4* PN = reinterpret_cast<Lanes4*>(pn);
      const Lanes4 vnc = VN[c];
      const Lanes4 x0 = col[c] - (V[c] * wc + W[c] * vc);
      col[c] = x0;
      PN[c] += x0 * vnc;
      Lanes4 acc0 = zero, acc1 = zero;
      int r = c + 1;
      for (; r + 2 <= n; r += 2) {
        const Lanes4 x = col[r] - (V[r] * wc + W[r] * vc);
        const Lanes4 y = col[r + 1] - (V[r + 1] * wc + W[r + 1] * vc);
        col[r] = x;
        col[r + 1] = y;
        PN[r] += x * vnc;
        PN[r + 1] += y * vnc;
        acc0 += x * VN[r];
        acc1 += y * VN[r + 1];
      }
      if (r < n) {
        const Lanes4 x = col[r] - (V[r] * wc + W[r] * vc);
        col[r] = x;
        PN[r] += x * vnc;
        acc0 += x * VN[r];
      }
      PN[c] += acc0 + acc1;
    } else {
      for (int r = c; r < n; ++r) col[r] -= V[r] * wc + W[r] * vc;
    }
  }
}

// p[lo..n) *= tau, then w = p - (tau/2)(p . v) v on [lo, n), in lanes.
SPEX_CLONES void reflectorUpdate4(int n, int lo, const double* __restrict tau, const double* __restrict v,
                                  double* __restrict p, double* __restrict w) {
  const Lanes4* V = reinterpret_cast<const Lanes4*>(v);
  Lanes4* P = reinterpret_cast<Lanes4*>(p);
  Lanes4* W = reinterpret_cast<Lanes4*>(w);
  const Lanes4 t = {tau[0], tau[1], tau[2], tau[3]};
  Lanes4 pv0 = {0, 0, 0, 0}, pv1 = pv0;
  int r = lo;
  for (; r + 2 <= n; r += 2) {
    P[r] *= t;
    P[r + 1] *= t;
    pv0 += P[r] * V[r];
    pv1 += P[r + 1] * V[r + 1];
  }
  if (r < n) {
    P[r] *= t;
    pv0 += P[r] * V[r];
  }
  const Lanes4 alpha = -0.5 * t * (pv0 + pv1);
  for (r = lo; r < n; ++r) W[r] = P[r] + alpha * V[r];
}

// applyTwoReflectors() in lanes on the four Z's (Z[N r + c] row r, column c; each
// reflector and tau per lane). A lane whose tau is 0 gets that reflector as the identity.
SPEX_CLONES void applyTwoReflectors4(int n, int k, const double* __restrict tau1, const double* __restrict v1,
                                     const double* __restrict tau0, const double* __restrict v0,
                                     double* __restrict zz, double* __restrict uu) {
  const std::size_t N = std::size_t(n);
  const Lanes4* V1 = reinterpret_cast<const Lanes4*>(v1);
  const Lanes4* V0 = reinterpret_cast<const Lanes4*>(v0);
  Lanes4* Z = reinterpret_cast<Lanes4*>(zz);
  Lanes4* A = reinterpret_cast<Lanes4*>(uu);
  Lanes4* B = A + N;
  const Lanes4 t1 = {tau1[0], tau1[1], tau1[2], tau1[3]}, t0 = {tau0[0], tau0[1], tau0[2], tau0[3]};
  const Lanes4 zero = {0, 0, 0, 0};
  {
    const Lanes4* zk = Z + N * k;
    const Lanes4 w0 = V0[k];
    for (int c = 0; c < n; ++c) {
      A[c] = zero;
      B[c] = w0 * zk[c];
    }
  }
  Lanes4 v01 = zero;
  int r = k + 1;
  for (; r + 4 <= n; r += 4) {
    const Lanes4 *z0 = Z + N * r, *z1 = z0 + N, *z2 = z1 + N, *z3 = z2 + N;
    const Lanes4 p0 = V1[r], p1 = V1[r + 1], p2 = V1[r + 2], p3 = V1[r + 3];
    const Lanes4 q0 = V0[r], q1 = V0[r + 1], q2 = V0[r + 2], q3 = V0[r + 3];
    v01 += (q0 * p0 + q1 * p1) + (q2 * p2 + q3 * p3);
    for (int c = 0; c < n; ++c) {
      A[c] += (p0 * z0[c] + p1 * z1[c]) + (p2 * z2[c] + p3 * z3[c]);
      B[c] += (q0 * z0[c] + q1 * z1[c]) + (q2 * z2[c] + q3 * z3[c]);
    }
  }
  for (; r < n; ++r) {
    const Lanes4* z0 = Z + N * r;
    const Lanes4 p0 = V1[r], q0 = V0[r];
    v01 += q0 * p0;
    for (int c = 0; c < n; ++c) {
      A[c] += p0 * z0[c];
      B[c] += q0 * z0[c];
    }
  }
  const Lanes4 g = t1 * v01;
  for (int c = 0; c < n; ++c) B[c] = t0 * (B[c] - g * A[c]); // tau0 u0
  {
    Lanes4* zk = Z + N * k;
    const Lanes4 w0 = V0[k];
    for (int c = 0; c < n; ++c) zk[c] -= w0 * B[c];
  }
  for (r = k + 1; r + 4 <= n; r += 4) {
    Lanes4 *z0 = Z + N * r, *z1 = z0 + N, *z2 = z1 + N, *z3 = z2 + N;
    const Lanes4 s0 = t1 * V1[r], s1 = t1 * V1[r + 1], s2 = t1 * V1[r + 2], s3 = t1 * V1[r + 3];
    const Lanes4 q0 = V0[r], q1 = V0[r + 1], q2 = V0[r + 2], q3 = V0[r + 3];
    for (int c = 0; c < n; ++c) {
      const Lanes4 ac = A[c], bc = B[c];
      z0[c] -= s0 * ac + q0 * bc;
      z1[c] -= s1 * ac + q1 * bc;
      z2[c] -= s2 * ac + q2 * bc;
      z3[c] -= s3 * ac + q3 * bc;
    }
  }
  for (; r < n; ++r) {
    Lanes4* z0 = Z + N * r;
    const Lanes4 s0 = t1 * V1[r], q0 = V0[r];
    for (int c = 0; c < n; ++c) z0[c] -= s0 * A[c] + q0 * B[c];
  }
}

// applyReflector() in lanes: rows (k, n) of the four Z's <- (I - tau v v^T) Z.
SPEX_CLONES void applyReflector4(int n, int k, const double* __restrict tau, const double* __restrict v,
                                 double* __restrict zz, double* __restrict uu) {
  const std::size_t N = std::size_t(n);
  const Lanes4* V = reinterpret_cast<const Lanes4*>(v);
  Lanes4* Z = reinterpret_cast<Lanes4*>(zz);
  Lanes4* U = reinterpret_cast<Lanes4*>(uu);
  const Lanes4 t = {tau[0], tau[1], tau[2], tau[3]};
  const Lanes4 zero = {0, 0, 0, 0};
  for (int c = 0; c < n; ++c) U[c] = zero;
  for (int r = k + 1; r < n; ++r) {
    const Lanes4* zr = Z + N * r;
    const Lanes4 vr = V[r];
    for (int c = 0; c < n; ++c) U[c] += vr * zr[c];
  }
  for (int r = k + 1; r < n; ++r) {
    Lanes4* zr = Z + N * r;
    const Lanes4 sr = t * V[r];
    for (int c = 0; c < n; ++c) zr[c] -= sr * U[c];
  }
}

} // namespace detail

double SymEigen::fma(int n) {
  const double nn = n;
  return nn * nn * nn + nn * nn * nn; // ~3 m^2 per step of the reduction, 2 m n per reflector
}

void SymEigen::reduce(int n, const double* a, int lda, Reduced& L) {
  const std::size_t N = std::size_t(n);
  m_a.resize(N * N);
  // Reflector k is read from row k + 1 on (row k of v_(k-1) is its leading 1), all of it
  // written below before it is read: no clearing pass.
  L.v.resize(N * N);
  L.tau.assign(N, 0.0);
  L.d.resize(N);
  L.e.assign(N, 0.0);
  m_p.resize(2 * N);
  double* A = m_a.data();
  // Copy of the lower triangle (all the reduction reads), scaled into dsyevr's safe range.
  double anrm = 0;
  for (int c = 0; c < n; ++c)
    for (int r = c; r < n; ++r) anrm = std::max(anrm, std::abs(a[r + std::size_t(c) * lda]));
  const double safmin = std::numeric_limits<double>::min(), eps = std::numeric_limits<double>::epsilon() / 2;
  const double rmin = std::sqrt(safmin / eps);
  const double rmax = std::min(std::sqrt(1.0 / (safmin / eps)), 1.0 / std::sqrt(std::sqrt(safmin)));
  double sigma = 1.0;
  if (anrm > 0 && anrm < rmin) sigma = rmin / anrm;
  else if (anrm > rmax) sigma = rmax / anrm;
  if (!std::isfinite(anrm)) sigma = 1.0; // the solver reports it; the fallback decides
  L.sigma = sigma;
  L.finite = std::isfinite(anrm);
  for (int c = 0; c < n; ++c)
    for (int r = c; r < n; ++r) A[r + N * c] = a[r + std::size_t(c) * lda] * sigma;

  // Householder tridiagonalisation: H_i annihilates A[i+2.., i]; A <- H_i A H_i on the
  // trailing block via p = tau A v, w = p - (tau/2)(p.v) v, A -= v w^T + w v^T.
  double* p = m_p.data();
  double* wv = p + N;
  if (n >= 3) {
    double* v0 = L.v.data();
    std::copy(A + 1, A + N, v0 + 1);
    L.tau[0] = detail::householder(n - 1, v0 + 1);
    L.e[0] = v0[1];
    v0[1] = 1.0;
    if (L.tau[0] != 0) detail::symv(n, 1, A, v0, p);
  }
  for (int i = 0; i + 2 < n; ++i) {
    L.d[i] = A[i + N * i];
    const double tau = L.tau[i];
    const double* v = L.v.data() + N * i;
    const bool more = i + 3 < n; // a reflector follows for column i + 1
    double* vn = L.v.data() + N * (i + 1);
    if (tau == 0.0) {
      // A unchanged: the next reflector from column i + 1 as it is, its product plainly.
      if (more) {
        std::copy(A + N * (i + 1) + i + 2, A + N * (i + 2), vn + i + 2);
        L.tau[i + 1] = detail::householder(n - i - 2, vn + i + 2);
        L.e[i + 1] = vn[i + 2];
        vn[i + 2] = 1.0;
        if (L.tau[i + 1] != 0) detail::symv(n, i + 2, A, vn, p);
      }
      continue;
    }
    double pv = 0;
    for (int r = i + 1; r < n; ++r) {
      p[r] *= tau;
      pv += p[r] * v[r];
    }
    const double alpha = -0.5 * tau * pv;
    for (int r = i + 1; r < n; ++r) wv[r] = p[r] + alpha * v[r];
    // Column i + 1 first: it gives the next reflector, whose product the remaining
    // columns then accumulate as they are updated.
    detail::rank2AndSymv(n, i + 1, i + 2, A, v, wv, nullptr, nullptr);
    if (more) {
      std::copy(A + N * (i + 1) + i + 2, A + N * (i + 2), vn + i + 2);
      L.tau[i + 1] = detail::householder(n - i - 2, vn + i + 2);
      L.e[i + 1] = vn[i + 2];
      vn[i + 2] = 1.0;
    }
    const bool fuse = more && L.tau[i + 1] != 0;
    if (fuse) std::fill(p + i + 2, p + n, 0.0);
    detail::rank2AndSymv(n, i + 2, n, A, v, wv, fuse ? vn : nullptr, fuse ? p : nullptr);
  }
  if (n >= 2) {
    L.d[n - 2] = A[(n - 2) + N * (n - 2)];
    L.e[n - 2] = A[(n - 1) + N * (n - 2)];
  }
  L.d[n - 1] = A[(n - 1) + N * (n - 1)];
}

void SymEigen::reduce4(int count, int n, const double* const* a, int lda) {
  // reduce() step for step, the four matrices in the lanes (lanes past count repeat
  // matrix 0; their results are not kept).
  const std::size_t N = std::size_t(n);
  m_a4.resize(4 * N * N);
  m_v4.resize(16 * N);
  double* A = m_a4.data();
  double* v = m_v4.data();   // reflector i
  double* vn = v + 4 * N;    // reflector i + 1
  double* p = vn + 4 * N;    // tau A v, then the next step's A v
  double* wv = p + 4 * N;
  const double safmin = std::numeric_limits<double>::min(), eps = std::numeric_limits<double>::epsilon() / 2;
  const double rmin = std::sqrt(safmin / eps);
  const double rmax = std::min(std::sqrt(1.0 / (safmin / eps)), 1.0 / std::sqrt(std::sqrt(safmin)));
  for (int j = 0; j < 4; ++j) {
    const double* src = a[j < count ? j : 0];
    double anrm = 0;
    for (int c = 0; c < n; ++c)
      for (int r = c; r < n; ++r) anrm = std::max(anrm, std::abs(src[r + std::size_t(c) * lda]));
    double sigma = 1.0;
    if (anrm > 0 && anrm < rmin) sigma = rmin / anrm;
    else if (anrm > rmax) sigma = rmax / anrm;
    if (!std::isfinite(anrm)) sigma = 1.0; // the solver reports it; the fallback decides
    if (j < count) {
      Reduced& L = m_lane[j];
      L.sigma = sigma;
      L.finite = std::isfinite(anrm);
      L.v.resize(N * N);
      L.tau.assign(N, 0.0);
      L.d.resize(N);
      L.e.assign(N, 0.0);
    }
    for (int c = 0; c < n; ++c)
      for (int r = c; r < n; ++r) A[4 * (r + N * c) + j] = src[r + std::size_t(c) * lda] * sigma;
  }
  m_vall.resize(4 * N * N);
  m_tau4.assign(4 * N, 0.0);
  auto keep = [&](int i, const double* refl, const double* tau) { // reflector i of each lane
    std::copy(refl + 4 * (i + 1), refl + 4 * N, m_vall.data() + 4 * (N * i + i + 1));
    std::copy(tau, tau + 4, m_tau4.data() + 4 * i);
    for (int j = 0; j < count; ++j) {
      Reduced& L = m_lane[j];
      L.tau[i] = tau[j];
      double* col = L.v.data() + N * i;
      for (int r = i + 1; r < n; ++r) col[r] = refl[4 * r + j];
    }
  };
  double tau[4] = {0, 0, 0, 0}, tauNext[4] = {0, 0, 0, 0};
  if (n >= 3) {
    std::copy(A + 4, A + 4 * N, v + 4); // column 0, rows 1..
    detail::householder4(n - 1, v + 4, tau);
    for (int j = 0; j < count; ++j) m_lane[j].e[0] = v[4 + j];
    for (int j = 0; j < 4; ++j) v[4 + j] = 1.0;
    detail::symv4(n, 1, A, v, p);
  }
  for (int i = 0; i + 2 < n; ++i) {
    for (int j = 0; j < count; ++j) m_lane[j].d[i] = A[4 * (i + N * i) + j];
    const bool more = i + 3 < n; // a reflector follows for column i + 1
    // A <- H_i A H_i on the trailing block; a lane with tau 0 gets p = w = 0 (A unchanged).
    detail::reflectorUpdate4(n, i + 1, tau, v, p, wv);
    detail::rank2AndSymv4(n, i + 1, i + 2, A, v, wv, nullptr, nullptr);
    if (more) {
      std::copy(A + 4 * ((i + 2) + N * (i + 1)), A + 4 * (N + N * (i + 1)), vn + 4 * (i + 2));
      detail::householder4(n - i - 2, vn + 4 * (i + 2), tauNext);
      for (int j = 0; j < count; ++j) m_lane[j].e[i + 1] = vn[4 * (i + 2) + j];
      for (int j = 0; j < 4; ++j) vn[4 * (i + 2) + j] = 1.0;
      std::fill(p + 4 * (i + 2), p + 4 * N, 0.0);
      detail::rank2AndSymv4(n, i + 2, n, A, v, wv, vn, p);
    } else {
      detail::rank2AndSymv4(n, i + 2, n, A, v, wv, nullptr, nullptr);
    }
    keep(i, v, tau);
    std::swap(v, vn);
    std::copy(tauNext, tauNext + 4, tau);
  }
  for (int j = 0; j < count; ++j) {
    Reduced& L = m_lane[j];
    if (n >= 2) {
      L.d[n - 2] = A[4 * ((n - 2) + N * (n - 2)) + j];
      L.e[n - 2] = A[4 * ((n - 1) + N * (n - 2)) + j];
    }
    L.d[n - 1] = A[4 * ((n - 1) + N * (n - 1)) + j];
  }
}

int SymEigen::solveTridiagonal(int n, Reduced& L, const double* a, int lda, double* w, double* z, int ldz) {
  // Divide and conquer (dstedc, as dsyevd and numpy's eigh) into z (column-major). At
  // n = 74 it takes ~0.85 of MRRR's (dstemr) time for about twice its instructions
  // (docs/benchmarks.md, "CPU engine, fifth pass").
  int info = 0;
  const int lwork = 1 + 4 * n + n * n, liwork = 3 + 5 * n;
  if (m_work.size() < std::size_t(lwork)) m_work.resize(lwork);
  if (m_iwork.size() < std::size_t(liwork)) m_iwork.resize(liwork);
  m_dc.assign(L.d.begin(), L.d.end());
  m_ec.assign(L.e.begin(), L.e.end());
  dstedc_("I", &n, m_dc.data(), m_ec.data(), z, &ldz, m_work.data(), &lwork, m_iwork.data(), &liwork, &info, 1);
  if (info != 0) {
    m_copy.assign(a, a + std::size_t(lda) * (n - 1) + n);
    return lapack::syevr(n, m_copy.data(), lda, w, z, ldz, m_work, m_iwork);
  }
  for (int i = 0; i < n; ++i) w[i] = m_dc[i] / L.sigma;
  m_zt.resize(std::size_t(n) * n);
  double* zt = m_zt.data();
  for (int c = 0; c < n; ++c)
    for (int r = 0; r < n; ++r) zt[std::size_t(r) * n + c] = z[r + std::size_t(c) * ldz];
  backTransform(n, L, z, ldz);
  return 0;
}

void SymEigen::backTransform(int n, const Reduced& L, double* z, int ldz) {
  // V = H_0 H_1 ... H_(n-3) Z, applied from the last reflector on the rows of Z (m_zt,
  // row-major), two reflectors per pass where both are proper (k and k - 1), else one.
  const std::size_t N = std::size_t(n);
  double* zt = m_zt.data();
  m_p.resize(2 * N);
  double* p = m_p.data();
  for (int k = n - 3; k >= 0;) {
    if (k >= 1 && L.tau[k] != 0 && L.tau[k - 1] != 0) {
      detail::applyTwoReflectors(n, k, L.tau[k], L.v.data() + N * k, L.tau[k - 1], L.v.data() + N * (k - 1), zt, p);
      k -= 2;
    } else {
      if (L.tau[k] != 0) detail::applyReflector(n, k, L.tau[k], L.v.data() + N * k, zt, p);
      k -= 1;
    }
  }
  for (int c = 0; c < n; ++c)
    for (int r = 0; r < n; ++r) z[r + std::size_t(c) * ldz] = zt[std::size_t(r) * N + c];
}

int SymEigen::compute(int n, const double* a, int lda, double* w, double* z, int ldz) {
  if (n <= 0) return 0;
  m_lane.resize(4);
  reduce(n, a, lda, m_lane[0]);
  return solveTridiagonal(n, m_lane[0], a, lda, w, z, ldz);
}

int SymEigen::compute4(int count, int n, const double* const* a, int lda, double* const* w, double* const* z,
                       int ldz) {
  if (n <= 0 || count <= 0) return 0;
  if (count > 4) count = 4;
  m_lane.resize(4);
  const std::size_t N = std::size_t(n);
  reduce4(count, n, a, lda);
  // Lanes past count repeat lane 0's tridiagonal (their results are not used).
  m_d4.resize(4 * N);
  m_e4.resize(4 * N);
  m_z4.resize(4 * N * N);
  // Each lane's tridiagonal scaled by a power of two (exact) up to dsteqr's lower bound
  // sqrt(safmin) / eps^2 where it is smaller: below it the deflation test's absolute
  // term (safmin) would split at subdiagonals that are not negligible (a matrix scaled
  // into the reduction's safe range can have norm sqrt(safmin / eps) ~ 1e-146).
  const double ssfmin = std::sqrt(std::numeric_limits<double>::min()) /
                        (0.25 * std::numeric_limits<double>::epsilon() * std::numeric_limits<double>::epsilon());
  double tscale[4] = {1, 1, 1, 1};
  for (int j = 0; j < 4; ++j) {
    const Reduced& L = m_lane[j < count ? j : 0];
    double tnorm = 0;
    for (int i = 0; i < n; ++i) tnorm = std::max(tnorm, std::max(std::abs(L.d[i]), i + 1 < n ? std::abs(L.e[i]) : 0.0));
    if (tnorm > 0 && tnorm < ssfmin) tscale[j] = std::exp2(std::ceil(std::log2(ssfmin / tnorm)));
    for (int i = 0; i < n; ++i) {
      m_d4[4 * i + j] = L.d[i] * tscale[j];
      m_e4[4 * i + j] = i + 1 < n ? L.e[i] * tscale[j] : 0.0;
    }
  }
  m_rot4.resize(8 * N);
  const bool twisted = m_vectors == EigenVectors::Twisted;
  unsigned failed = 0;
  if (twisted) {
    // T split where |e| <= eps ||T|| (a perturbation of eps ||T||, QL's backward error
    // anyway; gpu/eigh_bisect.cuh's setup), kept for the twisted factorizations: the
    // root-free QL then leaves each eigenvalue at a position inside its unreduced block.
    const double eps = std::numeric_limits<double>::epsilon();
    double pivmin[4], tight[4];
    for (int j = 0; j < 4; ++j) {
      double tn = 0;
      for (int i = 0; i < n; ++i)
        tn = std::max(tn, std::abs(m_d4[4 * i + j]) + (i > 0 ? std::abs(m_e4[4 * (i - 1) + j]) : 0.0) +
                              std::abs(m_e4[4 * i + j]));
      for (int i = 0; i + 1 < n; ++i)
        if (std::abs(m_e4[4 * i + j]) <= eps * tn) m_e4[4 * i + j] = 0.0;
      pivmin[j] = std::max(1e-10 * eps * tn, 1e-290);
      tight[j] = 30.0 * eps * tn;
    }
    m_dt4.assign(m_d4.begin(), m_d4.end());
    m_et4.assign(m_e4.begin(), m_e4.end());
    for (double& x : m_e4) x *= x;
    failed = detail::tridiagPWK4(n, m_d4.data(), m_e4.data());
    // Each row's unreduced block; a lane with two eigenvalues of one block within 30 eps
    // ||T|| goes to dstedc (their twisted vectors would be nearly the same one).
    m_bs4.resize(4 * N);
    m_bt4.resize(4 * N);
    m_lam.resize(N);
    for (int j = 0; j < 4; ++j) {
      for (int s0 = 0; s0 < n;) {
        int t0 = s0;
        while (t0 + 1 < n && m_et4[4 * t0 + j] != 0.0) ++t0;
        for (int i = s0; i <= t0; ++i) {
          m_bs4[4 * i + j] = s0;
          m_bt4[4 * i + j] = t0;
          m_lam[i - s0] = m_d4[4 * i + j];
        }
        bool finite = true; // (no sort over NaNs: not a strict weak order)
        for (int i = 0; i <= t0 - s0; ++i) finite = finite && std::isfinite(m_lam[i]);
        if (!finite) {
          failed |= 1u << j;
        } else {
          std::sort(m_lam.begin(), m_lam.begin() + (t0 - s0 + 1));
          for (int i = 0; i < t0 - s0; ++i)
            if (!(m_lam[i + 1] - m_lam[i] > tight[j])) failed |= 1u << j;
        }
        s0 = t0 + 1;
      }
    }
    m_tw.resize(4 * 4 * 4 * N);
    failed |= detail::twistedVectors4(n, m_dt4.data(), m_et4.data(), m_d4.data(), m_bs4.data(), m_bt4.data(),
                                      pivmin, m_z4.data(), m_tw.data());
    // CholQR on Z before the back-transformation (Q orthogonal: the same Gram matrix).
    m_gram.resize(12 * N * N);
    failed |= detail::cholQr4(n, m_z4.data(), m_gram.data(), m_gram.data() + 8 * N * N);
  } else {
    failed = detail::tridiagQL4(n, m_d4.data(), m_e4.data(), m_z4.data(), m_rot4.data());
  }
  // V = H_0 H_1 ... H_(n-3) Z for the four lanes at once, on Z as QL left it (row k of
  // eigenvector column i at Z[N k + i]), two reflectors per pass; columns sorted after.
  m_p.resize(8 * N);
  for (int k = n - 3; k >= 0;) {
    if (k >= 1) {
      detail::applyTwoReflectors4(n, k, m_tau4.data() + 4 * k, m_vall.data() + 4 * N * k, m_tau4.data() + 4 * (k - 1),
                                  m_vall.data() + 4 * N * (k - 1), m_z4.data(), m_p.data());
      k -= 2;
    } else {
      detail::applyReflector4(n, k, m_tau4.data() + 4 * k, m_vall.data() + 4 * N * k, m_z4.data(), m_p.data());
      k -= 1;
    }
  }
  int info = 0;
  m_fallbacks = 0;
  m_order.resize(N);
  for (int j = 0; j < count; ++j) {
    Reduced& L = m_lane[j];
    bool ok = L.finite && !(failed & (1u << j));
    for (int i = 0; ok && i < n; ++i) ok = std::isfinite(m_d4[4 * i + j]);
    if (!ok) { // dstedc (then dsyevr) on this lane's tridiagonal, as compute() does
      m_fallbacks |= 1u << j;
      const int r = solveTridiagonal(n, L, a[j], lda, w[j], z[j], ldz);
      if (r != 0 && info == 0) info = r;
      continue;
    }
    // Ascending eigenvalues (a stable sort of the lane's indices), V's columns in that order.
    for (int i = 0; i < n; ++i) m_order[i] = i;
    std::stable_sort(m_order.begin(), m_order.end(),
                     [&](int x, int y) { return m_d4[4 * x + j] < m_d4[4 * y + j]; });
    for (int c = 0; c < n; ++c) {
      const int src = m_order[c];
      w[j][c] = m_d4[4 * src + j] / tscale[j] / L.sigma;
      const double* col = m_z4.data() + 4 * std::size_t(src) + j; // V row-major per lane
      double* out = z[j] + std::size_t(c) * ldz;
      for (int r = 0; r < n; ++r) out[r] = col[4 * N * r];
    }
  }
  return info;
}


} // namespace spex
