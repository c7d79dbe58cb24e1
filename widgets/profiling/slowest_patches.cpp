#include "slowest_patches.h"

#include "timeline_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>

namespace spex {

SlowestPatches::SlowestPatches(QWidget* parent) : QWidget(parent) {
  m_summary = new QLabel;
  m_summary->setWordWrap(true);
  m_table = new QTableWidget(0, 5);
  m_table->setHorizontalHeaderLabels({tr("Patch"), tr("Time"), tr("\u00d7 mean"), tr("Lane"), tr("Start")});
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->verticalHeader()->hide();
  m_table->verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 4);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->setToolTip(tr("Click a patch to show it on the timeline and select it on the CCD."));
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->addWidget(m_summary);
  lay->addWidget(m_table, 1);
  connect(m_table, &QTableWidget::cellClicked, this, [this](int row, int) {
    if (row < 0 || row >= int(m_patches.size())) return;
    const PatchTime& t = m_patches[row];
    if (t.longest >= 0) emit zoneActivated(t.longest);
    emit patchActivated(t.patch);
  });
}

void SlowestPatches::setProfile(std::shared_ptr<const Profile> profile) {
  m_profile = std::move(profile);
  m_patches = m_profile ? patchTimes(*m_profile) : std::vector<PatchTime>{};
  double sum = 0;
  for (const PatchTime& t : m_patches) sum += t.totalNs * 1e-9;
  const double mean = m_patches.empty() ? 0 : sum / double(m_patches.size());
  m_summary->setText(m_patches.empty()
                         ? tr("No per-patch zones in this run.")
                         : tr("%1 patches, mean %2; slowest first (time of each patch's outermost zones)")
                               .arg(m_patches.size())
                               .arg(formatDuration(mean)));
  const int rows = std::min<int>(int(m_patches.size()), kMaxRows);
  m_table->setRowCount(rows);
  for (int k = 0; k < rows; ++k) {
    const PatchTime& t = m_patches[k];
    const ProfileRange* r = t.longest >= 0 ? &m_profile->ranges[t.longest] : nullptr;
    m_table->setItem(k, 0, new QTableWidgetItem(QString::number(t.patch)));
    m_table->setItem(k, 1, new QTableWidgetItem(formatDuration(t.totalNs * 1e-9)));
    m_table->setItem(k, 2, new QTableWidgetItem(mean > 0 ? QString::number(t.totalNs * 1e-9 / mean, 'f', 2) : QString()));
    m_table->setItem(k, 3, new QTableWidgetItem(r ? QString::fromStdString(m_profile->lanes[r->lane]) : QString()));
    m_table->setItem(k, 4, new QTableWidgetItem(r ? formatDuration(r->startNs * 1e-9) : QString()));
    for (int c : {0, 1, 2, 4}) m_table->item(k, c)->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  }
}

} // namespace spex
