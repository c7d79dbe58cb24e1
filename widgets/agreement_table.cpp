#include "agreement_table.h"

#include <QHeaderView>
#include <QTableWidget>

#include <cmath>

namespace spex {

QTableWidget* makeAgreementTable(QWidget* parent) {
  auto* t = new QTableWidget(0, 2, parent);
  t->setHorizontalHeaderLabels({QObject::tr("Quantity"), QObject::tr("Value")});
  t->verticalHeader()->hide();
  t->verticalHeader()->setDefaultSectionSize(t->fontMetrics().height() + 4);
  t->horizontalHeader()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  t->horizontalHeader()->setStretchLastSection(true);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  return t;
}

void setAgreementRows(QTableWidget* table, const std::vector<AgreementRow>& rows) {
  table->setRowCount(int(rows.size()));
  for (int i = 0; i < int(rows.size()); ++i) {
    table->setItem(i, 0, new QTableWidgetItem(rows[i].name));
    auto* v = new QTableWidgetItem(rows[i].text);
    if (!std::isnan(rows[i].value)) v->setData(Qt::UserRole, rows[i].value);
    v->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    table->setItem(i, 1, v);
  }
}

} // namespace spex
