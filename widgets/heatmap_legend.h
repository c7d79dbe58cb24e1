// HeatmapLegend: the colour bar of a per-patch or per-setting heatmap (the CCD's patch
// heatmap, the sweep's maps). It sits on an opaque dark panel so its text reads the
// same over any image and colour map, and it says what a heatmap of one value is: a
// single swatch with that value instead of a lo..hi ramp whose ends are equal.
#pragma once

#include "colormap.h"

#include <QColor>
#include <QFontMetrics>
#include <QRect>
#include <QString>

class QPainter;

namespace spex {

struct HeatmapLegend {
  Colormap map = Colormap::Viridis;
  double lo = 0, hi = 1;   // finite values at the ends of the bar
  QString label;           // "patch wall time [s]"
  char format = 'g';       // QString::number format and precision of the end values
  int precision = 3;
  bool reversed = false;   // lower is better: the bright end is lo
  int count = 0;           // how many values are coloured (for the one-value text)

  bool single() const { return !(hi > lo); }
  // Position in the colour map of a value: 0.5 for a heatmap of one value, so its
  // swatch is neither the bottom nor the top of the ramp.
  double position(double v) const;
  QColor color(double v) const { return colormapColor(map, position(v)); }
  QString valueText(double v) const { return QString::number(v, format, precision); }
  // "lo .. hi" words under the bar, or "all N: v" / "one: v" for a single value.
  QString endText(bool high) const;
  QString singleText() const;

  static constexpr int kBarLength = 160, kBarThickness = 10, kPad = 6;
  // The panel's size for a font; paint() draws it with its top-left at `at`.
  QSize size(const QFontMetrics& fm) const;
  // Draws the panel and returns its rectangle; `bar` (optional) gets the bar's.
  QRect paint(QPainter& p, QPoint at, QRect* bar = nullptr) const;
  static QColor panelColor() { return QColor(28, 28, 32); }
};

} // namespace spex
