// TraceGeometry: where the PSF's fibers fall on the CCD, cached as polylines for
// drawing and cursor look-ups (nearest fiber, wavelength at a row), and the outlines
// of fiber x wavelength regions (patches, extracted runs) in CCD coordinates.
#pragma once

#include "core/psf/gauss_hermite_psf.h"

#include <QPolygonF>
#include <QRectF>

#include <memory>
#include <vector>

namespace spex {

class TraceGeometry {
public:
  TraceGeometry() = default;
  // samples: points per trace, evenly spaced in wavelength over the PSF's domain.
  explicit TraceGeometry(std::shared_ptr<const GaussHermitePsf> psf, int samples = 160);

  bool empty() const { return !m_psf; }
  const GaussHermitePsf* psf() const { return m_psf.get(); }
  int nfiber() const { return int(m_traces.size()); }
  double waveMin() const { return m_waveMin; }
  double waveMax() const { return m_waveMax; }

  const QPolygonF& trace(int fiber) const { return m_traces[fiber]; }
  const QRectF& bounds(int fiber) const { return m_bounds[fiber]; }
  QPointF at(int fiber, double wave) const;

  // x of the trace at CCD row y, interpolated between samples; NaN outside its rows.
  double xAtRow(int fiber, double y) const;
  // Fiber whose trace passes closest (in x) to p, or -1 when no trace covers row p.y.
  int nearestFiber(QPointF p, double* dx = nullptr) const;
  // Typical distance between neighbouring traces, pixels (for label and click sizes).
  double fiberSpacing() const { return m_spacing; }

  // Outline of fibers [fiber0, fiber0 + nfiber) between wavelengths wlo and whi: the
  // left and right edges run halfway to the neighbouring traces.
  QPolygonF regionOutline(int fiber0, int nfiber, double wlo, double whi) const;
  // Line of constant wavelength across all fibers.
  QPolygonF isoWavelength(double wave) const;
  // Boundary between fibers `fiber - 1` and `fiber`, along the whole trace.
  QPolygonF boundaryBefore(int fiber) const;

private:
  double edgeX(int fiber, double wave, int side) const; // side -1 left, +1 right

  std::shared_ptr<const GaussHermitePsf> m_psf;
  std::vector<QPolygonF> m_traces;
  std::vector<QRectF> m_bounds;
  double m_waveMin = 0, m_waveMax = 0;
  double m_spacing = 7.0;
};

} // namespace spex
