#include "time_axis_state.h"

#include <algorithm>

namespace spex {

TimeAxisState::TimeAxisState(QObject* parent) : QObject(parent) {}

void TimeAxisState::setExtent(const QObject* view, int64_t ns) {
  if (ns > 0) m_extents[view] = ns;
  else m_extents.remove(view);
  int64_t e = 1;
  for (int64_t v : m_extents) e = std::max(e, v);
  m_extent = e;
  clearSelection();
  resetView();
}

void TimeAxisState::setViewRange(int64_t t0, int64_t t1) {
  // Keep at least kMinWindowNs visible and stay near the runs: a little slack each side.
  const int64_t slack = m_extent / 20;
  const int64_t w = std::clamp<int64_t>(t1 - t0, kMinWindowNs, m_extent + 2 * slack);
  t0 = std::clamp<int64_t>(t0, -slack, m_extent + slack - w);
  if (t0 == m_t0 && t0 + w == m_t1) return;
  m_t0 = t0;
  m_t1 = t0 + w;
  emit viewRangeChanged(m_t0, m_t1);
}

void TimeAxisState::resetView() {
  // Bypass the slack clamp so the whole extent fits exactly.
  m_t0 = 0;
  m_t1 = std::max<int64_t>(m_extent, kMinWindowNs);
  emit viewRangeChanged(m_t0, m_t1);
}

void TimeAxisState::setSelection(int64_t t0, int64_t t1) {
  if (t1 < t0) std::swap(t0, t1);
  if (t1 == t0) t0 = t1 = 0;
  if (t0 == m_s0 && t1 == m_s1) return;
  m_s0 = t0;
  m_s1 = t1;
  emit selectionChanged(m_s0, m_s1);
}

void TimeAxisState::setHighlightedPhase(const QString& name) {
  if (name == m_phase) return;
  m_phase = name;
  emit highlightChanged(m_phase);
}

} // namespace spex
