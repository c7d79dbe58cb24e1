// The profiling views driven offscreen over real engine output (the small simulation
// of gui_test_sim.h): timeline zoom, pan, hover and range selection with the phase
// table following; phase and comparison tables equal sums of the records; the
// CPU-vs-CUDA view's numbers equal compareFrames (what `spexlab-cli compare` prints);
// sweep heatmaps carry the sweep's rows; the CCD heatmap colours exactly the given
// patches and reports clicks. Issue 14: one time axis that the timeline, the phase
// table and the run comparison follow; a clicked phase highlights its zones; self
// time; find zone with its histogram; slowest patches; per-call comparison with room
// for both runs; colour bars, the applied sweep cell, one-value heatmaps.
#include "gui_test_sim.h"

#include "core/extract/compare.h"
#include "core/extract/cpu_engine.h"
#include "core/profile/kernel_trace.h"
#include "widgets/ccd_view.h"
#include "widgets/colormap.h"
#include "widgets/heatmap_legend.h"
#include "widgets/profiling/engine_comparison_view.h"
#include "widgets/profiling/phase_table.h"
#include "widgets/profiling/run_comparison_view.h"
#include "widgets/profiling/slowest_patches.h"
#include "widgets/profiling/sweep_view.h"
#include "widgets/profiling/time_axis_state.h"
#include "widgets/profiling/timeline_view.h"
#include "widgets/profiling/zone_finder.h"
#include "widgets/view_state.h"

#include <QApplication>
#include <QComboBox>
#include <QHeaderView>
#include <QLineEdit>
#include <QScrollArea>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableWidget>
#include <QHelpEvent>
#include <QTest>
#include <QToolTip>
#include <QWheelEvent>

#include <cmath>
#include <map>
#include <sstream>

using namespace spex;

namespace {

void sendWheel(QWidget* w, QPoint at, int delta) {
  QWheelEvent e(QPointF(at), QPointF(w->mapToGlobal(at)), QPoint(), QPoint(0, delta), Qt::NoButton,
                Qt::NoModifier, Qt::NoScrollPhase, false);
  QApplication::sendEvent(w, &e);
}

void drag(QWidget* w, QPoint a, QPoint b, Qt::KeyboardModifiers mods) {
  QTest::mousePress(w, Qt::LeftButton, mods, a);
  QMouseEvent move(QEvent::MouseMove, QPointF(b), QPointF(w->mapToGlobal(b)), Qt::NoButton, Qt::LeftButton, mods);
  QApplication::sendEvent(w, &move);
  QTest::mouseRelease(w, Qt::LeftButton, mods, b);
}

// Zones overlapping [t0, t1) count whole (issue 14: a window must not turn a 7 ms
// patch cut by its edge into a 2 ms one); `inside` is the time within the window.
struct Sum {
  int count = 0, partial = 0;
  double total = 0, min = 1e300, max = 0, inside = 0;
};
std::map<std::string, Sum> sums(const Profile& p, int64_t t0, int64_t t1) {
  std::map<std::string, Sum> out;
  for (const ProfileRange& r : p.ranges) {
    if (r.endNs <= t0 || r.startNs >= t1) continue;
    const double d = double(r.endNs - r.startNs) * 1e-9;
    Sum& s = out[r.name];
    ++s.count;
    s.total += d;
    s.min = std::min(s.min, d);
    s.max = std::max(s.max, d);
    s.inside += double(std::min(r.endNs, t1) - std::max(r.startNs, t0)) * 1e-9;
    if (r.startNs < t0 || r.endNs > t1) ++s.partial;
  }
  return out;
}

// The table's numbers (Qt::UserRole of each cell) against sums of the records.
void checkTable(const PhaseTable& t, const Profile& p, int64_t t0, int64_t t1) {
  const auto want = sums(p, t0, t1);
  QAbstractItemModel* m = t.model();
  QCOMPARE(m->rowCount(), int(want.size()));
  for (int r = 0; r < m->rowCount(); ++r) {
    auto v = [&](int c) { return m->data(m->index(r, c), Qt::UserRole); };
    const Sum& s = want.at(v(PhaseStatsModel::Name).toString().toStdString());
    QCOMPARE(v(PhaseStatsModel::Count).toInt(), s.count);
    QVERIFY(std::abs(v(PhaseStatsModel::Total).toDouble() - s.total) < 1e-12);
    QVERIFY(std::abs(v(PhaseStatsModel::Mean).toDouble() - s.total / s.count) < 1e-12);
    QCOMPARE(v(PhaseStatsModel::Min).toDouble(), s.min);
    QCOMPARE(v(PhaseStatsModel::Max).toDouble(), s.max);
    QVERIFY(std::abs(v(PhaseStatsModel::Share).toDouble() - s.inside / ((t1 - t0) * 1e-9)) < 1e-12);
    QCOMPARE(v(PhaseStatsModel::Partial).toInt(), s.partial);
  }
}

// Self time by brute force: each zone less its direct children (same lane, depth + 1,
// inside it), summed per phase.
std::map<std::string, double> selfSums(const Profile& p) {
  std::map<std::string, double> out;
  for (const ProfileRange& r : p.ranges) {
    int64_t self = r.durationNs();
    for (const ProfileRange& c : p.ranges)
      if (c.lane == r.lane && c.depth == r.depth + 1 && c.startNs >= r.startNs && c.endNs <= r.endNs)
        self -= c.durationNs();
    out[r.name] += double(self) * 1e-9;
  }
  return out;
}

// Clicks the cell (row, column) of a table view as a user would.
void clickCell(QAbstractItemView* v, int row, int column = 0) {
  const QRect r = v->visualRect(v->model()->index(row, column));
  QVERIFY(r.isValid());
  QTest::mouseClick(v->viewport(), Qt::LeftButton, Qt::NoModifier, r.center());
}

} // namespace

class GuiProfilingWidgetsTest : public QObject {
  Q_OBJECT
  spextest::SmallSim m_sim;
  PatchPlan m_plan;
  std::shared_ptr<ExtractionResult> m_a, m_b; // nwavestep 50 and 40, with models

  std::shared_ptr<ExtractionResult> extract(int nwavestep, int threads) {
    ExtractionRequest req;
    req.image = &m_sim.sim.image;
    req.psf = &m_sim.psf;
    req.wave = spextest::smallSimOptions().wave;
    req.fiberMin = 0;
    req.nFiber = 10;
    req.params.nwavestep = nwavestep;
    req.threads = threads;
    req.model = true;
    CpuEngine cpu;
    ProgressSink none;
    CancelToken cancel;
    return std::make_shared<ExtractionResult>(cpu.extract(req, none, cancel));
  }

private slots:
  void initTestCase() {
    m_sim = spextest::makeSmallSim();
    m_a = extract(50, 2);
    m_b = extract(40, 1);
    PatchParams pp;
    m_plan = makePatchPlan(m_sim.psf, spextest::smallSimOptions().wave, 0, 10, pp);
  }

  void timelineZoomPanHoverAndSelection() {
    auto prof = std::make_shared<const Profile>(m_a->profile);
    TimelineView tl;
    PhaseTable table;
    QObject::connect(&tl, &TimelineView::selectionChanged, &table, &PhaseTable::setTimeRange);
    tl.resize(900, 300);
    tl.setProfile(prof, QStringLiteral("cpu"));
    table.setProfile(prof);
    tl.show();
    QVERIFY(QTest::qWaitForWindowExposed(&tl));
    // One row per lane and depth: main (extract, plan/finalize) and 2 worker lanes.
    QVERIFY(tl.rowCount() >= 5);
    QCOMPARE(tl.rowLabel(0), QStringLiteral("main"));
    QCOMPARE(tl.viewStart(), int64_t(0));
    QCOMPARE(tl.viewEnd(), prof->wallNs);
    checkTable(table, *prof, 0, prof->wallNs);

    // Wheel up at the middle: the window shrinks around the time under the cursor.
    const QPoint mid(tl.gutterWidth() + (tl.width() - tl.gutterWidth()) / 2, 40);
    const int64_t tMid = tl.timeAt(mid.x());
    sendWheel(&tl, mid, 240);
    const int64_t w1 = tl.viewEnd() - tl.viewStart();
    QVERIFY(w1 < prof->wallNs * 0.7);
    QVERIFY(std::abs(tl.timeAt(mid.x()) - tMid) <= w1 / 500 + 1);
    // Drag right by 100 px: earlier times come into view.
    const int64_t before = tl.viewStart();
    drag(&tl, mid, mid + QPoint(100, 0), Qt::NoModifier);
    QVERIFY(tl.viewStart() < before);
    QCOMPARE(tl.viewEnd() - tl.viewStart(), w1);
    tl.resetView();

    // Hover: the tooltip of a patch range names it, its duration and its patch.
    const ProfileRange* patch = nullptr;
    for (const ProfileRange& r : prof->ranges)
      if (r.name == "patch" && (!patch || r.durationNs() > patch->durationNs())) patch = &r;
    QVERIFY(patch);
    int row = -1;
    for (int i = 0; i < tl.rowCount(); ++i)
      if (tl.rowLabel(i) == QString::fromStdString(prof->lanes[patch->lane])) row = i;
    QVERIFY(row >= 0);
    const QPoint at(int(tl.xOf((patch->startNs + patch->endNs) / 2)), tl.rowTop(row) + 5);
    const ProfileRange* hit = tl.rangeAt(at);
    QVERIFY(hit);
    QCOMPARE(hit->name, std::string("patch"));
    const QString tip = tl.toolTipAt(at);
    QVERIFY(tip.contains(QStringLiteral("patch %1").arg(hit->patch)));
    QVERIFY(tip.contains(formatDuration(hit->durationNs() * 1e-9)));
    // Clicking it reports the patch.
    QSignalSpy clicked(&tl, &TimelineView::patchClicked);
    QTest::mouseClick(&tl, Qt::LeftButton, Qt::NoModifier, at);
    QCOMPARE(clicked.count(), 1);
    QCOMPARE(clicked.first().at(1).toInt(), hit->patch);

    // Shift+drag selects a time range; the table shows statistics of that window.
    QSignalSpy sel(&tl, &TimelineView::selectionChanged);
    const QPoint a(tl.gutterWidth() + 150, 60), b(tl.gutterWidth() + 450, 60);
    drag(&tl, a, b, Qt::ShiftModifier);
    QCOMPARE(sel.count(), 1);
    const int64_t s0 = sel.first().at(0).toLongLong(), s1 = sel.first().at(1).toLongLong();
    QCOMPARE(s0, tl.timeAt(a.x()));
    QCOMPARE(s1, tl.timeAt(b.x()));
    QVERIFY(tl.hasSelection());
    QVERIFY(table.hasTimeRange());
    checkTable(table, *prof, s0, s1);
    // The window cuts zones at its edges: those are the ones the old clipped
    // statistics got wrong, and the table says how many there are.
    int cut = 0;
    for (const auto& [name, s] : sums(*prof, s0, s1)) cut += s.partial;
    QVERIFY(cut > 0);
    // The share column is in view in a table as narrow as a docked one.
    table.resize(420, 300);
    QCoreApplication::processEvents();
    const int share = PhaseStatsModel::Share;
    QVERIFY(table.columnViewportPosition(share) + table.columnWidth(share) <= table.viewport()->width());
    // Esc clears it and the table goes back to the whole run.
    QTest::keyClick(&tl, Qt::Key_Escape);
    QVERIFY(!tl.hasSelection());
    checkTable(table, *prof, 0, prof->wallNs);
  }

  void phaseTableSortsByEveryColumn() {
    auto prof = std::make_shared<const Profile>(m_a->profile);
    PhaseTable table;
    table.setProfile(prof);
    table.show();
    for (int c = PhaseStatsModel::Count; c < PhaseStatsModel::ColumnCount; ++c) {
      table.sortByColumn(c, Qt::AscendingOrder);
      QAbstractItemModel* m = table.model();
      for (int r = 1; r < m->rowCount(); ++r)
        QVERIFY(m->data(m->index(r - 1, c), Qt::UserRole).toDouble() <= m->data(m->index(r, c), Qt::UserRole).toDouble());
    }
  }

  void phaseTableKeepsKernelsUnderTheirPhase() {
    // A kernel profile (the real fitting code, core/profile/kernel_trace.h): two phases
    // on a stream lane, kernels in each, one copy outside every phase.
    Profile p;
    p.lanes = {"main", "cuda:0 stream 1"};
    p.wallNs = 100'000;
    KernelTraceInput in;
    auto phase = [&](uint64_t id, const char* name, int64_t t0, int64_t t1) {
      PhaseWindow w;
      w.id = id;
      w.name = w.root = name;
      w.lane = 1;
      w.startNs = t0;
      w.endNs = t1;
      in.phases.push_back(w);
      p.ranges.push_back({name, t0, t1, 1, 0, -1});
    };
    phase(1, "solve", 10'000, 40'000);
    phase(2, "decorrelate", 40'000, 50'000);
    auto kernel = [&](const char* sym, uint32_t corr, uint64_t ext, int64_t t0, int64_t t1) {
      DeviceActivity a;
      a.name = sym;
      a.correlation = corr;
      a.stream = 5;
      a.startNs = uint64_t(t0);
      a.endNs = uint64_t(t1);
      in.activities.push_back(a);
      if (ext) in.external[corr] = ext;
    };
    kernel("_Z4cholv", 1, 1, 10'000, 20'000);
    kernel("_Z4cholv", 2, 1, 20'000, 25'000);
    kernel("_Z4gemmv", 3, 1, 25'000, 39'000);
    kernel("_Z3eigv", 4, 2, 40'000, 49'000);
    kernel("_Z5stray", 5, 0, 60'000, 61'000); // outside every phase
    in.streamLanes[{0, 5}] = 1;
    attachKernelTrace(p, in);
    auto prof = std::make_shared<const Profile>(p);
    PhaseTable table;
    table.setProfile(prof);
    table.show();
    QAbstractItemModel* m = table.model();
    QCOMPARE(m->rowCount(), 2 + 4); // phases + (solve: chol, gemm; decorrelate: eig; none: stray)
    QVERIFY(table.description().contains(QStringLiteral("CUPTI")));
    // Device occupancy over the whole run: 39 us of kernels in 100 us, 10 us before the
    // first, 12 us in two gaps (39-40, 49-60), 39 us after the last; over [10, 50) us:
    // 38 of 40 us busy, one gap of 1 us.
    QVERIFY2(table.description().contains(QStringLiteral("GPU 0 busy 39 % of it (kernels 39 %, two or more at once 0 %)")),
             qPrintable(table.description()));
    QVERIFY2(table.description().contains(QStringLiteral("in 2 gaps")), qPrintable(table.description()));
    table.setTimeRange(10'000, 50'000);
    QVERIFY2(table.description().contains(QStringLiteral("GPU 0 busy 95 %")), qPrintable(table.description()));
    QVERIFY2(table.description().contains(QStringLiteral("in 1 gap (")), qPrintable(table.description()));
    table.setTimeRange(0, 0);
    auto text = [&](int r, int c) { return m->data(m->index(r, c), Qt::DisplayRole).toString(); };
    for (int c = 0; c < PhaseStatsModel::ColumnCount; ++c)
      for (Qt::SortOrder order : {Qt::AscendingOrder, Qt::DescendingOrder}) {
        table.sortByColumn(c, order);
        QString phaseAbove;
        QStringList phases;
        for (int r = 0; r < m->rowCount(); ++r) {
          const QString name = text(r, PhaseStatsModel::Name);
          if (!name.contains(QChar(0x21b3))) {
            phaseAbove = name;
            phases << name;
            continue;
          }
          // A kernel row: right under its phase (the stray one after every phase).
          const QString share = text(r, PhaseStatsModel::Share);
          if (name.contains(QStringLiteral("stray"))) {
            QCOMPARE(r, m->rowCount() - 1);
            QVERIFY2(share.contains(QStringLiteral("outside")), qPrintable(share));
          } else {
            QVERIFY2(share.endsWith(QStringLiteral("of ") + phaseAbove), qPrintable(name + " / " + share));
          }
        }
        QCOMPARE(phases.size(), 2);
        // Phase rows in the column's order.
        if (c == PhaseStatsModel::Total)
          QCOMPARE(phases.first(), order == Qt::DescendingOrder ? QStringLiteral("solve") : QStringLiteral("decorrelate"));
      }
    // The numbers: chol in solve, 2 launches, 15 us of solve's 30 us.
    table.sortByColumn(PhaseStatsModel::Total, Qt::DescendingOrder);
    QCOMPARE(text(0, PhaseStatsModel::Name), QStringLiteral("solve"));
    QVERIFY(text(1, PhaseStatsModel::Name).endsWith(QStringLiteral("chol")));
    QCOMPARE(m->data(m->index(1, PhaseStatsModel::Count), Qt::UserRole).toInt(), 2);
    QCOMPARE(m->data(m->index(1, PhaseStatsModel::Share), Qt::UserRole).toDouble(), 0.5);
    QVERIFY(text(2, PhaseStatsModel::Name).endsWith(QStringLiteral("gemm")));
    // Phase statistics do not count kernels: solve is one range.
    QCOMPARE(m->data(m->index(0, PhaseStatsModel::Count), Qt::UserRole).toInt(), 1);
  }

  void timelineTooltipOfKernelsAndCopies() {
    // A kernel profile through the real fitting code: solve > cholesky on a stream lane,
    // one kernel in cholesky with its launch, a host-to-device copy and a set in solve.
    Profile p;
    p.lanes = {"main", "cuda:0 stream 1"};
    p.wallNs = 2'000'000;
    KernelTraceInput in;
    auto phase = [&](uint64_t id, const char* name, const char* root, int depth, int64_t t0, int64_t t1) {
      PhaseWindow w;
      w.id = id;
      w.name = name;
      w.root = root;
      w.lane = 1;
      w.depth = depth;
      w.patch = 7;
      w.startNs = t0;
      w.endNs = t1;
      in.phases.push_back(w);
      p.ranges.push_back({name, t0, t1, 1, depth, 7});
    };
    phase(1, "solve", "solve", 0, 0, 1'800'000);
    phase(2, "cholesky", "solve", 1, 100'000, 600'000);
    DeviceActivity k;
    k.name = "_ZN4spex3gpu9cholPanelILi7EEEvPdi";
    k.correlation = 11;
    k.stream = 5;
    k.startNs = 200'000;
    k.endNs = 500'000;
    k.launch.grid[0] = 24, k.launch.grid[1] = 2, k.launch.grid[2] = 1;
    k.launch.block[0] = 128, k.launch.block[1] = 1, k.launch.block[2] = 1;
    k.launch.registers = 40;
    k.launch.staticShared = 1536;
    k.launch.dynamicShared = 4096;
    in.activities.push_back(k);
    in.external[11] = 2;
    DeviceActivity c;
    c.kind = DeviceActivity::Kind::Memcpy;
    c.correlation = 12;
    c.stream = 5;
    c.startNs = 700'000;
    c.endNs = 1'700'000; // 12 MB in 1 ms: 12.0 GB/s
    c.bytes = 12'000'000;
    c.copyKind = "HtoD";
    in.activities.push_back(c);
    in.external[12] = 1;
    in.streamLanes[{0, 5}] = 1;
    attachKernelTrace(p, in);
    QCOMPARE(p.kernels.size(), std::size_t(2));

    // The same through a Chrome trace, as a trace opened in the workbench.
    const Profile back = Profile::fromChromeTrace(p.toChromeTrace());
    const Profile* const sources[] = {&p, &back};
    for (const Profile* src : sources) {
      auto prof = std::make_shared<const Profile>(*src);
      TimelineView tl;
      tl.resize(1000, 200);
      tl.setProfile(prof, QStringLiteral("cuda"));
      tl.show();
      QVERIFY(QTest::qWaitForWindowExposed(&tl));
      auto hover = [&](const std::string& name) {
        int index = -1;
        for (std::size_t i = 0; i < prof->ranges.size(); ++i)
          if (prof->ranges[i].name == name) index = int(i);
        if (index < 0) return QStringLiteral("no range %1").arg(QString::fromStdString(name));
        const ProfileRange& r = prof->ranges[index];
        const int row = tl.rowOf(0, index);
        if (row < 0) return QStringLiteral("no row");
        const QPoint at(int(tl.xOf((r.startNs + r.endNs) / 2)), tl.rowTop(row) + TimelineView::kRowHeight / 2);
        // The tooltip the widget shows on a real help event.
        QHelpEvent he(QEvent::ToolTip, at, tl.mapToGlobal(at));
        QCoreApplication::sendEvent(&tl, &he);
        const QString shown = QToolTip::text();
        QToolTip::hideText();
        return shown;
      };
      const QString kt = hover("spex::gpu::cholPanel<7>");
      QVERIFY2(kt.contains(QStringLiteral("grid 24\u00d72\u00d71, block 128\u00d71\u00d71 (6144 threads)")), qPrintable(kt));
      QVERIFY2(kt.contains(QStringLiteral("40 registers/thread")), qPrintable(kt));
      QVERIFY2(kt.contains(QStringLiteral("shared 1.50 KiB static + 4.00 KiB dynamic per block")), qPrintable(kt));
      QVERIFY2(kt.contains(QStringLiteral("phase: cholesky (in solve)")), qPrintable(kt));
      QVERIFY2(kt.contains(formatDuration(300e-6)), qPrintable(kt));
      QVERIFY2(kt.contains(QStringLiteral("batch 7")), qPrintable(kt));
      const QString ct = hover("memcpy HtoD");
      QVERIFY2(ct.contains(QStringLiteral("memcpy: 11.44 MiB host \u2192 device, 12.0 GB/s")), qPrintable(ct));
      QVERIFY2(ct.contains(QStringLiteral("phase: solve")), qPrintable(ct));
      QVERIFY2(!ct.contains(QStringLiteral("registers")), qPrintable(ct));
      // A phase's tooltip has none of it.
      const QString pt = hover("cholesky");
      QVERIFY2(pt.contains(QStringLiteral("<b>cholesky</b>")) && !pt.contains(QStringLiteral("grid")), qPrintable(pt));

      // The phase table's per-kernel breakdown carries the same in its Launch column.
      PhaseTable table;
      table.setProfile(prof);
      QVERIFY(!table.isColumnHidden(PhaseStatsModel::Launch));
      QAbstractItemModel* m = table.model();
      QStringList launches;
      for (int r = 0; r < m->rowCount(); ++r)
        launches << m->data(m->index(r, PhaseStatsModel::Name)).toString() + " | " +
                        m->data(m->index(r, PhaseStatsModel::Launch)).toString();
      const QString all = launches.join('\n');
      QVERIFY2(all.contains(QStringLiteral("cholPanel<7> | grid 24\u00d72\u00d71, block 128\u00d71\u00d71 (6144 threads), "
                                           "40 registers/thread, shared 1.50 KiB static + 4.00 KiB dynamic per block")),
               qPrintable(all));
      QVERIFY2(all.contains(QStringLiteral("memcpy HtoD | 11.44 MiB host \u2192 device, 12.0 GB/s")), qPrintable(all));
    }
    // Without a kernel profile there is no Launch column.
    PhaseTable plain;
    plain.setProfile(std::make_shared<const Profile>(m_a->profile));
    QVERIFY(plain.isColumnHidden(PhaseStatsModel::Launch));
  }

  void timelineOfManyRangesCullsAndMerges() {
    // 100 000 ranges on 8 lanes: the whole view merges sub-pixel ranges into blocks,
    // zooming in draws individual boxes. (Timing is benchmarked, not tested.)
    auto p = std::make_shared<Profile>();
    for (int l = 0; l < 8; ++l) p->laneIndex("cpu thread " + std::to_string(l + 1));
    for (int i = 0; i < 100000; ++i) {
      const int lane = i % 8;
      const int64_t s = int64_t(i / 8) * 10000;
      p->ranges.push_back({"patch", s, s + 9000, lane, 0, i});
    }
    p->wallNs = 12500 * int64_t(10000);
    TimelineView tl;
    tl.resize(1000, 200);
    tl.setProfile(p);
    tl.show();
    QVERIFY(QTest::qWaitForWindowExposed(&tl));
    (void)tl.grab(); // runs paintEvent
    QVERIFY(tl.lastMergedBlocks() > 0);
    QVERIFY(tl.lastDrawnRanges() + tl.lastMergedBlocks() < 100000 / 10);
    tl.setViewRange(0, 100 * 10000); // 100 ranges per lane visible
    (void)tl.grab(); // runs paintEvent
    QCOMPARE(tl.lastMergedBlocks(), 0);
    QVERIFY(tl.lastDrawnRanges() >= 8 * 100 && tl.lastDrawnRanges() <= 8 * 102);
  }

  void runComparisonTableHasBothRunsAndRatio() {
    RunComparisonView v;
    auto a = std::make_shared<const Profile>(m_a->profile), b = std::make_shared<const Profile>(m_b->profile);
    v.setRuns(QStringLiteral("2 threads"), a, QStringLiteral("1 thread"), b);
    QCOMPARE(v.timeline()->trackCount(), 2);
    const auto sa = sums(*a, 0, a->wallNs), sb = sums(*b, 0, b->wallNs);
    PhaseComparisonModel* m = v.model();
    QCOMPARE(m->rowCount(), int(sa.size()));
    for (int r = 0; r < m->rowCount(); ++r) {
      const std::string name = m->data(m->index(r, 0), Qt::UserRole).toString().toStdString();
      const double ta = m->data(m->index(r, PhaseComparisonModel::TotalA), Qt::UserRole).toDouble();
      const double tb = m->data(m->index(r, PhaseComparisonModel::TotalB), Qt::UserRole).toDouble();
      QVERIFY(std::abs(ta - sa.at(name).total) < 1e-12);
      QVERIFY(std::abs(tb - sb.at(name).total) < 1e-12);
      QCOMPARE(m->data(m->index(r, PhaseComparisonModel::CountB), Qt::UserRole).toInt(), sb.at(name).count);
      QVERIFY(std::abs(m->data(m->index(r, PhaseComparisonModel::Ratio), Qt::UserRole).toDouble() - tb / ta) < 1e-9);
    }
    QVERIFY(v.summary().contains(QStringLiteral("1 thread")));
  }

  void sharedTimeAxisIsFollowedByTimelineTableAndComparison() {
    auto a = std::make_shared<const Profile>(m_a->profile), b = std::make_shared<const Profile>(m_b->profile);
    TimeAxisState axis;
    TimelineView tl;
    PhaseTable table;
    RunComparisonView cmp;
    tl.setTimeAxis(&axis);
    table.setTimeAxis(&axis);
    cmp.setTimeAxis(&axis);
    tl.resize(900, 300);
    cmp.resize(900, 700);
    tl.setProfile(a, QStringLiteral("a"));
    table.setProfile(a);
    cmp.setRuns(QStringLiteral("a"), a, QStringLiteral("b"), b);
    tl.show();
    cmp.show();
    QVERIFY(QTest::qWaitForWindowExposed(&tl));
    QVERIFY(QTest::qWaitForWindowExposed(&cmp));
    // The axis spans the longest run; both timelines show all of it.
    QCOMPARE(axis.extentNs(), std::max(a->wallNs, b->wallNs));
    QCOMPARE(tl.viewEnd(), cmp.timeline()->viewEnd());
    // Zoom in the timeline: the comparison's timeline shows the same window.
    sendWheel(&tl, QPoint(tl.gutterWidth() + 300, 40), 720);
    QVERIFY(tl.viewEnd() - tl.viewStart() < axis.extentNs() / 2);
    QCOMPARE(cmp.timeline()->viewStart(), tl.viewStart());
    QCOMPARE(cmp.timeline()->viewEnd(), tl.viewEnd());
    // Select a range in the comparison's timeline: the phase table and the comparison
    // table both count the zones overlapping it.
    TimelineView* ct = cmp.timeline();
    ct->resetView();
    QCOMPARE(tl.viewStart(), int64_t(0));
    const QPoint p0(ct->gutterWidth() + 100, 30), p1(ct->gutterWidth() + 400, 30);
    drag(ct, p0, p1, Qt::ShiftModifier);
    QVERIFY(axis.hasSelection());
    const int64_t s0 = axis.selectionStart(), s1 = axis.selectionEnd();
    QCOMPARE(s0, ct->timeAt(p0.x()));
    QCOMPARE(tl.selectionStart(), s0);
    QVERIFY(table.hasTimeRange());
    checkTable(table, *a, s0, s1);
    const auto wa = sums(*a, s0, s1), wb = sums(*b, s0, s1);
    PhaseComparisonModel* m = cmp.model();
    QVERIFY(m->rowCount() > 0);
    for (int r = 0; r < m->rowCount(); ++r) {
      const std::string name = m->data(m->index(r, 0), Qt::UserRole).toString().toStdString();
      const double ta = m->data(m->index(r, PhaseComparisonModel::TotalA), Qt::UserRole).toDouble();
      const double tb = m->data(m->index(r, PhaseComparisonModel::TotalB), Qt::UserRole).toDouble();
      QVERIFY(std::abs(ta - (wa.count(name) ? wa.at(name).total : 0)) < 1e-12);
      QVERIFY(std::abs(tb - (wb.count(name) ? wb.at(name).total : 0)) < 1e-12);
    }
    QVERIFY(cmp.summary().contains(QStringLiteral("overlapping")));
    // Esc in the main timeline clears it everywhere.
    QTest::keyClick(&tl, Qt::Key_Escape);
    QVERIFY(!table.hasTimeRange());
    QCOMPARE(m->rowCount(), int(comparePhases(*a, *b).size()));
  }

  void clickingAPhaseHighlightsItsZones() {
    auto prof = std::make_shared<const Profile>(m_a->profile);
    TimeAxisState axis;
    TimelineView tl;
    PhaseTable table;
    tl.setTimeAxis(&axis);
    table.setTimeAxis(&axis);
    tl.setProfile(prof);
    table.setProfile(prof);
    tl.resize(1200, tl.contentHeight() + 10);
    table.resize(600, 400);
    tl.show();
    table.show();
    QVERIFY(QTest::qWaitForWindowExposed(&tl));
    QVERIFY(QTest::qWaitForWindowExposed(&table));
    // The widest "patch" zone and a pixel inside it, clear of its label.
    const ProfileRange* patch = nullptr;
    int index = -1;
    for (int i = 0; i < int(prof->ranges.size()); ++i)
      if (prof->ranges[i].name == "patch" && (!patch || prof->ranges[i].durationNs() > patch->durationNs())) {
        patch = &prof->ranges[i];
        index = i;
      }
    QVERIFY(patch);
    const int row = tl.rowOf(0, index);
    const QPoint inPatch(int(tl.xOf(patch->endNs)) - 4, tl.rowTop(row) + TimelineView::kRowHeight / 2);
    QVERIFY(tl.xOf(patch->endNs) - tl.xOf(patch->startNs) > 60);
    QCOMPARE(tl.grab().toImage().pixelColor(inPatch).rgb(), phaseColor("patch").rgb());
    QCOMPARE(tl.lastHighlightedRanges(), 0);
    // Click the "solve" row of the table.
    int solveRow = -1;
    for (int r = 0; r < table.model()->rowCount(); ++r)
      if (table.phaseAt(r) == QStringLiteral("solve")) solveRow = r;
    QVERIFY(solveRow >= 0);
    clickCell(&table, solveRow);
    QCOMPARE(axis.highlightedPhase(), QStringLiteral("solve"));
    QCOMPARE(tl.highlightedPhase(), QStringLiteral("solve"));
    // Every solve zone is drawn (none merged away, however narrow), the others fade.
    int solves = 0;
    for (const ProfileRange& r : prof->ranges) solves += r.name == "solve";
    (void)tl.grab();
    QCOMPARE(tl.lastHighlightedRanges(), solves);
    const QColor faded = tl.grab().toImage().pixelColor(inPatch);
    QVERIFY(faded.rgb() != phaseColor("patch").rgb());
    QVERIFY(faded.lightness() > phaseColor("patch").lightness()); // towards the white base
    // Clicking it again clears the highlight.
    clickCell(&table, solveRow);
    QVERIFY(axis.highlightedPhase().isEmpty());
    QCOMPARE(tl.grab().toImage().pixelColor(inPatch).rgb(), phaseColor("patch").rgb());
  }

  void selfTimeIsInclusiveLessNestedZones() {
    // A known nest: patch [0, 100) with children [10, 30) and [40, 90) and a grandchild.
    Profile p;
    p.laneIndex("cpu thread 1");
    p.ranges = {{"patch", 0, 100, 0, 0, 1}, {"solve", 10, 30, 0, 1, 1}, {"spots", 40, 90, 0, 1, 1},
                {"inner", 50, 60, 0, 2, 1}, {"patch", 100, 150, 0, 0, 2}};
    p.wallNs = 150;
    const std::vector<int64_t> self = selfTimesNs(p);
    QCOMPARE(self, (std::vector<int64_t>{30, 20, 40, 10, 50}));
    // The phase table of a real run: Self equals the brute-force sums, Total the
    // inclusive ones, and the nested phases make patch's self smaller than its total.
    auto prof = std::make_shared<const Profile>(m_a->profile);
    PhaseTable table;
    table.setProfile(prof);
    const auto want = selfSums(*prof);
    QAbstractItemModel* m = table.model();
    bool nested = false;
    for (int r = 0; r < m->rowCount(); ++r) {
      const std::string name = m->data(m->index(r, PhaseStatsModel::Name), Qt::UserRole).toString().toStdString();
      const double selfS = m->data(m->index(r, PhaseStatsModel::Self), Qt::UserRole).toDouble();
      const double total = m->data(m->index(r, PhaseStatsModel::Total), Qt::UserRole).toDouble();
      QVERIFY2(std::abs(selfS - want.at(name)) < 1e-12, name.c_str());
      QVERIFY(selfS <= total + 1e-15);
      if (name == "patch") nested = selfS < 0.5 * total;
    }
    QVERIFY(nested);
    // A selected window: self of the zones overlapping it, counted whole.
    TimeAxisState axis;
    table.setTimeAxis(&axis);
    axis.setSelection(prof->wallNs / 3, prof->wallNs / 2);
    double want3 = 0, got3 = 0;
    const std::vector<int64_t> s3 = selfTimesNs(*prof);
    for (std::size_t i = 0; i < prof->ranges.size(); ++i) {
      const ProfileRange& r = prof->ranges[i];
      if (r.name == "solve" && r.endNs > prof->wallNs / 3 && r.startNs < prof->wallNs / 2) want3 += s3[i] * 1e-9;
    }
    for (int r = 0; r < m->rowCount(); ++r)
      if (table.phaseAt(r) == QStringLiteral("solve"))
        got3 = table.proxy()->data(table.proxy()->index(r, PhaseStatsModel::Self), Qt::UserRole).toDouble();
    QVERIFY(want3 > 0);
    QVERIFY(std::abs(got3 - want3) < 1e-12);
  }

  void findZoneListsHistogramAndJumps() {
    auto prof = std::make_shared<const Profile>(m_a->profile);
    ZoneFinder zf;
    TimelineView tl;
    zf.resize(600, 600);
    tl.resize(900, 300);
    zf.setProfile(prof);
    tl.setProfile(prof);
    zf.show();
    tl.show();
    QVERIFY(QTest::qWaitForWindowExposed(&zf));
    // Typing a part of a name finds the zones of every name that contains it.
    zf.nameBox()->lineEdit()->clear();
    QTest::keyClicks(zf.nameBox()->lineEdit(), QStringLiteral("norm"));
    int normal = 0;
    for (const ProfileRange& r : prof->ranges) normal += r.name == "normal equations";
    QVERIFY(normal > 0);
    QCOMPARE(int(zf.allMatches().size()), normal);
    // An exact name: all its zones, slowest first, and the histogram holds them all.
    zf.nameBox()->lineEdit()->clear();
    QTest::keyClicks(zf.nameBox()->lineEdit(), QStringLiteral("solve"));
    std::vector<int64_t> d;
    for (const ProfileRange& r : prof->ranges)
      if (r.name == "solve") d.push_back(r.durationNs());
    QCOMPARE(int(zf.matches().size()), int(d.size()));
    for (std::size_t k = 1; k < zf.matches().size(); ++k)
      QVERIFY(prof->ranges[zf.matches()[k - 1]].durationNs() >= prof->ranges[zf.matches()[k]].durationNs());
    QCOMPARE(prof->ranges[zf.matches().front()].durationNs(), *std::max_element(d.begin(), d.end()));
    DurationHistogram* h = zf.histogram();
    int total = 0, fullest = 0;
    for (int b = 0; b < h->binCount(); ++b) {
      int n = 0;
      for (int64_t x : d) n += x >= h->binLow(b) && x <= h->binHigh(b);
      QCOMPARE(h->count(b), n); // the bins partition the durations
      total += h->count(b);
      if (h->count(b) > h->count(fullest)) fullest = b;
    }
    QCOMPARE(total, int(d.size()));
    QVERIFY(zf.statsText().contains(QStringLiteral("%1 zones").arg(d.size())));
    // Clicking the fullest bar lists only its zones.
    QTest::mouseClick(h, Qt::LeftButton, Qt::NoModifier, h->barRect(fullest).center());
    QCOMPARE(h->selectedBin(), fullest);
    QCOMPARE(int(zf.matches().size()), h->count(fullest));
    for (int i : zf.matches()) QCOMPARE(h->binOf(prof->ranges[i].durationNs()), fullest);
    // Clicking a zone shows it on the timeline and names its patch.
    QObject::connect(&zf, &ZoneFinder::zoneActivated, &tl, [&](int i) { tl.showZone(0, i); });
    QSignalSpy patch(&zf, &ZoneFinder::patchActivated);
    const int first = zf.matches().front();
    clickCell(zf.table(), 0);
    QCOMPARE(tl.focusZone(), first);
    const ProfileRange& z = prof->ranges[first];
    QVERIFY(tl.viewStart() <= z.startNs && tl.viewEnd() >= z.endNs);
    QVERIFY(tl.viewEnd() - tl.viewStart() <= 3 * std::max<int64_t>(z.durationNs(), 100) + 2);
    QCOMPARE(patch.count(), 1);
    QCOMPARE(patch.first().first().toInt(), z.patch);
    // The same bar again: all zones.
    QTest::mouseClick(h, Qt::LeftButton, Qt::NoModifier, h->barRect(fullest).center());
    QCOMPARE(int(zf.matches().size()), int(d.size()));
  }

  void slowestPatchesAreTheirZonesAndJump() {
    auto prof = std::make_shared<const Profile>(m_a->profile);
    SlowestPatches sp;
    sp.resize(500, 400);
    sp.setProfile(prof);
    sp.show();
    QVERIFY(QTest::qWaitForWindowExposed(&sp));
    // On the CPU engine each patch is one "patch" zone with the rest nested inside.
    std::map<int, int64_t> want;
    for (const ProfileRange& r : prof->ranges)
      if (r.name == "patch") want[r.patch] += r.durationNs();
    QCOMPARE(int(sp.patches().size()), int(want.size()));
    QCOMPARE(int(want.size()), int(m_a->patches.size()));
    for (std::size_t k = 0; k < sp.patches().size(); ++k) {
      const PatchTime& t = sp.patches()[k];
      QCOMPARE(t.totalNs, want.at(t.patch));
      if (k) QVERIFY(sp.patches()[k - 1].totalNs >= t.totalNs);
      QCOMPARE(prof->ranges[t.longest].name, std::string("patch"));
    }
    QSignalSpy patch(&sp, &SlowestPatches::patchActivated), zone(&sp, &SlowestPatches::zoneActivated);
    clickCell(sp.table(), 1);
    QCOMPARE(patch.count(), 1);
    QCOMPARE(patch.first().first().toInt(), sp.patches()[1].patch);
    QCOMPARE(zone.first().first().toInt(), sp.patches()[1].longest);
  }

  void runComparisonPerCallWithRoomForBothRuns() {
    RunComparisonView v;
    v.resize(900, 520);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    auto a = std::make_shared<const Profile>(m_a->profile), b = std::make_shared<const Profile>(m_b->profile);
    v.setRuns(QStringLiteral("nwavestep 50"), a, QStringLiteral("nwavestep 40"), b);
    QCoreApplication::processEvents();
    const auto sa = sums(*a, 0, a->wallNs), sb = sums(*b, 0, b->wallNs);
    PhaseComparisonModel* m = v.model();
    // The two runs have different numbers of patches, so per call is what compares.
    QVERIFY(sa.at("patch").count != sb.at("patch").count);
    for (int r = 0; r < m->rowCount(); ++r) {
      const std::string name = m->data(m->index(r, 0), Qt::UserRole).toString().toStdString();
      const Sum &x = sa.at(name), &y = sb.at(name);
      auto val = [&](int c) { return m->data(m->index(r, c), Qt::UserRole).toDouble(); };
      QVERIFY(std::abs(val(PhaseComparisonModel::PerCallA) - x.total / x.count) < 1e-12);
      QVERIFY(std::abs(val(PhaseComparisonModel::PerCallB) - y.total / y.count) < 1e-12);
      QVERIFY(std::abs(val(PhaseComparisonModel::RatioPerCall) - (y.total / y.count) / (x.total / x.count)) < 1e-9);
    }
    // Room for both runs: every row of both tracks is in view without scrolling, and
    // the table still shows its header and some rows.
    QScrollArea* area = v.timelineArea();
    QVERIFY2(area->viewport()->height() >= v.timeline()->contentHeight(),
             qPrintable(QStringLiteral("%1 < %2").arg(area->viewport()->height()).arg(v.timeline()->contentHeight())));
    QVERIFY(v.table()->viewport()->height() >= 3 * v.table()->verticalHeader()->defaultSectionSize());
    // Every column fits the table's width (short A/B headers).
    const int last = PhaseComparisonModel::ColumnCount - 1;
    QVERIFY(v.table()->columnViewportPosition(last) < v.table()->viewport()->width());
  }

  void engineComparisonEqualsCompareFrames() {
    EngineComparisonView v;
    v.resize(900, 600);
    v.show();
    v.setResults(m_a, m_b, 2.0, 0.5);
    QVERIFY(v.hasComparison());
    const FrameComparison c = compareFrames(*m_a, *m_b);
    const FrameComparison& g = v.comparison();
    QCOMPARE(g.nbins, c.nbins);
    QVERIFY(c.nbins > 0);
    for (std::size_t t = 0; t < c.fractionBelow.size(); ++t) QCOMPARE(g.fractionBelow[t], c.fractionBelow[t]);
    QCOMPARE(g.maxPull, c.maxPull);
    QVERIFY(c.maxPull > 0); // different patch sizes do not agree to the last bit
    QCOMPARE(g.maxRelIvar, c.maxRelIvar);
    QCOMPARE(g.maxResolution, c.maxResolution);
    QCOMPARE(g.maskDifferences, c.maskDifferences);
    QCOMPARE(v.speedup(), 4.0);
    // The table shows what `spexlab-cli compare` prints: each line of toText() ends
    // with the table's value for that quantity.
    std::istringstream lines(c.toText());
    std::string line;
    int row = 0;
    while (std::getline(lines, line)) {
      const QString value = v.table()->item(row, 1)->text();
      QVERIFY2(QString::fromStdString(line).endsWith(value), qPrintable(QString::fromStdString(line) + " / " + value));
      QVERIFY(QString::fromStdString(line).startsWith(v.table()->item(row, 0)->text()));
      ++row;
    }
    QCOMPARE(row, 11);
    // The difference spectrum shows the worst fiber; its largest |pull| is the max pull.
    QCOMPARE(v.fiber(), c.maxPullFiber);
    double worst = 0;
    for (double p : EngineComparisonView::pullSpectrum(*m_a, *m_b, v.fiber()))
      if (std::isfinite(p)) worst = std::max(worst, std::abs(p));
    QCOMPARE(worst, c.maxPull);
    QVERIFY(!v.differenceImage().isNull());
    QVERIFY(v.differenceMax() > 0);
    // Frames of different shapes say why.
    auto other = std::make_shared<ExtractionResult>(*m_b);
    other->nwave -= 1;
    v.setResults(m_a, other);
    QVERIFY(!v.hasComparison());
    QVERIFY(v.message().contains(QStringLiteral("cannot compare")));
  }

  void sweepHeatmapsCarryTheRows() {
    CpuEngine cpu;
    SweepSpec spec;
    spec.wave = spextest::smallSimOptions().wave;
    spec.nFiber = 10;
    spec.region = {0, 10, spec.wave.wmin, spec.wave.wmin + 79 * 0.8};
    spec.nwavestep = {30, 50};
    spec.nsubbundles = {1, 5};
    spec.threads = 2;
    SweepInputs in{&m_sim.sim.image, &m_sim.psf, &m_sim.sim.truth, nullptr};
    CancelToken cancel;
    const SweepResult r = runSweep({&cpu}, in, spec, {}, cancel);
    QCOMPARE(int(r.rows.size()), 4);
    SweepView v;
    v.resize(800, 400);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    v.setResult(r);
    SweepHeatmap* tp = v.throughputMap();
    QCOMPARE(tp->columns(), 2);
    QCOMPARE(tp->rowsCount(), 2);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        const SweepRow& row = r.rows[tp->sweepRow(i, j)];
        QCOMPARE(row.nwavestep, j == 0 ? 30 : 50);
        QCOMPARE(row.nsubbundles, i == 0 ? 1 : 5);
        QCOMPARE(tp->value(i, j), row.throughput);
        QCOMPARE(v.accuracyMap()->value(i, j), row.score(SweepMode::Truth));
      }
    const SweepRow best = r.bestSettings(0.02).front();
    const int b = tp->bestCell();
    QVERIFY(b >= 0);
    QCOMPARE(r.rows[tp->sweepRow(b / 2, b % 2)].throughput, best.throughput);
    QCOMPARE(v.accuracyMap()->bestCell(), b);
    QVERIFY(v.bestText().contains(QStringLiteral("nwavestep %1").arg(best.nwavestep)));
    // Clicking a cell activates its sweep row.
    QSignalSpy act(&v, &SweepView::rowActivated);
    QTest::mouseClick(tp, Qt::LeftButton, Qt::NoModifier, tp->cellRect(1, 0).center());
    QCOMPARE(act.count(), 1);
    QCOMPARE(act.first().first().toInt(), tp->sweepRow(1, 0));

    // The applied setting (nwavestep 30, nsubbundles 5: cell row 1, column 0) is framed
    // on both maps; another cell is not.
    const QPoint frameAt(tp->cellRect(1, 0).left() + 3, tp->cellRect(1, 0).center().y());
    const QPoint otherAt(tp->cellRect(0, 1).left() + 3, tp->cellRect(0, 1).center().y());
    QCOMPARE(tp->grab().toImage().pixelColor(frameAt).rgb(), tp->cellColor(1, 0).rgb());
    v.setApplied(30, 5, 0.2);
    QCOMPARE(tp->appliedCell(), 1 * 2 + 0);
    QCOMPARE(v.accuracyMap()->appliedCell(), 2);
    const QImage marked = tp->grab().toImage();
    QCOMPARE(marked.pixelColor(frameAt).rgb(), QColor(Qt::white).rgb());
    QCOMPARE(marked.pixelColor(otherAt).rgb(), tp->cellColor(0, 1).rgb());
    v.setApplied(80, 5, 0.2); // not swept: nothing marked
    QCOMPARE(tp->appliedCell(), -1);

    // Colour bars: the range of each map, on a dark panel, inside the widget.
    for (SweepHeatmap* map : {tp, v.accuracyMap()}) {
      const HeatmapLegend l = map->legend();
      double lo = INFINITY, hi = -INFINITY;
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          lo = std::min(lo, map->value(i, j));
          hi = std::max(hi, map->value(i, j));
        }
      QCOMPARE(l.lo, lo);
      QCOMPARE(l.hi, hi);
      QVERIFY(!l.single());
      const QImage img = map->grab().toImage();
      const QRect panel = map->legendRect();
      QVERIFY(!panel.isEmpty() && map->rect().contains(panel));
      QVERIFY(!panel.intersects(map->cellRect(0, 0)));
      QCOMPARE(img.pixelColor(panel.topLeft() + QPoint(1, 1)).rgb(), HeatmapLegend::panelColor().rgb());
      // The lowest-valued cell has the colour of its end of the bar.
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
          if (map->value(i, j) == lo) QCOMPARE(map->cellColor(i, j).rgb(), l.color(lo).rgb());
    }
    // Accuracy: lower is better, so the best (lowest) score is the bright end.
    QVERIFY(v.accuracyMap()->legend().reversed);
  }

  void oneSettingSweepHasOneSwatch() {
    CpuEngine cpu;
    SweepSpec spec;
    spec.wave = spextest::smallSimOptions().wave;
    spec.nFiber = 10;
    spec.region = {0, 5, spec.wave.wmin, spec.wave.wmin + 20 * 0.8};
    spec.nwavestep = {50};
    spec.nsubbundles = {5};
    spec.threads = 2;
    SweepInputs in{&m_sim.sim.image, &m_sim.psf, &m_sim.sim.truth, nullptr};
    CancelToken cancel;
    const SweepResult r = runSweep({&cpu}, in, spec, {}, cancel);
    QCOMPARE(int(r.rows.size()), 1);
    QVERIFY(r.rows[0].ok());
    // The row carries its extraction's profile (the run list shows it).
    QVERIFY(!r.rows[0].profile.ranges.empty());
    QCOMPARE(patchTimes(r.rows[0].profile).size(), r.rows[0].patchDiagnostics.size());
    SweepView v;
    v.resize(800, 420);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    v.setResult(r);
    SweepHeatmap* tp = v.throughputMap();
    const HeatmapLegend l = tp->legend();
    QVERIFY(l.single());
    QCOMPARE(l.lo, r.rows[0].throughput);
    // The cell is the middle of the map (not its top), and the bar is one swatch of
    // that colour labelled with the value, not a ramp whose two ends are equal.
    QCOMPARE(tp->cellColor(0, 0).rgb(), colormapColor(Colormap::Viridis, 0.5).rgb());
    QVERIFY(l.singleText().contains(QString::number(r.rows[0].throughput, 'f', 0)));
    const QImage img = tp->grab().toImage();
    const QRect panel = tp->legendRect();
    const QFontMetrics fm(tp->font());
    const int barY = panel.top() + HeatmapLegend::kPad + fm.height() + 2 + HeatmapLegend::kBarThickness / 2;
    const QColor swatch = img.pixelColor(panel.left() + HeatmapLegend::kPad + 3, barY);
    QCOMPARE(swatch.rgb(), tp->cellColor(0, 0).rgb());
    // Right of the swatch: the panel, not the rest of a ramp.
    QCOMPARE(img.pixelColor(panel.right() - HeatmapLegend::kPad - 2, barY).rgb(), HeatmapLegend::panelColor().rgb());
  }

  void ccdHeatmapLegendIsLegibleAndOneValueIsOneSwatch() {
    ViewState state;
    CcdView ccd(&state);
    ccd.resize(600, 700);
    ccd.setInputs(std::make_shared<const Image>(m_sim.sim.image), std::make_shared<const GaussHermitePsf>(m_sim.psf));
    ccd.setPlan(std::make_shared<const PatchPlan>(m_plan));
    ccd.show();
    QVERIFY(QTest::qWaitForWindowExposed(&ccd));
    QVector<double> v(int(m_plan.patches.size()), std::nan(""));
    for (const PatchDiagnostics& d : m_a->patches) v[d.patch] = d.seconds;
    ccd.setPatchHeatmap(v, QStringLiteral("patch wall time [s]"));
    // The legend's panel is opaque: its pixels do not depend on the image under it,
    // so the white text reads the same on every colour map.
    ScaleSettings grey = ccd.scale(), magma = grey;
    grey.colormap = Colormap::Grey;
    magma.colormap = Colormap::Magma;
    ccd.setScale(grey);
    const QImage a = ccd.grab().toImage();
    const QRect panel = ccd.heatmapLegendRect();
    QVERIFY(!panel.isEmpty() && ccd.rect().contains(panel));
    ccd.setScale(magma);
    const QImage b = ccd.grab().toImage();
    QCOMPARE(ccd.heatmapLegendRect(), panel);
    int text = 0;
    for (int y = panel.top(); y <= panel.bottom(); ++y)
      for (int x = panel.left(); x <= panel.right(); ++x) {
        QCOMPARE(a.pixel(x, y), b.pixel(x, y));
        text += qGray(a.pixel(x, y)) > 200; // white text and the light bar frame
      }
    QVERIFY(text > 50);
    QCOMPARE(a.pixelColor(panel.topLeft() + QPoint(1, 1)).rgb(), HeatmapLegend::panelColor().rgb());
    // One coloured patch: it and the legend's swatch are the middle colour and the
    // legend names the value.
    QVector<double> one(int(m_plan.patches.size()), std::nan(""));
    const int p = m_a->patches.front().patch;
    one[p] = m_a->patches.front().seconds;
    ccd.setPatchHeatmap(one, QStringLiteral("patch wall time [s]"));
    QVERIFY(ccd.heatmapLegend().single());
    QCOMPARE(ccd.patchHeatmapColor(p).rgb(), colormapColor(Colormap::Viridis, 0.5).rgb());
    QVERIFY(ccd.heatmapLegend().singleText().contains(QString::number(one[p], 'g', 3)));
    const QImage c = ccd.grab().toImage();
    const QRect panel1 = ccd.heatmapLegendRect();
    const QFontMetrics fm(ccd.font());
    const int barY = panel1.top() + HeatmapLegend::kPad + fm.height() + 2 + HeatmapLegend::kBarThickness / 2;
    QCOMPARE(c.pixelColor(panel1.left() + HeatmapLegend::kPad + 3, barY).rgb(), colormapColor(Colormap::Viridis, 0.5).rgb());
  }

  void ccdHeatmapColoursExactlyTheGivenPatches() {
    ViewState state;
    CcdView ccd(&state);
    ccd.resize(600, 700);
    auto image = std::make_shared<const Image>(m_sim.sim.image);
    auto psf = std::make_shared<const GaussHermitePsf>(m_sim.psf);
    ccd.setInputs(image, psf);
    ccd.setPlan(std::make_shared<const PatchPlan>(m_plan));
    ccd.show();
    QVERIFY(QTest::qWaitForWindowExposed(&ccd));
    // The patches of the nwavestep 50 run: per-patch wall time.
    QVector<double> v(int(m_plan.patches.size()), std::nan(""));
    for (const PatchDiagnostics& d : m_a->patches) v[d.patch] = d.seconds;
    ccd.setPatchHeatmap(v, QStringLiteral("patch wall time [s]"));
    QVERIFY(ccd.hasPatchHeatmap());
    int coloured = 0;
    for (int i = 0; i < int(m_plan.patches.size()); ++i) {
      QCOMPARE(ccd.patchHeatmapColor(i).isValid(), std::isfinite(v[i]));
      coloured += std::isfinite(v[i]);
    }
    QCOMPARE(coloured, int(m_a->patches.size()));
    // The pixels change where a coloured patch is, and a click there reports it.
    const Patch& p = m_plan.patches[m_a->patches.front().patch];
    const QPoint at = ccd.widgetPosOf(p.fiber0 + p.nfiber / 2, m_plan.wave.at(p.wave0 + p.nwave / 2)).toPoint() + QPoint(2, 0);
    const QColor withMap = ccd.grab().toImage().pixelColor(at);
    ccd.clearPatchHeatmap();
    const QColor without = ccd.grab().toImage().pixelColor(at);
    QVERIFY(withMap != without);
    ccd.setPatchHeatmap(v, QStringLiteral("patch wall time [s]"));
    QSignalSpy clicked(&ccd, &CcdView::heatmapPatchClicked);
    QTest::mouseClick(&ccd, Qt::LeftButton, Qt::NoModifier, at);
    QCOMPARE(clicked.count(), 1);
    QCOMPARE(clicked.first().first().toInt(), m_a->patches.front().patch);
  }
};

QTEST_MAIN(GuiProfilingWidgetsTest)
#include "gui_profiling_widgets_test.moc"
