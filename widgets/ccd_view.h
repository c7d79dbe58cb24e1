// CcdView: the preproc image with the extraction's geometry drawn over it (traces,
// fiber numbers, bundle boundaries, iso-wavelength lines, the patch grid, masked
// pixels, regions already extracted). Clicking a trace selects that fiber and the
// wavelength under the cursor; shift+drag selects the patches under the rectangle.
// Both go into the shared ViewState; the view never starts an extraction.
#pragma once

#include "heatmap_legend.h"
#include "image_canvas.h"
#include "image_scale.h"
#include "trace_geometry.h"

#include "core/extract/engine.h"
#include "core/image.h"
#include "core/plan/patch_plan.h"

#include <QPolygonF>

#include <array>
#include <map>
#include <tuple>
#include <memory>
#include <vector>

namespace spex {

enum class Overlay {
  Traces,
  FiberNumbers,
  Bundles,
  IsoWavelength,
  PatchGrid,
  MaskedPixels,
  Extracted,
};
constexpr int kOverlayCount = 7;
QString overlayName(Overlay o);    // "traces", "fiber numbers", ...
QString overlayKey(Overlay o);     // settings key: "traces", "fiberNumbers", ...

class CcdView : public ImageCanvas {
  Q_OBJECT
public:
  explicit CcdView(ViewState* state, QWidget* parent = nullptr);

  // The image must be the PSF's CCD size (the document checks). Either may be null.
  void setInputs(std::shared_ptr<const Image> image, std::shared_ptr<const GaussHermitePsf> psf);
  void setPlan(std::shared_ptr<const PatchPlan> plan);
  // Results whose `covered` bins are drawn as extracted regions.
  void setExtracted(const std::vector<std::shared_ptr<const ExtractionResult>>& results);

  void setScale(const ScaleSettings& settings);
  const ScaleSettings& scale() const { return m_scale; }
  ScaleRange range() const { return m_range; }

  void setOverlay(Overlay o, bool on);
  bool overlay(Overlay o) const { return m_overlays[int(o)]; }

  const TraceGeometry& traces() const { return m_traces; }
  const PatchPlan* plan() const { return m_plan.get(); }
  // What the status bar shows for a CCD point: x, y, value, ivar, mask bits, the
  // nearest fiber and the wavelength there.
  QString readout(QPointF ccd) const;
  // Widget position of (fiber, wave) under the current zoom: for tests and tools.
  QPointF widgetPosOf(int fiber, double wave) const;
  // Patches whose kept region meets the CCD rectangle.
  QVector<int> patchesIn(const QRectF& ccd) const;
  // Number of extracted-region outlines (tests check that results show up).
  int extractedRegionCount() const { return int(m_extractedOutlines.size()); }

  // Per-patch heatmap over the patch outlines (issue 5): values[i] for plan patch i,
  // NaN where nothing is drawn, coloured on a viridis scale from min to max with a
  // labelled colour bar. An empty vector removes it. Clicking a coloured patch emits
  // heatmapPatchClicked.
  void setPatchHeatmap(const QVector<double>& values, const QString& label);
  void clearPatchHeatmap() { setPatchHeatmap({}, {}); }
  bool hasPatchHeatmap() const { return !m_heatValues.isEmpty(); }
  QString patchHeatmapLabel() const { return m_heatLabel; }
  // The fill colour of a patch under the heatmap; invalid where it is not coloured.
  QColor patchHeatmapColor(int patch) const;
  // The heatmap's colour bar (its values, label, colours) and where it was last drawn.
  HeatmapLegend heatmapLegend() const;
  QRect heatmapLegendRect() const { return m_heatLegendRect; }
  // The plan patch whose kept region holds a CCD point, -1 if none.
  int patchAt(QPointF ccd) const;

  // The unit of the pixel values, shown on the colour bar (BUNIT, else electrons).
  QString unit() const { return m_unit; }

  // The static overlays (extracted regions, patch grid, heatmap, bundle boundaries,
  // traces, iso-wavelength lines) are drawn into a cached layer the size of the view
  // plus a margin, keyed by the zoom, the view's size and a revision that every input
  // they depend on bumps (inputs, plan, extracted regions, heatmap, overlay toggles);
  // a pan within the margin only moves it. Off: the layer is drawn anew every paint
  // (tests compare the two; the picture is the same).
  void setOverlayCacheEnabled(bool on);
  bool overlayCacheEnabled() const { return m_cacheOn; }
  // How often the layer has been drawn (tests and benchmarks).
  int overlayLayerBuilds() const { return m_layerBuilds; }

signals:
  void readoutChanged(const QString& text);
  void rangeChanged(double lo, double hi);
  // Contrast or bias changed by a right-drag: the new settings (the window keeps the
  // residual images and its saved settings in step).
  void scaleAdjusted(const ScaleSettings& settings);
  void heatmapPatchClicked(int patch);

protected:
  void paintOverlays(QPainter& p) override;

private:
  void render();
  void recolor(); // the cached colour indices through the current table
  void buildMaskLayer();
  void rebuildPatchOutlines();
  void onHover(QPointF ccd);
  void onClick(QPointF ccd, Qt::KeyboardModifiers mods);
  void onBand(QRectF ccd, Qt::KeyboardModifiers mods);
  void drawIsoWavelengths(QPainter& p, const QRectF& vis);
  // Wavelengths of the iso-wavelength lines for a visible CCD rectangle.
  std::vector<double> isoWaves(const QRectF& vis, double* step = nullptr) const;
  const QPolygonF& isoLine(double wave);
  // The layer for the current view, drawn when stale; returns where it goes (widget).
  QPointF overlayLayerFor(const QTransform& toW);
  void drawOverlayLayer(QImage& img, const QTransform& toImage);
  void drawPatchGrid(QImage& img, const QTransform& toImage, const QRectF& area) const;
  void drawHeatmap(QPainter& p, const QRectF& area) const;
  void invalidateOverlayLayer() { ++m_revision; }
  // The layer's overlays drawn as strokes (painters that are not raster: PDF).
  void drawStaticOverlaysVector(QPainter& p, const QRectF& vis);
  void drawFiberNumbers(QPainter& p, const QRectF& vis) const;

  std::shared_ptr<const Image> m_image;
  std::shared_ptr<const GaussHermitePsf> m_psf;
  std::shared_ptr<const PatchPlan> m_plan;
  TraceGeometry m_traces;
  ScaleSettings m_scale;
  ScaleRange m_range;
  QImage m_index; // renderIndex of the image under m_range and the stretch
  QString m_unit;
  std::array<bool, kOverlayCount> m_overlays{true, true, true, false, false, false, true};

  bool m_maskBuilt = false;
  std::vector<QPolygonF> m_bundleLines;
  std::vector<QPolygonF> m_patchOutlines;   // per plan patch, kept region
  std::vector<QRectF> m_patchBounds;
  std::vector<QPolygonF> m_extractedOutlines;
  // regionOutline per (first fiber, fibers, wavelength range) of an extracted region.
  using OutlineKey = std::tuple<int, int, double, double>;
  std::map<OutlineKey, QPolygonF> m_outlineCache;
  QVector<double> m_heatValues; // per plan patch, empty: no heatmap
  QRect m_heatLegendRect;
  QString m_heatLabel;
  double m_heatLo = 0, m_heatHi = 0;

  std::map<double, QPolygonF> m_isoLines; // isoWavelength per wavelength
  bool m_cacheOn = true;
  quint64 m_revision = 1;   // bumped when what the layer shows changes
  struct Layer {
    QImage image;           // ARGB32 premultiplied, transparent where nothing is drawn
    QTransform toImage;     // CCD -> image pixels (logical) when drawn
    quint64 revision = 0;
    double zoom = 0;
    QSize widget;
    qreal dpr = 1;
  } m_layer, m_scratch;      // the cache; the layer of a paint with the cache off
  const Layer* m_lastLayer = &m_layer;
  int m_layerBuilds = 0;
};

} // namespace spex
