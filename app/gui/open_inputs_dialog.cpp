#include "open_inputs_dialog.h"

#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>

namespace spex {

OpenInputsDialog::OpenInputsDialog(QWidget* parent, const QString& startDir)
    : QDialog(parent), m_dir(startDir) {
  setWindowTitle(tr("Open preproc image and PSF"));
  auto* form = new QFormLayout;
  const QString fits = tr("FITS files (*.fits *.fits.gz *.fits.fz *.fit);;All files (*)");
  m_preproc = addRow(form, tr("Preproc image"), fits);
  m_psf = addRow(form, tr("PSF"), fits);
  m_truth = addRow(form, tr("Truth (optional)"), fits);
  m_preproc->setPlaceholderText(tr("preproc-r0-00012345.fits"));
  m_psf->setPlaceholderText(tr("psf-r0-00012345.fits"));
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Open | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto update = [this, buttons] {
    buttons->button(QDialogButtonBox::Open)->setEnabled(!preproc().isEmpty() && !psf().isEmpty());
  };
  connect(m_preproc, &QLineEdit::textChanged, this, update);
  connect(m_psf, &QLineEdit::textChanged, this, update);
  update();
  auto* lay = new QVBoxLayout(this);
  lay->addLayout(form);
  lay->addWidget(buttons);
  resize(640, sizeHint().height());
}

QLineEdit* OpenInputsDialog::addRow(QFormLayout* form, const QString& label, const QString& filter) {
  auto* edit = new QLineEdit(this);
  auto* browse = new QPushButton(tr("Browse\u2026"), this);
  connect(browse, &QPushButton::clicked, this, [this, edit, label, filter] {
    const QString f = QFileDialog::getOpenFileName(this, label, edit->text().isEmpty() ? m_dir : edit->text(), filter);
    if (!f.isEmpty()) {
      edit->setText(f);
      m_dir = QFileInfo(f).absolutePath();
    }
  });
  auto* row = new QHBoxLayout;
  row->addWidget(edit, 1);
  row->addWidget(browse);
  form->addRow(label, row);
  return edit;
}

QString OpenInputsDialog::preproc() const { return m_preproc->text().trimmed(); }
QString OpenInputsDialog::psf() const { return m_psf->text().trimmed(); }
QString OpenInputsDialog::truth() const { return m_truth->text().trimmed(); }

} // namespace spex
