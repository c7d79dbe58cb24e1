#include "heatmap_legend.h"

#include <QFontMetrics>
#include <QObject>
#include <QPainter>

#include <algorithm>
#include <cmath>

namespace spex {

double HeatmapLegend::position(double v) const {
  if (single()) return 0.5;
  const double t = std::clamp((v - lo) / (hi - lo), 0.0, 1.0);
  return reversed ? 1 - t : t;
}

QString HeatmapLegend::singleText() const {
  return count > 1 ? QObject::tr("all %1: %2").arg(count).arg(valueText(lo))
                   : QObject::tr("one value: %1").arg(valueText(lo));
}

QString HeatmapLegend::endText(bool high) const { return valueText(high ? hi : lo); }

QSize HeatmapLegend::size(const QFontMetrics& fm) const {
  const int w = std::max({kBarLength, fm.horizontalAdvance(label), fm.horizontalAdvance(singleText())});
  return {w + 2 * kPad, kPad + fm.height() + 2 + kBarThickness + 2 + fm.height() + kPad};
}

QRect HeatmapLegend::paint(QPainter& p, QPoint at, QRect* barOut) const {
  const QFontMetrics fm = p.fontMetrics();
  const QRect panel(at, size(fm));
  p.save();
  p.setPen(Qt::NoPen);
  p.setBrush(panelColor());
  p.drawRect(panel);
  p.setPen(Qt::white);
  p.drawText(QRect(panel.left() + kPad, panel.top() + kPad, panel.width() - 2 * kPad, fm.height()),
             Qt::AlignLeft | Qt::AlignVCenter, label);
  const int barTop = panel.top() + kPad + fm.height() + 2;
  const QRect text(panel.left() + kPad, barTop + kBarThickness + 2, panel.width() - 2 * kPad, fm.height());
  if (single()) {
    // One value: one swatch of the colour every coloured patch has.
    const QRect bar(panel.left() + kPad, barTop, 3 * kBarThickness, kBarThickness);
    p.fillRect(bar, color(lo));
    p.setPen(QColor(200, 200, 200));
    p.setBrush(Qt::NoBrush);
    p.drawRect(bar.adjusted(0, 0, -1, -1));
    p.setPen(Qt::white);
    p.drawText(text, Qt::AlignLeft | Qt::AlignVCenter, singleText());
    if (barOut) *barOut = bar;
  } else {
    const QRect bar(panel.left() + kPad, barTop, panel.width() - 2 * kPad, kBarThickness);
    for (int x = 0; x < bar.width(); ++x) {
      const double t = double(x) / std::max(1, bar.width() - 1);
      p.fillRect(QRect(bar.left() + x, bar.top(), 1, bar.height()), colormapColor(map, reversed ? 1 - t : t));
    }
    p.setPen(QColor(200, 200, 200));
    p.setBrush(Qt::NoBrush);
    p.drawRect(bar.adjusted(0, 0, -1, -1));
    p.setPen(Qt::white);
    p.drawText(text, Qt::AlignLeft | Qt::AlignVCenter, endText(false));
    p.drawText(text, Qt::AlignRight | Qt::AlignVCenter, endText(true));
    if (barOut) *barOut = bar;
  }
  p.restore();
  return panel;
}

} // namespace spex
