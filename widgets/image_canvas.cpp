#include "image_canvas.h"

#include <QCache>
#include <QElapsedTimer>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPaintEngine>
#include <QPainter>
#include <QPainterPath>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <memory>

namespace spex {

namespace {
constexpr double kKeyZoom = 1.25;
constexpr int kClickSlop = 4; // screen pixels a press may move and still be a click

constexpr int kPannerBox = 160;    // the overview panner fits in this square, px
constexpr int kBarWidth = 220;     // colour bar gradient, px
constexpr int kAxisBand = 18;      // room the pixel axes' labels take at the bottom

// 1, 2, 5 x 10^k: the smallest at least `atLeast`.
double niceTickStep(double atLeast) {
  const double p = std::pow(10.0, std::floor(std::log10(std::max(atLeast, 1e-12))));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= atLeast) return m * p;
  return 10 * p;
}

QString tickText(double v, double step) {
  if (std::abs(v) < 1e-9 * std::max(1.0, step)) v = 0;
  const double a = std::max(std::abs(v), step);
  if (a >= 1e5 || a < 1e-3) return QString::number(v, 'g', 3);
  const int decimals = step >= 1 ? 0 : int(std::ceil(-std::log10(step) - 1e-9));
  return QString::number(v, 'f', std::clamp(decimals, 0, 4));
}

QTransform ccdToWidgetFor(QSizeF widget, QPointF c, double z) {
  // wx = W/2 + (x - cx) z ; wy = H/2 - (y - cy) z  (rows grow upwards on screen)
  return QTransform(z, 0, 0, -z, widget.width() / 2 - c.x() * z, widget.height() / 2 + c.y() * z);
}
} // namespace

namespace {
// dst pixels [x0, x1) x [y0, y1) as the 2x2 averages of src (the next level down).
void reduceInto(const QImage& src, QImage& dst, int x0, int x1, int y0, int y1) {
  // Averaging 2x2 blocks (instead of letting the painter skip pixels) keeps thin
  // traces and single hot pixels visible when zoomed out: aliasing would drop them.
  const bool alpha = src.hasAlphaChannel();
  for (int y = y0; y < y1; ++y) {
    const QRgb* a = reinterpret_cast<const QRgb*>(src.constScanLine(2 * y));
    const QRgb* b = reinterpret_cast<const QRgb*>(src.constScanLine(std::min(2 * y + 1, src.height() - 1)));
    QRgb* d = reinterpret_cast<QRgb*>(dst.scanLine(y));
    for (int x = x0; x < x1; ++x) {
      const int xa = 2 * x, xb = std::min(2 * x + 1, src.width() - 1);
      const QRgb q[4] = {a[xa], a[xb], b[xa], b[xb]};
      int r = 0, g = 0, bl = 0, al = 0;
      for (QRgb c : q) {
        r += qRed(c);
        g += qGreen(c);
        bl += qBlue(c);
        al += qAlpha(c);
      }
      d[x] = alpha ? qRgba(r / 4, g / 4, bl / 4, al / 4) : qRgb(r / 4, g / 4, bl / 4);
    }
  }
}
} // namespace

void ImageCanvas::Pyramid::build(const QImage& base) {
  levels.clear();
  if (base.isNull()) return;
  levels.push_back(base);
  while (levels.last().width() > 256 || levels.last().height() > 256) {
    const QImage& src = levels.last();
    const int w = (src.width() + 1) / 2, h = (src.height() + 1) / 2;
    QImage dst(w, h, src.format());
    reduceInto(src, dst, 0, w, 0, h);
    levels.push_back(dst);
  }
}

void ImageCanvas::Pyramid::update(const QRect& rect) {
  if (levels.isEmpty()) return;
  int x0 = rect.left(), x1 = rect.right() + 1, y0 = rect.top(), y1 = rect.bottom() + 1;
  for (int k = 1; k < levels.size(); ++k) {
    x0 = std::max(0, x0 / 2);
    y0 = std::max(0, y0 / 2);
    x1 = std::min(levels[k].width(), (x1 + 1) / 2);
    y1 = std::min(levels[k].height(), (y1 + 1) / 2);
    if (x1 <= x0 || y1 <= y0) return;
    reduceInto(levels[k - 1], levels[k], x0, x1, y0, y1);
  }
}

void ImageCanvas::updatePicture(const QRect& rect, const std::function<void(QImage&)>& paint, bool alternate) {
  Pyramid& p = alternate ? m_alternate : m_picture;
  if (p.levels.isEmpty() || rect.isEmpty()) return;
  paint(p.levels[0]);
  p.update(rect);
  update();
}

ImageCanvas::ImageCanvas(ViewState* state, QWidget* parent) : QWidget(parent), m_state(state) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setMinimumSize(200, 150);
  connect(m_state, &ViewState::viewChanged, this, [this] {
    if (!m_inFit) m_autoFit = false;
    update();
  });
}

void ImageCanvas::setPicture(const QImage& rgb) {
  Pyramid p;
  p.build(rgb);
  setPicture(std::move(p));
}

void ImageCanvas::setPicture(Pyramid pyramid) {
  m_picture = std::move(pyramid);
  const QImage& rgb = picture();
  // Fit only when the shared extent changes: a second view getting its first
  // picture must not reset the zoom the user chose in the first.
  const bool newExtent = !rgb.isNull() && rgb.size() != m_state->imageSize();
  if (!rgb.isNull()) m_state->setImageSize(rgb.size());
  if (newExtent && m_leadsFit) fit();
  update();
}

void ImageCanvas::setAlternatePicture(const QImage& rgb) {
  m_alternate.build(rgb);
  update();
}

void ImageCanvas::setAlternatePicture(Pyramid pyramid) {
  m_alternate = std::move(pyramid);
  update();
}

void ImageCanvas::setShowAlternate(bool on) {
  m_showAlternate = on;
  update();
}

void ImageCanvas::setLayer(const QImage& argb) {
  m_layer.build(argb);
  update();
}

void ImageCanvas::setLayerVisible(bool on) {
  m_layerVisible = on;
  update();
}

int ImageCanvas::imageRows() const {
  const QSize s = m_state->imageSize();
  return s.isValid() ? s.height() : picture().height();
}

QTransform ImageCanvas::ccdToWidget() const {
  return ccdToWidgetFor(size(), m_state->center(), m_state->zoom());
}

QPointF ImageCanvas::toWidget(QPointF ccd) const { return ccdToWidget().map(ccd); }

QPointF ImageCanvas::toCcd(QPointF widget) const { return ccdToWidget().inverted().map(widget); }

QRectF ImageCanvas::visibleCcdRect() const {
  return ccdToWidget().inverted().mapRect(QRectF(rect()));
}

void ImageCanvas::fit() {
  if (!m_leadsFit) return;
  m_autoFit = true;
  if (width() <= 0 || height() <= 0 || !isVisible()) {
    m_fitPending = true;
    return;
  }
  m_fitPending = false;
  m_inFit = true;
  m_state->fitTo(size());
  m_inFit = false;
}

void ImageCanvas::zoomToRect(const QRectF& ccd) {
  if (ccd.isEmpty() || width() <= 0 || height() <= 0) return;
  const double z = std::min(width() / ccd.width(), height() / ccd.height());
  m_state->setView(ccd.center(), z);
}

void ImageCanvas::zoomOneToOne() { m_state->setZoom(1.0); }
void ImageCanvas::zoomIn() { m_state->zoomAround(kKeyZoom, m_state->center()); }
void ImageCanvas::zoomOut() { m_state->zoomAround(1.0 / kKeyZoom, m_state->center()); }

void ImageCanvas::drawPyramid(QPainter& p, const Pyramid& pyr) const {
  if (pyr.levels.isEmpty()) return;
  const double z = m_state->zoom();
  int level = 0;
  while (level + 1 < pyr.levels.size() && z * double(1 << (level + 1)) <= 1.0 + 1e-9) ++level;
  const QImage& img = pyr.levels[level];
  const double f = double(1 << level);
  const int ny = pyr.levels[0].height();
  const QPointF c = m_state->center();
  const double W = width(), H = height();
  // Level-0 image point (u, v) <-> CCD (u - 0.5, ny - v - 0.5); see renderImage.
  auto uAt = [&](double wx) { return (wx - W / 2) / z + 0.5 + c.x(); };
  auto vAt = [&](double wy) { return (wy - H / 2) / z - 0.5 - c.y() + ny; };
  const int i0 = std::max(0, int(std::floor(uAt(0) / f)));
  const int i1 = std::min(img.width(), int(std::ceil(uAt(W) / f)));
  const int j0 = std::max(0, int(std::floor(vAt(0) / f)));
  const int j1 = std::min(img.height(), int(std::ceil(vAt(H) / f)));
  if (i1 <= i0 || j1 <= j0) return;
  auto wxAt = [&](double u) { return W / 2 + (u - 0.5 - c.x()) * z; };
  auto wyAt = [&](double v) { return H / 2 + (v + 0.5 + c.y() - ny) * z; };
  const QRectF target(QPointF(wxAt(i0 * f), wyAt(j0 * f)), QPointF(wxAt(i1 * f), wyAt(j1 * f)));
  // Below 1:1 the level is already averaged, so bilinear between its pixels is
  // enough; above, show the pixels as blocks, which is what people inspect.
  p.setRenderHint(QPainter::SmoothPixmapTransform, z < 1.0);
  p.drawImage(target, img, QRectF(i0, j0, i1 - i0, j1 - j0));
}

void ImageCanvas::markPaintSection(const QString& section) {
  const qint64 now = m_sectionTimer.nsecsElapsed();
  const double ms = (now - m_sectionMark) * 1e-6;
  m_sectionMark = now;
  for (auto& s : m_sections)
    if (s.first == section) {
      s.second += ms;
      return;
    }
  m_sections.push_back({section, ms});
}

void ImageCanvas::paintEvent(QPaintEvent*) {
  m_sections.clear();
  m_sectionTimer.start();
  m_sectionMark = 0;
  QPainter p(this);
  p.fillRect(rect(), QColor(24, 24, 28));
  drawPyramid(p, m_showAlternate && !m_alternate.levels.isEmpty() ? m_alternate : m_picture);
  markPaintSection(QStringLiteral("picture"));
  if (m_layerVisible) {
    drawPyramid(p, m_layer);
    markPaintSection(QStringLiteral("layer"));
  }
  p.setRenderHint(QPainter::SmoothPixmapTransform, false);
  paintOverlays(p);
  markPaintSection(QStringLiteral("overlays"));
  if (m_drag == Drag::Band && m_moved) {
    p.setPen(QPen(QColor(255, 200, 0), 1, Qt::DashLine));
    p.setBrush(QColor(255, 200, 0, 40));
    p.drawRect(QRect(m_pressPos, m_lastPos).normalized());
  }
  drawDecorations(p);
  p.end(); // what the painter still holds is part of the paint
  markPaintSection(QStringLiteral("decorations"));
  m_lastPaintMs = m_sectionTimer.nsecsElapsed() * 1e-6;
}

void ImageCanvas::wheelEvent(QWheelEvent* e) {
  const double steps = e->angleDelta().y() / 120.0;
  if (steps == 0) return;
  // 1.2 per notch; fractional notches from touchpads give smooth zoom.
  m_state->zoomAround(std::pow(1.2, steps), toCcd(e->position()));
  e->accept();
}

void ImageCanvas::mousePressEvent(QMouseEvent* e) {
  m_pressPos = m_lastPos = e->pos();
  m_pressCenter = m_state->center();
  m_moved = false;
  if (e->button() == Qt::RightButton) {
    m_drag = Drag::Contrast;
    m_pressContrast = m_contrast;
    m_pressBias = m_bias;
    return;
  }
  if (e->button() != Qt::LeftButton) return;
  setFocus();
  if (pannerShown() && pannerRect().contains(e->pos())) {
    m_drag = Drag::Panner;
    m_state->setCenter(pannerToCcd(e->position()));
    return;
  }
  if (e->modifiers() & Qt::ShiftModifier) m_drag = Drag::Band;
  else if (m_tool == Tool::Box) m_drag = Drag::Box;
  else if (m_tool == Tool::Cut) m_drag = Drag::Cut;
  else m_drag = Drag::Pan;
}

void ImageCanvas::mouseMoveEvent(QMouseEvent* e) {
  m_lastPos = e->pos();
  if (m_drag != Drag::None && (e->pos() - m_pressPos).manhattanLength() > kClickSlop) m_moved = true;
  if (m_drag == Drag::Pan && m_moved) {
    const QPointF d = e->pos() - m_pressPos;
    const double z = m_state->zoom();
    m_state->setCenter(m_pressCenter - QPointF(d.x() / z, -d.y() / z));
  } else if (m_drag == Drag::Panner) {
    m_state->setCenter(pannerToCcd(e->position()));
  } else if (m_drag == Drag::Contrast && m_moved) {
    // DS9: across the width the bias runs over its whole range; up doubles the
    // contrast every quarter of the height, down halves it.
    const QPointF d = e->pos() - m_pressPos;
    const double bias = std::clamp(m_pressBias + d.x() / std::max(1, width()), 0.0, 1.0);
    const double contrast = std::clamp(m_pressContrast * std::pow(2.0, -d.y() / (0.25 * std::max(1, height()))), 0.05, 20.0);
    setContrastBias(contrast, bias);
  } else if (m_drag == Drag::Band || m_drag == Drag::Box || m_drag == Drag::Cut) {
    update();
  }
  emit hovered(toCcd(e->position()));
}

void ImageCanvas::mouseReleaseEvent(QMouseEvent* e) {
  if (m_drag == Drag::None) return;
  if ((m_drag == Drag::Contrast) != (e->button() == Qt::RightButton)) return;
  const Drag drag = m_drag;
  m_drag = Drag::None;
  if (drag == Drag::Contrast || drag == Drag::Panner) return;
  if (!m_moved) {
    emit clicked(toCcd(e->position()), e->modifiers());
  } else if (drag == Drag::Band) {
    const QRectF band = QRectF(toCcd(m_pressPos), toCcd(e->position())).normalized();
    update();
    emit rubberBandSelected(band, e->modifiers());
  } else if (drag == Drag::Box) {
    setBoxRegion(QRectF(toCcd(m_pressPos), toCcd(e->position())).normalized());
  } else if (drag == Drag::Cut) {
    setCutLine(QLineF(toCcd(m_pressPos), toCcd(e->position())));
  }
}

void ImageCanvas::keyPressEvent(QKeyEvent* e) {
  const double z = m_state->zoom();
  const QPointF step(0.1 * width() / z, 0.1 * height() / z);
  switch (e->key()) {
  case Qt::Key_Plus:
  case Qt::Key_Equal: zoomIn(); break;
  case Qt::Key_Minus: zoomOut(); break;
  case Qt::Key_F:
  case Qt::Key_0: fit(); break;
  case Qt::Key_1: zoomOneToOne(); break;
  case Qt::Key_Left: m_state->setCenter(m_state->center() - QPointF(step.x(), 0)); break;
  case Qt::Key_Right: m_state->setCenter(m_state->center() + QPointF(step.x(), 0)); break;
  case Qt::Key_Up: m_state->setCenter(m_state->center() + QPointF(0, step.y())); break;
  case Qt::Key_Down: m_state->setCenter(m_state->center() - QPointF(0, step.y())); break;
  default: QWidget::keyPressEvent(e); return;
  }
  e->accept();
}

void ImageCanvas::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  if (m_leadsFit && (m_fitPending || m_autoFit)) fit();
}

void ImageCanvas::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (m_fitPending) fit();
}

void ImageCanvas::leaveEvent(QEvent* e) {
  QWidget::leaveEvent(e);
  emit hoverLeft();
}

// --- display aids ----------------------------------------------------------------

void ImageCanvas::setColorBar(const QVector<QRgb>& table, ScaleRange range, Stretch stretch, const QString& unit) {
  m_barTable = table;
  m_barRange = range;
  m_barStretch = stretch;
  m_barUnit = unit;
  update();
}

void ImageCanvas::clearColorBar() {
  m_barTable.clear();
  update();
}

void ImageCanvas::setColorBarVisible(bool on) {
  m_barVisible = on;
  update();
}

QRect ImageCanvas::colorBarRect() const {
  if (!m_barVisible || !hasColorBar()) return {};
  const int w = std::min(kBarWidth, width() / 2);
  const int bottom = height() - 10 - (m_axes ? kAxisBand : 0);
  // Panel: unit line, bar, tick labels; the bar is its middle row.
  return QRect(width() - 18 - w, bottom - 46 + 18, w, 12);
}

QStringList ImageCanvas::colorBarLabels() const {
  QStringList out;
  if (!hasColorBar()) return out;
  const double lo = m_barRange.lo, hi = m_barRange.hi;
  const double step = niceTickStep((hi - lo) / 4.0);
  out << tickText(lo, step / 10);
  for (double v = std::ceil(lo / step) * step; v < hi; v += step)
    if (v - lo > 0.2 * (hi - lo) && hi - v > 0.2 * (hi - lo)) out << tickText(v, step);
  out << tickText(hi, step / 10) << m_barUnit;
  return out;
}

void ImageCanvas::setPixelAxes(bool on) {
  m_axes = on;
  update();
}

int ImageCanvas::axisBand() const { return m_axes ? kAxisBand + 4 : 0; }

QVector<double> ImageCanvas::axisTicks(Qt::Orientation o) const {
  QVector<double> out;
  const QRectF vis = visibleCcdRect();
  const QSize ext = imageExtent();
  const bool h = o == Qt::Horizontal;
  const double span = h ? vis.width() : vis.height();
  const int pixels = h ? width() : height();
  if (span <= 0 || pixels <= 0) return out;
  // About one labelled tick per 90 screen pixels, on whole CCD pixels.
  const double step = std::max(1.0, niceTickStep(span * 90.0 / pixels));
  const double lo = std::max(h ? vis.left() : vis.top(), 0.0);
  const double hi = std::min(h ? vis.right() : vis.bottom(), ext.isValid() ? double(h ? ext.width() - 1 : ext.height() - 1) : 1e9);
  for (double v = std::ceil(lo / step) * step; v <= hi; v += step) out << v;
  return out;
}

void ImageCanvas::setPannerEnabled(bool on) {
  m_pannerEnabled = on;
  update();
}

QSize ImageCanvas::imageExtent() const {
  const QSize s = m_state->imageSize();
  return s.isValid() ? s : picture().size();
}

int ImageCanvas::pannerBox() const {
  // At most a quarter of the width and a third of the height: a small canvas keeps
  // most of its picture.
  return std::min({kPannerBox, width() / 4, height() / 3});
}

bool ImageCanvas::pannerShown() const {
  if (!m_pannerEnabled || m_picture.levels.isEmpty()) return false;
  const QSize ext = imageExtent();
  if (!ext.isValid() || pannerBox() < 60) return false;
  // Zoomed in: some of the image is outside the view.
  const QRectF vis = visibleCcdRect();
  const QRectF all(-0.5, -0.5, ext.width(), ext.height());
  return !vis.adjusted(-1, -1, 1, 1).contains(all);
}

QRect ImageCanvas::pannerRect() const {
  if (!pannerShown()) return {};
  const QSize ext = imageExtent();
  const double s = double(pannerBox()) / std::max(ext.width(), ext.height());
  const int w = std::max(8, int(std::lround(ext.width() * s))), h = std::max(8, int(std::lround(ext.height() * s)));
  return QRect(width() - 10 - w, 10, w, h);
}

QPointF ImageCanvas::pannerToCcd(QPointF w) const {
  const QRect r = pannerRect();
  const QSize ext = imageExtent();
  if (r.isEmpty()) return m_state->center();
  const double u = std::clamp((w.x() - r.left()) / r.width(), 0.0, 1.0);
  const double v = std::clamp((w.y() - r.top()) / r.height(), 0.0, 1.0);
  return QPointF(u * ext.width() - 0.5, (1.0 - v) * ext.height() - 0.5);
}

QPointF ImageCanvas::ccdToPanner(QPointF c) const {
  const QRect r = pannerRect();
  const QSize ext = imageExtent();
  if (r.isEmpty()) return {};
  return QPointF(r.left() + (c.x() + 0.5) / ext.width() * r.width(),
                 r.top() + (1.0 - (c.y() + 0.5) / ext.height()) * r.height());
}

void ImageCanvas::setCaption(const QString& text) {
  m_caption = text;
  update();
}

void ImageCanvas::setCrosshair(QPointF ccd) {
  m_crossOn = true;
  m_cross = ccd;
  update();
}

void ImageCanvas::clearCrosshair() {
  if (!m_crossOn) return;
  m_crossOn = false;
  update();
}

void ImageCanvas::setContrastBias(double contrast, double bias) {
  if (contrast == m_contrast && bias == m_bias) return;
  m_contrast = contrast;
  m_bias = bias;
  emit contrastBiasChanged(contrast, bias);
}

void ImageCanvas::setTool(Tool t) {
  m_tool = t;
  setCursor(t == Tool::Navigate ? Qt::ArrowCursor : Qt::CrossCursor);
}

void ImageCanvas::setBoxRegion(const QRectF& ccd) {
  m_box = ccd;
  update();
  emit boxRegionChanged(ccd);
}

void ImageCanvas::setCutLine(const QLineF& ccd) {
  m_cut = ccd;
  update();
  emit cutChanged(ccd);
}

void ImageCanvas::clearRegions() {
  m_box = QRectF();
  m_cut = QLineF();
  update();
}

namespace {
// The halo label drawn at `baseline` into p (glyph outlines stroked dark, then filled).
void paintHaloPath(QPainter& p, const QPointF& baseline, const QFont& font, const QString& text, const QColor& fill) {
  QPainterPath path;
  path.addText(baseline, font, text);
  p.save();
  p.setRenderHint(QPainter::Antialiasing, true);
  p.strokePath(path, QPen(QColor(0, 0, 0, 220), 3.0, Qt::SolidLine, Qt::RoundCap, Qt::RoundJoin));
  p.fillPath(path, fill);
  p.restore();
}

// Rendered halo labels, per text, font, colour and quarter-pixel offset: stroking the
// glyph outlines is most of a repaint's cost when dozens of labels (fiber numbers,
// axis ticks, wavelengths) are on screen, and the same labels come back every paint.
struct HaloSprite {
  QImage image;
  QPoint origin; // image's top-left relative to the rounded-down baseline
};
QCache<QString, HaloSprite>& haloCache() {
  static QCache<QString, HaloSprite> cache(4000); // cost: one per label
  return cache;
}
} // namespace

void ImageCanvas::drawHaloText(QPainter& p, const QPointF& baseline, const QString& text, const QColor& fill) {
  // A dark outline under the glyphs: light text stays readable on white, grey,
  // viridis yellow or the diverging map's pale middle alike.
  const QTransform& t = p.worldTransform();
  const QPaintEngine* engine = p.paintEngine();
  // Sprites only on a raster device at scale 1 (screen, images); vector output (PDF,
  // SVG) and scaled painters get the outlines themselves.
  if (!engine || engine->type() != QPaintEngine::Raster || t.type() > QTransform::TxTranslate ||
      p.device()->devicePixelRatio() != 1.0) {
    paintHaloPath(p, baseline, p.font(), text, fill);
    return;
  }
  const QPointF at = t.map(baseline);
  const double fx = std::floor(at.x()), fy = std::floor(at.y());
  const int qx = int((at.x() - fx) * 4.0), qy = int((at.y() - fy) * 4.0); // quarter pixels
  const QFont font = p.font();
  const QString key = text + QChar(0) + font.key() + QChar(0) + QString::number(fill.rgba(), 16) + QChar(0) +
                      QString::number(qx * 4 + qy);
  HaloSprite* sprite = haloCache().object(key);
  if (!sprite) {
    QPainterPath path;
    const QPointF sub(qx / 4.0, qy / 4.0);
    path.addText(sub, font, text);
    const QRect box = path.boundingRect().adjusted(-3, -3, 3, 3).toAlignedRect(); // room for the 3 px halo
    auto s = std::make_unique<HaloSprite>();
    s->origin = box.topLeft();
    s->image = QImage(box.size().expandedTo(QSize(1, 1)), QImage::Format_ARGB32_Premultiplied);
    s->image.fill(Qt::transparent);
    QPainter ip(&s->image);
    paintHaloPath(ip, sub - QPointF(box.topLeft()), font, text, fill);
    ip.end();
    sprite = s.get();
    haloCache().insert(key, s.release());
  }
  p.save();
  p.resetTransform();
  p.drawImage(QPoint(int(fx), int(fy)) + sprite->origin, sprite->image);
  p.restore();
}

void ImageCanvas::drawDecorations(QPainter& p) {
  p.save();
  p.resetTransform();
  QFont f = p.font();
  f.setPointSizeF(9);
  p.setFont(f);
  drawRegions(p);
  if (m_crossOn) {
    const QPointF w = toWidget(m_cross);
    for (const auto& [pen, alpha] : {std::pair{3.0, 160}, std::pair{1.0, 255}}) {
      QPen q(alpha == 255 ? QColor(255, 255, 255) : QColor(0, 0, 0, alpha), pen);
      p.setPen(q);
      p.drawLine(QPointF(w.x(), 0), QPointF(w.x(), height()));
      p.drawLine(QPointF(0, w.y()), QPointF(width(), w.y()));
    }
  }
  if (m_axes) drawAxes(p);
  if (m_barVisible && hasColorBar()) drawColorBar(p);
  if (pannerShown()) drawPanner(p);
  if (!m_caption.isEmpty()) {
    QFont b = f;
    b.setPointSizeF(11);
    b.setBold(true);
    p.setFont(b);
    drawHaloText(p, QPointF(10, 10 + p.fontMetrics().ascent()), m_caption, QColor(255, 255, 255));
    p.setFont(f);
  }
  p.restore();
}

void ImageCanvas::drawRegions(QPainter& p) const {
  auto halo = [&p](auto drawFn) {
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(QColor(0, 0, 0, 200), 3.5));
    drawFn();
    p.setPen(QPen(QColor(120, 255, 120), 1.5));
    drawFn();
  };
  p.setRenderHint(QPainter::Antialiasing, true);
  QRectF box = m_box.isEmpty() ? QRectF() : QRectF(toWidget(m_box.topLeft()), toWidget(m_box.bottomRight())).normalized();
  QLineF cut = m_cut.isNull() ? QLineF() : QLineF(toWidget(m_cut.p1()), toWidget(m_cut.p2()));
  if (m_drag == Drag::Box && m_moved) box = QRectF(m_pressPos, m_lastPos).normalized();
  if (m_drag == Drag::Cut && m_moved) cut = QLineF(m_pressPos, m_lastPos);
  if (!box.isEmpty()) {
    halo([&] { p.drawRect(box); });
    drawHaloText(p, box.topLeft() + QPointF(3, -4), tr("box"), QColor(120, 255, 120));
  }
  if (!cut.isNull()) {
    halo([&] {
      p.drawLine(cut);
      p.drawEllipse(cut.p1(), 4, 4); // the start: distance 0 of the cut plot
    });
    drawHaloText(p, cut.p2() + QPointF(5, -5), tr("cut"), QColor(120, 255, 120));
  }
  p.setRenderHint(QPainter::Antialiasing, false);
}

void ImageCanvas::drawAxes(QPainter& p) const {
  const QColor text(235, 235, 235);
  const QFontMetrics fm = p.fontMetrics();
  const QRectF vis = visibleCcdRect();
  const double stepX = niceTickStep(vis.width() * 90.0 / std::max(1, width()));
  const double stepY = niceTickStep(vis.height() * 90.0 / std::max(1, height()));
  // The bottom-left corner holds the axes' name; ticks keep out of it.
  const QString name = QStringLiteral("x, y [px]");
  const int cornerW = fm.horizontalAdvance(name) + 14, cornerH = fm.height() + 10;
  auto tick = [&](QPointF a, QPointF b) {
    p.setPen(QPen(QColor(0, 0, 0, 200), 3));
    p.drawLine(a, b);
    p.setPen(QPen(text, 1));
    p.drawLine(a, b);
  };
  for (double x : axisTicks(Qt::Horizontal)) {
    const double wx = toWidget(QPointF(x, 0)).x();
    tick(QPointF(wx, height()), QPointF(wx, height() - 7));
    const QString t = tickText(x, std::max(1.0, stepX));
    const double left = wx - fm.horizontalAdvance(t) / 2.0;
    if (left < cornerW || left + fm.horizontalAdvance(t) > width() - 2) continue;
    drawHaloText(p, QPointF(left, height() - 9), t, text);
  }
  for (double y : axisTicks(Qt::Vertical)) {
    const double wy = toWidget(QPointF(0, y)).y();
    tick(QPointF(0, wy), QPointF(7, wy));
    if (wy > height() - cornerH - fm.height() || wy < fm.ascent()) continue;
    drawHaloText(p, QPointF(10, wy + fm.ascent() / 2.0 - 1), tickText(y, std::max(1.0, stepY)), text);
  }
  drawHaloText(p, QPointF(6, height() - 9), name, text);
}

void ImageCanvas::drawColorBar(QPainter& p) const {
  const QRect bar = colorBarRect();
  if (bar.isEmpty()) return;
  const QRect panel = bar.adjusted(-8, -18, 8, 16);
  p.setPen(Qt::NoPen);
  p.setBrush(QColor(0, 0, 0, 165));
  p.drawRoundedRect(panel, 4, 4);
  // The gradient is linear in value, so the stretch shows as the colours' spacing.
  QImage grad(256, 1, QImage::Format_RGB32);
  for (int i = 0; i < 256; ++i)
    grad.setPixel(i, 0, m_barTable[std::clamp(int(stretchValue(m_barStretch, i / 255.0) * 255.0 + 0.5), 0, 255)]);
  p.drawImage(bar, grad);
  p.setPen(QPen(QColor(230, 230, 230), 1));
  p.setBrush(Qt::NoBrush);
  p.drawRect(bar.adjusted(0, 0, -1, -1));
  const QFontMetrics fm = p.fontMetrics();
  p.setPen(QColor(245, 245, 245));
  const double lo = m_barRange.lo, hi = m_barRange.hi;
  const QStringList labels = colorBarLabels();
  if (labels.size() < 3) return;
  auto xOf = [&](double v) { return bar.left() + (v - lo) / (hi - lo) * (bar.width() - 1); };
  const int base = bar.bottom() + 2 + fm.ascent();
  p.drawText(QPointF(bar.left(), base), labels.first());
  p.drawText(QPointF(bar.right() + 1 - fm.horizontalAdvance(labels[labels.size() - 2]), base), labels[labels.size() - 2]);
  for (int i = 1; i + 2 < labels.size(); ++i) {
    const double v = labels[i].toDouble();
    const double x = xOf(v);
    p.drawLine(QPointF(x, bar.bottom() - 3), QPointF(x, bar.bottom()));
    p.drawText(QPointF(x - fm.horizontalAdvance(labels[i]) / 2.0, base), labels[i]);
  }
  p.drawText(QPointF(bar.left(), bar.top() - 4), labels.last());
}

void ImageCanvas::drawPanner(QPainter& p) const {
  const QRect r = pannerRect();
  if (r.isEmpty()) return;
  const QImage& thumb = m_picture.levels.last();
  p.setRenderHint(QPainter::SmoothPixmapTransform, true);
  p.fillRect(r.adjusted(-2, -2, 2, 2), QColor(0, 0, 0, 200));
  p.drawImage(r, thumb);
  p.setRenderHint(QPainter::SmoothPixmapTransform, false);
  p.setPen(QPen(QColor(200, 200, 200), 1));
  p.setBrush(Qt::NoBrush);
  p.drawRect(r.adjusted(-1, -1, 0, 0));
  const QRectF vis = visibleCcdRect();
  QRectF v = QRectF(ccdToPanner(vis.topLeft()), ccdToPanner(vis.bottomRight())).normalized().intersected(QRectF(r));
  if (v.width() < 3) v.adjust(-1.5, 0, 1.5, 0);
  if (v.height() < 3) v.adjust(0, -1.5, 0, 1.5);
  p.setPen(QPen(QColor(0, 0, 0, 220), 3));
  p.drawRect(v);
  p.setPen(QPen(QColor(255, 210, 0), 1.5));
  p.drawRect(v);
}

} // namespace spex
