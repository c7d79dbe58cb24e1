// Tests of the workbench views on their own: scales and colour maps, the shared view
// state, the CCD view driven with real mouse and key events over a small simulation,
// the spectrum, resolution and residual views fed with known data.
#include "gui_test_sim.h"

#include "widgets/ccd_view.h"
#include "widgets/colormap.h"
#include "widgets/image_scale.h"
#include "widgets/residual_view.h"
#include "widgets/resolution_view.h"
#include "widgets/spectrum_view.h"
#include "widgets/view_state.h"

#include <qcustomplot.h>

#include <QApplication>
#include <QSignalSpy>
#include <QPaintEvent>
#include <QScreen>
#include <QTest>
#include <QWheelEvent>

#include <cmath>
#include <random>

using namespace spex;

namespace {

// A result for fibers [fiberMin, fiberMin + nfiber) on grid g with known values:
// flux = 100 fiber + bin, ivar = 0.25, R = identity, covered where asked.
std::shared_ptr<ExtractionResult> knownResult(int fiberMin, int nfiber, const WaveGrid& g, int ndiag) {
  auto r = std::make_shared<ExtractionResult>();
  r->engine = "cpu";
  r->fiberMin = fiberMin;
  r->nfiber = nfiber;
  r->nwave = g.n;
  r->ndiag = ndiag;
  r->wave = g;
  r->flux = Array2D<double>(nfiber, g.n);
  r->ivar = Array2D<double>(nfiber, g.n, 0.25);
  r->mask = Array2D<uint32_t>(nfiber, g.n);
  r->chi2pix = Array2D<double>(nfiber, g.n, 1.0);
  r->covered = Array2D<uint8_t>(nfiber, g.n, 1);
  r->resolution = Array3D<double>(nfiber, 2 * ndiag + 1, g.n);
  for (int f = 0; f < nfiber; ++f)
    for (int j = 0; j < g.n; ++j) {
      r->flux(f, j) = 100.0 * (fiberMin + f) + j;
      r->resolution(f, ndiag, j) = 1.0; // main diagonal: k = ndiag is offset 0
    }
  return r;
}

QImage grabOf(QWidget& w) { return w.grab().toImage(); }

// Largest difference of one colour channel between two images of one size (256: sizes differ).
int maxChannelDiff(const QImage& a, const QImage& b) {
  if (a.size() != b.size()) return 256;
  int d = 0;
  for (int y = 0; y < a.height(); ++y)
    for (int x = 0; x < a.width(); ++x) {
      const QRgb p = a.pixel(x, y), q = b.pixel(x, y);
      d = std::max({d, std::abs(qRed(p) - qRed(q)), std::abs(qGreen(p) - qGreen(q)), std::abs(qBlue(p) - qBlue(q))});
    }
  return d;
}

} // namespace

class GuiWidgetsTest : public QObject {
  Q_OBJECT
private:
  spextest::SmallSim m_sim;
  std::shared_ptr<const GaussHermitePsf> m_psf;
  std::shared_ptr<const Image> m_image;

private slots:
  void initTestCase() {
    m_sim = spextest::makeSmallSim();
    m_psf = std::make_shared<GaussHermitePsf>(m_sim.psf);
    m_image = std::make_shared<Image>(m_sim.sim.image);
  }

  void colormapTables() {
    for (const QString& name : colormapNames()) {
      const QVector<QRgb> t = colorTable(colormapFromName(name));
      QCOMPARE(t.size(), 256);
    }
    const QVector<QRgb> grey = colorTable(Colormap::Grey);
    QCOMPARE(grey.first(), qRgb(0, 0, 0));
    QCOMPARE(grey.last(), qRgb(255, 255, 255));
    // Diverging: the middle is (near) white so chi = 0 reads as nothing.
    const QColor mid(colorTable(Colormap::Diverging)[128]);
    QVERIFY(mid.lightness() > 235);
    // Viridis gets lighter from end to end (perceptual order).
    QVERIFY(QColor(colorTable(Colormap::Viridis)[255]).lightness() >
            QColor(colorTable(Colormap::Viridis)[0]).lightness() + 100);
  }

  void scaleLimits() {
    Array2D<double> ramp(100, 100);
    for (int i = 0; i < 10000; ++i) ramp.data[i] = i;
    ScaleSettings s;
    s.limits = Limits::MinMax;
    ScaleRange r = computeRange(ramp, nullptr, s);
    QCOMPARE(r.lo, 0.0);
    QCOMPARE(r.hi, 9999.0);
    s.limits = Limits::Percentile;
    s.percentile = 99.0;
    r = computeRange(ramp, nullptr, s);
    QVERIFY(std::abs(r.lo - 100) < 2 && std::abs(r.hi - 9899) < 2);
    // Masked pixels (weight 0) are left out: a huge masked value must not matter.
    Array2D<double> w(100, 100, 1.0);
    ramp(0, 0) = 1e9;
    w(0, 0) = 0;
    s.limits = Limits::MinMax;
    r = computeRange(ramp, &w, s);
    QCOMPARE(r.hi, 9999.0);
    // zscale of Gaussian noise with a few bright stars: limits hug the noise.
    std::mt19937 rng(1);
    std::normal_distribution<double> g(10.0, 2.0);
    std::vector<double> samples(20000);
    for (double& v : samples) v = g(rng);
    for (int i = 0; i < 200; ++i) samples[i * 100] = 5000;
    r = zscaleRange(samples);
    QVERIFY2(r.lo > 0 && r.lo < 10 && r.hi > 10 && r.hi < 30,
             qPrintable(QStringLiteral("zscale %1 %2").arg(r.lo).arg(r.hi)));
    // Stretches map the ends to the ends and are monotonic.
    for (Stretch st : {Stretch::Linear, Stretch::Sqrt, Stretch::Log, Stretch::Asinh}) {
      QCOMPARE(stretchValue(st, 0.0), 0.0);
      QVERIFY(std::abs(stretchValue(st, 1.0) - 1.0) < 1e-12);
      QVERIFY(stretchValue(st, 0.3) < stretchValue(st, 0.6));
    }
  }

  void renderOrientation() {
    // Row 0 is the bottom line of the picture (astronomers' orientation).
    Array2D<double> a(4, 3, 0.0);
    for (int c = 0; c < 3; ++c) a(0, c) = 1.0;
    const QImage img = renderImage(a, {0, 1}, Stretch::Linear, colorTable(Colormap::Grey));
    QCOMPARE(img.size(), QSize(3, 4));
    QCOMPARE(img.pixel(1, 3), qRgb(255, 255, 255));
    QCOMPARE(img.pixel(1, 0), qRgb(0, 0, 0));
  }

  void viewStateZoomKeepsAnchor() {
    ViewState vs;
    vs.setImageSize(QSize(1000, 1000));
    vs.setView(QPointF(500, 500), 1.0);
    const QPointF anchor(600, 450);
    // The anchor's offset from the centre, in screen pixels, must not change.
    const QPointF before = (anchor - vs.center()) * vs.zoom();
    vs.zoomAround(2.0, anchor);
    QCOMPARE(vs.zoom(), 2.0);
    const QPointF after = (anchor - vs.center()) * vs.zoom();
    QVERIFY(std::abs(before.x() - after.x()) < 1e-9 && std::abs(before.y() - after.y()) < 1e-9);
    vs.zoomAround(1e6, anchor);
    QCOMPARE(vs.zoom(), ViewState::kMaxZoom);
    vs.fitTo(QSize(500, 250));
    QCOMPARE(vs.zoom(), 0.25);
  }

  void ccdViewSelectsTraceAndPatches() {
    ViewState vs;
    CcdView view(&vs);
    view.resize(600, 700);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setInputs(m_image, m_psf);
    auto plan = std::make_shared<PatchPlan>(
        makePatchPlan(*m_psf, WaveGrid::fromRange(6000, 6300, 0.8), 0, 25, PatchParams{}));
    view.setPlan(plan);
    vs.setView(QPointF(m_psf->x(7, 6100), m_psf->y(7, 6100)), 2.0);

    // Click on fiber 7's trace at 6100 A.
    const QPoint at = view.widgetPosOf(7, 6100).toPoint();
    QTest::mouseClick(&view, Qt::LeftButton, Qt::NoModifier, at);
    QCOMPARE(vs.selectedFiber(), 7);
    QVERIFY2(std::abs(vs.selectedWave() - 6100) < 2.0, qPrintable(QString::number(vs.selectedWave())));
    // The readout names the fiber and the wavelength there.
    const QString text = view.readout(view.toCcd(at));
    QVERIFY2(text.contains(QStringLiteral("fiber 7")), qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("value")) && text.contains(QStringLiteral("ivar")), qPrintable(text));

    // Shift+drag a small box around that point: the patch holding (7, 6100) is chosen.
    const int bin = int(std::lround((6100 - 6000) / 0.8));
    const int expected = plan->patchAt(7, bin);
    QVERIFY(expected >= 0);
    const QPoint a = at - QPoint(4, 4), b = at + QPoint(4, 4);
    QMouseEvent press(QEvent::MouseButtonPress, a, view.mapToGlobal(a), Qt::LeftButton, Qt::LeftButton, Qt::ShiftModifier);
    QApplication::sendEvent(&view, &press);
    QMouseEvent move(QEvent::MouseMove, b, view.mapToGlobal(b), Qt::NoButton, Qt::LeftButton, Qt::ShiftModifier);
    QApplication::sendEvent(&view, &move);
    QMouseEvent release(QEvent::MouseButtonRelease, b, view.mapToGlobal(b), Qt::LeftButton, Qt::NoButton, Qt::ShiftModifier);
    QApplication::sendEvent(&view, &release);
    QVERIFY(vs.selectedPatches().contains(expected));
    QVERIFY(vs.selectedPatches().size() <= 4); // a small box, a few patches at most
  }

  void ccdViewZoomAndPan() {
    ViewState vs;
    CcdView view(&vs);
    view.resize(500, 500);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setInputs(m_image, m_psf);
    view.fit();
    const double fitZoom = vs.zoom();
    QVERIFY(std::abs(fitZoom - std::min(500.0 / m_image->nx, 500.0 / m_image->ny)) < 1e-9);

    // Wheel one notch up at a point: zoom x1.2 and the CCD point under it stays put.
    const QPointF pos(120, 300);
    const QPointF under = view.toCcd(pos);
    QWheelEvent wheel(pos, view.mapToGlobal(pos), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
                      Qt::NoScrollPhase, false);
    QApplication::sendEvent(&view, &wheel);
    QVERIFY(std::abs(vs.zoom() / fitZoom - 1.2) < 1e-9);
    const QPointF still = view.toCcd(pos);
    QVERIFY(std::abs(still.x() - under.x()) < 1e-6 && std::abs(still.y() - under.y()) < 1e-6);

    // Keys: + zooms 1.25x, 1 is one-to-one, F fits again.
    const double z = vs.zoom();
    QTest::keyClick(&view, Qt::Key_Plus);
    QVERIFY(std::abs(vs.zoom() / z - 1.25) < 1e-9);
    QTest::keyClick(&view, Qt::Key_1);
    QCOMPARE(vs.zoom(), 1.0);
    // Drag pans: 50 px to the right moves the centre 50 CCD px to the left at 1:1.
    const QPointF c = vs.center();
    QTest::mousePress(&view, Qt::LeftButton, Qt::NoModifier, QPoint(200, 200));
    QMouseEvent move(QEvent::MouseMove, QPointF(250, 200), view.mapToGlobal(QPointF(250, 200)), Qt::NoButton,
                     Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&view, &move);
    QTest::mouseRelease(&view, Qt::LeftButton, Qt::NoModifier, QPoint(250, 200));
    QVERIFY(std::abs(vs.center().x() - (c.x() - 50)) < 1e-9);
    QVERIFY(std::abs(vs.center().y() - c.y()) < 1e-9);
    QTest::keyClick(&view, Qt::Key_F);
    QVERIFY(std::abs(vs.zoom() - fitZoom) < 1e-9);
  }

  // A new extraction repaints the CCD view only where extracted regions appeared or
  // went (CcdView::setExtracted); what is then on screen must equal a full repaint,
  // and an unchanged result repaints nothing.
  void extractedRegionsRepaintOnlyWhatChanged() {
    ViewState vs;
    CcdView view(&vs);
    view.resize(500, 700);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setInputs(m_image, m_psf);
    auto plan = std::make_shared<PatchPlan>(
        makePatchPlan(*m_psf, WaveGrid::fromRange(6000, 6300, 0.8), 0, 50, PatchParams{}));
    view.setPlan(plan);
    view.fit();
    const int n = plan->wave.n;
    auto first = knownResult(0, 50, plan->wave, m_psf->hsizeY);
    for (int f = 0; f < 50; ++f)
      for (int j = 0; j < n; ++j) first->covered(f, j) = f < 10 && j < n / 3;
    view.setExtracted({first});
    QTest::qWait(50);
    auto onScreen = [&] { return view.screen()->grabWindow(view.winId()).toImage(); };
    const QImage before = onScreen();
    // More fibers and another wavelength range: two new regions, the old one stays.
    auto second = std::make_shared<ExtractionResult>(*first);
    for (int f = 20; f < 30; ++f)
      for (int j = n / 2; j < n; ++j) second->covered(f, j) = 1;
    int paints = 0;
    struct Counter : QObject {
      int* n;
      bool eventFilter(QObject*, QEvent* e) override {
        if (e->type() == QEvent::Paint) {
          ++*n;
          last = static_cast<QPaintEvent*>(e)->rect();
        }
        return false;
      }
      QRect last;
    } counter;
    counter.n = &paints;
    view.installEventFilter(&counter);
    view.setExtracted({second});
    QTest::qWait(50);
    QCOMPARE(view.extractedRegionCount(), 2);
    QVERIFY(paints >= 1);
    QVERIFY2(counter.last.width() * counter.last.height() < view.width() * view.height() / 2,
             qPrintable(QStringLiteral("repainted %1 x %2").arg(counter.last.width()).arg(counter.last.height())));
    const QImage partial = onScreen();
    QVERIFY(partial != before);
    view.repaint(); // everything, as a full update would
    const QImage full = onScreen();
    // Qt's smooth (bilinear) image scaling rounds a clipped draw differently in the
    // last bit: equal within 2 levels per channel, not bit for bit.
    QVERIFY2(maxChannelDiff(partial, full) <= 2, qPrintable(QString::number(maxChannelDiff(partial, full))));
    // Same regions again (a re-extraction of the same patches): no repaint at all.
    paints = 0;
    view.setExtracted({std::make_shared<ExtractionResult>(*second)});
    QTest::qWait(50);
    QCOMPARE(paints, 0);
    // Regions gone (results cleared): repainted, equal to a full repaint.
    view.setExtracted({});
    QTest::qWait(50);
    QCOMPARE(view.extractedRegionCount(), 0);
    const QImage cleared = onScreen();
    view.repaint();
    QVERIFY(maxChannelDiff(cleared, onScreen()) <= 2);
    view.removeEventFilter(&counter);
  }

  void ccdViewOverlaysDraw() {
    ViewState vs;
    CcdView view(&vs);
    view.resize(500, 700);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setInputs(m_image, m_psf);
    auto plan = std::make_shared<PatchPlan>(
        makePatchPlan(*m_psf, WaveGrid::fromRange(6000, 6300, 0.8), 0, 50, PatchParams{}));
    view.setPlan(plan);
    auto done = knownResult(0, 50, plan->wave, m_psf->hsizeY);
    view.setExtracted({done});
    QVERIFY(view.extractedRegionCount() > 0);
    view.fit();
    for (int i = 0; i < kOverlayCount; ++i) view.setOverlay(Overlay(i), false);
    const QImage bare = grabOf(view);
    // Each overlay alone must change what is drawn (and switch back off cleanly).
    for (int i = 0; i < kOverlayCount; ++i) {
      const Overlay o = Overlay(i);
      view.setOverlay(o, true);
      QVERIFY(view.overlay(o));
      const QImage with = grabOf(view);
      QVERIFY2(with != bare, qPrintable(overlayName(o)));
      view.setOverlay(o, false);
      QVERIFY(!view.overlay(o));
      QCOMPARE(grabOf(view), bare);
    }
  }

  void largeImageRendersAndPansOnTheCcdGrid() {
    // A DESI-sized CCD (4114 x 4128): the picture covers it, pan/zoom keep the
    // transform exact. How fast this is belongs to `spexlab --bench`
    // (docs/benchmarks.md "Workbench"), not to a test.
    auto img = std::make_shared<Image>();
    img->ny = 4128;
    img->nx = 4114;
    img->pix = Array2D<double>(img->ny, img->nx);
    img->ivar = Array2D<double>(img->ny, img->nx, 1.0);
    std::mt19937 rng(2);
    std::normal_distribution<double> g(0, 3);
    for (double& v : img->pix.data) v = g(rng);
    img->pix(4000, 100) = 1e4; // one hot pixel near the top left
    ViewState vs;
    CcdView view(&vs);
    view.resize(1200, 900);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setInputs(img, nullptr);
    view.repaint();
    QCOMPARE(view.picture().size(), QSize(4114, 4128));
    QCOMPARE(vs.imageSize(), QSize(4114, 4128));
    for (int i = 0; i < 6; ++i) {
      const QPointF c(500 + 150 * i, 2000 + 50 * i);
      const double z = i % 2 ? 0.3 : 2.0;
      vs.setView(c, z);
      view.repaint();
      const QPointF mid = view.toCcd(QPointF(view.width() / 2.0, view.height() / 2.0));
      QVERIFY(std::abs(mid.x() - vs.center().x()) < 1e-6 && std::abs(mid.y() - vs.center().y()) < 1e-6);
      QVERIFY(std::abs(view.ccdToWidget().m11() - vs.zoom()) < 1e-12);
    }
    // At 1:1 on the hot pixel the widget shows it as the brightest colour.
    vs.setView(QPointF(100, 4000), 1.0);
    const QImage shot = view.grab().toImage();
    const QPoint at = view.toWidget(QPointF(100, 4000)).toPoint();
    QCOMPARE(QColor(shot.pixel(at)).value(), 255);
  }

  void spectrumViewShowsResultAndTruth() {
    ViewState vs;
    SpectrumView view(&vs);
    view.resize(800, 500);
    view.show();
    const WaveGrid g = WaveGrid::fromRange(6000, 6040, 0.8);
    auto r = knownResult(10, 5, g, 3);
    for (int j = 20; j < g.n; ++j) r->covered(2, j) = 0; // fiber 12 half extracted
    r->mask(2, 3) = kSomeBadPix;
    view.setSources({{"cpu", r}});
    auto truth = std::make_shared<Truth>();
    truth->fiberMin = 10;
    truth->phot = Array2D<double>(5, g.n);
    for (int j = 0; j < g.n; ++j) {
      truth->wave.push_back(g.at(j));
      truth->phot(2, j) = 0.8 * (50 + j); // 50 + j photons per Angstrom
    }
    view.setTruth(truth);
    vs.selectFiber(12);
    QCPGraph* flux = view.fluxGraph(QStringLiteral("cpu"), 12);
    QVERIFY(flux);
    QCOMPARE(flux->data()->size(), g.n);
    for (int j = 0; j < g.n; ++j) {
      const double v = (flux->data()->constBegin() + j)->value;
      if (j < 20) QCOMPARE(v, r->flux(2, j));
      else QVERIFY(std::isnan(v)); // not extracted: a gap, not a zero
    }
    // Truth with identity R equals truth / dw where covered.
    QCPGraph* conv = view.truthGraph(12, true);
    QVERIFY(conv);
    QCOMPARE((conv->data()->constBegin() + 5)->value, 55.0);
    // CSV has the same numbers.
    const QString csv = QDir::temp().filePath(QStringLiteral("spexlab_gui_spectra.csv"));
    QString err;
    QVERIFY2(view.exportCsv(csv, false, &err), qPrintable(err));
    QFile f(csv);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 2 + 20); // comment, header, 20 covered bins
    QVERIFY2(lines[2].startsWith(QStringLiteral("cpu,12,6000.0000,1200,0.25,0,1,50")), qPrintable(lines[2]));
    QVERIFY(lines[5].contains(QStringLiteral(",1,1,")) || lines[5].split(',')[5] == QStringLiteral("1"));
  }

  void resolutionKernelReadsRows() {
    const WaveGrid g = WaveGrid::fromRange(6000, 6040, 0.8);
    auto r = knownResult(0, 2, g, 2);
    // R[i, i+1] = 0.25 at row 10: stored at k = ndiag - 1, column 11.
    r->resolution(1, 1, 11) = 0.25;
    const QVector<double> k = ResolutionView::kernel(*r, 1, g.at(10));
    QCOMPARE(k.size(), 5);
    QCOMPARE(k[2], 1.0);  // offset 0
    QCOMPARE(k[3], 0.25); // offset +1
    QCOMPARE(k[1], 0.0);
  }

  void residualChiIsUnitNormalForAPerfectModel() {
    ViewState vs;
    ResidualView view(&vs);
    view.resize(800, 500);
    view.show();
    auto img = std::make_shared<Image>();
    img->ny = 200;
    img->nx = 150;
    img->pix = Array2D<double>(200, 150);
    img->ivar = Array2D<double>(200, 150, 0.25); // sigma 2
    auto model = std::make_shared<Array2D<double>>(200, 150, 0.0);
    std::mt19937 rng(7);
    std::normal_distribution<double> g(0, 2);
    for (std::size_t i = 0; i < img->pix.size(); ++i) {
      (*model).data[i] = 100.0 + i % 17;
      img->pix.data[i] = model->data[i] + g(rng);
    }
    view.setInputs(img, model, QStringLiteral("cpu"));
    QVERIFY(view.isUpdating()); // computed on a worker thread
    QSignalSpy updated(&view, &ResidualView::updated);
    QVERIFY(updated.wait(30000));
    QVERIFY(!view.isUpdating());
    QVERIFY(!view.canvas()->picture().isNull());
    const ChiStats s = view.chiStats();
    QCOMPARE(s.n, long(img->pix.size()));
    QVERIFY2(std::abs(s.mean) < 0.03 && std::abs(s.sigma - 1) < 0.03,
             qPrintable(QStringLiteral("%1 %2").arg(s.mean).arg(s.sigma)));
    QCOMPARE(view.histogram()->graphCount(), 1); // the unit Gaussian over the bars
    // Blink alternates the picture without rebuilding it.
    view.setBlink(true);
    QVERIFY(view.blinking());
    const bool before = view.canvas()->showingAlternate();
    view.blinkStep();
    QVERIFY(view.canvas()->showingAlternate() != before);
    view.setBlink(false);
    QVERIFY(!view.canvas()->showingAlternate());
  }

  // Issue 14: a run that redid a few patches changes the model inside their boxes
  // only, and the residual view updates chi, its statistics, histogram and pictures
  // there alone. The result must equal a full recomputation exactly (and the
  // statistics a naive count over the whole CCD to rounding).
  void residualIncrementalUpdateEqualsFullRecompute() {
    ViewState vs;
    ResidualView view(&vs);
    view.resize(800, 500);
    view.show();
    const int ny = 300, nx = 260;
    auto img = std::make_shared<Image>();
    img->ny = ny;
    img->nx = nx;
    img->pix = Array2D<double>(ny, nx);
    img->ivar = Array2D<double>(ny, nx, 0.25);
    auto model = std::make_shared<Array2D<double>>(ny, nx, 0.0);
    std::mt19937 rng(11);
    std::normal_distribution<double> g(0, 2);
    for (int y = 0; y < ny; ++y)
      for (int x = 0; x < nx; ++x) {
        if (x > 40 && x < 200) (*model)(y, x) = 50.0 + (x * 7 + y) % 23; // zero elsewhere: not counted
        img->pix(y, x) = (*model)(y, x) + g(rng);
        if ((x + 3 * y) % 97 == 0) img->ivar(y, x) = 0; // masked pixels
      }
    view.setInputs(img, model, QStringLiteral("cpu"), 1);
    view.waitForUpdate();
    QVERIFY(view.hasModel());
    const ChiStats before = view.chiStats();
    // Change the model in place inside two overlapping boxes, one reaching the edge
    // and one covering pixels that had no model (so the counted set changes too).
    const std::vector<PixelBox> boxes = {{30, 120, 50, 130}, {100, 260, 110, 300}};
    for (const PixelBox& b : boxes)
      for (int y = b.y0; y < b.y1; ++y)
        for (int x = b.x0; x < b.x1; ++x) (*model)(y, x) = 1.3 * (*model)(y, x) + 0.5 * ((x + y) % 5);
    view.modelChanged(1, 2, boxes);
    QVERIFY(!view.isUpdating()); // done in place, on this thread
    const ChiStats inc = view.chiStats();
    QVERIFY(inc.n != before.n);

    ResidualView full(&vs);
    full.resize(800, 500);
    full.show();
    full.setInputs(img, std::make_shared<Array2D<double>>(*model), QStringLiteral("cpu"), 2);
    full.waitForUpdate();
    const ChiStats ref = full.chiStats();
    QCOMPARE(inc.n, ref.n);
    QCOMPARE(inc.mean, ref.mean);
    QCOMPARE(inc.sigma, ref.sigma);
    QVERIFY(view.chiHistogram() == full.chiHistogram());
    QVERIFY(view.chiImage()->data == full.chiImage()->data);
    QVERIFY(view.canvas()->picture() == full.canvas()->picture());

    // And a naive count over the whole CCD.
    long n = 0;
    double sum = 0, sum2 = 0;
    QVector<double> hist(ChiMap::kBins, 0.0);
    const double bw = 2 * ChiMap::kLimit / ChiMap::kBins;
    for (int y = 0; y < ny; ++y)
      for (int x = 0; x < nx; ++x) {
        if (!(img->ivar(y, x) > 0 && (*model)(y, x) != 0)) continue;
        const double c = (img->pix(y, x) - (*model)(y, x)) * std::sqrt(img->ivar(y, x));
        ++n;
        sum += c;
        sum2 += c * c;
        const int k = int(std::floor((c + ChiMap::kLimit) / bw));
        if (k >= 0 && k < ChiMap::kBins) hist[k] += 1;
      }
    const double mean = sum / double(n);
    QCOMPARE(inc.n, n);
    QVERIFY(std::abs(inc.mean - mean) < 1e-12 * (1 + std::abs(mean)));
    QVERIFY(std::abs(inc.sigma - std::sqrt(sum2 / double(n) - mean * mean)) < 1e-12);
    QVERIFY(view.chiHistogram() == hist);

    // A change the view did not see (another revision) is a full recomputation.
    view.modelChanged(5, 6, boxes);
    QVERIFY(view.isUpdating());
    view.waitForUpdate();
    QCOMPARE(view.chiStats().n, ref.n);
  }
};

QTEST_MAIN(GuiWidgetsTest)
#include "gui_widgets_test.moc"
