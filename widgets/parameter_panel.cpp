#include "parameter_panel.h"

#include <QAction>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QSpinBox>
#include <QThread>
#include <QToolButton>
#include <QVBoxLayout>

#include <cmath>

namespace spex {

namespace {
QDoubleSpinBox* doubleBox(QWidget* parent, double lo, double hi, double step, int decimals) {
  auto* b = new QDoubleSpinBox(parent);
  b->setRange(lo, hi);
  b->setSingleStep(step);
  b->setDecimals(decimals);
  b->setKeyboardTracking(false); // commit on enter/focus-out, not on every keystroke
  return b;
}
QSpinBox* intBox(QWidget* parent, int lo, int hi) {
  auto* b = new QSpinBox(parent);
  b->setRange(lo, hi);
  b->setKeyboardTracking(false);
  return b;
}
} // namespace

ParameterPanel::ParameterPanel(QWidget* parent) : QWidget(parent) {
  qRegisterMetaType<spex::RunSettings>();
  m_wmin = doubleBox(this, 0, 20000, 10, 1);
  m_wmax = doubleBox(this, 0, 20000, 10, 1);
  m_dw = doubleBox(this, 0.01, 10, 0.1, 2);
  m_fiberMin = intBox(this, 0, 4999);
  m_nFiber = intBox(this, 1, 5000);
  m_nwavestep = intBox(this, 1, 1000);
  m_nsubbundles = intBox(this, 1, 25);
  m_bundlesize = intBox(this, 1, 500);
  m_wavepadFrac = doubleBox(this, 0, 10, 0.1, 2);
  m_pixpadFrac = doubleBox(this, 0, 5, 0.1, 2);
  m_regularize = doubleBox(this, 0, 1, 1e-4, 6);
  m_psferrFromPsf = new QCheckBox(tr("from PSF"), this);
  m_psferr = doubleBox(this, 0, 1, 0.005, 4);
  m_psferr->setObjectName(QStringLiteral("psferr")); // greyed when taken from the PSF
  m_mode = new QComboBox(this);
  m_mode->addItem(tr("signal (per fiber)"), int(Decorrelation::Signal));
  m_mode->addItem(tr("noise (whole patch)"), int(Decorrelation::Noise));
  m_engine = new QComboBox(this);
  m_engine->addItem(tr("CPU"), QStringLiteral("cpu"));
  m_engine->addItem(tr("CUDA"), QStringLiteral("cuda"));
  m_engine->addItem(tr("CPU and CUDA"), QStringLiteral("both"));
  m_engine->addItem(tr("Auto (CUDA if a GPU is found)"), QStringLiteral("auto"));
  m_threads = intBox(this, 0, 1024);
  m_threads->setSpecialValueText(tr("all (%1)").arg(QThread::idealThreadCount()));
  m_profileKernels = new QCheckBox(tr("kernel profile (CUPTI)"), this);
  m_profileKernels->setObjectName(QStringLiteral("profileKernels"));
  m_profileKernels->setToolTip(tr("CUDA runs record every kernel and copy with CUPTI: the timeline shows "
                                  "them under their phase, the phase table lists them per phase. Slower "
                                  "(docs/profiling.md)."));
  m_summary = new QLabel(this);
  m_summary->setWordWrap(true);
  m_nwavestep->setToolTip(tr("wavelength bins kept per patch (--nwavestep)"));
  m_nsubbundles->setToolTip(tr("sub-bundles per bundle (--nsubbundles)"));
  m_wavepadFrac->setToolTip(tr("wavepad = 10 + int(10 * wavepad_frac) bins each side"));
  m_pixpadFrac->setToolTip(tr("fraction of the padded wavelengths' extra rows used"));
  m_regularize->setToolTip(tr("regularize^2 added to the normal equations' diagonal"));

  auto* grid = new QGroupBox(tr("Grid and fibers"), this);
  auto* f1 = new QFormLayout(grid);
  f1->addRow(tr("wmin [\u00c5]"), m_wmin);
  f1->addRow(tr("wmax [\u00c5]"), m_wmax);
  f1->addRow(tr("dw [\u00c5]"), m_dw);
  f1->addRow(tr("first fiber"), m_fiberMin);
  f1->addRow(tr("fibers"), m_nFiber);
  auto* geo = new QGroupBox(tr("Patches"), this);
  auto* f2 = new QFormLayout(geo);
  f2->addRow(tr("nwavestep"), m_nwavestep);
  f2->addRow(tr("nsubbundles"), m_nsubbundles);
  f2->addRow(tr("bundlesize"), m_bundlesize);
  f2->addRow(tr("wavepad_frac"), m_wavepadFrac);
  f2->addRow(tr("pixpad_frac"), m_pixpadFrac);
  auto* solve = new QGroupBox(tr("Solve"), this);
  auto* f3 = new QFormLayout(solve);
  f3->addRow(tr("regularize"), m_regularize);
  auto* psfRow = new QHBoxLayout;
  psfRow->addWidget(m_psferrFromPsf);
  psfRow->addWidget(m_psferr, 1);
  f3->addRow(tr("psferr"), psfRow);
  f3->addRow(tr("decorrelation"), m_mode);
  auto* run = new QGroupBox(tr("Run"), this);
  auto* f4 = new QFormLayout(run);
  f4->addRow(tr("engine"), m_engine);
  f4->addRow(tr("CPU threads"), m_threads);
  f4->addRow(m_profileKernels);
  m_actions = new QVBoxLayout;
  f4->addRow(m_actions);

  m_form = {grid, geo, solve, m_engine, m_threads, m_profileKernels};

  auto* lay = new QVBoxLayout(this);
  lay->addWidget(grid);
  lay->addWidget(geo);
  lay->addWidget(solve);
  lay->addWidget(run);
  lay->addWidget(m_summary);
  lay->addStretch(1);

  setSettings(RunSettings{});
  for (QDoubleSpinBox* b : {m_wmin, m_wmax, m_dw, m_wavepadFrac, m_pixpadFrac, m_regularize, m_psferr})
    connect(b, &QDoubleSpinBox::valueChanged, this, &ParameterPanel::emitChanged);
  for (QSpinBox* b : {m_fiberMin, m_nFiber, m_nwavestep, m_nsubbundles, m_bundlesize, m_threads})
    connect(b, &QSpinBox::valueChanged, this, &ParameterPanel::emitChanged);
  for (QComboBox* b : {m_mode, m_engine})
    connect(b, &QComboBox::currentIndexChanged, this, &ParameterPanel::emitChanged);
  connect(m_profileKernels, &QCheckBox::toggled, this, &ParameterPanel::emitChanged);
  connect(m_psferrFromPsf, &QCheckBox::toggled, this, [this](bool on) {
    m_psferr->setEnabled(!on);
    emitChanged();
  });
}

RunSettings ParameterPanel::settings() const {
  RunSettings s;
  s.wmin = m_wmin->value();
  s.wmax = m_wmax->value();
  s.dw = m_dw->value();
  s.fiberMin = m_fiberMin->value();
  s.nFiber = m_nFiber->value();
  s.params.nwavestep = m_nwavestep->value();
  s.params.nsubbundles = m_nsubbundles->value();
  s.params.bundlesize = m_bundlesize->value();
  s.params.wavepadFrac = m_wavepadFrac->value();
  s.params.pixpadFrac = m_pixpadFrac->value();
  s.params.regularize = m_regularize->value();
  s.params.psferr = m_psferrFromPsf->isChecked() ? std::nan("") : m_psferr->value();
  s.params.mode = Decorrelation(m_mode->currentData().toInt());
  s.engine = m_engine->currentData().toString().toStdString();
  s.threads = m_threads->value();
  s.profileKernels = m_profileKernels->isChecked();
  return s;
}

void ParameterPanel::setSettings(const RunSettings& s) {
  m_loading = true;
  m_wmin->setValue(s.wmin);
  m_wmax->setValue(s.wmax);
  m_dw->setValue(s.dw);
  m_fiberMin->setValue(s.fiberMin);
  m_nFiber->setValue(s.nFiber);
  m_nwavestep->setValue(s.params.nwavestep);
  m_nsubbundles->setValue(s.params.nsubbundles);
  m_bundlesize->setValue(s.params.bundlesize);
  m_wavepadFrac->setValue(s.params.wavepadFrac);
  m_pixpadFrac->setValue(s.params.pixpadFrac);
  m_regularize->setValue(s.params.regularize);
  const bool fromPsf = std::isnan(s.params.psferr);
  m_psferrFromPsf->setChecked(fromPsf);
  m_psferr->setEnabled(!fromPsf);
  m_psferr->setValue(fromPsf ? 0.01 : s.params.psferr);
  m_mode->setCurrentIndex(s.params.mode == Decorrelation::Noise ? 1 : 0);
  const int e = m_engine->findData(QString::fromStdString(s.engine));
  m_engine->setCurrentIndex(e >= 0 ? e : 0);
  m_threads->setValue(s.threads);
  m_profileKernels->setChecked(s.profileKernels);
  m_loading = false;
}

void ParameterPanel::setLimits(int nfiber, double waveMin, double waveMax) {
  m_loading = true;
  m_fiberMin->setMaximum(std::max(0, nfiber - 1));
  m_nFiber->setMaximum(std::max(1, nfiber));
  m_wmin->setToolTip(tr("PSF domain %1 - %2 \u00c5").arg(waveMin, 0, 'f', 1).arg(waveMax, 0, 'f', 1));
  m_wmax->setToolTip(m_wmin->toolTip());
  m_loading = false;
}

void ParameterPanel::setCudaAvailable(bool available, const QString& why) {
  // CUDA stays selectable without a GPU: choosing it and running says why it cannot
  // run (a dialog), which is clearer than an item that silently will not select.
  const QString cuda = available ? tr("CUDA") : tr("CUDA (unavailable)");
  const QString both = available ? tr("CPU and CUDA") : tr("CPU and CUDA (unavailable)");
  m_engine->setItemText(m_engine->findData(QStringLiteral("cuda")), cuda);
  m_engine->setItemText(m_engine->findData(QStringLiteral("both")), both);
  for (const char* key : {"cuda", "both", "auto"})
    m_engine->setItemData(m_engine->findData(QString::fromLatin1(key)), available ? QString() : why,
                          Qt::ToolTipRole);
  m_engine->setToolTip(available ? tr("CUDA: %1").arg(why) : tr("CUDA unavailable: %1").arg(why));
}

void ParameterPanel::setPlanSummary(const QString& text, bool isError) {
  m_summary->setText(text);
  m_summary->setStyleSheet(isError ? QStringLiteral("color: #c0392b;") : QString());
}

void ParameterPanel::addRunActions(const QList<QAction*>& actions) {
  for (QAction* a : actions) {
    auto* b = new QToolButton(this);
    b->setDefaultAction(a);
    b->setToolButtonStyle(Qt::ToolButtonTextOnly);
    b->setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    m_actions->addWidget(b);
  }
}

void ParameterPanel::setEditable(bool on) {
  m_editable = on;
  for (QWidget* w : m_form) w->setEnabled(on);
}

void ParameterPanel::emitChanged() {
  if (!m_loading) emit settingsChanged(settings());
}

} // namespace spex
