// RunComparisonView: two runs (CPU vs CUDA, or two parameter sets) stacked on one
// time axis, with a table of every phase in both runs: calls and mean time per call
// (normalised, so runs with other numbers of patches compare), totals, and the ratios
// B / A of both (sortable). The timeline keeps room for both runs: the splitter gives
// it the height of both tracks before the table. On a shared TimeAxisState it zooms
// with the other timelines, and a selected time range narrows the table to the zones
// overlapping it (counted whole, as the phase table does).
#pragma once

#include "core/profile/profile.h"

#include <QWidget>

#include <memory>

class QLabel;
class QScrollArea;
class QSortFilterProxyModel;
class QSplitter;
class QTableView;

namespace spex {

class PhaseComparisonModel;
class TimeAxisState;
class TimelineView;

class RunComparisonView : public QWidget {
  Q_OBJECT
public:
  explicit RunComparisonView(QWidget* parent = nullptr);

  void setRuns(const QString& labelA, std::shared_ptr<const Profile> a, const QString& labelB,
               std::shared_ptr<const Profile> b);
  void setTimeAxis(TimeAxisState* axis); // the timeline's and the table's window

  TimelineView* timeline() const { return m_timeline; }
  QScrollArea* timelineArea() const { return m_scroll; }
  PhaseComparisonModel* model() const { return m_model; }
  QTableView* table() const { return m_table; }
  QString summary() const; // "cpu: wall ..  cuda:0: wall ..  cuda:0 / cpu = 0.123x"

protected:
  void resizeEvent(QResizeEvent*) override;

private:
  void refreshTable();
  void fitTimeline();

  TimelineView* m_timeline;
  QScrollArea* m_scroll;
  QSplitter* m_split;
  PhaseComparisonModel* m_model;
  QSortFilterProxyModel* m_proxy;
  QTableView* m_table;
  QLabel* m_summary;
  QString m_labelA, m_labelB;
};

} // namespace spex
