// Tests of the image tools of issue 14, each driving the real widget with mouse events
// offscreen: the colour bar, DS9 contrast/bias right-drag, the inverted colormap, the
// overview panner, pixel axes, labels and patch grid legible on every colormap, the
// box region statistics, the cross-dispersion cut, data | model | chi side by side
// with a locked crosshair, and the residual blink's caption.
#include "gui_test_sim.h"

#include "widgets/background.h"
#include "widgets/ccd_view.h"
#include "widgets/colormap.h"
#include "widgets/cut_view.h"
#include "widgets/image_scale.h"
#include "widgets/region_stats.h"
#include "widgets/residual_view.h"
#include "widgets/side_by_side_view.h"
#include "widgets/view_state.h"

#include <qcustomplot.h>

#include <QApplication>
#include <QSemaphore>
#include <QPainter>
#include <QPicture>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>
#include <QThreadPool>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>

using namespace spex;

namespace {

// Press, move in steps, release: a real drag with `button` held.
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

// A 256-column ramp: pixel (r, c) = c, so a linear grey manual 0..255 scale gives
// colour index c and every table change is checkable pixel by pixel.
std::shared_ptr<Image> rampImage(int ny = 120) {
  auto img = std::make_shared<Image>();
  img->ny = ny;
  img->nx = 256;
  img->pix = Array2D<double>(ny, 256);
  img->ivar = Array2D<double>(ny, 256, 1.0);
  for (int r = 0; r < ny; ++r)
    for (int c = 0; c < 256; ++c) img->pix(r, c) = c;
  return img;
}

ScaleSettings rampScale() {
  ScaleSettings s;
  s.stretch = Stretch::Linear;
  s.limits = Limits::Manual;
  s.manualMin = 0;
  s.manualMax = 255;
  s.colormap = Colormap::Grey;
  return s;
}

double luminance(QRgb c) { return (0.299 * qRed(c) + 0.587 * qGreen(c) + 0.114 * qBlue(c)) / 255.0; }

// Largest luminance difference between a pixel the overlay changed and the picture
// underneath it there: what makes a label or line readable.
double overlayContrast(const QImage& bare, const QImage& with) {
  double best = 0;
  for (int y = 0; y < bare.height(); ++y)
    for (int x = 0; x < bare.width(); ++x)
      if (bare.pixel(x, y) != with.pixel(x, y))
        best = std::max(best, std::abs(luminance(bare.pixel(x, y)) - luminance(with.pixel(x, y))));
  return best;
}

} // namespace

class GuiImageToolsTest : public QObject {
  Q_OBJECT
private:
  spextest::SmallSim m_sim;
  std::shared_ptr<const GaussHermitePsf> m_psf;
  std::shared_ptr<const Image> m_image;

  // A model of 0.9 x the data and its chi, for the side-by-side view.
  std::pair<std::shared_ptr<Array2D<double>>, std::shared_ptr<Array2D<double>>> modelAndChi() const {
    auto model = std::make_shared<Array2D<double>>(m_image->ny, m_image->nx, 0.0);
    auto chi = std::make_shared<Array2D<double>>(m_image->ny, m_image->nx, 0.0);
    for (std::size_t i = 0; i < model->size(); ++i) {
      model->data[i] = 0.9 * m_image->pix.data[i];
      chi->data[i] = (m_image->pix.data[i] - model->data[i]) * std::sqrt(std::max(m_image->ivar.data[i], 0.0));
    }
    return {model, chi};
  }

private slots:
  void initTestCase() {
    m_sim = spextest::makeSmallSim();
    m_psf = std::make_shared<GaussHermitePsf>(m_sim.psf);
    m_image = std::make_shared<Image>(m_sim.sim.image);
  }

  void colorBarShowsLimitsAndFollowsScale() {
    ViewState vs;
    CcdView view(&vs);
    view.resize(600, 400);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setInputs(rampImage(), nullptr);
    view.setScale(rampScale());
    QVERIFY(view.hasColorBar());
    QCOMPARE(view.colorBarRange().lo, 0.0);
    QCOMPARE(view.colorBarRange().hi, 255.0);
    QStringList labels = view.colorBarLabels();
    QCOMPARE(labels.first(), QStringLiteral("0"));
    QCOMPARE(labels[labels.size() - 2], QStringLiteral("255"));
    QCOMPARE(labels.last(), QStringLiteral("e\u207b per pixel")); // the unit
    QVERIFY(labels.size() >= 4); // interior ticks between the limits

    const QRect bar = view.colorBarRect();
    QVERIFY(!bar.isEmpty() && QRect(QPoint(0, 0), view.size()).contains(bar));
    QImage shot = view.grab().toImage();
    const int y = bar.center().y();
    QVERIFY(luminance(shot.pixel(bar.left() + 2, y)) < 0.05);   // grey: black at lo
    QVERIFY(luminance(shot.pixel(bar.right() - 2, y)) > 0.95);  // white at hi
    // Legible text: light glyphs under the bar on the panel's dark backing.
    int light = 0, dark = 0;
    for (int yy = bar.bottom() + 3; yy < bar.bottom() + 15; ++yy)
      for (int xx = bar.left(); xx <= bar.right(); ++xx) {
        const double l = luminance(shot.pixel(xx, yy));
        light += l > 0.8;
        dark += l < 0.35;
      }
    QVERIFY2(light > 15 && dark > light, qPrintable(QStringLiteral("light %1 dark %2").arg(light).arg(dark)));

    // Manual limits change: the bar's labels follow.
    ScaleSettings s = rampScale();
    s.manualMin = 10;
    s.manualMax = 50;
    view.setScale(s);
    labels = view.colorBarLabels();
    QCOMPARE(labels.first(), QStringLiteral("10"));
    QCOMPARE(labels[labels.size() - 2], QStringLiteral("50"));
    // Stretch: sqrt puts the bar's middle (value 30) at colour sqrt(0.5) = 0.707.
    s.stretch = Stretch::Sqrt;
    view.setScale(s);
    shot = view.grab().toImage();
    const QColor mid(shot.pixel(bar.left() + bar.width() / 2, y));
    QVERIFY2(std::abs(mid.red() - 180) <= 4, qPrintable(QString::number(mid.red())));
    // Colormap: viridis' top colour at the right end.
    s.colormap = Colormap::Viridis;
    view.setScale(s);
    shot = view.grab().toImage();
    // (the 256 entries are scaled onto the bar's pixels: the last one is the top entry
    // or its neighbour, a few units away)
    const QColor top(shot.pixel(bar.right() - 1, y));
    QVERIFY2(std::abs(top.red() - 0xfd) <= 4 && std::abs(top.green() - 0xe7) <= 4 && std::abs(top.blue() - 0x25) <= 4,
             qPrintable(top.name()));
    // Hidden on request.
    view.setColorBarVisible(false);
    QVERIFY(view.colorBarRect().isEmpty());
  }

  void rightDragSetsContrastAndBias() {
    ViewState vs;
    CcdView view(&vs);
    view.resize(512, 400);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setInputs(rampImage(), nullptr);
    view.setScale(rampScale());
    const QImage before = view.picture();
    QCOMPARE(QColor(before.pixel(100, 5)).red(), 100);
    QSignalSpy adjusted(&view, &CcdView::scaleAdjusted);

    // Right-drag to the right by a quarter of the width: bias +0.25 (darker).
    drag(&view, Qt::RightButton, QPoint(100, 200), QPoint(100 + view.width() / 4, 200));
    QVERIFY(std::abs(view.bias() - 0.75) < 1e-9);
    QVERIFY(std::abs(view.contrast() - 1.0) < 1e-9);
    QVERIFY(adjusted.count() > 0);
    QVERIFY(std::abs(adjusted.last().at(0).value<ScaleSettings>().bias - 0.75) < 1e-9);
    const QVector<QRgb> t = adjustTable(colorTable(Colormap::Grey), 1.0, 0.75, false);
    for (int c : {0, 64, 100, 200, 255}) QCOMPARE(view.picture().pixel(c, 5), t[c]);
    QVERIFY(QColor(view.picture().pixel(100, 5)).red() < 50);
    // Panning did not happen: a right-drag is not a pan.
    // Up by a quarter of the height: contrast doubles.
    drag(&view, Qt::RightButton, QPoint(200, 300), QPoint(200, 300 - view.height() / 4));
    QVERIFY(std::abs(view.contrast() - 2.0) < 1e-9);
    QVERIFY(std::abs(view.bias() - 0.75) < 1e-9);
    const QVector<QRgb> t2 = adjustTable(colorTable(Colormap::Grey), 2.0, 0.75, false);
    QCOMPARE(view.picture().pixel(200, 5), t2[200]);
    // The colour bar shows the adjusted table.
    const QRect bar = view.colorBarRect();
    const QImage shot = view.grab().toImage();
    QVERIFY(luminance(shot.pixel(bar.left() + bar.width() / 2, bar.center().y())) < 0.05); // mid value now black
    // Reset: the picture is the original again.
    view.resetContrastBias();
    QCOMPARE(view.scale().contrast, 1.0);
    QCOMPARE(view.picture(), before);
  }

  void invertedColormapReadsBackwards() {
    ViewState vs;
    CcdView view(&vs);
    view.resize(512, 400);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setInputs(rampImage(), nullptr);
    ScaleSettings s = rampScale();
    s.colormap = Colormap::Magma;
    view.setScale(s);
    const QVector<QRgb> magma = colorTable(Colormap::Magma);
    QCOMPARE(view.picture().pixel(0, 3), magma[0]);
    s.inverted = true;
    view.setScale(s);
    QCOMPARE(view.picture().pixel(0, 3), magma[255]);
    QCOMPARE(view.picture().pixel(255, 3), magma[0]);
    const QImage shot = view.grab().toImage();
    const QRect bar = view.colorBarRect();
    const QColor first(shot.pixel(bar.left() + 1, bar.center().y()));
    QVERIFY2(std::abs(first.red() - qRed(magma[255])) <= 4 && std::abs(first.green() - qGreen(magma[255])) <= 4 &&
                 std::abs(first.blue() - qBlue(magma[255])) <= 4,
             qPrintable(first.name()));
  }

  void pannerAppearsWhenZoomedAndPans() {
    ViewState vs;
    CcdView view(&vs);
    view.resize(700, 700);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setInputs(m_image, m_psf);
    view.fit();
    QVERIFY(!view.pannerShown()); // the whole image is in view
    vs.setView(QPointF(100, 200), 4.0);
    QVERIFY(view.pannerShown());
    const QRect r = view.pannerRect();
    QVERIFY(!r.isEmpty() && r.width() <= 160 && r.height() <= 160);
    // The panner has the image's aspect (600 x 1000).
    QVERIFY(std::abs(double(r.width()) / r.height() - 0.6) < 0.02);
    // The panner shows the picture: it differs from the view without it.
    const QImage with = view.grab().toImage();
    view.setPannerEnabled(false);
    QVERIFY(view.grab().toImage() != with);
    view.setPannerEnabled(true);
    // A click in it centres the view there (to the panner's resolution).
    const QPointF target(450, 700);
    const QPoint at = view.ccdToPanner(target).toPoint();
    QVERIFY(r.contains(at));
    const QVector<int> fibersBefore = vs.selectedFibers();
    QTest::mouseClick(&view, Qt::LeftButton, Qt::NoModifier, at);
    const double res = 1000.0 / r.height(); // CCD px per panner px
    QVERIFY2(std::abs(vs.center().x() - target.x()) <= res && std::abs(vs.center().y() - target.y()) <= res,
             qPrintable(QStringLiteral("%1 %2").arg(vs.center().x()).arg(vs.center().y())));
    QCOMPARE(vs.selectedFibers(), fibersBefore); // a panner click selects nothing
    QCOMPARE(vs.zoom(), 4.0);
    // Dragging in it follows the mouse.
    const QPointF target2(150, 300);
    drag(&view, Qt::LeftButton, at, view.ccdToPanner(target2).toPoint());
    QVERIFY(std::abs(vs.center().x() - target2.x()) <= res && std::abs(vs.center().y() - target2.y()) <= res);
  }

  void pixelAxesTickTheEdges() {
    ViewState vs;
    CcdView view(&vs);
    view.resize(600, 500);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setInputs(m_image, m_psf);
    for (int i = 0; i < kOverlayCount; ++i) view.setOverlay(Overlay(i), false);
    view.fit();
    const QImage bare = view.grab().toImage();
    view.setPixelAxes(true);
    const QImage with = view.grab().toImage();
    QVERIFY(with != bare);
    const QVector<double> xs = view.axisTicks(Qt::Horizontal), ys = view.axisTicks(Qt::Vertical);
    QVERIFY(xs.size() >= 2 && ys.size() >= 3);
    const double step = xs[1] - xs[0];
    for (double x : xs) {
      QVERIFY(x >= 0 && x <= 599);
      QCOMPARE(std::fmod(x, step), 0.0);
      // A light tick line at the bottom edge, at the tick's column.
      const int wx = int(std::lround(view.toWidget(QPointF(x, 0)).x()));
      if (wx > 1 && wx < view.width() - 1) {
        QVERIFY2(luminance(with.pixel(wx, view.height() - 3)) > 0.8, qPrintable(QString::number(x)));
      }
    }
    // Zoomed in, the ticks are closer in CCD pixels and on whole pixels.
    vs.setView(QPointF(300, 500), 8.0);
    const QVector<double> fine = view.axisTicks(Qt::Horizontal);
    QVERIFY(fine.size() >= 2);
    QVERIFY(fine[1] - fine[0] < step && fine[1] - fine[0] >= 1);
    QVERIFY(fine.first() >= view.visibleCcdRect().left() && fine.last() <= view.visibleCcdRect().right());
  }

  void labelsAndGridLegibleOnEveryColormap() {
    // A flat image at the low or the high end of each map (white, yellow, pale, black):
    // fiber numbers and the patch grid must stand out on all of them.
    auto flat = std::make_shared<Image>(m_sim.sim.image);
    ViewState vs;
    CcdView view(&vs);
    view.resize(500, 500);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    for (double& v : flat->pix.data) v = 1.0;
    view.setInputs(flat, m_psf);
    auto plan = std::make_shared<PatchPlan>(makePatchPlan(*m_psf, WaveGrid::fromRange(6000, 6300, 0.8), 0, 50, PatchParams{}));
    view.setPlan(plan);
    vs.setView(QPointF(m_psf->x(10, 6150), m_psf->y(10, 6150)), 3.0);
    view.setColorBarVisible(false);
    view.setPannerEnabled(false);
    for (int i = 0; i < kOverlayCount; ++i) view.setOverlay(Overlay(i), false);
    for (Colormap map : {Colormap::Grey, Colormap::Viridis, Colormap::Magma, Colormap::Diverging})
      for (bool high : {false, true})
        for (bool inverted : {false, true}) {
          ScaleSettings s;
          s.limits = Limits::Manual;
          s.manualMin = high ? 0 : 2; // the flat 1.0 sits at 0.5; push it to an end
          s.manualMax = high ? 1 : 3;
          s.colormap = map;
          s.inverted = inverted;
          view.setScale(s);
          const QImage bare = view.grab().toImage();
          const QString what = QStringLiteral("%1 %2 %3").arg(colormapName(map)).arg(high).arg(inverted);
          for (Overlay o : {Overlay::FiberNumbers, Overlay::PatchGrid}) {
            view.setOverlay(o, true);
            const double c = overlayContrast(bare, view.grab().toImage());
            view.setOverlay(o, false);
            QVERIFY2(c > 0.5, qPrintable(QStringLiteral("%1 on %2: contrast %3").arg(overlayName(o), what).arg(c)));
          }
        }
  }

  // Halo labels on screen come from cached sprites (rendered once per text, font,
  // colour and quarter-pixel offset); vector output draws the outlines. Both must put
  // the same ink in the same place.
  void haloLabelSpritesMatchOutlines() {
    QFont font = QApplication::font();
    font.setPointSizeF(9);
    for (const QPointF at : {QPointF(20, 30), QPointF(20.25, 30.5), QPointF(33.8, 41.1)})
      for (int pass = 0; pass < 2; ++pass) { // the second pass draws from the cache
        QImage sprite(120, 60, QImage::Format_ARGB32_Premultiplied);
        sprite.fill(Qt::transparent);
        {
          QPainter p(&sprite);
          p.setFont(font);
          ImageCanvas::drawHaloText(p, at, QStringLiteral("6150 \u00c5"), QColor(150, 240, 255));
        }
        QPicture pic; // not a raster device: the outline path, replayed onto an image
        {
          QPainter p(&pic);
          p.setFont(font);
          ImageCanvas::drawHaloText(p, at, QStringLiteral("6150 \u00c5"), QColor(150, 240, 255));
        }
        QImage outline(120, 60, QImage::Format_ARGB32_Premultiplied);
        outline.fill(Qt::transparent);
        {
          QPainter p(&outline);
          p.drawPicture(0, 0, pic);
        }
        // Ink (alpha) totals and centroids agree: the sprite's offset is quantised to
        // a quarter pixel, so centroids within 0.2 px and totals within 2 %.
        auto moments = [](const QImage& im) {
          double s = 0, sx = 0, sy = 0;
          for (int y = 0; y < im.height(); ++y)
            for (int x = 0; x < im.width(); ++x) {
              const double a = qAlpha(im.pixel(x, y));
              s += a;
              sx += a * x;
              sy += a * y;
            }
          return std::array<double, 3>{s, sx / s, sy / s};
        };
        const auto a = moments(sprite), b = moments(outline);
        QVERIFY(b[0] > 0);
        QVERIFY2(std::abs(a[0] - b[0]) < 0.02 * b[0], qPrintable(QStringLiteral("ink %1 vs %2").arg(a[0]).arg(b[0])));
        QVERIFY2(std::abs(a[1] - b[1]) < 0.2 && std::abs(a[2] - b[2]) < 0.2,
                 qPrintable(QStringLiteral("centroid (%1, %2) vs (%3, %4) at (%5, %6)")
                                .arg(a[1]).arg(a[2]).arg(b[1]).arg(b[2]).arg(at.x()).arg(at.y())));
      }
  }

  void boxRegionStatistics() {
    ViewState vs;
    CcdView view(&vs);
    view.resize(600, 600);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    // A model that makes chi exactly 2 where ivar > 0: model = data - 2 / sqrt(ivar).
    auto model = std::make_shared<Array2D<double>>(m_image->ny, m_image->nx, 0.0);
    for (std::size_t i = 0; i < model->size(); ++i) {
      const double iv = m_image->ivar.data[i];
      model->data[i] = iv > 0 ? m_image->pix.data[i] - 2.0 / std::sqrt(iv) : 0.0;
    }
    view.setInputs(m_image, m_psf);
    RegionStatsView stats;
    stats.setInputs(m_image, model, QStringLiteral("cpu"));
    connect(&view, &ImageCanvas::boxRegionChanged, &stats, &RegionStatsView::setRegion);
    vs.setView(QPointF(m_psf->x(5, 6100), m_psf->y(5, 6100)), 4.0);
    view.setTool(ImageCanvas::Tool::Box);
    QSignalSpy boxes(&view, &ImageCanvas::boxRegionChanged);
    const QPointF center = vs.center();
    const QPoint a = view.toWidget(center + QPointF(-10.3, -6.4)).toPoint();
    const QPoint b = view.toWidget(center + QPointF(9.6, 7.2)).toPoint();
    drag(&view, Qt::LeftButton, a, b);
    QCOMPARE(boxes.count(), 1);
    QCOMPARE(vs.center(), center); // the Box tool draws, it does not pan
    const QRect px = stats.pixels();
    QVERIFY(px.width() >= 19 && px.width() <= 21 && px.height() >= 13 && px.height() <= 15);
    QCOMPARE(px, pixelsIn(view.boxRegion(), m_image->nx, m_image->ny));

    // The data column against a brute-force count over the same pixels.
    std::vector<double> v;
    long masked = 0;
    for (int r = px.top(); r <= px.bottom(); ++r)
      for (int c = px.left(); c <= px.right(); ++c)
        if (m_image->ivar(r, c) > 0) v.push_back(m_image->pix(r, c));
        else ++masked;
    const RegionStats s = stats.stats(0);
    QCOMPARE(s.n, long(v.size()));
    QCOMPARE(s.masked, masked);
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
    double ss = 0;
    for (double x : v) ss += (x - mean) * (x - mean);
    std::sort(v.begin(), v.end());
    const double median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    QVERIFY(std::abs(s.mean - mean) < 1e-9 * std::max(1.0, std::abs(mean)));
    QCOMPARE(s.median, median);
    QVERIFY(std::abs(s.sigma - std::sqrt(ss / (v.size() - 1))) < 1e-9 * std::max(1.0, s.sigma));
    QCOMPARE(s.min, v.front());
    QCOMPARE(s.max, v.back());
    // Chi is 2 everywhere it is defined.
    const RegionStats chi = stats.stats(2);
    QCOMPARE(chi.n, long(v.size()));
    QVERIFY(std::abs(chi.mean - 2) < 1e-9 && std::abs(chi.median - 2) < 1e-9 && chi.sigma < 1e-9);
    // The table shows them.
    QCOMPARE(stats.table()->item(0, 0)->text(), QString::number(v.size()));
    QCOMPARE(stats.table()->item(4, 0)->text(), QString::number(v.front(), 'g', 6));
    QCOMPARE(stats.table()->item(2, 2)->text(), QStringLiteral("2"));
    QVERIFY(stats.summary().contains(QStringLiteral("%1 \u00d7 %2 px").arg(px.width()).arg(px.height())));
    // Without a model, the model and chi columns say so.
    stats.setInputs(m_image, nullptr, {});
    QCOMPARE(stats.stats(2).n, 0L);
    QCOMPARE(stats.table()->item(1, 2)->text(), QStringLiteral("\u2013"));
    // Pixel centres decide membership.
    QCOMPARE(pixelsIn(QRectF(QPointF(9.6, 19.4), QPointF(12.4, 22.6)), 100, 100), QRect(QPoint(10, 20), QPoint(12, 22)));
  }

  void crossDispersionCutCrossesTraces() {
    ViewState vs;
    CcdView view(&vs);
    view.resize(700, 500);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.setInputs(m_image, m_psf);
    CutView cut(&vs);
    cut.setTraces(&view.traces());
    cut.setInputs(m_image, nullptr, {});
    connect(&view, &ImageCanvas::cutChanged, &cut, &CutView::setCut);
    // Across fibers 3..9 (lit) at the row of 6150 A.
    const double row = m_psf->y(6, 6150);
    const double x0 = m_psf->x(3, 6150) - 3.3, x1 = m_psf->x(9, 6150) + 3.3;
    vs.setView(QPointF(0.5 * (x0 + x1), row), 6.0);
    view.setTool(ImageCanvas::Tool::Cut);
    drag(&view, Qt::LeftButton, view.toWidget(QPointF(x0, row)).toPoint(), view.toWidget(QPointF(x1, row)).toPoint());
    QVERIFY(!cut.cut().isNull());
    QVERIFY(std::abs(cut.cut().length() - (x1 - x0)) < 0.5); // a widget pixel is 1/6 CCD px
    // It crosses exactly fibers 3..9, in order, each where its trace is.
    const auto& cr = cut.crossings();
    QCOMPARE(cr.size(), 7);
    for (int i = 0; i < 7; ++i) {
      QCOMPARE(cr[i].second, 3 + i);
      const double expected = view.traces().xAtRow(3 + i, cut.cut().y1()) - cut.cut().x1();
      QVERIFY2(std::abs(cr[i].first - expected) < 0.3, qPrintable(QStringLiteral("%1 %2").arg(cr[i].first).arg(expected)));
      // The data peaks on each trace: larger there than halfway to the next one.
      const int at = int(std::lround(cr[i].first / CutView::kStep));
      const int gap = int(std::lround(0.5 * view.traces().fiberSpacing() / CutView::kStep));
      QVERIFY(cut.dataProfile()[at] > cut.dataProfile()[std::max(0, at - gap)]);
    }
    // Data sampled exactly at the start pixel's value along a row (bilinear).
    QVERIFY(std::abs(cut.dataProfile()[0] - sampleBilinear(m_image->pix, cut.cut().x1(), cut.cut().y1())) < 1e-12);
    QCOMPARE(cut.plot()->graphCount(), 1);
    // With a model, a second curve (here the model equals the data).
    auto model = std::make_shared<Array2D<double>>(m_image->pix);
    cut.setInputs(m_image, model, QStringLiteral("cpu"));
    QCOMPARE(cut.plot()->graphCount(), 2);
    QCOMPARE(cut.modelProfile(), cut.dataProfile());
    // Removing the cut empties the plot; model updates without a cut (every
    // extraction) leave it empty and cost no replot; a new cut brings both curves back.
    const QLineF line = cut.cut();
    cut.setCut({});
    QCOMPARE(cut.plot()->graphCount(), 0);
    QVERIFY(cut.distance().isEmpty());
    auto model2 = std::make_shared<Array2D<double>>(m_image->pix);
    for (double& v : model2->data) v *= 0.5;
    cut.setInputs(m_image, model2, QStringLiteral("cpu"));
    QCOMPARE(cut.plot()->graphCount(), 0);
    cut.setCut(line);
    QCOMPARE(cut.plot()->graphCount(), 2);
    QCOMPARE(cut.modelProfile().size(), cut.dataProfile().size());
    for (int i = 0; i < cut.dataProfile().size(); ++i)
      QVERIFY(std::abs(cut.modelProfile()[i] - 0.5 * cut.dataProfile()[i]) <= 1e-12 * std::abs(cut.dataProfile()[i]));
    // Bilinear interpolation is exact on pixel centres and linear between.
    Array2D<double> a(2, 2);
    a(0, 0) = 0;
    a(0, 1) = 4;
    a(1, 0) = 8;
    a(1, 1) = 12;
    QCOMPARE(sampleBilinear(a, 1, 1), 12.0);
    QCOMPARE(sampleBilinear(a, 0.5, 0.5), 6.0);
    QVERIFY(std::isnan(sampleBilinear(a, 1.5, 0)));
  }

  void sideBySideLocksPanZoomAndCrosshair() {
    ViewState vs;
    auto [model, chi] = modelAndChi();
    SideBySideView view(&vs);
    view.resize(1200, 500);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    ScaleSettings s;
    view.setInputs(m_image, model, chi, s);
    view.waitForUpdate();
    for (int i = 0; i < 3; ++i) {
      QVERIFY(!view.canvas(i)->picture().isNull());
      QVERIFY(view.canvas(i)->hasColorBar());
    }
    QCOMPARE(view.canvas(0)->caption(), QStringLiteral("data"));
    QCOMPARE(view.canvas(2)->caption(), QStringLiteral("\u03c7"));
    QVERIFY(view.canvas(0)->picture() != view.canvas(1)->picture());
    // Pan/zoom in one: all three follow (one ViewState).
    vs.setView(QPointF(m_psf->x(4, 6100), m_psf->y(4, 6100)), 5.0);
    QWheelEvent wheel(QPointF(100, 100), view.canvas(1)->mapToGlobal(QPointF(100, 100)), QPoint(), QPoint(0, 120),
                      Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(view.canvas(1), &wheel);
    QVERIFY(std::abs(vs.zoom() - 6.0) < 1e-9);
    for (int i = 0; i < 3; ++i) {
      ImageCanvas* c = view.canvas(i);
      QCOMPARE(c->ccdToWidget().m11(), 6.0);
      const QPointF mid = c->toCcd(QPointF(c->width() / 2.0, c->height() / 2.0));
      QVERIFY(std::abs(mid.x() - vs.center().x()) < 1e-9 && std::abs(mid.y() - vs.center().y()) < 1e-9);
    }
    // Hover over the chi panel: the crosshair sits on the same pixel in all three and
    // the line gives that pixel's three values.
    const QPointF p = view.canvas(2)->toWidget(QPointF(m_psf->x(4, 6100), m_psf->y(4, 6100)));
    QMouseEvent move(QEvent::MouseMove, QPointF(p.toPoint()), view.canvas(2)->mapToGlobal(QPointF(p.toPoint())),
                     Qt::NoButton, Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(view.canvas(2), &move);
    const QPointF ccd = view.canvas(2)->toCcd(p.toPoint());
    const int c = int(std::lround(ccd.x())), r = int(std::lround(ccd.y()));
    for (int i = 0; i < 3; ++i) {
      QVERIFY(view.canvas(i)->hasCrosshair());
      QCOMPARE(view.canvas(i)->crosshair(), QPointF(c, r));
    }
    const QString line = view.readout();
    QVERIFY2(line.contains(QStringLiteral("data %1").arg(m_image->pix(r, c), 0, 'g', 6)), qPrintable(line));
    QVERIFY2(line.contains(QStringLiteral("model %1").arg((*model)(r, c), 0, 'g', 6)), qPrintable(line));
    QVERIFY2(line.contains(QStringLiteral("\u03c7 %1").arg((*chi)(r, c), 0, 'f', 3)), qPrintable(line));
    // The crosshair is drawn: the grabbed panel changes where it passes.
    const QImage withCross = view.canvas(0)->grab().toImage();
    view.canvas(0)->clearCrosshair();
    QVERIFY(view.canvas(0)->grab().toImage() != withCross);
  }

  // Issue 14: the model is edited in place by later runs while a render may be in
  // flight on a worker. The render and the values line read the view's snapshot of
  // the model as it was given, never the array as it is being changed.
  void sideBySideRendersItsSnapshotWhileTheModelChanges() {
    ViewState vs;
    auto [model, chi] = modelAndChi();
    const auto pristine = std::make_shared<const Array2D<double>>(*model); // what was given
    ScaleSettings s;
    // The pictures of the model as given, from a view whose model nobody changes.
    SideBySideView reference(&vs);
    reference.resize(900, 400);
    reference.show();
    QVERIFY(QTest::qWaitForWindowExposed(&reference));
    reference.setInputs(m_image, pristine, chi, s, 1);
    reference.waitForUpdate();
    const QImage want = reference.canvas(1)->picture();
    QVERIFY(!want.isNull());

    SideBySideView view(&vs);
    view.resize(900, 400);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    // Every worker of the background pool is held, so the render is surely in flight
    // (queued) while the model changes; the same holds whenever the worker is slower
    // than the next run.
    QThreadPool* pool = backgroundPool();
    QSemaphore release;
    QSemaphore holding;
    const int workers = pool->maxThreadCount();
    for (int k = 0; k < workers; ++k)
      pool->start([&] {
        holding.release();
        release.acquire();
      });
    QVERIFY(holding.tryAcquire(workers, 10000));
    view.setInputs(m_image, model, chi, s, 1);
    QVERIFY(view.isUpdating());
    // The next run rewrites the caller's model in place (a different model everywhere).
    for (std::size_t i = 0; i < model->size(); ++i) model->data[i] = 2.5 * m_image->pix.data[i] + 100.0;
    release.release(workers);
    view.waitForUpdate();
    pool->waitForDone();
    QCOMPARE(view.canvas(1)->picture(), want); // the snapshot's picture, pixel for pixel
    QVERIFY(view.modelSnapshot() && view.modelSnapshot() != model);
    const int c = int(std::lround(m_psf->x(4, 6100))), r = int(std::lround(m_psf->y(4, 6100)));
    view.showPixel(QPointF(c, r));
    QVERIFY2(view.readout().contains(QStringLiteral("model %1").arg((*pristine)(r, c), 0, 'g', 6)),
             qPrintable(view.readout()));
    // The same array at a new revision (the run finished): a new snapshot, a new picture.
    view.setInputs(m_image, model, chi, s, 2);
    view.waitForUpdate();
    QCOMPARE((*view.modelSnapshot())(r, c), (*model)(r, c));
    QVERIFY(view.canvas(1)->picture() != want);
  }

  void residualBlinkSaysWhichImageIsShown() {
    ViewState vs;
    ResidualView view(&vs);
    view.resize(800, 500);
    view.show();
    auto img = std::make_shared<Image>();
    img->ny = 120;
    img->nx = 100;
    img->pix = Array2D<double>(120, 100, 50.0);
    img->ivar = Array2D<double>(120, 100, 0.25);
    auto model = std::make_shared<Array2D<double>>(120, 100, 49.0);
    view.setInputs(img, model, QStringLiteral("cpu"));
    QSignalSpy updated(&view, &ResidualView::updated);
    QVERIFY(updated.wait(30000));
    ImageCanvas* c = view.canvas();
    QCOMPARE(c->caption(), QStringLiteral("\u03c7"));
    QCOMPARE(c->colorBarRange().lo, -5.0); // chi's bar: +-5 sigma
    QVERIFY(c->colorBarLabels().last().contains(QStringLiteral("\u03c3")));
    view.setBlink(true);
    view.blinkStep(); // now the partner (data)
    QVERIFY(c->showingAlternate());
    QCOMPARE(c->caption(), QStringLiteral("data"));
    QCOMPARE(view.shownName(), QStringLiteral("data"));
    QVERIFY(c->colorBarLabels().last().contains(QStringLiteral("e\u207b"))); // data's bar
    const QImage shot = c->grab().toImage();
    view.blinkStep();
    QCOMPARE(c->caption(), QStringLiteral("\u03c7"));
    QVERIFY(c->grab().toImage() != shot);
    view.setBlink(false);
  }
};

QTEST_MAIN(GuiImageToolsTest)
#include "gui_image_tools_test.moc"
