// The small-matrix eigensolver (core/extract/sym_eigen.h) against LAPACK's dsyevd on
// random symmetric matrices: SPD with condition numbers up to 1e12, repeated and
// clustered eigenvalues, matrices already (block) tridiagonal (reflectors that are the
// identity), indefinite ones, and scales near the ends of the double range.
#include "core/extract/lapack.h"
#include "core/extract/sym_eigen.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using namespace spex;

namespace {

using Mat = std::vector<double>; // column-major n x n

// Q diag(lambda) Q^T with Q a random orthogonal matrix (QR of a Gaussian one by
// Householder reflections), both triangles.
Mat withSpectrum(const std::vector<double>& lambda, std::mt19937& rng) {
  const int n = int(lambda.size());
  std::normal_distribution<double> g;
  Mat q(std::size_t(n) * n, 0.0);
  for (int i = 0; i < n; ++i) q[i + std::size_t(i) * n] = 1.0;
  for (int k = 0; k < n; ++k) { // q <- q (I - 2 u u^T / u.u), u random
    std::vector<double> u(n);
    double uu = 0;
    for (double& x : u) {
      x = g(rng);
      uu += x * x;
    }
    for (int r = 0; r < n; ++r) {
      double s = 0;
      for (int c = 0; c < n; ++c) s += q[r + std::size_t(c) * n] * u[c];
      for (int c = 0; c < n; ++c) q[r + std::size_t(c) * n] -= 2 * s * u[c] / uu;
    }
  }
  Mat a(std::size_t(n) * n, 0.0);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c <= r; ++c) {
      double s = 0;
      for (int k = 0; k < n; ++k) s += q[r + std::size_t(k) * n] * lambda[k] * q[c + std::size_t(k) * n];
      a[r + std::size_t(c) * n] = a[c + std::size_t(r) * n] = s;
    }
  return a;
}

// Q = V diag(lambda^-1/2) V^T, the quantity the decorrelation uses (SPD input).
Mat invSqrt(int n, const Mat& v, const std::vector<double>& w) {
  Mat q(std::size_t(n) * n, 0.0);
  for (int k = 0; k < n; ++k) {
    const double s = 1.0 / std::sqrt(w[k]);
    for (int c = 0; c < n; ++c)
      for (int r = 0; r < n; ++r) q[r + std::size_t(c) * n] += v[r + std::size_t(k) * n] * s * v[c + std::size_t(k) * n];
  }
  return q;
}

double maxAbs(const Mat& m) {
  double x = 0;
  for (double v : m) x = std::max(x, std::abs(v));
  return x;
}

struct Check {
  double dw = 0, resid = 0, orth = 0, dq = 0; // relative
  double orthRef = 0;                        // LAPACK's dsyevr, the same measure
  double qaq = 0, qaqRef = 0;                 // max |Q A Q - I|: ours, dsyevd's
};

// max |Q A Q - I| for Q = A^-1/2 as computed: how well Q whitens A.
double whitening(int n, const Mat& q, const Mat& a) {
  Mat qa(std::size_t(n) * n, 0.0);
  for (int c = 0; c < n; ++c)
    for (int k = 0; k < n; ++k)
      for (int r = 0; r < n; ++r) qa[r + std::size_t(c) * n] += q[r + std::size_t(k) * n] * a[k + std::size_t(c) * n];
  double e = 0;
  for (int c = 0; c < n; ++c)
    for (int r = 0; r < n; ++r) {
      double s = 0;
      for (int k = 0; k < n; ++k) s += qa[r + std::size_t(k) * n] * q[k + std::size_t(c) * n];
      e = std::max(e, std::abs(s - (r == c ? 1.0 : 0.0)));
    }
  return e;
}

double orthogonality(int n, const Mat& z) {
  double o = 0;
  for (int k = 0; k < n; ++k)
    for (int l = 0; l < n; ++l) {
      double s = 0;
      for (int r = 0; r < n; ++r) s += z[r + std::size_t(k) * n] * z[r + std::size_t(l) * n];
      o = std::max(o, std::abs(s - (k == l ? 1.0 : 0.0)));
    }
  return o;
}

double relDiff(const Mat& q, const Mat& qr) {
  Mat d(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) d[i] = q[i] - qr[i];
  return maxAbs(d) / maxAbs(qr);
}

// Eigenvalues against dsyevd; residual ||A V - V diag(w)|| and ||V^T V - I|| of ours
// (w, z); for SPD input also Q = A^-1/2 against dsyevd's.
Check evaluate(int n, const Mat& a, bool spd, const std::vector<double>& w, const Mat& z) {
  Mat ref = a;
  std::vector<double> wr(n), work;
  std::vector<int> iwork;
  if (lapack::syevd(n, ref.data(), n, wr.data(), work, iwork) != 0) qFatal("dsyevd failed");
  const double scale = std::max(std::abs(wr.front()), std::abs(wr.back()));
  Check c;
  for (int i = 0; i < n; ++i) c.dw = std::max(c.dw, std::abs(w[i] - wr[i]) / scale);
  for (int k = 0; k < n; ++k)
    for (int r = 0; r < n; ++r) {
      double s = 0;
      for (int j = 0; j < n; ++j) s += a[r + std::size_t(j) * n] * z[j + std::size_t(k) * n];
      c.resid = std::max(c.resid, std::abs(s - w[k] * z[r + std::size_t(k) * n]) / scale);
    }
  c.orth = orthogonality(n, z);
  // LAPACK's MRRR driver dsyevr (the fallback), for its orthogonality.
  Mat ar = a, zr(std::size_t(n) * n);
  std::vector<double> wm(n);
  if (lapack::syevr(n, ar.data(), n, wm.data(), zr.data(), n, work, iwork) != 0) qFatal("dsyevr failed");
  c.orthRef = orthogonality(n, zr);
  if (spd) {
    const Mat q = invSqrt(n, z, w), qr = invSqrt(n, ref, wr);
    c.dq = relDiff(q, qr);
    c.qaq = whitening(n, q, a);
    c.qaqRef = whitening(n, qr, a);
  }
  return c;
}

// Ours reads only the lower triangle: the input with NaN in the upper one.
Mat lowerOnly(int n, const Mat& a) {
  Mat in = a;
  for (int c = 1; c < n; ++c)
    for (int r = 0; r < c; ++r) in[r + std::size_t(c) * n] = std::nan("");
  return in;
}

Check compare(int n, const Mat& a, bool spd, SymEigen& eig) {
  const Mat in = lowerOnly(n, a);
  std::vector<double> w(n);
  Mat z(std::size_t(n) * n);
  if (eig.compute(n, in.data(), n, w.data(), z.data(), n) != 0) qFatal("SymEigen failed");
  return evaluate(n, a, spd, w, z);
}

// The same checks for count matrices solved together by compute4.
std::vector<Check> compare4(int n, const std::vector<Mat>& a, const std::vector<bool>& spd, SymEigen& eig) {
  const int count = int(a.size());
  std::vector<Mat> in(count), z(count, Mat(std::size_t(n) * n));
  std::vector<std::vector<double>> w(count, std::vector<double>(n));
  const double* pa[4];
  double *pw[4], *pz[4];
  for (int j = 0; j < count; ++j) {
    in[j] = lowerOnly(n, a[j]);
    pa[j] = in[j].data();
    pw[j] = w[j].data();
    pz[j] = z[j].data();
  }
  if (eig.compute4(count, n, pa, n, pw, pz, n) != 0) qFatal("SymEigen::compute4 failed");
  std::vector<Check> c;
  for (int j = 0; j < count; ++j) c.push_back(evaluate(n, a[j], spd[j], w[j], z[j]));
  return c;
}

} // namespace

class TestSymEigen : public QObject {
  Q_OBJECT

  // Bounds: backward-stable methods give eigenvalue errors and residuals of a small
  // multiple of n eps ||A|| (eps = 1.1e-16; n eps = 8e-15 at n = 74). Divide and
  // conquer (dstedc) keeps orthogonality at a few eps (measured <= 3.3e-15); the
  // fallback, MRRR (dsyevr), is O(n eps) with a larger constant (up to ~5e-13 at
  // n = 148 here), hence 1e-12. Q = A^-1/2 inherits the conditioning of A's small
  // eigenvectors: any backward-stable solver moves it by ~cond * n eps against another
  // one with other roundings in its reduction (measured 2e-11 at cond 1e6, 1e-6 at
  // 1e12), so Q is compared with dsyevd's within 1e-10 up to cond 1e6, and at every
  // condition Q must whiten A (max |Q A Q - I|) within 10x of dsyevd's Q plus 1e-12.
  // A wrong vector or eigenvalue gives O(1) in both.
  // whiten > 0 replaces the whitening bound (see batchOfFourAgainstDsyevd).
  void verify(const Check& c, double cond, const char* what, double whiten = 0) {
    qInfo("%-26s eig %.1e resid %.1e orth %.1e (dsyevr %.1e) dQ %.1e QAQ-I %.1e (dsyevd %.1e)", what, c.dw,
          c.resid, c.orth, c.orthRef, c.dq, c.qaq, c.qaqRef);
    QVERIFY2(c.dw < 1e-13, what);
    QVERIFY2(c.resid < 1e-13, what);
    QVERIFY2(c.orth < 1e-12, what);
    if (cond <= 1e6) QVERIFY2(c.dq < 1e-10, what);
    QVERIFY2(c.qaq <= (whiten > 0 ? whiten : 10 * c.qaqRef + 1e-12), what);
  }

private slots:
  void randomSpdOfEverySize() {
    std::mt19937 rng(12);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    SymEigen eig; // reused across sizes, as the engine does
    for (int n : {1, 2, 3, 4, 7, 33, 74, 74, 90, 148}) {
      for (double cond : {10.0, 1e6, 1e12}) {
        std::vector<double> lam(n);
        for (double& l : lam) l = std::pow(cond, u(rng)); // log-uniform in [1, cond]
        const Mat a = withSpectrum(lam, rng);
        verify(compare(n, a, true, eig), cond, qPrintable(QString("n=%1 cond=%2").arg(n).arg(cond)));
      }
    }
  }

  void repeatedAndClusteredEigenvalues() {
    std::mt19937 rng(7);
    SymEigen eig;
    const int n = 74;
    std::vector<double> lam(n);
    for (int i = 0; i < n; ++i) lam[i] = i < 30 ? 2.0 : (i < 50 ? 5.0 + 1e-12 * i : 1.0 + i);
    verify(compare(n, withSpectrum(lam, rng), true, eig), 1e6, "repeated and clustered");
    // Identity plus rank one: n - 1 equal eigenvalues.
    Mat a(std::size_t(n) * n, 0.0);
    std::normal_distribution<double> g;
    std::vector<double> x(n);
    for (double& v : x) v = g(rng);
    for (int c = 0; c < n; ++c)
      for (int r = 0; r < n; ++r) a[r + std::size_t(c) * n] = (r == c ? 3.0 : 0.0) + x[r] * x[c];
    verify(compare(n, a, true, eig), 1e6, "identity plus rank one");
  }

  void alreadyTridiagonalOrBlockDiagonal() {
    // Columns with nothing below the subdiagonal give identity reflectors (tau = 0).
    std::mt19937 rng(3);
    std::normal_distribution<double> g;
    SymEigen eig;
    const int n = 74;
    Mat t(std::size_t(n) * n, 0.0);
    for (int i = 0; i < n; ++i) {
      t[i + std::size_t(i) * n] = 4.0 + std::abs(g(rng));
      if (i + 1 < n) t[i + 1 + std::size_t(i) * n] = t[i + std::size_t(i + 1) * n] = g(rng);
    }
    verify(compare(n, t, true, eig), 1e6, "tridiagonal");
    Mat d(std::size_t(n) * n, 0.0);
    for (int i = 0; i < n; ++i) d[i + std::size_t(i) * n] = 1.0 + i % 5;
    verify(compare(n, d, true, eig), 1e6, "diagonal with repeats");
    // Two dense diagonal blocks: the reflectors of the first block end at its edge.
    Mat b(std::size_t(n) * n, 0.0);
    for (int c = 0; c < n; ++c)
      for (int r = c; r < n; ++r)
        if ((r < 30) == (c < 30)) b[r + std::size_t(c) * n] = b[c + std::size_t(r) * n] = g(rng) + (r == c ? 40.0 : 0.0);
    verify(compare(n, b, true, eig), 1e6, "two diagonal blocks");
  }

  void indefiniteAndExtremeScales() {
    std::mt19937 rng(5);
    std::normal_distribution<double> g;
    SymEigen eig;
    const int n = 74;
    Mat a(std::size_t(n) * n);
    for (int c = 0; c < n; ++c)
      for (int r = c; r < n; ++r) a[r + std::size_t(c) * n] = a[c + std::size_t(r) * n] = g(rng);
    verify(compare(n, a, false, eig), 0, "indefinite");
    for (double s : {1e-160, 1e160, 1e-300, 1e300}) {
      Mat b = a;
      for (double& x : b) x *= s;
      verify(compare(n, b, false, eig), 0, qPrintable(QString("indefinite x %1").arg(s)));
    }
  }

  // compute4: four matrices in the lanes of one QL (and fewer than four), each against
  // dsyevd with the bounds above, at every order the engine uses (the patch's bins per
  // fiber: 74 by default, fewer at the ends of the CCD; 1 to 148 here). The lanes are
  // chosen to converge differently: spectra log-uniform over conditions 10 to 1e12,
  // clustered and repeated eigenvalues, graded ones (geometric from 1 down to 2^-40), an already diagonal matrix (no sweep at all) and an
  // indefinite one, side by side in one call, and lanes scaled near both ends of the
  // double range beside an unscaled one. Orthogonality of implicit QL is O(n eps)
  // like MRRR's, so the 1e-12 bound holds (measured values printed). Bounds as in
  // verify(), except the whitening of A by Q = A^-1/2 (max |Q A Q - I|): there the
  // bound is the backward-error one, n eps cond. QL's orthogonality (2-9e-15, dstedc's
  // ~1e-15) enters Q A Q - I times sqrt(cond), and its small eigenpairs' residuals
  // (n eps ||A||) divided by the smallest eigenvalue: measured 2-15x dsyevd's at
  // conditions 1e6 and 1e12 (e.g. 5e-12 against 3e-13, 1e-5 against 2e-6), within
  // n eps cond by two decades or more; a wrong eigenpair gives O(1).
  void batchOfFourAgainstDsyevd() { batchOfFour(EigenVectors::QL); }
  // The same with the eigenvectors of T by twisted factorizations and CholQR
  // (EigenVectors::Twisted), same bounds. The twisted path must be the one taken: only
  // lanes with eigenvalues within 30 eps ||T|| of each other in one unreduced block of
  // T (the clustered and repeated spectra; the diagonal matrix splits T into 1 x 1
  // blocks and stays) may go to dstedc.
  void twistedBatchOfFourAgainstDsyevd() { batchOfFour(EigenVectors::Twisted); }

private:
  void batchOfFour(EigenVectors vectors) {
    std::mt19937 rng(41);
    auto scaled = [](Mat m, double f) {
      for (double& x : m) x *= f;
      return m;
    };
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::normal_distribution<double> g;
    SymEigen eig; // reused across sizes and calls, as the engine does
    eig.setVectors(vectors);
    double worst[4] = {0, 0, 0, 0}; // eig, resid, orth, dQ (cond <= 1e6)
    int fallbacks = 0, lanes = 0;
    for (int n : {1, 2, 3, 4, 7, 17, 33, 50, 64, 73, 74, 74, 90, 148}) {
      auto spd = [&](double cond) {
        std::vector<double> lam(n);
        for (double& l : lam) l = std::pow(cond, u(rng));
        return withSpectrum(lam, rng);
      };
      std::vector<double> clus(n), graded(n);
      for (int i = 0; i < n; ++i) {
        clus[i] = i < n / 3 ? 2.0 : (i < 2 * n / 3 ? 5.0 + 1e-12 * i : 1.0 + i);
        graded[i] = std::pow(0.5, n > 1 ? 40.0 * i / (n - 1) : 0.0);
      }
      Mat diag(std::size_t(n) * n, 0.0), indef(std::size_t(n) * n);
      for (int i = 0; i < n; ++i) diag[i + std::size_t(i) * n] = 1.0 + (i * 7) % 5;
      for (int c = 0; c < n; ++c)
        for (int r = c; r < n; ++r) indef[r + std::size_t(c) * n] = indef[c + std::size_t(r) * n] = g(rng);
      struct Case { Mat a; bool spd; double cond; const char* what; };
      std::vector<std::vector<Case>> batches = {
          {{spd(10), true, 10, "cond 10"}, {spd(1e6), true, 1e6, "cond 1e6"}, {spd(1e12), true, 1e12, "cond 1e12"},
           {withSpectrum(clus, rng), true, 1e6, "clustered"}},
          {{withSpectrum(graded, rng), true, 1.1e12, "graded"}, {diag, true, 5, "diagonal"},
           {indef, false, 0, "indefinite"}, {spd(1e3), true, 1e3, "cond 1e3"}},
          {{spd(1e4), true, 1e4, "three: cond 1e4"}, {spd(1e8), true, 1e8, "three: cond 1e8"},
           {withSpectrum(clus, rng), true, 1e6, "three: clustered"}},
          {{spd(1e2), true, 1e2, "one: cond 1e2"}},
          // Lanes at the ends of the double range beside an unscaled one: each lane is
          // scaled into the safe range by its own factor (the reduction runs in lanes).
          {{scaled(indef, 1e300), false, 0, "scaled: indefinite x 1e300"},
           {scaled(spd(1e3), 1e-300), true, 1e3, "scaled: cond 1e3 x 1e-300"},
           {spd(1e2), true, 1e2, "scaled: cond 1e2 x 1"},
           {scaled(indef, 1e-160), false, 0, "scaled: indefinite x 1e-160"}},
      };
      for (const auto& batch : batches) {
        std::vector<Mat> a;
        std::vector<bool> s;
        for (const Case& c : batch) {
          a.push_back(c.a);
          s.push_back(c.spd);
        }
        const std::vector<Check> r = compare4(n, a, s, eig);
        for (std::size_t j = 0; j < batch.size(); ++j) {
          const bool fellBack = (eig.lastFallbacks() >> j) & 1u;
          fallbacks += fellBack;
          ++lanes;
          if (vectors == EigenVectors::Twisted && !QByteArray(batch[j].what).contains("clustered"))
            QVERIFY2(!fellBack, qPrintable(QString("n=%1 %2 went to dstedc").arg(n).arg(batch[j].what)));
          verify(r[j], batch[j].cond, qPrintable(QString("n=%1 %2").arg(n).arg(batch[j].what)),
                 std::max(n * 1.1e-16 * batch[j].cond, 1e-12));
          worst[0] = std::max(worst[0], r[j].dw);
          worst[1] = std::max(worst[1], r[j].resid);
          worst[2] = std::max(worst[2], r[j].orth);
          if (batch[j].cond <= 1e6) worst[3] = std::max(worst[3], r[j].dq);
        }
      }
    }
    qInfo("compute4 (%s) worst: eig %.1e resid %.1e orth %.1e dQ (cond <= 1e6) %.1e; %d of %d lanes by dstedc",
          vectors == EigenVectors::QL ? "QL" : "twisted", worst[0], worst[1], worst[2], worst[3], fallbacks, lanes);
  }
};

QTEST_GUILESS_MAIN(TestSymEigen)
#include "test_sym_eigen.moc"
