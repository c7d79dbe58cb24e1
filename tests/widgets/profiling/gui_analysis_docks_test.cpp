// The analysis docks on the real main window (offscreen): an extraction's profile
// lands in the timeline and phase table; per-patch CCD heatmaps colour exactly the
// extracted patches; a sweep runs in the background and its heatmap colours exactly
// the patches it touched; CPU vs CUDA says clearly when CUDA is missing and compares
// two runs with the numbers of compareFrames; traces export and import. Issue 14: the
// slowest patch and a found zone jump to the timeline and the CCD; the timeline, phase
// table and run comparison share one time axis; a sweep's settings join the run list;
// the applied sweep cell follows the Parameters; the sweep is a job on the app's one job
// runner with the EngineRegistry's warm engines, and its numbers are a direct call's.
#include "gui_test_sim.h"

#include "app/engine_factory.h"
#include "app/gui/analysis_docks.h"
#include "app/gui/main_window.h"
#include "core/extract/compare.h"
#include "core/plan/patch_plan.h"
#include "widgets/ccd_view.h"
#include "widgets/profiling/engine_comparison_view.h"
#include "widgets/profiling/phase_table.h"
#include "widgets/profiling/run_comparison_view.h"
#include "widgets/profiling/slowest_patches.h"
#include "widgets/profiling/sweep_view.h"
#include "widgets/profiling/time_axis_state.h"
#include "widgets/profiling/timeline_view.h"
#include "widgets/profiling/zone_finder.h"
#include "widgets/view_state.h"

#include <QDockWidget>
#include <QProgressBar>
#include <QCheckBox>
#include <QLabel>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTableWidget>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>

using namespace spex;

class GuiAnalysisDocksTest : public QObject {
  Q_OBJECT
  spextest::SmallSim m_sim;
  std::unique_ptr<MainWindow> m_w;
  AnalysisDocks* m_docks = nullptr;
  QTemporaryDir m_dir;

  QSet<int> coloured() const {
    QSet<int> out;
    for (int i = 0; i < int(m_w->document()->plan()->patches.size()); ++i)
      if (m_w->ccdView()->patchHeatmapColor(i).isValid()) out.insert(i);
    return out;
  }

private slots:
  void initTestCase() {
    m_sim = spextest::makeSmallSim();
    m_w = std::make_unique<MainWindow>();
    m_w->setInteractive(false);
    m_w->resize(1400, 900);
    m_w->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_w.get()));
    m_docks = AnalysisDocks::of(m_w.get());
    QVERIFY(m_docks);
    m_w->document()->loadSimulation(m_sim.psf, m_sim.sim, QStringLiteral("small test simulation"));
    QTest::qWait(20);
  }

  void extractionProfileShowsInTimeline() {
    const PatchPlan& plan = *m_w->document()->plan();
    // Three patches of fibers 5-9.
    QVector<int> sel;
    for (int p : plan.patchesInRegion(5, 10, 100, 200)) sel.push_back(p);
    QVERIFY(sel.size() >= 2);
    m_w->viewState()->setSelectedPatches(sel);
    QSignalSpy done(m_w.get(), &MainWindow::jobFinished);
    QVERIFY(m_w->runExtraction(false));
    QVERIFY(done.wait(120000));
    QCOMPARE(int(m_docks->runs().size()), 1);
    const AnalysisDocks::Run& run = m_docks->runs().front();
    QVERIFY(run.result);
    QCOMPARE(int(run.result->patches.size()), int(sel.size()));
    QCOMPARE(m_docks->timeline()->profile().get(), run.profile.get());
    QCOMPARE(run.profile->ranges.size(), run.result->profile.ranges.size());
    // The phase table's numbers are sums of the records.
    QAbstractItemModel* m = m_docks->phaseTable()->model();
    for (int r = 0; r < m->rowCount(); ++r) {
      const std::string name = m->data(m->index(r, 0), Qt::UserRole).toString().toStdString();
      double total = 0;
      int count = 0;
      for (const ProfileRange& x : run.profile->ranges)
        if (x.name == name) {
          total += x.durationNs() * 1e-9;
          ++count;
        }
      QCOMPARE(m->data(m->index(r, PhaseStatsModel::Count), Qt::UserRole).toInt(), count);
      QVERIFY(std::abs(m->data(m->index(r, PhaseStatsModel::Total), Qt::UserRole).toDouble() - total) < 1e-12);
    }
    // A selection in the timeline narrows the table.
    m_docks->timeline()->setSelection(0, run.profile->wallNs / 2);
    QVERIFY(m_docks->phaseTable()->hasTimeRange());

    // Heatmaps: wall time and chi2 colour exactly the extracted patches.
    QSet<int> want(sel.begin(), sel.end());
    QVERIFY(m_docks->setHeatmap(AnalysisDocks::Heatmap::WallTime));
    QCOMPARE(coloured(), want);
    QVERIFY(m_docks->setHeatmap(AnalysisDocks::Heatmap::Chi2));
    QCOMPARE(coloured(), want);
    const QVector<double> chi2 = m_docks->heatmapValues(AnalysisDocks::Heatmap::Chi2);
    for (const PatchDiagnostics& d : run.result->patches) QCOMPARE(chi2[d.patch], d.chi2);
    // Clicking a coloured patch selects it.
    const Patch& p = plan.patches[sel.front()];
    m_w->viewState()->setView(QPointF(m_sim.psf.x(p.fiber0 + 2, plan.wave.at(p.wave0 + p.nwave / 2)),
                                      m_sim.psf.y(p.fiber0 + 2, plan.wave.at(p.wave0 + p.nwave / 2))),
                              2.0);
    m_w->viewState()->setSelectedPatches({});
    const QPoint at = m_w->ccdView()->widgetPosOf(p.fiber0 + 2, plan.wave.at(p.wave0 + p.nwave / 2)).toPoint() + QPoint(3, 0);
    QTest::mouseClick(m_w->ccdView(), Qt::LeftButton, Qt::NoModifier, at);
    QCOMPARE(m_w->viewState()->selectedPatches(), QVector<int>{sel.front()});
    m_docks->setHeatmap(AnalysisDocks::Heatmap::None);
    QVERIFY(!m_w->ccdView()->hasPatchHeatmap());
  }

  void slowestPatchAndFoundZoneJumpToTimelineAndCcd() {
    const PatchPlan& plan = *m_w->document()->plan();
    const AnalysisDocks::Run& run = m_docks->runs().front();
    QCOMPARE(m_docks->shownRun(), 0);
    m_docks->timelineDock()->show();
    m_docks->timelineDock()->raise();
    auto* tabs = m_docks->timelineDock()->findChild<QTabWidget*>(QStringLiteral("timelineTabs"));
    QVERIFY(tabs);
    tabs->setCurrentWidget(m_docks->slowestPatches());
    QCoreApplication::processEvents();
    // The list holds the run's patches, slowest first.
    SlowestPatches* sp = m_docks->slowestPatches();
    QCOMPARE(int(sp->patches().size()), int(run.result->patches.size()));
    const PatchTime slowest = sp->patches().front();
    // Clicking it selects the patch and centres the CCD on it, and shows its zone.
    m_w->viewState()->setSelectedPatches({});
    m_w->viewState()->setView(QPointF(10, 10), 2.0);
    QTableWidget* t = sp->table();
    QTest::mouseClick(t->viewport(), Qt::LeftButton, Qt::NoModifier, t->visualItemRect(t->item(0, 0)).center());
    QCOMPARE(m_w->viewState()->selectedPatches(), QVector<int>{slowest.patch});
    const Patch& p = plan.patches[slowest.patch];
    const double w = plan.wave.at(p.wave0 + p.nwave / 2);
    const int f = p.fiber0 + p.nfiber / 2;
    const QPointF c = m_w->viewState()->center();
    QVERIFY(std::abs(c.x() - m_sim.psf.x(f, w)) < 1e-9 && std::abs(c.y() - m_sim.psf.y(f, w)) < 1e-9);
    QCOMPARE(m_w->viewState()->zoom(), 2.0); // zoom kept
    TimelineView* tl = m_docks->timeline();
    QCOMPARE(tl->focusZone(), slowest.longest);
    const ProfileRange& z = run.profile->ranges[slowest.longest];
    QVERIFY(tl->viewStart() <= z.startNs && tl->viewEnd() >= z.endNs);
    // The run comparison shares the time axis: it shows the same window.
    QCOMPARE(m_docks->runComparison()->timeline()->timeAxis(), m_docks->timeAxis());
    QCOMPARE(m_docks->phaseTable()->timeAxis(), m_docks->timeAxis());
    QCOMPARE(m_docks->runComparison()->timeline()->viewStart(), tl->viewStart());

    // Find zone: the slowest "solve" is on a patch; clicking it selects that patch.
    tabs->setCurrentWidget(m_docks->zoneFinder());
    QCoreApplication::processEvents();
    ZoneFinder* zf = m_docks->zoneFinder();
    zf->find(QStringLiteral("solve"));
    QVERIFY(!zf->matches().empty());
    const ProfileRange& s0 = run.profile->ranges[zf->matches().front()];
    QTableWidget* zt = zf->table();
    QTest::mouseClick(zt->viewport(), Qt::LeftButton, Qt::NoModifier, zt->visualItemRect(zt->item(0, 0)).center());
    QCOMPARE(m_w->viewState()->selectedPatches(), QVector<int>{s0.patch});
    QCOMPARE(tl->focusZone(), zf->matches().front());

    // Clicking a phase in the table highlights it on both timelines.
    tabs->setCurrentIndex(0);
    QCoreApplication::processEvents();
    PhaseTable* table = m_docks->phaseTable();
    const QRect cell = table->visualRect(table->model()->index(0, 0));
    QTest::mouseClick(table->viewport(), Qt::LeftButton, Qt::NoModifier, cell.center());
    QCOMPARE(tl->highlightedPhase(), table->phaseAt(0));
    QCOMPARE(m_docks->runComparison()->timeline()->highlightedPhase(), table->phaseAt(0));
    m_docks->timeAxis()->setHighlightedPhase({});
    tl->resetView();
  }

  void traceExportAndImport() {
    const QString path = m_dir.filePath(QStringLiteral("run.json"));
    QVERIFY(m_docks->exportTrace(path));
    QVERIFY(m_docks->openTrace(path));
    QCOMPARE(int(m_docks->runs().size()), 2);
    const Profile& a = *m_docks->runs()[0].profile;
    const Profile& b = *m_docks->runs()[1].profile;
    QCOMPARE(b.lanes, a.lanes);
    QCOMPARE(b.ranges.size(), a.ranges.size());
    for (std::size_t i = 0; i < a.ranges.size(); ++i) {
      QCOMPARE(b.ranges[i].name, a.ranges[i].name);
      QCOMPARE(b.ranges[i].startNs, a.ranges[i].startNs);
      QCOMPARE(b.ranges[i].endNs, a.ranges[i].endNs);
      QCOMPARE(b.ranges[i].lane, a.ranges[i].lane);
    }
    // The two runs are in the run comparison: every phase with ratio 1.
    QCOMPARE(m_docks->runComparison()->timeline()->trackCount(), 2);
    for (const PhaseComparison& c : m_docks->runComparison()->model()->comparison())
      QVERIFY(std::abs(c.ratio - 1.0) < 1e-12);
    // A trace has no per-patch results, so no heatmap.
    QVERIFY(!m_docks->setHeatmap(AnalysisDocks::Heatmap::WallTime));
    QVERIFY(!m_docks->openTrace(m_dir.filePath(QStringLiteral("missing.json"))));
    QVERIFY(m_docks->statusText().contains(QStringLiteral("missing.json")));
  }

  void cpuVsCudaSaysWhenCudaIsMissingAndComparesRuns() {
    if (!cudaBuilt()) {
      QVERIFY(!m_docks->compareEngines(QStringLiteral("cpu"), QStringLiteral("cuda"), false));
      QVERIFY(m_docks->engineComparison()->message().contains(QStringLiteral("CUDA is not available")));
      // In words, not the command line's flags.
      QVERIFY2(!m_docks->engineComparison()->message().contains(QStringLiteral("--engine")),
               qPrintable(m_docks->engineComparison()->message()));
    }
    // The sweep's "also CUDA" is greyed without a usable GPU, and a plain line says why.
    auto* alsoCuda = m_docks->sweepDock()->findChild<QCheckBox*>(QStringLiteral("sweepAlsoCuda"));
    auto* why = m_docks->sweepDock()->findChild<QLabel*>(QStringLiteral("sweepCudaWhy"));
    QVERIFY(alsoCuda && why);
    QCOMPARE(alsoCuda->isEnabled(), m_w->cudaUsable());
    if (!m_w->cudaUsable()) {
      QVERIFY(why->isVisibleTo(m_docks->sweepDock()));
      QVERIFY2(why->text().contains(QStringLiteral("CPU")), qPrintable(why->text()));
    }
    // Two engines in the background on the selection (CPU twice where there is no GPU).
    const QString b = cudaBuilt() && describeGpus().rfind("none", 0) != 0 ? QStringLiteral("cuda") : QStringLiteral("cpu");
    QSignalSpy done(m_docks, &AnalysisDocks::comparisonFinished);
    QVERIFY(m_docks->compareEngines(QStringLiteral("cpu"), b, false));
    QVERIFY(done.wait(120000));
    QCOMPARE(done.first().first().toBool(), true);
    EngineComparisonView* v = m_docks->engineComparison();
    QVERIFY(v->hasComparison());
    const auto& runs = m_docks->runs();
    const FrameComparison c = compareFrames(*runs[runs.size() - 2].result, *runs.back().result);
    QCOMPARE(v->comparison().nbins, c.nbins);
    QVERIFY(c.nbins > 0);
    QCOMPARE(v->comparison().maxPull, c.maxPull);
    QCOMPARE(v->comparison().fractionBelow, c.fractionBelow);
    QVERIFY(v->speedup() > 0);
    QCOMPARE(m_docks->runComparison()->timeline()->trackCount(), 2);
  }

  // Issue 14: the comparison is one job on the app's job runner with the
  // EngineRegistry's warm engines (the extractions' own): a second comparison makes no
  // engine, and its numbers are those of a direct call of a fresh engine, bin by bin.
  void comparisonReusesTheRegistrysEnginesAndKeepsItsNumbers() {
    const std::shared_ptr<EngineRegistry> registry = m_w->job()->engines();
    QVERIFY(registry);
    const QString b = cudaBuilt() && describeGpus().rfind("none", 0) != 0 ? QStringLiteral("cuda") : QStringLiteral("cpu");
    const auto plan = m_w->document()->plan();
    QVector<int> sel;
    for (int p : plan->patchesInRegion(10, 15, 150, 260)) sel.push_back(p);
    QVERIFY(sel.size() >= 2);
    m_w->viewState()->setSelectedPatches(sel);
    m_w->viewState()->setSelectedFibers({});
    QSignalSpy done(m_docks, &AnalysisDocks::comparisonFinished);
    QVERIFY(m_docks->compareEngines(QStringLiteral("cpu"), b, false));
    QVERIFY(m_w->job()->isRunning()); // on the app's job runner: nothing else runs meanwhile
    QCOMPARE(m_w->job()->client(), QStringLiteral("compare"));
    QVERIFY(!m_w->runExtraction(false));
    QVERIFY(!m_docks->compareEngines(QStringLiteral("cpu"), b, false));
    QVERIFY(done.wait(120000));
    QCOMPARE(done.takeFirst().first().toBool(), true);
    const int made = registry->enginesMade();
    QVERIFY(made >= 1);
    Engine* cpu = registry->lease("cpu").engine;
    QVERIFY(cpu);
    const int runsBefore = int(m_docks->runs().size());
    QVERIFY(m_docks->compareEngines(QStringLiteral("cpu"), b, false));
    QVERIFY(done.wait(120000));
    QCOMPARE(done.takeFirst().first().toBool(), true);
    QCOMPARE(registry->enginesMade(), made); // no engine made for the second click
    QCOMPARE(registry->lease("cpu").engine, cpu);
    QCOMPARE(int(m_docks->runs().size()), runsBefore + 2);
    // Its runs did not enter the document's results (they are the comparison's own).
    QVERIFY(m_docks->runs().back().values != m_w->document()->result(b));

    // A fresh engine called directly on the same request gives the same numbers.
    ExtractionRequest req;
    req.image = m_w->document()->image().get();
    req.psf = m_w->document()->psf().get();
    req.plan = plan;
    req.wave = plan->wave;
    req.fiberMin = plan->fiberMin;
    req.nFiber = plan->nFiber;
    req.params = plan->params;
    req.patches = plan->patchesForSelection({sel.begin(), sel.end()}, {});
    req.threads = m_w->document()->settings().threads;
    req.model = true;
    ProgressSink none;
    CancelToken cancel;
    const auto& runs = m_docks->runs();
    for (int k = 0; k < 2; ++k) {
      const ExtractionResult& got = *runs[runs.size() - 2 + k].values;
      const std::string kind = k == 0 ? "cpu" : b.toStdString();
      const ExtractionResult want = makeEngine(kind).engine->extract(req, none, cancel);
      QCOMPARE(got.nfiber, want.nfiber);
      QCOMPARE(got.nwave, want.nwave);
      QCOMPARE(got.patches.size(), want.patches.size());
      long bins = 0;
      for (int f = 0; f < want.nfiber; ++f)
        for (int j = 0; j < want.nwave; ++j) {
          const bool covered = want.covered.empty() || want.covered(f, j);
          QCOMPARE(bool(got.covered.empty() || got.covered(f, j)), covered);
          if (!covered) continue;
          ++bins;
          // The same engine code on the same patches: the same operations, the same bits.
          QCOMPARE(got.flux(f, j), want.flux(f, j));
          QCOMPARE(got.ivar(f, j), want.ivar(f, j));
          QCOMPARE(got.mask(f, j), want.mask(f, j));
          for (int d = 0; d < want.resolution.n1; ++d) QCOMPARE(got.resolution(f, d, j), want.resolution(f, d, j));
        }
      QVERIFY(bins >= 50L * sel.size());
    }
  }

  // Issue 14: the sweep leases the EngineRegistry's warm engines (no new engine when the
  // registry holds one) and runs as one job on the app's job runner (Extract and the
  // comparison are refused meanwhile, with a status-bar message); each cell's numbers
  // are those of a direct call of a fresh engine on that setting's patches, and cancel
  // stops it.
  void sweepLeasesTheRegistrysEnginesAndKeepsItsNumbers() {
    const std::shared_ptr<EngineRegistry> registry = m_w->job()->engines();
    const int made = registry->enginesMade();
    QVERIFY(made >= 1); // the comparison above made the CPU engine
    Engine* cpu = registry->lease("cpu").engine;
    const auto plan = m_w->document()->plan();
    QVector<int> sel;
    for (int p : plan->patchesInRegion(10, 15, 150, 260)) sel.push_back(p);
    QVERIFY(sel.size() >= 2);
    m_w->viewState()->setSelectedPatches(sel);
    m_w->viewState()->setSelectedFibers({});
    m_docks->setSweepFields(QStringLiteral("30"), QStringLiteral("5"), QStringLiteral("0.2"), false);
    QSignalSpy done(m_docks, &AnalysisDocks::sweepFinished);
    QVERIFY(m_docks->startSweep());
    QVERIFY(m_w->job()->isRunning());
    QCOMPARE(m_w->job()->client(), QStringLiteral("sweep"));
    QVERIFY(!m_w->runExtraction(false));
    QCOMPARE(m_w->statusBar()->currentMessage(), QStringLiteral("A sweep is running; extract when it is done."));
    QVERIFY(!m_docks->compareEngines(QStringLiteral("cpu"), QStringLiteral("cpu"), false));
    QCOMPARE(m_w->statusBar()->currentMessage(), QStringLiteral("A sweep is running; compare when it is done."));
    QVERIFY(done.wait(300000));
    QCOMPARE(done.takeFirst().first().toBool(), false);
    QVERIFY(!m_w->job()->isRunning());
    QCOMPARE(registry->enginesMade(), made); // the warm engine, not a new one
    QCOMPARE(registry->lease("cpu").engine, cpu);

    const SweepResult& r = m_docks->sweepResult();
    QCOMPARE(int(r.rows.size()), 1);
    const SweepRow& row = r.rows[0];
    QVERIFY2(row.ok(), row.error.c_str());
    QCOMPARE(row.engine, std::string("cpu"));
    QCOMPARE(r.mode, SweepMode::Truth);
    // Timings exist for the cell and for each of its patches.
    QVERIFY(row.wallS > 0);
    QVERIFY(row.throughput > 0);
    QVERIFY(!row.profile.ranges.empty());
    QCOMPARE(int(row.patchDiagnostics.size()), row.patches);
    for (const PatchDiagnostics& d : row.patchDiagnostics) QVERIFY(d.seconds > 0);

    // The same setting's patches extracted directly by a fresh engine (the previous
    // code path: makeEngine per sweep) give the same numbers: pulls over the region's
    // bins and each patch's chi2 (same engine code, same patches: the same bits).
    const Document* doc = m_w->document();
    PatchParams params = plan->params;
    params.nwavestep = 30;
    params.nsubbundles = 5;
    params.wavepadFrac = 0.2;
    const PatchPlan p30 = makePatchPlan(*doc->psf(), plan->wave, plan->fiberMin, plan->nFiber, params);
    int w0 = 0, w1 = 0;
    regionBins(plan->wave, r.region.waveMin, r.region.waveMax, w0, w1);
    ExtractionRequest req;
    req.image = doc->image().get();
    req.psf = doc->psf().get();
    req.wave = plan->wave;
    req.fiberMin = plan->fiberMin;
    req.nFiber = plan->nFiber;
    req.params = params;
    req.threads = doc->settings().threads;
    req.patches = p30.patchesInRegion(r.region.fiber0, r.region.fiber1, w0, w1);
    QCOMPARE(int(req.patches->size()), row.patches);
    ProgressSink none;
    CancelToken cancel;
    const ExtractionResult want = makeEngine("cpu").engine->extract(req, none, cancel);
    long bins = 0;
    for (uint8_t c : want.covered.data) bins += c != 0;
    QCOMPARE(row.bins, bins);
    const PullStats ps = truthPulls(want, *doc->truth(), r.region.fiber0, r.region.fiber1, w0, w1, want.ndiag);
    QVERIFY(ps.n > 100);
    QCOMPARE(row.pullN, ps.n);
    QCOMPARE(row.pullMean, ps.mean);
    QCOMPARE(row.pullStd, ps.std);
    auto byPatch = [](std::vector<PatchDiagnostics> v) {
      std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.patch < b.patch; });
      return v;
    };
    const auto got = byPatch(row.patchDiagnostics), exp = byPatch(want.patches);
    QCOMPARE(got.size(), exp.size());
    for (size_t i = 0; i < got.size(); ++i) {
      QCOMPARE(got[i].patch, exp[i].patch);
      QCOMPARE(got[i].chi2, exp[i].chi2);
      QCOMPARE(got[i].regularized, exp[i].regularized);
    }

    // The engines really are the registry's: with its engines dropped, a sweep makes
    // the CPU engine there (and keeps it warm). Cancel goes through the job runner: the
    // sweep stops early, says so, and frees the runner.
    registry->clear();
    m_docks->setSweepFields(QStringLiteral("20,25,30,35,40,45"), QStringLiteral("1,5"), QStringLiteral("0.2"), true);
    QVERIFY(m_docks->startSweep());
    m_docks->cancelSweep();
    QVERIFY(done.wait(300000));
    QCOMPARE(done.takeFirst().first().toBool(), true);
    QVERIFY(m_docks->sweepResult().cancelled);
    QVERIFY(m_docks->sweepResult().rows.size() < 12);
    QVERIFY(!m_w->job()->isRunning());
    QCOMPARE(registry->enginesMade(), made + 1);
  }

  void sweepInBackgroundColoursTheTouchedPatches() {
    const PatchPlan plan = *m_w->document()->plan(); // nwavestep 50 (default)
    QCOMPARE(plan.params.nwavestep, 50);
    QVector<int> sel;
    for (int p : plan.patchesInRegion(0, 10, 60, 140)) sel.push_back(p);
    m_w->viewState()->setSelectedPatches(sel);
    m_docks->setSweepFields(QStringLiteral("30,50"), QStringLiteral("5"), QStringLiteral("0.2"), false);
    QSignalSpy done(m_docks, &AnalysisDocks::sweepFinished);
    QVERIFY(m_docks->startSweep());
    QVERIFY(m_docks->isSweeping());
    QVERIFY(!m_docks->startSweep()); // one at a time
    QVERIFY(done.wait(300000));
    const SweepResult& r = m_docks->sweepResult();
    QCOMPARE(int(r.rows.size()), 2);
    QCOMPARE(r.mode, SweepMode::Truth); // the simulation's truth is on the plan's grid
    QCOMPARE(r.rows[0].nwavestep, 30);
    QCOMPARE(r.rows[1].nwavestep, 50);
    QCOMPARE(m_docks->sweepProgress()->value(), m_docks->sweepProgress()->maximum());
    QCOMPARE(m_docks->sweepView()->throughputMap()->columns(), 2);
    // The sweep's region is the selection's fibers x bins; for the current setting
    // (nwavestep 50) it touched exactly the selected patches, and the CCD says so.
    QCOMPARE(r.region.fiber0, 0);
    QCOMPARE(r.region.fiber1, 10);
    QSet<int> want(sel.begin(), sel.end());
    QCOMPARE(r.rows[1].patches, int(want.size()));
    QCOMPARE(coloured(), want);
    // Each setting is a run in the run list (not shown: the shown run stays).
    const int shown = m_docks->shownRun();
    const auto& runs = m_docks->runs();
    QVERIFY(runs.size() >= 2);
    for (int k = 0; k < 2; ++k) {
      const AnalysisDocks::Run& sr = runs[runs.size() - 2 + k];
      QVERIFY2(sr.label.startsWith(QStringLiteral("sweep cpu nwavestep %1 nsub 5").arg(r.rows[k].nwavestep)),
               qPrintable(sr.label));
      QCOMPARE(sr.profile->ranges.size(), r.rows[k].profile.ranges.size());
      QCOMPARE(int(patchTimes(*sr.profile).size()), r.rows[k].patches);
    }
    QCOMPARE(m_docks->shownRun(), shown);
    // The applied setting (the current Parameters, nwavestep 50) is marked.
    SweepHeatmap* tp = m_docks->sweepView()->throughputMap();
    QCOMPARE(tp->sweepRow(0, tp->appliedCell() % tp->columns()), 1);
    // Picking the other setting (a click on its cell) applies it and shows the patches
    // it touched in its plan; the mark moves with it.
    QTest::mouseClick(tp, Qt::LeftButton, Qt::NoModifier, tp->cellRect(0, 0).center());
    QCOMPARE(tp->appliedCell(), 0);
    const PatchPlan& plan30 = *m_w->document()->plan();
    QCOMPARE(plan30.params.nwavestep, 30);
    int w0 = 0, w1 = 0;
    regionBins(plan30.wave, r.region.waveMin, r.region.waveMax, w0, w1);
    const std::vector<int> touched = plan30.patchesInRegion(r.region.fiber0, r.region.fiber1, w0, w1);
    QCOMPARE(coloured(), QSet<int>(touched.begin(), touched.end()));
    QCOMPARE(int(touched.size()), r.rows[0].patches);

    // Cancel: a long sweep stops early and says so.
    m_docks->setSweepFields(QStringLiteral("20,25,30,35,40,45"), QStringLiteral("1,5"), QStringLiteral("0.2"), true);
    QSignalSpy done2(m_docks, &AnalysisDocks::sweepFinished);
    QVERIFY(m_docks->startSweep());
    m_docks->cancelSweep();
    QVERIFY(done2.wait(300000));
    QVERIFY(m_docks->sweepResult().cancelled);
    QVERIFY(m_docks->sweepResult().rows.size() < 12);
    // Bad values are refused with a message.
    m_docks->setSweepFields(QStringLiteral("30,x"), QStringLiteral("5"), QStringLiteral("0.2"), true);
    QVERIFY(!m_docks->startSweep());
  }
};

QTEST_MAIN(GuiAnalysisDocksTest)
#include "gui_analysis_docks_test.moc"
