// The kernel profile's CPU half (core/profile/kernel_trace.h) on synthetic CUPTI
// records: activities land under the phase their external correlation names (or, on
// their stream, the innermost phase holding them), the CUPTI clock is moved onto the
// recorder's (offset, then the event anchor's lag), what sticks out is trimmed and
// reported, activities of other streams are left out, the per-kernel statistics add up
// to sums computed here, phase statistics do not see kernels, and the Chrome trace
// keeps every kernel field. Runs in every build (no GPU, no CUPTI needed).
#include "core/profile/kernel_trace.h"
#include "core/profile/profile.h"

#include <QTest>

#include <algorithm>
#include <cmath>
#include <random>

using namespace spex;

namespace {

constexpr int64_t kOffset = 5'000'000; // recorder ns = CUPTI ns + kOffset
constexpr int64_t kLag = 40;           // phases sit this late (the event anchor's lag)

PhaseWindow window(uint64_t id, const char* name, const char* root, int lane, int depth, int patch,
                   int64_t t0, int64_t t1) {
  PhaseWindow w;
  w.id = id;
  w.name = name;
  w.root = root;
  w.lane = lane;
  w.depth = depth;
  w.patch = patch;
  w.startNs = t0;
  w.endNs = t1;
  return w;
}

// An activity at [t0, t1) on the recorder's clock: CUPTI stamps it kOffset earlier.
DeviceActivity kernelAt(const char* symbol, uint32_t corr, uint32_t stream, int64_t t0, int64_t t1) {
  DeviceActivity a;
  a.kind = DeviceActivity::Kind::Kernel;
  a.name = symbol;
  a.correlation = corr;
  a.stream = stream;
  a.startNs = uint64_t(t0 - kOffset);
  a.endNs = uint64_t(t1 - kOffset);
  a.launch.grid[0] = 120;
  a.launch.grid[1] = 7;
  a.launch.grid[2] = 1;
  a.launch.block[0] = 256;
  a.launch.block[1] = a.launch.block[2] = 1;
  a.launch.registers = 64;
  a.launch.staticShared = 4096;
  a.launch.dynamicShared = 512;
  return a;
}

// A profile with the phases as ranges (what the engine's recorder holds) and the input.
struct Fixture {
  Profile p;
  KernelTraceInput in;
  Fixture() {
    p.lanes = {"main", "cuda:0 stream 0", "cuda:0 stream 1"};
    p.wallNs = 100'000;
    // stream 1 (lane 2): batch 3's solve [10 000, 30 000) holds cholesky [11 000, 20 000)
    // which holds panel [12 000, 15 000); then decorrelate [30 000, 50 000).
    in.phases = {window(1, "solve", "solve", 2, 0, 3, 10'000, 30'000),
                 window(2, "cholesky", "solve", 2, 1, 3, 11'000, 20'000),
                 window(3, "panel", "solve", 2, 2, 3, 12'000, 15'000),
                 window(4, "decorrelate", "decorrelate", 2, 0, 3, 30'000, 50'000),
                 window(5, "H2D", "H2D", 1, 0, -1, 1'000, 9'000)};
    for (const PhaseWindow& w : in.phases) {
      ProfileRange r;
      r.name = w.name;
      r.startNs = w.startNs;
      r.endNs = w.endNs;
      r.lane = w.lane;
      r.depth = w.depth;
      r.patch = w.patch;
      p.ranges.push_back(r);
    }
    in.clockOffsetNs = kOffset;
    in.streamLanes[{0, 13}] = 2;
    in.streamLanes[{0, 7}] = 1;
    // Phase times are kLag late: a kernel that truly starts with its phase shows kLag
    // early on the CUPTI side once moved by the offset.
    auto at = [&](const char* s, uint32_t corr, uint32_t stream, int64_t t0, int64_t t1, uint64_t ext) {
      in.activities.push_back(kernelAt(s, corr, stream, t0 - kLag, t1 - kLag));
      if (ext) in.external[corr] = ext;
    };
    at("_Z4diagILi7EEvPd", 100, 13, 11'000, 11'900, 2);      // opens cholesky (no gap)
    at("_Z5panelPKdPd", 101, 13, 12'100, 14'000, 3);          // in panel
    at("_Z5panelPKdPd", 102, 13, 14'100, 14'900, 3);
    at("_Z9solveFluxPd", 103, 13, 21'000, 29'000, 1);          // directly in solve
    at("_ZN4spex3gpu12_GLOBAL__N_111decorrelateEPKdi", 104, 13, 31'000, 45'000, 0); // time fallback
    at("_Z7foreignv", 105, 99, 31'000, 33'000, 0);              // another stream: not ours
    // A copy in H2D (external) and a set outside every phase on stream 0.
    DeviceActivity c;
    c.kind = DeviceActivity::Kind::Memcpy;
    c.copyKind = "HtoD";
    c.bytes = 1 << 20;
    c.correlation = 106;
    c.stream = 7;
    c.startNs = uint64_t(2'000 - kOffset);
    c.endNs = uint64_t(8'000 - kOffset);
    in.activities.push_back(c);
    in.external[106] = 5;
    DeviceActivity m = c;
    m.kind = DeviceActivity::Kind::Memset;
    m.copyKind.clear();
    m.bytes = 64;
    m.correlation = 107;
    m.startNs = uint64_t(9'020 - kOffset); // after H2D ends, before any phase
    m.endNs = uint64_t(9'500 - kOffset);
    in.activities.push_back(m);
  }
};

const ProfileRange* rangeNamed(const Profile& p, const std::string& name, int nth = 0) {
  for (const ProfileRange& r : p.ranges)
    if (r.name == name && nth-- == 0) return &r;
  return nullptr;
}

} // namespace

class TestKernelTrace : public QObject {
  Q_OBJECT
private slots:
  void shortNames() {
    QCOMPARE(shortKernelName("_ZN4spex3gpu12_GLOBAL__N_115normalEquationsEPKdi"),
             std::string("spex::gpu::normalEquations"));
    QCOMPARE(shortKernelName("_Z6kernelILi7EEvPd"), std::string("kernel<7>"));
    QCOMPARE(shortKernelName("plainName"), std::string("plainName"));
    const std::string longName(200, 'x');
    QCOMPARE(shortKernelName(longName).size(), std::size_t(120));
  }

  void attributesNestsAndAligns() {
    Fixture f;
    attachKernelTrace(f.p, f.in);
    // Seven of the eight activities are ours (stream 99 is not).
    QCOMPARE(f.p.kernels.size(), std::size_t(7));
    QVERIFY(!rangeNamed(f.p, "foreign"));
    QCOMPARE(f.p.kernelTrace.clockShiftNs, kLag);
    QCOMPARE(f.p.kernelTrace.unattributed, 1);
    QVERIFY2(checkNesting(f.p).empty(), checkNesting(f.p).c_str());
    // Times: moved back onto the phases' clock exactly.
    const ProfileRange* diag = rangeNamed(f.p, "diag<7>");
    QVERIFY(diag);
    QCOMPARE(diag->startNs, int64_t(11'000));
    QCOMPARE(diag->endNs, int64_t(11'900));
    QCOMPARE(diag->depth, 2); // inside cholesky (depth 1)
    QCOMPARE(diag->lane, 2);
    QCOMPARE(diag->patch, 3);
    const KernelRecord& dk = f.p.kernels[diag->kernel];
    QCOMPARE(dk.kind, std::string("kernel"));
    QCOMPARE(dk.phase, std::string("cholesky"));
    QCOMPARE(dk.rootPhase, std::string("solve"));
    QCOMPARE(dk.launch.grid[1], 7);
    QCOMPARE(dk.launch.block[0], 256);
    QCOMPARE(dk.launch.registers, 64);
    QCOMPARE(dk.symbol, std::string("_Z4diagILi7EEvPd"));
    const ProfileRange* panel = rangeNamed(f.p, "panel", 1); // the second "panel": a kernel
    QVERIFY(panel && panel->kernel >= 0);
    QCOMPARE(panel->depth, 3);
    QCOMPARE(f.p.kernels[panel->kernel].phase, std::string("panel"));
    const ProfileRange* sf = rangeNamed(f.p, "solveFlux");
    QVERIFY(sf);
    QCOMPARE(sf->depth, 1);
    QCOMPARE(f.p.kernels[sf->kernel].phase, std::string("solve"));
    // No external correlation: the phase holding its midpoint on its stream's lane.
    const ProfileRange* dec = rangeNamed(f.p, "spex::gpu::decorrelate");
    QVERIFY(dec);
    QCOMPARE(f.p.kernels[dec->kernel].phase, std::string("decorrelate"));
    QCOMPARE(dec->depth, 1);
    QCOMPARE(dec->startNs, int64_t(31'000));
    // The copy (external, on stream 0's lane) and the set outside every phase. The
    // copy was never early, so nothing moves it but the shift of its device (all
    // activities of one device share it): it ends up kLag later, still inside H2D.
    const ProfileRange* cp = rangeNamed(f.p, "memcpy HtoD");
    QVERIFY(cp);
    QCOMPARE(cp->lane, 1);
    QCOMPARE(cp->depth, 1);
    QCOMPARE(cp->startNs, int64_t(2'000 + kLag));
    QCOMPARE(f.p.kernels[cp->kernel].bytes, uint64_t(1 << 20));
    const ProfileRange* ms = rangeNamed(f.p, "memset");
    QVERIFY(ms);
    QCOMPARE(ms->depth, 0);
    QCOMPARE(f.p.kernels[ms->kernel].phase, std::string());
    // Ranges stay sorted by start (ProfileRecorder::finish's promise).
    for (std::size_t i = 1; i < f.p.ranges.size(); ++i) QVERIFY(f.p.ranges[i - 1].startNs <= f.p.ranges[i].startNs);
  }

  void trimsWhatSticksOut() {
    // A kernel that runs past its phase's end by 300 ns (clock rates differ) is cut at
    // the end, and the largest cut is reported; one that would overlap the next
    // sibling phase stops where it starts.
    Fixture f;
    f.in.activities.push_back(kernelAt("_Z4tailv", 200, 13, 15'500 - kLag, 20'300 - kLag));
    f.in.external[200] = 2; // cholesky ends at 20 000
    attachKernelTrace(f.p, f.in);
    const ProfileRange* tail = rangeNamed(f.p, "tail");
    QVERIFY(tail);
    QCOMPARE(tail->endNs, int64_t(20'000));
    QCOMPARE(f.p.kernelTrace.maxClampNs, int64_t(300));
    QVERIFY2(checkNesting(f.p).empty(), checkNesting(f.p).c_str());

    Fixture g;
    // Attributed to cholesky, starting inside panel's time (depth 2 like the kernel).
    g.in.activities.push_back(kernelAt("_Z7overlapv", 201, 13, 14'950 - kLag, 15'400 - kLag));
    g.in.external[201] = 2;
    attachKernelTrace(g.p, g.in);
    const ProfileRange* ov = rangeNamed(g.p, "overlap");
    QVERIFY(ov);
    QCOMPARE(ov->startNs, int64_t(15'000)); // panel ends at 15 000
    QVERIFY2(checkNesting(g.p).empty(), checkNesting(g.p).c_str());

    // A set of cholesky (depth 2) that lands wholly inside its sibling phase panel, in
    // panel's first half (seen on an H100: the info reset before the first diagonal
    // block): it shrinks to nothing at panel's start, beside it, and still nests.
    Fixture h;
    DeviceActivity m;
    m.kind = DeviceActivity::Kind::Memset;
    m.bytes = 28;
    m.correlation = 202;
    m.stream = 13;
    m.startNs = uint64_t(12'100 - kOffset);
    m.endNs = uint64_t(12'200 - kOffset);
    h.in.activities.push_back(m);
    h.in.external[202] = 2;
    attachKernelTrace(h.p, h.in);
    const ProfileRange* set = nullptr;
    for (const ProfileRange& r : h.p.ranges)
      if (r.kernel >= 0 && h.p.kernels[r.kernel].correlation == 202) set = &r;
    QVERIFY(set);
    QCOMPARE(set->depth, 2);
    QCOMPARE(set->startNs, int64_t(12'000));
    QCOMPARE(set->endNs, int64_t(12'000));
    QVERIFY2(checkNesting(h.p).empty(), checkNesting(h.p).c_str());

    // A copy of H2D (depth 1) that lies wholly after H2D's end (seen on an H100 with two
    // streams: clock shift 0, the copy 15 us late) shrinks to nothing at H2D's end and
    // still nests inside H2D; an empty sibling there is beside it, not inside.
    Fixture k;
    DeviceActivity c;
    c.kind = DeviceActivity::Kind::Memcpy;
    c.copyKind = "HtoD";
    c.bytes = 4096;
    c.correlation = 203;
    c.stream = 7;
    c.startNs = uint64_t(9'200 - kLag - kOffset);
    c.endNs = uint64_t(9'600 - kLag - kOffset);
    k.in.activities.push_back(c);
    k.in.external[203] = 5; // H2D ends at 9 000
    attachKernelTrace(k.p, k.in);
    const ProfileRange* late = nullptr;
    for (const ProfileRange& r : k.p.ranges)
      if (r.kernel >= 0 && k.p.kernels[r.kernel].correlation == 203) late = &r;
    QVERIFY(late);
    QCOMPARE(late->depth, 1);
    QCOMPARE(late->startNs, int64_t(9'000));
    QCOMPARE(late->endNs, int64_t(9'000));
    QVERIFY2(checkNesting(k.p).empty(), checkNesting(k.p).c_str());
    Profile beside;
    beside.lanes = {"l"};
    ProfileRange a, b;
    a.name = "a";
    a.startNs = 0;
    a.endNs = 10;
    b.name = "b";
    b.startNs = b.endNs = 10;
    beside.ranges = {a, b}; // both depth 0: b is beside a
    QVERIFY2(checkNesting(beside).empty(), checkNesting(beside).c_str());
    beside.ranges[1].depth = 2; // an empty range two levels deeper has no parent there
    QVERIFY(!checkNesting(beside).empty());
  }

  void statisticsAndTrace() {
    Fixture f;
    const auto phasesBefore = f.p.phaseStats();
    attachKernelTrace(f.p, f.in);
    // Phase statistics ignore kernel ranges.
    const auto phasesAfter = f.p.phaseStats();
    QCOMPARE(phasesAfter.size(), phasesBefore.size());
    for (std::size_t i = 0; i < phasesAfter.size(); ++i) {
      QCOMPARE(phasesAfter[i].name, phasesBefore[i].name);
      QCOMPARE(phasesAfter[i].count, phasesBefore[i].count);
    }
    const auto ks = f.p.kernelStats();
    const KernelStats* panel = nullptr;
    for (const KernelStats& s : ks)
      if (s.phase == "panel" && s.name == "panel") panel = &s;
    QVERIFY(panel);
    QCOMPARE(panel->count, 2);
    QCOMPARE(panel->totalS, (1'900 + 800) * 1e-9);
    QCOMPARE(panel->meanS, panel->totalS / 2);
    QCOMPARE(panel->minS, 800e-9);
    QCOMPARE(panel->phaseTotalS, 3'000e-9);
    QCOMPARE(panel->share, panel->totalS / 3'000e-9);
    // Ordered by phase total (decorrelate 20 us, solve 20 us, ...), then kernel total.
    for (std::size_t i = 1; i < ks.size(); ++i)
      QVERIFY(ks[i - 1].phaseTotalS >= ks[i].phaseTotalS);
    // The set outside every phase: phase "", share 0.
    bool sawOutside = false;
    for (const KernelStats& s : ks)
      if (s.phase.empty()) {
        sawOutside = true;
        QCOMPARE(s.share, 0.0);
      }
    QVERIFY(sawOutside);
    // A window clips like phaseStats: [12 000, 13 000) holds 1 000 ns of the first panel kernel.
    const auto win = f.p.kernelStats(12'000, 13'000);
    bool found = false;
    for (const KernelStats& s : win)
      if (s.name == "panel") {
        found = true;
        QCOMPARE(s.count, 1);
        QCOMPARE(s.totalS, 900e-9); // the kernel starts at 12 100
        QCOMPARE(s.phaseTotalS, 1'000e-9);
      }
    QVERIFY(found);

    // The Chrome trace keeps kernels and their details, and the trace info.
    const Profile back = Profile::fromChromeTrace(f.p.toChromeTrace());
    QCOMPARE(back.kernels.size(), f.p.kernels.size());
    QVERIFY(back.kernelTrace.on);
    QCOMPARE(back.kernelTrace.clockShiftNs, kLag);
    QCOMPARE(back.kernelTrace.unattributed, 1);
    const ProfileRange* d = rangeNamed(back, "diag<7>");
    QVERIFY(d && d->kernel >= 0);
    const KernelRecord& k = back.kernels[d->kernel];
    QCOMPARE(k.phase, std::string("cholesky"));
    QCOMPARE(k.rootPhase, std::string("solve"));
    QCOMPARE(k.launch.grid[0], 120);
    QCOMPARE(k.launch.block[0], 256);
    QCOMPARE(k.launch.staticShared, 4096);
    QCOMPARE(k.launch.dynamicShared, 512);
    QCOMPARE(k.symbol, std::string("_Z4diagILi7EEvPd"));
    const ProfileRange* c = rangeNamed(back, "memcpy HtoD");
    QVERIFY(c && c->kernel >= 0);
    QCOMPARE(back.kernels[c->kernel].bytes, uint64_t(1 << 20));
    QCOMPARE(back.kernels[c->kernel].copyKind, std::string("HtoD"));
    const auto ks2 = back.kernelStats();
    QCOMPARE(ks2.size(), ks.size());
    for (std::size_t i = 0; i < ks.size(); ++i) {
      QCOMPARE(ks2[i].name, ks[i].name);
      QCOMPARE(ks2[i].count, ks[i].count);
      QCOMPARE(ks2[i].totalS, ks[i].totalS);
    }
    // A trace without kernels reads back without any.
    Profile plain;
    plain.lanes = {"main"};
    plain.ranges.push_back({"extract", 0, 10, 0, 0, -1});
    QVERIFY(Profile::fromChromeTrace(plain.toChromeTrace()).kernels.empty());
    QVERIFY(!Profile::fromChromeTrace(plain.toChromeTrace()).kernelTrace.on);

    // append() renumbers the kernels of the appended profile.
    Profile both = f.p;
    both.append(f.p, 1'000'000);
    QCOMPARE(both.kernels.size(), 2 * f.p.kernels.size());
    int kernelRanges = 0;
    for (const ProfileRange& r : both.ranges)
      if (r.kernel >= 0) {
        ++kernelRanges;
        QVERIFY(std::size_t(r.kernel) < both.kernels.size());
        if (r.startNs >= 1'000'000) QVERIFY(std::size_t(r.kernel) >= f.p.kernels.size());
      }
    QCOMPARE(kernelRanges, int(both.kernels.size()));
  }

  // Profile::deviceOccupancy against a count made nanosecond by nanosecond: random
  // kernels and copies on two devices and three streams, overlapping, some sticking out
  // of the window, phases (not activities) that must not count.
  void deviceOccupancyIsTheUnionOfActivities() {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 20; ++trial) {
      Profile p;
      p.lanes = {"main", "cuda:0 stream 1", "cuda:0 stream 2", "cuda:1 stream 1"};
      p.wallNs = 4'000;
      p.ranges.push_back({"extract", 0, 4'000, 0, 0, -1}); // a phase: not an activity
      const int64_t t0 = trial % 2 ? 300 : 0, t1 = trial % 2 ? 3'500 : 4'000;
      std::uniform_int_distribution<int> start(-200, 4'100), len(1, 400), dev(0, 1), kind(0, 3);
      for (int i = 0; i < 12; ++i) {
        KernelRecord k;
        k.device = dev(rng);
        k.kind = kind(rng) == 0 ? "memcpy" : "kernel";
        const int64_t a = start(rng);
        p.kernels.push_back(k);
        ProfileRange r{k.kind, a, a + len(rng), 1 + k.device * 2, 1, -1};
        r.kernel = int(p.kernels.size() - 1);
        p.ranges.push_back(r);
      }
      const auto occ = p.deviceOccupancy(t0, t1);
      for (const DeviceOccupancy& o : occ) {
        // Per nanosecond of the window: kernels and copies running on this device.
        std::vector<int> nk(std::size_t(t1 - t0)), nc(nk.size());
        for (const ProfileRange& r : p.ranges) {
          if (r.kernel < 0 || p.kernels[r.kernel].device != o.device) continue;
          for (int64_t t = std::max(r.startNs, t0); t < std::min(r.endNs, t1); ++t)
            (p.kernels[r.kernel].kind == "kernel" ? nk : nc)[std::size_t(t - t0)]++;
        }
        double busy = 0, kern = 0, conc = 0, copyOnly = 0, gap = 0, largest = 0, run = 0, largestAt = 0;
        int64_t first = -1, last = -1;
        int gaps = 0;
        for (std::size_t t = 0; t < nk.size(); ++t)
          if (nk[t] + nc[t] > 0) {
            if (first < 0) first = int64_t(t);
            last = int64_t(t);
          }
        QVERIFY(first >= 0);
        for (int64_t t = first; t <= last; ++t) {
          const std::size_t i = std::size_t(t);
          busy += nk[i] + nc[i] > 0;
          kern += nk[i] > 0;
          conc += nk[i] > 1;
          copyOnly += nk[i] == 0 && nc[i] > 0;
          if (nk[i] + nc[i] == 0) {
            gap += 1;
            if (run == 0) ++gaps;
            if (++run > largest) {
              largest = run;
              largestAt = double(t0 + t - run + 1);
            }
          } else {
            run = 0;
          }
        }
        const double ns = 1e-9;
        QCOMPARE(o.windowS, double(t1 - t0) * ns);
        QCOMPARE(o.busyS, busy * ns);
        QCOMPARE(o.kernelS, kern * ns);
        QCOMPARE(o.concurrentS, conc * ns);
        QCOMPARE(o.copyOnlyS, copyOnly * ns);
        QCOMPARE(o.leadS, double(first) * ns);
        QCOMPARE(o.tailS, double(int64_t(nk.size()) - 1 - last) * ns);
        QCOMPARE(o.gapS, gap * ns);
        QCOMPARE(o.largestGapS, largest * ns);
        if (gaps) QCOMPARE(o.largestGapAtS, largestAt * ns);
        QCOMPARE(o.gaps, gaps);
        QVERIFY(std::abs(o.busyS + o.leadS + o.tailS + o.gapS - o.windowS) < 1e-15);
      }
      // Every device with an activity inside the window is reported, once, in order.
      std::vector<int> devices;
      for (const ProfileRange& r : p.ranges)
        if (r.kernel >= 0 && std::min(r.endNs, t1) > std::max(r.startNs, t0))
          devices.push_back(p.kernels[r.kernel].device);
      std::sort(devices.begin(), devices.end());
      devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
      QCOMPARE(int(occ.size()), int(devices.size()));
      for (std::size_t i = 0; i < occ.size(); ++i) QCOMPARE(occ[i].device, devices[i]);
    }
  }
};

QTEST_GUILESS_MAIN(TestKernelTrace)
#include "test_kernel_trace.moc"
