#include "phase_table.h"

#include "timeline_view.h"

#include <QHeaderView>
#include <QSortFilterProxyModel>

#include <algorithm>
#include <cmath>

namespace spex {

namespace {

QVariant numberAlignment() { return int(Qt::AlignRight | Qt::AlignVCenter); }

QString ratioText(double r) {
  return std::isfinite(r) ? QStringLiteral("%1\u00d7").arg(r, 0, 'f', 3) : QStringLiteral("\u2013");
}

} // namespace

// --- PhaseStatsModel

std::vector<PhaseStats> windowStats(const Profile& p, int64_t t0, int64_t t1, std::vector<int>* partial) {
  const std::vector<int64_t> self = selfTimesNs(p);
  struct Acc {
    PhaseStats s;
    double inside = 0;
    int partial = 0;
  };
  std::vector<Acc> acc;
  for (std::size_t i = 0; i < p.ranges.size(); ++i) {
    const ProfileRange& r = p.ranges[i];
    if (r.kernel >= 0 || r.endNs <= t0 || r.startNs >= t1) continue; // kernels: setKernelStats
    auto it = std::find_if(acc.begin(), acc.end(), [&](const Acc& a) { return a.s.name == r.name; });
    if (it == acc.end()) {
      acc.push_back({});
      it = acc.end() - 1;
      it->s.name = r.name;
    }
    const double d = r.durationNs() * 1e-9;
    PhaseStats& s = it->s;
    s.minS = s.count ? std::min(s.minS, d) : d;
    s.maxS = s.count ? std::max(s.maxS, d) : d;
    s.count++;
    s.totalS += d;
    s.selfS += double(self[i]) * 1e-9;
    it->inside += double(std::min(r.endNs, t1) - std::max(r.startNs, t0)) * 1e-9;
    if (r.startNs < t0 || r.endNs > t1) it->partial++;
  }
  const double window = double(t1 - t0) * 1e-9;
  std::sort(acc.begin(), acc.end(), [](const Acc& a, const Acc& b) { return a.s.totalS > b.s.totalS; });
  std::vector<PhaseStats> out;
  if (partial) partial->clear();
  for (Acc& a : acc) {
    a.s.meanS = a.s.totalS / a.s.count;
    a.s.share = window > 0 ? a.inside / window : 0;
    out.push_back(a.s);
    if (partial) partial->push_back(a.partial);
  }
  return out;
}

void PhaseStatsModel::setStats(std::vector<PhaseStats> stats, std::vector<int> partial) {
  beginResetModel();
  m_stats = std::move(stats);
  m_partial = std::move(partial);
  endResetModel();
}

void PhaseStatsModel::setKernelStats(std::vector<KernelStats> kernels) {
  beginResetModel();
  m_kernels = std::move(kernels);
  endResetModel();
}

int PhaseStatsModel::phaseRowOf(int row) const {
  const int k = kernelIndex(row);
  if (k < 0) return row;
  for (std::size_t i = 0; i < m_stats.size(); ++i)
    if (m_stats[i].name == m_kernels[k].phase) return int(i);
  return -1;
}

QString PhaseStatsModel::launchOf(const KernelStats& k) {
  if (k.kind == "kernel") {
    const QString l = launchText(k.launch);
    if (k.sameLaunch) return l;
    if (k.sameBlock) {
      // Only the grid differs (a batched kernel's grid follows the batch): say so first.
      const int comma = l.indexOf(QStringLiteral(", block"));
      return tr("grid varies (first %1)").arg(l.mid(5, comma - 5)) + l.mid(comma);
    }
    return tr("varies; first: %1").arg(l);
  }
  // Copies and sets: their bytes over the launches' whole durations.
  const double busy = k.bytesPerS > 0 ? double(k.bytes) / k.bytesPerS : 0;
  return transferText(k.kind, k.copyKind, double(k.bytes), busy);
}

int PhaseStatsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(m_stats.size() + m_kernels.size());
}

int PhaseStatsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant PhaseStatsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  if (const int ki = kernelIndex(index.row()); ki >= 0) {
    // A kernel row: indented under its phase, its share is of the phase.
    const KernelStats& k = m_kernels[ki];
    const QString phase = k.phase.empty() ? tr("outside every phase") : QString::fromStdString(k.phase);
    if (role == Qt::TextAlignmentRole) return index.column() == Name ? QVariant() : numberAlignment();
    if (role == Qt::ToolTipRole)
      return tr("%1 %2 in %3: %4 of the phase's device time %5\n%6")
          .arg(QString::fromStdString(k.kind), QString::fromStdString(k.name), phase,
               QStringLiteral("%1 %").arg(100 * k.share, 0, 'f', 1), formatDuration(k.phaseTotalS),
               launchOf(k));
    if (role == Qt::UserRole || role == Qt::DisplayRole) {
      const bool raw = role == Qt::UserRole;
      switch (index.column()) {
      case Name: return raw ? QString::fromStdString(k.name) : QStringLiteral("    ↳ ") + QString::fromStdString(k.name);
      case Count: return k.count;
      case Total: return raw ? QVariant(k.totalS) : QVariant(formatDuration(k.totalS));
      case Mean: return raw ? QVariant(k.meanS) : QVariant(formatDuration(k.meanS));
      case Min: return raw ? QVariant(k.minS) : QVariant(formatDuration(k.minS));
      case Max: return raw ? QVariant(k.maxS) : QVariant(formatDuration(k.maxS));
      case Share: return raw ? QVariant(k.share) : QVariant(tr("%1 % of %2").arg(100 * k.share, 0, 'f', 1).arg(phase));
      case Partial: return raw ? QVariant(0) : QVariant(QString());
      case Launch:
        if (raw) return k.kind == "kernel" ? double(k.launch.registers) : double(k.bytes);
        return launchOf(k);
      }
    }
    return {};
  }
  const PhaseStats& s = m_stats[index.row()];
  if (role == Qt::TextAlignmentRole) return index.column() == Name ? QVariant() : numberAlignment();
  if (role == Qt::DecorationRole && index.column() == Name) return phaseColor(s.name);
  if (role == Qt::UserRole) {
    switch (index.column()) {
    case Name: return QString::fromStdString(s.name);
    case Count: return s.count;
    case Total: return s.totalS;
    case Self: return s.selfS;
    case Mean: return s.meanS;
    case Min: return s.minS;
    case Max: return s.maxS;
    case Share: return s.share;
    case Partial: return partial(index.row());
    case Launch: return 0.0;
    }
  }
  if (role == Qt::ToolTipRole && index.column() == Total)
    return tr("inclusive: the zones' whole durations, nested zones included");
  if (role == Qt::ToolTipRole && index.column() == Self)
    return tr("self: the zones' durations less the time of the zones nested directly inside them");
  if (role == Qt::ToolTipRole && index.column() == Partial)
    return tr("zones that start before or end after the selected window (counted whole)");
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
    case Name: return QString::fromStdString(s.name);
    case Count: return s.count;
    case Total: return formatDuration(s.totalS);
    case Self: return formatDuration(s.selfS);
    case Mean: return formatDuration(s.meanS);
    case Min: return formatDuration(s.minS);
    case Max: return formatDuration(s.maxS);
    case Share: return QStringLiteral("%1 %").arg(100 * s.share, 0, 'f', 1);
    case Partial: return m_partial.empty() ? QString() : QString::number(partial(index.row()));
    }
  }
  return {};
}

QVariant PhaseStatsModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Phase", "Count", "Total", "Share", "Self", "Mean", "Min", "Max", "Partly in", "Launch"};
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
    case PerCallA: return c.a.meanS;
    case CountB: return c.b.count;
    case TotalB: return c.b.totalS;
    case PerCallB: return c.b.meanS;
    case Ratio: return c.ratio;
    case RatioPerCall: return c.ratioPerCall;
    }
  }
  if (role == Qt::ToolTipRole && (index.column() == RatioPerCall || index.column() == Ratio))
    return tr("%1 / %2 of the %3").arg(m_b, m_a, index.column() == Ratio ? tr("totals") : tr("mean time per call"));
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
    case Name: return QString::fromStdString(c.name);
    case CountA: return c.a.count;
    case TotalA: return c.a.count ? formatDuration(c.a.totalS) : QStringLiteral("\u2013");
    case CountB: return c.b.count;
    case TotalB: return c.b.count ? formatDuration(c.b.totalS) : QStringLiteral("\u2013");
    case PerCallA: return c.a.count ? formatDuration(c.a.meanS) : QStringLiteral("\u2013");
    case PerCallB: return c.b.count ? formatDuration(c.b.meanS) : QStringLiteral("\u2013");
    case Ratio: return ratioText(c.ratio);
    case RatioPerCall: return ratioText(c.ratioPerCall);
    }
  }
  return {};
}

QVariant PhaseComparisonModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal) return {};
  // Short headers (A, B) so both runs fit a docked table; the tooltip names the run.
  if (role == Qt::ToolTipRole) {
    switch (section) {
    case CountA: case PerCallA: case TotalA: return m_a;
    case CountB: case PerCallB: case TotalB: return m_b;
    case Ratio: case RatioPerCall: return tr("%1 / %2").arg(m_b, m_a);
    }
    return {};
  }
  if (role != Qt::DisplayRole) return {};
  switch (section) {
  case Name: return tr("Phase");
  case CountA: return tr("A calls");
  case PerCallA: return tr("A per call");
  case CountB: return tr("B calls");
  case PerCallB: return tr("B per call");
  case RatioPerCall: return tr("B/A per call");
  case TotalA: return tr("A total");
  case TotalB: return tr("B total");
  case Ratio: return tr("B/A total");
  }
  return {};
}

// --- PhaseTable

namespace {

// Sorts phase rows by the column and keeps each phase's kernel rows right under it
// (sorted among themselves); kernel rows of no listed phase come last.
class KernelAwareProxy : public QSortFilterProxyModel {
public:
  using QSortFilterProxyModel::QSortFilterProxyModel;

protected:
  bool lessThan(const QModelIndex& l, const QModelIndex& r) const override {
    // Qt puts l before r iff lessThan(l, r) ascending, iff lessThan(r, l) descending.
    return sortOrder() == Qt::AscendingOrder ? before(l, r) : before(r, l);
  }

private:
  bool before(const QModelIndex& a, const QModelIndex& b) const {
    const auto* m = static_cast<const PhaseStatsModel*>(sourceModel());
    const bool asc = sortOrder() == Qt::AscendingOrder;
    auto valueLess = [&](const QModelIndex& x, const QModelIndex& y) {
      const bool less = QSortFilterProxyModel::lessThan(x, y), greater = QSortFilterProxyModel::lessThan(y, x);
      return asc ? less : greater;
    };
    const int ga = m->phaseRowOf(a.row()), gb = m->phaseRowOf(b.row());
    if (ga != gb) {
      if (ga < 0 || gb < 0) return gb < 0; // no phase: last
      const QModelIndex pa = a.sibling(ga, a.column()), pb = b.sibling(gb, b.column());
      if (valueLess(pa, pb)) return true;
      if (valueLess(pb, pa)) return false;
      return ga < gb;
    }
    const bool ka = m->kernelIndex(a.row()) >= 0, kb = m->kernelIndex(b.row()) >= 0;
    if (ka != kb) return !ka; // the phase first
    if (valueLess(a, b)) return true;
    if (valueLess(b, a)) return false;
    return a.row() < b.row();
  }
};

} // namespace

PhaseTable::PhaseTable(QWidget* parent) : QTableView(parent) {
  m_model = new PhaseStatsModel(this);
  m_proxy = new KernelAwareProxy(this);
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
  horizontalHeader()->setSectionResizeMode(PhaseStatsModel::Name, QHeaderView::Interactive);
  setWordWrap(false); // a cut kernel name ends in "...", not on a hidden second line
  setToolTip(tr("Click a phase to highlight its zones on the timeline; click it again to clear."));
  connect(this, &QAbstractItemView::clicked, this, &PhaseTable::rowClicked);
}

void PhaseTable::setTimeAxis(TimeAxisState* axis) {
  if (m_axis) disconnect(m_axis, nullptr, this, nullptr);
  m_axis = axis;
  if (!m_axis) return;
  connect(m_axis, &TimeAxisState::selectionChanged, this, &PhaseTable::setTimeRange);
  connect(m_axis, &TimeAxisState::highlightChanged, this, &PhaseTable::showHighlight);
  setTimeRange(m_axis->selectionStart(), m_axis->selectionEnd());
}

QString PhaseTable::phaseAt(int viewRow) const {
  return m_proxy->data(m_proxy->index(viewRow, PhaseStatsModel::Name), Qt::UserRole).toString();
}

void PhaseTable::rowClicked(const QModelIndex& index) {
  if (!m_axis || !index.isValid()) return;
  const QString name = phaseAt(index.row());
  m_axis->setHighlightedPhase(name == m_axis->highlightedPhase() ? QString() : name);
}

void PhaseTable::showHighlight(const QString& phase) {
  // The selected row is the highlighted phase, so the table says which one it is.
  for (int r = 0; r < m_proxy->rowCount(); ++r)
    if (!phase.isEmpty() && phaseAt(r) == phase) {
      if (currentIndex().row() != r) selectRow(r);
      return;
    }
  clearSelection();
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
  setColumnHidden(PhaseStatsModel::Launch, !m_profile || m_profile->kernels.empty());

  if (!m_profile) {
    m_model->setStats({});
    m_model->setKernelStats({});
    return;
  }
  if (!hasTimeRange()) {
    m_model->setStats(m_profile->phaseStats());
    m_model->setKernelStats(m_profile->kernelStats());
    if (m_axis) showHighlight(m_axis->highlightedPhase());
    fitNameColumn();
    return;
  }
  std::vector<int> partial;
  auto stats = windowStats(*m_profile, m_t0, m_t1, &partial);
  m_model->setStats(std::move(stats), std::move(partial));
  m_model->setKernelStats(m_profile->kernelStats(m_t0, m_t1));
  if (m_axis) showHighlight(m_axis->highlightedPhase());
  fitNameColumn();
}

void PhaseTable::fitNameColumn() {
  // Kernel names run to 120 characters (cuBLAS's GEMMs): the name column stops at a
  // width that leaves the numbers in view (the full name is in the row's tooltip).
  resizeColumnToContents(PhaseStatsModel::Name);
  const int cap = std::max(160, fontMetrics().horizontalAdvance(QLatin1Char('m')) * 30);
  if (columnWidth(PhaseStatsModel::Name) > cap) setColumnWidth(PhaseStatsModel::Name, cap);
}

QString PhaseTable::description() const {
  if (!m_profile) return tr("No profile");
  if (!m_profile->kernels.empty())
    return describeRange() + tr("; \u21b3 rows: the phase's kernels and copies (CUPTI), their time inside "
                                "the range and their share of the phase's device time") +
           describeOccupancy();
  return describeRange();
}

QString PhaseTable::describeOccupancy() const {
  // How busy each GPU was over the same range (Profile::deviceOccupancy): a developer
  // sees at once whether the device or the host sets the run's pace.
  QString s;
  const auto occ = hasTimeRange() ? m_profile->deviceOccupancy(m_t0, m_t1) : m_profile->deviceOccupancy();
  for (const DeviceOccupancy& o : occ)
    s += tr(". GPU %1 busy %2 % of it (kernels %3 %, two or more at once %4 %); idle %5 before its first "
            "activity, %6 in %7 gap%8 (largest %9), %10 after its last")
             .arg(o.device)
             .arg(o.windowS > 0 ? 100 * o.busyS / o.windowS : 0.0, 0, 'f', 0)
             .arg(o.windowS > 0 ? 100 * o.kernelS / o.windowS : 0.0, 0, 'f', 0)
             .arg(o.windowS > 0 ? 100 * o.concurrentS / o.windowS : 0.0, 0, 'f', 0)
             .arg(formatDuration(o.leadS), formatDuration(o.gapS))
             .arg(o.gaps)
             .arg(o.gaps == 1 ? "" : "s", formatDuration(o.largestGapS), formatDuration(o.tailS));
  return s;
}

QString PhaseTable::describeRange() const {
  if (hasTimeRange())
    return tr("Selected %1 \u2013 %2 (%3): zones overlapping it, counted whole (\u201cpartly in\u201d: "
              "how many stick out); shares are of the selection")
        .arg(formatDuration(m_t0 * 1e-9), formatDuration(m_t1 * 1e-9), formatDuration((m_t1 - m_t0) * 1e-9));
  return tr("Whole run, wall %1; shares of the wall time").arg(formatDuration(m_profile->wallNs * 1e-9));
}

} // namespace spex
