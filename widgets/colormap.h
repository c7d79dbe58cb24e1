// Colour maps for the CCD and residual images: 256-entry colour tables indexed by
// the 8-bit output of an ImageScale, so changing the map never touches the data.
#pragma once

#include <QColor>
#include <QString>
#include <QStringList>
#include <QVector>

namespace spex {

enum class Colormap {
  Grey,
  Viridis,
  Magma,
  Diverging // blue - white - red, for residuals and chi: white is the middle of the range
};

QString colormapName(Colormap map);
QStringList colormapNames();                   // in enum order, for combo boxes
Colormap colormapFromName(const QString& name); // Grey when unknown

// 256 opaque colours, index 0 = low end of the scale.
QVector<QRgb> colorTable(Colormap map);

// A table read through DS9's contrast and bias (entry i shows the colour of
// (i/255 - bias) * contrast + 0.5, clamped) and optionally backwards. contrast 1,
// bias 0.5, not inverted: the table unchanged.
QVector<QRgb> adjustTable(const QVector<QRgb>& table, double contrast, double bias, bool inverted);

// The colour of a value t in [0, 1] (clamped), for plots that want the same map.
QColor colormapColor(Colormap map, double t);

} // namespace spex
