// The profiling views driven offscreen over real engine output (the small simulation
// of gui_test_sim.h): timeline zoom, pan, hover and range selection with the phase
// table following; phase and comparison tables equal sums of the records; the
// CPU-vs-CUDA view's numbers equal compareFrames (what `spexlab-cli compare` prints);
// sweep heatmaps carry the sweep's rows; the CCD heatmap colours exactly the given
// patches and reports clicks.
#include "gui_test_sim.h"

#include "core/extract/compare.h"
#include "core/extract/cpu_engine.h"
#include "core/profile/kernel_trace.h"
#include "widgets/ccd_view.h"
#include "widgets/profiling/engine_comparison_view.h"
#include "widgets/profiling/phase_table.h"
#include "widgets/profiling/run_comparison_view.h"
#include "widgets/profiling/sweep_view.h"
#include "widgets/profiling/timeline_view.h"
#include "widgets/view_state.h"

#include <QApplication>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableWidget>
#include <QTest>
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
