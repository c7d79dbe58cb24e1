#include "run_comparison_view.h"

#include "phase_table.h"
#include "timeline_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QScrollArea>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>

namespace spex {

RunComparisonView::RunComparisonView(QWidget* parent) : QWidget(parent) {
  m_timeline = new TimelineView;
  m_scroll = new QScrollArea;
  m_scroll->setWidget(m_timeline);
  m_scroll->setWidgetResizable(true);
  m_model = new PhaseComparisonModel(this);
  m_proxy = new QSortFilterProxyModel(this);
  m_proxy->setSourceModel(m_model);
  m_proxy->setSortRole(Qt::UserRole);
  m_table = new QTableView;
  m_table->setModel(m_proxy);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(PhaseComparisonModel::TotalA, Qt::DescendingOrder);
  m_table->setAlternatingRowColors(true);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->verticalHeader()->hide();
  m_table->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 4);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_summary = new QLabel(tr("Pick two runs to compare."));
  m_summary->setWordWrap(true);
  m_split = new QSplitter(Qt::Vertical);
  m_split->addWidget(m_scroll);
  m_split->addWidget(m_table);
  m_split->setChildrenCollapsible(false);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addWidget(m_summary);
  lay->addWidget(m_split, 1);
  // Clicking a phase highlights its zones in both runs (and every timeline on the axis).
  connect(m_table, &QAbstractItemView::clicked, this, [this](const QModelIndex& i) {
    TimeAxisState* axis = m_timeline->timeAxis();
    const QString name = m_proxy->data(m_proxy->index(i.row(), 0), Qt::UserRole).toString();
    axis->setHighlightedPhase(name == axis->highlightedPhase() ? QString() : name);
  });
  setTimeAxis(nullptr);
}

void RunComparisonView::setTimeAxis(TimeAxisState* axis) {
  if (TimeAxisState* old = m_timeline->timeAxis()) disconnect(old, nullptr, this, nullptr);
  m_timeline->setTimeAxis(axis);
  connect(m_timeline->timeAxis(), &TimeAxisState::selectionChanged, this, [this] { refreshTable(); });
  refreshTable();
}

void RunComparisonView::setRuns(const QString& labelA, std::shared_ptr<const Profile> a,
                                const QString& labelB, std::shared_ptr<const Profile> b) {
  QVector<TimelineTrack> tracks;
  if (a) tracks.push_back({labelA, a});
  if (b) tracks.push_back({labelB, b});
  m_labelA = labelA;
  m_labelB = labelB;
  m_timeline->setTracks(tracks);
  refreshTable();
  fitTimeline();
}

void RunComparisonView::refreshTable() {
  const auto a = m_timeline->profile(0), b = m_timeline->profile(1);
  const TimeAxisState* axis = m_timeline->timeAxis();
  if (!a || !b) {
    m_model->setComparison({}, m_labelA, m_labelB);
  } else if (axis->hasSelection()) {
    const int64_t t0 = axis->selectionStart(), t1 = axis->selectionEnd();
    m_model->setComparison(comparePhases(windowStats(*a, t0, t1, nullptr), windowStats(*b, t0, t1, nullptr)),
                           m_labelA, m_labelB);
  } else {
    m_model->setComparison(comparePhases(*a, *b), m_labelA, m_labelB);
  }
  m_summary->setText(summary());
}

void RunComparisonView::fitTimeline() {
  // Room for both runs: the timeline gets the height of all its rows (as far as the
  // view allows, leaving the table a few lines), the table the rest.
  const int total = m_split->height();
  if (total <= 0) return;
  const int frame = 2 * m_scroll->frameWidth() +
                    (m_scroll->horizontalScrollBar()->isVisible() ? m_scroll->horizontalScrollBar()->height() : 0);
  const int minTable = 4 * (fontMetrics().height() + 4) + m_table->horizontalHeader()->sizeHint().height();
  const int want = m_timeline->contentHeight() + frame + 2;
  const int top = std::clamp(want, std::min(120, total / 2), std::max(60, total - minTable - m_split->handleWidth()));
  m_split->setSizes({top, std::max(1, total - top - m_split->handleWidth())});
}

void RunComparisonView::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  fitTimeline();
}

QString RunComparisonView::summary() const {
  const auto a = m_timeline->profile(0), b = m_timeline->profile(1);
  if (!a || !b) return tr("Pick two runs to compare.");
  const double ratio = a->wallNs > 0 ? double(b->wallNs) / double(a->wallNs) : 0;
  QString s = tr("A = %1: wall %2   B = %3: wall %4   B / A = %5\u00d7")
                  .arg(m_timeline->trackLabel(0), formatDuration(a->wallNs * 1e-9), m_timeline->trackLabel(1),
                       formatDuration(b->wallNs * 1e-9))
                  .arg(ratio, 0, 'f', 3);
  const TimeAxisState* axis = m_timeline->timeAxis();
  if (axis->hasSelection())
    s += tr("; table: zones overlapping %1 \u2013 %2").arg(formatDuration(axis->selectionStart() * 1e-9),
                                                           formatDuration(axis->selectionEnd() * 1e-9));
  return s;
}

} // namespace spex
