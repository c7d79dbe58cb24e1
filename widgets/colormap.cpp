#include "colormap.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace spex {

namespace {

// Each map is a handful of anchor colours at even spacing, interpolated linearly in
// sRGB. Ten anchors are enough for the perceptually uniform maps to stay monotonic
// in lightness, which is what matters when reading faint traces.
struct Anchors {
  const unsigned* rgb;
  int n;
};

constexpr unsigned kGrey[] = {0x000000, 0xffffff};
constexpr unsigned kViridis[] = {0x440154, 0x482878, 0x3e4989, 0x31688e, 0x26828e,
                                 0x1f9e89, 0x35b779, 0x6ece58, 0xb5de2b, 0xfde725};
constexpr unsigned kMagma[] = {0x000004, 0x180f3d, 0x440f76, 0x721f81, 0x9e2f7f,
                               0xcd4071, 0xf1605d, 0xfd9668, 0xfeca8d, 0xfcfdbf};
// Symmetric around white so that chi = 0 reads as "nothing there".
constexpr unsigned kDiverging[] = {0x053061, 0x2166ac, 0x4393c3, 0x92c5de, 0xd1e5f0, 0xf7f7f7,
                                   0xfddbc7, 0xf4a582, 0xd6604d, 0xb2182b, 0x67001f};

Anchors anchorsOf(Colormap map) {
  switch (map) {
  case Colormap::Viridis: return {kViridis, int(std::size(kViridis))};
  case Colormap::Magma: return {kMagma, int(std::size(kMagma))};
  case Colormap::Diverging: return {kDiverging, int(std::size(kDiverging))};
  case Colormap::Grey: break;
  }
  return {kGrey, int(std::size(kGrey))};
}

QRgb interpolate(const Anchors& a, double t) {
  t = std::clamp(t, 0.0, 1.0) * (a.n - 1);
  const int i = std::min(int(t), a.n - 2);
  const double f = t - i;
  auto channel = [&](int shift) {
    const double lo = (a.rgb[i] >> shift) & 0xff;
    const double hi = (a.rgb[i + 1] >> shift) & 0xff;
    return int(std::lround(lo + f * (hi - lo)));
  };
  return qRgb(channel(16), channel(8), channel(0));
}

} // namespace

QString colormapName(Colormap map) {
  switch (map) {
  case Colormap::Grey: return QStringLiteral("grey");
  case Colormap::Viridis: return QStringLiteral("viridis");
  case Colormap::Magma: return QStringLiteral("magma");
  case Colormap::Diverging: return QStringLiteral("diverging");
  }
  return QStringLiteral("grey");
}

QStringList colormapNames() {
  return {colormapName(Colormap::Grey), colormapName(Colormap::Viridis),
          colormapName(Colormap::Magma), colormapName(Colormap::Diverging)};
}

Colormap colormapFromName(const QString& name) {
  for (Colormap m : {Colormap::Grey, Colormap::Viridis, Colormap::Magma, Colormap::Diverging})
    if (colormapName(m) == name) return m;
  return Colormap::Grey;
}

QVector<QRgb> colorTable(Colormap map) {
  const Anchors a = anchorsOf(map);
  QVector<QRgb> table(256);
  for (int i = 0; i < 256; ++i) table[i] = interpolate(a, i / 255.0);
  return table;
}

QVector<QRgb> adjustTable(const QVector<QRgb>& table, double contrast, double bias, bool inverted) {
  if (table.size() != 256) return table;
  QVector<QRgb> out(256);
  for (int i = 0; i < 256; ++i) {
    double t = i / 255.0;
    if (inverted) t = 1.0 - t;
    t = std::clamp((t - bias) * contrast + 0.5, 0.0, 1.0);
    out[i] = table[int(std::lround(t * 255.0))];
  }
  return out;
}

QColor colormapColor(Colormap map, double t) { return QColor(interpolate(anchorsOf(map), t)); }

} // namespace spex
