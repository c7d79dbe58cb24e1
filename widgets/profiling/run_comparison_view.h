// RunComparisonView: two runs (CPU vs CUDA, or two parameter sets) stacked on one
// time axis, with a table of every phase's count and total in both runs and the
// ratio of the totals (second run / first run), sortable.
#pragma once

#include "core/profile/profile.h"

#include <QWidget>

#include <memory>

class QLabel;
class QSortFilterProxyModel;
class QTableView;

namespace spex {

class PhaseComparisonModel;
class TimelineView;

class RunComparisonView : public QWidget {
  Q_OBJECT
public:
  explicit RunComparisonView(QWidget* parent = nullptr);

  void setRuns(const QString& labelA, std::shared_ptr<const Profile> a, const QString& labelB,
               std::shared_ptr<const Profile> b);

  TimelineView* timeline() const { return m_timeline; }
  PhaseComparisonModel* model() const { return m_model; }
  QTableView* table() const { return m_table; }
  QString summary() const; // "cuda:0 / cpu: wall 0.123x"

private:
  TimelineView* m_timeline;
  PhaseComparisonModel* m_model;
  QSortFilterProxyModel* m_proxy;
  QTableView* m_table;
  QLabel* m_summary;
};

} // namespace spex
