#include "analysis_docks.h"

#include "widgets/background.h"

#include "comparison_dock.h"
#include "document.h"
#include "extraction_job.h"
#include "user_messages.h"

#include "app/engine_factory.h"
#include "core/errors.h"
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

#include <QCheckBox>
#include <QComboBox>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMainWindow>
#include <QMenu>
#include <QMenuBar>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QVBoxLayout>

#include <chrono>
#include <climits>
#include <cmath>
#include <utility>

namespace spex {

namespace {

// "30, 50,80" -> {30, 50, 80}; false on anything else.
template <class T>
bool parseList(const QString& text, std::vector<T>& out) {
  out.clear();
  for (const QString& part : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    bool ok = false;
    const double v = part.trimmed().toDouble(&ok);
    if (!ok || !(v > 0)) return false;
    if constexpr (std::is_integral_v<T>) {
      if (v != std::floor(v)) return false;
    }
    out.push_back(T(v));
  }
  return !out.empty();
}

const QString kCompareClient = QStringLiteral("compare"); // JobSpec::client of a comparison
const QString kSweepClient = QStringLiteral("sweep");     // JobSpec::client of a sweep

bool samePlan(const PatchParams& a, const PatchParams& b) {
  return a.bundlesize == b.bundlesize && a.nsubbundles == b.nsubbundles && a.nwavestep == b.nwavestep &&
         a.wavepad() == b.wavepad();
}

} // namespace

void installAnalysisDocks(const WorkbenchContext& context) {
  if (!AnalysisDocks::of(context.host)) new AnalysisDocks(context);
}

AnalysisDocks* AnalysisDocks::of(QMainWindow* window) {
  return window ? window->findChild<AnalysisDocks*>(QString(), Qt::FindDirectChildrenOnly) : nullptr;
}

AnalysisDocks::AnalysisDocks(const WorkbenchContext& context) : QObject(context.host), m_ctx(context) {
  QMainWindow* window = m_ctx.host;
  m_axis = new TimeAxisState(this);
  buildTimelineDock();
  buildRunDock();
  buildEngineDock();
  buildSweepDock();
  m_resultDock = new ComparisonDock(m_ctx.document, m_ctx.state, m_ctx.cudaUsable,
                                    cudaBuilt() ? m_ctx.gpuDescription : tr("this spexlab was built without CUDA"),
                                    window);
  // Beside the spectrum, which stays in front.
  QDockWidget* spectrum = window->findChild<QDockWidget*>(QStringLiteral("spectrumDock"));
  for (QDockWidget* d : {m_timelineDock, m_runDock, m_engineDock, static_cast<QDockWidget*>(m_resultDock), m_sweepDock}) {
    if (spectrum) window->tabifyDockWidget(spectrum, d);
    else window->addDockWidget(Qt::BottomDockWidgetArea, d);
  }
  if (spectrum) spectrum->raise();

  // Before Help, which stays the last menu.
  auto* menu = new QMenu(tr("&Analysis"), window->menuBar());
  if (m_ctx.menuBefore) window->menuBar()->insertMenu(m_ctx.menuBefore->menuAction(), menu);
  else window->menuBar()->addMenu(menu);
  for (QDockWidget* d : {m_timelineDock, m_runDock, m_engineDock, static_cast<QDockWidget*>(m_resultDock), m_sweepDock})
    menu->addAction(d->toggleViewAction());
  menu->addSeparator();
  menu->addAction(tr("Open Chrome trace\u2026"), this, [this] {
    const QString path = QFileDialog::getOpenFileName(m_ctx.host, tr("Open Chrome trace"), {}, tr("Chrome trace (*.json)"));
    if (!path.isEmpty()) openTrace(path);
  });
  menu->addAction(tr("Compare CPU vs CUDA"), this, [this] {
    m_engineDock->show();
    m_engineDock->raise();
    compareEngines(QStringLiteral("cpu"), QStringLiteral("cuda"), m_compareWhole->isChecked());
  });
  menu->addAction(tr("Patch-size sweep"), this, [this] {
    m_sweepDock->show();
    m_sweepDock->raise();
  });

  // Each finished extraction becomes a run in the timeline.
  connect(m_ctx.job, &ExtractionJob::engineFinished, this,
          [this](const QString& engine) {
            if (!m_ctx.job->client().isEmpty()) return; // a comparison: its runs come below
            const auto r = m_ctx.document->runSummary(engine);
            // The run's own numbers, copied by the job's worker (the Document's copy on
            // this thread stalled the event loop ~140 ms after a whole frame).
            auto runValues = [this](const QString& e) {
              auto v = m_ctx.job->runValues(e);
              return v ? v : m_ctx.document->runValues(e);
            };
            if (!r) return;
            auto profile = std::make_shared<const Profile>(r->profile);
            addRun(tr("%1 #%2 (%3 patches%4)")
                       .arg(engine)
                       .arg(m_runCounter + 1)
                       .arg(r->patches.size())
                       .arg(r->cancelled ? tr(", cancelled") : QString()),
                   profile, r, true, runValues(engine));
          });
  // Every run with a result can be compared with any other result.
  auto pushRuns = [this] {
    std::vector<ComparisonDock::Run> runs;
    for (const Run& r : m_runs)
      if (r.values) runs.push_back({r.label, r.values});
    m_resultDock->setRuns(runs);
  };
  connect(this, &AnalysisDocks::runsChanged, this, pushRuns);
  // A run keeps its own numbers (Run::values: Document::runValues' copy of the bins it
  // extracted), so later runs that edit the document's result in place cannot change them.
  // Patch indices of heatmaps belong to the plan they were made for.
  connect(m_ctx.document, &Document::planChanged, this, [this] {
    m_ctx.ccd->clearPatchHeatmap();
    showAppliedSweepSetting();
    const QSignalBlocker block(m_heatBox);
    m_heatBox->setCurrentIndex(0);
  });
  connect(m_ctx.document, &Document::inputsChanged, this, [this] {
    m_ctx.ccd->clearPatchHeatmap();
    m_sweepSelected = -1;
  });
  connect(m_ctx.ccd, &CcdView::heatmapPatchClicked, this, [this](int patch) {
    m_ctx.state->setSelectedPatches({patch});
  });
  // The comparison runs on the app's one job runner, with the registry's warm engines.
  connect(m_ctx.job, &ExtractionJob::engineFailed, this, [this](const QString& engine, const QString& msg) {
    if (m_comparing && m_ctx.job->client() == kCompareClient && m_compareError.isEmpty())
      m_compareError = QStringLiteral("%1: %2").arg(engine, msg);
  });
  connect(m_ctx.job, &ExtractionJob::finished, this, [this](bool cancelled) {
    if (!m_comparing || m_ctx.job->client() != kCompareClient) return;
    m_comparing = false;
    m_compareButton->setEnabled(m_ctx.cudaUsable); // greyed where CUDA cannot run
    const auto a = std::exchange(m_compareA, nullptr), b = std::exchange(m_compareB, nullptr);
    if (m_compareError.isEmpty() && (cancelled || a->cancelled || b->cancelled)) m_compareError = tr("cancelled");
    if (!m_compareError.isEmpty()) {
      m_engineCompare->showMessage(tr("The comparison failed: %1").arg(userMessage(m_compareError).text));
      emit comparisonFinished(false);
      return;
    }
    m_engineCompare->setResults(a, b, a->profile.wallNs * 1e-9, b->profile.wallNs * 1e-9);
    const QString la = tr("%1 #%2 (compare)").arg(QString::fromStdString(a->engine)).arg(m_runCounter + 1);
    addRun(la, std::make_shared<const Profile>(a->profile), a, true, a); // results of their own: their numbers
    const QString lb = tr("%1 #%2 (compare)").arg(QString::fromStdString(b->engine)).arg(m_runCounter + 1);
    addRun(lb, std::make_shared<const Profile>(b->profile), b, true, b);
    m_runA->setCurrentIndex(int(m_runs.size()) - 2);
    m_runB->setCurrentIndex(int(m_runs.size()) - 1);
    setStatus(tr("Compared %1 with %2: speed-up %3x").arg(la, lb).arg(m_engineCompare->speedup(), 0, 'f', 2));
    emit comparisonFinished(true);
  });
  // The sweep runs on the same job runner (client "sweep"), leasing the same engines.
  connect(m_ctx.job, &ExtractionJob::engineFailed, this, [this](const QString&, const QString& msg) {
    if (m_sweeping && m_ctx.job->client() == kSweepClient && m_sweepError.isEmpty()) m_sweepError = msg;
  });
  connect(m_ctx.job, &ExtractionJob::finished, this, [this](bool cancelled) {
    if (!m_sweeping || m_ctx.job->client() != kSweepClient) return;
    m_sweeping = false;
    m_sweepTimer.stop();
    m_sweepRun->setEnabled(true);
    m_sweepCancelButton->setEnabled(false);
    const auto st = std::exchange(m_sweepState, nullptr);
    if (!m_sweepError.isEmpty()) {
      m_sweepLabel->setText(tr("Sweep failed: %1").arg(m_sweepError));
      setStatus(m_sweepLabel->text());
      emit sweepFinished(false);
      return;
    }
    st->result.cancelled = st->result.cancelled || cancelled;
    m_sweep = std::move(st->result);
    m_sweepView->setResult(m_sweep);
    showAppliedSweepSetting();
    // Each setting's extraction is a run of its own, for the timeline and the run
    // comparison (the shown run stays).
    for (const SweepRow& r : m_sweep.rows)
      if (r.ok() && !r.profile.ranges.empty())
        addRun(tr("sweep %1 nwavestep %2 nsub %3 pad %4 (%5 patches)")
                   .arg(QString::fromStdString(r.engine))
                   .arg(r.nwavestep)
                   .arg(r.nsubbundles)
                   .arg(r.wavepadFrac)
                   .arg(r.patches),
               std::make_shared<const Profile>(r.profile), nullptr, false);
    m_sweepBar->setValue(m_sweepBar->maximum());
    m_sweepLabel->setText(tr("%1 settings done%2 (%3 accuracy)")
                              .arg(m_sweep.rows.size())
                              .arg(m_sweep.cancelled ? tr(", cancelled") : QString())
                              .arg(QString::fromLatin1(sweepModeName(m_sweep.mode))));
    // Show the patches of the row with the current plan's setting, if the sweep ran it.
    m_sweepSelected = -1;
    const auto plan = m_ctx.document->plan();
    for (int i = 0; plan && i < int(m_sweep.rows.size()); ++i) {
      const SweepRow& r = m_sweep.rows[i];
      PatchParams p = plan->params;
      p.nwavestep = r.nwavestep;
      p.nsubbundles = r.nsubbundles;
      p.wavepadFrac = r.wavepadFrac;
      if (r.ok() && samePlan(p, plan->params)) {
        m_sweepSelected = i;
        break;
      }
    }
    if (m_sweepSelected >= 0) setHeatmap(Heatmap::Sweep);
    emit sweepFinished(m_sweep.cancelled);
  });
  m_sweepTimer.setInterval(100);
  connect(&m_sweepTimer, &QTimer::timeout, this, [this] {
    if (!m_sweepState) return;
    const SweepShared& st = *m_sweepState;
    const int rows = std::max(1, st.rows.load());
    const int total = std::max(1, st.patchTotal.load());
    m_sweepBar->setRange(0, rows * 100);
    m_sweepBar->setValue(st.rowNow.load() * 100 + 100 * st.patchDone.load() / total);
    m_sweepLabel->setText(tr("setting %1/%2: %3/%4 patches")
                              .arg(st.rowNow.load() + 1)
                              .arg(rows)
                              .arg(st.patchDone.load())
                              .arg(st.patchTotal.load()));
  });
}

// A running sweep is the job runner's: it cancels and waits for it when it goes, and
// the sweep's job holds nothing of the docks (its state is shared).
AnalysisDocks::~AnalysisDocks() = default;

void AnalysisDocks::setStatus(const QString& s) {
  m_status = s;
  if (QStatusBar* bar = m_ctx.host->statusBar()) bar->showMessage(s, 10000);
}

// --- Timeline dock

void AnalysisDocks::buildTimelineDock() {
  auto* w = new QWidget;
  m_runBox = new QComboBox;
  m_runBox->setMinimumContentsLength(24);
  m_runBox->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  auto* open = new QPushButton(tr("Open trace\u2026"));
  auto* save = new QPushButton(tr("Export trace\u2026"));
  m_heatBox = new QComboBox;
  m_heatBox->addItems({tr("none"), tr("wall time per patch"), tr("mean \u03c7\u00b2/pixel per patch"),
                       tr("extra regularisation"), tr("sweep: patches of the chosen setting")});
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Run")));
  bar->addWidget(m_runBox, 1);
  bar->addWidget(open);
  bar->addWidget(save);
  bar->addSpacing(12);
  bar->addWidget(new QLabel(tr("CCD heatmap")));
  bar->addWidget(m_heatBox);

  m_timeline = new TimelineView;
  m_timeline->setTimeAxis(m_axis);
  auto* scroll = new QScrollArea;
  scroll->setWidget(m_timeline);
  scroll->setWidgetResizable(true);
  m_phaseTable = new PhaseTable;
  m_phaseTable->setTimeAxis(m_axis);
  m_phaseLabel = new QLabel(m_phaseTable->description());
  m_phaseLabel->setWordWrap(true);
  auto* phases = new QWidget;
  auto* rl = new QVBoxLayout(phases);
  rl->setContentsMargins(0, 0, 0, 0);
  rl->addWidget(m_phaseLabel);
  rl->addWidget(m_phaseTable, 1);
  m_zoneFinder = new ZoneFinder;
  m_slowest = new SlowestPatches;
  auto* right = new QTabWidget;
  right->setObjectName(QStringLiteral("timelineTabs"));
  right->addTab(phases, tr("Phases"));
  right->addTab(m_zoneFinder, tr("Find zone"));
  right->addTab(m_slowest, tr("Slowest patches"));
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(scroll);
  split->addWidget(right);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* lay = new QVBoxLayout(w);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addLayout(bar);
  lay->addWidget(split, 1);

  connect(m_runBox, &QComboBox::currentIndexChanged, this, [this](int i) { showRun(i); });
  connect(open, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(m_ctx.host, tr("Open Chrome trace"), {}, tr("Chrome trace (*.json)"));
    if (!path.isEmpty()) openTrace(path);
  });
  connect(save, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(m_ctx.host, tr("Export Chrome trace"), QStringLiteral("profile.json"),
                                                      tr("Chrome trace (*.json)"));
    if (!path.isEmpty()) exportTrace(path);
  });
  connect(m_heatBox, &QComboBox::currentIndexChanged, this, [this](int i) { setHeatmap(Heatmap(i)); });
  // The phase table follows the shared axis itself; the line above it says what of.
  connect(m_axis, &TimeAxisState::selectionChanged, this,
          [this] { m_phaseLabel->setText(m_phaseTable->description()); });
  connect(m_timeline, &TimelineView::patchClicked, this, [this](int, int patch) { jumpToPatch(patch); });
  // Find zone and slowest patches: show the zone on the timeline, the patch on the CCD.
  auto showZone = [this](int rangeIndex) { m_timeline->showZone(0, rangeIndex); };
  auto jump = [this](int patch) { jumpToPatch(patch); };
  connect(m_zoneFinder, &ZoneFinder::zoneActivated, this, showZone);
  connect(m_zoneFinder, &ZoneFinder::patchActivated, this, jump);
  connect(m_slowest, &SlowestPatches::zoneActivated, this, showZone);
  connect(m_slowest, &SlowestPatches::patchActivated, this, jump);

  m_timelineDock = new QDockWidget(tr("Timeline"), m_ctx.host);
  m_timelineDock->setObjectName(QStringLiteral("timelineDock"));
  m_timelineDock->setWidget(w);
}

void AnalysisDocks::addRun(const QString& label, std::shared_ptr<const Profile> profile,
                           std::shared_ptr<const ExtractionResult> result, bool show,
                           std::shared_ptr<const ExtractionResult> values) {
  ++m_runCounter;
  m_runs.push_back({label, std::move(profile), std::move(result), std::move(values)});
  refreshRunCombos();
  if (show) m_runBox->setCurrentIndex(int(m_runs.size()) - 1); // shows it
  emit runsChanged();
}

bool AnalysisDocks::jumpToPatch(int patch) {
  const int i = shownRun();
  const auto plan = m_ctx.document->plan();
  if (i < 0 || !m_runs[i].result || !plan || !samePlan(m_runs[i].result->params, plan->params) ||
      m_runs[i].result->fiberMin != plan->fiberMin || patch < 0 || patch >= int(plan->patches.size())) {
    setStatus(tr("Patch %1 is not on the CCD: the shown run has no per-patch results for the current patch plan.")
                  .arg(patch));
    return false;
  }
  // Select it and bring its kept region to the middle of the CCD (zoom unchanged).
  const Patch& p = plan->patches[patch];
  const auto psf = m_ctx.document->psf();
  ViewState* vs = m_ctx.state;
  vs->setSelectedPatches({patch});
  if (psf) {
    const int f = p.fiber0 + p.nfiber / 2;
    const double w = plan->wave.at(p.wave0 + p.nwave / 2);
    vs->setCenter(QPointF(psf->x(f, w), psf->y(f, w)));
  }
  setStatus(tr("Patch %1: fibers %2–%3, %4–%5 Å")
                .arg(patch)
                .arg(m_ctx.state->fiberNumber(p.fiber0))
                .arg(m_ctx.state->fiberNumber(p.fiber0 + p.nfiber - 1))
                .arg(plan->wave.at(p.wave0), 0, 'f', 1)
                .arg(plan->wave.at(p.wave0 + p.nwave - 1), 0, 'f', 1));
  return true;
}

void AnalysisDocks::showAppliedSweepSetting() {
  const auto plan = m_ctx.document->plan();
  if (plan) m_sweepView->setApplied(plan->params.nwavestep, plan->params.nsubbundles, plan->params.wavepadFrac);
  else m_sweepView->clearApplied();
}

void AnalysisDocks::refreshRunCombos() {
  for (QComboBox* box : {m_runBox, m_runA, m_runB}) {
    if (!box) continue;
    const int keep = box->currentIndex();
    const QSignalBlocker block(box);
    box->clear();
    for (const Run& r : m_runs) box->addItem(r.label);
    box->setCurrentIndex(std::min(keep, box->count() - 1));
  }
  if (m_runA && m_runs.size() >= 2 && m_runA->currentIndex() == m_runB->currentIndex()) {
    const QSignalBlocker ba(m_runA), bb(m_runB);
    m_runA->setCurrentIndex(int(m_runs.size()) - 2);
    m_runB->setCurrentIndex(int(m_runs.size()) - 1);
  }
  updateRunComparison();
}

void AnalysisDocks::showRun(int index) {
  if (index < 0 || index >= int(m_runs.size())) {
    m_timeline->setProfile(nullptr);
    m_phaseTable->setProfile(nullptr);
    m_zoneFinder->setProfile(nullptr);
    m_slowest->setProfile(nullptr);
    m_phaseLabel->setText(m_phaseTable->description());
    return;
  }
  if (m_runBox->currentIndex() != index) {
    const QSignalBlocker block(m_runBox);
    m_runBox->setCurrentIndex(index);
  }
  const Run& r = m_runs[index];
  m_timeline->setProfile(r.profile, r.label);
  m_phaseTable->setProfile(r.profile);
  m_zoneFinder->setProfile(r.profile);
  m_slowest->setProfile(r.profile);
  m_phaseLabel->setText(m_phaseTable->description());
  if (m_heatBox->currentIndex() > 0 && Heatmap(m_heatBox->currentIndex()) != Heatmap::Sweep)
    setHeatmap(Heatmap(m_heatBox->currentIndex()));
}

int AnalysisDocks::shownRun() const { return m_runBox->currentIndex(); }

bool AnalysisDocks::openTrace(const QString& path) {
  try {
    auto p = std::make_shared<const Profile>(readChromeTraceFile(path.toStdString()));
    addRun(tr("trace %1").arg(QFileInfo(path).fileName()), p);
    m_timelineDock->show();
    m_timelineDock->raise();
    setStatus(tr("Opened %1: %2 ranges on %3 lanes").arg(path).arg(p->ranges.size()).arg(p->lanes.size()));
    return true;
  } catch (const std::exception& e) {
    setStatus(QString::fromStdString(e.what()));
    m_ctx.showError(tr("Cannot open trace"), m_status);
    return false;
  }
}

bool AnalysisDocks::exportTrace(const QString& path) const {
  const int i = shownRun();
  if (i < 0) return false;
  try {
    writeChromeTraceFile(*m_runs[i].profile, path.toStdString());
    return true;
  } catch (const std::exception& e) {
    m_ctx.showError(tr("Cannot export trace"), QString::fromStdString(e.what()));
    return false;
  }
}

QVector<double> AnalysisDocks::heatmapValues(Heatmap h, QString* why) const {
  auto fail = [&](const QString& s) {
    if (why) *why = s;
    return QVector<double>();
  };
  const auto plan = m_ctx.document->plan();
  if (!plan) return fail(tr("No patch plan."));
  QVector<double> v(int(plan->patches.size()), std::nan(""));
  const std::vector<PatchDiagnostics>* diags = nullptr;
  if (h == Heatmap::Sweep) {
    if (m_sweepSelected < 0 || m_sweepSelected >= int(m_sweep.rows.size()))
      return fail(tr("Pick a sweep setting first."));
    const SweepRow& r = m_sweep.rows[m_sweepSelected];
    PatchParams p = plan->params;
    p.nwavestep = r.nwavestep;
    p.nsubbundles = r.nsubbundles;
    p.wavepadFrac = r.wavepadFrac;
    if (!samePlan(p, plan->params)) return fail(tr("The chosen sweep setting is not the current plan's."));
    diags = &r.patchDiagnostics;
  } else {
    const int i = shownRun();
    if (i < 0 || !m_runs[i].result) return fail(tr("The shown run has no per-patch results (an opened trace?)."));
    const ExtractionResult& r = *m_runs[i].result;
    if (!samePlan(r.params, plan->params) || r.fiberMin != plan->fiberMin || r.nfiber != plan->nFiber ||
        r.nwave != plan->wave.n)
      return fail(tr("The shown run used another patch plan than the current one."));
    diags = &r.patches;
  }
  for (const PatchDiagnostics& d : *diags) {
    if (d.patch < 0 || d.patch >= v.size()) continue;
    switch (h) {
    case Heatmap::WallTime:
    case Heatmap::Sweep: v[d.patch] = d.seconds; break;
    case Heatmap::Chi2: v[d.patch] = d.chi2; break;
    case Heatmap::Regularized:
      if (d.regularized || d.failed) v[d.patch] = d.failed ? 2 : 1;
      break;
    case Heatmap::None: break;
    }
  }
  return v;
}

bool AnalysisDocks::setHeatmap(Heatmap h) {
  if (m_heatBox->currentIndex() != int(h)) {
    const QSignalBlocker block(m_heatBox);
    m_heatBox->setCurrentIndex(int(h));
  }
  CcdView* ccd = m_ctx.ccd;
  if (h == Heatmap::None) {
    ccd->clearPatchHeatmap();
    return true;
  }
  QString why;
  const QVector<double> v = heatmapValues(h, &why);
  if (v.isEmpty()) {
    ccd->clearPatchHeatmap();
    setStatus(why);
    return false;
  }
  static const char* labels[] = {"", "patch wall time [s]", "mean chi2/pixel", "1 regularised, 2 failed",
                                 "sweep: patch wall time [s]"};
  ccd->setPatchHeatmap(v, tr(labels[int(h)]));
  int n = 0;
  for (double x : v) n += std::isfinite(x);
  setStatus(h == Heatmap::Regularized && n == 0 ? tr("No patch needed extra regularisation.")
                                                : tr("Heatmap: %1 patches coloured").arg(n));
  return true;
}

// --- Run comparison dock

void AnalysisDocks::buildRunDock() {
  auto* w = new QWidget;
  m_runA = new QComboBox;
  m_runB = new QComboBox;
  for (QComboBox* b : {m_runA, m_runB}) {
    b->setMinimumContentsLength(20);
    b->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    connect(b, &QComboBox::currentIndexChanged, this, [this] { updateRunComparison(); });
  }
  m_runCompare = new RunComparisonView;
  m_runCompare->setTimeAxis(m_axis);
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("A")));
  bar->addWidget(m_runA, 1);
  bar->addWidget(new QLabel(tr("B")));
  bar->addWidget(m_runB, 1);
  auto* lay = new QVBoxLayout(w);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addLayout(bar);
  lay->addWidget(m_runCompare, 1);
  m_runDock = new QDockWidget(tr("Run comparison"), m_ctx.host);
  m_runDock->setObjectName(QStringLiteral("runComparisonDock"));
  m_runDock->setWidget(w);
}

void AnalysisDocks::updateRunComparison() {
  if (!m_runA) return;
  const int a = m_runA->currentIndex(), b = m_runB->currentIndex();
  if (a < 0 || b < 0 || a >= int(m_runs.size()) || b >= int(m_runs.size())) {
    m_runCompare->setRuns({}, nullptr, {}, nullptr);
    return;
  }
  m_runCompare->setRuns(m_runs[a].label, m_runs[a].profile, m_runs[b].label, m_runs[b].profile);
}

// --- CPU vs CUDA dock

void AnalysisDocks::buildEngineDock() {
  auto* w = new QWidget;
  m_compareButton = new QPushButton(tr("Compare CPU vs CUDA"));
  m_compareWhole = new QCheckBox(tr("whole frame"));
  auto* bar = new QHBoxLayout;
  bar->addWidget(m_compareButton);
  bar->addWidget(m_compareWhole);
  bar->addStretch(1);
  m_engineCompare = new EngineComparisonView;
  if (!m_ctx.cudaUsable) {
    // Say so plainly, grey what cannot run, and offer the comparisons that can.
    m_compareButton->setEnabled(false);
    m_compareButton->setToolTip(tr("Needs a usable GPU"));
    auto* others = new QPushButton(tr("Compare other results\u2026"));
    others->setObjectName(QStringLiteral("compareOtherResults"));
    others->setToolTip(tr("A CPU run against an opened frame or another CPU run"));
    bar->insertWidget(2, others);
    connect(others, &QPushButton::clicked, this, [this] {
      m_resultDock->show();
      m_resultDock->raise();
    });
    m_engineCompare->showMessage(
        (cudaBuilt() ? tr("CUDA is not available: no usable GPU here (%1).").arg(m_ctx.gpuDescription)
                     : tr("CUDA is not available: this spexlab was built without the CUDA engine.")) +
        QStringLiteral(" ") +
        tr("A CPU run can still be compared with an opened frame (e.g. the pipeline's frame-*.fits) or with "
           "another CPU run (other parameters): Compare other results\u2026"));
  }
  auto* lay = new QVBoxLayout(w);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addLayout(bar);
  lay->addWidget(m_engineCompare, 1);
  connect(m_compareButton, &QPushButton::clicked, this,
          [this] { compareEngines(QStringLiteral("cpu"), QStringLiteral("cuda"), m_compareWhole->isChecked()); });
  m_engineDock = new QDockWidget(tr("CPU vs CUDA"), m_ctx.host);
  m_engineDock->setObjectName(QStringLiteral("engineComparisonDock"));
  m_engineDock->setWidget(w);
}

std::optional<std::vector<int>> AnalysisDocks::selectedPatches() const {
  const auto plan = m_ctx.document->plan();
  if (!plan) return std::nullopt;
  const QVector<int> picked = m_ctx.state->selectedPatches();
  const QVector<int> fibers = m_ctx.state->selectedFibers();
  std::vector<int> sel = plan->patchesForSelection({picked.begin(), picked.end()}, {fibers.begin(), fibers.end()});
  if (sel.empty()) return std::nullopt;
  return sel;
}

bool AnalysisDocks::compareEngines(const QString& a, const QString& b, bool wholeFrame) {
  if (isComparing()) return false;
  Document* doc = m_ctx.document;
  const auto plan = doc->plan();
  if (!plan || !doc->image() || !doc->psf()) {
    m_engineCompare->showMessage(tr("Open a frame and a PSF first.") +
                                 (doc->planError().isEmpty() ? QString() : QStringLiteral(" ") + doc->planError()));
    return false;
  }
  // CUDA without a usable GPU is said at once, in words.
  for (const QString& kind : {a, b}) {
    if (kind != QLatin1String("cuda") || m_ctx.cudaUsable) continue;
    m_engineCompare->showMessage(
        tr("CUDA is not available here, so there is nothing to compare the CPU with. %1")
            .arg(cudaBuilt() ? tr("No usable GPU was found (%1).").arg(m_ctx.gpuDescription)
                             : tr("This spexlab was built without the CUDA engine.")));
    setStatus(m_engineCompare->message());
    return false;
  }
  if (m_ctx.job->isRunning()) {
    m_engineCompare->showMessage(m_ctx.job->client() == kSweepClient
                                     ? tr("A sweep is running; compare when it is done.")
                                     : tr("An extraction is running; compare when it is done."));
    setStatus(m_engineCompare->message());
    return false;
  }
  // One job on the app's job runner: its engines come from the EngineRegistry (warm,
  // the same instances the extractions use; made on first use, never per click), each
  // filling a result of the comparison's own.
  const auto patches = wholeFrame ? std::nullopt : selectedPatches();
  JobSpec spec;
  spec.image = doc->image();
  spec.psf = doc->psf();
  spec.plan = plan;
  spec.patches = patches;
  spec.threads = doc->settings().threads;
  spec.model = true;
  spec.client = kCompareClient;
  auto ra = std::make_shared<ExtractionResult>(), rb = std::make_shared<ExtractionResult>();
  spec.targets = {{a, ra}, {b, rb}};
  if (!m_ctx.job->start(std::move(spec))) return false;
  m_comparing = true;
  m_compareError.clear();
  m_compareA = std::move(ra);
  m_compareB = std::move(rb);
  m_engineCompare->showMessage(tr("Running %1 and %2 on %3\u2026")
                                   .arg(a, b, patches ? tr("%1 patches").arg(patches->size()) : tr("the whole frame")));
  m_compareButton->setEnabled(false);
  return true;
}

// --- Sweep dock

void AnalysisDocks::buildSweepDock() {
  auto* w = new QWidget;
  m_nwavestep = new QLineEdit(QStringLiteral("30,50,80"));
  m_nsub = new QLineEdit(QStringLiteral("1,5"));
  m_wavepad = new QLineEdit(QStringLiteral("0.2"));
  m_sweepWhole = new QCheckBox(tr("whole frame (else the selection)"));
  m_sweepCuda = new QCheckBox(tr("also CUDA"));
  m_sweepCuda->setObjectName(QStringLiteral("sweepAlsoCuda"));
  // Without a usable GPU the choice is greyed and a plain line says why, beside it.
  m_sweepCuda->setEnabled(m_ctx.cudaUsable);
  auto* cudaWhy = new QLabel;
  cudaWhy->setObjectName(QStringLiteral("sweepCudaWhy"));
  cudaWhy->setWordWrap(true);
  cudaWhy->setStyleSheet(QStringLiteral("color: #555;"));
  if (!m_ctx.cudaUsable)
    cudaWhy->setText(cudaBuilt() ? tr("No usable GPU here (%1): the sweep runs on the CPU.").arg(m_ctx.gpuDescription)
                                 : tr("This spexlab was built without CUDA: the sweep runs on the CPU."));
  m_sweepCuda->setToolTip(cudaWhy->text());
  cudaWhy->setVisible(!m_ctx.cudaUsable);
  m_sweepRun = new QPushButton(tr("Run sweep"));
  m_sweepCancelButton = new QPushButton(tr("Cancel"));
  m_sweepCancelButton->setEnabled(false);
  m_sweepBar = new QProgressBar;
  m_sweepBar->setRange(0, 1);
  m_sweepBar->setValue(0);
  m_sweepLabel = new QLabel(tr("Choose values and run."));
  m_sweepView = new SweepView;

  auto* form = new QFormLayout;
  form->addRow(tr("nwavestep"), m_nwavestep);
  form->addRow(tr("nsubbundles"), m_nsub);
  form->addRow(tr("wavepad frac"), m_wavepad);
  form->addRow(m_sweepWhole);
  form->addRow(m_sweepCuda);
  form->addRow(cudaWhy);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_sweepRun);
  buttons->addWidget(m_sweepCancelButton);
  form->addRow(buttons);
  form->addRow(m_sweepBar);
  form->addRow(m_sweepLabel);
  auto* left = new QWidget;
  left->setLayout(form);
  left->setMaximumWidth(300);
  auto* lay = new QHBoxLayout(w);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addWidget(left);
  lay->addWidget(m_sweepView, 1);

  connect(m_sweepRun, &QPushButton::clicked, this, [this] { startSweep(); });
  connect(m_sweepCancelButton, &QPushButton::clicked, this, [this] { cancelSweep(); });
  connect(m_sweepView, &SweepView::rowActivated, this, [this](int row) { selectSweepRow(row); });
  m_sweepDock = new QDockWidget(tr("Sweep"), m_ctx.host);
  m_sweepDock->setObjectName(QStringLiteral("sweepDock"));
  m_sweepDock->setWidget(w);
}

void AnalysisDocks::setSweepFields(const QString& nwavestep, const QString& nsubbundles,
                                   const QString& wavepadFrac, bool wholeFrame) {
  m_nwavestep->setText(nwavestep);
  m_nsub->setText(nsubbundles);
  m_wavepad->setText(wavepadFrac);
  m_sweepWhole->setChecked(wholeFrame);
}

bool AnalysisDocks::startSweep() {
  if (isSweeping()) return false;
  Document* doc = m_ctx.document;
  const auto plan = doc->plan();
  if (!plan || !doc->image() || !doc->psf()) {
    m_sweepLabel->setText(tr("Open a frame and a PSF first."));
    return false;
  }
  SweepSpec spec;
  if (!parseList(m_nwavestep->text(), spec.nwavestep) || !parseList(m_nsub->text(), spec.nsubbundles) ||
      !parseList(m_wavepad->text(), spec.wavepadFrac)) {
    m_sweepLabel->setText(tr("Values are comma-separated positive numbers (integers for nwavestep and nsubbundles)."));
    return false;
  }
  spec.wave = plan->wave;
  spec.fiberMin = plan->fiberMin;
  spec.nFiber = plan->nFiber;
  spec.base = plan->params;
  spec.threads = doc->settings().threads;
  spec.region = {plan->fiberMin, plan->fiberMin + plan->nFiber, plan->wave.wmin, plan->wave.last()};
  const auto sel = m_sweepWhole->isChecked() ? std::nullopt : selectedPatches();
  if (sel) {
    // The selection's fibers x bins (kept regions of the selected patches).
    int f0 = INT_MAX, f1 = INT_MIN, w0 = INT_MAX, w1 = INT_MIN;
    for (int i : *sel) {
      const Patch& p = plan->patches[i];
      f0 = std::min(f0, p.fiber0);
      f1 = std::max(f1, p.fiber0 + p.nfiber);
      w0 = std::min(w0, p.wave0);
      w1 = std::max(w1, p.wave0 + p.nwave);
    }
    spec.region = {f0, f1, plan->wave.at(w0), plan->wave.at(w1 - 1)};
  }
  if (m_ctx.job->isRunning()) {
    m_sweepLabel->setText(m_ctx.job->client() == kCompareClient
                              ? tr("A comparison is running; sweep when it is done.")
                              : tr("An extraction is running; sweep when it is done."));
    setStatus(m_sweepLabel->text());
    return false;
  }
  // The engines are the EngineRegistry's (the warm ones Extract and the comparison use,
  // made on first use): leased on the job's worker for the whole sweep.
  std::vector<std::string> kinds{"cpu"};
  if (m_sweepCuda->isChecked()) kinds.push_back("cuda");
  const auto image = doc->image();
  const auto psf = doc->psf();
  auto truth = doc->truth();
  if (truth && (truth->phot.cols != spec.wave.n)) truth.reset(); // another grid: no pulls
  std::shared_ptr<const ExtractionResult> reference;
  if (!truth)
    for (const auto& r : doc->results())
      if (r && r->fiberMin == spec.fiberMin && r->nfiber == spec.nFiber && r->nwave == spec.wave.n) {
        reference = r;
        break;
      }
  auto st = std::make_shared<SweepShared>();
  st->rows = int(spec.nwavestep.size() * spec.nsubbundles.size() * spec.wavepadFrac.size() * kinds.size());
  JobSpec job;
  job.client = kSweepClient;
  job.task = [st, kinds, spec, image, psf, truth, reference](EngineRegistry& registry, const CancelToken& cancel) {
    std::vector<EngineRegistry::Lease> leases;
    std::vector<Engine*> raw;
    for (const std::string& k : kinds) {
      leases.push_back(registry.lease(k));
      raw.push_back(leases.back().engine);
    }
    SweepInputs in;
    in.image = image.get();
    in.psf = psf.get();
    in.truth = truth.get();
    in.reference = reference.get();
    st->result = runSweep(
        raw, in, spec,
        [st](const SweepProgress& p) {
          st->rowNow = p.row;
          st->rows = p.rows;
          st->patchDone = p.patchesDone;
          st->patchTotal = p.patchesTotal;
        },
        cancel);
    return st->result.cancelled;
  };
  if (!m_ctx.job->start(std::move(job))) return false;
  m_sweeping = true;
  m_sweepState = std::move(st);
  m_sweepError.clear();
  m_sweepRun->setEnabled(false);
  m_sweepCancelButton->setEnabled(true);
  m_sweepBar->setRange(0, m_sweepState->rows * 100);
  m_sweepBar->setValue(0);
  m_sweepTimer.start();
  return true;
}

void AnalysisDocks::cancelSweep() {
  if (!m_sweeping) return;
  m_ctx.job->cancel();
  m_sweepLabel->setText(tr("Cancelling after the current patches\u2026"));
}

void AnalysisDocks::selectSweepRow(int row) {
  if (row < 0 || row >= int(m_sweep.rows.size())) return;
  const SweepRow& r = m_sweep.rows[row];
  if (!r.ok()) {
    setStatus(tr("That setting failed: %1").arg(QString::fromStdString(r.error)));
    return;
  }
  // Apply the setting so the CCD's patch grid is the one the sweep used for it.
  RunSettings s = m_ctx.document->settings();
  s.params.nwavestep = r.nwavestep;
  s.params.nsubbundles = r.nsubbundles;
  s.params.wavepadFrac = r.wavepadFrac;
  m_ctx.document->setSettings(s);
  m_sweepSelected = row;
  setHeatmap(Heatmap::Sweep);
}

} // namespace spex
