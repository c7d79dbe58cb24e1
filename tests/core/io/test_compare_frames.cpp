// compareFrames (EXTRACTION.md §7): identical frames agree everywhere; frames
// perturbed at known bins by known numbers of sigma give exactly the expected
// fractions, maxima and locations; mismatched shapes and grids are refused.
#include "core/errors.h"
#include "core/extract/compare.h"
#include "core/io/frame_io.h"
#include "test_data.h"

#include <QTest>

#include <cmath>

using namespace spex;

class TestCompareFrames : public QObject {
  Q_OBJECT

private:
  ExtractionResult m_frame;
  long m_live = 0; // bins with ivar > 0

private slots:
  void initTestCase() {
    SPEX_REQUIRE_DATA(path, "sim-r0-bundle0-6000-6500/frame-gpu_specter.fits");
    m_frame = readFrame(path);
    for (double v : m_frame.ivar.data) m_live += v > 0;
    QVERIFY(m_live > 10000);
  }

  void identicalFramesAgree() {
    const FrameComparison c = compareFrames(m_frame, m_frame);
    QCOMPARE(c.nbins, m_live);
    for (double f : c.fractionBelow) QCOMPARE(f, 1.0);
    QCOMPARE(c.maxPull, 0.0);
    QCOMPARE(c.maxRelIvar, 0.0);
    QCOMPARE(c.maxResolution, 0.0);
    QCOMPARE(c.maskDifferences, 0L);
    const std::string text = c.toText();
    QVERIFY2(text.find("bins compared") != std::string::npos, text.c_str());
    QVERIFY2(text.find("1.000000") != std::string::npos, text.c_str());
    const std::string json = c.toJson();
    QVERIFY2(json.find("\"nbins\":" + std::to_string(m_live)) != std::string::npos, json.c_str());
    QVERIFY2(json.find("\"maskDifferences\":0") != std::string::npos, json.c_str());
  }

  void perturbedBinsGiveExactFractions() {
    ExtractionResult b = m_frame;
    // Live bins in a fixed order; perturb some by k sigma where
    // sigma = sqrt(1/ia + 1/ib) (ivar unchanged there, so ib = ia).
    std::vector<std::pair<int, int>> live;
    for (int s = 0; s < m_frame.nfiber; ++s)
      for (int j = 0; j < m_frame.nwave; ++j)
        if (m_frame.ivar(s, j) > 0) live.push_back({s, j});
    // pull k -> how many bins; none near a threshold.
    const std::vector<std::pair<double, int>> plan{{5e-5, 7}, {3e-3, 5}, {0.05, 4},
                                                   {0.5, 3},  {2.0, 2},  {7.5, 1}};
    std::size_t next = 0;
    std::pair<int, int> worst{};
    for (const auto& [k, count] : plan)
      for (int n = 0; n < count; ++n) {
        const auto [s, j] = live[next];
        next += 97; // spread over fibers and wavelengths
        const double sigma = std::sqrt(2.0 / m_frame.ivar(s, j));
        b.flux(s, j) = m_frame.flux(s, j) + k * sigma;
        if (k == 7.5) worst = {s, j};
      }
    // One more perturbed bin that is not covered in b: it must not count at all.
    const auto [us, uj] = live[next];
    b.flux(us, uj) += 100 * std::sqrt(2.0 / m_frame.ivar(us, uj));
    b.covered(us, uj) = 0;
    next += 97;
    // ivar halved in one unperturbed bin: pull there is 0 but maxRelIvar = 0.5.
    const auto [is, ij] = live[next];
    b.ivar(is, ij) = 0.5 * m_frame.ivar(is, ij);
    next += 97;
    // Resolution and mask changes at known places.
    b.resolution(3, 5, 100) += 0.25;
    b.resolution(4, 0, 200) -= 0.125;
    b.mask(0, 10) ^= kBad2DFit;
    b.mask(1, 11) ^= kSomeBadPix;
    b.mask(2, 12) ^= kAllBadPix;

    const FrameComparison c = compareFrames(m_frame, b);
    const long n = m_live - 1; // the uncovered bin
    QCOMPARE(c.nbins, n);
    // Bins with pull >= threshold, per threshold 1e-5 .. 1.
    const std::array<long, 6> above{22, 15, 15, 10, 6, 3};
    for (std::size_t t = 0; t < 6; ++t)
      QCOMPARE(c.fractionBelow[t], double(n - above[t]) / double(n));
    QVERIFY(std::abs(c.maxPull - 7.5) < 1e-9);
    QCOMPARE(c.maxPullFiber, m_frame.fiberMin + worst.first);
    QCOMPARE(c.maxPullBin, worst.second);
    QVERIFY(std::abs(c.maxRelIvar - 0.5) < 1e-12);
    QVERIFY(std::abs(c.maxResolution - 0.25) < 1e-12);
    QCOMPARE(c.maskDifferences, 3L);

    // Symmetric.
    const FrameComparison d = compareFrames(b, m_frame);
    QCOMPARE(d.fractionBelow, c.fractionBelow);
    QCOMPARE(d.maxPull, c.maxPull);
  }

  void mismatchesAreRefused() {
    ExtractionResult b = m_frame;
    b.wave.wmin += 0.4;
    try {
      compareFrames(m_frame, b);
      QFAIL("no throw");
    } catch (const InputError& e) {
      QVERIFY2(std::string(e.what()).find("wavelength grid") != std::string::npos, e.what());
    }
    b = m_frame;
    b.fiberMin = 25;
    try {
      compareFrames(m_frame, b);
      QFAIL("no throw");
    } catch (const InputError& e) {
      QVERIFY2(std::string(e.what()).find("first fiber") != std::string::npos, e.what());
    }
    b = m_frame;
    b.nwave -= 1;
    QVERIFY_THROWS_EXCEPTION(InputError, compareFrames(m_frame, b));
    b = m_frame;
    b.flux = Array2D<double>(25, 625);
    try {
      compareFrames(m_frame, b);
      QFAIL("no throw");
    } catch (const InputError& e) {
      QVERIFY2(std::string(e.what()).find("FLUX") != std::string::npos, e.what());
    }
  }
};

QTEST_APPLESS_MAIN(TestCompareFrames)
#include "test_compare_frames.moc"
