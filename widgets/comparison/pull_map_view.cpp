#include "pull_map_view.h"

#include "../colormap.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>

namespace spex {

namespace {
constexpr QRgb kNotCompared = qRgb(200, 200, 200);
constexpr double kDecades = 6; // the colour bar spans at most this many powers of ten
} // namespace

PullMapView::PullMapView(QWidget* parent) : QWidget(parent), m_table(colorTable(Colormap::Magma)) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void PullMapView::clear() {
  m_pulls = {};
  m_nfiber = 0;
  m_image = QImage();
  m_readout.clear();
  update();
}

QRgb PullMapView::colorOf(double pull) const {
  if (std::isnan(pull)) return kNotCompared;
  const QVector<QRgb>& table = m_table;
  const double a = std::abs(pull);
  if (!(a > m_lo)) return table.front();
  if (!std::isfinite(a) || a >= m_hi) return table.back();
  const double t = std::log10(a / m_lo) / std::log10(m_hi / m_lo);
  return table[std::clamp(int(t * 255.0 + 0.5), 0, 255)];
}

void PullMapView::setMap(const Array2D<double>& pulls, int fiberMin, const WaveGrid& wave,
                         const QVector<int>& fiberLabels) {
  m_pulls = pulls;
  m_fiberMin = fiberMin;
  m_nfiber = pulls.rows;
  m_wave = wave;
  m_labels = fiberLabels.size() == pulls.rows ? fiberLabels : QVector<int>{};
  // Scale: up to the largest finite |pull|, down at most kDecades below it (or to the
  // smallest non-zero one), so CPU vs CUDA (1e-12) and CPU vs production (1e-3..1)
  // both show their pattern.
  double hi = 0, lo = std::numeric_limits<double>::infinity();
  for (double p : m_pulls.data) {
    const double a = std::abs(p);
    if (!std::isfinite(a)) continue;
    hi = std::max(hi, a);
    if (a > 0) lo = std::min(lo, a);
  }
  if (!(hi > 0)) {
    m_hi = 1;
    m_lo = 1e-6;
  } else {
    m_hi = hi;
    m_lo = std::max(lo, hi * std::pow(10.0, -kDecades));
    if (!(m_lo < m_hi)) m_lo = m_hi / 10;
  }
  m_image = QImage(std::max(1, pulls.cols), std::max(1, pulls.rows), QImage::Format_RGB32);
  for (int s = 0; s < pulls.rows; ++s) {
    auto* line = reinterpret_cast<QRgb*>(m_image.scanLine(s));
    for (int j = 0; j < pulls.cols; ++j) line[j] = colorOf(pulls(s, j));
  }
  update();
}

void PullMapView::setMarker(int fiber, double wave) {
  m_markFiber = fiber;
  m_markWave = wave;
  update();
}

QRect PullMapView::mapRect() const {
  const int fh = fontMetrics().height();
  const int left = fontMetrics().horizontalAdvance(QStringLiteral("fiber 0000")) + 4;
  return QRect(left, fh + 4, std::max(10, width() - left - 78), std::max(10, height() - 2 * fh - 10));
}

QRect PullMapView::barRect() const {
  const QRect m = mapRect();
  return QRect(m.right() + 10, m.top(), 12, m.height());
}

QRectF PullMapView::cellRect(int fiber, int bin) const {
  const QRect m = mapRect();
  if (m_nfiber == 0 || m_wave.n == 0) return {};
  const double cw = double(m.width()) / m_wave.n, ch = double(m.height()) / m_nfiber;
  return QRectF(m.left() + bin * cw, m.top() + (fiber - m_fiberMin) * ch, cw, ch);
}

bool PullMapView::cellAt(QPointF pos, int* fiber, int* bin) const {
  const QRect m = mapRect();
  if (m_nfiber == 0 || m_wave.n == 0 || !QRectF(m).contains(pos)) return false;
  const int j = std::clamp(int((pos.x() - m.left()) * m_wave.n / m.width()), 0, m_wave.n - 1);
  const int s = std::clamp(int((pos.y() - m.top()) * m_nfiber / m.height()), 0, m_nfiber - 1);
  *fiber = m_fiberMin + s;
  *bin = j;
  return true;
}

QRgb PullMapView::cellColor(int fiber, int bin) const {
  const int s = fiber - m_fiberMin;
  if (m_image.isNull() || s < 0 || s >= m_nfiber || bin < 0 || bin >= m_wave.n) return kNotCompared;
  return m_image.pixel(bin, s);
}

void PullMapView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().window());
  const QRect m = mapRect();
  const int fh = fontMetrics().height();
  if (m_nfiber == 0) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap, tr("Choose two results and press Compare."));
    return;
  }
  p.setPen(palette().color(QPalette::WindowText));
  p.drawText(QRect(m.left(), 0, m.width(), fh + 2), Qt::AlignLeft | Qt::AlignVCenter,
             tr("|\u0394|/\u03c3 per fiber \u00d7 wavelength (grey: not compared; click: select)"));
  // Smooth reduction would blend a lone bad bin away; sample instead (cells stay crisp).
  p.setRenderHint(QPainter::SmoothPixmapTransform, false);
  p.drawImage(m, m_image);
  p.drawRect(m.adjusted(0, 0, -1, -1));
  // Fiber labels: the first, the last and a few between.
  const int step = std::max(1, int(std::ceil(m_nfiber * (fh + 2) / double(std::max(1, m.height())))));
  for (int s = 0; s < m_nfiber; s += step) {
    const QRectF c = cellRect(m_fiberMin + s, 0);
    const int label = m_labels.isEmpty() ? m_fiberMin + s : m_labels[s];
    p.drawText(QRectF(0, c.center().y() - fh / 2.0, m.left() - 4, fh), Qt::AlignRight | Qt::AlignVCenter,
               QString::number(label));
  }
  // Wavelength labels at both ends and the middle.
  for (double f : {0.0, 0.5, 1.0}) {
    const int j = int(std::lround(f * (m_wave.n - 1)));
    const QString t = QStringLiteral("%1 \u00c5").arg(m_wave.at(j), 0, 'f', 1);
    const int w = fontMetrics().horizontalAdvance(t);
    const double x = std::clamp(cellRect(m_fiberMin, j).center().x() - w / 2.0, double(m.left()), double(m.right() - w));
    p.drawText(QPointF(x, m.bottom() + fh + 2), t);
  }
  // Colour bar with its limits and the decades between.
  const QRect b = barRect();
  const QVector<QRgb>& table = m_table;
  for (int y = 0; y < b.height(); ++y) {
    const double t = 1.0 - double(y) / std::max(1, b.height() - 1);
    p.setPen(QColor(table[std::clamp(int(t * 255.0 + 0.5), 0, 255)]));
    p.drawLine(b.left(), b.top() + y, b.right(), b.top() + y);
  }
  p.setPen(palette().color(QPalette::WindowText));
  p.drawRect(b.adjusted(0, 0, -1, -1));
  const double span = std::log10(m_hi / m_lo);
  auto yOf = [&](double v) { return b.bottom() - (std::log10(v / m_lo) / span) * b.height(); };
  auto tick = [&](double v, const QString& text) {
    const double y = std::clamp(yOf(v), double(b.top()), double(b.bottom()));
    p.drawLine(QPointF(b.right(), y), QPointF(b.right() + 3, y));
    p.drawText(QRectF(b.right() + 5, y - fh / 2.0, width() - b.right() - 5, fh), Qt::AlignLeft | Qt::AlignVCenter, text);
  };
  tick(m_hi, QString::number(m_hi, 'g', 2));
  tick(m_lo, QString::number(m_lo, 'g', 2));
  const int d0 = int(std::ceil(std::log10(m_lo) + 0.3)), d1 = int(std::floor(std::log10(m_hi) - 0.3));
  const int dstep = std::max(1, int(std::ceil((d1 - d0 + 1) * (fh + 2) / double(std::max(1, b.height() - 2 * fh)))));
  for (int d = d0; d <= d1; d += dstep) {
    // Not on top of the end labels.
    const double y = yOf(std::pow(10.0, d));
    if (y - b.top() < fh || b.bottom() - y < fh) continue;
    tick(std::pow(10.0, d), QStringLiteral("1e%1").arg(d));
  }
  // The selection cross.
  if (m_markFiber >= m_fiberMin && m_markFiber < m_fiberMin + m_nfiber && std::isfinite(m_markWave)) {
    const int j = int(std::lround((m_markWave - m_wave.wmin) / m_wave.dw));
    if (j >= 0 && j < m_wave.n) {
      const QRectF c = cellRect(m_markFiber, j);
      for (const QColor& col : {QColor(0, 0, 0), QColor(80, 255, 120)}) {
        p.setPen(QPen(col, col == QColor(0, 0, 0) ? 3 : 1));
        p.drawLine(QPointF(c.center().x(), m.top()), QPointF(c.center().x(), c.top() - 2));
        p.drawLine(QPointF(c.center().x(), c.bottom() + 2), QPointF(c.center().x(), m.bottom()));
        p.drawLine(QPointF(m.left(), c.center().y()), QPointF(c.left() - 2, c.center().y()));
        p.drawLine(QPointF(c.right() + 2, c.center().y()), QPointF(m.right(), c.center().y()));
      }
    }
  }
}

void PullMapView::mouseReleaseEvent(QMouseEvent* e) {
  int fiber = -1, bin = -1;
  if (e->button() == Qt::LeftButton && cellAt(e->position(), &fiber, &bin)) emit cellClicked(fiber, m_wave.at(bin));
}

void PullMapView::mouseMoveEvent(QMouseEvent* e) {
  int fiber = -1, bin = -1;
  QString text;
  if (cellAt(e->position(), &fiber, &bin)) {
    const int s = fiber - m_fiberMin;
    const double v = m_pulls(s, bin);
    const int label = m_labels.isEmpty() ? fiber : m_labels[s];
    text = std::isnan(v) ? tr("fiber %1, %2 \u00c5: not compared").arg(label).arg(m_wave.at(bin), 0, 'f', 1)
                         : tr("fiber %1, %2 \u00c5: \u0394/\u03c3 = %3").arg(label).arg(m_wave.at(bin), 0, 'f', 1).arg(v, 0, 'g', 4);
  }
  if (text != m_readout) {
    m_readout = text;
    setToolTip(text);
    emit hovered(text);
  }
}

void PullMapView::leaveEvent(QEvent*) {
  m_readout.clear();
  emit hovered(QString());
}

} // namespace spex
