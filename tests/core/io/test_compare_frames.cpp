// compareFrames (EXTRACTION.md §7): identical frames agree everywhere; frames
// perturbed at known bins by known numbers of sigma give exactly the expected
// fractions, maxima and locations; mismatched shapes and grids are refused.
#include "core/errors.h"
#include "core/extract/compare.h"
#include "core/io/frame_io.h"
#include "test_data.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <limits>

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

  void pullMapIsWhatCompareFramesCounts() {
    // b: the frame with known pulls at known bins, and two bins left uncovered.
    ExtractionResult b = m_frame;
    b.covered = Array2D<uint8_t>(b.nfiber, b.nwave, 1);
    b.covered(4, 10) = 0;
    b.covered(4, 11) = 0;
    int perturbed = 0;
    for (int s = 0; s < b.nfiber; s += 3)
      for (int j = 5; j < b.nwave; j += 97)
        if (b.ivar(s, j) > 0) {
          // +0.5 sigma of the pair: sigma^2 = 2 / ivar when both ivar are the same.
          b.flux(s, j) += 0.5 * std::sqrt(2.0 / b.ivar(s, j));
          ++perturbed;
        }
    QVERIFY(perturbed > 20);
    const Array2D<double> m = pullMap(m_frame, b);
    const FrameComparison c = compareFrames(m_frame, b);
    long compared = 0, half = 0;
    double maxAbs = 0;
    for (int s = 0; s < m.rows; ++s)
      for (int j = 0; j < m.cols; ++j) {
        const double v = m(s, j);
        QVERIFY(std::isnan(v) ? std::isnan(binPull(m_frame, b, s, j)) : v == binPull(m_frame, b, s, j));
        if (std::isnan(v)) continue;
        ++compared;
        maxAbs = std::max(maxAbs, std::abs(v));
        if (std::abs(std::abs(v) - 0.5) < 1e-9) {
          ++half;
          QVERIFY(v < 0); // a - b with b raised
        }
      }
    QVERIFY(std::isnan(m(4, 10)) && std::isnan(m(4, 11)));
    QCOMPARE(compared, c.nbins);
    QCOMPARE(half, long(perturbed));
    QCOMPARE(maxAbs, c.maxPull);
    // A compared bin whose pull is not finite is +Inf (counted as a disagreement).
    b.flux(0, 300) = std::numeric_limits<double>::quiet_NaN();
    if (m_frame.ivar(0, 300) > 0) QVERIFY(std::isinf(binPull(m_frame, b, 0, 300)));
  }

  void overlapOfOtherRanges() {
    // b: spectra 5-14 and bins 100-399 of the frame, as a frame of its own.
    const FrameOverlap part{m_frame.fiberMin + 5, 10, 100, 0, 300, false, {}};
    const ExtractionResult b = cropToOverlap(m_frame, part, true);
    QCOMPARE(b.nfiber, 10);
    QCOMPARE(b.nwave, 300);
    QCOMPARE(b.wave.wmin, m_frame.wave.at(100));
    QCOMPARE(b.flux(0, 0), m_frame.flux(5, 100));
    QCOMPARE(b.resolution(9, 3, 299), m_frame.resolution(14, 3, 399));
    const FrameOverlap o = findOverlap(m_frame, b);
    QVERIFY(!o.whole);
    QCOMPARE(o.fiberMin, m_frame.fiberMin + 5);
    QCOMPARE(o.nfiber, 10);
    QCOMPARE(o.firstBinA, 100);
    QCOMPARE(o.firstBinB, 0);
    QCOMPARE(o.nwave, 300);
    QVERIFY2(o.description.find("spectra 5-14 (a has 0-24, b has 5-14)") != std::string::npos, o.description.c_str());
    QVERIFY2(o.description.find("300 bins") != std::string::npos, o.description.c_str());
    // Symmetric: b against the frame.
    const FrameOverlap r = findOverlap(b, m_frame);
    QCOMPARE(r.firstBinA, 0);
    QCOMPARE(r.firstBinB, 100);
    const FrameComparison c = compareFrames(cropToOverlap(m_frame, o, true), cropToOverlap(b, o, false));
    long live = 0;
    for (int s = 5; s < 15; ++s)
      for (int j = 100; j < 400; ++j) live += m_frame.ivar(s, j) > 0;
    QCOMPARE(c.nbins, live);
    QCOMPARE(c.maxPull, 0.0);
    QVERIFY(findOverlap(m_frame, m_frame).whole);
    QVERIFY(findOverlap(m_frame, m_frame).description.empty());
  }

  void noOverlapNamesWhatDiffers() {
    auto refused = [](const ExtractionResult& a, const ExtractionResult& b, const char* words) {
      try {
        findOverlap(a, b);
      } catch (const InputError& e) {
        if (std::string(e.what()).find(words) != std::string::npos) return true;
        qWarning("message: %s", e.what());
      }
      return false;
    };
    ExtractionResult b = m_frame;
    b.wave.dw = 0.5;
    QVERIFY(refused(m_frame, b, "bin widths differ"));
    b = m_frame;
    b.wave.wmin += 0.3 * b.wave.dw;
    QVERIFY(refused(m_frame, b, "offset by 0.3 of a bin"));
    b = m_frame;
    b.wave.wmin += (m_frame.nwave + 5) * b.wave.dw;
    QVERIFY(refused(m_frame, b, "no common wavelengths"));
    b = m_frame;
    b.fiberMin += 100;
    QVERIFY(refused(m_frame, b, "no common spectra"));
    ExtractionResult a = m_frame, c = m_frame;
    a.fibers.assign(std::size_t(a.nfiber), 0);
    c.fibers.assign(std::size_t(c.nfiber), 0);
    for (int s = 0; s < a.nfiber; ++s) {
      a.fibers[std::size_t(s)] = a.fiberMin + s;
      c.fibers[std::size_t(s)] = 500 + c.fiberMin + s;
    }
    QVERIFY(refused(a, c, "FIBER 500"));
  }
};

QTEST_APPLESS_MAIN(TestCompareFrames)
#include "test_compare_frames.moc"
