// The patch-size sweep on the real r0 PSF: a 2 x 2 sweep of a small simulated region
// gives four rows with the right settings, patch counts and unit pulls; a reference
// sweep agrees exactly with itself; CSV and JSON round-trip; bestSettings picks the
// fastest accurate row; cancellation and bad settings behave.
#include "core/extract/cpu_engine.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"
#include "core/errors.h"
#include "core/sweep/sweep.h"
#include "test_data.h"

#include <QTest>
#include <cmath>

using namespace spex;

class TestSweep : public QObject {
  Q_OBJECT
  GaussHermitePsf psf;
  Simulation sim;
  SweepSpec spec;

  static bool sameRow(const SweepRow& a, const SweepRow& b) {
    auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
    return a.engine == b.engine && a.nwavestep == b.nwavestep && a.nsubbundles == b.nsubbundles &&
           same(a.wavepadFrac, b.wavepadFrac) && a.wavepad == b.wavepad && a.patches == b.patches &&
           a.bins == b.bins && same(a.wallS, b.wallS) && same(a.throughput, b.throughput) &&
           a.pullN == b.pullN && same(a.pullMean, b.pullMean) && same(a.pullStd, b.pullStd) &&
           a.refN == b.refN && same(a.refMaxPull, b.refMaxPull) &&
           same(a.refFracBelow, b.refFracBelow) && a.error == b.error;
  }

private slots:
  void initTestCase() {
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    psf = readPsf(path);
    // Ten fibers (two sub-bundles of 5 with nsubbundles 5, one of 10 with 1) over 120
    // bins: 4 patches of 30 or 3 of 50 per sub-bundle.
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(5760, 5760 + 119 * 0.8, 0.8);
    so.fiberMin = 0;
    so.nFiber = 10;
    so.seed = 7;
    sim = simulate(psf, so);
    spec.wave = so.wave;
    spec.fiberMin = 0;
    spec.nFiber = 10;
    spec.region = {0, 10, so.wave.wmin, so.wave.last()};
    spec.nwavestep = {30, 50};
    spec.nsubbundles = {1, 5};
    spec.wavepadFrac = {0.2};
    spec.threads = 2;
  }

  void truthSweepGivesFourRows() {
    CpuEngine cpu;
    SweepInputs in{&sim.image, &psf, &sim.truth, nullptr};
    int progressCalls = 0, rowsDone = 0;
    CancelToken cancel;
    const SweepResult r = runSweep(
        {&cpu}, in, spec,
        [&](const SweepProgress& p) {
          ++progressCalls; // engine threads and the sweep thread; counting is enough here
          if (p.rowDone) ++rowsDone;
          QCOMPARE(p.rows, 4);
        },
        cancel);
    QCOMPARE(r.mode, SweepMode::Truth);
    QVERIFY(!r.cancelled);
    QCOMPARE(r.regionBins, 10 * 120);
    QCOMPARE(int(r.rows.size()), 4);
    QCOMPARE(rowsDone, 4);
    QVERIFY(progressCalls > 4);
    const int expect[4][3] = {{30, 1, 4}, {30, 5, 8}, {50, 1, 3}, {50, 5, 6}};
    for (int i = 0; i < 4; ++i) {
      const SweepRow& row = r.rows[i];
      QVERIFY2(row.ok(), row.error.c_str());
      QCOMPARE(row.engine, std::string("cpu"));
      QCOMPARE(row.nwavestep, expect[i][0]);
      QCOMPARE(row.nsubbundles, expect[i][1]);
      QCOMPARE(row.patches, expect[i][2]);
      QCOMPARE(row.wavepad, 12);
      QCOMPARE(row.bins, 10L * 120); // the region is the frame: every bin covered
      QVERIFY(row.wallS > 0);
      QVERIFY(std::abs(row.throughput - row.bins / row.wallS) < 1e-6 * row.throughput);
      qInfo("nwavestep %d nsub %d: %d patches, %.3f s, pulls over %ld bins: mean %.4f std %.4f",
            row.nwavestep, row.nsubbundles, row.patches, row.wallS, row.pullN, row.pullMean,
            row.pullStd);
      // Noisy simulation: unit pulls (EXTRACTION.md §7) within this small sample's error.
      QVERIFY(row.pullN > 800);
      QVERIFY(std::abs(row.pullMean) < 0.15);
      QVERIFY(std::abs(row.pullStd - 1.0) < 0.15);
    }
    const auto best = r.bestSettings(1e9); // everything accurate: the fastest row wins
    QCOMPARE(int(best.size()), 1);
    double fastest = 0;
    for (const auto& row : r.rows) fastest = std::max(fastest, row.throughput);
    QCOMPARE(best[0].throughput, fastest);
  }

  void referenceSweepAgreesWithItself() {
    CpuEngine cpu;
    // Reference: the whole frame with the (50, 5) setting; the sweep extracts a smaller
    // region with the same setting and with another; the same setting must agree exactly.
    ExtractionRequest req;
    req.image = &sim.image;
    req.psf = &psf;
    req.wave = spec.wave;
    req.fiberMin = 0;
    req.nFiber = 10;
    req.threads = 2;
    ProgressSink none;
    CancelToken cancel;
    const ExtractionResult ref = cpu.extract(req, none, cancel);
    SweepSpec s = spec;
    s.region = {2, 7, 5780, 5820}; // fibers 2..6, 51 bins
    s.nwavestep = {50, 30};
    s.nsubbundles = {5};
    SweepInputs in{&sim.image, &psf, nullptr, &ref};
    const SweepResult r = runSweep({&cpu}, in, s, {}, cancel);
    QCOMPARE(r.mode, SweepMode::Reference);
    QCOMPARE(int(r.rows.size()), 2);
    QCOMPARE(r.regionBins, 5 * 51);
    const SweepRow& same = r.rows[0];
    QVERIFY2(same.ok(), same.error.c_str());
    QCOMPARE(same.refN, long(r.regionBins)); // compared on the region only
    QCOMPARE(same.refMaxPull, 0.0);
    QCOMPARE(same.refFracBelow, 1.0);
    const SweepRow& other = r.rows[1];
    QVERIFY2(other.ok(), other.error.c_str());
    QVERIFY(other.bins < 10L * 120);            // only the region's patches
    QVERIFY(other.refMaxPull > 0);              // different patches, different answers...
    QVERIFY(other.refMaxPull < 1.0);            // ...but well within the noise
    qInfo("nwavestep 30 vs 50: max pull %.3g, fraction < 0.01 sigma %.4f", other.refMaxPull,
          other.refFracBelow);
  }

  void badSettingIsRecordedAndCancelStops() {
    CpuEngine cpu;
    SweepSpec s = spec;
    s.nwavestep = {50};
    s.nsubbundles = {30, 5}; // 30 > bundlesize 25: that row fails, the sweep goes on
    SweepInputs in{&sim.image, &psf, &sim.truth, nullptr};
    CancelToken cancel;
    SweepResult r = runSweep({&cpu}, in, s, {}, cancel);
    QCOMPARE(int(r.rows.size()), 2);
    QVERIFY(!r.rows[0].ok());
    QVERIFY(QString::fromStdString(r.rows[0].error).contains("nsubbundles"));
    QVERIFY(r.rows[1].ok());
    QCOMPARE(r.bestSettings().front().nsubbundles, 5);

    // Cancel once the first setting is done: one row, cancelled set.
    s.nsubbundles = {5, 1};
    r = runSweep(
        {&cpu}, in, s,
        [&](const SweepProgress& p) {
          if (p.rowDone) cancel.cancel();
        },
        cancel);
    QVERIFY(r.cancelled);
    QCOMPARE(int(r.rows.size()), 1);

    // A region outside the frame is an input error, not an empty sweep.
    s.region = {40, 50, 5760, 5800};
    cancel.reset();
    QVERIFY_THROWS_EXCEPTION(InputError, runSweep({&cpu}, in, s, {}, cancel));
  }

  void bestSettingsPerEngine() {
    SweepResult r;
    r.mode = SweepMode::Truth;
    auto row = [](const char* e, int nw, double tp, double mean, double sd) {
      SweepRow x;
      x.engine = e;
      x.nwavestep = nw;
      x.nsubbundles = 5;
      x.throughput = tp;
      x.pullN = 1000;
      x.pullMean = mean;
      x.pullStd = sd;
      return x;
    };
    r.rows = {row("cpu", 30, 100, 0.001, 1.001), row("cpu", 50, 200, 0.01, 1.005),
              row("cpu", 80, 400, 0.2, 1.3), row("cuda:0", 30, 1000, 0.0, 1.0),
              row("cuda:0", 80, 3000, 0.0, 1.01)};
    r.rows.push_back(row("cpu", 100, 1e6, 0, 1));
    r.rows.back().error = "failed";
    const auto best = r.bestSettings(0.02);
    QCOMPARE(int(best.size()), 2);
    QCOMPARE(best[0].engine, std::string("cpu"));
    QCOMPARE(best[0].nwavestep, 50); // 80 is faster but inaccurate; 100 failed
    QCOMPARE(best[1].engine, std::string("cuda:0"));
    QCOMPARE(best[1].nwavestep, 80);
    QCOMPARE(r.bestSettings(0.001)[0].nwavestep, 30);
  }

  void csvAndJsonRoundTrip() {
    SweepResult r;
    r.mode = SweepMode::Reference;
    r.region = {3, 17, 5760.4, 5900.8};
    r.regionBins = 14 * 176;
    r.cancelled = true;
    SweepRow a;
    a.engine = "cuda:0";
    a.nwavestep = 80;
    a.nsubbundles = 5;
    a.wavepadFrac = 0.35;
    a.wavepad = 13;
    a.patches = 17;
    a.bins = 12345;
    a.wallS = 1.0 / 3.0;
    a.throughput = 12345 / a.wallS;
    a.refN = 2464;
    a.refMaxPull = 1.2345678901234567e-7;
    a.refFracBelow = 0.99951171875;
    a.pullMean = std::nan("");
    SweepRow b = a;
    b.engine = "cpu";
    b.error = "bad \"setting\", see log\nline two";
    r.rows = {a, b};
    for (int pass = 0; pass < 2; ++pass) {
      const SweepResult back =
          pass == 0 ? SweepResult::fromCsv(r.toCsv()) : SweepResult::fromJson(r.toJson());
      QCOMPARE(back.mode, r.mode);
      QCOMPARE(back.region.fiber0, 3);
      QCOMPARE(back.region.fiber1, 17);
      QCOMPARE(back.region.waveMin, 5760.4);
      QCOMPARE(back.region.waveMax, 5900.8);
      QCOMPARE(back.regionBins, r.regionBins);
      QCOMPARE(back.cancelled, true);
      QCOMPARE(int(back.rows.size()), 2);
      for (int i = 0; i < 2; ++i) QVERIFY2(sameRow(back.rows[i], r.rows[i]), pass ? "json" : "csv");
    }
    QVERIFY_THROWS_EXCEPTION(SpexError, SweepResult::fromCsv("engine,nwavestep\ncpu\n"));
    QVERIFY_THROWS_EXCEPTION(SpexError, SweepResult::fromJson("{\"mode\":\"truth\"}"));
  }
};

QTEST_GUILESS_MAIN(TestSweep)
#include "test_sweep.moc"
