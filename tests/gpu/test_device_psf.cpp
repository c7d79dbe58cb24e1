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

  // count (fiber, w) drawn at random inside psf's domain.
  struct Samples {
    std::vector<int> fibers;
    std::vector<double> waves;
  };
  static Samples randomSamples(const GaussHermitePsf& psf, int count, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> fib(0, psf.nfiber - 1);
    std::uniform_real_distribution<double> wav(psf.waveMin(), psf.waveMax());
    Samples out{std::vector<int>(count), std::vector<double>(count)};
    for (int i = 0; i < count; ++i) {
      out.fibers[i] = fib(rng);
      out.waves[i] = wav(rng);
    }
    return out;
  }

  // Every spot of psf at random (fiber, w) inside its domain, device vs C++.
  void compareSpots(const GaussHermitePsf& psf, int count, uint32_t seed) {
    const auto [fibers, waves] = randomSamples(psf, count, seed);
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

  void planCornersMatchHostToTheBit() {
    // The corner table the CUDA engine makes its patch plan from (launchCornerTable),
    // over a full r frame's range, against GaussHermitePsf::corner: every corner equal,
    // so the plan is the host's (tests/core/plan: the same corners give the same plan).
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    const GaussHermitePsf psf = readPsf(path);
    const WaveGrid g = WaveGrid::fromRange(5760, 7620, 0.8);
    PlanCorners c = planCornerRange(psf, g, 0, 500, PatchParams{});
    QVERIFY(c.f1 > c.f0 && c.k1 > c.k0);
    gpu::devicePlanCorners(psf, g.wmin, g.dw, c);
    const int nk = c.k1 - c.k0;
    QCOMPARE(c.x.size(), std::size_t(c.f1 - c.f0) * nk);
    long long differ = 0;
    for (int f = c.f0; f < c.f1; ++f)
      for (int k = c.k0; k < c.k1; ++k) {
        int xc, yc;
        psf.corner(f, g.at(k), xc, yc);
        const std::size_t i = std::size_t(f - c.f0) * nk + (k - c.k0);
        differ += c.x[i] != xc || c.y[i] != yc;
      }
    qInfo("%zu corners (fibers %d..%d, bins %d..%d): %lld differ", c.x.size(), c.f0, c.f1, c.k0, c.k1, differ);
    QCOMPARE(differ, 0LL);
    const PatchPlan a = makePatchPlan(psf, g, 0, 500, PatchParams{});
    const PatchPlan b = makePatchPlan(psf, g, 0, 500, PatchParams{}, c);
    QCOMPARE(a.patches.size(), b.patches.size());
    for (std::size_t i = 0; i < a.patches.size(); ++i)
      QVERIFY(a.patches[i].box.x0 == b.patches[i].box.x0 && a.patches[i].box.x1 == b.patches[i].box.x1 &&
              a.patches[i].box.y0 == b.patches[i].box.y0 && a.patches[i].box.y1 == b.patches[i].box.y1);
  }

  void patchExtentsMatchHostToTheBit() {
    // CudaEngineOptions::planAhead: each patch's corner extents by the engine's
    // launchPatchExtents (a warp per patch) against core/plan patchExtents on the same
    // corner table, a full r frame and a short range with other parameters (partial
    // last patch, other wavepad and step); the boxes from them are makePatchPlan's.
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    const GaussHermitePsf psf = readPsf(path);
    PatchParams other;
    other.nwavestep = 37;
    other.wavepadFrac = 0.5;
    other.pixpadFrac = 0.3;
    struct Case { WaveGrid g; int f0, nf; PatchParams pp; };
    for (const Case& c : {Case{WaveGrid::fromRange(5760, 7620, 0.8), 0, 500, PatchParams{}},
                          Case{WaveGrid::fromRange(6000, 6033.6, 0.8), 480, 20, other}}) {
      PlanCorners corners = planCornerRange(psf, c.g, c.f0, c.nf, c.pp);
      gpu::devicePlanCorners(psf, c.g.wmin, c.g.dw, corners);
      PatchPlan skeleton = makePatchSkeleton(psf, c.g, c.f0, c.nf, c.pp);
      const std::vector<PatchExtents> host = patchExtents(skeleton, psf, corners);
      const std::vector<PatchExtents> dev = gpu::devicePatchExtents(skeleton, corners);
      QCOMPARE(dev.size(), host.size());
      long differ = 0;
      for (std::size_t i = 0; i < host.size(); ++i)
        for (int j = 0; j < 4; ++j)
          differ += host[i].pad[j] != dev[i].pad[j] || host[i].core[j] != dev[i].core[j];
      qInfo("%zu patches: %ld extents differ", host.size(), differ);
      QCOMPARE(differ, 0L);
      setPatchBoxes(skeleton, psf, dev);
      const PatchPlan whole = makePatchPlan(psf, c.g, c.f0, c.nf, c.pp);
      QCOMPARE(skeleton.patches.size(), whole.patches.size());
      for (std::size_t i = 0; i < whole.patches.size(); ++i) {
        const PixelBox &a = whole.patches[i].box, &b = skeleton.patches[i].box;
        QVERIFY(a.x0 == b.x0 && a.x1 == b.x1 && a.y0 == b.y0 && a.y1 == b.y1 &&
                whole.patches[i].clipped == skeleton.patches[i].clipped);
      }
    }
  }

  void spotsSyntheticPsf() { compareSpots(makeSyntheticPsf(), 2000, 13); }

  void spotKernelsAgreeToTheBit() {
    // gpu::SpotKernel: the warp-per-spot kernel (the engine's default, compared with C++
    // above) computes every value with spotBlock's expression and its normalising sum
    // by the same partition, so its spots and corners equal the block kernel's exactly;
    // on the real PSF (stamps 17 x 11, degree 6) and the synthetic one, with a count
    // that leaves the last block's warps partly empty.
    auto agree = [](const GaussHermitePsf& psf, int count, uint32_t seed) {
      const auto [fibers, waves] = randomSamples(psf, count, seed);
      const std::vector<Spot> w = gpu::deviceSpots(psf, fibers, waves, true);
      const std::vector<Spot> b = gpu::deviceSpots(psf, fibers, waves, false);
      long differ = 0;
      for (int i = 0; i < count; ++i) {
        QCOMPARE(w[i].xc, b[i].xc);
        QCOMPARE(w[i].yc, b[i].yc);
        QCOMPARE(w[i].v.size(), b[i].v.size());
        for (std::size_t k = 0; k < b[i].v.size(); ++k) differ += w[i].v[k] != b[i].v[k];
      }
      qInfo("%d spots, warp vs block kernel: %ld values differ", count, differ);
      QCOMPARE(differ, 0L);
    };
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    agree(readPsf(path), 1999, 17);
    agree(makeSyntheticPsf(), 1001, 19);
  }

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
