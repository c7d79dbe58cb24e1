// The File > Open inputs dialog: a preproc image and its PSF (both required) and,
// for simulations, the truth file.
#pragma once

#include <QDialog>

class QFormLayout;
class QLineEdit;

namespace spex {

class OpenInputsDialog : public QDialog {
  Q_OBJECT
public:
  explicit OpenInputsDialog(QWidget* parent = nullptr, const QString& startDir = {});
  QString preproc() const;
  QString psf() const;
  QString truth() const;

private:
  QLineEdit* addRow(QFormLayout* form, const QString& label, const QString& filter);
  QLineEdit* m_preproc = nullptr;
  QLineEdit* m_psf = nullptr;
  QLineEdit* m_truth = nullptr;
  QString m_dir;
};

} // namespace spex
