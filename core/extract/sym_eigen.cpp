#include "sym_eigen.h"

#include "../clones.h"
#include "lapack.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

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

} // namespace detail

double SymEigen::fma(int n) {
  const double nn = n;
  return nn * nn * nn + nn * nn * nn; // ~3 m^2 per step of the reduction, 2 m n per reflector
}

int SymEigen::compute(int n, const double* a, int lda, double* w, double* z, int ldz) {
  if (n <= 0) return 0;
  const std::size_t N = std::size_t(n);
  m_a.resize(N * N);
  // Reflector k is read from row k + 1 on (row k of v_(k-1) is its leading 1), all of it
  // written below before it is read: no clearing pass.
  m_v.resize(N * N);
  m_tau.assign(N, 0.0);
  m_d.resize(N);
  m_e.assign(N, 0.0);
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
  if (!std::isfinite(anrm)) sigma = 1.0; // dstedc reports it; the fallback decides
  for (int c = 0; c < n; ++c)
    for (int r = c; r < n; ++r) A[r + N * c] = a[r + std::size_t(c) * lda] * sigma;

  // 1. Tridiagonalisation: H_i annihilates A[i+2.., i]; A <- H_i A H_i on the trailing
  // block via p = tau A v, w = p - (tau/2)(p.v) v, A -= v w^T + w v^T.
  double* p = m_p.data();
  double* wv = p + N;
  if (n >= 3) {
    double* v0 = m_v.data();
    std::copy(A + 1, A + N, v0 + 1);
    m_tau[0] = detail::householder(n - 1, v0 + 1);
    m_e[0] = v0[1];
    v0[1] = 1.0;
    if (m_tau[0] != 0) detail::symv(n, 1, A, v0, p);
  }
  for (int i = 0; i + 2 < n; ++i) {
    m_d[i] = A[i + N * i];
    const double tau = m_tau[i];
    const double* v = m_v.data() + N * i;
    const bool more = i + 3 < n; // a reflector follows for column i + 1
    double* vn = m_v.data() + N * (i + 1);
    if (tau == 0.0) {
      // A unchanged: the next reflector from column i + 1 as it is, its product plainly.
      if (more) {
        std::copy(A + N * (i + 1) + i + 2, A + N * (i + 2), vn + i + 2);
        m_tau[i + 1] = detail::householder(n - i - 2, vn + i + 2);
        m_e[i + 1] = vn[i + 2];
        vn[i + 2] = 1.0;
        if (m_tau[i + 1] != 0) detail::symv(n, i + 2, A, vn, p);
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
      m_tau[i + 1] = detail::householder(n - i - 2, vn + i + 2);
      m_e[i + 1] = vn[i + 2];
      vn[i + 2] = 1.0;
    }
    const bool fuse = more && m_tau[i + 1] != 0;
    if (fuse) std::fill(p + i + 2, p + n, 0.0);
    detail::rank2AndSymv(n, i + 2, n, A, v, wv, fuse ? vn : nullptr, fuse ? p : nullptr);
  }
  if (n >= 2) {
    m_d[n - 2] = A[(n - 2) + N * (n - 2)];
    m_e[n - 2] = A[(n - 1) + N * (n - 2)];
  }
  m_d[n - 1] = A[(n - 1) + N * (n - 1)];

  // 2. Eigenpairs of the tridiagonal matrix by divide and conquer (dstedc, as dsyevd and
  // numpy's eigh), into z (column-major). At n = 74 it takes ~0.85 of MRRR's (dstemr)
  // time for about twice its instructions: MRRR's twisted factorisations are chains of
  // dependent divisions, dstedc's merges are independent secular equations and GEMMs
  // (docs/benchmarks.md, "CPU engine, fifth pass").
  int info = 0;
  const int lwork = 1 + 4 * n + n * n, liwork = 3 + 5 * n;
  if (m_work.size() < std::size_t(lwork)) m_work.resize(lwork);
  if (m_iwork.size() < std::size_t(liwork)) m_iwork.resize(liwork);
  dstedc_("I", &n, m_d.data(), m_e.data(), z, &ldz, m_work.data(), &lwork, m_iwork.data(), &liwork, &info, 1);
  if (info != 0) {
    m_copy.assign(a, a + std::size_t(lda) * (n - 1) + n);
    return lapack::syevr(n, m_copy.data(), lda, w, z, ldz, m_work, m_iwork);
  }
  std::copy(m_d.begin(), m_d.end(), w);
  if (sigma != 1.0)
    for (int i = 0; i < n; ++i) w[i] /= sigma;

  // 3. V = H_0 H_1 ... H_(n-3) Z, applied from the last reflector on Z^T's rows.
  m_zt.resize(N * N);
  double* zt = m_zt.data();
  for (int c = 0; c < n; ++c)
    for (int r = 0; r < n; ++r) zt[std::size_t(r) * N + c] = z[r + std::size_t(c) * ldz];
  // Two reflectors per pass where both are proper (k and k - 1), else one.
  for (int k = n - 3; k >= 0;) {
    if (k >= 1 && m_tau[k] != 0 && m_tau[k - 1] != 0) {
      detail::applyTwoReflectors(n, k, m_tau[k], m_v.data() + N * k, m_tau[k - 1], m_v.data() + N * (k - 1), zt, p);
      k -= 2;
    } else {
      if (m_tau[k] != 0) detail::applyReflector(n, k, m_tau[k], m_v.data() + N * k, zt, p);
      k -= 1;
    }
  }
  for (int c = 0; c < n; ++c)
    for (int r = 0; r < n; ++r) z[r + std::size_t(c) * ldz] = zt[std::size_t(r) * N + c];
  return 0;
}

} // namespace spex
