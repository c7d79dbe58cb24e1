// MainWindow: the spexlab workbench. It owns the Document (data), the shared
// ViewState, the views (CCD, spectrum, residuals, resolution, parameters) and the
// ExtractionJob, and turns the views' intents and the menus into loads and jobs.
// Errors from the core arrive as SpexError messages and are shown in a dialog; the
// window keeps running.
#pragma once

#include "document.h"
#include "extraction_job.h"
#include "workbench_context.h"

#include "widgets/ccd_view.h"

#include <QMainWindow>
#include <QPointer>
#include <QTimer>

#include <array>
#include <functional>

class QAction;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QMenu;
class QProgressBar;
class QPushButton;

namespace spex {

class ParameterPanel;
class ResidualView;
class ResolutionView;
class SpectrumView;
class ViewState;

class MainWindow : public QMainWindow {
  Q_OBJECT
public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  Document* document() const { return m_doc; }
  ViewState* viewState() const { return m_state; }
  CcdView* ccdView() const { return m_ccd; }
  SpectrumView* spectrumView() const { return m_spectrum; }
  ResidualView* residualView() const { return m_residual; }
  ResolutionView* resolutionView() const { return m_resolution; }
  ParameterPanel* parameterPanel() const { return m_params; }
  ExtractionJob* job() const { return m_job; }
  QAction* overlayAction(Overlay o) const { return m_overlayActions[int(o)]; }
  QAction* extractSelectionAction() const { return m_extractSel; }
  QAction* extractFrameAction() const { return m_extractAll; }
  QAction* cancelAction() const { return m_cancel; }
  QAction* clearResultsAction() const { return m_clearResults; }
  QPushButton* cancelButton() const { return m_cancelButton; }
  QProgressBar* progressBar() const { return m_progress; }
  QLabel* readoutLabel() const { return m_readout; }
  QMenu* helpMenu() const { return m_helpMenu; }
  // What the docks are built from (installAnalysisDocks, installImageTools): the
  // document, view state, job runner and views of this window, never the window itself.
  WorkbenchContext context();
  // Built with CUDA and a usable GPU found; gpuDescription() says what was found.
  bool cudaUsable() const { return m_cudaUsable; }
  QString gpuDescription() const { return m_gpus; }
  // The status bar's line when nothing is hovered: how to select and extract.
  QString idleHint() const;

  // Each returns false after showing what went wrong.
  bool openDemo(int nFiber);
  bool openInputs(const QString& preproc, const QString& psf, const QString& truth = {});
  bool openFrame(const QString& path);
  bool openTruth(const QString& path);
  // Whole frame, or the selected patches (else the patches of the selected fibers).
  bool runExtraction(bool wholeFrame);
  void cancelExtraction();
  bool isBusy() const;
  void setScale(const ScaleSettings& s);
  ScaleSettings scale() const;

  // Writes a view as PNG or PDF (by the extension): "ccd", "spectrum", "residuals",
  // "resolution" or "window".
  bool exportView(const QString& which, const QString& path);
  bool exportSpectra(const QString& path, bool allFibers);

  // The last message shown in an error dialog; tests read it.
  QString lastError() const { return m_lastError; }
  // Headless use (--screenshot): errors go to stderr instead of a dialog.
  void setInteractive(bool on) { m_interactive = on; }
  // An error dialog (or a line on stderr when not interactive) in user words, the raw
  // text under "Show Details"; lastError() keeps what the dialog says.
  void showError(const QString& title, const QString& message);
  // Not an error (e.g. nothing selected): an information box.
  void showInfo(const QString& title, const QString& message);
  // The folder file dialogs start in: the last one a file was opened from or saved to.
  QString lastDir() const;
  // Object names of the docks in front of their tab groups (saved and restored).
  QStringList raisedDocks() const;
  void rememberDir(const QString& file);

signals:
  void errorShown(const QString& message);
  void jobFinished(bool cancelled);

protected:
  void closeEvent(QCloseEvent* e) override;
  void showEvent(QShowEvent* e) override;

private:
  void buildViews();
  void buildActions();
  void buildMenus();
  void buildScaleBar();
  void buildStatusBar();
  void loadSettings();
  void restoreLayout();
  void saveSettings();
  bool refuseWhileBusy(); // true (after saying so) while a job runs
  void setBusy(bool busy);
  void onInputsChanged();
  void onPlanChanged();
  void refreshResults();
  void updateResiduals(bool force = false);
  void addRecent(const QString& entry);
  void rebuildRecentMenu();
  void openRecent(const QString& entry);
  void onScaleControls();
  void setReadout(const QString& text);
  void about();
  void exportViewDialog(const QString& which);

  Document* m_doc = nullptr;
  ViewState* m_state = nullptr;
  ExtractionJob* m_job = nullptr;
  CcdView* m_ccd = nullptr;
  SpectrumView* m_spectrum = nullptr;
  ResidualView* m_residual = nullptr;
  ResolutionView* m_resolution = nullptr;
  ParameterPanel* m_params = nullptr;

  std::array<QAction*, kOverlayCount> m_overlayActions{};
  QAction* m_extractSel = nullptr;
  QAction* m_extractAll = nullptr;
  QAction* m_cancel = nullptr;
  QAction* m_clearResults = nullptr;
  QMenu* m_recentMenu = nullptr;
  QMenu* m_viewMenu = nullptr;
  QMenu* m_helpMenu = nullptr;

  QComboBox* m_stretch = nullptr;
  QComboBox* m_limits = nullptr;
  QDoubleSpinBox* m_percentile = nullptr;
  QDoubleSpinBox* m_min = nullptr;
  QDoubleSpinBox* m_max = nullptr;
  QComboBox* m_colormap = nullptr;
  bool m_updatingScale = false;
  ScaleSettings m_adjust; // contrast, bias and inverted (set by drag and the Image toolbar)

  QLabel* m_readout = nullptr;
  QLabel* m_jobLabel = nullptr;
  QProgressBar* m_progress = nullptr;
  QPushButton* m_cancelButton = nullptr;
  QTimer m_refreshTimer;

  QString m_lastError;
  QString m_gpus;           // describeGpus(), once: it may initialise the driver
  bool m_cudaUsable = false; // built with CUDA and a GPU found
  bool m_interactive = true;
  bool m_residualsPending = false; // the hidden residual view waits for new inputs
  quint64 m_shownModelRevision = ~quint64(0); // Document::modelRevision() the residual view shows
  QString m_shownModelSource;                  // and the result whose model it is
  QVector<quint64> m_shownResults;             // (name hash, revision) of the shown results
  std::function<void()> m_defaultDocks; // first-show dock sizes
};

} // namespace spex
