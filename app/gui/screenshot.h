// Headless pictures of the workbench for the user guide: `spexlab --screenshot out.png`
// loads what it was told, optionally extracts, sets the selection and zoom, grabs the
// window (or one view) and exits.
#pragma once

#include <QString>
#include <QStringList>

#include <limits>

namespace spex {

class MainWindow;

struct ScreenshotOptions {
  QString path;
  bool extract = false;        // run the whole frame first
  int patches = 0;             // else, when > 0: extract this many patches around the selection
  int fiber = -1;              // select this fiber
  double wave = std::numeric_limits<double>::quiet_NaN(); // and this wavelength
  double zoom = 0;             // > 0: zoom on the selection (screen px per CCD px)
  QString raise;               // dock to bring to front: "residuals", "resolution"
  QString view = "window";     // what to grab: window, ccd, spectrum, residuals, resolution
  QStringList overlaysOn;      // overlay keys to switch on (ccd_view.h overlayKey)
  // Two engine kinds ("cpu,cuda"): run the CPU-vs-CUDA comparison (on the whole frame
  // with extract, else on the selected patches) `compareRuns` times in one process
  // (the first run of a GPU engine pays for its start-up), print each agreement table
  // to stdout and grab with the comparison dock in front.
  QStringList compare;
  int compareRuns = 1;
};

// Returns the process exit code: 0 when the picture was written.
int takeScreenshot(MainWindow& window, const ScreenshotOptions& opt);

} // namespace spex
