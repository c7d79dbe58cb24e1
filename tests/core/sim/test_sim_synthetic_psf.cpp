// The synthetic PSF looks like a DESI r camera: geometry (bundles, margins, curved
// traces, dispersion), spot shapes (sigmas, GH terms) and the file-level conventions
// (unequal domains, degrees, BUNDLE), and it is reproducible from its seed.
#include "core/errors.h"
#include "core/psf/legendre.h"
#include "core/sim/simulator.h"

#include <QTest>
#include <algorithm>
#include <cmath>

using namespace spex;

class TestSimSyntheticPsf : public QObject {
  Q_OBJECT
  GaussHermitePsf psf;

private slots:
  void initTestCase() { psf = makeSyntheticPsf(); }

  void fileConventions() {
    QCOMPARE(psf.nfiber, 500);
    QCOMPARE(psf.fiberMin, 0);
    QCOMPARE(psf.npixX, 4114);
    QCOMPARE(psf.npixY, 4128);
    QCOMPARE(psf.hsizeX, 8);
    QCOMPARE(psf.hsizeY, 5);
    QCOMPARE(psf.ghdegX, 6);
    QCOMPARE(psf.ghdegY, 6);
    QCOMPARE(psf.legdeg, 3);
    QCOMPARE(psf.psfErr, 0.01);
    QCOMPARE(psf.xTrace.ncoeff(), 6);
    QCOMPARE(psf.yTrace.ncoeff(), 6);
    QCOMPARE(psf.ghSigX.ncoeff(), 4);
    QCOMPARE(psf.gh.size(), std::size_t(49));
    // Trace and parameter domains differ, so nothing downstream can assume they match.
    QCOMPARE(psf.xTrace.wavemin, 5545.0);
    QCOMPARE(psf.xTrace.wavemax, 7805.0);
    QCOMPARE(psf.ghSigX.wavemin, 5540.0);
    QCOMPARE(psf.ghSigX.wavemax, 7810.0);
    QCOMPARE(psf.waveMin(), 5545.0);
    QCOMPARE(psf.waveMax(), 7805.0);
    QVERIFY(psf.otherParams.count("BUNDLE"));
    const LegendreSet& b = psf.otherParams.at("BUNDLE");
    for (int s = 0; s < 500; s += 13) QCOMPARE(b.eval(s, 6500.0), double(s / 25));
    psf.validate();
  }

  void tracesOnCcdAndMonotonic() {
    for (int s = 0; s < psf.nfiber; ++s) {
      double prevY = -1e9;
      for (double w = psf.waveMin(); w <= psf.waveMax(); w += 5.0) {
        const double x = psf.x(s, w), y = psf.y(s, w);
        // Whole spot columns on the CCD at every wavelength.
        QVERIFY2(x - psf.hsizeX >= 0 && x + psf.hsizeX < psf.npixX - 1,
                 qPrintable(QString("fiber %1 x %2 at %3").arg(s).arg(x).arg(w)));
        // Rows from near 0 to near NPIX_Y; the DESI r grid 5760-7620 is well inside.
        QVERIFY(y > -15 && y < psf.npixY + 15);
        if (w >= 5760 && w <= 7620) QVERIFY(y - psf.hsizeY >= 0 && y + psf.hsizeY < psf.npixY);
        // ~1.8 rows per Angstrom, always increasing.
        if (prevY > -1e9)
          QVERIFY2(y - prevY > 5 * 1.5 && y - prevY < 5 * 2.2,
                   qPrintable(QString::number(y - prevY)));
        prevY = y;
      }
      const double aPerRow = 2250.0 / (psf.y(s, 7800) - psf.y(s, 5550));
      QVERIFY2(aPerRow > 0.53 && aPerRow < 0.57, qPrintable(QString::number(aPerRow)));
      QVERIFY(psf.y(s, 5550) > -10 && psf.y(s, 5550) < 30);
      QVERIFY(psf.y(s, 7800) > psf.npixY - 30 && psf.y(s, 7800) < psf.npixY + 10);
    }
  }

  void bundleGeometry() {
    for (double w : {5550.0, 6000.0, 6700.0, 7300.0, 7800.0}) {
      double maxPitch = 0, minGap = 1e9;
      for (int s = 0; s + 1 < psf.nfiber; ++s) {
        const double d = psf.x(s + 1, w) - psf.x(s, w);
        if ((s + 1) % 25 == 0)
          minGap = std::min(minGap, d);
        else {
          QVERIFY2(d > 6.5 && d < 8.1, qPrintable(QString("pitch %1 at fiber %2").arg(d).arg(s)));
          maxPitch = std::max(maxPitch, d);
        }
      }
      // Bundle gaps clearly wider than the pitch inside a bundle (DESI r: ~19 vs 7.2).
      QVERIFY2(minGap > 2 * maxPitch,
               qPrintable(QString("gap %1 pitch %2").arg(minGap).arg(maxPitch)));
      // 20..60 px margins: the fibers span most of the CCD.
      QVERIFY(psf.x(0, w) > 20 && psf.x(0, w) < 60);
      QVERIFY(psf.x(499, w) < psf.npixX - 20 && psf.x(499, w) > psf.npixX - 60);
    }
  }

  void tracesAreCurved() {
    auto excursion = [&](int s) {
      double lo = 1e9, hi = -1e9;
      for (double w = 5550; w <= 7800; w += 10) {
        lo = std::min(lo, psf.x(s, w));
        hi = std::max(hi, psf.x(s, w));
      }
      return hi - lo;
    };
    // A mild smile: a few pixels, more at the CCD edges than in the middle.
    const double edge = std::min(excursion(0), excursion(499)), mid = excursion(250);
    QVERIFY2(edge > 3 && edge < 12, qPrintable(QString::number(edge)));
    QVERIFY2(mid > 0.5 && mid < edge, qPrintable(QString::number(mid)));
    // y(w) is not just linear: the second difference is non-zero.
    for (int s : {0, 250, 499}) {
      const double curv = psf.y(s, 7800) - 2 * psf.y(s, 6675) + psf.y(s, 5550);
      QVERIFY2(std::fabs(curv) > 20, qPrintable(QString::number(curv)));
    }
  }

  void sigmasAndShapeTerms() {
    double sxLo = 9, sxHi = 0, syLo = 9, syHi = 0;
    for (int s = 0; s < psf.nfiber; s += 3)
      for (double w = psf.waveMin(); w <= psf.waveMax(); w += 20) {
        const double sx = psf.ghSigX.eval(s, w), sy = psf.ghSigY.eval(s, w);
        sxLo = std::min(sxLo, sx);
        sxHi = std::max(sxHi, sx);
        syLo = std::min(syLo, sy);
        syHi = std::max(syHi, sy);
        QCOMPARE(psf.ghCoeff(0, 0).eval(s, w), 1.0);
        for (int i = 0; i <= 6; ++i)
          for (int j = 0; j <= 6; ++j) {
            if (i + j == 0) continue;
            const double g = psf.ghCoeff(i, j).eval(s, w);
            QVERIFY2(std::fabs(g) < 0.06,
                     qPrintable(QString("GH-%1-%2 = %3").arg(i).arg(j).arg(g)));
          }
      }
    QVERIFY2(sxLo > 0.95 && sxHi < 1.3 && sxHi - sxLo > 0.1,
             qPrintable(QString("%1 %2").arg(sxLo).arg(sxHi)));
    QVERIFY2(syLo > 1.0 && syHi < 1.35 && syHi - syLo > 0.1,
             qPrintable(QString("%1 %2").arg(syLo).arg(syHi)));
    // Higher orders are exactly zero: no hidden structure the tests do not know of.
    for (int i = 0; i <= 6; ++i)
      for (int j = 0; j <= 6; ++j)
        if (i + j > 4)
          for (double c : psf.ghCoeff(i, j).coeff.data) QCOMPARE(c, 0.0);
    // Low-order terms vary with wavelength.
    QVERIFY(std::fabs(psf.ghCoeff(0, 2).eval(100, 5600) - psf.ghCoeff(0, 2).eval(100, 7700)) >
            0.005);
  }

  // Every spot non-negative, unit sum, centred on the trace and peaked in the centre
  // pixel region, for fibers across the CCD and wavelengths across (and beyond the
  // trace domain into) the PSF domain.
  void spotsAreSane() {
    Spot sp;
    for (int s = 0; s < psf.nfiber; s += 7)
      for (double w = psf.waveMin(); w <= psf.waveMax(); w += 37.3) {
        psf.spotInto(s, w, sp);
        QCOMPARE(sp.nx, 17);
        QCOMPARE(sp.ny, 11);
        double sum = 0, cx = 0, cy = 0, peak = -1;
        int px = -1, py = -1;
        for (int iy = 0; iy < sp.ny; ++iy)
          for (int ix = 0; ix < sp.nx; ++ix) {
            const double v = sp.at(iy, ix);
            QVERIFY(v >= 0.0);
            sum += v;
            cx += v * (sp.xc + ix);
            cy += v * (sp.yc + iy);
            if (v > peak) {
              peak = v;
              px = ix;
              py = iy;
            }
          }
        QVERIFY(std::fabs(sum - 1.0) < 1e-12);
        // Asymmetric GH terms are a few percent: the centroid stays within 0.15 px.
        QVERIFY2(std::fabs(cx - psf.x(s, w)) < 0.15 && std::fabs(cy - psf.y(s, w)) < 0.15,
                 qPrintable(QString("fiber %1 w %2: centroid off by %3, %4")
                                .arg(s)
                                .arg(w)
                                .arg(cx - psf.x(s, w))
                                .arg(cy - psf.y(s, w))));
        QVERIFY(std::abs(px - 8) <= 1 && std::abs(py - 5) <= 1);
        QVERIFY(peak > 0.05 && peak < 0.2); // sigma ~1.1 px: ~13% in the peak pixel
      }
  }

  void reproducibleFromSeed() {
    const GaussHermitePsf again = makeSyntheticPsf();
    QVERIFY(again.xTrace.coeff.data == psf.xTrace.coeff.data);
    QVERIFY(again.yTrace.coeff.data == psf.yTrace.coeff.data);
    QVERIFY(again.ghSigY.coeff.data == psf.ghSigY.coeff.data);
    QVERIFY(again.ghCoeff(1, 1).coeff.data == psf.ghCoeff(1, 1).coeff.data);
    SyntheticPsfOptions o;
    o.seed = 2;
    const GaussHermitePsf other = makeSyntheticPsf(o);
    QVERIFY(other.xTrace.coeff.data != psf.xTrace.coeff.data);
    QVERIFY(other.ghSigX.coeff.data != psf.ghSigX.coeff.data);
    // Only small per-fiber perturbations: the geometry stays the same to < 1.5 px.
    for (int s = 0; s < 500; s += 11) QVERIFY(std::fabs(other.x(s, 6500) - psf.x(s, 6500)) < 1.5);
  }

  void smallerConfigurations() {
    SyntheticPsfOptions o;
    o.nfiber = 50;
    o.npixX = 700;
    o.npixY = 1000;
    o.legdeg = 1;
    o.ghdeg = 2;
    const GaussHermitePsf small = makeSyntheticPsf(o);
    QCOMPARE(small.nfiber, 50);
    QCOMPARE(small.ghSigX.ncoeff(), 2);
    QCOMPARE(small.gh.size(), std::size_t(9));
    QVERIFY(small.x(0, 6000) > 20 && small.x(49, 6000) < 680);
    QVERIFY(small.y(10, 7800) > 950 && small.y(10, 7800) < 1000);
    o.npixX = 300; // 50 fibers need ~380 columns
    QVERIFY_THROWS_EXCEPTION(InputError, makeSyntheticPsf(o));
  }

  void legendreFit() {
    // Exact for polynomials below the degree; coefficients in the file convention.
    auto cubic = [](double w) {
      const double t = (w - 6000) / 1000;
      return 3 - 2 * t + 0.5 * t * t * t;
    };
    const std::vector<double> c = fitLegendre(cubic, 5500, 7800, 4);
    for (double w = 5500; w <= 7800; w += 17.1)
      QVERIFY(std::fabs(legendreSum(c.data(), 4, legendreU(w, 5500, 7800)) - cubic(w)) < 1e-12);
    const std::vector<double> c6 = fitLegendre(cubic, 5500, 7800, 6);
    QVERIFY(std::fabs(c6[4]) < 1e-13 && std::fabs(c6[5]) < 1e-13);
    // A smooth non-polynomial is approximated closely.
    auto smooth = [](double w) { return std::sin(2.2 * (w - 6650) / 1150); };
    const std::vector<double> s = fitLegendre(smooth, 5500, 7800, 6);
    for (double w = 5500; w <= 7800; w += 9.7)
      QVERIFY(std::fabs(legendreSum(s.data(), 6, legendreU(w, 5500, 7800)) - smooth(w)) < 1e-3);
  }
};

QTEST_GUILESS_MAIN(TestSimSyntheticPsf)
#include "test_sim_synthetic_psf.moc"
