// WorkbenchContext: what the workbench's docks are built from (issue 14), so that no
// dock knows the MainWindow. The model (the Document: inputs, settings, plan,
// results), the ViewState (selection, pan/zoom, shown fiber), the app's one job
// runner (and through it the EngineRegistry of warm engines), the views a dock
// draws on (CCD heatmaps and regions, the residual view's chi) and the host window
// as a plain QMainWindow (where docks, toolbars and menus go). MainWindow fills one
// and hands it to installAnalysisDocks and installImageTools; tests may fill their own.
#pragma once

#include "widgets/image_scale.h"

#include <QString>

#include <functional>

class QMainWindow;
class QMenu;

namespace spex {

class CcdView;
class Document;
class ExtractionJob;
class ResidualView;
class ViewState;

struct WorkbenchContext {
  QMainWindow* host = nullptr; // docks, toolbars, menus and the status bar
  Document* document = nullptr;
  ViewState* state = nullptr;
  ExtractionJob* job = nullptr; // the one job runner; job->engines() is the EngineRegistry
  CcdView* ccd = nullptr;
  ResidualView* residuals = nullptr;
  QMenu* menuBefore = nullptr; // new menus go before this one (Help stays last)
  bool cudaUsable = false;     // built with CUDA and a usable GPU found
  QString gpuDescription;      // what was found ("none: ..." or the GPUs)
  // The data scale the CCD and residual views share.
  std::function<ScaleSettings()> scale;
  std::function<void(const ScaleSettings&)> setScale;
  // An error for the user (a dialog, or stderr when not interactive).
  std::function<void(const QString& title, const QString& message)> showError;
};

} // namespace spex
