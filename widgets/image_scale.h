// Turning CCD values into colours: the limits (min/max, percentile clip, IRAF-style
// zscale, manual), the stretch (linear, sqrt, log, asinh) and the render into a
// cached RGB image. Rendering happens once per scale or colormap change; painting
// only copies the visible part of the result.
#pragma once

#include "colormap.h"

#include "core/array.h"

#include <QImage>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <QVector>

#include <vector>

namespace spex {

enum class Stretch { Linear, Sqrt, Log, Asinh };
enum class Limits { MinMax, Percentile, ZScale, Manual };

QString stretchName(Stretch s);
QStringList stretchNames();
Stretch stretchFromName(const QString& name);
QString limitsName(Limits l);
QStringList limitsNames();
Limits limitsFromName(const QString& name);

struct ScaleSettings {
  Stretch stretch = Stretch::Asinh;
  // Percentile clip shows the structure of bright traces; zscale (background) is a
  // click away for cosmetics and faint wings.
  Limits limits = Limits::Percentile;
  double percentile = 99.5;  // Percentile: clip below 100 - p and above p
  double manualMin = 0;      // Manual limits
  double manualMax = 100;
  Colormap colormap = Colormap::Grey;
  // DS9's colormap adjustments (right-drag on an image): the colour of t in [0, 1]
  // is the map's colour at (t - bias) * contrast + 0.5; inverted reads the map backwards.
  double contrast = 1.0;
  double bias = 0.5;
  bool inverted = false;
  bool operator==(const ScaleSettings&) const = default;
};

struct ScaleRange {
  double lo = 0;
  double hi = 1;
};

// Limits of data under the settings. Pixels whose weight (ivar) is <= 0 are left out
// when weight is given and some pixel has weight > 0: an image that is mostly
// masked (a simulation lights one bundle) would otherwise scale to its zeros.
ScaleRange computeRange(const Array2D<double>& data, const Array2D<double>* weight,
                        const ScaleSettings& settings);

// IRAF zscale on samples (unsorted, finite): fit a line to the sorted samples with
// iterative 2.5-sigma rejection and spread the median by slope / contrast.
ScaleRange zscaleRange(std::vector<double> samples, double contrast = 0.25);

// t in [0, 1] after the limits, stretched to [0, 1].
double stretchValue(Stretch s, double t);

// Renders data into a Format_RGB32 image with CCD row 0 at the bottom (the
// astronomers' orientation: image line L holds row data.rows - 1 - L).
// NaN renders as the colour of the low end.
QImage renderImage(const Array2D<double>& data, ScaleRange range, Stretch stretch,
                   const QVector<QRgb>& table);
// The same for data rows [y0, y1) x columns [x0, x1) only, written into the matching
// pixels of `img` (a renderImage picture of the same data size; row 0 at the bottom).
// For updating a picture where its data changed; on the calling thread.
void renderRegion(const Array2D<double>& data, ScaleRange range, Stretch stretch, const QVector<QRgb>& table,
                  QImage& img, int x0, int x1, int y0, int y1);

// The same in two steps, so a colormap change (contrast, bias, invert) costs one table
// lookup per pixel instead of a new stretch: renderIndex gives each pixel's 8-bit
// colour index (Format_Grayscale8, row 0 at the bottom), colorize turns indices into
// colours. renderImage(d, r, s, t) == colorize(renderIndex(d, r, s), t).
QImage renderIndex(const Array2D<double>& data, ScaleRange range, Stretch stretch);
QImage colorize(const QImage& index, const QVector<QRgb>& table);

// The 256-entry table of the settings: colormap, inverted, contrast and bias applied.
QVector<QRgb> displayTable(const ScaleSettings& settings);

} // namespace spex

Q_DECLARE_METATYPE(spex::ScaleSettings)
