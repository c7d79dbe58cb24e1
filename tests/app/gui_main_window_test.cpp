// The spexlab main window driven like a user: open a small simulation, click a
// trace, shift+drag a patch, extract it on the CPU and compare the plotted spectrum
// with the engine's own result, toggle overlays, zoom, open broken files (and read
// the error dialogs), cancel a whole-frame job, take a screenshot.
#include "gui_test_sim.h"

#include "app/gui/main_window.h"
#include "app/gui/screenshot.h"
#include "app/engine_factory.h"
#include "core/extract/cpu_engine.h"
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "widgets/ccd_view.h"
#include "widgets/parameter_panel.h"
#include "widgets/residual_view.h"
#include "widgets/resolution_view.h"
#include "widgets/spectrum_view.h"
#include "widgets/view_state.h"

#include <fitsio.h>
#include <qcustomplot.h>

#include <QAction>
#include <QApplication>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QStatusBar>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QWheelEvent>

#include <cmath>
#include <functional>

using namespace spex;

namespace {

// Runs action and returns the text of the modal message box it opens (closing it).
QString dialogTextOf(const std::function<void()>& action) {
  QString text;
  QTimer poll;
  poll.setInterval(20);
  QObject::connect(&poll, &QTimer::timeout, [&] {
    if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
      text = box->text();
      box->accept();
    }
  });
  poll.start();
  action();
  poll.stop();
  return text;
}

void shiftDrag(QWidget* w, QPoint a, QPoint b) {
  QMouseEvent press(QEvent::MouseButtonPress, a, w->mapToGlobal(a), Qt::LeftButton, Qt::LeftButton, Qt::ShiftModifier);
  QApplication::sendEvent(w, &press);
  QMouseEvent move(QEvent::MouseMove, b, w->mapToGlobal(b), Qt::NoButton, Qt::LeftButton, Qt::ShiftModifier);
  QApplication::sendEvent(w, &move);
  QMouseEvent release(QEvent::MouseButtonRelease, b, w->mapToGlobal(b), Qt::LeftButton, Qt::NoButton, Qt::ShiftModifier);
  QApplication::sendEvent(w, &release);
}

long coveredCount(const ExtractionResult& r) {
  long n = 0;
  for (uint8_t c : r.covered.data) n += c;
  return n;
}

} // namespace

class GuiMainWindowTest : public QObject {
  Q_OBJECT
private:
  spextest::SmallSim m_sim;
  std::unique_ptr<MainWindow> m_w;
  QTemporaryDir m_dir;

  QString path(const QString& name) const { return m_dir.filePath(name); }

private slots:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    m_sim = spextest::makeSmallSim();
    m_w = std::make_unique<MainWindow>();
    m_w->resize(1400, 900);
    m_w->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_w.get()));
    m_w->document()->loadSimulation(m_sim.psf, m_sim.sim, QStringLiteral("small test simulation"));
    QTest::qWait(50);
  }

  void opensSimulation() {
    Document* doc = m_w->document();
    QVERIFY(doc->image() && doc->psf() && doc->truth());
    QCOMPARE(m_w->viewState()->imageSize(), QSize(600, 1000));
    QVERIFY(doc->plan());
    // 25 fibers x 376 bins: 5 sub-bundles x 8 wavelength patches.
    QCOMPARE(int(doc->plan()->patches.size()), 40);
    QVERIFY(m_w->windowTitle().contains(QStringLiteral("small test simulation")));
    QVERIFY(!m_w->ccdView()->picture().isNull());
  }

  void selectFiberByClickingItsTrace() {
    ViewState* vs = m_w->viewState();
    CcdView* ccd = m_w->ccdView();
    const auto psf = m_w->document()->psf();
    vs->setView(QPointF(psf->x(7, 6100), psf->y(7, 6100)), 3.0);
    const QPoint at = ccd->widgetPosOf(7, 6100).toPoint();
    QTest::mouseClick(ccd, Qt::LeftButton, Qt::NoModifier, at);
    QCOMPARE(vs->selectedFiber(), 7);
    QVERIFY(std::abs(vs->selectedWave() - 6100) < 1.5);
    // Hovering reports it in the status bar.
    QTest::mouseMove(ccd, at);
    QTRY_VERIFY(m_w->readoutLabel()->text().contains(QStringLiteral("fiber 7")));
  }

  void extractOnePatchShowsEngineResult() {
    ViewState* vs = m_w->viewState();
    CcdView* ccd = m_w->ccdView();
    Document* doc = m_w->document();
    const PatchPlan& plan = *doc->plan();
    // The patch of fibers 5-9 around 6100 A; drag a small box at its centre.
    const int target = plan.patchAt(7, int(std::lround((6100 - 6000) / 0.8)));
    QVERIFY(target >= 0);
    const Patch& p = plan.patches[target];
    const double wmid = plan.wave.at(p.wave0 + p.nwave / 2);
    const QPoint c = ccd->widgetPosOf(7, wmid).toPoint();
    shiftDrag(ccd, c - QPoint(3, 3), c + QPoint(3, 3));
    QCOMPARE(vs->selectedPatches(), QVector<int>{target});

    QSignalSpy done(m_w.get(), &MainWindow::jobFinished);
    QVERIFY(m_w->runExtraction(false));
    QVERIFY(m_w->isBusy());
    QVERIFY(done.wait(120000));
    QCOMPARE(done.first().first().toBool(), false);
    QVERIFY(!m_w->isBusy());

    // The same request straight through the engine.
    ExtractionRequest req;
    req.image = doc->image().get();
    req.psf = doc->psf().get();
    req.wave = plan.wave;
    req.fiberMin = plan.fiberMin;
    req.nFiber = plan.nFiber;
    req.params = plan.params;
    req.patches = std::vector<int>{target};
    CpuEngine engine;
    ProgressSink sink;
    CancelToken cancel;
    const ExtractionResult ref = engine.extract(req, sink, cancel);

    QCoreApplication::processEvents();
    QCPGraph* g = m_w->spectrumView()->fluxGraph(QStringLiteral("cpu"), 7);
    QVERIFY(g);
    QCOMPARE(g->data()->size(), plan.wave.n);
    const int row = 7 - plan.fiberMin;
    int compared = 0;
    for (int j = 0; j < plan.wave.n; ++j) {
      const double shown = (g->data()->constBegin() + j)->value;
      QCOMPARE((g->data()->constBegin() + j)->key, plan.wave.at(j));
      if (ref.covered(row, j)) {
        QCOMPARE(shown, ref.flux(row, j));
        ++compared;
      } else {
        QVERIFY(std::isnan(shown));
      }
    }
    QCOMPARE(compared, p.nwave);
    // The document keeps the whole result (ivar too), and the CCD shows the region.
    const auto r = doc->result(QStringLiteral("cpu"));
    QVERIFY(r);
    for (int j = p.wave0; j < p.wave0 + p.nwave; ++j) QCOMPARE(r->ivar(row, j), ref.ivar(row, j));
    QCOMPARE(coveredCount(*r), long(p.nfiber) * p.nwave);
    QVERIFY(m_w->ccdView()->extractedRegionCount() > 0);
    // Resolution row at the selected wavelength; the model feeds the residual view.
    vs->setSelectedWave(wmid);
    QVERIFY(!ResolutionView::kernel(*r, 7, wmid).isEmpty());
    QVERIFY(m_w->residualView()->hasModel());
    m_w->residualView()->waitForUpdate();
    QVERIFY(m_w->residualView()->chiStats().n > 0);
  }

  void overlaysToggleFromTheMenu() {
    CcdView* ccd = m_w->ccdView();
    for (int i = 0; i < kOverlayCount; ++i) {
      const Overlay o = Overlay(i);
      QAction* a = m_w->overlayAction(o);
      QVERIFY(a);
      const bool was = ccd->overlay(o);
      a->trigger();
      QCOMPARE(ccd->overlay(o), !was);
      a->trigger();
      QCOMPARE(ccd->overlay(o), was);
    }
  }

  void zoomIsSharedByTheViews() {
    ViewState* vs = m_w->viewState();
    CcdView* ccd = m_w->ccdView();
    ccd->fit();
    const double z0 = vs->zoom();
    const QPointF pos(ccd->width() / 3.0, ccd->height() / 2.0);
    QWheelEvent wheel(pos, ccd->mapToGlobal(pos), QPoint(), QPoint(0, 240), Qt::NoButton, Qt::NoModifier,
                      Qt::NoScrollPhase, false);
    QApplication::sendEvent(ccd, &wheel);
    QVERIFY(std::abs(vs->zoom() / z0 - 1.44) < 1e-9);
    // The residual canvas follows: same zoom, same centre.
    ImageCanvas* other = m_w->residualView()->canvas();
    const QPointF mid = other->toCcd(QPointF(other->width() / 2.0, other->height() / 2.0));
    QVERIFY(std::abs(mid.x() - vs->center().x()) < 1e-6 && std::abs(mid.y() - vs->center().y()) < 1e-6);
    QVERIFY(std::abs(other->ccdToWidget().m11() - vs->zoom()) < 1e-12);
  }

  void brokenFilesShowErrorDialogs() {
    // Inputs on disk: the same small simulation written out.
    writeSimulation(m_dir.path().toStdString(), m_sim.psf, m_sim.sim);
    const QString psf = path(QStringLiteral("psf.fits")), preproc = path(QStringLiteral("preproc.fits"));
    QVERIFY(QFile::exists(psf) && QFile::exists(preproc));

    // 1. Not a FITS file at all.
    const QString junk = path(QStringLiteral("notes.fits"));
    {
      QFile f(junk);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write("this is not a FITS file\n");
    }
    QString text = dialogTextOf([&] { QVERIFY(!m_w->openFrame(junk)); });
    QVERIFY2(text.contains(QStringLiteral("notes.fits")), qPrintable(text));
    QCOMPARE(m_w->lastError(), text);

    // 2. A PSF missing a required key.
    const QString badPsf = path(QStringLiteral("psf-nowavemin.fits"));
    QVERIFY(QFile::copy(psf, badPsf));
    {
      fitsfile* fp = nullptr;
      int status = 0;
      fits_open_file(&fp, badPsf.toLocal8Bit().constData(), READWRITE, &status);
      fits_delete_key(fp, "WAVEMIN", &status); // XTRACE is the primary HDU
      fits_close_file(fp, &status);
      QCOMPARE(status, 0);
    }
    text = dialogTextOf([&] { QVERIFY(!m_w->openInputs(preproc, badPsf)); });
    QVERIFY2(text.contains(QStringLiteral("WAVEMIN")) && text.contains(QStringLiteral("psf-nowavemin.fits")),
             qPrintable(text));

    // 3. A preproc image of another CCD size than the PSF.
    Image small;
    small.ny = 64;
    small.nx = 48;
    small.pix = Array2D<double>(64, 48);
    small.ivar = Array2D<double>(64, 48, 1.0);
    small.mask = Array2D<int32_t>(64, 48);
    const QString smallPath = path(QStringLiteral("preproc-small.fits"));
    writePreproc(smallPath.toStdString(), small, FiberMapTable{});
    text = dialogTextOf([&] { QVERIFY(!m_w->openInputs(smallPath, psf)); });
    QVERIFY2(text.contains(QStringLiteral("48 x 64")) && text.contains(QStringLiteral("600 x 1000")),
             qPrintable(text));

    // 4. A frame whose fibers the open PSF does not have.
    auto plan = makePatchPlan(m_sim.psf, WaveGrid::fromRange(6000, 6040, 0.8), 25, 25, PatchParams{});
    ExtractionResult big;
    big.allocate(plan, m_sim.psf.hsizeY, false, 0, 0);
    big.fiberMin = 40; // fibers 40..64 of a 50-fiber PSF
    for (auto& c : big.covered.data) c = 1;
    for (int f = 0; f < big.nfiber; ++f)
      for (int j = 0; j < big.nwave; ++j) big.resolution(f, big.ndiag, j) = 1;
    const QString framePath = path(QStringLiteral("frame-other.fits"));
    Image noFibermap = m_sim.sim.image; // its 50-row FIBERMAP cannot hold rows 40..64
    noFibermap.fibermap = FiberMap{};
    writeFrame(framePath.toStdString(), big, noFibermap, FrameMeta{});
    text = dialogTextOf([&] { QVERIFY(!m_w->openFrame(framePath)); });
    QVERIFY2(text.contains(QStringLiteral("40..64")) && text.contains(QStringLiteral("50 fibers")), qPrintable(text));

    // The window still has the simulation and still works.
    QVERIFY(m_w->isVisible());
    QCOMPARE(m_w->document()->title(), QStringLiteral("small test simulation"));
    QVERIFY(m_w->document()->result(QStringLiteral("cpu")));

    // A good frame opens and shows as its own source.
    QVERIFY(m_w->openInputs(preproc, psf, path(QStringLiteral("truth.fits"))));
    QVERIFY(m_w->document()->truth());
  }

  void cancelWholeFrameKeepsPartialResults() {
    Document* doc = m_w->document();
    RunSettings s = doc->settings();
    const RunSettings before = s;
    s.fiberMin = 0;
    s.nFiber = 50; // both bundles
    s.wmin = 5920; // the PSF's whole domain on a fine grid: 2400 bins, 48 patches per
    s.wmax = 6399.8; // sub-bundle, 480 in all, so the job lasts long enough to cancel
    s.dw = 0.2;
    s.threads = 1;
    doc->setSettings(s);
    QVERIFY(doc->plan());
    const int total = int(doc->plan()->patches.size());
    QCOMPARE(total, 480);
    QSignalSpy done(m_w.get(), &MainWindow::jobFinished);
    QVERIFY(m_w->runExtraction(true));
    QVERIFY(m_w->cancelButton()->isVisible() && m_w->cancelButton()->isEnabled());
    QVERIFY(!m_w->extractFrameAction()->isEnabled());
    // Let a few patches land, then press Cancel like a user. The click happens in the
    // progress handler itself: the whole job takes well under a second here, so a
    // polling loop could see it end before clicking.
    bool clicked = false;
    const auto c = connect(m_w->progressBar(), &QProgressBar::valueChanged, this, [&](int v) {
      if (v >= 2 && !clicked && m_w->cancelButton()->isVisible()) {
        clicked = true;
        QTest::mouseClick(m_w->cancelButton(), Qt::LeftButton);
      }
    });
    QTRY_VERIFY_WITH_TIMEOUT(done.count() > 0, 120000);
    disconnect(c);
    QVERIFY(clicked);
    QCOMPARE(done.first().first().toBool(), true);
    // Idle again: actions back, no progress, partial results still there.
    QVERIFY(!m_w->isBusy());
    QVERIFY(m_w->extractFrameAction()->isEnabled());
    QVERIFY(m_w->extractSelectionAction()->isEnabled());
    QVERIFY(!m_w->cancelButton()->isVisible());
    const auto r = doc->result(QStringLiteral("cpu"));
    QVERIFY(r);
    const long covered = coveredCount(*r);
    const long all = long(r->nfiber) * r->nwave;
    QVERIFY2(covered > 0 && covered < all, qPrintable(QStringLiteral("%1 of %2").arg(covered).arg(all)));
    QVERIFY(m_w->ccdView()->extractedRegionCount() > 0);
    // Covered bins carry real numbers.
    for (int f = 0; f < r->nfiber; ++f)
      for (int j = 0; j < r->nwave; ++j)
        if (r->covered(f, j)) QVERIFY(std::isfinite(r->flux(f, j)) && r->ivar(f, j) >= 0);
    doc->setSettings(before);
  }

  void cudaWithoutGpuSaysWhyAndAutoFallsBack() {
    const QString gpus = QString::fromStdString(describeGpus());
    if (cudaBuilt() && !gpus.startsWith(QLatin1String("none")))
      QSKIP("a GPU is present: the CUDA engine really runs here (tests/gpu cover it)");
    Document* doc = m_w->document();
    const auto plan = doc->plan();
    QVERIFY(plan);
    m_w->viewState()->setSelectedPatches({0});
    RunSettings s = doc->settings();
    // "cuda" and "both" refuse with a dialog that names the reason; nothing starts.
    for (const char* engine : {"cuda", "both"}) {
      s.engine = QString::fromLatin1(engine);
      m_w->parameterPanel()->setSettings(s);
      doc->setSettings(m_w->parameterPanel()->settings());
      QCOMPARE(doc->settings().engine, QString::fromLatin1(engine));
      m_w->viewState()->setSelectedPatches({0});
      const QString text = dialogTextOf([&] { QVERIFY(!m_w->runExtraction(false)); });
      QVERIFY2(text.contains(QStringLiteral("CUDA")) && text.contains(QStringLiteral("CPU")), qPrintable(text));
      if (cudaBuilt()) QVERIFY2(text.contains(gpus), qPrintable(text));
      QVERIFY(!m_w->isBusy());
    }
    // "auto" runs on the CPU and says so.
    s.engine = QStringLiteral("auto");
    m_w->parameterPanel()->setSettings(s);
    doc->setSettings(m_w->parameterPanel()->settings());
    m_w->viewState()->setSelectedPatches({0});
    QSignalSpy done(m_w.get(), &MainWindow::jobFinished);
    QVERIFY(m_w->runExtraction(false));
    QVERIFY(m_w->statusBar()->currentMessage().contains(QStringLiteral("running on the CPU")));
    QVERIFY(done.wait(120000));
    QCOMPARE(done.first().first().toBool(), false);
    QVERIFY(!doc->result(QStringLiteral("auto")) && !doc->result(QStringLiteral("cuda")));
    const auto r = doc->result(QStringLiteral("cpu"));
    QVERIFY(r);
    const Patch& p0 = plan->patches[0];
    QVERIFY(r->covered(p0.fiber0 - r->fiberMin, p0.wave0));
    s.engine = QStringLiteral("cpu");
    m_w->parameterPanel()->setSettings(s);
    doc->setSettings(m_w->parameterPanel()->settings());
  }

  void aboutNamesVersionsAndGpu() {
    QAction* about = nullptr;
    for (QAction* a : m_w->menuBar()->findChildren<QAction*>())
      if (a->text().contains(QStringLiteral("About"))) about = a;
    QVERIFY(about);
    const QString text = dialogTextOf([&] { about->trigger(); });
    QVERIFY2(text.contains(QStringLiteral(SPEXLAB_VERSION)) && text.contains(QStringLiteral("Qt")) &&
                 text.contains(QStringLiteral("GPUs")),
             qPrintable(text));
  }

  void screenshotWritesThePicture() {
    ScreenshotOptions o;
    o.path = path(QStringLiteral("shot.png"));
    o.fiber = 7;
    o.wave = 6150;
    QCOMPARE(takeScreenshot(*m_w, o), 0);
    const QImage img(o.path);
    QVERIFY(!img.isNull());
    QCOMPARE(img.size(), m_w->size() * m_w->devicePixelRatio());
  }

  void exportsViewsAndSpectra() {
    for (const char* view : {"ccd", "spectrum", "residuals", "resolution", "window"})
      for (const char* ext : {"png", "pdf"}) {
        const QString f = path(QStringLiteral("export-%1.%2").arg(QLatin1String(view), QLatin1String(ext)));
        QVERIFY2(m_w->exportView(QLatin1String(view), f), qPrintable(f));
        QFile file(f);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray head = file.read(5);
        // Real files of the asked kind, not empty ones.
        QVERIFY2(head.startsWith(QString::fromLatin1(ext) == QLatin1String("pdf") ? "%PDF" : "\x89PNG"),
                 qPrintable(f));
        QVERIFY(file.size() > 1000);
      }
    m_w->viewState()->selectFiber(3);
    const QString csv = path(QStringLiteral("spectra.csv"));
    QVERIFY(m_w->exportSpectra(csv, false));
    QFile f(csv);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
    QVERIFY(lines.size() > 2);
    QVERIFY(lines[2].startsWith(QStringLiteral("cpu,3,")));
  }

  void opensAnyCameraWithItsFiberNumbers() {
    // A z7 exposure on the same small CCD: z wavelengths, FIBER = 500 x 7 + index.
    SyntheticPsfOptions po = spextest::smallPsfOptions();
    po.camera = "z7";
    po.waveMin = 8600;
    po.waveMax = 9100;
    SimulationOptions so = spextest::smallSimOptions();
    so.camera = parseCamera("z7");
    so.wave = WaveGrid::fromRange(8700, 9000, 0.8);
    const GaussHermitePsf psf = makeSyntheticPsf(po);
    m_w->document()->loadSimulation(psf, simulate(psf, so), QStringLiteral("z7"));
    QTest::qWait(50);
    ViewState* vs = m_w->viewState();
    QCOMPARE(vs->fiberNumber(0), 3500);
    QCOMPARE(vs->fiberNumber(12), 3512);
    const QString text = m_w->ccdView()->readout(QPointF(psf.x(12, 8850), psf.y(12, 8850)));
    QVERIFY2(text.contains(QStringLiteral("fiber 3512")), qPrintable(text));
    m_w->document()->loadSimulation(m_sim.psf, m_sim.sim, QStringLiteral("small test simulation"));
    QTest::qWait(50);
    QCOMPARE(vs->fiberNumber(12), 12); // petal 0 again
  }

  void cleanupTestCase() { m_w.reset(); }
};

int main(int argc, char** argv) {
  // Keep the user's spexlab settings out of the test, and the test's out of theirs.
  QTemporaryDir config;
  qputenv("XDG_CONFIG_HOME", config.path().toLocal8Bit());
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("SpexLabTest"));
  QApplication::setApplicationName(QStringLiteral("gui_main_window"));
  GuiMainWindowTest test;
  return QTest::qExec(&test, argc, argv);
}

#include "gui_main_window_test.moc"
