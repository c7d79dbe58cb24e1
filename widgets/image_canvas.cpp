#include "image_canvas.h"

#include <QElapsedTimer>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace spex {

namespace {
constexpr double kKeyZoom = 1.25;
constexpr int kClickSlop = 4; // screen pixels a press may move and still be a click

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

void ImageCanvas::paintEvent(QPaintEvent*) {
  QElapsedTimer timer;
  timer.start();
  QPainter p(this);
  p.fillRect(rect(), QColor(24, 24, 28));
  drawPyramid(p, m_showAlternate && !m_alternate.levels.isEmpty() ? m_alternate : m_picture);
  if (m_layerVisible) drawPyramid(p, m_layer);
  p.setRenderHint(QPainter::SmoothPixmapTransform, false);
  paintOverlays(p);
  if (m_drag == Drag::Band && m_moved) {
    p.setPen(QPen(QColor(255, 200, 0), 1, Qt::DashLine));
    p.setBrush(QColor(255, 200, 0, 40));
    p.drawRect(QRect(m_pressPos, m_lastPos).normalized());
  }
  m_lastPaintMs = timer.nsecsElapsed() * 1e-6;
}

void ImageCanvas::wheelEvent(QWheelEvent* e) {
  const double steps = e->angleDelta().y() / 120.0;
  if (steps == 0) return;
  // 1.2 per notch; fractional notches from touchpads give smooth zoom.
  m_state->zoomAround(std::pow(1.2, steps), toCcd(e->position()));
  e->accept();
}

void ImageCanvas::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  m_pressPos = m_lastPos = e->pos();
  m_pressCenter = m_state->center();
  m_moved = false;
  m_drag = (e->modifiers() & Qt::ShiftModifier) ? Drag::Band : Drag::Pan;
  setFocus();
}

void ImageCanvas::mouseMoveEvent(QMouseEvent* e) {
  m_lastPos = e->pos();
  if (m_drag != Drag::None && (e->pos() - m_pressPos).manhattanLength() > kClickSlop) m_moved = true;
  if (m_drag == Drag::Pan && m_moved) {
    const QPointF d = e->pos() - m_pressPos;
    const double z = m_state->zoom();
    m_state->setCenter(m_pressCenter - QPointF(d.x() / z, -d.y() / z));
  } else if (m_drag == Drag::Band) {
    update();
  }
  emit hovered(toCcd(e->position()));
}

void ImageCanvas::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton || m_drag == Drag::None) return;
  const Drag drag = m_drag;
  m_drag = Drag::None;
  if (!m_moved) {
    emit clicked(toCcd(e->position()), e->modifiers());
  } else if (drag == Drag::Band) {
    const QRectF band = QRectF(toCcd(m_pressPos), toCcd(e->position())).normalized();
    update();
    emit rubberBandSelected(band, e->modifiers());
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

} // namespace spex
