// Spots and traces of the real r0 PSF: the Legendre and Gauss-Hermite evaluations
// against independent formulas, spot normalisation and placement.
#include "core/io/psf_io.h"
#include "core/psf/gauss_hermite_psf.h"
#include "core/psf/legendre.h"
#include "test_data.h"

#include <QTest>
#include <algorithm>
#include <cmath>

using namespace spex;

class TestGaussHermitePsf : public QObject {
  Q_OBJECT
  GaussHermitePsf psf;

private slots:
  void initTestCase() {
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    psf = readPsf(path);
  }

  void legendreMatchesClosedForms() {
    // P0..P4 written out; the recurrence must reproduce them at any u.
    for (double u : {-1.0, -0.73, 0.0, 0.31, 1.0}) {
      const double p[5] = {1, u, 0.5 * (3 * u * u - 1), 0.5 * (5 * u * u * u - 3 * u),
                           (35 * std::pow(u, 4) - 30 * u * u + 3) / 8};
      for (int k = 0; k < 5; ++k) {
        double c[5] = {0, 0, 0, 0, 0};
        c[k] = 1;
        QVERIFY2(std::abs(legendreSum(c, 5, u) - p[k]) < 1e-14, qPrintable(QString("P%1(%2)").arg(k).arg(u)));
      }
    }
  }

  void tracesAreLegendreSumsOfFileCoefficients() {
    // x(w) straight from the coefficients, summed with explicit P_k, not the recurrence.
    for (int fiber : {0, 13, 250, 499})
      for (double w : {5760.0, 6000.0, 6789.1, 7620.0}) {
        const double u = 2 * (w - psf.xTrace.wavemin) / (psf.xTrace.wavemax - psf.xTrace.wavemin) - 1;
        double sum = 0, pkm1 = 0, pk = 1;
        for (int k = 0; k < psf.xTrace.ncoeff(); ++k) {
          sum += psf.xTrace.coeff(fiber, k) * pk;
          const double next = ((2 * k + 1) * u * pk - k * pkm1) / (k + 1);
          pkm1 = pk;
          pk = next;
        }
        QVERIFY(std::abs(psf.x(fiber, w) - sum) < 1e-9);
        QVERIFY(psf.x(fiber, w) > 0 && psf.x(fiber, w) < psf.npixX);
        QVERIFY2(psf.y(fiber, w) > 0 && psf.y(fiber, w) < psf.npixY, qPrintable(QString("y(%1, %2) = %3").arg(fiber).arg(w).arg(psf.y(fiber, w)))); // DESI r grid 5760..7620 A is on the CCD
      }
  }

  void basisMatchesQuadrature() {
    // Degree k of the basis is the integral over the pixel of He_k(t) g(t) dt in
    // units of t; check against Simpson's rule on a fine grid.
    const int hsize = 5, deg = 6, n = 2 * hsize + 1;
    const double d = 0.27, sigma = 1.13;
    std::vector<double> b((deg + 1) * n);
    gaussHermiteBasis(deg, hsize, d, sigma, b.data());
    auto he = [](int k, double t) {
      double hm1 = 0, h = 1;
      for (int i = 0; i < k; ++i) {
        const double hn = t * h - i * hm1;
        hm1 = h;
        h = hn;
      }
      return h;
    };
    for (int k = 0; k <= deg; ++k)
      for (int c = 0; c < n; ++c) {
        const double t0 = ((c - hsize) - 0.5 - d) / sigma, t1 = ((c - hsize) + 0.5 - d) / sigma;
        const int m = 2000;
        const double h = (t1 - t0) / m;
        double s = 0;
        for (int i = 0; i <= m; ++i) {
          const double t = t0 + i * h;
          const double f = he(k, t) * std::exp(-0.5 * t * t) / std::sqrt(2 * M_PI);
          s += f * (i == 0 || i == m ? 1 : (i % 2 ? 4 : 2));
        }
        s *= h / 3;
        QVERIFY2(std::abs(b[k * n + c] - s) < 1e-10,
                 qPrintable(QString("degree %1 pixel %2: %3 vs %4").arg(k).arg(c).arg(b[k * n + c]).arg(s)));
      }
  }

  void basisMatchesLibmFormula() {
    // gaussHermiteBasis evaluates erf and the Gaussian four pixel edges at a time with its
    // own polynomials (docs/benchmarks.md, "CPU engine, ninth pass"); here the same
    // formula with glibc's std::erf and std::exp per edge. glibc's erf is within 1.1e-16 of
    // the truth, the lanes' within 6e-16 (a degree-36 polynomial for erfc e^(x^2) evaluated
    // in doubles; erf's values are O(1) and the basis takes differences), the Gaussians
    // within a few ulp relative: 1e-15 absolute bounds every value (the values are <= 0.5). Widths from 0.05 pixel (edges far in the tails, where erf
    // is +-1 and the Gaussian underflows) to 20 pixels, offsets across [-0.5, 0.5).
    const int hsize = 8, deg = 6, n = 2 * hsize + 1;
    std::vector<double> b((deg + 1) * n);
    double worst = 0;
    // (sigma 1 and 0.75 with fine offsets: erf's argument passes densely through [0, 6.2],
    // every interval of its approximation and the joins at 1, 2, 3.5 and 6.)
    for (double sigma : {0.05, 0.3, 0.7, 0.75, 0.93, 1.0, 1.1, 1.37, 2.0, 3.3, 7.0, 20.0})
      for (double d = -0.5; d < 0.5; d += (sigma == 1.0 || sigma == 0.75) ? 0.0007 : 0.0371) {
        gaussHermiteBasis(deg, hsize, d, sigma, b.data());
        for (int c = 0; c < n; ++c) {
          const double t0 = ((c - hsize) - 0.5 - d) / sigma, t1 = ((c - hsize) + 0.5 - d) / sigma;
          const double ref0 = 0.5 * (std::erf(t1 * M_SQRT1_2) - std::erf(t0 * M_SQRT1_2));
          worst = std::max(worst, std::abs(b[c] - ref0));
          double h0 = 1, h0m = 0, h1 = 1, h1m = 0; // He_{k-1} at both edges
          const double g0 = std::exp(-0.5 * t0 * t0) / std::sqrt(2 * M_PI);
          const double g1 = std::exp(-0.5 * t1 * t1) / std::sqrt(2 * M_PI);
          for (int k = 1; k <= deg; ++k) {
            const double ref = h0 * g0 - h1 * g1;
            worst = std::max(worst, std::abs(b[k * n + c] - ref) / std::max(1.0, std::abs(h0) + std::abs(h1)));
            const double n0 = t0 * h0 - (k - 1) * h0m, n1 = t1 * h1 - (k - 1) * h1m;
            h0m = h0;
            h0 = n0;
            h1m = h1;
            h1 = n1;
          }
        }
      }
    QVERIFY2(worst < 1e-15, qPrintable(QString("largest difference %1").arg(worst)));
    qInfo("basis vs glibc erf/exp: largest difference %.2g", worst);
  }

  void spotsAreNonNegativeAndSumToOne() {
    int checked = 0;
    for (int fiber = 0; fiber < psf.nfiber; fiber += 37)
      for (double w = psf.waveMin(); w <= psf.waveMax(); w += 157.3) {
        const Spot s = psf.spot(fiber, w);
        QCOMPARE(s.nx, 2 * psf.hsizeX + 1);
        QCOMPARE(s.ny, 2 * psf.hsizeY + 1);
        double sum = 0, peak = 0;
        int ipeak = 0;
        for (std::size_t i = 0; i < s.v.size(); ++i) {
          QVERIFY(s.v[i] >= 0);
          sum += s.v[i];
          if (s.v[i] > peak) {
            peak = s.v[i];
            ipeak = int(i);
          }
        }
        QVERIFY(std::abs(sum - 1) < 1e-12);
        // The brightest pixel is at (or next to) the trace position.
        const double px = s.xc + ipeak % s.nx, py = s.yc + ipeak / s.nx;
        QVERIFY(std::abs(px - psf.x(fiber, w)) <= 1.5);
        QVERIFY(std::abs(py - psf.y(fiber, w)) <= 1.5);
        ++checked;
      }
    QVERIFY(checked > 100);
  }

  void spotMatchesSerialFormula() {
    // spotValues forms each row once in registers and sums in four lanes (docs/
    // benchmarks.md, "CPU engine, ninth pass"); here the textbook order: the GH sum
    // pass per j into a zeroed stamp, clipping, one serial sum, a division per pixel.
    // Both differ only by rounding: the 49-term GH sum by ~49 eps of the stamp's largest
    // term, the normalisation by ~187 eps relative (sum order, a reciprocal), so 1e-14 of
    // the peak bounds it with room; values clipped to 0 in one may be a rounding above 0
    // in the other, also within that bound. The corner must agree exactly.
    const int nx = psf.spotNx(), ny = psf.spotNy();
    std::vector<double> bx((psf.ghdegX + 1) * nx), by((psf.ghdegY + 1) * ny), ref(nx * ny);
    double worst = 0;
    int checked = 0;
    for (int fiber = 3; fiber < psf.nfiber; fiber += 41)
      for (double w = psf.waveMin() + 1.7; w <= psf.waveMax(); w += 93.1) {
        const double xx = psf.x(fiber, w), yy = psf.y(fiber, w);
        const double dx = (xx + 0.5) - std::floor(xx + 0.5) - 0.5;
        const double dy = (yy + 0.5) - std::floor(yy + 0.5) - 0.5;
        gaussHermiteBasis(psf.ghdegX, psf.hsizeX, dx, psf.ghSigX.eval(fiber, w), bx.data());
        gaussHermiteBasis(psf.ghdegY, psf.hsizeY, dy, psf.ghSigY.eval(fiber, w), by.data());
        std::fill(ref.begin(), ref.end(), 0.0);
        for (int i = 0; i <= psf.ghdegX; ++i)
          for (int j = 0; j <= psf.ghdegY; ++j) {
            const double a = psf.ghCoeff(i, j).eval(fiber, w);
            for (int iy = 0; iy < ny; ++iy)
              for (int ix = 0; ix < nx; ++ix) ref[iy * nx + ix] += a * bx[i * nx + ix] * by[j * ny + iy];
          }
        double sum = 0;
        for (double& v : ref) {
          v = std::max(v, 0.0);
          sum += v;
        }
        for (double& v : ref) v /= sum;
        Spot s;
        psf.spotInto(fiber, w, s);
        std::vector<double> raw(nx * ny + 1, -7.0); // one past the stamp: must stay untouched
        int xc = 0, yc = 0;
        psf.spotValues(fiber, w, xc, yc, raw.data());
        QCOMPARE(xc, s.xc);
        QCOMPARE(yc, s.yc);
        QCOMPARE(raw[nx * ny], -7.0);
        QCOMPARE(int(s.v.size()), nx * ny);
        const double peak = *std::max_element(ref.begin(), ref.end());
        for (int i = 0; i < nx * ny; ++i) {
          QCOMPARE(raw[i], s.v[i]); // the same function: the same bits
          worst = std::max(worst, std::abs(s.v[i] - ref[i]) / peak);
        }
        QVERIFY(std::abs(s.xc - std::floor(xx - psf.hsizeX + 0.5)) == 0);
        ++checked;
      }
    QVERIFY(checked > 100);
    QVERIFY2(worst < 1e-14, qPrintable(QString("largest difference %1 of the peak").arg(worst)));
    qInfo("spot vs serial formula: %d spots, largest difference %.2g of the peak", checked, worst);
  }

  void cornerMatchesSpot() {
    int xc, yc;
    psf.corner(42, 6543.2, xc, yc);
    const Spot s = psf.spot(42, 6543.2);
    QCOMPARE(xc, s.xc);
    QCOMPARE(yc, s.yc);
    QCOMPARE(xc, int(std::floor(psf.x(42, 6543.2) - psf.hsizeX + 0.5)));
  }

  void spotCentroidFollowsSubpixelShift() {
    // The stamp's centroid equals the trace position to a small fraction of a pixel
    // (GH terms shift it slightly; a wrong offset convention shifts it by ~0.5-1 px).
    for (double w : {6000.0, 6000.3, 6000.6, 7000.1}) {
      const Spot s = psf.spot(100, w);
      double cx = 0, cy = 0;
      for (int iy = 0; iy < s.ny; ++iy)
        for (int ix = 0; ix < s.nx; ++ix) {
          cx += s.at(iy, ix) * (s.xc + ix);
          cy += s.at(iy, ix) * (s.yc + iy);
        }
      QVERIFY2(std::abs(cx - psf.x(100, w)) < 0.25, qPrintable(QString::number(cx - psf.x(100, w))));
      QVERIFY2(std::abs(cy - psf.y(100, w)) < 0.25, qPrintable(QString::number(cy - psf.y(100, w))));
    }
  }

  void waveAtRowInvertsTrace() {
    for (double w : {5700.0, 6500.5, 7700.0}) {
      const double y = psf.y(250, w);
      QVERIFY(std::abs(psf.waveAtRow(250, y) - w) < 1e-6);
    }
    QVERIFY(std::isnan(psf.waveAtRow(250, -1000)));
  }
};

QTEST_GUILESS_MAIN(TestGaussHermitePsf)
#include "test_gauss_hermite_psf.moc"
