// The "Quantity | Value" table in which the comparison views (any two results, and
// CPU vs CUDA) give the agreement of two extractions, as `spexlab-cli compare` prints
// it (core/extract/compare.h): names left, values right-aligned, read-only.
#pragma once

#include <QString>

#include <limits>
#include <vector>

class QTableWidget;
class QWidget;

namespace spex {

struct AgreementRow {
  QString name;
  QString text; // the value as printed
  // The number itself, kept under Qt::UserRole of the value cell; NaN: none.
  double value = std::numeric_limits<double>::quiet_NaN();
};

// An empty table with its two headed columns; rows are one text line high.
QTableWidget* makeAgreementTable(QWidget* parent = nullptr);
// Replaces the rows.
void setAgreementRows(QTableWidget* table, const std::vector<AgreementRow>& rows);

} // namespace spex
