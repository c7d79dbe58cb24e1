// The image tools of issue 14 in the real main window: the Image toolbar's buttons
// clicked with the mouse (Box, Cut, Invert, Reset contrast, Pixel axes, Colour bar,
// Panner), a right-drag on the CCD reaching the residual images, the Region dock's
// statistics and cut after a real extraction, the Side by side dock, and the
// application icon (the SVG drawn through Qt's SVG plugins).
#include "gui_test_sim.h"

#include "app/gui/app_icon.h"
#include "app/gui/image_tools.h"
#include "app/gui/main_window.h"
#include "widgets/ccd_view.h"
#include "widgets/cut_view.h"
#include "widgets/region_stats.h"
#include "widgets/residual_view.h"
#include "widgets/side_by_side_view.h"
#include "widgets/view_state.h"

#include <qcustomplot.h>

#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QSettings>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>
#include <QToolBar>

#include <cmath>

using namespace spex;

namespace {

void drag(QWidget* w, Qt::MouseButton button, QPoint from, QPoint to, Qt::KeyboardModifiers mods = Qt::NoModifier) {
  QMouseEvent press(QEvent::MouseButtonPress, from, w->mapToGlobal(from), button, button, mods);
  QApplication::sendEvent(w, &press);
  for (int i = 1; i <= 4; ++i) {
    const QPointF p = from + (to - from) * (i / 4.0);
    QMouseEvent move(QEvent::MouseMove, p, w->mapToGlobal(p), Qt::NoButton, button, mods);
    QApplication::sendEvent(w, &move);
  }
  QMouseEvent release(QEvent::MouseButtonRelease, to, w->mapToGlobal(to), button, Qt::NoButton, mods);
  QApplication::sendEvent(w, &release);
}

} // namespace

class GuiImageToolsWindowTest : public QObject {
  Q_OBJECT
private:
  spextest::SmallSim m_sim;
  std::unique_ptr<MainWindow> m_w;
  ImageTools* m_tools = nullptr;

  // Clicks the Image toolbar's button for an action, as a user does.
  void click(QAction* a) {
    auto* bar = m_w->findChild<QToolBar*>(QStringLiteral("imageToolbar"));
    QVERIFY(bar);
    QWidget* b = bar->widgetForAction(a);
    QVERIFY2(b && b->isVisible(), qPrintable(a->text()));
    QTest::mouseClick(b, Qt::LeftButton);
  }

private slots:
  void initTestCase() {
    QApplication::setOrganizationName(QStringLiteral("SpexLabTest"));
    QApplication::setApplicationName(QStringLiteral("gui_image_tools_window"));
    QSettings().clear();
    m_sim = spextest::makeSmallSim();
    m_w = std::make_unique<MainWindow>();
    m_w->setInteractive(false);
    m_w->resize(1600, 1000);
    m_w->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_w.get()));
    m_w->document()->loadSimulation(m_sim.psf, m_sim.sim, QStringLiteral("small test simulation"));
    QTest::qWait(50);
    m_tools = ImageTools::of(m_w.get());
    QVERIFY(m_tools);
  }

  void applicationIconIsTheSvg() {
    QVERIFY2(svgIconRenders(), "the SVG icon does not render: Qt's SVG plugins (Debian libqt6svg6) are missing");
    const QIcon icon = m_w->windowIcon();
    QVERIFY(!icon.isNull());
    const QImage img = icon.pixmap(64, 64).toImage().convertToFormat(QImage::Format_ARGB32);
    QVERIFY(!img.isNull());
    // The SVG's rounded dark square: transparent corner, opaque dark middle.
    QCOMPARE(qAlpha(img.pixel(0, 0)), 0);
    const QRgb mid = img.pixel(img.width() * 8 / 64, img.height() * 30 / 64); // between edge and first trace
    QCOMPARE(qAlpha(mid), 255);
    QVERIFY(qGray(mid) < 120);
    QVERIFY(!applicationIcon().pixmap(16, 16).isNull());
  }

  void displayTogglesReachEveryImage() {
    CcdView* ccd = m_w->ccdView();
    ImageCanvas* res = m_w->residualView()->canvas();
    QVERIFY(ccd->hasColorBar());
    QVERIFY(ccd->colorBarVisible() && ccd->pixelAxes() && ccd->pannerEnabled());
    click(m_tools->colorBarAction());
    QVERIFY(!ccd->colorBarVisible() && !res->colorBarVisible());
    click(m_tools->colorBarAction());
    QVERIFY(ccd->colorBarVisible() && res->colorBarVisible());
    click(m_tools->axesAction());
    QVERIFY(!ccd->pixelAxes() && !res->pixelAxes());
    click(m_tools->axesAction());
    QVERIFY(ccd->pixelAxes());
    click(m_tools->pannerAction());
    QVERIFY(!ccd->pannerEnabled());
    click(m_tools->pannerAction());
    QVERIFY(ccd->pannerEnabled());
    // Zoomed in, the CCD shows the panner.
    m_w->viewState()->setView(QPointF(100, 500), 4.0);
    QVERIFY(ccd->pannerShown());
  }

  void invertAndContrastReachTheResiduals() {
    CcdView* ccd = m_w->ccdView();
    const QImage before = ccd->picture();
    click(m_tools->invertAction());
    QVERIFY(m_w->scale().inverted);
    QVERIFY(ccd->scale().inverted);
    QVERIFY(ccd->picture() != before);
    QVERIFY(m_w->residualView()->dataScale().inverted);
    click(m_tools->invertAction());
    QVERIFY(!m_w->scale().inverted);
    QCOMPARE(ccd->picture(), before);
    // Right-drag on the CCD: bias follows the mouse, the window's scale and the
    // residual images' scale too; Reset brings it back.
    const QPoint c = ccd->rect().center();
    const int dx = ccd->width() / 5;
    drag(ccd, Qt::RightButton, c, c + QPoint(dx, -ccd->height() / 8));
    QVERIFY(std::abs(m_w->scale().bias - (0.5 + double(dx) / ccd->width())) < 1e-9);
    QVERIFY(m_w->scale().contrast > 1.4);
    QCOMPARE(m_w->residualView()->dataScale().bias, m_w->scale().bias);
    QVERIFY(ccd->picture() != before);
    click(m_tools->resetContrastAction());
    QCOMPARE(m_w->scale().contrast, 1.0);
    QCOMPARE(m_w->scale().bias, 0.5);
    QCOMPARE(ccd->picture(), before);
  }

  void boxAndCutAfterAnExtraction() {
    CcdView* ccd = m_w->ccdView();
    ViewState* vs = m_w->viewState();
    const auto psf = m_w->document()->psf();
    // Extract the patches of fiber 7 so that a model exists.
    vs->selectFiber(7);
    QSignalSpy done(m_w.get(), &MainWindow::jobFinished);
    QVERIFY(m_w->runExtraction(false));
    QVERIFY(done.wait(120000));
    m_w->residualView()->waitForUpdate();
    QVERIFY(!m_w->document()->modelSource().isEmpty());
    // The Side by side tab is behind Spectrum: it must not hold the residual view's chi,
    // or every in-place update (each click) makes the residual view copy it
    // (copy-on-write) and the hidden tab re-render three CCD images.
    QVERIFY(!m_tools->sideBySideDock()->isVisible() || m_tools->sideBySide()->visibleRegion().isEmpty());
    QCOMPARE(m_w->residualView()->chi().use_count(), 2L); // the view's own, and this copy

    vs->setView(QPointF(psf->x(7, 6100), psf->y(7, 6100)), 4.0);
    click(m_tools->boxAction());
    QCOMPARE(ccd->tool(), ImageCanvas::Tool::Box);
    const QPointF at(psf->x(7, 6100), psf->y(7, 6100));
    drag(ccd, Qt::LeftButton, ccd->toWidget(at + QPointF(-4, -6)).toPoint(), ccd->toWidget(at + QPointF(4, 6)).toPoint());
    QVERIFY(m_tools->regionDock()->isVisible());
    RegionStatsView* st = m_tools->regionStats();
    QVERIFY(st->stats(0).n > 50);
    // The model of fiber 7 is there: chi over the box is finite and of order unity.
    QCOMPARE(st->stats(2).n, st->stats(0).n);
    QVERIFY2(std::abs(st->stats(2).mean) < 3 && st->stats(2).sigma > 0.2 && st->stats(2).sigma < 5,
             qPrintable(QStringLiteral("%1 %2").arg(st->stats(2).mean).arg(st->stats(2).sigma)));
    QVERIFY(st->stats(1).max > 0);

    click(m_tools->cutAction());
    QCOMPARE(ccd->tool(), ImageCanvas::Tool::Cut);
    const double row = psf->y(7, 6100);
    drag(ccd, Qt::LeftButton, ccd->toWidget(QPointF(psf->x(5, 6100) - 2, row)).toPoint(),
         ccd->toWidget(QPointF(psf->x(9, 6100) + 2, row)).toPoint());
    CutView* cut = m_tools->cutView();
    QCOMPARE(cut->crossings().size(), 5);
    QCOMPARE(cut->plot()->graphCount(), 2); // data and model
    QVERIFY(!cut->modelProfile().isEmpty());
    // Navigate again: a drag pans.
    click(m_tools->navigateAction());
    const QPointF c0 = vs->center();
    drag(ccd, Qt::LeftButton, QPoint(300, 300), QPoint(340, 300));
    QVERIFY(vs->center() != c0);
  }

  void sideBySideDockShowsThreeImages() {
    QDockWidget* d = m_tools->sideBySideDock();
    d->show();
    d->raise();
    QTest::qWait(20);
    SideBySideView* sbs = m_tools->sideBySide();
    sbs->waitForUpdate();
    for (int i = 0; i < 3; ++i) QVERIFY2(!sbs->canvas(i)->picture().isNull(), qPrintable(QString::number(i)));
    QCOMPARE(sbs->canvas(1)->caption(), QStringLiteral("model"));
    // The same zoom as the CCD.
    QCOMPARE(sbs->canvas(0)->ccdToWidget().m11(), m_w->ccdView()->ccdToWidget().m11());
  }

  void cleanupTestCase() {
    m_w.reset();
    QSettings().clear();
  }
};

QTEST_MAIN(GuiImageToolsWindowTest)
#include "gui_image_tools_window_test.moc"
