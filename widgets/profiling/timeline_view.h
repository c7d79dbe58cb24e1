// TimelineView: the phases of one or more runs (Profile) on a shared time axis. One
// row per lane (CPU thread, CUDA stream) and nesting depth; ranges carry their NVTX
// names. Wheel zooms about the cursor, drag pans, shift+drag (or right-drag) selects a
// time range, Esc clears it, double-click shows everything; hovering a range shows its
// name, duration and patch. Painting costs the visible ranges only: each row is kept
// sorted with a running maximum of end times, so the first visible range is a binary
// search away, and ranges narrower than a pixel are merged into one block.
// The time axis (window, selection, highlighted phase) is a TimeAxisState that other
// views may share; a view made alone owns one. With a phase highlighted, its zones are
// outlined and never merged (a sub-pixel one is a tick) and the others are faded.
#pragma once

#include "time_axis_state.h"

#include "core/profile/profile.h"

#include <QString>
#include <QVector>
#include <QWidget>

#include <memory>
#include <vector>

namespace spex {

// One run in the timeline. Several tracks stack on one time axis (run comparison).
struct TimelineTrack {
  QString label; // "cpu", "cuda:0", a file name; drawn above the track's lanes
  std::shared_ptr<const Profile> profile;
};

class TimelineView : public QWidget {
  Q_OBJECT
public:
  explicit TimelineView(QWidget* parent = nullptr);

  void setProfile(std::shared_ptr<const Profile> profile, const QString& label = {});
  void setTracks(const QVector<TimelineTrack>& tracks);
  int trackCount() const { return int(m_tracks.size()); }
  std::shared_ptr<const Profile> profile(int track = 0) const;
  QString trackLabel(int track) const;

  // --- the time axis (ns since the runs' origin), shared with other views by
  //     setTimeAxis; the calls below go to it.
  void setTimeAxis(TimeAxisState* axis); // nullptr: back to the view's own
  TimeAxisState* timeAxis() const { return m_axis; }
  int64_t totalNs() const { return m_totalNs; } // longest track's wall time
  int64_t viewStart() const { return m_axis->viewStart(); }
  int64_t viewEnd() const { return m_axis->viewEnd(); }
  void setViewRange(int64_t t0, int64_t t1) { m_axis->setViewRange(t0, t1); }
  void resetView() { m_axis->resetView(); }
  // Zooms by `factor` (> 1 zooms in) keeping the time under widget x fixed.
  void zoomAt(double x, double factor);

  // --- selection; empty when end <= start
  bool hasSelection() const { return m_axis->hasSelection(); }
  int64_t selectionStart() const { return m_axis->selectionStart(); }
  int64_t selectionEnd() const { return m_axis->selectionEnd(); }
  void setSelection(int64_t t0, int64_t t1) { m_axis->setSelection(t0, t1); }
  void clearSelection() { m_axis->clearSelection(); }

  // --- highlighted phase (the axis's) and the zone jumped to
  QString highlightedPhase() const { return m_axis->highlightedPhase(); }
  // Shows range `index` of track `track`: the window centred on it (it fills a third),
  // its row scrolled into view and the zone outlined until another is shown.
  void showZone(int track, int index);
  int focusTrack() const { return m_focusTrack; }
  int focusZone() const { return m_focusZone; }
  // The row of a range (lane and depth), -1 when it has none.
  int rowOf(int track, int index) const;

  // --- geometry, for tests and tools
  int rowCount() const { return int(m_rows.size()); }
  QString rowLabel(int row) const;
  int rowTop(int row) const;
  static constexpr int kRowHeight = 16;
  int gutterWidth() const { return kGutter; }
  double xOf(int64_t t) const;
  int64_t timeAt(double x) const;
  // The innermost range under a widget point, nullptr when none.
  const ProfileRange* rangeAt(QPoint pos, int* track = nullptr) const;
  QString toolTipAt(QPoint pos) const; // empty when no range is there

  // What the last paint did: boxes drawn, merged sub-pixel blocks, milliseconds.
  int lastDrawnRanges() const { return m_drawn; }
  int lastMergedBlocks() const { return m_merged; }
  int lastHighlightedRanges() const { return m_highlighted; } // zones of the highlighted phase drawn
  int contentHeight() const { return m_contentHeight; }
  double lastPaintMs() const { return m_paintMs; }

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

signals:
  void viewRangeChanged(qint64 t0, qint64 t1);
  void selectionChanged(qint64 t0, qint64 t1); // t1 <= t0: cleared
  // A click (no drag) on a range that belongs to a patch.
  void patchClicked(int track, int patch);

protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;
  void mouseDoubleClickEvent(QMouseEvent*) override;
  void keyPressEvent(QKeyEvent*) override;
  bool event(QEvent*) override;

private:
  static constexpr int kGutter = 130;
  static constexpr int kRuler = 22;
  static constexpr int kTrackHeader = 16;

  struct Row {
    int track = 0, lane = 0, depth = 0;
    int top = 0;                 // widget y of the row
    bool firstOfLane = false;
    std::vector<int> ranges;     // indices into the profile, sorted by start
    std::vector<int64_t> maxEnd; // running maximum of the ends, for the binary search
  };
  struct Header {
    int track = 0, top = 0;
  };

  void rebuildRows();
  int rowAtY(int y) const;
  void paintRow(QPainter& p, const Row& row, const QRect& clip);
  void paintRuler(QPainter& p);
  int64_t t0() const { return m_axis->viewStart(); }
  int64_t t1() const { return m_axis->viewEnd(); }

  std::vector<TimelineTrack> m_tracks;
  std::vector<Row> m_rows;
  std::vector<Header> m_headers;
  std::vector<std::vector<int64_t>> m_self; // self time of each range, per track
  int m_contentHeight = kRuler;
  int64_t m_totalNs = 1;
  TimeAxisState* m_ownAxis;
  TimeAxisState* m_axis;
  bool m_liveSelecting = false; // a shift-drag in progress: drawn, not yet the axis's
  int64_t m_live0 = 0, m_live1 = 0;
  int m_focusTrack = -1, m_focusZone = -1;

  enum class Drag { None, Pan, Select };
  Drag m_drag = Drag::None;
  QPoint m_pressPos;
  int64_t m_pressT0 = 0, m_pressT1 = 0;
  bool m_moved = false;

  int m_drawn = 0, m_merged = 0, m_highlighted = 0;
  double m_paintMs = 0;
};

// A stable colour per phase name, so "solve" looks the same in every view.
QColor phaseColor(const std::string& name);
// "1.234 ms", "56.7 µs", "2.345 s"
QString formatDuration(double seconds);
// "512 B", "1.50 KiB", "12.3 MiB", "1.20 GiB"
QString formatBytes(double bytes);
// "12.3 GB/s" (decimal, as bandwidths are quoted); "" when not positive.
QString formatRate(double bytesPerS);
// A kernel's launch configuration: "grid 24×1×1, block 256×1×1 (6 144 threads), 64
// registers/thread, shared 1.50 KiB static + 4.00 KiB dynamic per block".
// `sep` goes between the size and the resources ("<br>" in a tooltip).
QString launchText(const KernelLaunch& launch, const QString& sep = QStringLiteral(", "));
// A copy's or set's bytes, direction and rate: "1.50 MiB host → device, 12.3 GB/s".
QString transferText(const std::string& kind, const std::string& copyKind, double bytes, double seconds);
// The tooltip lines (HTML) of a device activity of the kernel profile: what launched it
// and how (launchText or transferText), the engine phase it ran in, device and stream.
QString kernelRecordHtml(const KernelRecord& k, int64_t durationNs, const std::string& rangeName);

} // namespace spex
