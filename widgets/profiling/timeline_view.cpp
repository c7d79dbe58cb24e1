#include "timeline_view.h"

#include <QElapsedTimer>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>

namespace spex {

namespace {

constexpr int64_t kMinWindowNs = 100; // zoom limit: 100 ns across the widget

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

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
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
  m_s0 = m_s1 = 0;
  resetView();
  updateGeometry();
  emit selectionChanged(0, 0);
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

void TimelineView::setViewRange(int64_t t0, int64_t t1) {
  // Keep at least kMinWindowNs visible and stay near the runs: a little slack each side.
  const int64_t slack = m_totalNs / 20;
  int64_t w = std::clamp<int64_t>(t1 - t0, kMinWindowNs, m_totalNs + 2 * slack);
  t0 = std::clamp<int64_t>(t0, -slack, m_totalNs + slack - w);
  if (t0 == m_t0 && t0 + w == m_t1) return;
  m_t0 = t0;
  m_t1 = t0 + w;
  update();
  emit viewRangeChanged(m_t0, m_t1);
}

void TimelineView::resetView() {
  // Bypass the slack clamp so the whole run fits exactly.
  m_t0 = 0;
  m_t1 = std::max<int64_t>(m_totalNs, kMinWindowNs);
  update();
  emit viewRangeChanged(m_t0, m_t1);
}

void TimelineView::zoomAt(double x, double factor) {
  if (factor <= 0) return;
  const int64_t anchor = timeAt(x);
  const double w = double(m_t1 - m_t0) / factor;
  const double frac = (x - kGutter) / std::max(1.0, double(width() - kGutter));
  const int64_t t0 = anchor - int64_t(std::llround(w * frac));
  setViewRange(t0, t0 + int64_t(std::llround(w)));
}

void TimelineView::setSelection(int64_t t0, int64_t t1) {
  if (t1 < t0) std::swap(t0, t1);
  if (t1 == t0) t0 = t1 = 0;
  if (t0 == m_s0 && t1 == m_s1) return;
  m_s0 = t0;
  m_s1 = t1;
  update();
  emit selectionChanged(m_s0, m_s1);
}

double TimelineView::xOf(int64_t t) const {
  const double w = double(std::max(1, width() - kGutter));
  return kGutter + double(t - m_t0) * w / double(std::max<int64_t>(1, m_t1 - m_t0));
}

int64_t TimelineView::timeAt(double x) const {
  const double w = double(std::max(1, width() - kGutter));
  return m_t0 + int64_t(std::llround((x - kGutter) * double(m_t1 - m_t0) / w));
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
  if (r->patch >= 0) s += QStringLiteral("<br>patch %1").arg(r->patch);
  s += QStringLiteral("<br>%1, depth %2<br>start %3")
           .arg(QString::fromStdString(p.lanes[r->lane]).toHtmlEscaped())
           .arg(r->depth)
           .arg(formatDuration(r->startNs * 1e-9));
  if (trackCount() > 1) s += QStringLiteral("<br>run %1").arg(m_tracks[track].label.toHtmlEscaped());
  return s;
}

void TimelineView::paintRow(QPainter& p, const Row& row, const QRect& clip) {
  const Profile& prof = *m_tracks[row.track].profile;
  const int64_t span = std::max<int64_t>(1, m_t1 - m_t0);
  const double scale = double(std::max(1, width() - kGutter)) / double(span);
  const int y = row.top + 1, h = kRowHeight - 2;
  const double left = std::max(kGutter, clip.left()), right = std::min(width(), clip.right() + 1);
  const int64_t tLeft = m_t0 + int64_t((left - kGutter) / scale) - 1;
  const int64_t tRight = m_t0 + int64_t((right - kGutter) / scale) + 1;
  auto it = std::upper_bound(row.maxEnd.begin(), row.maxEnd.end(), tLeft);
  const QFontMetrics fm = p.fontMetrics();
  const int minTextWidth = fm.horizontalAdvance(QStringLiteral("ab..."));

  // A run of sub-pixel ranges becomes one block [mx0, mx1], drawn in a neutral colour.
  double mx0 = 0, mx1 = -1;
  auto flush = [&] {
    if (mx1 < mx0) return;
    p.fillRect(QRectF(mx0, y, std::max(1.0, mx1 - mx0), h), QColor(150, 150, 160));
    ++m_merged;
    mx1 = -1;
  };
  for (std::size_t k = std::size_t(it - row.maxEnd.begin()); k < row.ranges.size(); ++k) {
    const ProfileRange& r = prof.ranges[row.ranges[k]];
    if (r.startNs > tRight) break;
    if (r.endNs < tLeft) continue;
    const double x0 = kGutter + double(r.startNs - m_t0) * scale;
    const double x1 = kGutter + double(r.endNs - m_t0) * scale;
    if (x1 - x0 < 1.0) {
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
    const QRectF box(cx0, y, cx1 - cx0, h);
    const QColor c = phaseColor(r.name);
    p.fillRect(box, c);
    ++m_drawn;
    if (box.width() > 4) {
      p.setPen(c.darker(150));
      p.drawRect(box.adjusted(0, 0, -1, -1));
    }
    if (box.width() > minTextWidth) {
      p.setPen(Qt::black);
      const QString text = fm.elidedText(QString::fromStdString(r.name), Qt::ElideRight, int(box.width()) - 4);
      p.drawText(box.adjusted(2, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft, text);
    }
  }
  flush();
}

void TimelineView::paintRuler(QPainter& p) {
  p.fillRect(QRect(0, 0, width(), kRuler), palette().window());
  p.setPen(palette().windowText().color());
  const double span = double(m_t1 - m_t0) * 1e-9;
  const double step = niceStep(span / std::max(2.0, (width() - kGutter) / 90.0));
  const double first = std::ceil(m_t0 * 1e-9 / step) * step;
  for (double t = first; t <= m_t1 * 1e-9 + 1e-15; t += step) {
    const double x = xOf(int64_t(std::llround(t * 1e9)));
    p.drawLine(QPointF(x, kRuler - 6), QPointF(x, kRuler));
    p.drawText(QPointF(x + 2, kRuler - 8), formatDuration(t));
  }
  p.drawLine(0, kRuler - 1, width(), kRuler - 1);
}

void TimelineView::paintEvent(QPaintEvent* e) {
  QElapsedTimer timer;
  timer.start();
  m_drawn = m_merged = 0;
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
  if (hasSelection()) {
    const double x0 = std::max<double>(kGutter, xOf(m_s0)), x1 = std::min<double>(width(), xOf(m_s1));
    if (x1 > x0) {
      p.fillRect(QRectF(x0, kRuler, x1 - x0, height() - kRuler), QColor(60, 130, 255, 50));
      p.setPen(QColor(60, 130, 255));
      p.drawLine(QPointF(x0, kRuler), QPointF(x0, height()));
      p.drawLine(QPointF(x1, kRuler), QPointF(x1, height()));
      p.drawText(QPointF(x0 + 3, kRuler + 12), formatDuration((m_s1 - m_s0) * 1e-9));
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
  m_pressT0 = m_t0;
  m_pressT1 = m_t1;
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
    // Live feedback; the selection signal fires on release.
    const QSignalBlocker block(this);
    setSelection(std::max<int64_t>(0, timeAt(m_pressPos.x())), std::max<int64_t>(0, timeAt(e->pos().x())));
    update();
  }
}

void TimelineView::mouseReleaseEvent(QMouseEvent* e) {
  const Drag d = m_drag;
  m_drag = Drag::None;
  if (d == Drag::Select && m_moved) {
    const int64_t a = std::max<int64_t>(0, timeAt(m_pressPos.x()));
    const int64_t b = std::max<int64_t>(0, timeAt(e->pos().x()));
    m_s0 = m_s1 = -1; // force the signal even though the live drag already set it
    setSelection(a, b);
  } else if (d == Drag::Pan && !m_moved) {
    int track = 0;
    if (const ProfileRange* r = rangeAt(e->pos(), &track); r && r->patch >= 0)
      emit patchClicked(track, r->patch);
  }
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent*) { resetView(); }

void TimelineView::keyPressEvent(QKeyEvent* e) {
  switch (e->key()) {
  case Qt::Key_Escape: clearSelection(); break;
  case Qt::Key_Plus:
  case Qt::Key_Equal: zoomAt(kGutter + (width() - kGutter) / 2.0, 1.5); break;
  case Qt::Key_Minus: zoomAt(kGutter + (width() - kGutter) / 2.0, 1 / 1.5); break;
  case Qt::Key_F:
  case Qt::Key_0: resetView(); break;
  case Qt::Key_Z:
    if (hasSelection()) setViewRange(m_s0, m_s1);
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
