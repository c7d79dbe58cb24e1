// PhaseTable: per-phase statistics of a run (count, total, mean, min, max, share of
// the wall or of a selected time window) in a sortable table; PhaseComparisonModel
// puts two runs side by side with the ratio of their totals. Models hold plain
// PhaseStats from core/profile; sorting goes through Qt::UserRole, which holds the
// raw number (seconds, count, fraction) behind each displayed text. Total is the
// inclusive time of the zones, Self the part not spent in nested zones. A PhaseTable
// given a TimeAxisState follows its selection and, when a row is clicked, highlights
// that phase's zones in every timeline on the axis.
#pragma once

#include "time_axis_state.h"

#include "core/profile/profile.h"

#include <QAbstractTableModel>
#include <QPointer>
#include <QTableView>

#include <memory>
#include <vector>

class QSortFilterProxyModel;

namespace spex {

class PhaseStatsModel : public QAbstractTableModel {
  Q_OBJECT
public:
  // Share next to Total, so a narrow dock still shows it.
  // Launch: kernel rows' launch configuration, copy rows' bytes, direction and rate
  // (empty for phases; PhaseTable hides it without a kernel profile).
  enum Column { Name, Count, Total, Share, Self, Mean, Min, Max, Partial, Launch, ColumnCount };
  using QAbstractTableModel::QAbstractTableModel;

  // partial[i]: how many of phase i's zones stick out of the selected window (empty:
  // none, the whole run).
  void setStats(std::vector<PhaseStats> stats, std::vector<int> partial = {});
  const std::vector<PhaseStats>& stats() const { return m_stats; }
  int partial(int row) const { return row < int(m_partial.size()) ? m_partial[row] : 0; }

  // The per-kernel breakdown of a kernel profile (Profile::kernelStats): one row per
  // kernel of a phase after the phase rows, kept under its phase whatever the sort;
  // Share is then the kernel's share of its phase's device time. Empty: none.
  void setKernelStats(std::vector<KernelStats> kernels);
  const std::vector<KernelStats>& kernelStats() const { return m_kernels; }
  // -1 for a phase row; else the kernel row's index into kernelStats().
  int kernelIndex(int row) const { return row >= int(m_stats.size()) ? row - int(m_stats.size()) : -1; }
  // The row of a kernel row's phase (-1 when its phase has no row).
  int phaseRowOf(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

  // The Launch column's text of a kernel row.
  static QString launchOf(const KernelStats& k);

private:
  std::vector<PhaseStats> m_stats;
  std::vector<int> m_partial;
  std::vector<KernelStats> m_kernels;
};

// Statistics of a selected time window [t0, t1) ns, Tracy's way: every zone that
// overlaps the window counts whole (count, total, mean, min, max are of real zone
// durations, so a zone cut by the window edge does not pose as a short one);
// `partial` counts the zones that stick out; share is the time inside the window
// over the window's length, so shares still add up to the window.
std::vector<PhaseStats> windowStats(const Profile& p, int64_t t0, int64_t t1, std::vector<int>* partial);

class PhaseComparisonModel : public QAbstractTableModel {
  Q_OBJECT
public:
  // Per call: each run's mean zone duration, and their ratio, which stays meaningful
  // when the runs have different numbers of calls (other patch sizes, a subset).
  enum Column { Name, CountA, PerCallA, CountB, PerCallB, RatioPerCall, TotalA, TotalB, Ratio, ColumnCount };
  using QAbstractTableModel::QAbstractTableModel;

  void setComparison(std::vector<PhaseComparison> rows, const QString& labelA, const QString& labelB);
  const std::vector<PhaseComparison>& comparison() const { return m_rows; }
  QString labelA() const { return m_a; }
  QString labelB() const { return m_b; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
  std::vector<PhaseComparison> m_rows;
  QString m_a = QStringLiteral("A"), m_b = QStringLiteral("B");
};

// The phase table of one profile, over the whole run or a time window.
class PhaseTable : public QTableView {
  Q_OBJECT
public:
  explicit PhaseTable(QWidget* parent = nullptr);

  void setProfile(std::shared_ptr<const Profile> profile);
  // Follow `axis`: its selection sets the time range; clicking a row highlights that
  // phase on it (clicking it again, or Esc in a timeline, clears).
  void setTimeAxis(TimeAxisState* axis);
  TimeAxisState* timeAxis() const { return m_axis; }
  // The phase name of a row as displayed (after sorting).
  QString phaseAt(int viewRow) const;
  // Statistics over [t0, t1) ns; t1 <= t0 means the whole run.
  void setTimeRange(qint64 t0, qint64 t1);
  bool hasTimeRange() const { return m_t1 > m_t0; }

  PhaseStatsModel* statsModel() const { return m_model; }
  QSortFilterProxyModel* proxy() const { return m_proxy; }
  // One line for a label over the table: what the shares are relative to, and with a
  // kernel profile how busy each GPU was over the same range.
  QString description() const;

private:
  void fitNameColumn();
  void refresh();
  QString describeRange() const;
  QString describeOccupancy() const;
  void rowClicked(const QModelIndex& index);
  void showHighlight(const QString& phase);

  PhaseStatsModel* m_model;
  QSortFilterProxyModel* m_proxy;
  std::shared_ptr<const Profile> m_profile;
  qint64 m_t0 = 0, m_t1 = 0;
  QPointer<TimeAxisState> m_axis; // the axis may go first when a window closes
};

} // namespace spex
