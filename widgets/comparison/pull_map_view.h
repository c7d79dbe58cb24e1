// PullMapView: a fiber x wavelength map of |Δ|/σ between two extractions (the pulls
// of core/extract/compare's binPull), one cell per (spectrum, bin), on a logarithmic
// colour scale with its colour bar; grey where a bin is not compared. Fibers run down
// the rows, wavelength along the columns. A cross marks the ViewState's selected fiber
// and wavelength; clicking a cell emits it (the comparison view turns that into a
// selection), hovering says the value under the cursor.
#pragma once

#include "core/array.h"
#include "core/plan/patch_plan.h"

#include <QImage>
#include <QWidget>

#include <cmath>
#include <limits>

namespace spex {

class PullMapView : public QWidget {
  Q_OBJECT
public:
  explicit PullMapView(QWidget* parent = nullptr);

  // Signed pulls [nfiber, nwave] of spectra fiberMin.. on `wave` (NaN: not compared,
  // +Inf: compared but not finite). fiberLabels: the FIBER of each row (empty: index).
  void setMap(const Array2D<double>& pulls, int fiberMin, const WaveGrid& wave, const QVector<int>& fiberLabels = {});
  void clear();
  bool isEmpty() const { return m_nfiber == 0; }

  // The selection cross (fiber index, wavelength), NaN/-1 for none.
  void setMarker(int fiber, double wave);

  // Colour-scale limits of |Δ|/σ (log scale; 0 maps to the low end).
  double scaleLow() const { return m_lo; }
  double scaleHigh() const { return m_hi; }
  // The map's cells on screen, and the cell under a widget point (false outside).
  QRectF cellRect(int fiber, int bin) const;
  bool cellAt(QPointF pos, int* fiber, int* bin) const;
  QRgb cellColor(int fiber, int bin) const; // as painted (before scaling to the widget)
  QString readout() const { return m_readout; } // what the cursor is over

  QSize sizeHint() const override { return {480, 220}; }
  QSize minimumSizeHint() const override { return {200, 120}; }

signals:
  // A cell was clicked: its spectrum (fiber index) and wavelength.
  void cellClicked(int fiber, double wave);
  void hovered(const QString& readout);

protected:
  void paintEvent(QPaintEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void leaveEvent(QEvent*) override;

private:
  QRect mapRect() const;
  QRect barRect() const;
  QRgb colorOf(double pull) const;

  Array2D<double> m_pulls;
  int m_fiberMin = 0, m_nfiber = 0;
  WaveGrid m_wave;
  QVector<int> m_labels;
  QVector<QRgb> m_table; // Magma: dark agrees, bright differs
  QImage m_image; // one pixel per cell, row 0 = first spectrum
  double m_lo = 1e-6, m_hi = 1;
  int m_markFiber = -1;
  double m_markWave = std::numeric_limits<double>::quiet_NaN();
  QString m_readout;
};

} // namespace spex
