// ParameterPanel: what the next extraction will do. The wavelength grid and fiber
// range, the patch geometry (nwavestep, nsubbundles, bundlesize, wavepad_frac,
// pixpad_frac), the solve (regularize, psferr, decorrelation), the engine and the
// CPU threads. Every edit emits settingsChanged at once, so the patch grid on the
// CCD follows as the user types; the panel itself never runs anything.
#pragma once

#include "core/plan/run_settings.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;
class QVBoxLayout;

namespace spex {

class ParameterPanel : public QWidget {
  Q_OBJECT
public:
  explicit ParameterPanel(QWidget* parent = nullptr);

  RunSettings settings() const;
  void setSettings(const RunSettings& s); // no settingsChanged while loading
  // Limits from the loaded PSF (fiber count, wavelength domain).
  void setLimits(int nfiber, double waveMin, double waveMax);
  // Without a usable GPU, CUDA (and "both") stay offered, marked unavailable with the
  // reason; running them then shows that reason in a dialog.
  void setCudaAvailable(bool available, const QString& why);
  // One line under the form: the plan's size, or what is wrong with the settings.
  void setPlanSummary(const QString& text, bool isError);
  // Buttons for the main window's run actions (their enabled state is the actions').
  void addRunActions(const QList<QAction*>& actions);
  // While a job runs the settings must not change under it, but the run buttons
  // (Cancel above all) stay live: this greys the form only.
  void setEditable(bool on);
  bool isEditable() const { return m_editable; }

signals:
  void settingsChanged(const spex::RunSettings& settings);

private:
  void emitChanged();

  QDoubleSpinBox* m_wmin = nullptr;
  QDoubleSpinBox* m_wmax = nullptr;
  QDoubleSpinBox* m_dw = nullptr;
  QSpinBox* m_fiberMin = nullptr;
  QSpinBox* m_nFiber = nullptr;
  QSpinBox* m_nwavestep = nullptr;
  QSpinBox* m_nsubbundles = nullptr;
  QSpinBox* m_bundlesize = nullptr;
  QDoubleSpinBox* m_wavepadFrac = nullptr;
  QDoubleSpinBox* m_pixpadFrac = nullptr;
  QDoubleSpinBox* m_regularize = nullptr;
  QCheckBox* m_psferrFromPsf = nullptr;
  QDoubleSpinBox* m_psferr = nullptr;
  QComboBox* m_mode = nullptr;
  QComboBox* m_engine = nullptr;
  QSpinBox* m_threads = nullptr;
  QCheckBox* m_profileKernels = nullptr;
  QLabel* m_summary = nullptr;
  QVBoxLayout* m_actions = nullptr;
  QList<QWidget*> m_form; // what setEditable greys
  bool m_loading = false;
  bool m_editable = true;
};

} // namespace spex

Q_DECLARE_METATYPE(spex::RunSettings)
