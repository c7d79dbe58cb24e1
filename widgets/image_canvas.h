// ImageCanvas: a CCD-sized picture that zooms and pans with the shared ViewState.
// The picture is rendered once (image_scale.h) into an RGB image plus a pyramid of
// 2x2-averaged copies; a paint copies only the visible part of the level nearest the
// zoom, so pan and zoom cost the widget's pixels, not the image's.
// Mouse: wheel zooms about the cursor, drag pans, shift+drag draws a rubber band,
// click reports the CCD point. Keys: + - zoom, F fit, 1 one-to-one, arrows pan.
#pragma once

#include "view_state.h"

#include <QImage>

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

  // The canvas that leads the shared view re-fits on resize until the user zooms or
  // pans; followers (a second view of the same CCD) never fit on their own.
  void setLeadsFit(bool on) { m_leadsFit = on; }
  // Zoom on a CCD rectangle (e.g. the lit fibers of a simulation).
  void zoomToRect(const QRectF& ccd);

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

protected:
  // Drawn after the picture with the painter in widget coordinates; use
  // ccdToWidget() to place things.
  virtual void paintOverlays(QPainter& /*painter*/) {}

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

  enum class Drag { None, Pan, Band };
  Drag m_drag = Drag::None;
  QPoint m_pressPos;
  QPoint m_lastPos;
  QPointF m_pressCenter;
  bool m_moved = false;
  double m_lastPaintMs = 0;
};

} // namespace spex
