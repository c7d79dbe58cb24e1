// Profile records: nesting, per-phase statistics and the Chrome-trace round trip.
#include "core/errors.h"
#include "core/profile/profile.h"

#include <QTest>
#include <thread>

using namespace spex;

class TestProfile : public QObject {
  Q_OBJECT

  static void spin(int us) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (std::chrono::steady_clock::now() < end) {
    }
  }

private slots:
  void nestedRangesAndStats() {
    ProfileRecorder rec;
    rec.setThreadLaneName("main");
    {
      ScopedRange outer(&rec, "outer");
      for (int i = 0; i < 3; ++i) {
        ScopedRange inner(&rec, "inner", i);
        spin(2000);
      }
      std::thread t([&] {
        rec.setThreadLaneName("cpu thread 1");
        ScopedRange w(&rec, "worker", 7);
        spin(3000);
      });
      t.join();
    }
    const Profile p = rec.finish();
    QCOMPARE(int(p.ranges.size()), 5);
    const ProfileRange* outer = nullptr;
    for (const auto& r : p.ranges)
      if (r.name == "outer") outer = &r;
    QVERIFY(outer);
    QCOMPARE(outer->depth, 0);
    QCOMPARE(p.lanes[outer->lane], std::string("main"));
    int64_t innerSum = 0;
    for (const auto& r : p.ranges) {
      if (r.name == "inner") {
        QCOMPARE(r.depth, 1);
        QCOMPARE(r.lane, outer->lane);
        QVERIFY(r.startNs >= outer->startNs && r.endNs <= outer->endNs);
        innerSum += r.durationNs();
      }
      if (r.name == "worker") {
        QCOMPARE(p.lanes[r.lane], std::string("cpu thread 1"));
        QCOMPARE(r.depth, 0);
        QCOMPARE(r.patch, 7);
      }
    }
    // The outer range holds the three inner ones and the worker's 3 ms.
    QVERIFY(innerSum <= outer->durationNs());
    QVERIFY(outer->durationNs() >= innerSum + 2500000);
    QVERIFY(outer->durationNs() <= p.wallNs);

    const auto stats = p.phaseStats();
    int64_t sumInner = 0;
    for (const auto& r : p.ranges)
      if (r.name == "inner") sumInner += r.durationNs();
    bool found = false;
    for (const auto& s : stats)
      if (s.name == "inner") {
        found = true;
        QCOMPARE(s.count, 3);
        QVERIFY(std::abs(s.totalS - sumInner * 1e-9) < 1e-12);
        QVERIFY(std::abs(s.meanS - s.totalS / 3) < 1e-12);
        QVERIFY(s.minS <= s.meanS && s.meanS <= s.maxS);
        QVERIFY(std::abs(s.share - s.totalS / (p.wallNs * 1e-9)) < 1e-12);
      }
    QVERIFY(found);
    // A window holding only the first inner range.
    const ProfileRange* first = nullptr;
    for (const auto& r : p.ranges)
      if (r.name == "inner" && r.patch == 0) first = &r;
    const auto win = p.phaseStats(first->startNs, first->endNs);
    for (const auto& s : win)
      if (s.name == "inner") QCOMPARE(s.count, 1);
  }

  void chromeTraceRoundTrip() {
    Profile p;
    p.lanes = {"main", "cpu thread 1", "cuda:0 stream 1", "quote \" and \\ lane"};
    p.ranges = {{"extract", 0, 1000000123, 0, 0, -1},
                {"solve", 1234567, 2345678, 1, 1, 42},
                {"H2D", 5, 999, 2, 0, 3},
                {"ünïcode name", 17, 18, 3, 2, 9}};
    p.wallNs = 1000000500;
    const std::string json = p.toChromeTrace();
    QVERIFY(json.find("\"ph\":\"X\"") != std::string::npos);
    QVERIFY(json.find("\"ph\":\"M\"") != std::string::npos);
    const Profile q = Profile::fromChromeTrace(json);
    QCOMPARE(q.lanes, p.lanes);
    QCOMPARE(q.wallNs, p.wallNs);
    QCOMPARE(q.ranges.size(), p.ranges.size());
    for (std::size_t i = 0; i < p.ranges.size(); ++i) {
      QCOMPARE(q.ranges[i].name, p.ranges[i].name);
      QCOMPARE(q.ranges[i].startNs, p.ranges[i].startNs);
      QCOMPARE(q.ranges[i].endNs, p.ranges[i].endNs);
      QCOMPARE(q.lanes[q.ranges[i].lane], p.lanes[p.ranges[i].lane]);
      QCOMPARE(q.ranges[i].depth, p.ranges[i].depth);
      QCOMPARE(q.ranges[i].patch, p.ranges[i].patch);
    }
  }

  void foreignChromeTraceInMicroseconds() {
    // A trace from another tool: no ns args, ts/dur in microseconds.
    const Profile q = Profile::fromChromeTrace(
        R"({"traceEvents":[{"ph":"X","name":"k","pid":3,"tid":9,"ts":1.5,"dur":2.25}]})");
    QCOMPARE(int(q.ranges.size()), 1);
    QCOMPARE(q.ranges[0].startNs, int64_t(1500));
    QCOMPARE(q.ranges[0].endNs, int64_t(3750));
    QVERIFY_THROWS_EXCEPTION(SpexError, Profile::fromChromeTrace("{not json"));
    QVERIFY_THROWS_EXCEPTION(SpexError, Profile::fromChromeTrace("{\"a\":1}"));
  }
};

QTEST_GUILESS_MAIN(TestProfile)
#include "test_profile.moc"
