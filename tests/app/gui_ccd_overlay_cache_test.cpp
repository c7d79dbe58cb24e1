// The CCD view's cached overlay layer (issue 14, repaint speed) in the real main
// window: after every change that alters what the overlays show (a pan, a zoom, the
// patch size, an overlay toggle, an extraction, the colormap, a resize, a heatmap,
// new inputs), the view as painted with its cache must equal the same view painted
// with the cache off (the layer drawn anew for that paint). A layer that goes stale
// shows the old grid, traces or regions and fails the comparison; each test also
// checks that the change was visible, so a comparison of two unchanged pictures
// cannot pass by accident.
#include "gui_test_sim.h"

#include "app/gui/image_tools.h"
#include "app/gui/main_window.h"
#include "widgets/ccd_view.h"
#include "widgets/view_state.h"

#include <QAction>
#include <QApplication>
#include <QSettings>
#include <QSignalSpy>
#include <QTest>

#include <cmath>

using namespace spex;

namespace {

// Levels two paints of the same view may differ by: the extracted regions and the
// heatmap are QPainter's antialiased fills, whose coverage rounds by one level
// differently when the same shape sits at another whole-pixel offset in the layer.
// A stale layer differs by far more (a line is 100+ levels off its background).
constexpr int kTolerance = 2;

// Pixels whose colour differs in any channel by more than `tol` levels.
int differing(const QImage& a, const QImage& b, int tol = 0) {
  if (a.size() != b.size()) return std::max(a.width() * a.height(), b.width() * b.height());
  int n = 0;
  for (int y = 0; y < a.height(); ++y) {
    const QRgb* pa = reinterpret_cast<const QRgb*>(a.constScanLine(y));
    const QRgb* pb = reinterpret_cast<const QRgb*>(b.constScanLine(y));
    for (int x = 0; x < a.width(); ++x)
      if (std::abs(qRed(pa[x]) - qRed(pb[x])) > tol || std::abs(qGreen(pa[x]) - qGreen(pb[x])) > tol ||
          std::abs(qBlue(pa[x]) - qBlue(pb[x])) > tol)
        ++n;
  }
  return n;
}

} // namespace

class GuiCcdOverlayCacheTest : public QObject {
  Q_OBJECT
private:
  spextest::SmallSim m_sim;
  std::unique_ptr<MainWindow> m_w;
  CcdView* m_ccd = nullptr;

  QImage paint() { return m_ccd->grab().toImage().convertToFormat(QImage::Format_RGB32); }
  // The same view with every overlay drawn anew (the cached layer is left alone).
  QImage fresh() {
    m_ccd->setOverlayCacheEnabled(false);
    const QImage img = paint();
    m_ccd->setOverlayCacheEnabled(true);
    return img;
  }
  // Paints with the cache (first, into *cached) and without; returns the pixels that
  // differ by more than kTolerance, which must be none: the layer is drawn by the same
  // code either way, and a moved layer moves by whole pixels. Differing pictures are
  // saved for a look.
  int stale(const char* what, QImage* cached = nullptr) {
    const QImage withCache = paint();
    const QImage anew = fresh();
    const int bad = differing(withCache, anew, kTolerance);
    if (bad) {
      withCache.save(QStringLiteral("ccd_cache_%1_cached.png").arg(QLatin1String(what)));
      anew.save(QStringLiteral("ccd_cache_%1_fresh.png").arg(QLatin1String(what)));
      qWarning("%s: %d pixels differ from a fresh paint", what, bad);
    }
    if (cached) *cached = withCache;
    return bad;
  }
  void settle() {
    QTest::qWait(30);
    QApplication::processEvents();
  }

private slots:
  void initTestCase() {
    QApplication::setOrganizationName(QStringLiteral("SpexLabTest"));
    QApplication::setApplicationName(QStringLiteral("gui_ccd_overlay_cache"));
    QSettings().clear();
    m_sim = spextest::makeSmallSim();
    m_w = std::make_unique<MainWindow>();
    m_w->setInteractive(false);
    m_w->resize(1400, 900);
    m_w->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_w.get()));
    m_w->document()->loadSimulation(m_sim.psf, m_sim.sim, QStringLiteral("small test simulation"));
    m_ccd = m_w->ccdView();
    // Every overlay and every display aid on: what the benchmark times.
    for (int i = 0; i < kOverlayCount; ++i) m_w->overlayAction(Overlay(i))->setChecked(true);
    ImageTools* tools = ImageTools::of(m_w.get());
    QVERIFY(tools);
    for (QAction* a : {tools->colorBarAction(), tools->axesAction(), tools->pannerAction()}) a->setChecked(true);
    settle();
    QVERIFY(m_ccd->overlayCacheEnabled());
    QVERIFY(m_ccd->plan() && !m_ccd->plan()->patches.empty());
  }

  // A pan by whole pixels moves the layer (no new drawing) and shows what a fresh
  // paint shows; a pan by a fraction of a pixel draws it anew.
  void panMovesTheLayer() {
    ViewState* vs = m_w->viewState();
    const auto psf = m_w->document()->psf();
    vs->setView(QPointF(psf->x(12, 6150), psf->y(12, 6150)), 2.0);
    QImage before;
    QCOMPARE(stale("zoom2", &before), 0);
    const int builds = m_ccd->overlayLayerBuilds();
    vs->setCenter(vs->center() + QPointF(40 / vs->zoom(), 20 / vs->zoom())); // 40 px right, 20 px up
    QImage moved;
    QCOMPARE(stale("pan", &moved), 0);
    // One build: the fresh paint's (the cached paint moved the layer).
    QCOMPARE(m_ccd->overlayLayerBuilds(), builds + 1);
    QVERIFY(differing(before, moved, 40) > 1000);
    // A key press pans by a tenth of the width: 0.1 * width px, not whole in general.
    m_ccd->setFocus();
    QTest::keyClick(m_ccd, Qt::Key_Left);
    QCOMPARE(stale("keypan"), 0);
    // Beyond the layer's margin: drawn anew, still right.
    vs->setCenter(vs->center() + QPointF(700 / vs->zoom(), 0));
    QCOMPARE(stale("farpan"), 0);
  }

  void zoomRedrawsTheLayer() {
    ViewState* vs = m_w->viewState();
    for (double z : {1.2, 1 / 1.2, 1 / 1.2, 4.0, 0.25}) {
      const int builds = m_ccd->overlayLayerBuilds();
      vs->zoomAround(z, vs->center());
      QCOMPARE(stale("zoom"), 0);
      QCOMPARE(m_ccd->overlayLayerBuilds(), builds + 2); // the cached paint's and the fresh one's
    }
    m_ccd->fit();
    QCOMPARE(stale("fit"), 0);
  }

  // A zoom about the CCD origin keeps the layer's offset whole (0): only the zoom in
  // the layer's key tells the scaled view from the old one.
  void zoomAboutTheOrigin() {
    ViewState* vs = m_w->viewState();
    vs->setView(QPointF(0, 0), 1.0);
    QImage before;
    QCOMPARE(stale("origin-1", &before), 0);
    vs->setView(QPointF(0, 0), 2.0);
    QImage after;
    QCOMPARE(stale("origin-2", &after), 0);
    QVERIFY(differing(before, after, 40) > 1000);
  }

  // The view's own inputs, set directly (the window also sets a new plan, which would
  // hide a missed change of the traces): no plan, then the plan back, then other
  // traces under the same image.
  void planAndTracesSetOnTheView() {
    m_ccd->fit();
    QImage grid;
    QCOMPARE(stale("plan", &grid), 0);
    const auto plan = m_w->document()->plan();
    m_ccd->setPlan(nullptr);
    QImage none;
    QCOMPARE(stale("no-plan", &none), 0);
    QVERIFY(differing(grid, none, 40) > 1000);
    m_ccd->setPlan(plan);
    QCOMPARE(stale("plan-back"), 0);

    spex::SyntheticPsfOptions o = spextest::smallPsfOptions();
    o.seed = 17;
    o.nfiber = 30;
    auto psf = std::make_shared<const spex::GaussHermitePsf>(spex::makeSyntheticPsf(o));
    QImage traces;
    QCOMPARE(stale("traces-before"), 0);
    m_ccd->setInputs(m_w->document()->image(), psf);
    QCOMPARE(stale("other-traces", &traces), 0);
    QVERIFY(differing(grid, traces, 40) > 1000);
    // Back to the document's own.
    m_ccd->setInputs(m_w->document()->image(), m_w->document()->psf());
    m_ccd->setPlan(plan);
    QCOMPARE(stale("inputs-back"), 0);
  }

  // The patch grid follows a new plan (a new patch size in wavelength).
  void patchSizeRedrawsTheGrid() {
    m_ccd->fit();
    QImage before;
    QCOMPARE(stale("before-patch-size", &before), 0);
    RunSettings s = m_w->document()->settings();
    s.params.nwavestep = s.params.nwavestep == 50 ? 30 : 50;
    m_w->document()->setSettings(s);
    settle();
    QImage after;
    QCOMPARE(stale("patch-size", &after), 0);
    QVERIFY(differing(before, after, 40) > 200);
  }

  // Each overlay of the layer, off and on again.
  void overlayTogglesRedraw() {
    m_w->viewState()->setView(m_w->viewState()->center(), 1.5);
    for (Overlay o : {Overlay::PatchGrid, Overlay::Traces, Overlay::Bundles, Overlay::IsoWavelength,
                      Overlay::MaskedPixels}) {
      QImage on;
    QCOMPARE(stale("overlay-on", &on), 0);
      m_w->overlayAction(o)->setChecked(false);
      QImage off;
    QCOMPARE(stale("overlay-off", &off), 0);
      QVERIFY2(differing(on, off, 20) > 50, qPrintable(overlayName(o)));
      m_w->overlayAction(o)->setChecked(true);
      QCOMPARE(stale("overlay-on-again"), 0);
    }
  }

  // An extraction adds extracted regions to the layer.
  void extractionDrawsItsRegions() {
    ViewState* vs = m_w->viewState();
    const auto psf = m_w->document()->psf();
    vs->setView(QPointF(psf->x(7, 6150), psf->y(7, 6150)), 1.0);
    QImage before;
    QCOMPARE(stale("before-extraction", &before), 0);
    QCOMPARE(m_ccd->extractedRegionCount(), 0);
    vs->selectFiber(7);
    QSignalSpy done(m_w.get(), &MainWindow::jobFinished);
    QVERIFY(m_w->runExtraction(false));
    QVERIFY(done.wait(120000));
    settle();
    QVERIFY(m_ccd->extractedRegionCount() > 0);
    // The selection is drawn live, over the layer: clear it so only the regions differ.
    vs->selectFiber(-1);
    vs->setSelectedPatches({});
    settle();
    QImage after;
    QCOMPARE(stale("extraction", &after), 0);
    QVERIFY(differing(before, after, 8) > 500);
  }

  void colormapAndResize() {
    QImage before;
    QCOMPARE(stale("before-colormap", &before), 0);
    ScaleSettings sc = m_w->scale();
    sc.colormap = Colormap::Viridis;
    m_w->setScale(sc);
    settle();
    QImage after;
    QCOMPARE(stale("colormap", &after), 0);
    QVERIFY(differing(before, after, 20) > 10000);
    m_w->resize(1200, 800);
    settle();
    QCOMPARE(stale("resize"), 0);
    m_w->resize(1400, 900);
    settle();
    QCOMPARE(stale("resize-back"), 0);
  }

  void heatmapRedraws() {
    QImage before;
    QCOMPARE(stale("before-heatmap", &before), 0);
    QVector<double> values(int(m_ccd->plan()->patches.size()));
    for (int i = 0; i < values.size(); ++i) values[i] = i % 7;
    m_ccd->setPatchHeatmap(values, QStringLiteral("test"));
    QImage with;
    QCOMPARE(stale("heatmap", &with), 0);
    QVERIFY(differing(before, with, 20) > 1000);
    m_ccd->clearPatchHeatmap();
    QCOMPARE(stale("heatmap-cleared"), 0);
  }

  // New inputs: other traces (another PSF), other masked pixels.
  void newInputsRedraw() {
    m_ccd->fit();
    QImage before;
    QCOMPARE(stale("before-inputs", &before), 0);
    spex::SyntheticPsfOptions o = spextest::smallPsfOptions();
    o.seed = 11;
    o.nfiber = 40;
    spex::GaussHermitePsf psf = spex::makeSyntheticPsf(o);
    spex::Simulation sim = spex::simulate(psf, spextest::smallSimOptions());
    m_w->document()->loadSimulation(psf, sim, QStringLiteral("another simulation"));
    settle();
    QImage after;
    QCOMPARE(stale("inputs", &after), 0);
    QVERIFY(differing(before, after, 40) > 1000);
  }

  void cleanupTestCase() {
    m_w.reset();
    QSettings().clear();
  }
};

QTEST_MAIN(GuiCcdOverlayCacheTest)
#include "gui_ccd_overlay_cache_test.moc"
