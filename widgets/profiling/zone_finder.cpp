#include "zone_finder.h"

#include "timeline_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMouseEvent>
#include <QPainter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <set>

namespace spex {

// --- DurationHistogram

DurationHistogram::DurationHistogram(QWidget* parent) : QWidget(parent) {
  setToolTip(tr("Zone durations, log scale. Click a bar to list only its zones; click it again for all."));
}

void DurationHistogram::setDurations(std::vector<int64_t> ns) {
  m_counts.clear();
  m_selected = -1;
  if (!ns.empty()) {
    std::sort(ns.begin(), ns.end());
    m_min = std::max<int64_t>(1, ns.front());
    m_max = std::max<int64_t>(m_min, ns.back());
    m_logLo = std::log10(double(m_min));
    m_logHi = std::log10(double(m_max));
    double sum = 0;
    for (int64_t v : ns) sum += double(v);
    m_mean = sum / double(ns.size());
    const std::size_t n = ns.size();
    m_median = n % 2 ? double(ns[n / 2]) : 0.5 * double(ns[n / 2 - 1] + ns[n / 2]);
    m_counts.assign(m_max > m_min ? kBins : 1, 0);
    for (int64_t v : ns) m_counts[std::max(0, binOf(v))]++;
  }
  update();
}

int DurationHistogram::binOf(int64_t ns) const {
  if (m_counts.empty() || ns < 0 || ns > m_max) return -1;
  if (binCount() == 1 || ns <= m_min) return 0; // zero-length zones count in the first bin
  const double t = (std::log10(double(std::max<int64_t>(1, ns))) - m_logLo) / (m_logHi - m_logLo);
  int b = std::clamp(int(t * binCount()), 0, binCount() - 1);
  // Agree exactly with the integer edges binLow/binHigh (rounding of the logarithms).
  while (b > 0 && ns < binLow(b)) --b;
  while (b < binCount() - 1 && ns >= binLow(b + 1)) ++b;
  return b;
}

int64_t DurationHistogram::binLow(int bin) const {
  if (binCount() == 1 || bin <= 0) return m_min; // exactly (10^log10 may round up)
  return int64_t(std::ceil(std::pow(10.0, m_logLo + (m_logHi - m_logLo) * bin / binCount())));
}

int64_t DurationHistogram::binHigh(int bin) const {
  if (binCount() == 1 || bin == binCount() - 1) return m_max;
  return binLow(bin + 1) - 1;
}

void DurationHistogram::setSelectedBin(int bin) {
  m_selected = bin >= 0 && bin < binCount() ? bin : -1;
  update();
}

QRect DurationHistogram::plotRect() const {
  const int text = fontMetrics().height();
  return rect().adjusted(40, 6, -8, -(text + 6));
}

QRect DurationHistogram::barRect(int bin) const {
  const QRect g = plotRect();
  if (bin < 0 || bin >= binCount()) return {};
  const double w = double(g.width()) / binCount();
  return QRectF(g.left() + bin * w, g.top(), w, g.height()).toAlignedRect();
}

void DurationHistogram::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  const QRect g = plotRect();
  p.setPen(palette().text().color());
  if (m_counts.empty()) {
    p.drawText(rect(), Qt::AlignCenter, tr("No zones"));
    return;
  }
  const int top = *std::max_element(m_counts.begin(), m_counts.end());
  for (int b = 0; b < binCount(); ++b) {
    const QRect c = barRect(b);
    const int h = int(std::lround(double(g.height()) * m_counts[b] / std::max(1, top)));
    if (b == m_selected) p.fillRect(c, QColor(60, 130, 255, 50));
    if (m_counts[b] > 0)
      p.fillRect(QRect(c.left(), g.bottom() + 1 - std::max(1, h), std::max(1, c.width() - 1), std::max(1, h)),
                 b == m_selected ? QColor(40, 100, 230) : QColor(90, 150, 90));
  }
  // Mean and median markers, on the same log axis.
  auto xOf = [&](double ns) {
    if (binCount() == 1) return double(g.center().x());
    return g.left() + g.width() * (std::log10(std::max(1.0, ns)) - m_logLo) / (m_logHi - m_logLo);
  };
  p.setPen(QPen(QColor(220, 60, 60), 1, Qt::DashLine));
  p.drawLine(QPointF(xOf(m_mean), g.top()), QPointF(xOf(m_mean), g.bottom()));
  p.setPen(QPen(QColor(60, 60, 220), 1, Qt::DotLine));
  p.drawLine(QPointF(xOf(m_median), g.top()), QPointF(xOf(m_median), g.bottom()));
  p.setPen(palette().text().color());
  p.drawLine(g.bottomLeft(), g.bottomRight());
  p.drawText(QRect(0, g.top(), g.left() - 4, 14), Qt::AlignRight | Qt::AlignTop, QString::number(top));
  p.drawText(QRect(0, g.bottom() - 14, g.left() - 4, 14), Qt::AlignRight | Qt::AlignBottom, QStringLiteral("0"));
  const QRect under(g.left(), g.bottom() + 2, g.width(), fontMetrics().height());
  p.drawText(under, Qt::AlignLeft, formatDuration(m_min * 1e-9));
  p.drawText(under, Qt::AlignRight, formatDuration(m_max * 1e-9));
  p.drawText(under, Qt::AlignHCenter, tr("mean (red) %1, median (blue) %2")
                                          .arg(formatDuration(m_mean * 1e-9), formatDuration(m_median * 1e-9)));
}

void DurationHistogram::mouseReleaseEvent(QMouseEvent* e) {
  for (int b = 0; b < binCount(); ++b)
    if (barRect(b).contains(e->pos())) {
      setSelectedBin(b == m_selected ? -1 : b);
      emit binClicked(m_selected);
      return;
    }
}

// --- ZoneFinder

ZoneFinder::ZoneFinder(QWidget* parent) : QWidget(parent) {
  m_name = new QComboBox;
  m_name->setEditable(true);
  m_name->setInsertPolicy(QComboBox::NoInsert);
  m_name->lineEdit()->setPlaceholderText(tr("zone name, e.g. solve"));
  m_name->setMinimumContentsLength(16);
  m_stats = new QLabel;
  m_stats->setWordWrap(true);
  m_stats->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_hist = new DurationHistogram;
  m_table = new QTableWidget(0, 6);
  m_table->setHorizontalHeaderLabels({tr("Zone"), tr("Duration"), tr("Self"), tr("Start"), tr("Lane"), tr("Patch")});
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->verticalHeader()->hide();
  m_table->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 4);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->setToolTip(tr("Click a zone to show it on the timeline (and its patch on the CCD)."));
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Find zone")));
  bar->addWidget(m_name, 1);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->addLayout(bar);
  lay->addWidget(m_stats);
  lay->addWidget(m_hist);
  lay->addWidget(m_table, 1);
  connect(m_name, &QComboBox::currentTextChanged, this, [this](const QString& t) { find(t); });
  connect(m_hist, &DurationHistogram::binClicked, this, [this] { fill(); });
  connect(m_table, &QTableWidget::cellClicked, this, [this](int row, int) {
    const int i = m_table->item(row, 0)->data(Qt::UserRole).toInt();
    emit zoneActivated(i);
    if (m_profile && m_profile->ranges[i].patch >= 0) emit patchActivated(m_profile->ranges[i].patch);
  });
}

void ZoneFinder::setProfile(std::shared_ptr<const Profile> profile) {
  m_profile = std::move(profile);
  m_self = m_profile ? selfTimesNs(*m_profile) : std::vector<int64_t>{};
  const QString keep = m_name->currentText();
  {
    const QSignalBlocker block(m_name);
    m_name->clear();
    std::set<std::string> names;
    if (m_profile)
      for (const ProfileRange& r : m_profile->ranges) names.insert(r.name);
    for (const std::string& n : names) m_name->addItem(QString::fromStdString(n));
    m_name->setEditText(keep);
  }
  find(keep);
}

QString ZoneFinder::query() const { return m_name->currentText(); }

void ZoneFinder::find(const QString& name) {
  if (m_name->currentText() != name) {
    const QSignalBlocker block(m_name);
    m_name->setEditText(name);
  }
  m_matches.clear();
  if (m_profile && !name.trimmed().isEmpty()) {
    const std::string exact = name.trimmed().toStdString();
    bool any = false;
    for (const ProfileRange& r : m_profile->ranges) any = any || r.name == exact;
    for (int i = 0; i < int(m_profile->ranges.size()); ++i) {
      const std::string& n = m_profile->ranges[i].name;
      if (any ? n == exact : QString::fromStdString(n).contains(name.trimmed(), Qt::CaseInsensitive))
        m_matches.push_back(i);
    }
    std::stable_sort(m_matches.begin(), m_matches.end(), [&](int a, int b) {
      return m_profile->ranges[a].durationNs() > m_profile->ranges[b].durationNs();
    });
  }
  std::vector<int64_t> d;
  for (int i : m_matches) d.push_back(m_profile->ranges[i].durationNs());
  m_hist->setDurations(std::move(d));
  fill();
}

QString ZoneFinder::statsText() const { return m_stats->text(); }

void ZoneFinder::fill() {
  const int bin = m_hist->selectedBin();
  m_shown.clear();
  for (int i : m_matches)
    if (bin < 0 || m_hist->binOf(m_profile->ranges[i].durationNs()) == bin) m_shown.push_back(i);
  if (m_matches.empty()) {
    m_stats->setText(query().trimmed().isEmpty() ? tr("Type or pick a zone name.")
                                                 : tr("No zone named like \u201c%1\u201d.").arg(query()));
  } else {
    // Statistics of the listed zones (all, or one histogram bar's).
    double total = 0, self = 0;
    for (int i : m_shown) {
      total += m_profile->ranges[i].durationNs() * 1e-9;
      self += m_self[i] * 1e-9;
    }
    const std::size_t n = m_shown.size();
    const auto dur = [&](std::size_t k) { return m_profile->ranges[m_shown[k]].durationNs() * 1e-9; };
    const double median = n % 2 ? dur(n / 2) : 0.5 * (dur(n / 2 - 1) + dur(n / 2));
    m_stats->setText(tr("%1 zones%2: total %3 (self %4), mean %5, median %6, min %7, max %8")
                         .arg(n)
                         .arg(bin >= 0 ? tr(" in %1 \u2013 %2").arg(formatDuration(m_hist->binLow(bin) * 1e-9),
                                                                   formatDuration(m_hist->binHigh(bin) * 1e-9))
                                       : QString())
                         .arg(formatDuration(total), formatDuration(self), formatDuration(total / double(n)),
                              formatDuration(median), formatDuration(dur(n - 1)), formatDuration(dur(0))));
  }
  // The slowest first; a long list is cut (the statistics above are of all of them).
  const int rows = int(std::min<std::size_t>(m_shown.size(), 1000));
  m_table->setSortingEnabled(false);
  m_table->setRowCount(rows);
  for (int k = 0; k < rows; ++k) {
    const ProfileRange& r = m_profile->ranges[m_shown[k]];
    auto* name = new QTableWidgetItem(QString::fromStdString(r.name));
    name->setData(Qt::UserRole, m_shown[k]);
    name->setData(Qt::DecorationRole, phaseColor(r.name));
    m_table->setItem(k, 0, name);
    m_table->setItem(k, 1, new QTableWidgetItem(formatDuration(r.durationNs() * 1e-9)));
    m_table->setItem(k, 2, new QTableWidgetItem(formatDuration(m_self[m_shown[k]] * 1e-9)));
    m_table->setItem(k, 3, new QTableWidgetItem(formatDuration(r.startNs * 1e-9)));
    m_table->setItem(k, 4, new QTableWidgetItem(QString::fromStdString(m_profile->lanes[r.lane])));
    m_table->setItem(k, 5, new QTableWidgetItem(r.patch >= 0 ? QString::number(r.patch) : QString()));
    for (int c = 1; c < 4; ++c) m_table->item(k, c)->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  }
}

} // namespace spex
