// Device Legendre sums, Gauss-Hermite basis and spots against the C++ evaluation, on
// the real r0 PSF and the synthetic one.
#include "core/io/psf_io.h"
#include "core/psf/legendre.h"
#include "core/sim/simulator.h"
#include "gpu/cuda_engine.h"
#include "gpu/device_check.h"
#include "test_data.h"

#include <QTest>
#include <cmath>
#include <random>

using namespace spex;

class TestDevicePsf : public QObject {
  Q_OBJECT

  // Every spot of psf at random (fiber, w) inside its domain, device vs C++.
  void compareSpots(const GaussHermitePsf& psf, int count, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> fib(0, psf.nfiber - 1);
    std::uniform_real_distribution<double> wav(psf.waveMin(), psf.waveMax());
    std::vector<int> fibers(count);
    std::vector<double> waves(count);
    for (int i = 0; i < count; ++i) {
      fibers[i] = fib(rng);
      waves[i] = wav(rng);
    }
    const std::vector<Spot> dev = gpu::deviceSpots(psf, fibers, waves);
    double worst = 0;
    for (int i = 0; i < count; ++i) {
      const Spot ref = psf.spot(fibers[i], waves[i]);
      QCOMPARE(dev[i].xc, ref.xc);
      QCOMPARE(dev[i].yc, ref.yc);
      QCOMPARE(dev[i].v.size(), ref.v.size());
      double sum = 0;
      for (std::size_t k = 0; k < ref.v.size(); ++k) {
        QVERIFY(dev[i].v[k] >= 0.0);
        sum += dev[i].v[k];
        worst = std::max(worst, std::abs(dev[i].v[k] - ref.v[k]));
      }
      // erf/exp of the two math libraries differ in the last bits.
      QVERIFY2(std::abs(sum - 1) < 1e-13, qPrintable(QString::number(sum - 1)));
    }
    qInfo("%d spots: max |device - C++| = %.3g", count, worst);
    QVERIFY2(worst < 1e-12, qPrintable(QString::number(worst)));
  }

private slots:
  void initTestCase() {
    std::string why;
    if (!cudaAvailable(&why)) QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(why)));
  }

  void legendreSums() {
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> c(-10, 10), uu(-1, 1);
    double worst = 0;
    for (int n = 1; n <= 9; ++n) {
      std::vector<double> coeff(n), u(257);
      for (double& v : coeff) v = c(rng);
      for (double& v : u) v = uu(rng);
      u[0] = -1;
      u[1] = 1;
      const std::vector<double> dev = gpu::deviceLegendreSums(coeff, u);
      for (std::size_t i = 0; i < u.size(); ++i) {
        const double ref = legendreSum(coeff.data(), n, u[i]);
        worst = std::max(worst, std::abs(dev[i] - ref) / (1 + std::abs(ref)));
      }
    }
    qInfo("max relative |device - C++| Legendre = %.3g", worst);
    QVERIFY2(worst < 1e-14, qPrintable(QString::number(worst)));
  }

  void gaussHermiteBasis() {
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> dd(-0.5, 0.5), ss(0.6, 2.5);
    for (int deg : {0, 1, 4, 6, 10})
      for (int hsize : {3, 5, 8}) {
        std::vector<double> d(64), sigma(64);
        for (int i = 0; i < 64; ++i) {
          d[i] = dd(rng);
          sigma[i] = ss(rng);
        }
        const int m = (deg + 1) * (2 * hsize + 1);
        const std::vector<double> dev = gpu::deviceGaussHermiteBasis(deg, hsize, d, sigma);
        std::vector<double> ref(m);
        double worst = 0;
        for (int i = 0; i < 64; ++i) {
          spex::gaussHermiteBasis(deg, hsize, d[i], sigma[i], ref.data());
          for (int k = 0; k < m; ++k)
            worst = std::max(worst, std::abs(dev[i * m + k] - ref[k]) / std::max(1.0, std::abs(ref[k])));
        }
        QVERIFY2(worst < 1e-12, qPrintable(QString("deg %1 hsize %2: %3").arg(deg).arg(hsize).arg(worst)));
      }
  }

  void spotsRealPsf() {
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    compareSpots(readPsf(path), 2000, 11);
  }

  void spotsSyntheticPsf() { compareSpots(makeSyntheticPsf(), 2000, 13); }

  void jacobiMatchesCusolverOnFiberBlocks() {
    // A frame's worth of 74 x 74 fiber blocks (4700 patches x 5 kept fibers).
    const gpu::BlockEighComparison c = gpu::compareBlockEigh(74, 23500, 3, 17);
    qInfo("23500 blocks of 74 x 74: Jacobi %.4f s, cusolverDnXsyevBatched %s %.4f s, max rel "
          "eigenvalue diff %.3g",
          c.jacobiSeconds, c.cusolverAvailable ? "" : "(unavailable)", c.cusolverSeconds,
          c.maxRelDiff);
    if (c.cusolverAvailable) QVERIFY2(c.maxRelDiff < 1e-12, qPrintable(QString::number(c.maxRelDiff)));
  }
};

QTEST_GUILESS_MAIN(TestDevicePsf)
#include "test_device_psf.moc"
