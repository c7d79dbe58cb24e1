#include "image_scale.h"

#include <QtConcurrent/QtConcurrentMap>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

namespace spex {

namespace {

constexpr int kLutSize = 4096; // quantisation of t before the stretch: finer than 8 bits out
constexpr std::size_t kMaxSamples = 400000;

// Samples of the valid pixels, evenly strided. The stride is not a multiple of the
// row length in general, so columns are not aliased.
std::vector<double> sampleValid(const Array2D<double>& data, const Array2D<double>* weight,
                                std::size_t maxSamples) {
  const std::size_t n = data.size();
  const bool haveWeight = weight && weight->size() == n;
  // One strided pass over everything; only if it finds almost nothing valid (a mostly
  // masked image) a second pass takes every valid pixel, still cheap then.
  auto pass = [&](std::size_t stride, bool useWeight) {
    std::vector<double> out;
    out.reserve(n / stride + 1);
    for (std::size_t i = 0; i < n; i += stride) {
      if (useWeight && !(weight->data[i] > 0)) continue;
      const double v = data.data[i];
      if (std::isfinite(v)) out.push_back(v);
    }
    return out;
  };
  const std::size_t stride = std::max<std::size_t>(1, n / std::max<std::size_t>(1, maxSamples));
  std::vector<double> out = pass(stride, haveWeight);
  if (haveWeight && out.size() < 1000 && stride > 1) out = pass(1, true);
  if (out.empty() && haveWeight) out = pass(stride, false); // nothing valid: scale all
  return out;
}

double quantile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const std::size_t k = std::min(v.size() - 1, std::size_t(std::max(0.0, q) * (v.size() - 1)));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

ScaleRange sane(ScaleRange r) {
  if (!std::isfinite(r.lo) || !std::isfinite(r.hi)) return {0, 1};
  if (r.hi < r.lo) std::swap(r.lo, r.hi);
  if (r.hi - r.lo <= 0) r.hi = r.lo + (std::abs(r.lo) > 0 ? std::abs(r.lo) * 1e-6 : 1.0);
  return r;
}

} // namespace

QString stretchName(Stretch s) {
  switch (s) {
  case Stretch::Linear: return QStringLiteral("linear");
  case Stretch::Sqrt: return QStringLiteral("sqrt");
  case Stretch::Log: return QStringLiteral("log");
  case Stretch::Asinh: return QStringLiteral("asinh");
  }
  return QStringLiteral("linear");
}
QStringList stretchNames() {
  return {stretchName(Stretch::Linear), stretchName(Stretch::Sqrt), stretchName(Stretch::Log),
          stretchName(Stretch::Asinh)};
}
Stretch stretchFromName(const QString& name) {
  for (Stretch s : {Stretch::Linear, Stretch::Sqrt, Stretch::Log, Stretch::Asinh})
    if (stretchName(s) == name) return s;
  return Stretch::Linear;
}
QString limitsName(Limits l) {
  switch (l) {
  case Limits::MinMax: return QStringLiteral("min/max");
  case Limits::Percentile: return QStringLiteral("percentile");
  case Limits::ZScale: return QStringLiteral("zscale");
  case Limits::Manual: return QStringLiteral("manual");
  }
  return QStringLiteral("min/max");
}
QStringList limitsNames() {
  return {limitsName(Limits::MinMax), limitsName(Limits::Percentile), limitsName(Limits::ZScale),
          limitsName(Limits::Manual)};
}
Limits limitsFromName(const QString& name) {
  for (Limits l : {Limits::MinMax, Limits::Percentile, Limits::ZScale, Limits::Manual})
    if (limitsName(l) == name) return l;
  return Limits::MinMax;
}

ScaleRange zscaleRange(std::vector<double> s, double contrast) {
  if (s.empty()) return {0, 1};
  std::sort(s.begin(), s.end());
  const int n = int(s.size());
  const double median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  if (n < 5) return sane({s.front(), s.back()});

  // Straight-line fit of value against rank, dropping points more than 2.5 sigma off
  // and stopping when nothing changes or fewer than half the points are left.
  std::vector<char> keep(n, 1);
  const double center = 0.5 * (n - 1);
  double slope = 0, intercept = median;
  int used = n;
  for (int iter = 0; iter < 5; ++iter) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int m = 0;
    for (int i = 0; i < n; ++i) {
      if (!keep[i]) continue;
      const double x = i - center;
      sx += x;
      sy += s[i];
      sxx += x * x;
      sxy += x * s[i];
      ++m;
    }
    const double den = m * sxx - sx * sx;
    if (m < 2 || den <= 0) break;
    slope = (m * sxy - sx * sy) / den;
    intercept = (sy - slope * sx) / m;
    double ss = 0;
    for (int i = 0; i < n; ++i)
      if (keep[i]) {
        const double r = s[i] - (intercept + slope * (i - center));
        ss += r * r;
      }
    const double sigma = std::sqrt(ss / m);
    int changed = 0, left = 0;
    for (int i = 0; i < n; ++i) {
      const double r = s[i] - (intercept + slope * (i - center));
      const char k = std::abs(r) <= 2.5 * sigma ? 1 : 0;
      if (k != keep[i]) ++changed;
      keep[i] = k;
      left += k;
    }
    used = left;
    if (!changed || left < n / 2) break;
  }
  if (used < n / 2) return sane({s.front(), s.back()}); // no linear core: use the extremes
  const double spread = slope / std::max(contrast, 1e-6);
  ScaleRange r{std::max(s.front(), median - spread * center),
               std::min(s.back(), median + spread * center)};
  return sane(r);
}

ScaleRange computeRange(const Array2D<double>& data, const Array2D<double>* weight,
                        const ScaleSettings& st) {
  if (st.limits == Limits::Manual) return sane({st.manualMin, st.manualMax});
  if (st.limits == Limits::MinMax) {
    std::vector<double> all = sampleValid(data, weight, std::numeric_limits<std::size_t>::max());
    if (all.empty()) return {0, 1};
    const auto [lo, hi] = std::minmax_element(all.begin(), all.end());
    return sane({*lo, *hi});
  }
  std::vector<double> s = sampleValid(data, weight, kMaxSamples);
  if (st.limits == Limits::ZScale) {
    // zscale wants on the order of a thousand samples; more only costs the sort.
    if (s.size() > 20000) {
      std::vector<double> sub;
      const std::size_t step = s.size() / 20000;
      for (std::size_t i = 0; i < s.size(); i += step) sub.push_back(s[i]);
      s.swap(sub);
    }
    return zscaleRange(std::move(s));
  }
  const double p = std::clamp(st.percentile, 50.0, 100.0) / 100.0;
  const double lo = quantile(s, 1.0 - p);
  const double hi = quantile(s, p);
  return sane({lo, hi});
}

double stretchValue(Stretch st, double t) {
  t = std::clamp(t, 0.0, 1.0);
  switch (st) {
  case Stretch::Linear: return t;
  case Stretch::Sqrt: return std::sqrt(t);
  case Stretch::Log: {
    constexpr double a = 1000.0; // ds9's log exponent: three decades across the range
    return std::log10(a * t + 1.0) / std::log10(a + 1.0);
  }
  case Stretch::Asinh: {
    constexpr double beta = 0.1; // linear below ~10% of the range, logarithmic above
    return std::asinh(t / beta) / std::asinh(1.0 / beta);
  }
  }
  return t;
}

namespace {
std::array<QRgb, kLutSize> stretchLut(Stretch stretch, const QVector<QRgb>& table) {
  std::array<QRgb, kLutSize> lut;
  for (int k = 0; k < kLutSize; ++k) {
    const double s = stretchValue(stretch, double(k) / (kLutSize - 1));
    lut[k] = table[std::clamp(int(s * 255.0 + 0.5), 0, 255)];
  }
  return lut;
}
} // namespace

void renderRegion(const Array2D<double>& data, ScaleRange range, Stretch stretch, const QVector<QRgb>& table,
                  QImage& img, int x0, int x1, int y0, int y1) {
  const int ny = data.rows, nx = data.cols;
  if (img.width() != nx || img.height() != ny || table.size() != 256) return;
  x0 = std::max(0, x0);
  y0 = std::max(0, y0);
  x1 = std::min(nx, x1);
  y1 = std::min(ny, y1);
  if (x1 <= x0 || y1 <= y0) return;
  const std::array<QRgb, kLutSize> lut = stretchLut(stretch, table);
  const double lo = range.lo;
  const double scale = (kLutSize - 1) / (range.hi - range.lo);
  for (int r = y0; r < y1; ++r) {
    const double* src = data.row(r);
    QRgb* dst = reinterpret_cast<QRgb*>(img.scanLine(ny - 1 - r));
    for (int c = x0; c < x1; ++c) {
      const double t = (src[c] - lo) * scale;
      const int k = !(t > 0) ? 0 : (t >= kLutSize - 1 ? kLutSize - 1 : int(t + 0.5));
      dst[c] = lut[k];
    }
  }
}

QImage renderImage(const Array2D<double>& data, ScaleRange range, Stretch stretch,
                   const QVector<QRgb>& table) {
  const int ny = data.rows, nx = data.cols;
  QImage img(nx, ny, QImage::Format_RGB32);
  if (img.isNull() || table.size() != 256) return img;

  // Stretch once into a table of colours; the per-pixel work is then an affine map,
  // a clamp and two lookups, which keeps a 4k x 4k render well under a second.
  std::array<QRgb, kLutSize> lut;
  for (int k = 0; k < kLutSize; ++k) {
    const double s = stretchValue(stretch, double(k) / (kLutSize - 1));
    lut[k] = table[std::clamp(int(s * 255.0 + 0.5), 0, 255)];
  }
  const double lo = range.lo;
  const double scale = (kLutSize - 1) / (range.hi - range.lo);
  // Detach once here: scanLine() on worker threads would each check the refcount.
  uchar* bits = img.bits();
  const qsizetype bpl = img.bytesPerLine();
  populatePages(bits, std::size_t(img.sizeInBytes())); // see core/array.h
  QVector<int> rows(ny);
  std::iota(rows.begin(), rows.end(), 0);
  QtConcurrent::blockingMap(rows, [&](int r) {
    const double* src = data.row(r);
    QRgb* dst = reinterpret_cast<QRgb*>(bits + bpl * (ny - 1 - r));
    for (int c = 0; c < nx; ++c) {
      const double t = (src[c] - lo) * scale;
      // !(t > 0) also catches NaN.
      const int k = !(t > 0) ? 0 : (t >= kLutSize - 1 ? kLutSize - 1 : int(t + 0.5));
      dst[c] = lut[k];
    }
  });
  return img;
}

} // namespace spex

namespace spex {

QImage renderIndex(const Array2D<double>& data, ScaleRange range, Stretch stretch) {
  const int ny = data.rows, nx = data.cols;
  QImage img(nx, ny, QImage::Format_Grayscale8);
  if (img.isNull()) return img;
  std::array<uchar, kLutSize> lut;
  for (int k = 0; k < kLutSize; ++k)
    lut[k] = uchar(std::clamp(int(stretchValue(stretch, double(k) / (kLutSize - 1)) * 255.0 + 0.5), 0, 255));
  const double lo = range.lo;
  const double scale = (kLutSize - 1) / (range.hi - range.lo);
  uchar* bits = img.bits();
  const qsizetype bpl = img.bytesPerLine();
  QVector<int> rows(ny);
  std::iota(rows.begin(), rows.end(), 0);
  QtConcurrent::blockingMap(rows, [&](int r) {
    const double* src = data.row(r);
    uchar* dst = bits + bpl * (ny - 1 - r);
    for (int c = 0; c < nx; ++c) {
      const double t = (src[c] - lo) * scale;
      const int k = !(t > 0) ? 0 : (t >= kLutSize - 1 ? kLutSize - 1 : int(t + 0.5));
      dst[c] = lut[k];
    }
  });
  return img;
}

QImage colorize(const QImage& index, const QVector<QRgb>& table) {
  if (index.isNull() || table.size() != 256 || index.format() != QImage::Format_Grayscale8) return {};
  const int ny = index.height(), nx = index.width();
  QImage img(nx, ny, QImage::Format_RGB32);
  uchar* bits = img.bits();
  const qsizetype bpl = img.bytesPerLine();
  const QRgb* t = table.constData();
  QVector<int> rows(ny);
  std::iota(rows.begin(), rows.end(), 0);
  QtConcurrent::blockingMap(rows, [&](int r) {
    const uchar* src = index.constScanLine(r);
    QRgb* dst = reinterpret_cast<QRgb*>(bits + bpl * r);
    for (int c = 0; c < nx; ++c) dst[c] = t[src[c]];
  });
  return img;
}

QVector<QRgb> displayTable(const ScaleSettings& s) {
  return adjustTable(colorTable(s.colormap), s.contrast, s.bias, s.inverted);
}

} // namespace spex
