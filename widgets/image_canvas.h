// ImageCanvas: a CCD-sized picture that zooms and pans with the shared ViewState.
// The picture is rendered once (image_scale.h) into an RGB image plus a pyramid of
// 2x2-averaged copies; a paint copies only the visible part of the level nearest the
// zoom, so pan and zoom cost the widget's pixels, not the image's.
// Mouse: wheel zooms about the cursor, drag pans, shift+drag draws a rubber band,
// click reports the CCD point. Keys: + - zoom, F fit, 1 one-to-one, arrows pan.
// Display aids drawn by the canvas itself (so exports and screenshots hold them): a
// colour bar with the limits and unit, pixel axes along the edges, an overview panner
// when zoomed in, a caption naming the picture, a locked crosshair; right-drag changes
// contrast and bias (DS9); a Box or Cut tool draws a region that owners analyse.
#pragma once

#include "image_scale.h"
#include "view_state.h"

#include <QLineF>

#include <QElapsedTimer>
#include <QImage>
#include <QPair>

#include <functional>
#include <QPointer>
#include <QTransform>
#include <QVector>
#include <QWidget>

namespace spex {

class ImageCanvas : public QWidget {
  Q_OBJECT
public:
  explicit ImageCanvas(ViewState* state, QWidget* parent = nullptr);

  ViewState* viewState() const { return m_state; }

  // A picture and its 2x2-averaged reductions (level k: 2^k CCD pixels per image
  // pixel). Building one is pure image work: worker threads may do it.
  struct Pyramid {
    QVector<QImage> levels;
    void build(const QImage& base);
    // Level 0 changed inside `rect` (its pixels): the reductions follow there.
    void update(const QRect& rect);
  };

  // rgb: rendered with row 0 at the bottom (renderImage). Sets the view's image size.
  void setPicture(const QImage& rgb);
  void setPicture(Pyramid pyramid); // prebuilt
  void setAlternatePicture(Pyramid pyramid);
  const QImage& picture() const { return m_picture.levels.isEmpty() ? m_empty : m_picture.levels[0]; }
  // A second picture of the same size to blink against (prebuilt, so a blink is free).
  void setAlternatePicture(const QImage& rgb);
  void setShowAlternate(bool on);
  // Changes the picture (alternate: the blink partner) in place: `paint` writes level 0
  // inside `rect` (level-0 image pixels, row 0 at the top), the reductions follow and
  // the widget repaints. No copy is made while the canvas alone holds the picture.
  void updatePicture(const QRect& rect, const std::function<void(QImage& level0)>& paint, bool alternate = false);
  bool showingAlternate() const { return m_showAlternate; }
  // A translucent layer of the same size drawn over the picture (masked pixels).
  void setLayer(const QImage& argb);
  void setLayerVisible(bool on);
  bool layerVisible() const { return m_layerVisible; }

  // CCD (x = column, y = row, pixel centres at integers) <-> widget coordinates.
  QTransform ccdToWidget() const;
  QPointF toWidget(QPointF ccd) const;
  QPointF toCcd(QPointF widget) const;
  QRectF visibleCcdRect() const;

  double lastPaintMs() const { return m_lastPaintMs; }
  // The last paint's wall time per part ("picture", "layer", "overlays: traces", ...,
  // "decorations"), in the order drawn: where a repaint's milliseconds go (benchmarks).
  using PaintSections = QVector<QPair<QString, double>>;
  const PaintSections& lastPaintSections() const { return m_sections; }

  // The canvas that leads the shared view re-fits on resize until the user zooms or
  // pans; followers (a second view of the same CCD) never fit on their own.
  void setLeadsFit(bool on) { m_leadsFit = on; }
  // Zoom on a CCD rectangle (e.g. the lit fibers of a simulation).
  void zoomToRect(const QRectF& ccd);

  // --- colour bar (bottom right): the table from lo to hi under the stretch, tick
  //     values and the unit. Owners set it whenever limits, stretch or map change.
  void setColorBar(const QVector<QRgb>& table, ScaleRange range, Stretch stretch, const QString& unit);
  void clearColorBar();
  void setColorBarVisible(bool on);
  bool colorBarVisible() const { return m_barVisible; }
  bool hasColorBar() const { return m_barTable.size() == 256; }
  QRect colorBarRect() const;        // the gradient, widget coordinates; empty when not drawn
  QStringList colorBarLabels() const; // tick texts, then the unit
  ScaleRange colorBarRange() const { return m_barRange; }

  // --- pixel axes: CCD column and row ticks along the bottom and left edges.
  void setPixelAxes(bool on);
  bool pixelAxes() const { return m_axes; }
  QVector<double> axisTicks(Qt::Orientation o) const; // CCD x (Horizontal) or y values
  int axisBand() const; // px the axes' labels take at the bottom (0 when off)

  // --- overview panner (top right): the whole image with the visible rectangle,
  //     shown while the view does not hold the whole image; click or drag to pan.
  void setPannerEnabled(bool on);
  bool pannerEnabled() const { return m_pannerEnabled; }
  bool pannerShown() const;
  QRect pannerRect() const; // widget coordinates; empty when not shown
  QPointF pannerToCcd(QPointF widget) const;
  QPointF ccdToPanner(QPointF ccd) const;

  // --- caption (top left): which picture this is ("data", "model", "χ").
  void setCaption(const QString& text);
  QString caption() const { return m_caption; }

  // --- a crosshair at a CCD point (views showing the same CCD lock theirs).
  void setCrosshair(QPointF ccd);
  void clearCrosshair();
  bool hasCrosshair() const { return m_crossOn; }
  QPointF crosshair() const { return m_cross; }

  // --- contrast and bias, DS9's convention: right-drag right raises the bias
  //     (darker), up raises the contrast; the owner re-colours on contrastBiasChanged.
  double contrast() const { return m_contrast; }
  double bias() const { return m_bias; }
  void setContrastBias(double contrast, double bias); // emits when it changes
  void resetContrastBias() { setContrastBias(1.0, 0.5); }

  // --- tools: Navigate (drag pans), Box (drag draws a box region), Cut (drag draws a
  //     line). Shift+drag is the rubber band in every tool.
  enum class Tool { Navigate, Box, Cut };
  void setTool(Tool t);
  Tool tool() const { return m_tool; }
  QRectF boxRegion() const { return m_box; }   // CCD, empty when none
  QLineF cutLine() const { return m_cut; }     // CCD, null when none
  void setBoxRegion(const QRectF& ccd);
  void setCutLine(const QLineF& ccd);
  void clearRegions();

  // Text drawn with a dark outline, readable on any colour (labels over images).
  static void drawHaloText(QPainter& p, const QPointF& baseline, const QString& text, const QColor& fill);

public slots:
  void fit();
  void zoomOneToOne();
  void zoomIn();
  void zoomOut();

signals:
  void hovered(QPointF ccd);
  void hoverLeft();
  void clicked(QPointF ccd, Qt::KeyboardModifiers modifiers);
  void rubberBandSelected(QRectF ccd, Qt::KeyboardModifiers modifiers);
  void contrastBiasChanged(double contrast, double bias);
  void boxRegionChanged(QRectF ccd);
  void cutChanged(QLineF ccd);

protected:
  // Drawn after the picture with the painter in widget coordinates; use
  // ccdToWidget() to place things.
  virtual void paintOverlays(QPainter& /*painter*/) {}
  // Inside a paint: the time since the previous mark (or the paint's start) went to
  // `section` (summed when a name comes back).
  void markPaintSection(const QString& section);

  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void keyPressEvent(QKeyEvent*) override;
  void resizeEvent(QResizeEvent*) override;
  void showEvent(QShowEvent*) override;
  void leaveEvent(QEvent*) override;

private:
  void drawPyramid(QPainter& p, const Pyramid& pyr) const;
  int imageRows() const;
  void drawDecorations(QPainter& p);
  void drawColorBar(QPainter& p) const;
  void drawAxes(QPainter& p) const;
  void drawPanner(QPainter& p) const;
  void drawRegions(QPainter& p) const;
  QSize imageExtent() const;
  int pannerBox() const; // the square the panner fits in, px

  QPointer<ViewState> m_state;
  Pyramid m_picture;
  Pyramid m_alternate;
  bool m_showAlternate = false;
  Pyramid m_layer;
  bool m_layerVisible = false;
  QImage m_empty;
  bool m_fitPending = true;
  bool m_leadsFit = true;
  bool m_autoFit = true;    // the view is a fit the user has not changed yet
  bool m_inFit = false;

  QVector<QRgb> m_barTable;
  ScaleRange m_barRange;
  Stretch m_barStretch = Stretch::Linear;
  QString m_barUnit;
  bool m_barVisible = true;
  bool m_axes = false;
  bool m_pannerEnabled = true;
  QString m_caption;
  bool m_crossOn = false;
  QPointF m_cross;
  double m_contrast = 1.0, m_bias = 0.5;
  double m_pressContrast = 1.0, m_pressBias = 0.5;
  Tool m_tool = Tool::Navigate;
  QRectF m_box;
  QLineF m_cut;

  enum class Drag { None, Pan, Band, Contrast, Panner, Box, Cut };
  Drag m_drag = Drag::None;
  QPoint m_pressPos;
  QPoint m_lastPos;
  QPointF m_pressCenter;
  bool m_moved = false;
  double m_lastPaintMs = 0;
  PaintSections m_sections;
  QElapsedTimer m_sectionTimer;
  qint64 m_sectionMark = 0;
};

} // namespace spex
