// The workbench's profiling and tuning docks (issue 5), installed on the host window
// by installAnalysisDocks from a WorkbenchContext (the Document, the ViewState, the
// one job runner; the docks keep the run history themselves): Timeline (the Profile of each run, its phase table, Chrome
// trace open/export, per-patch CCD heatmaps), Run comparison (two runs on one time
// axis), CPU vs CUDA (both engines on the selection or the frame, as one job on the
// app's job runner with the EngineRegistry's warm engines)
// and Sweep (patch-size sweep in the background, with progress and cancel; also one job
// on the app's job runner, client "sweep", leasing the registry's warm engines). The views
// live in widgets/profiling; this file turns their intents into jobs.
#pragma once

#include "workbench_context.h"

#include "core/extract/engine.h"
#include "core/sweep/sweep.h"

#include <QObject>
#include <QString>
#include <QTimer>

#include <atomic>
#include <memory>
#include <vector>

class QCheckBox;
class QComboBox;
class QDockWidget;
class QLabel;
class QLineEdit;
class QMainWindow;
class QProgressBar;
class QPushButton;

namespace spex {

class ComparisonDock;
class EngineComparisonView;
class PhaseTable;
class RunComparisonView;
class SlowestPatches;
class SweepView;
class TimeAxisState;
class TimelineView;
class ZoneFinder;

void installAnalysisDocks(const WorkbenchContext& context);

class AnalysisDocks : public QObject {
  Q_OBJECT
public:
  explicit AnalysisDocks(const WorkbenchContext& context);
  ~AnalysisDocks() override; // cancels and waits for background work

  // The docks' owner, found from the window (nullptr before installAnalysisDocks).
  static AnalysisDocks* of(QMainWindow* window);

  struct Run {
    QString label; // "cpu #1", "trace run.json"
    std::shared_ptr<const Profile> profile;
    std::shared_ptr<const ExtractionResult> result; // null for opened traces
    // Its own numbers (Document::runValues: cropped to the bins it extracted), for
    // comparisons; null for traces and sweep settings.
    std::shared_ptr<const ExtractionResult> values;
  };
  const std::vector<Run>& runs() const { return m_runs; }
  // show: make it the shown run (a sweep adds its settings' runs without showing them).
  void addRun(const QString& label, std::shared_ptr<const Profile> profile,
              std::shared_ptr<const ExtractionResult> result = nullptr, bool show = true,
              std::shared_ptr<const ExtractionResult> values = nullptr);
  void showRun(int index); // in the timeline and phase table
  int shownRun() const;

  // Chrome trace JSON; false after showing the error.
  bool openTrace(const QString& path);
  bool exportTrace(const QString& path) const;

  enum class Heatmap { None, WallTime, Chi2, Regularized, Sweep };
  // Draws a per-patch heatmap of the shown run (or the chosen sweep row) on the CCD;
  // false with the reason in statusText() when the run used another patch plan.
  bool setHeatmap(Heatmap h);
  // Values per plan patch of the current plan for a heatmap, NaN where untouched.
  QVector<double> heatmapValues(Heatmap h, QString* why = nullptr) const;

  // CPU vs CUDA (engine kinds as EngineRegistry::lease takes them), one job on the app's
  // job runner (refused while an extraction runs) with the registry's engines, each
  // filling a result of its own. Starts in the background;
  // false (with the reason shown in the view) when it cannot start.
  bool compareEngines(const QString& a = QStringLiteral("cpu"), const QString& b = QStringLiteral("cuda"),
                      bool wholeFrame = false);
  bool isComparing() const { return m_comparing; }

  // Sweep over the comma-separated values in the dock's fields (or those given).
  bool startSweep();
  void cancelSweep();
  bool isSweeping() const { return m_sweeping; }
  const SweepResult& sweepResult() const { return m_sweep; }
  void setSweepFields(const QString& nwavestep, const QString& nsubbundles, const QString& wavepadFrac,
                      bool wholeFrame);
  void selectSweepRow(int row); // applies its setting to the document and shows its patches

  QString statusText() const { return m_status; }

  // Jump to a patch of the shown run on the CCD: selects it and centres the CCD on its
  // kept region; false (with the reason in statusText()) when the run has no per-patch
  // results for the current plan.
  bool jumpToPatch(int patch);

  TimelineView* timeline() const { return m_timeline; }
  PhaseTable* phaseTable() const { return m_phaseTable; }
  ZoneFinder* zoneFinder() const { return m_zoneFinder; }
  SlowestPatches* slowestPatches() const { return m_slowest; }
  TimeAxisState* timeAxis() const { return m_axis; }
  RunComparisonView* runComparison() const { return m_runCompare; }
  EngineComparisonView* engineComparison() const { return m_engineCompare; }
  SweepView* sweepView() const { return m_sweepView; }
  QProgressBar* sweepProgress() const { return m_sweepBar; }
  QDockWidget* timelineDock() const { return m_timelineDock; }
  QDockWidget* runComparisonDock() const { return m_runDock; }
  QDockWidget* engineComparisonDock() const { return m_engineDock; }
  QDockWidget* sweepDock() const { return m_sweepDock; }
  // Any two results (runs, the opened frame, frame files) compared (issue 14).
  ComparisonDock* resultComparisonDock() const { return m_resultDock; }

signals:
  void runsChanged();
  void comparisonFinished(bool ok);
  void sweepFinished(bool cancelled);

private:
  // What the sweep's job shares with the GUI thread: progress (written by engine
  // threads) and the outcome (written by the job's worker before its finished signal).
  struct SweepShared {
    std::atomic<int> rowNow{0}, rows{0}, patchDone{0}, patchTotal{0};
    SweepResult result;
  };

  void buildTimelineDock();
  void buildRunDock();
  void buildEngineDock();
  void buildSweepDock();
  void refreshRunCombos();
  void updateRunComparison();
  void setStatus(const QString& s);
  void showAppliedSweepSetting();
  std::optional<std::vector<int>> selectedPatches() const;

  WorkbenchContext m_ctx;
  std::vector<Run> m_runs;
  int m_runCounter = 0;
  QString m_status;

  QDockWidget* m_timelineDock = nullptr;
  QDockWidget* m_runDock = nullptr;
  QDockWidget* m_engineDock = nullptr;
  QDockWidget* m_sweepDock = nullptr;
  ComparisonDock* m_resultDock = nullptr;

  TimeAxisState* m_axis = nullptr; // the timeline's, phase table's and run comparison's
  TimelineView* m_timeline = nullptr;
  PhaseTable* m_phaseTable = nullptr;
  ZoneFinder* m_zoneFinder = nullptr;
  SlowestPatches* m_slowest = nullptr;
  QLabel* m_phaseLabel = nullptr;
  QComboBox* m_runBox = nullptr;
  QComboBox* m_heatBox = nullptr;

  RunComparisonView* m_runCompare = nullptr;
  QComboBox* m_runA = nullptr;
  QComboBox* m_runB = nullptr;

  EngineComparisonView* m_engineCompare = nullptr;
  QCheckBox* m_compareWhole = nullptr;
  QPushButton* m_compareButton = nullptr;
  bool m_comparing = false; // a comparison job is on the app's job runner
  std::shared_ptr<ExtractionResult> m_compareA, m_compareB; // what it fills
  QString m_compareError;

  SweepView* m_sweepView = nullptr;
  QLineEdit* m_nwavestep = nullptr;
  QLineEdit* m_nsub = nullptr;
  QLineEdit* m_wavepad = nullptr;
  QCheckBox* m_sweepWhole = nullptr;
  QCheckBox* m_sweepCuda = nullptr;
  QPushButton* m_sweepRun = nullptr;
  QPushButton* m_sweepCancelButton = nullptr;
  QProgressBar* m_sweepBar = nullptr;
  QLabel* m_sweepLabel = nullptr;
  bool m_sweeping = false; // a sweep job is on the app's job runner
  std::shared_ptr<SweepShared> m_sweepState; // its shared state
  QString m_sweepError;
  QTimer m_sweepTimer;
  SweepResult m_sweep;
  int m_sweepSelected = -1;
};

} // namespace spex
