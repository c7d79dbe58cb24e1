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
  QString raise;               // dock to bring to front: "residuals", "resolution", "timelineDock", ...
  // What to grab: window, ccd, spectrum, residuals, resolution, or a dock's object name
  // ("timelineDock", "sweepDock", ...: that dock alone).
  QString view = "window";
  QStringList overlaysOn;      // overlay keys to switch on (ccd_view.h overlayKey)
  QString colormap;            // CCD colormap by name (colormap.h), empty: as saved
  // "NWAVESTEPS:NSUBBUNDLES[:WAVEPADFRACS]", each a comma-separated list ("50,75:3,5"):
  // run a patch-size sweep on the CPU (on the selection, else the whole frame) after
  // any extraction, and wait for it.
  QString sweep;
  QString openTrace;           // a Chrome trace JSON to open as a run
  QString heatmap;             // per-patch CCD heatmap: wall, chi2, regularized, sweep
  // Two engine kinds ("cpu,cuda"): run the CPU-vs-CUDA comparison (on the whole frame
  // with extract, else on the selected patches) `compareRuns` times in one process
  // (the first run of a GPU engine pays for its start-up), print each agreement table
  // to stdout and grab with the comparison dock in front.
  QStringList compare;
  int compareRuns = 1;
  // Timeline dock (after any extraction): highlight a phase; show the Find zone tab for
  // a name and jump to its slowest zone; show the Slowest patches tab and jump to the
  // slowest patch (timeline and CCD).
  QString highlight;
  QString findZone;
  bool slowestPatch = false;
  // Two results for the Compare results dock, each a key of ComparisonDock::choiceFor
  // ("last", "previous", "frame", "cpu", "cuda" or a frame file): compared after any
  // extraction, the table printed to stdout, the dock brought to front.
  QStringList compareResults;
  // Image tools (issue 14), CCD coordinates "x0,y0,x1,y1": a box region (statistics in
  // the Region dock) and a cut line (its plot below them); an inverted colormap.
  QString box;
  QString cut;
  bool invert = false;
  // Timeline (issue 12): the window "T0,T1" in milliseconds of the shown run (e.g. a
  // kernel-rich stretch of an opened GPU trace), and the tooltip of the longest zone
  // whose name contains `tooltip` in that window, drawn into the picture beside it.
  QString timeWindow;
  QString tooltip;
  int tableShare = 0; // > 0: the timeline dock's tables take this percentage of its width
  int dockHeight = 0; // > 0: the raised dock takes this percentage of the window's height
};

// Returns the process exit code: 0 when the picture was written.
int takeScreenshot(MainWindow& window, const ScreenshotOptions& opt);

} // namespace spex
