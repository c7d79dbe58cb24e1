#include "phase_table.h"

#include "timeline_view.h"

#include <QHeaderView>
#include <QSortFilterProxyModel>

#include <cmath>

namespace spex {

namespace {

QVariant numberAlignment() { return int(Qt::AlignRight | Qt::AlignVCenter); }

QString ratioText(double r) {
  return std::isfinite(r) ? QStringLiteral("%1\u00d7").arg(r, 0, 'f', 3) : QStringLiteral("\u2013");
}

} // namespace

// --- PhaseStatsModel

void PhaseStatsModel::setStats(std::vector<PhaseStats> stats) {
  beginResetModel();
  m_stats = std::move(stats);
  endResetModel();
}

int PhaseStatsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(m_stats.size());
}

int PhaseStatsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant PhaseStatsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= int(m_stats.size())) return {};
  const PhaseStats& s = m_stats[index.row()];
  if (role == Qt::TextAlignmentRole) return index.column() == Name ? QVariant() : numberAlignment();
  if (role == Qt::DecorationRole && index.column() == Name) return phaseColor(s.name);
  if (role == Qt::UserRole) {
    switch (index.column()) {
    case Name: return QString::fromStdString(s.name);
    case Count: return s.count;
    case Total: return s.totalS;
    case Mean: return s.meanS;
    case Min: return s.minS;
    case Max: return s.maxS;
    case Share: return s.share;
    }
  }
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
    case Name: return QString::fromStdString(s.name);
    case Count: return s.count;
    case Total: return formatDuration(s.totalS);
    case Mean: return formatDuration(s.meanS);
    case Min: return formatDuration(s.minS);
    case Max: return formatDuration(s.maxS);
    case Share: return QStringLiteral("%1 %").arg(100 * s.share, 0, 'f', 1);
    }
  }
  return {};
}

QVariant PhaseStatsModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Phase", "Count", "Total", "Mean", "Min", "Max", "Share"};
  return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
}

// --- PhaseComparisonModel

void PhaseComparisonModel::setComparison(std::vector<PhaseComparison> rows, const QString& labelA,
                                         const QString& labelB) {
  beginResetModel();
  m_rows = std::move(rows);
  m_a = labelA;
  m_b = labelB;
  endResetModel();
  emit headerDataChanged(Qt::Horizontal, 0, ColumnCount - 1);
}

int PhaseComparisonModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(m_rows.size());
}

int PhaseComparisonModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant PhaseComparisonModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= int(m_rows.size())) return {};
  const PhaseComparison& c = m_rows[index.row()];
  if (role == Qt::TextAlignmentRole) return index.column() == Name ? QVariant() : numberAlignment();
  if (role == Qt::DecorationRole && index.column() == Name) return phaseColor(c.name);
  if (role == Qt::UserRole) {
    switch (index.column()) {
    case Name: return QString::fromStdString(c.name);
    case CountA: return c.a.count;
    case TotalA: return c.a.totalS;
    case CountB: return c.b.count;
    case TotalB: return c.b.totalS;
    case Ratio: return c.ratio;
    }
  }
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
    case Name: return QString::fromStdString(c.name);
    case CountA: return c.a.count;
    case TotalA: return c.a.count ? formatDuration(c.a.totalS) : QStringLiteral("\u2013");
    case CountB: return c.b.count;
    case TotalB: return c.b.count ? formatDuration(c.b.totalS) : QStringLiteral("\u2013");
    case Ratio: return ratioText(c.ratio);
    }
  }
  return {};
}

QVariant PhaseComparisonModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
  case Name: return tr("Phase");
  case CountA: return tr("%1 count").arg(m_a);
  case TotalA: return tr("%1 total").arg(m_a);
  case CountB: return tr("%1 count").arg(m_b);
  case TotalB: return tr("%1 total").arg(m_b);
  case Ratio: return tr("%1 / %2").arg(m_b, m_a);
  }
  return {};
}

// --- PhaseTable

PhaseTable::PhaseTable(QWidget* parent) : QTableView(parent) {
  m_model = new PhaseStatsModel(this);
  m_proxy = new QSortFilterProxyModel(this);
  m_proxy->setSourceModel(m_model);
  m_proxy->setSortRole(Qt::UserRole);
  setModel(m_proxy);
  setSortingEnabled(true);
  sortByColumn(PhaseStatsModel::Total, Qt::DescendingOrder);
  setSelectionBehavior(QAbstractItemView::SelectRows);
  setAlternatingRowColors(true);
  verticalHeader()->hide();
  verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 4);
  horizontalHeader()->setStretchLastSection(true);
  horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
}

void PhaseTable::setProfile(std::shared_ptr<const Profile> profile) {
  m_profile = std::move(profile);
  m_t0 = m_t1 = 0;
  refresh();
}

void PhaseTable::setTimeRange(qint64 t0, qint64 t1) {
  m_t0 = t0;
  m_t1 = t1;
  refresh();
}

void PhaseTable::refresh() {
  if (!m_profile) {
    m_model->setStats({});
    return;
  }
  m_model->setStats(hasTimeRange() ? m_profile->phaseStats(m_t0, m_t1) : m_profile->phaseStats());
}

QString PhaseTable::description() const {
  if (!m_profile) return tr("No profile");
  if (hasTimeRange())
    return tr("Selected %1 \u2013 %2 (%3); shares of the selection")
        .arg(formatDuration(m_t0 * 1e-9), formatDuration(m_t1 * 1e-9), formatDuration((m_t1 - m_t0) * 1e-9));
  return tr("Whole run, wall %1; shares of the wall time").arg(formatDuration(m_profile->wallNs * 1e-9));
}

} // namespace spex
