// TimeAxisState: the one time axis the profiling views share (STYLE.md, after
// hotspot's FilterAndZoomStack): the visible window, the selected time range and the
// highlighted phase. The timeline, the phase table and the run comparison follow it by
// signals instead of calling each other, so zooming or selecting in one is seen in all.
// Times are ns since the runs' origin (every run starts at 0).
#pragma once

#include <QHash>
#include <QObject>
#include <QString>

#include <cstdint>

namespace spex {

class TimeAxisState : public QObject {
  Q_OBJECT
public:
  static constexpr int64_t kMinWindowNs = 100; // zoom limit

  explicit TimeAxisState(QObject* parent = nullptr);

  // --- extent: the longest run any follower shows. Each view registers its own; a
  //     change resets the window to the whole extent and clears the selection.
  void setExtent(const QObject* view, int64_t ns);
  int64_t extentNs() const { return m_extent; }

  // --- visible window [viewStart, viewEnd)
  int64_t viewStart() const { return m_t0; }
  int64_t viewEnd() const { return m_t1; }
  // Clamped to at least kMinWindowNs and to the extent with a twentieth of slack.
  void setViewRange(int64_t t0, int64_t t1);
  void resetView(); // the whole extent, exactly

  // --- selected range; empty when end <= start
  bool hasSelection() const { return m_s1 > m_s0; }
  int64_t selectionStart() const { return m_s0; }
  int64_t selectionEnd() const { return m_s1; }
  void setSelection(int64_t t0, int64_t t1);
  void clearSelection() { setSelection(0, 0); }

  // --- the phase whose zones the timelines pick out ("" none)
  QString highlightedPhase() const { return m_phase; }
  void setHighlightedPhase(const QString& name);

signals:
  void viewRangeChanged(qint64 t0, qint64 t1);
  void selectionChanged(qint64 t0, qint64 t1); // t1 <= t0: cleared
  void highlightChanged(const QString& phase);

private:
  QHash<const QObject*, int64_t> m_extents;
  int64_t m_extent = 1;
  int64_t m_t0 = 0, m_t1 = 1;
  int64_t m_s0 = 0, m_s1 = 0;
  QString m_phase;
};

} // namespace spex
