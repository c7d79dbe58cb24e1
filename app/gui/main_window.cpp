#include "main_window.h"

#include "analysis_docks.h"
#include "app_icon.h"
#include "image_tools.h"

#include "open_inputs_dialog.h"
#include "user_messages.h"

#include "app/engine_factory.h"
#include "core/errors.h"
#include "widgets/parameter_panel.h"
#include "widgets/residual_view.h"
#include "widgets/resolution_view.h"
#include "widgets/spectrum_view.h"
#include "widgets/view_state.h"

#include <fitsio.h>
#include <qcustomplot.h>

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPainter>
#include <QPdfWriter>
#include <QProgressBar>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QStatusBar>
#include <QTabBar>
#include <QThread>
#include <QToolBar>

#include <cstdio>

namespace spex {

namespace {
constexpr int kMaxRecent = 8;
constexpr int kRefreshMs = 100; // live results redraw at most ten times a second
const QString kFitsFilter = QStringLiteral("FITS files (*.fits *.fits.gz *.fits.fz *.fit);;All files (*)");
} // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setObjectName(QStringLiteral("spexlabMainWindow"));
  m_doc = new Document(this);
  m_state = new ViewState(this);
  m_job = new ExtractionJob(nullptr, this);
  m_refreshTimer.setSingleShot(true);
  m_refreshTimer.setInterval(kRefreshMs);
  connect(&m_refreshTimer, &QTimer::timeout, this, &MainWindow::refreshResults);

  buildViews();
  buildActions();
  buildMenus();
  buildScaleBar();
  buildStatusBar();

  connect(m_doc, &Document::inputsChanged, this, &MainWindow::onInputsChanged);
  connect(m_doc, &Document::planChanged, this, &MainWindow::onPlanChanged);
  connect(m_doc, &Document::truthChanged, this, [this] { m_spectrum->setTruth(m_doc->truth()); });
  connect(m_doc, &Document::resultsChanged, this, [this] {
    if (!m_refreshTimer.isActive()) m_refreshTimer.start();
  });
  connect(m_params, &ParameterPanel::settingsChanged, this, [this](const RunSettings& s) {
    m_doc->setSettings(s);
  });

  // The job runner is shared: a job of another client (the CPU-vs-CUDA comparison, the
  // sweep) fills results of its own, not the document's.
  auto ours = [this] { return m_job->client().isEmpty(); };
  connect(m_job, &ExtractionJob::engineStarted, this, [this, ours](const QString& e, int total) {
    if (!ours()) return;
    m_progress->setRange(0, std::max(total, 1));
    m_progress->setValue(0);
    m_jobLabel->setText(tr("%1: 0/%2 patches").arg(e).arg(total));
  });
  connect(m_job, &ExtractionJob::patchesDone, this,
          [this, ours](const QString& e, const QVector<int>& patches, int done, int total) {
            if (!ours()) return;
            m_doc->patchesDone(e, patches);
            m_progress->setValue(done);
            m_jobLabel->setText(tr("%1: %2/%3 patches").arg(e).arg(done).arg(total));
          });
  connect(m_job, &ExtractionJob::engineFinished, this, [this, ours](const QString& e) {
    if (!ours()) return;
    m_doc->finishRun(e);
    const auto r = m_doc->result(e);
    refreshResults(); // the residuals too: the model changed
    if (r)
      statusBar()->showMessage(tr("%1 extraction: %2 patches in %3 s")
                                   .arg(e)
                                   .arg(r->lastPatches.size())
                                   .arg(r->profile.wallNs * 1e-9, 0, 'f', 2),
                               10000);
  });
  connect(m_job, &ExtractionJob::engineFailed, this, [this, ours](const QString& e, const QString& msg) {
    if (!ours()) return;
    showError(tr("%1 extraction failed").arg(e.toUpper()), msg);
  });
  connect(m_job, &ExtractionJob::finished, this, [this, ours](bool cancelled) {
    if (!ours()) return;
    m_doc->endRuns();
    setBusy(false);
    refreshResults();
    if (cancelled) statusBar()->showMessage(tr("Extraction cancelled; finished patches are kept."), 10000);
    emit jobFinished(cancelled);
  });

  // Sized to the screen on a first start (a saved geometry wins, in loadSettings).
  if (const QScreen* sc = screen()) {
    const QRect avail = sc->availableGeometry();
    resize(avail.width() * 92 / 100, avail.height() * 90 / 100);
  } else {
    resize(1500, 950);
  }
  loadSettings();
  setBusy(false);
  installAnalysisDocks(context());
  installImageTools(context());
  setWindowIcon(applicationIcon());
  restoreLayout(); // after every dock exists, the analysis docks too
}

MainWindow::~MainWindow() = default;

WorkbenchContext MainWindow::context() {
  WorkbenchContext c;
  c.host = this;
  c.document = m_doc;
  c.state = m_state;
  c.job = m_job;
  c.ccd = m_ccd;
  c.residuals = m_residual;
  c.menuBefore = m_helpMenu;
  c.cudaUsable = m_cudaUsable;
  c.gpuDescription = m_gpus;
  c.scale = [this] { return scale(); };
  c.setScale = [this](const ScaleSettings& s) { setScale(s); };
  c.showError = [this](const QString& title, const QString& message) { showError(title, message); };
  return c;
}

void MainWindow::buildViews() {
  m_ccd = new CcdView(m_state, this);
  m_ccd->setObjectName(QStringLiteral("ccdView"));
  setCentralWidget(m_ccd);
  m_spectrum = new SpectrumView(m_state, this);
  m_spectrum->setObjectName(QStringLiteral("spectrumView"));
  m_residual = new ResidualView(m_state, this);
  m_residual->setObjectName(QStringLiteral("residualView"));
  m_resolution = new ResolutionView(m_state, this);
  m_resolution->setObjectName(QStringLiteral("resolutionView"));
  m_params = new ParameterPanel(this);
  m_params->setObjectName(QStringLiteral("parameterPanel"));
  m_gpus = QString::fromStdString(describeGpus());
  m_cudaUsable = cudaBuilt() && !m_gpus.startsWith(QLatin1String("none"));
  m_params->setCudaAvailable(m_cudaUsable, m_gpus);

  auto dock = [this](QWidget* w, const QString& title, const QString& name, Qt::DockWidgetArea area) {
    auto* d = new QDockWidget(title, this);
    d->setObjectName(name); // saveState() needs names
    d->setWidget(w);
    addDockWidget(area, d);
    return d;
  };
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(m_params);
  scroll->setWidgetResizable(true);
  scroll->setMinimumWidth(m_params->sizeHint().width() + 20);
  dock(scroll, tr("Parameters"), QStringLiteral("parametersDock"), Qt::LeftDockWidgetArea);
  QDockWidget* spec = dock(m_spectrum, tr("Spectrum"), QStringLiteral("spectrumDock"), Qt::BottomDockWidgetArea);
  QDockWidget* res = dock(m_resolution, tr("Resolution"), QStringLiteral("resolutionDock"), Qt::RightDockWidgetArea);
  QDockWidget* resid = dock(m_residual, tr("Residuals"), QStringLiteral("residualsDock"), Qt::RightDockWidgetArea);
  tabifyDockWidget(res, resid);
  // A hidden residual dock catches up when it is shown (see updateResiduals).
  connect(resid, &QDockWidget::visibilityChanged, this, [this](bool visible) {
    if (visible && m_residualsPending) updateResiduals(true);
  });
  res->raise();
  // Side docks take the full height, so the spectrum shares the width with the CCD
  // only and the CCD stays the largest panel.
  setCorner(Qt::BottomLeftCorner, Qt::LeftDockWidgetArea);
  setCorner(Qt::BottomRightCorner, Qt::RightDockWidgetArea);
  m_defaultDocks = [this, spec, res] {
    resizeDocks({spec}, {height() * 30 / 100}, Qt::Vertical);
    resizeDocks({res}, {width() * 22 / 100}, Qt::Horizontal);
  };

  connect(m_ccd, &CcdView::readoutChanged, this, &MainWindow::setReadout);
  connect(m_residual, &ResidualView::readoutChanged, this, &MainWindow::setReadout);
  // A right-drag on the CCD changed contrast or bias: the residual's data and model
  // images follow, and scale() reports it.
  connect(m_ccd, &CcdView::scaleAdjusted, this, [this](const ScaleSettings& s) {
    m_adjust = s;
    m_residual->setDataScale(scale());
  });
  connect(m_ccd, &CcdView::rangeChanged, this, [this](double lo, double hi) {
    m_updatingScale = true;
    m_min->setValue(lo);
    m_max->setValue(hi);
    m_updatingScale = false;
  });
}

void MainWindow::buildActions() {
  for (int i = 0; i < kOverlayCount; ++i) {
    const Overlay o = Overlay(i);
    auto* a = new QAction(overlayName(o), this);
    a->setObjectName(QStringLiteral("overlay_") + overlayKey(o));
    a->setCheckable(true);
    a->setChecked(m_ccd->overlay(o));
    connect(a, &QAction::toggled, this, [this, o](bool on) { m_ccd->setOverlay(o, on); });
    m_overlayActions[i] = a;
  }
  m_overlayActions[int(Overlay::Traces)]->setShortcut(QKeySequence(Qt::Key_T));
  m_overlayActions[int(Overlay::PatchGrid)]->setShortcut(QKeySequence(Qt::Key_G));
  m_overlayActions[int(Overlay::MaskedPixels)]->setShortcut(QKeySequence(Qt::Key_M));

  m_extractSel = new QAction(tr("Extract &selection"), this);
  m_extractSel->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  m_extractSel->setToolTip(tr("Extract the selected patches (shift+drag on the CCD), else the selected fibers"));
  connect(m_extractSel, &QAction::triggered, this, [this] { runExtraction(false); });
  m_extractAll = new QAction(tr("Extract &whole frame"), this);
  m_extractAll->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R));
  connect(m_extractAll, &QAction::triggered, this, [this] { runExtraction(true); });
  m_cancel = new QAction(tr("&Cancel extraction"), this);
  m_cancel->setShortcut(QKeySequence(Qt::Key_Escape));
  connect(m_cancel, &QAction::triggered, this, &MainWindow::cancelExtraction);
  m_clearResults = new QAction(tr("C&lear results"), this);
  connect(m_clearResults, &QAction::triggered, this, [this] {
    m_doc->clearResults();
    setReadout({}); // it may quote the model that is gone
    refreshResults();
  });
  m_params->addRunActions({m_extractSel, m_extractAll, m_cancel});
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("Open &demo"), this, [this] {
    openDemo(QSettings().value(QStringLiteral("demo/fibers"), 50).toInt());
  });
  file->addAction(tr("&Open inputs\u2026"), QKeySequence::Open, this, [this] {
    OpenInputsDialog dlg(this, lastDir());
    if (dlg.exec() != QDialog::Accepted) return;
    openInputs(dlg.preproc(), dlg.psf(), dlg.truth());
  });
  file->addAction(tr("Open &frame\u2026"), this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("Open frame"), lastDir(), kFitsFilter);
    if (!f.isEmpty()) openFrame(f);
  });
  file->addAction(tr("Open &truth\u2026"), this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("Open simulation truth"), lastDir(), kFitsFilter);
    if (!f.isEmpty()) openTruth(f);
  });
  m_recentMenu = file->addMenu(tr("&Recent"));
  rebuildRecentMenu();
  file->addSeparator();
  file->addAction(tr("&Save results as frame\u2026"), this, [this] {
    const QVector<SpectrumSource> src = m_doc->sources();
    if (src.isEmpty() || src.first().name == "frame") {
      showError(tr("Nothing to save"), tr("Run an extraction first."));
      return;
    }
    const QString f = QFileDialog::getSaveFileName(this, tr("Save frame"), QDir(lastDir()).filePath(QStringLiteral("frame.fits")), kFitsFilter);
    if (f.isEmpty()) return;
    rememberDir(f);
    try {
      FrameMeta meta;
      meta.inputImage = m_doc->preprocPath().toStdString();
      meta.inputPsf = m_doc->psfPath().toStdString();
      writeFrame(f.toStdString(), *src.first().result, *m_doc->image(), meta);
      statusBar()->showMessage(tr("Saved the results to %1").arg(f), 10000);
    } catch (const std::exception& e) {
      showError(tr("Could not save the frame"), QString::fromStdString(e.what()));
    }
  });
  QMenu* exp = file->addMenu(tr("&Export view"));
  const std::pair<const char*, QString> views[] = {{"ccd", tr("CCD view")},
                                                   {"spectrum", tr("Spectrum")},
                                                   {"residuals", tr("Residuals")},
                                                   {"resolution", tr("Resolution")},
                                                   {"window", tr("Whole window")}};
  for (const auto& [key, label] : views) {
    const QString k = QString::fromLatin1(key);
    exp->addAction(label + QStringLiteral("\u2026"), this, [this, k] { exportViewDialog(k); });
  }
  file->addAction(tr("Export spectra as &CSV\u2026"), this, [this] {
    const QString f = QFileDialog::getSaveFileName(this, tr("Export spectra"), QDir(lastDir()).filePath(QStringLiteral("spectra.csv")), tr("CSV (*.csv)"));
    if (!f.isEmpty()) exportSpectra(f, false);
  });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  m_viewMenu = menuBar()->addMenu(tr("&View"));
  QMenu* ov = m_viewMenu->addMenu(tr("&Overlays"));
  for (QAction* a : m_overlayActions) ov->addAction(a);
  m_viewMenu->addAction(tr("Zoom &in"), QKeySequence::ZoomIn, m_ccd, &ImageCanvas::zoomIn);
  m_viewMenu->addAction(tr("Zoom &out"), QKeySequence::ZoomOut, m_ccd, &ImageCanvas::zoomOut);
  m_viewMenu->addAction(tr("&Fit"), QKeySequence(Qt::CTRL | Qt::Key_0), m_ccd, &ImageCanvas::fit);
  m_viewMenu->addAction(tr("&1:1"), QKeySequence(Qt::CTRL | Qt::Key_1), m_ccd, &ImageCanvas::zoomOneToOne);
  m_viewMenu->addSeparator();
  for (QDockWidget* d : findChildren<QDockWidget*>()) m_viewMenu->addAction(d->toggleViewAction());

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addAction(m_extractSel);
  run->addAction(m_extractAll);
  run->addAction(m_cancel);
  run->addSeparator();
  run->addAction(m_clearResults);

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  m_helpMenu = help; // stays last: other menus are inserted before it
  help->addAction(tr("&About SpexLab"), this, &MainWindow::about);
}

void MainWindow::buildScaleBar() {
  // First row: what to do (extract, cancel) and what to draw over the CCD, in view at
  // any window width; second row: the display scale.
  QToolBar* runBar = addToolBar(tr("Run"));
  runBar->setObjectName(QStringLiteral("runToolbar"));
  runBar->setToolButtonStyle(Qt::ToolButtonTextOnly);
  runBar->addAction(m_extractSel);
  runBar->addAction(m_extractAll);
  runBar->addAction(m_cancel);
  QToolBar* ovBar = addToolBar(tr("Overlays"));
  ovBar->setObjectName(QStringLiteral("overlayToolbar"));
  ovBar->setToolButtonStyle(Qt::ToolButtonTextOnly);
  for (QAction* a : m_overlayActions) ovBar->addAction(a);
  addToolBarBreak();
  QToolBar* bar = addToolBar(tr("Display"));
  bar->setObjectName(QStringLiteral("displayToolbar"));
  m_stretch = new QComboBox(bar);
  m_stretch->addItems(stretchNames());
  m_limits = new QComboBox(bar);
  m_limits->addItems(limitsNames());
  m_percentile = new QDoubleSpinBox(bar);
  m_percentile->setRange(50, 100);
  m_percentile->setDecimals(2);
  m_percentile->setSuffix(QStringLiteral(" %"));
  m_percentile->setKeyboardTracking(false);
  m_min = new QDoubleSpinBox(bar);
  m_max = new QDoubleSpinBox(bar);
  for (QDoubleSpinBox* b : {m_min, m_max}) {
    b->setRange(-1e12, 1e12);
    b->setDecimals(2);
    b->setKeyboardTracking(false);
    b->setMinimumWidth(90);
  }
  m_colormap = new QComboBox(bar);
  m_colormap->addItems(colormapNames());
  bar->addWidget(new QLabel(tr(" scale "), bar));
  bar->addWidget(m_stretch);
  bar->addWidget(new QLabel(tr(" limits "), bar));
  bar->addWidget(m_limits);
  bar->addWidget(m_percentile);
  bar->addWidget(new QLabel(tr(" min "), bar));
  bar->addWidget(m_min);
  bar->addWidget(new QLabel(tr(" max "), bar));
  bar->addWidget(m_max);
  bar->addWidget(new QLabel(tr(" colormap "), bar));
  bar->addWidget(m_colormap);

  for (QComboBox* c : {m_stretch, m_limits, m_colormap})
    connect(c, &QComboBox::currentIndexChanged, this, &MainWindow::onScaleControls);
  connect(m_percentile, &QDoubleSpinBox::valueChanged, this, &MainWindow::onScaleControls);
  // Typing a min or max means "these limits": switch to manual.
  for (QDoubleSpinBox* b : {m_min, m_max})
    connect(b, &QDoubleSpinBox::valueChanged, this, [this] {
      if (m_updatingScale) return;
      m_updatingScale = true;
      m_limits->setCurrentText(limitsName(Limits::Manual));
      m_updatingScale = false;
      onScaleControls();
    });
}

QString MainWindow::idleHint() const {
  return tr("Click a fiber trace to select it \u00b7 shift+drag selects patches \u00b7 Ctrl+R extracts the "
            "selection \u00b7 wheel zooms, drag pans");
}

void MainWindow::setReadout(const QString& text) {
  // With nothing under the mouse the status bar says what to do next.
  m_readout->setText(text.isEmpty() ? idleHint() : text);
  m_readout->setStyleSheet(text.isEmpty() ? QStringLiteral("color: #555;") : QString());
}

void MainWindow::buildStatusBar() {
  m_readout = new QLabel(this);
  m_readout->setObjectName(QStringLiteral("readout"));
  setReadout({});
  m_readout->setMinimumWidth(400);
  m_jobLabel = new QLabel(this);
  // A fixed size: its text changes with every batch of patches, and a label whose
  // size can change makes each change re-lay out the status bar and the window.
  m_jobLabel->setFixedSize(m_jobLabel->fontMetrics().horizontalAdvance(tr("cpu+cuda: starting 99999 patches")) + 8,
                           m_jobLabel->sizeHint().height());
  m_progress = new QProgressBar(this);
  m_progress->setMaximumWidth(220);
  m_progress->setTextVisible(true);
  m_cancelButton = new QPushButton(tr("Cancel"), this);
  m_cancelButton->setObjectName(QStringLiteral("cancelButton"));
  connect(m_cancelButton, &QPushButton::clicked, this, &MainWindow::cancelExtraction);
  statusBar()->addWidget(m_readout, 1);
  statusBar()->addPermanentWidget(m_jobLabel);
  statusBar()->addPermanentWidget(m_progress);
  statusBar()->addPermanentWidget(m_cancelButton);
}

ScaleSettings MainWindow::scale() const {
  ScaleSettings s;
  s.stretch = stretchFromName(m_stretch->currentText());
  s.limits = limitsFromName(m_limits->currentText());
  s.percentile = m_percentile->value();
  s.manualMin = m_min->value();
  s.manualMax = m_max->value();
  s.colormap = colormapFromName(m_colormap->currentText());
  s.contrast = m_adjust.contrast;
  s.bias = m_adjust.bias;
  s.inverted = m_adjust.inverted;
  return s;
}

void MainWindow::setScale(const ScaleSettings& s) {
  m_adjust = s;
  m_updatingScale = true;
  m_stretch->setCurrentText(stretchName(s.stretch));
  m_limits->setCurrentText(limitsName(s.limits));
  m_percentile->setValue(s.percentile);
  m_min->setValue(s.manualMin);
  m_max->setValue(s.manualMax);
  m_colormap->setCurrentText(colormapName(s.colormap));
  m_updatingScale = false;
  onScaleControls();
}

void MainWindow::onScaleControls() {
  if (m_updatingScale) return;
  const ScaleSettings s = scale();
  m_percentile->setEnabled(s.limits == Limits::Percentile);
  m_ccd->setScale(s);
  m_residual->setDataScale(s);
}

void MainWindow::loadSettings() {
  QSettings st;
  ScaleSettings s;
  s.stretch = stretchFromName(st.value(QStringLiteral("scale/stretch"), stretchName(s.stretch)).toString());
  s.limits = limitsFromName(st.value(QStringLiteral("scale/limits"), limitsName(s.limits)).toString());
  s.percentile = st.value(QStringLiteral("scale/percentile"), s.percentile).toDouble();
  s.manualMin = st.value(QStringLiteral("scale/min"), s.manualMin).toDouble();
  s.manualMax = st.value(QStringLiteral("scale/max"), s.manualMax).toDouble();
  s.colormap = colormapFromName(st.value(QStringLiteral("scale/colormap"), colormapName(s.colormap)).toString());
  s.inverted = st.value(QStringLiteral("scale/inverted"), false).toBool();
  setScale(s);
  for (int i = 0; i < kOverlayCount; ++i) {
    const QString key = QStringLiteral("overlays/") + overlayKey(Overlay(i));
    m_overlayActions[i]->setChecked(st.value(key, m_ccd->overlay(Overlay(i))).toBool());
  }
  RunSettings r = m_doc->settings();
  st.beginGroup(QStringLiteral("run"));
  r.params.nwavestep = st.value(QStringLiteral("nwavestep"), r.params.nwavestep).toInt();
  r.params.nsubbundles = st.value(QStringLiteral("nsubbundles"), r.params.nsubbundles).toInt();
  r.params.bundlesize = st.value(QStringLiteral("bundlesize"), r.params.bundlesize).toInt();
  r.params.wavepadFrac = st.value(QStringLiteral("wavepadFrac"), r.params.wavepadFrac).toDouble();
  r.params.pixpadFrac = st.value(QStringLiteral("pixpadFrac"), r.params.pixpadFrac).toDouble();
  r.params.regularize = st.value(QStringLiteral("regularize"), r.params.regularize).toDouble();
  r.params.psferr = st.value(QStringLiteral("psferr"), r.params.psferr).toDouble();
  r.params.mode = st.value(QStringLiteral("mode"), 0).toInt() == 1 ? Decorrelation::Noise : Decorrelation::Signal;
  r.engine = st.value(QStringLiteral("engine"), QString::fromStdString(r.engine)).toString().toStdString();
  r.threads = st.value(QStringLiteral("threads"), r.threads).toInt();
  st.endGroup();
  m_doc->setSettings(r);
  m_params->setSettings(r);
}

QStringList MainWindow::raisedDocks() const {
  // The window's own tab bars say which dock of each tabbed group is in front.
  QStringList out;
  for (const QTabBar* bar : findChildren<QTabBar*>(QString(), Qt::FindDirectChildrenOnly)) {
    if (!bar->isVisible() || bar->currentIndex() < 0) continue;
    const QString title = bar->tabText(bar->currentIndex());
    for (const QDockWidget* d : findChildren<QDockWidget*>())
      if (d->windowTitle() == title && !tabifiedDockWidgets(const_cast<QDockWidget*>(d)).isEmpty())
        out << d->objectName();
  }
  return out;
}

void MainWindow::restoreLayout() {
  QSettings st;
  restoreGeometry(st.value(QStringLiteral("window/geometry")).toByteArray());
  restoreState(st.value(QStringLiteral("window/state")).toByteArray());
  // restoreState puts tabified docks back in their groups but not always the tab that
  // was in front: raise those by name.
  for (const QString& name : st.value(QStringLiteral("window/raised")).toStringList())
    if (auto* d = findChild<QDockWidget*>(name)) d->raise();
}

void MainWindow::saveSettings() {
  QSettings st;
  st.setValue(QStringLiteral("window/geometry"), saveGeometry());
  st.setValue(QStringLiteral("window/state"), saveState());
  st.setValue(QStringLiteral("window/raised"), raisedDocks());
  const ScaleSettings s = scale();
  st.setValue(QStringLiteral("scale/stretch"), stretchName(s.stretch));
  st.setValue(QStringLiteral("scale/limits"), limitsName(s.limits));
  st.setValue(QStringLiteral("scale/percentile"), s.percentile);
  st.setValue(QStringLiteral("scale/min"), s.manualMin);
  st.setValue(QStringLiteral("scale/max"), s.manualMax);
  st.setValue(QStringLiteral("scale/colormap"), colormapName(s.colormap));
  st.setValue(QStringLiteral("scale/inverted"), s.inverted);
  for (int i = 0; i < kOverlayCount; ++i)
    st.setValue(QStringLiteral("overlays/") + overlayKey(Overlay(i)), m_overlayActions[i]->isChecked());
  const RunSettings r = m_params->settings();
  st.beginGroup(QStringLiteral("run"));
  st.setValue(QStringLiteral("nwavestep"), r.params.nwavestep);
  st.setValue(QStringLiteral("nsubbundles"), r.params.nsubbundles);
  st.setValue(QStringLiteral("bundlesize"), r.params.bundlesize);
  st.setValue(QStringLiteral("wavepadFrac"), r.params.wavepadFrac);
  st.setValue(QStringLiteral("pixpadFrac"), r.params.pixpadFrac);
  st.setValue(QStringLiteral("regularize"), r.params.regularize);
  st.setValue(QStringLiteral("psferr"), r.params.psferr);
  st.setValue(QStringLiteral("mode"), r.params.mode == Decorrelation::Noise ? 1 : 0);
  st.setValue(QStringLiteral("engine"), QString::fromStdString(r.engine));
  st.setValue(QStringLiteral("threads"), r.threads);
  st.endGroup();
}

void MainWindow::showEvent(QShowEvent* e) {
  QMainWindow::showEvent(e);
  // Dock sizes only take once the window has its size; a saved layout wins.
  if (m_defaultDocks && !QSettings().contains(QStringLiteral("window/state")))
    QTimer::singleShot(0, this, m_defaultDocks);
  m_defaultDocks = nullptr;
}

void MainWindow::closeEvent(QCloseEvent* e) {
  if (m_job->isRunning()) {
    m_job->cancel();
    m_job->waitForWorker();
  }
  saveSettings();
  e->accept();
}

void MainWindow::showError(const QString& title, const QString& message) {
  const UserMessage um = userMessage(message);
  m_lastError = um.text;
  emit errorShown(um.text);
  if (!m_interactive) {
    std::fprintf(stderr, "spexlab: %s: %s\n", qPrintable(title), qPrintable(message));
    return;
  }
  QMessageBox box(QMessageBox::Critical, title, um.text, QMessageBox::Ok, this);
  box.setObjectName(QStringLiteral("errorDialog"));
  if (!um.details.isEmpty()) box.setDetailedText(um.details);
  box.exec();
}

void MainWindow::showInfo(const QString& title, const QString& message) {
  m_lastError = message;
  if (!m_interactive) {
    std::fprintf(stderr, "spexlab: %s: %s\n", qPrintable(title), qPrintable(message));
    return;
  }
  QMessageBox box(QMessageBox::Information, title, message, QMessageBox::Ok, this);
  box.setObjectName(QStringLiteral("infoDialog"));
  box.exec();
}

QString MainWindow::lastDir() const { return QSettings().value(QStringLiteral("lastDir")).toString(); }

void MainWindow::rememberDir(const QString& file) {
  if (!file.isEmpty()) QSettings().setValue(QStringLiteral("lastDir"), QFileInfo(file).absolutePath());
}

bool MainWindow::refuseWhileBusy() {
  if (!isBusy()) return false;
  showError(tr("Busy"), tr("Cancel the running extraction before opening other files."));
  return true;
}

bool MainWindow::openDemo(int nFiber) {
  if (refuseWhileBusy()) return false;
  try {
    QApplication::setOverrideCursor(Qt::WaitCursor);
    m_doc->loadDemo(nFiber);
    QApplication::restoreOverrideCursor();
    return true;
  } catch (const std::exception& e) {
    QApplication::restoreOverrideCursor();
    showError(tr("Could not make the demo"), QString::fromStdString(e.what()));
    return false;
  }
}

bool MainWindow::openInputs(const QString& preproc, const QString& psf, const QString& truth) {
  if (refuseWhileBusy()) return false;
  try {
    QApplication::setOverrideCursor(Qt::WaitCursor);
    m_doc->loadInputs(preproc, psf, truth);
    QApplication::restoreOverrideCursor();
    addRecent(QStringLiteral("inputs\t%1\t%2\t%3").arg(preproc, psf, truth));
    rememberDir(preproc);
    return true;
  } catch (const std::exception& e) {
    QApplication::restoreOverrideCursor();
    showError(tr("Could not open the inputs"), QString::fromStdString(e.what()));
    return false;
  }
}

bool MainWindow::openFrame(const QString& path) {
  if (refuseWhileBusy()) return false;
  try {
    // A compressed frame takes seconds to inflate: say so with the cursor.
    QApplication::setOverrideCursor(Qt::WaitCursor);
    m_doc->loadFrame(path);
    QApplication::restoreOverrideCursor();
    addRecent(QStringLiteral("frame\t%1").arg(path));
    rememberDir(path);
    return true;
  } catch (const std::exception& e) {
    QApplication::restoreOverrideCursor();
    showError(tr("Could not open the frame"), QString::fromStdString(e.what()));
    return false;
  }
}

bool MainWindow::openTruth(const QString& path) {
  if (refuseWhileBusy()) return false;
  try {
    QApplication::setOverrideCursor(Qt::WaitCursor);
    m_doc->loadTruth(path);
    QApplication::restoreOverrideCursor();
    rememberDir(path);
    return true;
  } catch (const std::exception& e) {
    QApplication::restoreOverrideCursor();
    showError(tr("Could not open the truth file"), QString::fromStdString(e.what()));
    return false;
  }
}

void MainWindow::onInputsChanged() {
  m_state->setSelectedPatches({});
  m_state->setSelectedFibers({});
  m_state->setSelectedWave(std::nan(""));
  // Label fibers with the exposure's FIBER numbers (petal p: 500 p + index): the
  // FIBERMAP's rows are the PSF's fibers in order.
  QVector<int> fiberNumbers;
  if (const auto image = m_doc->image())
    for (int32_t f : image->fibermap.fiber) fiberNumbers.push_back(int(f));
  m_state->setFiberNumbers(fiberNumbers);
  m_ccd->setInputs(m_doc->image(), m_doc->psf());
  m_ccd->fit();
  // A simulation lights a few bundles of a full CCD: start on them, not on the
  // whole dark chip. Deferred so the window's layout has settled.
  QTimer::singleShot(0, this, [this] {
    const auto psf = m_doc->psf();
    const RunSettings s = m_doc->settings();
    if (!psf || s.nFiber >= psf->nfiber || s.fiberMin < 0 || s.fiberMin + s.nFiber > psf->nfiber) return;
    const double w = 0.5 * (s.wmin + s.wmax);
    const double x0 = psf->x(s.fiberMin, w), x1 = psf->x(s.fiberMin + s.nFiber - 1, w);
    const double y = psf->y(s.fiberMin + s.nFiber / 2, w);
    const double margin = 0.1 * std::abs(x1 - x0) + 20;
    const QRectF lit(std::min(x0, x1) - margin, y - 1, std::abs(x1 - x0) + 2 * margin, 2);
    if (lit.width() * m_state->zoom() < 0.5 * m_ccd->width()) m_ccd->zoomToRect(lit);
  });
  if (const auto psf = m_doc->psf()) m_params->setLimits(psf->nfiber, psf->waveMin(), psf->waveMax());
  updateResiduals();
  setWindowTitle(tr("SpexLab \u2014 %1").arg(m_doc->title()));
}

void MainWindow::onPlanChanged() {
  // Patch indices belong to the old plan.
  m_state->setSelectedPatches({});
  m_ccd->setPlan(m_doc->plan());
  m_params->setSettings(m_doc->settings());
  m_params->setPlanSummary(m_doc->plan() ? m_doc->planSummary() : m_doc->planError(), !m_doc->plan());
  m_extractAll->setEnabled(!isBusy() && m_doc->plan());
  m_extractSel->setEnabled(!isBusy() && m_doc->plan());
}

void MainWindow::refreshResults() {
  m_refreshTimer.stop();
  const QVector<SpectrumSource> src = m_doc->sources();
  // Views redraw only when some result changed (each change raises its revision).
  QVector<quint64> shown;
  for (const SpectrumSource& s : src) {
    const QString name = QString::fromStdString(s.name);
    shown << quint64(qHash(name)) << m_doc->revision(name);
  }
  if (shown != m_shownResults) {
    m_shownResults = shown;
    m_spectrum->setSources(src);
    m_resolution->setSources(src);
    m_ccd->setExtracted(m_doc->results());
  }
  // Merged, cleared or replaced: the residual image, histogram and chi line follow.
  if (m_doc->modelRevision() != m_shownModelRevision) updateResiduals();
}

void MainWindow::updateResiduals(bool force) {
  const QString name = m_doc->modelSource();
  // Without a model the residual view shows the data: rendering a second full-CCD
  // picture for a hidden dock would double the cost of opening a frame, so it waits
  // until the dock is shown (or exported). A model updates it at once.
  if (name.isEmpty() && !force && !m_residual->isVisible()) {
    if (!m_residualsPending) m_residual->setInputs(nullptr, nullptr, {});
    m_shownModelSource.clear();
    m_residualsPending = true;
    m_shownModelRevision = m_doc->modelRevision();
    return;
  }
  m_residualsPending = false;
  // A run that redid a few patches changed the shown model in their boxes only.
  const Document::ModelChange& c = m_doc->modelChange();
  if (!force && !c.all && c.from == m_shownModelRevision && c.to == m_doc->modelRevision() &&
      name == m_shownModelSource && !name.isEmpty() && m_residual->hasModel()) {
    m_shownModelRevision = c.to;
    m_residual->modelChanged(c.from, c.to, c.boxes);
    return;
  }
  m_shownModelRevision = m_doc->modelRevision();
  m_shownModelSource = name;
  m_residual->setInputs(m_doc->image(), name.isEmpty() ? nullptr : m_doc->model(name), name,
                        m_shownModelRevision);
  m_residual->setDataScale(scale());
}

bool MainWindow::isBusy() const { return m_job->isRunning(); }

void MainWindow::setBusy(bool busy) {
  const bool havePlan = bool(m_doc->plan());
  m_extractSel->setEnabled(!busy && havePlan);
  m_extractAll->setEnabled(!busy && havePlan);
  m_cancel->setEnabled(busy);
  m_clearResults->setEnabled(!busy);
  m_cancelButton->setEnabled(busy);
  m_cancelButton->setVisible(busy);
  m_progress->setVisible(busy);
  m_jobLabel->setVisible(busy);
  if (!busy) m_jobLabel->clear();
  m_params->setEditable(!busy); // the plan must not change under a running job; Cancel stays live
}

bool MainWindow::runExtraction(bool wholeFrame) {
  if (isBusy()) {
    if (!m_job->client().isEmpty())
      statusBar()->showMessage(m_job->client() == QLatin1String("sweep")
                                   ? tr("A sweep is running; extract when it is done.")
                                   : tr("A comparison is running; extract when it is done."),
                               10000);
    return false;
  }
  const auto plan = m_doc->plan();
  if (!plan) {
    showError(tr("Cannot extract"), m_doc->planError().isEmpty() ? tr("Nothing is open.") : m_doc->planError());
    return false;
  }
  const RunSettings rs = m_doc->settings();
  std::optional<std::vector<int>> patches;
  if (!wholeFrame) {
    const QVector<int> picked = m_state->selectedPatches();
    const QVector<int> fibers = m_state->selectedFibers();
    std::vector<int> sel = plan->patchesForSelection({picked.begin(), picked.end()}, {fibers.begin(), fibers.end()});
    if (sel.empty()) {
      showInfo(tr("Nothing selected"),
               tr("Select patches with shift+drag on the CCD, or click a fiber trace, or extract the whole frame."));
      return false;
    }
    patches = std::move(sel);
  }
  std::string autoNote;
  QStringList engines;
  for (const std::string& k : engineKindsFor(rs.engine, &autoNote)) engines << QString::fromStdString(k);
  // The auto rule's reason, in the workbench's words (the GPU description is m_gpus).
  const QString note = autoNote.empty() ? QString() : tr("auto: no usable GPU (%1); running on the CPU").arg(m_gpus);
  if (engines.contains(QLatin1String("cuda")) && !m_cudaUsable) {
    showError(tr("CUDA not available"),
              cudaBuilt() ? tr("The CUDA engine cannot run: %1.\nChoose the CPU (or Auto) engine in "
                               "Parameters \u2192 Run.").arg(m_gpus)
                          : tr("This spexlab was built without the CUDA engine.\nChoose the CPU (or Auto) "
                               "engine in Parameters \u2192 Run."));
    return false;
  }
  // Nothing may read a model while an engine writes it: a residual update in flight
  // finishes first (it only runs after new inputs or a mode change).
  m_residual->waitForUpdate();
  JobSpec spec;
  spec.image = m_doc->image();
  spec.psf = m_doc->psf();
  spec.plan = plan;
  spec.patches = patches;
  spec.threads = rs.threads;
  spec.profileKernels = rs.profileKernels;
  spec.model = true;
  spec.keepRunValues = true; // the run history's own numbers (AnalysisDocks)
  for (const QString& e : engines) spec.targets.push_back({e, m_doc->beginRun(e)});
  if (!m_job->start(std::move(spec))) return false;
  // Range, value and text before the bar shows: set on a visible bar, each would
  // repaint the window synchronously.
  const int n = patches ? int(patches->size()) : int(plan->patches.size());
  m_progress->setRange(0, n);
  m_progress->setValue(0);
  m_jobLabel->setText(tr("%1: starting %2 patches").arg(engines.join(QLatin1Char('+'))).arg(n));
  setBusy(true);
  if (!note.isEmpty()) statusBar()->showMessage(note, 10000);
  return true;
}

void MainWindow::cancelExtraction() {
  if (!isBusy()) return;
  m_job->cancel();
  m_cancelButton->setEnabled(false);
  m_jobLabel->setText(tr("cancelling\u2026"));
}

bool MainWindow::exportView(const QString& which, const QString& path) {
  QWidget* w = this;
  QCustomPlot* plot = nullptr;
  if (which == QLatin1String("residuals") && m_residualsPending) updateResiduals(true);
  if (which == QLatin1String("residuals") || which == QLatin1String("window")) m_residual->waitForUpdate();
  if (which == QLatin1String("ccd")) w = m_ccd;
  else if (which == QLatin1String("spectrum")) plot = m_spectrum->plot();
  else if (which == QLatin1String("residuals")) w = m_residual;
  else if (which == QLatin1String("resolution")) w = m_resolution;
  const bool pdf = path.endsWith(QLatin1String(".pdf"), Qt::CaseInsensitive);
  bool ok = false;
  if (plot) {
    // QCustomPlot writes vector PDF itself.
    ok = pdf ? plot->savePdf(path) : plot->savePng(path);
  } else if (pdf) {
    QPdfWriter writer(path);
    writer.setResolution(96);
    writer.setPageSize(QPageSize(QSizeF(w->width(), w->height()) * 72.0 / 96.0, QPageSize::Point));
    writer.setPageMargins(QMarginsF(0, 0, 0, 0));
    QPainter p;
    ok = p.begin(&writer);
    if (ok) {
      w->render(&p);
      p.end();
    }
  } else {
    ok = w->grab().save(path);
  }
  if (!ok) showError(tr("Export failed"), tr("Could not write '%1'.").arg(path));
  else {
    rememberDir(path);
    statusBar()->showMessage(tr("Exported the %1 to %2").arg(which, path), 10000);
  }
  return ok;
}

void MainWindow::exportViewDialog(const QString& which) {
  const QString f = QFileDialog::getSaveFileName(this, tr("Export %1").arg(which), QDir(lastDir()).filePath(which + QStringLiteral(".png")),
                                                 tr("PNG image (*.png);;PDF document (*.pdf)"));
  if (!f.isEmpty()) exportView(which, f);
}

bool MainWindow::exportSpectra(const QString& path, bool allFibers) {
  QString err;
  if (!m_spectrum->exportCsv(path, allFibers, &err)) {
    showError(tr("Export failed"), err);
    return false;
  }
  rememberDir(path);
  statusBar()->showMessage(tr("Exported the spectra to %1").arg(path), 10000);
  return true;
}

void MainWindow::addRecent(const QString& entry) {
  QSettings st;
  QStringList list = st.value(QStringLiteral("recent")).toStringList();
  list.removeAll(entry);
  list.prepend(entry);
  while (list.size() > kMaxRecent) list.removeLast();
  st.setValue(QStringLiteral("recent"), list);
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  m_recentMenu->clear();
  const QStringList list = QSettings().value(QStringLiteral("recent")).toStringList();
  for (const QString& e : list) {
    const QStringList parts = e.split(QLatin1Char('\t'));
    if (parts.size() < 2) continue;
    QString label = parts[0] == QLatin1String("frame")
                        ? tr("frame %1").arg(QFileInfo(parts[1]).fileName())
                        : tr("%1 + %2").arg(QFileInfo(parts[1]).fileName(),
                                            parts.size() > 2 ? QFileInfo(parts[2]).fileName() : QString());
    QAction* a = m_recentMenu->addAction(label, this, [this, e] { openRecent(e); });
    a->setToolTip(e);
  }
  m_recentMenu->setEnabled(!list.isEmpty());
}

void MainWindow::openRecent(const QString& entry) {
  const QStringList p = entry.split(QLatin1Char('\t'));
  if (p.value(0) == QLatin1String("frame")) openFrame(p.value(1));
  else if (p.value(0) == QLatin1String("inputs")) openInputs(p.value(1), p.value(2), p.value(3));
}

void MainWindow::about() {
  float cfitsio = 0;
  fits_get_version(&cfitsio);
  const QString text =
      tr("<h3>SpexLab %1</h3>"
         "<p>Spectro-perfectionism extraction workbench (Bolton &amp; Schlegel 2010) "
         "for DESI-style spectrographs.</p>"
         "<table>"
         "<tr><td>Qt</td><td>%2 (built with %3)</td></tr>"
         "<tr><td>QCustomPlot</td><td>%4</td></tr>"
         "<tr><td>CFITSIO</td><td>%5</td></tr>"
         "<tr><td>CUDA engine</td><td>%6</td></tr>"
         "<tr><td>GPUs</td><td>%7</td></tr>"
         "<tr><td>CPU threads</td><td>%8</td></tr>"
         "</table>")
          .arg(QStringLiteral(SPEXLAB_VERSION), QString::fromLatin1(qVersion()), QStringLiteral(QT_VERSION_STR),
               QStringLiteral(QCUSTOMPLOT_VERSION_STR), QString::number(cfitsio, 'f', 3),
               cudaBuilt() ? tr("built") : tr("not built"),
               QString::fromStdString(describeGpus()).toHtmlEscaped())
          .arg(QThread::idealThreadCount());
  QMessageBox box(QMessageBox::Information, tr("About SpexLab"), text, QMessageBox::Ok, this);
  box.setObjectName(QStringLiteral("aboutDialog"));
  box.setTextFormat(Qt::RichText);
  if (m_interactive) box.exec();
}

} // namespace spex
