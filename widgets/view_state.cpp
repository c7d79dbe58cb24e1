#include "view_state.h"

#include <algorithm>

namespace spex {

namespace {
bool sameWave(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }
} // namespace

ViewState::ViewState(QObject* parent) : QObject(parent) {}

void ViewState::setView(QPointF center, double zoom) {
  zoom = std::clamp(zoom, kMinZoom, kMaxZoom);
  if (m_imageSize.isValid()) {
    // Keep at least the image's centre within reach: never pan into empty space
    // further than one image away.
    center.setX(std::clamp(center.x(), -0.5, m_imageSize.width() - 0.5));
    center.setY(std::clamp(center.y(), -0.5, m_imageSize.height() - 0.5));
  }
  if (zoom == m_zoom && center == m_center) return;
  m_zoom = zoom;
  m_center = center;
  emit viewChanged();
}

void ViewState::zoomAround(double factor, QPointF anchor) {
  const double z = std::clamp(m_zoom * factor, kMinZoom, kMaxZoom);
  const double k = m_zoom / z;
  // anchor stays put on screen: new centre = anchor - (anchor - centre) * old / new.
  setView(anchor - (anchor - m_center) * k, z);
}

void ViewState::setImageSize(QSize size) {
  if (size == m_imageSize) return;
  m_imageSize = size;
  setView(m_center, m_zoom);
}

void ViewState::fitTo(QSize widgetSize) {
  if (!m_imageSize.isValid() || m_imageSize.isEmpty() || widgetSize.isEmpty()) return;
  const double z = std::min(double(widgetSize.width()) / m_imageSize.width(),
                            double(widgetSize.height()) / m_imageSize.height());
  setView(QPointF(0.5 * m_imageSize.width() - 0.5, 0.5 * m_imageSize.height() - 0.5), z);
}

void ViewState::selectFiber(int fiber, bool add) {
  QVector<int> f = add ? m_fibers : QVector<int>{};
  if (fiber >= 0) {
    f.removeAll(fiber);
    f.push_back(fiber); // the last one is "the" selected fiber
  }
  setSelectedFibers(f);
}

void ViewState::setSelectedFibers(const QVector<int>& fibers) {
  if (fibers == m_fibers) return;
  m_fibers = fibers;
  emit fibersChanged();
}

void ViewState::setSelectedWave(double wave) {
  if (sameWave(wave, m_wave)) return;
  m_wave = wave;
  emit waveChanged();
}

void ViewState::setSelectedPatches(const QVector<int>& patches) {
  if (patches == m_patches) return;
  m_patches = patches;
  emit patchesChanged();
}

void ViewState::setFiberNumbers(const QVector<int>& fiberNumbers) {
  if (fiberNumbers == m_fiberNumbers) return;
  m_fiberNumbers = fiberNumbers;
  emit viewChanged(); // every view redraws its labels
  emit fibersChanged();
}

void ViewState::setHover(int fiber, double wave) {
  if (fiber == m_hoverFiber && sameWave(wave, m_hoverWave)) return;
  m_hoverFiber = fiber;
  m_hoverWave = wave;
  emit hoverChanged();
}

} // namespace spex
