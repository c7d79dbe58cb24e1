#include "run_comparison_view.h"

#include "phase_table.h"
#include "timeline_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QScrollArea>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

namespace spex {

RunComparisonView::RunComparisonView(QWidget* parent) : QWidget(parent) {
  m_timeline = new TimelineView;
  auto* scroll = new QScrollArea;
  scroll->setWidget(m_timeline);
  scroll->setWidgetResizable(true);
  m_model = new PhaseComparisonModel(this);
  m_proxy = new QSortFilterProxyModel(this);
  m_proxy->setSourceModel(m_model);
  m_proxy->setSortRole(Qt::UserRole);
  m_table = new QTableView;
  m_table->setModel(m_proxy);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(PhaseComparisonModel::TotalA, Qt::DescendingOrder);
  m_table->setAlternatingRowColors(true);
  m_table->verticalHeader()->hide();
  m_table->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 4);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_summary = new QLabel(tr("Pick two runs to compare."));
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(scroll);
  split->addWidget(m_table);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addWidget(m_summary);
  lay->addWidget(split, 1);
}

void RunComparisonView::setRuns(const QString& labelA, std::shared_ptr<const Profile> a,
                                const QString& labelB, std::shared_ptr<const Profile> b) {
  QVector<TimelineTrack> tracks;
  if (a) tracks.push_back({labelA, a});
  if (b) tracks.push_back({labelB, b});
  m_timeline->setTracks(tracks);
  if (a && b)
    m_model->setComparison(comparePhases(*a, *b), labelA, labelB);
  else
    m_model->setComparison({}, labelA, labelB);
  m_summary->setText(summary());
}

QString RunComparisonView::summary() const {
  const auto a = m_timeline->profile(0), b = m_timeline->profile(1);
  if (!a || !b) return tr("Pick two runs to compare.");
  const double ratio = a->wallNs > 0 ? double(b->wallNs) / double(a->wallNs) : 0;
  return tr("%1: wall %2   %3: wall %4   %3 / %1 = %5\u00d7")
      .arg(m_timeline->trackLabel(0), formatDuration(a->wallNs * 1e-9), m_timeline->trackLabel(1),
           formatDuration(b->wallNs * 1e-9))
      .arg(ratio, 0, 'f', 3);
}

} // namespace spex
