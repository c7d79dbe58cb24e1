// The spexlab main window driven like a user: open a small simulation, click a
// trace, shift+drag a patch, extract it on the CPU and compare the plotted spectrum
// with the engine's own result, toggle overlays, zoom, open broken files (and read
// the error dialogs), cancel a whole-frame job, take a screenshot.
#include "gui_test_sim.h"

#include "app/gui/analysis_docks.h"
#include "app/gui/image_tools.h"
#include "app/gui/main_window.h"
#include "app/gui/user_messages.h"
#include "app/gui/screenshot.h"
#include "app/engine_factory.h"
#include "core/extract/cpu_engine.h"
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "widgets/background.h"
#include "widgets/ccd_view.h"
#include "widgets/side_by_side_view.h"
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
#include <QCheckBox>
#include <QSemaphore>
#include <QSet>
#include <QThreadPool>
#include <QTest>
#include <QTimer>
#include <QDir>
#include <QDockWidget>
#include <QScreen>
#include <QToolBar>
#include <QToolButton>
#include <QWheelEvent>

#include <cmath>
#include <functional>
#include <thread>

using namespace spex;

namespace {

// Runs action and returns the text of the modal message box it opens (closing it).
QString dialogTextOf(const std::function<void()>& action, QString* details = nullptr,
                     QMessageBox::Icon* icon = nullptr) {
  QString text;
  QTimer poll;
  poll.setInterval(20);
  QObject::connect(&poll, &QTimer::timeout, [&] {
    if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
      text = box->text();
      if (details) *details = box->detailedText();
      if (icon) *icon = box->icon();
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

  // Defect 2 of issue 14: a newcomer sees how to select and extract without the
  // guide: hints instead of empty axes, a status-bar hint, the Extract actions and
  // every overlay toggle on screen (none behind a toolbar's chevron), the CCD the
  // largest panel, Help the last menu, the window sized to the screen.
  void firstRunIsDiscoverable() {
    QVERIFY(m_w->viewState()->selectedFibers().isEmpty());
    QVERIFY2(m_w->spectrumView()->emptyHint().contains(QStringLiteral("Extract selection")),
             qPrintable(m_w->spectrumView()->emptyHint()));
    QVERIFY(!m_w->spectrumView()->plot()->isVisible());
    QVERIFY(!m_w->resolutionView()->emptyHint().isEmpty());
    QVERIFY2(m_w->readoutLabel()->text().contains(QStringLiteral("shift+drag")), qPrintable(m_w->readoutLabel()->text()));
    auto* runBar = m_w->findChild<QToolBar*>(QStringLiteral("runToolbar"));
    auto* ovBar = m_w->findChild<QToolBar*>(QStringLiteral("overlayToolbar"));
    QVERIFY(runBar && ovBar);
    for (QAction* a : {m_w->extractSelectionAction(), m_w->extractFrameAction(), m_w->cancelAction()}) {
      QWidget* b = runBar->widgetForAction(a);
      QVERIFY(b && b->isVisible());
      QVERIFY(runBar->rect().contains(b->geometry()));
    }
    for (int i = 0; i < kOverlayCount; ++i) {
      QWidget* b = ovBar->widgetForAction(m_w->overlayAction(Overlay(i)));
      QVERIFY2(b && b->isVisible() && ovBar->rect().contains(b->geometry()),
               qPrintable(overlayName(Overlay(i))));
    }
    const auto area = [](const QWidget* w) { return long(w->width()) * w->height(); };
    for (QDockWidget* d : m_w->findChildren<QDockWidget*>())
      if (d->isVisible() && !d->visibleRegion().isEmpty())
        QVERIFY2(area(m_w->ccdView()) > area(d), qPrintable(QStringLiteral("%1 %2x%3 vs CCD %4x%5").arg(d->objectName()).arg(d->width()).arg(d->height()).arg(m_w->ccdView()->width()).arg(m_w->ccdView()->height())));
    QCOMPARE(m_w->menuBar()->actions().last(), m_w->helpMenu()->menuAction());
    MainWindow fresh;
    const QRect avail = fresh.screen()->availableGeometry();
    // Sized to the screen, unless the layout cannot be that small.
    const QSize floor = fresh.minimumSizeHint();
    QVERIFY2(fresh.width() >= std::max(avail.width() * 9 / 10, floor.width()) - 1 &&
                 fresh.height() >= std::max(avail.height() * 85 / 100, floor.height()) - 1,
             qPrintable(QStringLiteral("%1x%2 on %3x%4, min %5x%6").arg(fresh.width()).arg(fresh.height())
                            .arg(avail.width()).arg(avail.height()).arg(floor.width()).arg(floor.height())));
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

  // Defect 1 of issue 14: a second, disjoint run merges into the first (its model is
  // added to the first one's) and the residual image, histogram and chi line must
  // follow; Run > Clear results must clear them.
  void residualsFollowMergedRunsAndClear() {
    Document* doc = m_w->document();
    ResidualView* rv = m_w->residualView();
    rv->waitForUpdate();
    const long n1 = rv->chiStats().n;
    QVERIFY(n1 > 0);
    const auto first = doc->result(QStringLiteral("cpu"));
    QVERIFY(first);
    // A patch of the other half of the bundle, far from the first one (disjoint spots).
    const PatchPlan& plan = *doc->plan();
    const int other = plan.patchAt(22, int(std::lround((6250 - 6000) / 0.8)));
    QVERIFY(other >= 0);
    m_w->viewState()->setSelectedPatches({other});
    QSignalSpy done(m_w.get(), &MainWindow::jobFinished);
    QVERIFY(m_w->runExtraction(false));
    QVERIFY(done.wait(120000));
    // The same result object was merged into, in place.
    QCOMPARE(doc->result(QStringLiteral("cpu")).get(), first.get());
    QTRY_VERIFY(!rv->isUpdating());
    rv->waitForUpdate();
    // What the statistics must be, counted here from the document's merged model.
    const auto model = doc->model(QStringLiteral("cpu"));
    QVERIFY(model);
    const Image& img = *doc->image();
    long expect = 0;
    for (std::size_t i = 0; i < model->size(); ++i)
      if (img.ivar.data[i] > 0 && model->data[i] != 0) ++expect;
    QVERIFY2(expect > n1, qPrintable(QStringLiteral("%1 vs %2").arg(expect).arg(n1)));
    QCOMPARE(rv->chiStats().n, expect);
    // The histogram's title line says the same number; its bars hold that many pixels.
    auto* title = qobject_cast<QCPTextElement*>(rv->histogram()->plotLayout()->element(0, 0));
    QVERIFY(title);
    QVERIFY2(title->text().contains(QStringLiteral("(%1 px)").arg(expect)), qPrintable(title->text()));
    auto* bars = qobject_cast<QCPBars*>(rv->histogram()->plottable(0));
    QVERIFY(bars);
    double inBars = 0;
    for (auto it = bars->data()->constBegin(); it != bars->data()->constEnd(); ++it) inBars += it->value;
    QVERIFY(inBars > n1 && inBars <= expect);

    // Run > Clear results: spectra, residual image, histogram and chi line all go.
    QVERIFY(m_w->clearResultsAction()->isEnabled());
    m_w->clearResultsAction()->trigger();
    QTRY_VERIFY(!rv->hasModel());
    rv->waitForUpdate();
    QCOMPARE(rv->chiStats().n, 0L);
    QCOMPARE(rv->histogram()->plottableCount(), 0);
    QVERIFY2(title->text().contains(QStringLiteral("no model")), qPrintable(title->text()));
    QVERIFY(!m_w->spectrumView()->fluxGraph(QStringLiteral("cpu"), 7));
    QVERIFY(!doc->result(QStringLiteral("cpu")) && !doc->model(QStringLiteral("cpu")));

    // Extract the first patch again, for the tests that follow.
    m_w->viewState()->setSelectedPatches({plan.patchAt(7, int(std::lround((6100 - 6000) / 0.8)))});
    QVERIFY(m_w->runExtraction(false));
    QVERIFY(done.wait(120000));
    rv->waitForUpdate();
    QVERIFY(rv->chiStats().n > 0);
  }

  // Defect 4 of issue 14: truth (x) R of a range extracted mid-frame must not dip at
  // the range's edges. With a flat truth, R's rows summing to 1 (EXTRACTION.md §4.5)
  // give the flat level at every extracted bin, edges included; the old convolution,
  // which left out R's columns beyond the range, lost up to half the row there.
  void truthConvolvedHasNoDipAtRangeEdges() {
    Document* doc = m_w->document();
    const auto r = doc->result(QStringLiteral("cpu"));
    QVERIFY(r);
    const int fiber = 7, row = fiber - r->fiberMin;
    int first = -1, last = -1;
    for (int j = 0; j < r->nwave; ++j)
      if (r->covered(row, j)) {
        if (first < 0) first = j;
        last = j;
      }
    QVERIFY2(first > 10 && last < r->nwave - 10, "the range must lie mid-grid");
    auto flat = std::make_shared<Truth>(*doc->truth());
    const double level = 290;
    const double dwt = flat->wave[1] - flat->wave[0];
    for (auto& v : flat->phot.data) v = level * dwt;
    SpectrumView* sv = m_w->spectrumView();
    sv->setTruth(flat);
    m_w->viewState()->selectFiber(fiber);
    QCPGraph* conv = sv->truthGraph(fiber, true);
    QVERIFY(conv);
    int checked = 0;
    for (int j = first; j <= last; ++j) {
      const double v = (conv->data()->constBegin() + j)->value;
      // The stored band of ndiag diagonals holds all but a sliver of each row.
      QVERIFY2(std::abs(v / level - 1) < 0.01, qPrintable(QStringLiteral("bin %1 (range %2-%3): %4").arg(j).arg(first).arg(last).arg(v)));
      ++checked;
    }
    QCOMPARE(checked, last - first + 1);
    sv->setTruth(doc->truth());
  }

  // Defect 5 of issue 14: the wheel zooms the wavelength only and the flux axis follows
  // the data in view (no clipped peaks); reset in the context menu; the legend off the
  // data; each fiber's truth (x) R in its own style.
  void spectrumNavigation() {
    SpectrumView* sv = m_w->spectrumView();
    m_w->viewState()->setSelectedFibers({7, 8});
    QVERIFY(sv->emptyHint().isEmpty());
    QCPGraph* t7 = sv->truthGraph(7, true);
    QCPGraph* t8 = sv->truthGraph(8, true);
    QVERIFY(t7 && t8);
    QVERIFY(t7->pen() != t8->pen());
    QCustomPlot* plot = sv->plot();
    plot->replot(QCustomPlot::rpImmediateRefresh);
    QVERIFY(sv->legend()->visible());
    QVERIFY2(!sv->legend()->outerRect().intersects(sv->fluxRect()->rect()), "the legend covers the flux track");
    QCPAxis* x = sv->fluxRect()->axis(QCPAxis::atBottom);
    QCPAxis* y = sv->fluxRect()->axis(QCPAxis::atLeft);
    const QCPRange x0 = x->range();
    const QPointF at = sv->fluxRect()->rect().center();
    QWheelEvent wheel(at, plot->mapToGlobal(at), QPoint(), QPoint(0, 360), Qt::NoButton, Qt::NoModifier,
                      Qt::NoScrollPhase, false);
    QApplication::sendEvent(plot, &wheel);
    const QCPRange x1 = x->range();
    QVERIFY2(x1.size() < 0.9 * x0.size(), qPrintable(QStringLiteral("%1 -> %2").arg(x0.size()).arg(x1.size())));
    // Every curve's values inside the new wavelength range fit on the flux axis.
    for (int i = 0; i < plot->graphCount(); ++i) {
      QCPGraph* g = plot->graph(i);
      if (g->valueAxis() != y) continue;
      bool found = false;
      const QCPRange vr = g->getValueRange(found, QCP::sdBoth, x1);
      if (found) QVERIFY2(vr.lower >= y->range().lower && vr.upper <= y->range().upper, qPrintable(g->name()));
    }
    // Reset from the context menu brings the whole extracted range back.
    QAction* reset = sv->contextActions().value(0);
    QVERIFY(reset && reset->text().contains(QStringLiteral("Reset")));
    reset->trigger();
    QVERIFY(std::abs(x->range().size() - x0.size()) < 1e-9 * x0.size());
    m_w->viewState()->setSelectedFibers({7});
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
    QString details;
    QMessageBox::Icon icon = QMessageBox::NoIcon;
    QString text = dialogTextOf([&] { QVERIFY(!m_w->openFrame(junk)); }, &details, &icon);
    QVERIFY2(text.contains(QStringLiteral("notes.fits")), qPrintable(text));
    QCOMPARE(m_w->lastError(), text);
    // User words in the dialog; the reader's technical message (file, HDU, what is
    // wrong: here SpexLab's own header scan, which runs before CFITSIO) only under
    // "Show Details".
    QVERIFY2(!text.contains(QStringLiteral("CFITSIO")) && text.contains(QStringLiteral("FITS file")), qPrintable(text));
    QVERIFY2(details.contains(QStringLiteral("HDU")) && details.contains(QStringLiteral("notes.fits")),
             qPrintable(details));
    QCOMPARE(icon, QMessageBox::Critical);

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

  // Defect 3 of issue 14: the Parameters panel's own Cancel button stays live during a
  // run (only the settings are greyed) and cancels it.
  void parametersPanelCancelDuringRun() {
    Document* doc = m_w->document();
    RunSettings s = doc->settings();
    const RunSettings before = s;
    s.fiberMin = 0;
    s.nFiber = 50;
    s.wmin = 5920;
    s.wmax = 6399.8;
    s.dw = 0.2;
    s.threads = 1;
    doc->setSettings(s);
    ParameterPanel* panel = m_w->parameterPanel();
    QToolButton* cancel = nullptr;
    for (QToolButton* b : panel->findChildren<QToolButton*>())
      if (b->defaultAction() == m_w->cancelAction()) cancel = b;
    QVERIFY(cancel);
    QVERIFY(!cancel->isEnabled()); // nothing to cancel yet
    // The kernel-profile switch (off by default) goes in and out of the settings.
    auto* kernels = panel->findChild<QCheckBox*>(QStringLiteral("profileKernels"));
    QVERIFY(kernels);
    QVERIFY(!panel->settings().profileKernels && !kernels->isChecked());
    RunSettings k = panel->settings();
    k.profileKernels = true;
    panel->setSettings(k);
    QVERIFY(kernels->isChecked() && panel->settings().profileKernels);
    k.profileKernels = false;
    panel->setSettings(k);
    QSignalSpy done(m_w.get(), &MainWindow::jobFinished);
    QVERIFY(m_w->runExtraction(true));
    // Cancel live, settings greyed.
    QVERIFY(cancel->isEnabled() && cancel->isVisibleTo(panel));
    QVERIFY(!panel->isEditable());
    for (QAbstractSpinBox* b : panel->findChildren<QAbstractSpinBox*>()) QVERIFY(!b->isEnabled());
    QVERIFY(!kernels->isEnabled());
    QTest::mouseClick(cancel, Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(done.count() > 0, 120000);
    QCOMPARE(done.first().first().toBool(), true);
    QVERIFY(panel->isEditable());
    for (QAbstractSpinBox* b : panel->findChildren<QAbstractSpinBox*>())
      if (b->objectName() != QLatin1String("psferr")) QVERIFY(b->isEnabled());
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
      s.engine = engine;
      m_w->parameterPanel()->setSettings(s);
      doc->setSettings(m_w->parameterPanel()->settings());
      QCOMPARE(doc->settings().engine, std::string(engine));
      m_w->viewState()->setSelectedPatches({0});
      const QString text = dialogTextOf([&] { QVERIFY(!m_w->runExtraction(false)); });
      QVERIFY2(text.contains(QStringLiteral("CUDA")) && text.contains(QStringLiteral("CPU")), qPrintable(text));
      if (cudaBuilt()) QVERIFY2(text.contains(gpus), qPrintable(text));
      QVERIFY(!m_w->isBusy());
    }
    // "auto" runs on the CPU and says so.
    s.engine = "auto";
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
    s.engine = "cpu";
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

  // Side by side renders in the background once its tab is raised: the screenshot of
  // that dock must wait for the render, however slow the machine (here every worker
  // of the background pool is held for 2 s after the raise), not grab empty panels.
  void screenshotOfSideBySideWaitsForItsRender() {
    QThreadPool* pool = backgroundPool();
    QSemaphore release, holding;
    const int workers = pool->maxThreadCount();
    for (int k = 0; k < workers; ++k)
      pool->start([&] {
        holding.release();
        release.acquire();
      });
    QVERIFY(holding.tryAcquire(workers, 10000));
    std::thread releaser([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2000));
      release.release(workers);
    });
    ScreenshotOptions o;
    o.path = path(QStringLiteral("side.png"));
    o.fiber = 7;
    o.wave = 6150;
    o.zoom = 4;
    o.raise = QStringLiteral("sideBySideDock");
    o.view = QStringLiteral("sideBySideDock");
    const int rc = takeScreenshot(*m_w, o);
    releaser.join();
    pool->waitForDone();
    QCOMPARE(rc, 0);
    const QImage img(o.path);
    QVERIFY(!img.isNull());
    // A patch of the data panel away from its caption, axes, crosshair, panner and
    // colour bar: the picture's grey levels, not one background colour.
    ImageTools* tools = ImageTools::of(m_w.get());
    QVERIFY(tools);
    ImageCanvas* data = tools->sideBySide()->canvas(0);
    const QPoint at = data->mapTo(tools->sideBySideDock(), QPoint(data->width() / 4, data->height() * 2 / 3));
    QSet<QRgb> colours;
    for (int y = at.y(); y < at.y() + 16; ++y)
      for (int x = at.x(); x < at.x() + 16; ++x) colours.insert(img.pixel(x, y));
    QVERIFY2(colours.size() >= 4, qPrintable(QStringLiteral("%1 colours").arg(colours.size())));
  }

  // Issue 14 polish: "Nothing selected" informs (no critical icon); a cancelled run is
  // marked as such in the run list; exports say where they wrote; the folder is kept.
  void polishMessages() {
    m_w->viewState()->setSelectedPatches({});
    m_w->viewState()->setSelectedFibers({});
    QMessageBox::Icon icon = QMessageBox::NoIcon;
    const QString text = dialogTextOf([&] { QVERIFY(!m_w->runExtraction(false)); }, nullptr, &icon);
    QVERIFY(text.contains(QStringLiteral("shift+drag")));
    QCOMPARE(icon, QMessageBox::Information);
    bool sawCancelled = false;
    for (const auto& run : AnalysisDocks::of(m_w.get())->runs())
      if (run.label.contains(QStringLiteral("cancelled")) && run.result && run.result->cancelled) sawCancelled = true;
    QVERIFY(sawCancelled); // from cancelWholeFrameKeepsPartialResults
    const QString f = path(QStringLiteral("sub/ccd.png"));
    QVERIFY(QDir().mkpath(path(QStringLiteral("sub"))));
    QVERIFY(m_w->exportView(QStringLiteral("ccd"), f));
    QVERIFY2(m_w->statusBar()->currentMessage().contains(f), qPrintable(m_w->statusBar()->currentMessage()));
    QCOMPARE(m_w->lastDir(), path(QStringLiteral("sub")));
    // Engine flags of the command line never reach the user.
    const QString gpu = userMessage(QStringLiteral("--engine cuda: no usable GPU: none")).text;
    QVERIFY2(!gpu.contains(QStringLiteral("--")) && gpu.contains(QStringLiteral("CUDA engine")), qPrintable(gpu));
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

  // Dock sizes and the tab in front come back in the next session.
  void layoutIsRestored() {
    auto* resid = m_w->findChild<QDockWidget*>(QStringLiteral("residualsDock"));
    auto* timeline = m_w->findChild<QDockWidget*>(QStringLiteral("timelineDock"));
    QVERIFY(resid && timeline);
    resid->raise();
    timeline->raise();
    m_w->resizeDocks({resid}, {333}, Qt::Horizontal);
    QCoreApplication::processEvents();
    QStringList front = m_w->raisedDocks();
    QVERIFY2(front.contains(QStringLiteral("residualsDock")) && front.contains(QStringLiteral("timelineDock")) &&
                 !front.contains(QStringLiteral("resolutionDock")) && !front.contains(QStringLiteral("spectrumDock")),
             qPrintable(front.join(QLatin1Char(' '))));
    const int width = resid->width();
    m_w->close();
    m_w.reset();
    m_w = std::make_unique<MainWindow>();
    m_w->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_w.get()));
    QCoreApplication::processEvents();
    front = m_w->raisedDocks();
    QVERIFY2(front.contains(QStringLiteral("residualsDock")) && front.contains(QStringLiteral("timelineDock")) &&
                 !front.contains(QStringLiteral("resolutionDock")) && !front.contains(QStringLiteral("spectrumDock")),
             qPrintable(front.join(QLatin1Char(' '))));
    resid = m_w->findChild<QDockWidget*>(QStringLiteral("residualsDock"));
    QVERIFY2(std::abs(resid->width() - width) <= 8, qPrintable(QStringLiteral("%1 vs %2").arg(resid->width()).arg(width)));
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
