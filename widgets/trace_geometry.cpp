#include "trace_geometry.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace spex {

TraceGeometry::TraceGeometry(std::shared_ptr<const GaussHermitePsf> psf, int samples)
    : m_psf(std::move(psf)) {
  if (!m_psf) return;
  m_waveMin = m_psf->waveMin();
  m_waveMax = m_psf->waveMax();
  samples = std::max(samples, 2);
  m_traces.resize(m_psf->nfiber);
  m_bounds.resize(m_psf->nfiber);
  for (int f = 0; f < m_psf->nfiber; ++f) {
    QPolygonF poly;
    poly.reserve(samples);
    for (int i = 0; i < samples; ++i) {
      const double w = m_waveMin + (m_waveMax - m_waveMin) * i / (samples - 1);
      poly.push_back(at(f, w));
    }
    m_bounds[f] = poly.boundingRect();
    m_traces[f] = std::move(poly);
  }
  // Median neighbour distance at mid-wavelength; bundle gaps do not move a median.
  if (m_psf->nfiber > 1) {
    const double wmid = 0.5 * (m_waveMin + m_waveMax);
    std::vector<double> d;
    for (int f = 1; f < m_psf->nfiber; ++f) d.push_back(std::abs(at(f, wmid).x() - at(f - 1, wmid).x()));
    std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
    if (d[d.size() / 2] > 0) m_spacing = d[d.size() / 2];
  }
}

QPointF TraceGeometry::at(int fiber, double wave) const {
  return QPointF(m_psf->x(fiber, wave), m_psf->y(fiber, wave));
}

double TraceGeometry::xAtRow(int fiber, double y) const {
  const QPolygonF& t = m_traces[fiber];
  if (t.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  const bool up = t.front().y() <= t.back().y(); // y(w) is monotonic along a trace
  const double ylo = up ? t.front().y() : t.back().y();
  const double yhi = up ? t.back().y() : t.front().y();
  if (y < ylo || y > yhi) return std::numeric_limits<double>::quiet_NaN();
  // Binary search for the segment holding y.
  int lo = 0, hi = int(t.size()) - 1;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if ((t[mid].y() < y) == up) lo = mid;
    else hi = mid;
  }
  const double dy = t[hi].y() - t[lo].y();
  const double f = dy != 0 ? (y - t[lo].y()) / dy : 0.0;
  return t[lo].x() + f * (t[hi].x() - t[lo].x());
}

int TraceGeometry::nearestFiber(QPointF p, double* dxOut) const {
  int best = -1;
  double bestDx = std::numeric_limits<double>::infinity();
  for (int f = 0; f < nfiber(); ++f) {
    const QRectF& b = m_bounds[f];
    if (p.y() < b.top() || p.y() > b.bottom()) continue;
    if (p.x() < b.left() - bestDx || p.x() > b.right() + bestDx) continue;
    const double x = xAtRow(f, p.y());
    if (std::isnan(x)) continue;
    const double dx = std::abs(x - p.x());
    if (dx < bestDx) {
      bestDx = dx;
      best = f;
    }
  }
  if (dxOut) *dxOut = bestDx;
  return best;
}

double TraceGeometry::edgeX(int fiber, double wave, int side) const {
  const double x = m_psf->x(fiber, wave);
  const int nb = fiber + side;
  if (nb >= 0 && nb < nfiber()) {
    const double xn = m_psf->x(nb, wave);
    // Across a bundle gap the midpoint would be far away; cap at one spacing.
    const double half = 0.5 * (xn - x);
    if (std::abs(half) <= m_spacing) return x + half;
  }
  return x + side * 0.5 * m_spacing;
}

QPolygonF TraceGeometry::regionOutline(int fiber0, int nfib, double wlo, double whi) const {
  QPolygonF poly;
  if (empty() || nfib <= 0) return poly;
  const int f1 = fiber0 + nfib - 1;
  // Traces are nearly straight over a patch; long runs get more points.
  const int n = 2 + int(std::abs(whi - wlo) / 40.0);
  for (int i = 0; i < n; ++i) {
    const double w = wlo + (whi - wlo) * i / (n - 1);
    poly.push_back(QPointF(edgeX(fiber0, w, -1), m_psf->y(fiber0, w)));
  }
  for (int i = n - 1; i >= 0; --i) {
    const double w = wlo + (whi - wlo) * i / (n - 1);
    poly.push_back(QPointF(edgeX(f1, w, +1), m_psf->y(f1, w)));
  }
  poly.push_back(poly.front());
  return poly;
}

QPolygonF TraceGeometry::isoWavelength(double wave) const {
  QPolygonF poly;
  poly.reserve(nfiber());
  for (int f = 0; f < nfiber(); ++f) poly.push_back(at(f, wave));
  return poly;
}

QPolygonF TraceGeometry::boundaryBefore(int fiber) const {
  QPolygonF poly;
  if (fiber <= 0 || fiber >= nfiber()) return poly;
  const QPolygonF& a = m_traces[fiber - 1];
  const QPolygonF& b = m_traces[fiber];
  for (int i = 0; i < a.size(); ++i) poly.push_back(0.5 * (a[i] + b[i]));
  return poly;
}

} // namespace spex
