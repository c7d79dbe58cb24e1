#include "ccd_view.h"

#include "colormap.h"

#include <QPaintEngine>
#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <unordered_set>

namespace spex {

namespace {

// desispec ccdmask bit names, for the status bar readout.
const char* maskBitName(int bit) {
  static const char* names[] = {"BAD",         "HOT",        "DEAD",    "SATURATED",    "COSMIC",
                                "PIXFLATZERO", "PIXFLATLOW", "HIGHVAR", "BADREADNOISE", "BADAMP"};
  return bit >= 0 && bit < int(std::size(names)) ? names[bit] : nullptr;
}

QString maskText(int32_t m) {
  if (m == 0) return QStringLiteral("0");
  QStringList parts;
  for (int b = 0; b < 32; ++b)
    if (m & (int32_t(1) << b)) {
      const char* n = maskBitName(b);
      parts << (n ? QString::fromLatin1(n) : QStringLiteral("bit%1").arg(b));
    }
  return QStringLiteral("0x%1 %2").arg(quint32(m), 0, 16).arg(parts.join('|'));
}

// 1, 2, 5 x 10^k: the smallest at least `atLeast`.
double niceStep(double atLeast) {
  const double p = std::pow(10.0, std::floor(std::log10(std::max(atLeast, 1e-9))));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= atLeast) return m * p;
  return 10 * p;
}

QPen cosmeticPen(const QColor& c, double width = 1.0, Qt::PenStyle style = Qt::SolidLine) {
  QPen pen(c, width, style);
  pen.setCosmetic(true); // width in screen pixels whatever the zoom
  return pen;
}

} // namespace

QString overlayName(Overlay o) {
  switch (o) {
  case Overlay::Traces: return QStringLiteral("Fiber traces");
  case Overlay::FiberNumbers: return QStringLiteral("Fiber numbers");
  case Overlay::Bundles: return QStringLiteral("Bundle boundaries");
  case Overlay::IsoWavelength: return QStringLiteral("Iso-wavelength lines");
  case Overlay::PatchGrid: return QStringLiteral("Patch grid");
  case Overlay::MaskedPixels: return QStringLiteral("Masked pixels");
  case Overlay::Extracted: return QStringLiteral("Extracted regions");
  }
  return {};
}

QString overlayKey(Overlay o) {
  switch (o) {
  case Overlay::Traces: return QStringLiteral("traces");
  case Overlay::FiberNumbers: return QStringLiteral("fiberNumbers");
  case Overlay::Bundles: return QStringLiteral("bundles");
  case Overlay::IsoWavelength: return QStringLiteral("isoWavelength");
  case Overlay::PatchGrid: return QStringLiteral("patchGrid");
  case Overlay::MaskedPixels: return QStringLiteral("maskedPixels");
  case Overlay::Extracted: return QStringLiteral("extracted");
  }
  return {};
}

CcdView::CcdView(ViewState* state, QWidget* parent) : ImageCanvas(state, parent) {
  connect(this, &ImageCanvas::hovered, this, &CcdView::onHover);
  connect(this, &ImageCanvas::hoverLeft, this, [this] {
    viewState()->setHover(-1, std::nan(""));
    emit readoutChanged(QString());
  });
  connect(this, &ImageCanvas::clicked, this, &CcdView::onClick);
  connect(this, &ImageCanvas::rubberBandSelected, this, &CcdView::onBand);
  connect(this, &ImageCanvas::contrastBiasChanged, this, [this](double c, double b) {
    if (c == m_scale.contrast && b == m_scale.bias) return;
    m_scale.contrast = c;
    m_scale.bias = b;
    recolor();
    emit scaleAdjusted(m_scale);
  });
  for (auto sig : {&ViewState::fibersChanged, &ViewState::waveChanged, &ViewState::patchesChanged,
                   &ViewState::hoverChanged})
    connect(state, sig, this, qOverload<>(&QWidget::update));
}

void CcdView::setInputs(std::shared_ptr<const Image> image, std::shared_ptr<const GaussHermitePsf> psf) {
  m_image = std::move(image);
  m_unit = QStringLiteral("e\u207b"); // DESI preproc images are in electrons
  if (m_image) {
    const QString u = QString::fromStdString(m_image->header.getString("BUNIT")).trimmed();
    if (!u.isEmpty() && !u.startsWith(QLatin1String("electron"), Qt::CaseInsensitive)) m_unit = u;
  }
  if (psf != m_psf) {
    m_psf = psf;
    m_traces = psf ? TraceGeometry(psf) : TraceGeometry();
    m_outlineCache.clear();
    m_isoLines.clear();
  }
  invalidateOverlayLayer();
  m_plan.reset();
  m_patchOutlines.clear();
  m_patchBounds.clear();
  m_extractedOutlines.clear();
  m_bundleLines.clear();
  render();
  m_maskBuilt = false;
  setLayer(QImage());
  if (overlay(Overlay::MaskedPixels)) buildMaskLayer();
  setLayerVisible(overlay(Overlay::MaskedPixels));
}

void CcdView::setPlan(std::shared_ptr<const PatchPlan> plan) {
  m_plan = std::move(plan);
  rebuildPatchOutlines();
  invalidateOverlayLayer();
  update();
}

void CcdView::rebuildPatchOutlines() {
  m_patchOutlines.clear();
  m_patchBounds.clear();
  m_bundleLines.clear();
  if (m_traces.empty()) return;
  const int bundlesize = m_plan ? m_plan->params.bundlesize : 25;
  for (int f = bundlesize; f < m_traces.nfiber(); f += bundlesize)
    m_bundleLines.push_back(m_traces.boundaryBefore(f));
  if (!m_plan) return;
  const WaveGrid& g = m_plan->wave;
  for (const Patch& p : m_plan->patches) {
    const double wlo = g.at(p.wave0) - 0.5 * g.dw;
    const double whi = g.at(p.wave0 + p.nwave - 1) + 0.5 * g.dw;
    m_patchOutlines.push_back(m_traces.regionOutline(p.fiber0, p.nfiber, wlo, whi));
    m_patchBounds.push_back(m_patchOutlines.back().boundingRect());
  }
}

namespace {
size_t polygonHash(const QPolygonF& poly) {
  return qHashRange(reinterpret_cast<const double*>(poly.constData()),
                    reinterpret_cast<const double*>(poly.constData() + poly.size()));
}
} // namespace

void CcdView::setExtracted(const std::vector<std::shared_ptr<const ExtractionResult>>& results) {
  std::vector<QPolygonF> outlines;
  if (!m_traces.empty()) {
    struct Run { int b0, b1, f0, nf; };
    std::vector<Run> open, next, runs;
    for (const auto& r : results) {
      if (!r || r->covered.empty()) continue;
      // Runs of covered bins per fiber; neighbouring fibers with the same run merge
      // into one region, so a whole-frame result is a handful of polygons.
      open.clear();
      auto flush = [&](const Run& run) {
        const int f = r->fiberMin + run.f0;
        if (f < 0 || f + run.nf > m_traces.nfiber()) return;
        const double wlo = r->wave.at(run.b0) - 0.5 * r->wave.dw;
        const double whi = r->wave.at(run.b1 - 1) + 0.5 * r->wave.dw;
        // Outlines come from the cache: a click changes a few regions of many.
        const OutlineKey key{f, run.nf, wlo, whi};
        auto it = m_outlineCache.find(key);
        if (it == m_outlineCache.end()) {
          if (m_outlineCache.size() > 50000) m_outlineCache.clear();
          it = m_outlineCache.emplace(key, m_traces.regionOutline(f, run.nf, wlo, whi)).first;
        }
        outlines.push_back(it->second);
      };
      const int cols = r->covered.cols;
      for (int fi = 0; fi < r->covered.rows; ++fi) {
        runs.clear();
        const uint8_t* c = r->covered.row(fi);
        // memchr skips the uncovered stretches (most of a row after a selection).
        for (int b = 0; b < cols;) {
          const void* hit = std::memchr(c + b, 1, std::size_t(cols - b));
          if (!hit) break;
          b = int(static_cast<const uint8_t*>(hit) - c);
          int e = b;
          while (e < cols && c[e]) ++e;
          runs.push_back({b, e, fi, 1});
          b = e;
        }
        next.clear();
        for (Run run : runs) {
          auto it = std::find_if(open.begin(), open.end(), [&](const Run& o) {
            return o.b0 == run.b0 && o.b1 == run.b1 && o.f0 + o.nf == fi;
          });
          if (it != open.end()) {
            run = *it;
            run.nf += 1;
            open.erase(it);
          }
          next.push_back(run);
        }
        for (const Run& o : open) flush(o);
        std::swap(open, next);
      }
      for (const Run& o : open) flush(o);
    }
  }
  // Repaint only where regions appeared or went: re-extracting a few patches changes
  // a few boxes of the view (or none), not the whole picture.
  std::unordered_multiset<size_t> before, after;
  for (const QPolygonF& poly : m_extractedOutlines) before.insert(polygonHash(poly));
  for (const QPolygonF& poly : outlines) after.insert(polygonHash(poly));
  QRectF changed;
  auto differ = [&](const std::vector<QPolygonF>& polys, std::unordered_multiset<size_t>& other) {
    for (const QPolygonF& poly : polys) {
      auto it = other.find(polygonHash(poly));
      if (it != other.end()) other.erase(it); // matched once
      else changed |= poly.boundingRect();
    }
  };
  differ(m_extractedOutlines, after);
  differ(outlines, before);
  m_extractedOutlines = std::move(outlines);
  if (changed.isNull()) return;
  invalidateOverlayLayer();
  // The outline pen is 1 px (cosmetic) and antialiased: 2 px of margin.
  update(ccdToWidget().mapRect(changed).toAlignedRect().adjusted(-2, -2, 2, 2));
}

void CcdView::setScale(const ScaleSettings& settings) {
  const ScaleSettings old = m_scale;
  m_scale = settings;
  setContrastBias(settings.contrast, settings.bias); // the canvas' drag starts from them
  // Only the table changed: re-colour the cached indices, no new limits or stretch.
  ScaleSettings a = old, b = settings;
  a.colormap = b.colormap;
  a.contrast = b.contrast;
  a.bias = b.bias;
  a.inverted = b.inverted;
  if (a == b && !m_index.isNull()) recolor();
  else render();
}

void CcdView::render() {
  if (!m_image || m_image->pix.empty()) {
    m_index = QImage();
    clearColorBar();
    setPicture(QImage());
    return;
  }
  m_range = computeRange(m_image->pix, &m_image->ivar, m_scale);
  m_index = renderIndex(m_image->pix, m_range, m_scale.stretch);
  recolor();
  emit rangeChanged(m_range.lo, m_range.hi);
}

void CcdView::recolor() {
  if (m_index.isNull()) return;
  const QVector<QRgb> table = displayTable(m_scale);
  setPicture(colorize(m_index, table));
  setColorBar(table, m_range, m_scale.stretch, tr("%1 per pixel").arg(m_unit));
}

void CcdView::buildMaskLayer() {
  m_maskBuilt = true;
  if (!m_image || m_image->ivar.empty()) {
    setLayer(QImage());
    return;
  }
  // Masked = what extraction ignores: ivar 0 (extraction bits, non-finite input).
  const int ny = m_image->ny, nx = m_image->nx;
  QImage layer(nx, ny, QImage::Format_ARGB32_Premultiplied);
  const QRgb red = qPremultiply(qRgba(255, 40, 40, 170));
  for (int r = 0; r < ny; ++r) {
    const double* iv = m_image->ivar.row(r);
    QRgb* d = reinterpret_cast<QRgb*>(layer.scanLine(ny - 1 - r));
    for (int c = 0; c < nx; ++c) d[c] = iv[c] > 0 ? 0u : red;
  }
  setLayer(layer);
}

void CcdView::setOverlay(Overlay o, bool on) {
  m_overlays[int(o)] = on;
  invalidateOverlayLayer();
  if (o == Overlay::MaskedPixels) {
    // Built on first use: a full-CCD layer costs as much as the picture.
    if (on && !m_maskBuilt) buildMaskLayer();
    setLayerVisible(on);
  }
  update();
}

QString CcdView::readout(QPointF p) const {
  if (!m_image) return {};
  const int col = int(std::lround(p.x())), row = int(std::lround(p.y()));
  QString s = QStringLiteral("x %1  y %2").arg(p.x(), 0, 'f', 1).arg(p.y(), 0, 'f', 1);
  if (col >= 0 && col < m_image->nx && row >= 0 && row < m_image->ny) {
    s += QStringLiteral("  value %1  ivar %2  mask %3")
             .arg(m_image->pix(row, col), 0, 'g', 6)
             .arg(m_image->ivar(row, col), 0, 'g', 4)
             .arg(m_image->mask.empty() ? QStringLiteral("-") : maskText(m_image->mask(row, col)));
  }
  if (!m_traces.empty()) {
    double dx = 0;
    const int f = m_traces.nearestFiber(p, &dx);
    if (f >= 0 && dx <= 2 * m_traces.fiberSpacing()) {
      const double w = m_psf->waveAtRow(f, p.y());
      s += QStringLiteral("  fiber %1").arg(viewState()->fiberNumber(f));
      if (std::isfinite(w)) s += QStringLiteral("  \u03bb %1 \u00c5").arg(w, 0, 'f', 2);
    }
  }
  return s;
}

QPointF CcdView::widgetPosOf(int fiber, double wave) const {
  return toWidget(m_traces.at(fiber, wave));
}

QVector<int> CcdView::patchesIn(const QRectF& ccd) const {
  QVector<int> out;
  for (std::size_t i = 0; i < m_patchOutlines.size(); ++i) {
    if (!m_patchBounds[i].intersects(ccd)) continue;
    QPainterPath path;
    path.addPolygon(m_patchOutlines[i]);
    if (path.intersects(ccd)) out.push_back(int(i));
  }
  return out;
}

void CcdView::onHover(QPointF ccd) {
  emit readoutChanged(readout(ccd));
  if (m_traces.empty()) return;
  double dx = 0;
  const int f = m_traces.nearestFiber(ccd, &dx);
  if (f >= 0 && dx <= m_traces.fiberSpacing())
    viewState()->setHover(f, m_psf->waveAtRow(f, ccd.y()));
  else
    viewState()->setHover(-1, std::nan(""));
}

void CcdView::onClick(QPointF ccd, Qt::KeyboardModifiers mods) {
  if (m_traces.empty()) return;
  if (!m_heatValues.isEmpty()) {
    const int hp = patchAt(ccd);
    if (hp >= 0 && hp < m_heatValues.size() && std::isfinite(m_heatValues[hp])) {
      emit heatmapPatchClicked(hp);
      return;
    }
  }
  double dx = 0;
  const int f = m_traces.nearestFiber(ccd, &dx);
  // A click selects a trace when it lands within half the gap to the next one, or
  // a few screen pixels when zoomed out far enough that the gap is tiny.
  const double tolerance = std::max(0.5 * m_traces.fiberSpacing(), 6.0 / viewState()->zoom());
  if (f < 0 || dx > tolerance) return;
  viewState()->selectFiber(f, mods & Qt::ControlModifier);
  viewState()->setSelectedWave(m_psf->waveAtRow(f, ccd.y()));
}

void CcdView::setPatchHeatmap(const QVector<double>& values, const QString& label) {
  m_heatValues = values;
  m_heatLabel = label;
  m_heatLo = INFINITY;
  m_heatHi = -INFINITY;
  for (double v : m_heatValues)
    if (std::isfinite(v)) {
      m_heatLo = std::min(m_heatLo, v);
      m_heatHi = std::max(m_heatHi, v);
    }
  invalidateOverlayLayer();
  update();
}

QColor CcdView::patchHeatmapColor(int patch) const {
  if (patch < 0 || patch >= m_heatValues.size() || patch >= int(m_patchOutlines.size()) ||
      !std::isfinite(m_heatValues[patch]))
    return {};
  return heatmapLegend().color(m_heatValues[patch]);
}

HeatmapLegend CcdView::heatmapLegend() const {
  HeatmapLegend l;
  l.lo = m_heatLo;
  l.hi = m_heatHi;
  l.label = m_heatLabel;
  for (double v : m_heatValues) l.count += std::isfinite(v);
  return l;
}

int CcdView::patchAt(QPointF ccd) const {
  for (std::size_t i = 0; i < m_patchOutlines.size(); ++i)
    if (m_patchBounds[i].contains(ccd) && m_patchOutlines[i].containsPoint(ccd, Qt::OddEvenFill))
      return int(i);
  return -1;
}

void CcdView::onBand(QRectF ccd, Qt::KeyboardModifiers mods) {
  QVector<int> sel = patchesIn(ccd);
  if (mods & Qt::ControlModifier) {
    QVector<int> old = viewState()->selectedPatches();
    for (int p : sel)
      if (!old.contains(p)) old.push_back(p);
    sel = old;
  }
  std::sort(sel.begin(), sel.end());
  viewState()->setSelectedPatches(sel);
}

namespace {
// Room the overlay layer keeps around the view, px: pans of up to this much move the
// layer instead of drawing it again (a drag step is tens of px).
constexpr int kLayerMargin = 128;
// The patch grid: a light line over a dark halo 3 px wide. These are the opacities
// the grid had when each patch outline was stroked on its own (dark 150, then light
// 200 over it): an inner edge belongs to two patches and was drawn twice.
constexpr int kGridDark = 212;  // 1 - (1 - 150/255)^2
constexpr int kGridLight = 242; // 1 - (1 - 200/255)^2

// x's four 8-bit channels times a / 255 (rounded), two channels per multiply.
inline quint32 byteMul(quint32 x, quint32 a) {
  quint32 t = (x & 0xff00ffu) * a;
  t = ((t + ((t >> 8) & 0xff00ffu) + 0x800080u) >> 8) & 0xff00ffu;
  x = ((x >> 8) & 0xff00ffu) * a;
  x = (x + ((x >> 8) & 0xff00ffu) + 0x800080u) & 0xff00ff00u;
  return x | t;
}
// Premultiplied s over d.
inline quint32 over(quint32 s, quint32 d) { return d ? s + byteMul(d, 255u - (s >> 24)) : s; }

// An 8-bit coverage mask with a 1 px line rasteriser of its own (DDA; antialiased
// like Wu's lines, the coverage split between the two pixels across the line).
// Thousands of thin lines drawn here cost their pixels; through QPainter every few
// hundred pixels of spans went to Qt's thread pool and back (see drawPatchGrid).
class Coverage {
public:
  Coverage(int w, int h) : m_w(w), m_h(h), m_a(std::size_t(w) * h, 0) {}
  int x0 = INT_MAX, x1 = -1, y0 = INT_MAX, y1 = -1; // pixels touched
  bool empty() const { return x1 < 0; }
  const uint8_t* row(int y) const { return m_a.data() + std::size_t(y) * m_w; }

  // A polyline under t (to device pixels: pixel (i, j) spans [i, i+1) x [j, j+1)).
  // dash > 0: dashes of `dash` px with gaps of dash / 2 (Qt's DashLine at 1 px is 4
  // on, 2 off), their phase running along the whole polyline from its first point.
  void polyline(const QPolygonF& poly, const QTransform& t, bool aa, double dash = 0) {
    if (poly.size() < 2) return;
    QPointF a = t.map(poly[0]);
    double along = 0;
    for (int i = 1; i < poly.size(); ++i) {
      const QPointF b = t.map(poly[i]);
      line(a.x() - 0.5, a.y() - 0.5, b.x() - 0.5, b.y() - 0.5, aa, dash, along); // pixel centres at integers
      if (dash > 0) along += std::hypot(b.x() - a.x(), b.y() - a.y());
      a = b;
    }
  }

  // Blends `color` (premultiplied by `alpha`, 0-255, times the coverage) over img.
  void compositeOver(QImage& img, QColor color, int alpha) const {
    if (empty()) return;
    color.setAlpha(alpha);
    const quint32 src = qPremultiply(color.rgba());
    for (int y = y0; y <= y1; ++y) {
      const uint8_t* a = row(y);
      quint32* d = reinterpret_cast<quint32*>(img.scanLine(y));
      for (int x = x0; x <= x1; ++x)
        if (a[x]) d[x] = over(byteMul(src, a[x]), d[x]);
    }
  }

private:
  void plot(int x, int y, int c) {
    if (unsigned(x) >= unsigned(m_w) || unsigned(y) >= unsigned(m_h)) return;
    uint8_t& p = m_a[std::size_t(y) * m_w + x];
    if (c > p) p = uint8_t(c);
  }
  static int roundi(double v) { return int(std::floor(v + 0.5)); }

  void line(double ax, double ay, double bx, double by, bool aa, double dash = 0, double along = 0) {
    if (!std::isfinite(ax) || !std::isfinite(ay) || !std::isfinite(bx) || !std::isfinite(by)) return;
    if (std::max(ax, bx) < -1 || std::min(ax, bx) > m_w || std::max(ay, by) < -1 || std::min(ay, by) > m_h) return;
    const bool steep = std::abs(by - ay) > std::abs(bx - ax);
    // Along the major axis u, across it v.
    double u0 = steep ? ay : ax, v0 = steep ? ax : ay, u1 = steep ? by : bx, v1 = steep ? bx : by;
    // Dashes: the distance along the polyline at u is along + |u - uStart| * stretch.
    const double uStart = u0;
    const double stretch = dash > 0 ? std::hypot(1.0, (v1 - v0) / std::max(std::abs(u1 - u0), 1e-12)) : 1.0;
    if (u0 > u1) {
      std::swap(u0, u1);
      std::swap(v0, v1);
    }
    const double slope = u1 > u0 ? (v1 - v0) / (u1 - u0) : 0.0;
    const int uMax = (steep ? m_h : m_w) - 1, vMax = (steep ? m_w : m_h) - 1;
    const int ua = std::max(roundi(u0), 0), ub = std::min(roundi(u1), uMax);
    if (ua > ub) return;
    // The touched box, from the segment's ends (v is monotonic along it).
    const int va = std::clamp(int(std::floor(std::min(v0, v1))), 0, vMax);
    const int vb = std::clamp(int(std::floor(std::max(v0, v1))) + 1, 0, vMax);
    if (steep) {
      x0 = std::min(x0, va), x1 = std::max(x1, vb), y0 = std::min(y0, ua), y1 = std::max(y1, ub);
    } else {
      x0 = std::min(x0, ua), x1 = std::max(x1, ub), y0 = std::min(y0, va), y1 = std::max(y1, vb);
    }
    const double period = 1.5 * dash;
    for (int u = ua; u <= ub; ++u) {
      const double uc = std::clamp(double(u), u0, u1);
      if (dash > 0 && std::fmod(along + std::abs(uc - uStart) * stretch, period) >= dash) continue;
      const double v = v0 + (uc - u0) * slope;
      if (aa) {
        const double f = std::floor(v);
        const int c1 = int((v - f) * 255.0 + 0.5);
        const int vi = int(f);
        if (steep) {
          plot(vi, u, 255 - c1);
          plot(vi + 1, u, c1);
        } else {
          plot(u, vi, 255 - c1);
          plot(u, vi + 1, c1);
        }
      } else {
        const int vi = roundi(v);
        if (steep) plot(vi, u, 255);
        else plot(u, vi, 255);
      }
    }
  }

  int m_w, m_h;
  std::vector<uint8_t> m_a;
};
} // namespace

void CcdView::setOverlayCacheEnabled(bool on) {
  // The cached layer stays as it is: switched back on, it is used if still valid.
  m_cacheOn = on;
  m_scratch = Layer();
  update();
}

QPointF CcdView::overlayLayerFor(const QTransform& toW) {
  const double z = viewState()->zoom();
  const qreal dpr = devicePixelRatioF();
  Layer& L = m_cacheOn ? m_layer : m_scratch;
  if (m_cacheOn && !L.image.isNull() && L.revision == m_revision && L.zoom == z && L.widget == size() &&
      L.dpr == dpr) {
    // Same zoom: the view moved by a translation. Reuse the layer when that is a whole
    // number of device pixels and the layer still covers the view.
    const QPointF off(toW.dx() - L.toImage.dx(), toW.dy() - L.toImage.dy());
    const QPointF dev = off * dpr;
    const QSizeF ls = QSizeF(L.image.size()) / dpr;
    if (std::abs(dev.x() - std::round(dev.x())) < 1e-3 && std::abs(dev.y() - std::round(dev.y())) < 1e-3 &&
        off.x() <= 1e-6 && off.y() <= 1e-6 && off.x() + ls.width() >= width() - 1e-6 &&
        off.y() + ls.height() >= height() - 1e-6) {
      m_lastLayer = &L;
      return QPointF(std::round(dev.x()) / dpr, std::round(dev.y()) / dpr);
    }
  }
  // Without the cache a margin of 2 px still holds the lines just outside the view
  // whose halo or antialiasing reaches into it.
  const int m = m_cacheOn ? kLayerMargin : 2;
  const QSize logical = size() + QSize(2 * m, 2 * m);
  L.image = QImage(logical * dpr, QImage::Format_ARGB32_Premultiplied);
  L.image.setDevicePixelRatio(dpr);
  L.image.fill(Qt::transparent);
  L.toImage = toW * QTransform::fromTranslate(m, m);
  L.revision = m_revision;
  L.zoom = z;
  L.widget = size();
  L.dpr = dpr;
  drawOverlayLayer(L.image, L.toImage);
  ++m_layerBuilds;
  m_lastLayer = &L;
  return QPointF(-m, -m);
}

void CcdView::drawPatchGrid(QImage& img, const QTransform& toImage, const QRectF& area) const {
  // The outlines, 1 px, into a coverage mask; the dark halo is that mask widened by
  // one pixel each way (a 3 x 3 maximum), which is what a 3 px stroke under the line
  // covers. Stroking 5 700 outlines with a 3 px pen through QPainter went through Qt's
  // path stroker and its span fills, which Qt splits over its global thread pool and
  // waits for: 20-60 ms a paint, half of it waiting.
  Coverage cov(img.width(), img.height());
  const QTransform t = toImage * QTransform::fromScale(img.devicePixelRatioF(), img.devicePixelRatioF());
  const bool aa = viewState()->zoom() > 0.5;
  for (std::size_t i = 0; i < m_patchOutlines.size(); ++i)
    if (m_patchBounds[i].intersects(area)) cov.polyline(m_patchOutlines[i], t, aa);
  if (cov.empty()) return;
  const int w = img.width(), h = img.height();
  const int x0 = std::max(cov.x0 - 1, 0), x1 = std::min(cov.x1 + 1, w - 1);
  const int y0 = std::max(cov.y0 - 1, 0), y1 = std::min(cov.y1 + 1, h - 1);
  // Horizontal maximum of three, then vertical.
  std::vector<uint8_t> rowMax(std::size_t(w) * h, 0);
  for (int y = std::max(cov.y0, 0); y <= std::min(cov.y1, h - 1); ++y) {
    const uint8_t* a = cov.row(y);
    uint8_t* r = rowMax.data() + std::size_t(y) * w;
    for (int x = x0; x <= x1; ++x) {
      const uint8_t l = x > 0 ? a[x - 1] : 0, m = a[x], rr = x + 1 < w ? a[x + 1] : 0;
      r[x] = std::max(std::max(l, m), rr);
    }
  }
  for (int y = y0; y <= y1; ++y) {
    const uint8_t* a = cov.row(y);
    const uint8_t* r0 = rowMax.data() + std::size_t(std::max(y - 1, 0)) * w;
    const uint8_t* r1 = rowMax.data() + std::size_t(y) * w;
    const uint8_t* r2 = rowMax.data() + std::size_t(std::min(y + 1, h - 1)) * w;
    quint32* d = reinterpret_cast<quint32*>(img.scanLine(y));
    for (int x = x0; x <= x1; ++x) {
      const quint32 halo = std::max(std::max(r0[x], r1[x]), r2[x]);
      if (!halo) continue;
      // Light (white) over dark (black), premultiplied; then over what is below.
      const quint32 light = byteMul(0xffffffffu, a[x] * kGridLight / 255);
      const quint32 dark = (halo * kGridDark / 255) << 24;
      d[x] = over(over(light, dark), d[x]);
    }
  }
}

// The heatmap's patches that meet `area` (CCD pixels), filled with their colour at
// alpha 170; the painter is left with no pen and no brush.
void CcdView::drawHeatmap(QPainter& p, const QRectF& area) const {
  p.setPen(Qt::NoPen);
  for (int i = 0; i < int(m_patchOutlines.size()); ++i) {
    QColor c = patchHeatmapColor(i);
    if (!c.isValid() || !m_patchBounds[i].intersects(area)) continue;
    c.setAlpha(170);
    p.setBrush(c);
    p.drawPolygon(m_patchOutlines[i]);
  }
  p.setBrush(Qt::NoBrush);
}

void CcdView::drawOverlayLayer(QImage& img, const QTransform& toImage) {
  const QSizeF logical = QSizeF(img.size()) / img.devicePixelRatioF();
  const QRectF area = toImage.inverted().mapRect(QRectF(QPointF(0, 0), logical));
  const bool aa = viewState()->zoom() > 0.5;
  auto begin = [&](QPainter& p) {
    p.begin(&img);
    p.setTransform(toImage);
    p.setRenderHint(QPainter::Antialiasing, aa);
  };
  QPainter p;
  begin(p);
  if (overlay(Overlay::Extracted)) {
    p.setPen(cosmeticPen(QColor(60, 220, 90, 200)));
    p.setBrush(QColor(60, 220, 90, 45));
    for (const QPolygonF& poly : m_extractedOutlines)
      if (poly.boundingRect().intersects(area)) p.drawPolygon(poly);
    markPaintSection(QStringLiteral("extracted"));
  }
  if (overlay(Overlay::PatchGrid) && !m_patchOutlines.empty()) {
    p.end();
    drawPatchGrid(img, toImage, area);
    begin(p);
    markPaintSection(QStringLiteral("patch grid"));
  }
  if (!m_heatValues.isEmpty()) {
    drawHeatmap(p, area);
    markPaintSection(QStringLiteral("heatmap"));
  }
  // The lines below go through the coverage rasteriser: no thread-pool span fills,
  // and the same pixels wherever the view sits in the layer (QPainter's fixed-point
  // coordinates can round a line to the next row when the layer's offset changes).
  p.end();
  const QTransform toDevice = toImage * QTransform::fromScale(img.devicePixelRatioF(), img.devicePixelRatioF());
  if (overlay(Overlay::Bundles)) {
    Coverage cov(img.width(), img.height());
    for (const QPolygonF& line : m_bundleLines)
      if (line.boundingRect().intersects(area)) cov.polyline(line, toDevice, aa, 4.0);
    cov.compositeOver(img, QColor(230, 80, 230), 200);
    markPaintSection(QStringLiteral("bundles"));
  }
  if (overlay(Overlay::Traces)) {
    // Zoomed out, neighbouring traces fall on the same screen pixels and would paint
    // the image over; fade them and, when closer than 1.5 px, draw every fifth.
    const double px = m_traces.fiberSpacing() * viewState()->zoom();
    const int alpha = int(std::clamp(px / 6.0, 0.2, 1.0) * 110);
    const int every = px < 1.5 ? 5 : 1;
    Coverage cov(img.width(), img.height());
    for (int f = 0; f < m_traces.nfiber(); f += every)
      if (m_traces.bounds(f).adjusted(-1, -1, 1, 1).intersects(area)) cov.polyline(m_traces.trace(f), toDevice, aa);
    cov.compositeOver(img, QColor(0, 220, 255), alpha);
    markPaintSection(QStringLiteral("traces"));
  }
  if (overlay(Overlay::IsoWavelength)) {
    // The lines; their labels follow the view (drawIsoWavelengths). The step follows
    // the visible rows, so it depends on the zoom and the view's height only.
    Coverage cov(img.width(), img.height());
    for (double w : isoWaves(visibleCcdRect())) {
      const QPolygonF& line = isoLine(w);
      if (line.boundingRect().adjusted(-2, -2, 2, 2).intersects(area)) cov.polyline(line, toDevice, false);
    }
    cov.compositeOver(img, QColor(255, 255, 160), 140);
    markPaintSection(QStringLiteral("iso-wavelength"));
  }
}

void CcdView::drawStaticOverlaysVector(QPainter& p, const QRectF& vis) {
  p.save();
  p.setTransform(ccdToWidget(), true);
  p.setRenderHint(QPainter::Antialiasing, true);
  if (overlay(Overlay::Extracted)) {
    p.setPen(cosmeticPen(QColor(60, 220, 90, 200)));
    p.setBrush(QColor(60, 220, 90, 45));
    for (const QPolygonF& poly : m_extractedOutlines)
      if (poly.boundingRect().intersects(vis)) p.drawPolygon(poly);
  }
  p.setBrush(Qt::NoBrush);
  if (overlay(Overlay::PatchGrid)) {
    // Each outline on its own, as the grid always was (an inner edge gets two strokes).
    for (const auto& [color, width] :
         {std::pair{QColor(0, 0, 0, 150), 3.0}, std::pair{QColor(255, 255, 255, 200), 1.0}}) {
      p.setPen(cosmeticPen(color, width));
      for (std::size_t i = 0; i < m_patchOutlines.size(); ++i)
        if (m_patchBounds[i].intersects(vis)) p.drawPolyline(m_patchOutlines[i]);
    }
  }
  if (!m_heatValues.isEmpty()) drawHeatmap(p, vis);
  if (overlay(Overlay::Bundles)) {
    p.setPen(cosmeticPen(QColor(230, 80, 230, 200), 1, Qt::DashLine));
    for (const QPolygonF& line : m_bundleLines)
      if (line.boundingRect().intersects(vis)) p.drawPolyline(line);
  }
  if (overlay(Overlay::Traces)) {
    const double px = m_traces.fiberSpacing() * viewState()->zoom();
    p.setPen(cosmeticPen(QColor(0, 220, 255, int(std::clamp(px / 6.0, 0.2, 1.0) * 110))));
    for (int f = 0; f < m_traces.nfiber(); f += px < 1.5 ? 5 : 1)
      if (m_traces.bounds(f).adjusted(-1, -1, 1, 1).intersects(vis)) p.drawPolyline(m_traces.trace(f));
  }
  if (overlay(Overlay::IsoWavelength)) {
    p.setPen(cosmeticPen(QColor(255, 255, 160, 140)));
    for (double w : isoWaves(vis)) {
      const QPolygonF& line = isoLine(w);
      if (line.boundingRect().adjusted(-2, -2, 2, 2).intersects(vis)) p.drawPolyline(line);
    }
  }
  p.restore();
}

void CcdView::paintOverlays(QPainter& p) {
  if (m_traces.empty()) return;
  const QRectF vis = visibleCcdRect();
  const QTransform toW = ccdToWidget();

  const bool anyStatic = overlay(Overlay::Extracted) || overlay(Overlay::PatchGrid) || !m_heatValues.isEmpty() ||
                         overlay(Overlay::Bundles) || overlay(Overlay::Traces) || overlay(Overlay::IsoWavelength);
  const QPaintEngine* engine = p.paintEngine();
  if (anyStatic && engine && engine->type() != QPaintEngine::Raster) {
    // Vector output (PDF export): the overlays as strokes, not a bitmap.
    drawStaticOverlaysVector(p, vis);
  } else if (anyStatic) {
    const QPointF at = overlayLayerFor(toW);
    p.drawImage(at, m_lastLayer->image);
    markPaintSection(QStringLiteral("layer blit"));
  }

  p.save();
  p.setTransform(toW);
  p.setRenderHint(QPainter::Antialiasing, viewState()->zoom() > 0.5);
  // Selected patches always show, grid overlay or not: they are what Run will do.
  if (m_plan) {
    const QVector<int> sel = viewState()->selectedPatches();
    for (int i : sel) {
      if (i < 0 || i >= int(m_patchOutlines.size())) continue;
      p.setPen(cosmeticPen(QColor(255, 170, 0), 1.5));
      p.setBrush(QColor(255, 170, 0, 60));
      p.drawPolygon(m_patchOutlines[i]);
      const PixelBox& b = m_plan->patches[i].box;
      p.setPen(cosmeticPen(QColor(255, 170, 0, 150), 1, Qt::DashLine));
      p.setBrush(Qt::NoBrush);
      p.drawRect(QRectF(b.x0 - 0.5, b.y0 - 0.5, b.width(), b.height()));
    }
  }
  // The selection is drawn whatever the overlays: it is what the other views show.
  const QVector<int> fibers = viewState()->selectedFibers();
  for (int f : fibers) {
    if (f < 0 || f >= m_traces.nfiber()) continue;
    p.setPen(cosmeticPen(f == viewState()->selectedFiber() ? QColor(255, 230, 0) : QColor(255, 150, 0), 2));
    p.drawPolyline(m_traces.trace(f));
  }
  p.restore();
  markPaintSection(QStringLiteral("selection"));

  if (overlay(Overlay::IsoWavelength)) {
    drawIsoWavelengths(p, vis);
    markPaintSection(QStringLiteral("iso-wavelength"));
  }
  if (overlay(Overlay::FiberNumbers)) {
    drawFiberNumbers(p, vis);
    markPaintSection(QStringLiteral("fiber numbers"));
  }
  if (!m_heatValues.isEmpty() && std::isfinite(m_heatLo)) {
    // Colour bar, bottom left, on its own panel (legible over any image).
    const HeatmapLegend legend = heatmapLegend();
    const QSize size = legend.size(p.fontMetrics());
    // Above the pixel axes' labels when those are on.
    m_heatLegendRect = legend.paint(p, QPoint(8, height() - 8 - axisBand() - size.height()));
  } else {
    m_heatLegendRect = {};
  }

  // Markers: the selected (fiber, wavelength) and the hover position from any view.
  p.setRenderHint(QPainter::Antialiasing, true);
  const int sf = viewState()->selectedFiber();
  const double sw = viewState()->selectedWave();
  if (sf >= 0 && sf < m_traces.nfiber() && std::isfinite(sw)) {
    const QPointF w = toW.map(m_traces.at(sf, sw));
    p.setPen(QPen(QColor(255, 230, 0), 2));
    p.setBrush(Qt::NoBrush);
    p.drawEllipse(w, 7, 7);
    p.drawLine(w + QPointF(-11, 0), w + QPointF(-5, 0));
    p.drawLine(w + QPointF(5, 0), w + QPointF(11, 0));
  }
  const int hf = viewState()->hoverFiber();
  const double hw = viewState()->hoverWave();
  if (hf >= 0 && hf < m_traces.nfiber() && std::isfinite(hw)) {
    const QPointF w = toW.map(m_traces.at(hf, hw));
    p.setPen(QPen(QColor(255, 255, 255), 1.5));
    p.drawLine(w + QPointF(-6, -6), w + QPointF(6, 6));
    p.drawLine(w + QPointF(-6, 6), w + QPointF(6, -6));
  }
}

std::vector<double> CcdView::isoWaves(const QRectF& vis, double* stepOut) const {
  std::vector<double> out;
  const double span = m_traces.waveMax() - m_traces.waveMin();
  const QSize img = viewState()->imageSize();
  if (span <= 0 || !img.isValid()) return out;
  // About ten lines across the visible rows.
  const double visibleSpan = span * std::min(1.0, vis.height() / img.height());
  const double step = niceStep(visibleSpan / 10.0);
  if (stepOut) *stepOut = step;
  for (double w = std::ceil(m_traces.waveMin() / step) * step; w <= m_traces.waveMax(); w += step) out.push_back(w);
  return out;
}

const QPolygonF& CcdView::isoLine(double wave) {
  auto it = m_isoLines.find(wave);
  if (it != m_isoLines.end()) return it->second;
  if (m_isoLines.size() > 2000) m_isoLines.clear();
  return m_isoLines.emplace(wave, m_traces.isoWavelength(wave)).first->second;
}

void CcdView::drawIsoWavelengths(QPainter& p, const QRectF& vis) {
  // The labels; the lines are in the overlay layer.
  double step = 1;
  const std::vector<double> waves = isoWaves(vis, &step);
  const QTransform toW = ccdToWidget();
  QFont font = p.font();
  font.setPointSizeF(8);
  p.setFont(font);
  for (double w : waves) {
    const QPolygonF& line = isoLine(w);
    if (!line.boundingRect().adjusted(-2, -2, 2, 2).intersects(vis)) continue;
    // Label at the first visible point, so it stays on screen while panning.
    for (const QPointF& c : line) {
      const QPointF q = toW.map(c);
      if (rect().contains(q.toPoint())) {
        drawHaloText(p, q + QPointF(3, -3), QStringLiteral("%1 \u00c5").arg(w, 0, 'f', step < 1 ? 1 : 0),
                     QColor(255, 255, 160));
        break;
      }
    }
  }
}

void CcdView::drawFiberNumbers(QPainter& p, const QRectF& vis) const {
  const double px = m_traces.fiberSpacing() * viewState()->zoom();
  int every = 1;
  for (int k : {1, 5, 25, 50, 100, 250}) {
    every = k;
    if (k * px >= 24) break;
  }
  const QTransform toW = ccdToWidget();
  QFont font = p.font();
  font.setPointSizeF(8);
  p.setFont(font);
  // Near the top of the view (largest visible row), inside each trace's rows.
  const double yTop = vis.bottom() - 14.0 / viewState()->zoom();
  for (int f = 0; f < m_traces.nfiber(); f += every) {
    const QRectF& b = m_traces.bounds(f);
    if (b.right() < vis.left() || b.left() > vis.right()) continue;
    const double y = std::clamp(yTop, b.top(), b.bottom());
    const double x = m_traces.xAtRow(f, y);
    if (std::isnan(x)) continue;
    const QPointF w = toW.map(QPointF(x, y));
    const QString t = QString::number(viewState()->fiberNumber(f));
    const int tw = p.fontMetrics().horizontalAdvance(t);
    drawHaloText(p, QPointF(w.x() - tw / 2.0, std::max(w.y(), 12.0)), t, QColor(150, 240, 255));
  }
}

} // namespace spex
