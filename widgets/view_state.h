// ViewState: the one object every view follows (STYLE.md, after hotspot's
// FilterAndZoomStack). It owns the CCD zoom and pan, the selected fibers, wavelength
// and patches, and the hover position; views change it and react to its signals
// instead of calling each other.
#pragma once

#include <QObject>
#include <QPointF>
#include <QSize>
#include <QVector>

#include <cmath>
#include <limits>

namespace spex {

class ViewState : public QObject {
  Q_OBJECT
public:
  static constexpr double kMinZoom = 1.0 / 64;
  static constexpr double kMaxZoom = 64.0;

  explicit ViewState(QObject* parent = nullptr);

  // --- zoom and pan: zoom is screen pixels per CCD pixel, center is the CCD point
  //     (x = column, y = row) shown at the middle of every image view.
  double zoom() const { return m_zoom; }
  QPointF center() const { return m_center; }
  void setView(QPointF center, double zoom);
  void setZoom(double zoom) { setView(m_center, zoom); }
  void setCenter(QPointF center) { setView(center, m_zoom); }
  // Zooms by factor keeping the CCD point `anchor` where it is on screen.
  void zoomAround(double factor, QPointF anchor);
  // The CCD size, so fit and clamping know the extent.
  QSize imageSize() const { return m_imageSize; }
  void setImageSize(QSize size);
  // Zoom and centre that show the whole image in a widget of the given size.
  void fitTo(QSize widgetSize);

  // --- selection
  int selectedFiber() const { return m_fibers.isEmpty() ? -1 : m_fibers.last(); }
  QVector<int> selectedFibers() const { return m_fibers; }
  void selectFiber(int fiber, bool add = false); // -1 clears (unless add)
  void setSelectedFibers(const QVector<int>& fibers);
  double selectedWave() const { return m_wave; } // NaN when none
  void setSelectedWave(double wave);
  QVector<int> selectedPatches() const { return m_patches; }
  void setSelectedPatches(const QVector<int>& patches);

  // --- fiber labels: views work with PSF fiber indices (0..499) but label them with
  //     the FIBER numbers of the exposure's FIBERMAP (petal p: 500 p + index).
  //     Empty: labels are the indices.
  void setFiberNumbers(const QVector<int>& fiberNumbers);
  int fiberNumber(int index) const {
    return index >= 0 && index < m_fiberNumbers.size() ? m_fiberNumbers[index] : index;
  }

  // --- hover (cursor over the CCD or over the spectrum plot)
  int hoverFiber() const { return m_hoverFiber; }
  double hoverWave() const { return m_hoverWave; }
  void setHover(int fiber, double wave);

signals:
  void viewChanged();
  void fibersChanged();
  void waveChanged();
  void patchesChanged();
  void hoverChanged();

private:
  double m_zoom = 1.0;
  QPointF m_center{0, 0};
  QSize m_imageSize;
  QVector<int> m_fibers;
  double m_wave = std::numeric_limits<double>::quiet_NaN();
  QVector<int> m_patches;
  QVector<int> m_fiberNumbers;
  int m_hoverFiber = -1;
  double m_hoverWave = std::numeric_limits<double>::quiet_NaN();
};

} // namespace spex
