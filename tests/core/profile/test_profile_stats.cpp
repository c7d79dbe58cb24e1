// The Profile of a real CPU extraction (real r0 PSF, simulated frame): ranges nest,
// the main lane's top-level ranges add up to the wall time, the Chrome-trace round
// trip keeps names, times and lanes, phase statistics (whole run and a selected time
// window) equal sums computed here from the records, and comparePhases pairs two runs.
#include "core/errors.h"
#include "core/extract/cpu_engine.h"
#include "core/io/psf_io.h"
#include "core/profile/profile.h"
#include "core/sim/simulator.h"
#include "test_data.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <map>

using namespace spex;

namespace {

struct Expected {
  int count = 0;
  double total = 0, min = 1e300, max = 0;
};

// Per-name sums over ranges clipped to [t0, t1), the way the table should count them.
std::map<std::string, Expected> sums(const Profile& p, int64_t t0, int64_t t1) {
  std::map<std::string, Expected> out;
  for (const ProfileRange& r : p.ranges) {
    if (r.endNs <= t0 || r.startNs >= t1) continue;
    const double d = double(std::min(r.endNs, t1) - std::max(r.startNs, t0)) * 1e-9;
    Expected& e = out[r.name];
    ++e.count;
    e.total += d;
    e.min = std::min(e.min, d);
    e.max = std::max(e.max, d);
  }
  return out;
}

void checkStats(const Profile& p, int64_t t0, int64_t t1) {
  const auto want = sums(p, t0, t1);
  const auto got = p.phaseStats(t0, t1);
  QCOMPARE(got.size(), want.size());
  const double window = double(t1 - t0) * 1e-9;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const PhaseStats& s = got[i];
    if (i > 0) QVERIFY(got[i - 1].totalS >= s.totalS); // sorted by total
    const Expected& e = want.at(s.name);
    QCOMPARE(s.count, e.count);
    QVERIFY(std::abs(s.totalS - e.total) <= 1e-12 * std::max(1.0, e.total));
    QVERIFY(std::abs(s.meanS - e.total / e.count) <= 1e-12);
    QCOMPARE(s.minS, e.min);
    QCOMPARE(s.maxS, e.max);
    QVERIFY(std::abs(s.share - e.total / window) <= 1e-12);
  }
}

} // namespace

class TestProfileStats : public QObject {
  Q_OBJECT
  GaussHermitePsf psf;
  Simulation sim;
  Profile run; // 2 threads, nwavestep 50
  Profile run2; // 1 thread, nwavestep 30

  Profile extract(int threads, int nwavestep) {
    CpuEngine cpu;
    ExtractionRequest req;
    req.image = &sim.image;
    req.psf = &psf;
    req.wave = WaveGrid::fromRange(5760, 5760 + 149 * 0.8, 0.8);
    req.fiberMin = 0;
    req.nFiber = 10;
    req.threads = threads;
    req.params.nwavestep = nwavestep;
    ProgressSink none;
    CancelToken cancel;
    return cpu.extract(req, none, cancel).profile;
  }

private slots:
  void initTestCase() {
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    psf = readPsf(path);
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(5760, 5760 + 149 * 0.8, 0.8);
    so.nFiber = 10;
    so.seed = 11;
    sim = simulate(psf, so);
    run = extract(2, 50);
    run2 = extract(1, 30);
  }

  void rangesNestAndAddUpToWall() {
    QCOMPARE(checkNesting(run), std::string());
    QCOMPARE(checkNesting(run2), std::string());
    QCOMPARE(run.lanes.size(), std::size_t(3)); // main + 2 workers
    QCOMPARE(run.lanes[0], std::string("main"));
    int patches = 0;
    for (const ProfileRange& r : run.ranges) {
      QVERIFY(r.startNs >= 0 && r.endNs >= r.startNs && r.endNs <= run.wallNs);
      if (r.name == "patch") {
        ++patches;
        QCOMPARE(r.depth, 0);
        QVERIFY(r.patch >= 0);
        QVERIFY(r.lane != 0); // worker lanes
      }
    }
    QCOMPARE(patches, 2 * 3); // 2 sub-bundles of 5 fibers x 3 wavelength patches (150 bins / 50)
    // The main lane's top-level ranges cover the run: their sum is the wall within 5%.
    int64_t top = 0;
    for (const ProfileRange& r : run.ranges)
      if (r.lane == 0 && r.depth == 0) top += r.durationNs();
    QVERIFY2(std::abs(double(top - run.wallNs)) <= 0.05 * double(run.wallNs),
             qPrintable(QString("top-level %1 ns, wall %2 ns").arg(top).arg(run.wallNs)));
    // Children of a range never add up to more than the range.
    for (const ProfileRange& parent : run.ranges) {
      int64_t children = 0;
      for (const ProfileRange& c : run.ranges)
        if (c.lane == parent.lane && c.depth == parent.depth + 1 && c.startNs >= parent.startNs &&
            c.endNs <= parent.endNs)
          children += c.durationNs();
      QVERIFY(children <= parent.durationNs());
    }
    // A broken trace is caught.
    Profile bad = run;
    bad.ranges.push_back({"stray", 0, 10, 1, 2, -1});
    QVERIFY(!checkNesting(bad).empty());
  }

  void chromeTraceFileRoundTripIsLossless() {
    QTemporaryDir dir;
    const std::string path = (dir.path() + "/run.json").toStdString();
    writeChromeTraceFile(run, path);
    const Profile q = readChromeTraceFile(path);
    QCOMPARE(q.lanes, run.lanes);
    QCOMPARE(q.wallNs, run.wallNs);
    QCOMPARE(q.ranges.size(), run.ranges.size());
    for (std::size_t i = 0; i < q.ranges.size(); ++i) {
      QCOMPARE(q.ranges[i].name, run.ranges[i].name);
      QCOMPARE(q.ranges[i].startNs, run.ranges[i].startNs);
      QCOMPARE(q.ranges[i].endNs, run.ranges[i].endNs);
      QCOMPARE(q.ranges[i].lane, run.ranges[i].lane);
      QCOMPARE(q.ranges[i].depth, run.ranges[i].depth);
      QCOMPARE(q.ranges[i].patch, run.ranges[i].patch);
    }
    QVERIFY_THROWS_EXCEPTION(InputError, readChromeTraceFile(path + ".missing"));
    QVERIFY_THROWS_EXCEPTION(InputError, writeChromeTraceFile(run, "/nonexistent/dir/x.json"));
  }

  void phaseStatsEqualSumsOfRecords() {
    checkStats(run, 0, run.wallNs);
    checkStats(run2, 0, run2.wallNs);
    // Default arguments are the whole run.
    const auto all = run.phaseStats();
    const auto explicitAll = run.phaseStats(0, run.wallNs);
    QCOMPARE(all.size(), explicitAll.size());
    for (std::size_t i = 0; i < all.size(); ++i) QCOMPARE(all[i].totalS, explicitAll[i].totalS);
  }

  void phaseStatsOverASelectedRange() {
    // The middle half of the run: ranges are clipped to the window.
    const int64_t t0 = run.wallNs / 4, t1 = 3 * run.wallNs / 4;
    checkStats(run, t0, t1);
    double extractShare = 0;
    for (const PhaseStats& s : run.phaseStats(t0, t1))
      if (s.name == "extract") extractShare = s.share;
    QVERIFY(std::abs(extractShare - 1.0) < 1e-9); // "extract" spans the whole window
    // A window holding nothing has no phases.
    QVERIFY(run.phaseStats(run.wallNs + 10, run.wallNs + 20).empty());
  }

  void comparePhasesPairsTwoRuns() {
    const auto cmp = comparePhases(run, run2);
    const auto a = sums(run, 0, run.wallNs), b = sums(run2, 0, run2.wallNs);
    QVERIFY(!cmp.empty());
    for (const PhaseComparison& c : cmp) {
      const double ta = a.count(c.name) ? a.at(c.name).total : 0;
      const double tb = b.count(c.name) ? b.at(c.name).total : 0;
      QVERIFY(std::abs(c.a.totalS - ta) < 1e-12);
      QVERIFY(std::abs(c.b.totalS - tb) < 1e-12);
      QCOMPARE(c.a.count, a.count(c.name) ? a.at(c.name).count : 0);
      if (ta > 0) QVERIFY(std::abs(c.ratio - tb / ta) < 1e-12 * std::max(1.0, tb / ta));
      else QVERIFY(std::isnan(c.ratio));
    }
    int patchesB = 0;
    for (const PhaseComparison& c : cmp)
      if (c.name == "patch") patchesB = c.b.count;
    QCOMPARE(patchesB, 2 * 5); // nwavestep 30: 5 wavelength patches per sub-bundle
  }
};

QTEST_GUILESS_MAIN(TestProfileStats)
#include "test_profile_stats.moc"
