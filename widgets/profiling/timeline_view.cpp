#include "timeline_view.h"

#include <QElapsedTimer>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollArea>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace spex {

namespace {

// 1, 2, 5 x 10^k at or above x.
double niceStep(double x) {
  if (x <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(x)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= x) return m * p;
  return 10 * p;
}

} // namespace

QColor phaseColor(const std::string& name) {
  // FNV-1a: stable across runs and platforms (qHash is seeded).
  uint32_t h = 2166136261u;
  for (unsigned char c : name) h = (h ^ c) * 16777619u;
  return QColor::fromHsv(int(h % 360), 110 + int((h >> 9) % 60), 200 + int((h >> 17) % 40));
}

QString formatDuration(double s) {
  const double a = std::abs(s);
  if (a >= 1) return QStringLiteral("%1 s").arg(s, 0, 'f', 3);
  if (a >= 1e-3) return QStringLiteral("%1 ms").arg(s * 1e3, 0, 'f', 3);
  if (a >= 1e-6) return QStringLiteral("%1 \u00b5s").arg(s * 1e6, 0, 'f', 1);
  return QStringLiteral("%1 ns").arg(s * 1e9, 0, 'f', 0);
}

QString formatBytes(double b) {
  const double a = std::abs(b);
  if (a < 1024) return QStringLiteral("%1 B").arg(b, 0, 'f', 0);
  if (a < 1024.0 * 1024) return QStringLiteral("%1 KiB").arg(b / 1024, 0, 'f', 2);
  if (a < 1024.0 * 1024 * 1024) return QStringLiteral("%1 MiB").arg(b / (1024.0 * 1024), 0, 'f', 2);
  return QStringLiteral("%1 GiB").arg(b / (1024.0 * 1024 * 1024), 0, 'f', 2);
}

QString formatRate(double r) {
  if (!(r > 0) || !std::isfinite(r)) return {};
  if (r >= 1e9) return QStringLiteral("%1 GB/s").arg(r * 1e-9, 0, 'f', 1);
  if (r >= 1e6) return QStringLiteral("%1 MB/s").arg(r * 1e-6, 0, 'f', 1);
  return QStringLiteral("%1 kB/s").arg(r * 1e-3, 0, 'f', 1);
}

QString launchText(const KernelLaunch& l, const QString& sep) {
  const int *grid = l.grid, *block = l.block;
  const int registers = l.registers, staticShared = l.staticShared, dynamicShared = l.dynamicShared;
  const qint64 threads = qint64(grid[0]) * grid[1] * grid[2] * block[0] * block[1] * block[2];
  QString s = QStringLiteral("grid %1×%2×%3, block %4×%5×%6 (%7 threads)%8%9 registers/thread")
                  .arg(grid[0]).arg(grid[1]).arg(grid[2]).arg(block[0]).arg(block[1]).arg(block[2])
                  .arg(threads).arg(sep).arg(registers);
  if (staticShared || dynamicShared)
    s += QStringLiteral(", shared %1 static + %2 dynamic per block")
             .arg(formatBytes(staticShared), formatBytes(dynamicShared));
  else
    s += QStringLiteral(", no shared memory");
  return s;
}

QString transferText(const std::string& kind, const std::string& copyKind, double bytes, double seconds) {
  QString dir;
  if (kind == "memset") dir = QStringLiteral("set on the device");
  else if (copyKind == "HtoD") dir = QStringLiteral("host → device");
  else if (copyKind == "DtoH") dir = QStringLiteral("device → host");
  else if (copyKind == "DtoD") dir = QStringLiteral("device → device");
  else if (copyKind == "HtoH") dir = QStringLiteral("host → host");
  else if (copyKind == "PtoP") dir = QStringLiteral("peer → peer");
  else if (copyKind == "mixed") dir = QStringLiteral("mixed directions");
  else dir = QStringLiteral("copy (%1)").arg(QString::fromStdString(copyKind.empty() ? "?" : copyKind));
  QString s = QStringLiteral("%1 %2").arg(formatBytes(bytes), dir);
  const QString rate = seconds > 0 ? formatRate(bytes / seconds) : QString();
  if (!rate.isEmpty()) s += QStringLiteral(", ") + rate;
  return s;
}

QString kernelRecordHtml(const KernelRecord& k, int64_t durationNs, const std::string& rangeName) {
  QString s;
  if (k.kind == "kernel") {
    s += QStringLiteral("<br>kernel: ") + launchText(k.launch, QStringLiteral("<br>"));
    if (!k.symbol.empty() && k.symbol != rangeName) {
      // Mangled names of templated kernels run to hundreds of characters.
      QString sym = QString::fromStdString(k.symbol);
      if (sym.size() > 64) sym = sym.left(61) + QStringLiteral("...");
      s += QStringLiteral("<br>symbol %1").arg(sym.toHtmlEscaped());
    }
  } else {
    s += QStringLiteral("<br>%1: %2")
             .arg(QString::fromStdString(k.kind), transferText(k.kind, k.copyKind, double(k.bytes), durationNs * 1e-9));
  }
  if (k.phase.empty())
    s += QStringLiteral("<br>phase: none (outside every phase of the engine)");
  else if (!k.rootPhase.empty() && k.rootPhase != k.phase)
    s += QStringLiteral("<br>phase: %1 (in %2)")
             .arg(QString::fromStdString(k.phase).toHtmlEscaped(), QString::fromStdString(k.rootPhase).toHtmlEscaped());
  else
    s += QStringLiteral("<br>phase: %1").arg(QString::fromStdString(k.phase).toHtmlEscaped());
  s += QStringLiteral("<br>device %1, CUPTI stream %2, correlation %3").arg(k.device).arg(k.stream).arg(k.correlation);
  return s;
}

TimelineView::TimelineView(QWidget* parent)
    : QWidget(parent), m_ownAxis(new TimeAxisState(this)), m_axis(nullptr) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setTimeAxis(nullptr);
}

void TimelineView::setTimeAxis(TimeAxisState* axis) {
  if (!axis) axis = m_ownAxis;
  if (axis == m_axis) return;
  if (m_axis) {
    m_axis->setExtent(this, 0);
    disconnect(m_axis, nullptr, this, nullptr);
  }
  m_axis = axis;
  connect(m_axis, &TimeAxisState::viewRangeChanged, this, [this](qint64 a, qint64 b) {
    update();
    emit viewRangeChanged(a, b);
  });
  connect(m_axis, &TimeAxisState::selectionChanged, this, [this](qint64 a, qint64 b) {
    update();
    emit selectionChanged(a, b);
  });
  connect(m_axis, &TimeAxisState::highlightChanged, this, [this] { update(); });
  if (!m_tracks.empty()) m_axis->setExtent(this, m_totalNs);
  update();
}

void TimelineView::setProfile(std::shared_ptr<const Profile> profile, const QString& label) {
  QVector<TimelineTrack> t;
  if (profile) t.push_back({label, std::move(profile)});
  setTracks(t);
}

void TimelineView::setTracks(const QVector<TimelineTrack>& tracks) {
  m_tracks.assign(tracks.begin(), tracks.end());
  m_tracks.erase(std::remove_if(m_tracks.begin(), m_tracks.end(),
                                [](const TimelineTrack& t) { return !t.profile; }),
                 m_tracks.end());
  rebuildRows();
  m_focusTrack = m_focusZone = -1;
  // A new extent resets the shared window and clears its selection.
  m_axis->setExtent(this, m_tracks.empty() ? 0 : m_totalNs);
  updateGeometry();
  update();
}

std::shared_ptr<const Profile> TimelineView::profile(int track) const {
  return track >= 0 && track < trackCount() ? m_tracks[track].profile : nullptr;
}

QString TimelineView::trackLabel(int track) const {
  return track >= 0 && track < trackCount() ? m_tracks[track].label : QString();
}

void TimelineView::rebuildRows() {
  m_rows.clear();
  m_headers.clear();
  m_self.clear();
  for (const TimelineTrack& t : m_tracks) m_self.push_back(selfTimesNs(*t.profile));
  m_totalNs = 1;
  int y = kRuler;
  const bool headers = m_tracks.size() > 1 || (!m_tracks.empty() && !m_tracks[0].label.isEmpty());
  for (int t = 0; t < trackCount(); ++t) {
    const Profile& p = *m_tracks[t].profile;
    m_totalNs = std::max({m_totalNs, p.wallNs, int64_t(1)});
    if (headers) {
      m_headers.push_back({t, y});
      y += kTrackHeader;
    }
    // Bucket by (lane, depth); lanes in profile order, depths ascending.
    std::vector<std::vector<std::vector<int>>> buckets(p.lanes.size());
    for (int i = 0; i < int(p.ranges.size()); ++i) {
      const ProfileRange& r = p.ranges[i];
      m_totalNs = std::max(m_totalNs, r.endNs);
      if (r.lane < 0 || r.lane >= int(p.lanes.size()) || r.depth < 0) continue;
      auto& lane = buckets[r.lane];
      if (int(lane.size()) <= r.depth) lane.resize(r.depth + 1);
      lane[r.depth].push_back(i);
    }
    for (int lane = 0; lane < int(buckets.size()); ++lane) {
      if (buckets[lane].empty()) continue;
      for (int d = 0; d < int(buckets[lane].size()); ++d) {
        Row row;
        row.track = t;
        row.lane = lane;
        row.depth = d;
        row.top = y;
        row.firstOfLane = d == 0;
        row.ranges = std::move(buckets[lane][d]);
        std::stable_sort(row.ranges.begin(), row.ranges.end(),
                         [&](int a, int b) { return p.ranges[a].startNs < p.ranges[b].startNs; });
        row.maxEnd.resize(row.ranges.size());
        int64_t m = INT64_MIN;
        for (std::size_t k = 0; k < row.ranges.size(); ++k)
          row.maxEnd[k] = m = std::max(m, p.ranges[row.ranges[k]].endNs);
        m_rows.push_back(std::move(row));
        y += kRowHeight;
      }
      y += 3; // gap between lanes
    }
  }
  m_contentHeight = y + 4;
}

QSize TimelineView::sizeHint() const { return {800, std::max(m_contentHeight, 120)}; }
QSize TimelineView::minimumSizeHint() const { return {kGutter + 100, std::max(m_contentHeight, 60)}; }

QString TimelineView::rowLabel(int row) const {
  if (row < 0 || row >= rowCount()) return {};
  const Row& r = m_rows[row];
  const Profile& p = *m_tracks[r.track].profile;
  return QString::fromStdString(p.lanes[r.lane]) +
         (r.depth > 0 ? QStringLiteral(" [%1]").arg(r.depth) : QString());
}

int TimelineView::rowTop(int row) const { return row >= 0 && row < rowCount() ? m_rows[row].top : -1; }

void TimelineView::zoomAt(double x, double factor) {
  if (factor <= 0) return;
  const int64_t anchor = timeAt(x);
  const double w = double(viewEnd() - viewStart()) / factor;
  const double frac = (x - kGutter) / std::max(1.0, double(width() - kGutter));
  const int64_t s0 = anchor - int64_t(std::llround(w * frac));
  setViewRange(s0, s0 + int64_t(std::llround(w)));
}

int TimelineView::rowOf(int track, int index) const {
  const auto p = profile(track);
  if (!p || index < 0 || index >= int(p->ranges.size())) return -1;
  const ProfileRange& r = p->ranges[index];
  for (int i = 0; i < rowCount(); ++i)
    if (m_rows[i].track == track && m_rows[i].lane == r.lane && m_rows[i].depth == r.depth) return i;
  return -1;
}

void TimelineView::showZone(int track, int index) {
  const int row = rowOf(track, index);
  if (row < 0) return;
  const ProfileRange& r = m_tracks[track].profile->ranges[index];
  m_focusTrack = track;
  m_focusZone = index;
  const int64_t d = std::max<int64_t>(r.durationNs(), TimeAxisState::kMinWindowNs);
  setViewRange(r.startNs - d, r.endNs + d);
  // Inside a scroll area (the docks): bring the zone's row into view.
  if (auto* area = parentWidget() ? qobject_cast<QScrollArea*>(parentWidget()->parentWidget()) : nullptr)
    area->ensureVisible(int(xOf((r.startNs + r.endNs) / 2)), m_rows[row].top + kRowHeight / 2, 10, 2 * kRowHeight);
  update();
}

double TimelineView::xOf(int64_t t) const {
  const double w = double(std::max(1, width() - kGutter));
  return kGutter + double(t - t0()) * w / double(std::max<int64_t>(1, t1() - t0()));
}

int64_t TimelineView::timeAt(double x) const {
  const double w = double(std::max(1, width() - kGutter));
  return t0() + int64_t(std::llround((x - kGutter) * double(t1() - t0()) / w));
}

int TimelineView::rowAtY(int y) const {
  for (int i = 0; i < rowCount(); ++i)
    if (y >= m_rows[i].top && y < m_rows[i].top + kRowHeight) return i;
  return -1;
}

const ProfileRange* TimelineView::rangeAt(QPoint pos, int* track) const {
  if (pos.x() < kGutter) return nullptr;
  const int ri = rowAtY(pos.y());
  if (ri < 0) return nullptr;
  const Row& row = m_rows[ri];
  const Profile& p = *m_tracks[row.track].profile;
  // Two pixels of slack so thin ranges can be hovered.
  const int64_t a = timeAt(pos.x() - 2), b = timeAt(pos.x() + 2), t = timeAt(pos.x());
  auto it = std::upper_bound(row.maxEnd.begin(), row.maxEnd.end(), a);
  const ProfileRange* best = nullptr;
  int64_t bestDist = INT64_MAX;
  for (std::size_t k = std::size_t(it - row.maxEnd.begin()); k < row.ranges.size(); ++k) {
    const ProfileRange& r = p.ranges[row.ranges[k]];
    if (r.startNs > b) break;
    if (r.endNs < a) continue;
    const int64_t dist = t < r.startNs ? r.startNs - t : t > r.endNs ? t - r.endNs : 0;
    if (dist < bestDist) {
      best = &r;
      bestDist = dist;
    }
  }
  if (best && track) *track = row.track;
  return best;
}

QString TimelineView::toolTipAt(QPoint pos) const {
  int track = 0;
  const ProfileRange* r = rangeAt(pos, &track);
  if (!r) return {};
  const Profile& p = *m_tracks[track].profile;
  QString s = QStringLiteral("<b>%1</b><br>%2").arg(QString::fromStdString(r->name).toHtmlEscaped(),
                                                     formatDuration(r->durationNs() * 1e-9));
  const std::size_t index = std::size_t(r - p.ranges.data());
  if (index < m_self[track].size() && m_self[track][index] != r->durationNs())
    s += tr(" (self %1)").arg(formatDuration(m_self[track][index] * 1e-9));
  if (r->kernel >= 0 && std::size_t(r->kernel) < p.kernels.size())
    s += kernelRecordHtml(p.kernels[r->kernel], r->durationNs(), r->name);
  if (r->patch >= 0) s += QStringLiteral("<br>%1 %2").arg(r->kernel >= 0 ? tr("batch") : tr("patch")).arg(r->patch);
  s += QStringLiteral("<br>%1, depth %2<br>start %3")
           .arg(QString::fromStdString(p.lanes[r->lane]).toHtmlEscaped())
           .arg(r->depth)
           .arg(formatDuration(r->startNs * 1e-9));
  if (trackCount() > 1) s += QStringLiteral("<br>run %1").arg(m_tracks[track].label.toHtmlEscaped());
  return s;
}

void TimelineView::paintRow(QPainter& p, const Row& row, const QRect& clip) {
  const Profile& prof = *m_tracks[row.track].profile;
  const int64_t v0 = t0();
  const int64_t span = std::max<int64_t>(1, t1() - v0);
  const double scale = double(std::max(1, width() - kGutter)) / double(span);
  const int y = row.top + 1, h = kRowHeight - 2;
  const double left = std::max(kGutter, clip.left()), right = std::min(width(), clip.right() + 1);
  const int64_t tLeft = v0 + int64_t((left - kGutter) / scale) - 1;
  const int64_t tRight = v0 + int64_t((right - kGutter) / scale) + 1;
  auto it = std::upper_bound(row.maxEnd.begin(), row.maxEnd.end(), tLeft);
  const QFontMetrics fm = p.fontMetrics();
  const int minTextWidth = fm.horizontalAdvance(QStringLiteral("ab..."));
  const std::string highlight = highlightedPhase().toStdString();
  const bool dim = !highlight.empty();
  const QColor base = palette().base().color();
  // Other phases fade towards the background while one is highlighted.
  auto faded = [&](QColor c) {
    return QColor((c.red() + 3 * base.red()) / 4, (c.green() + 3 * base.green()) / 4, (c.blue() + 3 * base.blue()) / 4);
  };

  // A run of sub-pixel ranges becomes one block [mx0, mx1], drawn in a neutral colour.
  double mx0 = 0, mx1 = -1;
  auto flush = [&] {
    if (mx1 < mx0) return;
    const QColor grey(150, 150, 160);
    p.fillRect(QRectF(mx0, y, std::max(1.0, mx1 - mx0), h), dim ? faded(grey) : grey);
    ++m_merged;
    mx1 = -1;
  };
  std::vector<QRectF> marks; // highlighted zones, outlined over everything else
  for (std::size_t k = std::size_t(it - row.maxEnd.begin()); k < row.ranges.size(); ++k) {
    const ProfileRange& r = prof.ranges[row.ranges[k]];
    if (r.startNs > tRight) break;
    if (r.endNs < tLeft) continue;
    const double x0 = kGutter + double(r.startNs - v0) * scale;
    const double x1 = kGutter + double(r.endNs - v0) * scale;
    const bool hl = dim && r.name == highlight;
    if (x1 - x0 < 1.0 && !hl) {
      if (mx1 >= mx0 && x0 <= mx1 + 1.0) {
        mx1 = std::max(mx1, x1);
      } else {
        flush();
        mx0 = x0;
        mx1 = x1;
      }
      continue;
    }
    flush();
    const double cx0 = std::max(x0, left - 1), cx1 = std::min(x1, right + 1);
    // A highlighted zone narrower than a pixel is still a 2-pixel tick.
    const QRectF box(cx0, y, hl ? std::max(2.0, cx1 - cx0) : cx1 - cx0, h);
    const QColor c = phaseColor(r.name);
    p.fillRect(box, dim && !hl ? faded(c) : c);
    ++m_drawn;
    if (hl) {
      ++m_highlighted;
      if (box.width() >= 6) marks.push_back(box); // narrower: the full colour on faded ones says it
    } else if (box.width() > 4) {
      p.setPen((dim ? faded(c) : c).darker(150));
      p.drawRect(box.adjusted(0, 0, -1, -1));
    }
    if (box.width() > minTextWidth) {
      p.setPen(dim && !hl ? QColor(120, 120, 120) : QColor(Qt::black));
      const QString text = fm.elidedText(QString::fromStdString(r.name), Qt::ElideRight, int(box.width()) - 4);
      p.drawText(box.adjusted(2, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft, text);
    }
  }
  flush();
  if (!marks.empty()) {
    p.setPen(QPen(Qt::black, 2));
    p.setBrush(Qt::NoBrush);
    for (const QRectF& b : marks) p.drawRect(b.adjusted(1, 1, -1, -1));
  }
  // The zone jumped to (find zone, slowest patches): a thick outline in the selection
  // colour, at least 6 px wide so it can be found.
  if (m_focusTrack == row.track && m_focusZone >= 0 && m_focusZone < int(prof.ranges.size())) {
    const ProfileRange& r = prof.ranges[m_focusZone];
    if (r.lane == row.lane && r.depth == row.depth) {
      double x0 = kGutter + double(r.startNs - v0) * scale, x1 = kGutter + double(r.endNs - v0) * scale;
      if (x1 - x0 < 6) {
        const double c = (x0 + x1) / 2;
        x0 = c - 3;
        x1 = c + 3;
      }
      p.setPen(QPen(QColor(255, 120, 0), 3));
      p.setBrush(Qt::NoBrush);
      p.drawRect(QRectF(x0, y - 1, x1 - x0, h + 2));
    }
  }
}

void TimelineView::paintRuler(QPainter& p) {
  p.fillRect(QRect(0, 0, width(), kRuler), palette().window());
  p.setPen(palette().windowText().color());
  const double span = double(t1() - t0()) * 1e-9;
  const double step = niceStep(span / std::max(2.0, (width() - kGutter) / 90.0));
  const double first = std::ceil(t0() * 1e-9 / step) * step;
  for (double t = first; t <= t1() * 1e-9 + 1e-15; t += step) {
    const double x = xOf(int64_t(std::llround(t * 1e9)));
    p.drawLine(QPointF(x, kRuler - 6), QPointF(x, kRuler));
    p.drawText(QPointF(x + 2, kRuler - 8), formatDuration(t));
  }
  p.drawLine(0, kRuler - 1, width(), kRuler - 1);
}

void TimelineView::paintEvent(QPaintEvent* e) {
  QElapsedTimer timer;
  timer.start();
  m_drawn = m_merged = m_highlighted = 0;
  QPainter p(this);
  const QRect clip = e->rect();
  p.fillRect(clip, palette().base());
  if (m_tracks.empty()) {
    p.setPen(palette().placeholderText().color());
    p.drawText(rect(), Qt::AlignCenter, tr("No profile yet: run an extraction or open a Chrome trace."));
    m_paintMs = double(timer.nsecsElapsed()) * 1e-6;
    return;
  }
  QFont small = font();
  small.setPointSizeF(std::max(6.0, small.pointSizeF() - 1));
  p.setFont(small);

  for (const Row& row : m_rows) {
    if (row.top + kRowHeight < clip.top() || row.top > clip.bottom()) continue;
    if (row.depth % 2) p.fillRect(QRect(kGutter, row.top, width() - kGutter, kRowHeight), palette().alternateBase());
    paintRow(p, row, clip);
  }
  // Gutter with lane names, track headers, ruler and selection on top.
  p.fillRect(QRect(0, kRuler, kGutter, height()), palette().window());
  p.setPen(palette().windowText().color());
  for (int i = 0; i < rowCount(); ++i) {
    const Row& row = m_rows[i];
    if (!row.firstOfLane) continue;
    const QString name = QString::fromStdString(m_tracks[row.track].profile->lanes[row.lane]);
    p.drawText(QRect(6, row.top, kGutter - 10, kRowHeight), Qt::AlignVCenter | Qt::AlignLeft,
               p.fontMetrics().elidedText(name, Qt::ElideRight, kGutter - 10));
    p.setPen(palette().mid().color());
    p.drawLine(0, row.top - 2, width(), row.top - 2);
    p.setPen(palette().windowText().color());
  }
  QFont bold = small;
  bold.setBold(true);
  p.setFont(bold);
  for (const Header& h : m_headers) {
    p.fillRect(QRect(0, h.top, width(), kTrackHeader), palette().button());
    const Profile& prof = *m_tracks[h.track].profile;
    p.drawText(QRect(6, h.top, width() - 12, kTrackHeader), Qt::AlignVCenter | Qt::AlignLeft,
               tr("%1 \u2014 wall %2").arg(m_tracks[h.track].label, formatDuration(prof.wallNs * 1e-9)));
  }
  p.setFont(small);
  paintRuler(p);
  const int64_t s0 = m_liveSelecting ? std::min(m_live0, m_live1) : selectionStart();
  const int64_t s1 = m_liveSelecting ? std::max(m_live0, m_live1) : selectionEnd();
  if (s1 > s0) {
    const double x0 = std::max<double>(kGutter, xOf(s0)), x1 = std::min<double>(width(), xOf(s1));
    if (x1 > x0) {
      p.fillRect(QRectF(x0, kRuler, x1 - x0, height() - kRuler), QColor(60, 130, 255, 50));
      p.setPen(QColor(60, 130, 255));
      p.drawLine(QPointF(x0, kRuler), QPointF(x0, height()));
      p.drawLine(QPointF(x1, kRuler), QPointF(x1, height()));
      p.drawText(QPointF(x0 + 3, kRuler + 12), formatDuration((s1 - s0) * 1e-9));
    }
  }
  m_paintMs = double(timer.nsecsElapsed()) * 1e-6;
}

void TimelineView::wheelEvent(QWheelEvent* e) {
  const double steps = e->angleDelta().y() / 120.0;
  if (steps == 0) {
    e->ignore();
    return;
  }
  zoomAt(e->position().x(), std::pow(1.25, steps));
  e->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* e) {
  m_pressPos = e->pos();
  m_pressT0 = t0();
  m_pressT1 = t1();
  m_moved = false;
  if (e->button() == Qt::RightButton ||
      (e->button() == Qt::LeftButton && (e->modifiers() & Qt::ShiftModifier)))
    m_drag = Drag::Select;
  else if (e->button() == Qt::LeftButton)
    m_drag = Drag::Pan;
}

void TimelineView::mouseMoveEvent(QMouseEvent* e) {
  if (m_drag == Drag::None) return;
  if ((e->pos() - m_pressPos).manhattanLength() >= 3) m_moved = true;
  if (!m_moved) return;
  if (m_drag == Drag::Pan) {
    const double w = double(std::max(1, width() - kGutter));
    const int64_t dt = int64_t(std::llround((e->pos().x() - m_pressPos.x()) * double(m_pressT1 - m_pressT0) / w));
    setViewRange(m_pressT0 - dt, m_pressT1 - dt);
  } else {
    // Live feedback; the shared selection changes on release.
    m_liveSelecting = true;
    m_live0 = std::max<int64_t>(0, timeAt(m_pressPos.x()));
    m_live1 = std::max<int64_t>(0, timeAt(e->pos().x()));
    update();
  }
}

void TimelineView::mouseReleaseEvent(QMouseEvent* e) {
  const Drag d = m_drag;
  m_drag = Drag::None;
  m_liveSelecting = false;
  if (d == Drag::Select && m_moved) {
    const int64_t a = std::max<int64_t>(0, timeAt(m_pressPos.x()));
    const int64_t b = std::max<int64_t>(0, timeAt(e->pos().x()));
    setSelection(a, b);
    update();
  } else if (d == Drag::Pan && !m_moved) {
    int track = 0;
    if (const ProfileRange* r = rangeAt(e->pos(), &track); r && r->patch >= 0)
      emit patchClicked(track, r->patch);
  }
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent*) { resetView(); }

void TimelineView::keyPressEvent(QKeyEvent* e) {
  switch (e->key()) {
  case Qt::Key_Escape:
    // Esc clears the selection, then the highlighted phase.
    if (hasSelection()) clearSelection();
    else m_axis->setHighlightedPhase({});
    break;
  case Qt::Key_Plus:
  case Qt::Key_Equal: zoomAt(kGutter + (width() - kGutter) / 2.0, 1.5); break;
  case Qt::Key_Minus: zoomAt(kGutter + (width() - kGutter) / 2.0, 1 / 1.5); break;
  case Qt::Key_F:
  case Qt::Key_0: resetView(); break;
  case Qt::Key_Z:
    if (hasSelection()) setViewRange(selectionStart(), selectionEnd());
    break;
  default: QWidget::keyPressEvent(e);
  }
}

bool TimelineView::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* he = static_cast<QHelpEvent*>(e);
    const QString tip = toolTipAt(he->pos());
    if (tip.isEmpty()) QToolTip::hideText();
    else QToolTip::showText(he->globalPos(), tip, this);
    return true;
  }
  return QWidget::event(e);
}

} // namespace spex
