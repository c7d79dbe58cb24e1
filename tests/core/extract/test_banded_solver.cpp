// The block-banded Cholesky, solve and selected inversion (core/extract/banded_solver.h)
// against dense LAPACK on random SPD block-banded matrices, its non-SPD report, and
// the CPU engine on the banded path against the dense one on real-PSF patches.
#include "core/extract/banded_solver.h"
#include "core/extract/cpu_engine.h"
#include "core/extract/lapack.h"
#include "core/image.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"
#include "test_data.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

using namespace spex;

namespace {

// Random SPD matrix with blocks (i, j), |i - j| <= w, non-zero (each inside-band block
// itself banded by `inner` bins when inner >= 0, as the PSF makes the outermost ones),
// column-major n x n, both triangles.
std::vector<double> randomBandedSpd(const BlockBand& b, int inner, std::mt19937& rng) {
  const int n = b.n();
  std::normal_distribution<double> g;
  // B = sum of random local columns: A = B B^T + n I is SPD and has the block band when
  // B's column c only touches rows within w blocks... built directly instead:
  std::vector<double> a(std::size_t(n) * n, 0.0);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c <= r; ++c) {
      const int br = r / b.nb, bc = c / b.nb;
      if (br - bc > b.w) continue;
      if (inner >= 0 && br - bc == b.w && std::abs(r % b.nb - c % b.nb) > inner) continue;
      const double v = g(rng);
      a[r + std::size_t(c) * n] = v;
      a[c + std::size_t(r) * n] = v;
    }
  // Diagonal dominance makes it SPD; a wide spread of scales keeps it honest.
  for (int r = 0; r < n; ++r) {
    double s = 0;
    for (int c = 0; c < n; ++c) s += std::abs(a[r + std::size_t(c) * n]);
    a[r + std::size_t(r) * n] = s + 1.0 + 10.0 * std::abs(g(rng));
  }
  return a;
}

double maxAbs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

class NullProgress : public ProgressSink {};

} // namespace

class TestBandedSolver : public QObject {
  Q_OBJECT
  GaussHermitePsf psf;

  ExtractionResult run(const Image& img, const WaveGrid& g, int f0, int nf, NormalSolver solver,
                       Decorrelation mode = Decorrelation::Signal,
                       EigenVectors vectors = EigenVectors::Twisted) {
    ExtractionRequest req;
    req.image = &img;
    req.psf = &psf;
    req.wave = g;
    req.fiberMin = f0;
    req.nFiber = nf;
    req.params.mode = mode;
    req.threads = 2;
    NullProgress np;
    CancelToken ct;
    CpuEngineOptions o;
    o.solver = solver;
    o.eigenVectors = vectors;
    return CpuEngine(o).extract(req, np, ct);
  }

  // Relative agreement of two results of the same request: flux in units of its sigma,
  // ivar relative, R absolute (its rows sum to 1), f relative to the largest |f|.
  static void requireSame(const ExtractionResult& a, const ExtractionResult& b, double tol,
                          const char* what = "banded vs dense") {
    QCOMPARE(a.patches.size(), b.patches.size());
    double dflux = 0, divar = 0, dres = 0, df = 0, fmax = 0, dchi = 0;
    for (std::size_t i = 0; i < a.flux.data.size(); ++i) {
      const double s = std::sqrt(std::max(a.ivar.data[i], 0.0));
      dflux = std::max(dflux, std::abs(a.flux.data[i] - b.flux.data[i]) * s);
      if (a.ivar.data[i] > 0)
        divar = std::max(divar, std::abs(a.ivar.data[i] - b.ivar.data[i]) / a.ivar.data[i]);
      df = std::max(df, std::abs(a.deconvolved.data[i] - b.deconvolved.data[i]));
      fmax = std::max(fmax, std::abs(a.deconvolved.data[i]));
      dchi = std::max(dchi, std::abs(a.chi2pix.data[i] - b.chi2pix.data[i]) /
                                std::max(1.0, std::abs(a.chi2pix.data[i])));
      QCOMPARE(a.mask.data[i], b.mask.data[i]);
    }
    for (std::size_t i = 0; i < a.resolution.data.size(); ++i)
      dres = std::max(dres, std::abs(a.resolution.data[i] - b.resolution.data[i]));
    qInfo("%s: |dflux| sqrt(ivar) %.2e, divar/ivar %.2e, |dR| %.2e, |df|/max|f| %.2e, "
          "dchi2pix %.2e",
          what, dflux, divar, dres, df / fmax, dchi);
    QVERIFY2(dflux < tol, qPrintable(QString::number(dflux)));
    QVERIFY2(divar < tol, qPrintable(QString::number(divar)));
    QVERIFY2(dres < tol, qPrintable(QString::number(dres)));
    QVERIFY2(df < tol * fmax, qPrintable(QString::number(df / fmax)));
    QVERIFY2(dchi < tol, qPrintable(QString::number(dchi)));
    for (std::size_t i = 0; i < a.patches.size(); ++i) {
      QCOMPARE(a.patches[i].regularized, b.patches[i].regularized);
      QCOMPARE(a.patches[i].failed, b.patches[i].failed);
    }
  }

private slots:
  void initTestCase() { lapack::singleThreadedBlas(); }

  void randomBandedMatchesDense_data() {
    QTest::addColumn<int>("nblk");
    QTest::addColumn<int>("nb");
    QTest::addColumn<int>("w");
    QTest::addColumn<int>("inner");
    QTest::newRow("7x74 w2 inner7 (DESI)") << 7 << 74 << 2 << 7;
    QTest::newRow("7x74 w2 dense blocks") << 7 << 74 << 2 << -1;
    QTest::newRow("6x74 w1") << 6 << 74 << 1 << -1;
    QTest::newRow("5x20 w0") << 5 << 20 << 0 << -1;
    QTest::newRow("7x30 w3") << 7 << 30 << 3 << -1;
    QTest::newRow("4x25 w3 (full)") << 4 << 25 << 3 << -1;
    QTest::newRow("9x13 w5 over the end") << 9 << 13 << 5 << 4;
    QTest::newRow("1x50 single block") << 1 << 50 << 0 << -1;
  }

  void randomBandedMatchesDense() {
    QFETCH(int, nblk);
    QFETCH(int, nb);
    QFETCH(int, w);
    QFETCH(int, inner);
    const BlockBand b{nblk, nb, w};
    const int n = b.n();
    std::mt19937 rng(1234 + nblk * 100 + nb + w);
    const std::vector<double> a = randomBandedSpd(b, inner, rng);

    // Dense reference: L, x = A^-1 y, C = A^-1 (potrf, potrs, trtri + lauum).
    std::vector<double> ld = a;
    QCOMPARE(lapack::potrf(n, ld.data(), n), 0);
    std::vector<double> y(n), xd(n);
    std::normal_distribution<double> g;
    for (double& v : y) v = g(rng);
    xd = y;
    QCOMPARE(lapack::potrs(n, 1, ld.data(), n, xd.data(), n), 0);
    std::vector<double> cd = ld;
    QCOMPARE(lapack::trtri(n, cd.data(), n), 0);
    QCOMPARE(lapack::lauum(n, cd.data(), n), 0); // lower triangle of L^-T L^-1 = A^-1

    std::vector<double> lb = a;
    QCOMPARE(BandedCholesky::factor(b, lb.data(), n), 0);
    // The factor inside the band equals LAPACK's.
    double dl = 0, lmax = 0;
    for (int c = 0; c < n; ++c)
      for (int r = c; r < n && r / nb - c / nb <= w; ++r) {
        dl = std::max(dl, std::abs(lb[r + std::size_t(c) * n] - ld[r + std::size_t(c) * n]));
        lmax = std::max(lmax, std::abs(ld[r + std::size_t(c) * n]));
      }
    QVERIFY2(dl < 1e-12 * lmax, qPrintable(QString::number(dl / lmax)));
    std::vector<double> xb = y;
    BandedCholesky::solve(b, lb.data(), n, xb.data());
    double dx = 0;
    for (int i = 0; i < n; ++i) dx = std::max(dx, std::abs(xb[i] - xd[i]));
    QVERIFY2(dx < 1e-10 * maxAbs(xd), qPrintable(QString::number(dx / maxAbs(xd))));

    // Selected inverse: every band block from jmin on equals the dense inverse's.
    for (int jmin : {0, std::min(1, nblk - 1)}) {
      std::vector<double> cb(std::size_t(n) * n, std::numeric_limits<double>::quiet_NaN());
      BandedCholesky sel;
      sel.selectedInverse(b, lb.data(), n, cb.data(), n, jmin);
      double dc = 0, cmax = 0;
      int checked = 0;
      for (int c = jmin * nb; c < n; ++c)
        for (int r = c; r < n && r / nb - c / nb <= w; ++r) {
          const double ref = cd[r + std::size_t(c) * n], got = cb[r + std::size_t(c) * n];
          QVERIFY(std::isfinite(got));
          dc = std::max(dc, std::abs(got - ref));
          cmax = std::max(cmax, std::abs(ref));
          ++checked;
        }
      QVERIFY(checked > 0);
      QVERIFY2(dc < 1e-10 * cmax, qPrintable(QString::number(dc / cmax)));
    }
    qInfo("n %d: banded %.3g vs dense %.3g multiply-adds", n, b.bandedFma(0), b.denseFma(0, nblk));
  }

  // invertLower (the diagonal blocks' inverse in the selected inversion) against
  // LAPACK's dtrtri on Cholesky factors of random SPD matrices, well conditioned and
  // up to condition ~1e10 (a geometric spread of the diagonal): agreement within
  // n eps cond(L) of the largest entry, L X = I as closely as dtrtri's X gives it,
  // and nothing above the diagonal or outside the n x n corner written.
  void invertLowerMatchesLapack_data() {
    QTest::addColumn<int>("n");
    QTest::addColumn<double>("spread"); // ratio of the largest to the smallest diagonal scale
    for (int n : {1, 2, 3, 4, 5, 7, 17, 73, 74, 75, 148})
      for (double spread : {1.0, 1e5}) QTest::addRow("n%d_spread%g", n, spread) << n << spread;
  }
  void invertLowerMatchesLapack() {
    QFETCH(int, n);
    QFETCH(double, spread);
    std::mt19937 rng(1000 + n);
    std::normal_distribution<double> g;
    const int ld = n + 3; // a leading dimension larger than n
    std::vector<double> a(std::size_t(ld) * n, 0.0);
    for (int c = 0; c < n; ++c)
      for (int r = c; r < n; ++r) a[r + std::size_t(c) * ld] = g(rng);
    // SPD: M M^T + n I, then scaled by D M D with D a geometric spread.
    std::vector<double> m(std::size_t(n) * n, 0.0);
    for (int c = 0; c < n; ++c)
      for (int r = c; r < n; ++r) {
        double s = r == c ? n : 0.0;
        for (int k = 0; k <= c; ++k) s += a[r + std::size_t(k) * ld] * a[c + std::size_t(k) * ld];
        const double dr = std::pow(spread, double(r) / std::max(1, n - 1) - 0.5);
        const double dc = std::pow(spread, double(c) / std::max(1, n - 1) - 0.5);
        m[r + std::size_t(c) * n] = s * dr * dc;
      }
    QCOMPARE(lapack::potrf(n, m.data(), n), 0);
    const double sentinel = -12345.0;
    std::vector<double> x(std::size_t(ld) * n, sentinel), ref(std::size_t(n) * n, 0.0);
    for (int c = 0; c < n; ++c)
      for (int r = c; r < n; ++r) {
        x[r + std::size_t(c) * ld] = m[r + std::size_t(c) * n];
        ref[r + std::size_t(c) * n] = m[r + std::size_t(c) * n];
      }
    QCOMPARE(lapack::trtri(n, ref.data(), n), 0);
    invertLower(n, x.data(), ld);
    double xmax = 0, dmax = 0, res = 0, resRef = 0;
    for (int c = 0; c < n; ++c)
      for (int r = 0; r < ld; ++r) {
        const double xv = x[r + std::size_t(c) * ld];
        if (r < c || r >= n) {
          QCOMPARE(xv, sentinel);
          continue;
        }
        xmax = std::max(xmax, std::abs(ref[r + std::size_t(c) * n]));
        dmax = std::max(dmax, std::abs(xv - ref[r + std::size_t(c) * n]));
      }
    // Residual of each column: |L x_c - e_c| relative to |L| |x_c| (backward error).
    for (int c = 0; c < n; ++c)
      for (int r = c; r < n; ++r) {
        double s = 0, sr = 0, mag = 0, magr = 0;
        for (int k = c; k <= r; ++k) {
          const double l = m[r + std::size_t(k) * n];
          s += l * x[k + std::size_t(c) * ld];
          sr += l * ref[k + std::size_t(c) * n];
          mag += std::abs(l * x[k + std::size_t(c) * ld]);
          magr += std::abs(l * ref[k + std::size_t(c) * n]);
        }
        const double e = r == c ? 1.0 : 0.0;
        res = std::max(res, std::abs(s - e) / mag);
        resRef = std::max(resRef, std::abs(sr - e) / magr);
      }
    const double eps = std::numeric_limits<double>::epsilon();
    // cond(L) = sqrt(cond(M)) <= ~spread * sqrt(4): the forward error bound n eps cond.
    const double tol = n * eps * std::max(2.0, 2.0 * spread);
    QVERIFY2(dmax <= tol * xmax, qPrintable(QString("rel diff %1, bound %2").arg(dmax / xmax).arg(tol)));
    QVERIFY2(res <= std::max(4 * n * eps, 4 * resRef), qPrintable(QString("residual %1 (dtrtri %2)").arg(res).arg(resRef)));
  }

  void notPositiveDefiniteIsReported() {
    // Negating one diagonal entry deep in the band: both factorisations must fail, at
    // the same leading minor.
    const BlockBand b{6, 40, 2};
    const int n = b.n();
    std::mt19937 rng(7);
    std::vector<double> a = randomBandedSpd(b, -1, rng);
    const int bad = 3 * 40 + 17;
    a[bad + std::size_t(bad) * n] = -a[bad + std::size_t(bad) * n];
    std::vector<double> ld = a, lb = a;
    const int infoDense = lapack::potrf(n, ld.data(), n);
    const int infoBand = BandedCholesky::factor(b, lb.data(), n);
    QVERIFY(infoDense > 0);
    QCOMPARE(infoBand, infoDense);
    QCOMPARE(infoBand, bad + 1);
  }

  void realPatchesBandedMatchesDense() {
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    psf = readPsf(path);
    // Two bundles' edges and a middle sub-bundle, at the blue end, the middle and the red
    // end of the r grid (the PSF changes across the CCD).
    for (const auto& [w0, w1, f0, nf] : {std::tuple{5760.0, 5960.0, 0, 30},
                                         std::tuple{6700.0, 6900.0, 245, 10},
                                         std::tuple{7420.0, 7620.0, 470, 30}}) {
      SimulationOptions so;
      so.wave = WaveGrid::fromRange(w0, w1, 0.8);
      so.fiberMin = f0;
      so.nFiber = nf;
      const Simulation sim = simulate(psf, so);
      const ExtractionResult dense = run(sim.image, so.wave, f0, nf, NormalSolver::Dense);
      const ExtractionResult banded = run(sim.image, so.wave, f0, nf, NormalSolver::Banded);
      const ExtractionResult automatic = run(sim.image, so.wave, f0, nf, NormalSolver::Auto);
      requireSame(dense, banded, 1e-10);
      // Auto picks the band for the DESI PSF, so it is the banded result bit for bit.
      for (std::size_t i = 0; i < banded.flux.data.size(); ++i)
        QCOMPARE(automatic.flux.data[i], banded.flux.data[i]);
    }
  }

  // The fiber blocks' eigenvectors by twisted factorizations and CholQR (the default)
  // against QL's rotations, on the same real patches: both are backward-stable
  // decompositions of each block (residuals and orthogonality of a few eps), so C_s^-1/2
  // and what follows from it differ by ~eps cond(C_s), far below 1e-10 at the blocks'
  // conditions (a wrong vector gives O(1)).
  void realPatchesTwistedMatchesQl() {
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    psf = readPsf(path);
    for (const auto& [w0, w1, f0, nf] : {std::tuple{5760.0, 5960.0, 0, 30},
                                         std::tuple{7420.0, 7620.0, 470, 30}}) {
      SimulationOptions so;
      so.wave = WaveGrid::fromRange(w0, w1, 0.8);
      so.fiberMin = f0;
      so.nFiber = nf;
      const Simulation sim = simulate(psf, so);
      requireSame(run(sim.image, so.wave, f0, nf, NormalSolver::Auto, Decorrelation::Signal, EigenVectors::QL),
                  run(sim.image, so.wave, f0, nf, NormalSolver::Auto, Decorrelation::Signal, EigenVectors::Twisted),
                  1e-10, "twisted vs QL");
    }
  }

  void noiseModeBandedMatchesDense() {
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    psf = readPsf(path);
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6500, 6600, 0.8);
    so.fiberMin = 20;
    so.nFiber = 10;
    const Simulation sim = simulate(psf, so);
    requireSame(run(sim.image, so.wave, 20, 10, NormalSolver::Dense, Decorrelation::Noise),
                run(sim.image, so.wave, 20, 10, NormalSolver::Banded, Decorrelation::Noise), 1e-10);
  }

  void nonSpdPatchesRetriedAndFlaggedAlike() {
    // An infinite weight on one pixel makes the normal equations of the patches that see
    // it non-finite: both paths fail, retry with regularisation, fail again, flag the
    // patches and zero their bins; every other patch agrees to rounding.
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    psf = readPsf(path);
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6200, 6500, 0.8);
    so.fiberMin = 0;
    so.nFiber = 25;
    Simulation sim = simulate(psf, so);
    const int yc = int(std::lround(psf.y(12, 6300))), xc = int(std::lround(psf.x(12, 6300)));
    sim.image.ivar(yc, xc) = std::numeric_limits<double>::infinity();
    const ExtractionResult dense = run(sim.image, so.wave, 0, 25, NormalSolver::Dense);
    const ExtractionResult banded = run(sim.image, so.wave, 0, 25, NormalSolver::Banded);
    int failed = 0, regularized = 0;
    for (const PatchDiagnostics& d : banded.patches) {
      failed += d.failed;
      regularized += d.regularized;
    }
    QVERIFY(failed > 0);
    QVERIFY(regularized >= failed);
    requireSame(dense, banded, 1e-10);
  }
};

QTEST_GUILESS_MAIN(TestBandedSolver)
#include "test_banded_solver.moc"
