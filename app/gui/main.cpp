// spexlab: the desktop workbench. With no arguments it opens a demo (a simulated
// frame through the project's synthetic PSF); --preproc/--psf open real inputs;
// --screenshot renders the window headless for the docs.
#include "app_icon.h"
#include "main_window.h"
#include "screenshot.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QSettings>
#include <QTimer>

#include <cmath>

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("SpexLab"));
  QApplication::setApplicationName(QStringLiteral("spexlab"));
  QApplication::setApplicationVersion(QStringLiteral(SPEXLAB_VERSION));
  // The desktop entry's name, so a desktop matches windows to it; the icon is the
  // same SVG (drawn by Qt's SVG plugins, libqt6svg6).
  QGuiApplication::setDesktopFileName(QStringLiteral("spexlab"));
  QApplication::setWindowIcon(spex::applicationIcon());

  QCommandLineParser cli;
  cli.setApplicationDescription(QStringLiteral("SpexLab spectro-perfectionism workbench"));
  cli.addHelpOption();
  cli.addVersionOption();
  const QCommandLineOption preproc(QStringLiteral("preproc"), QStringLiteral("Preproc image to open."), QStringLiteral("file"));
  const QCommandLineOption psf(QStringLiteral("psf"), QStringLiteral("PSF to open with it."), QStringLiteral("file"));
  const QCommandLineOption truth(QStringLiteral("truth"), QStringLiteral("Simulation truth."), QStringLiteral("file"));
  const QCommandLineOption frame(QStringLiteral("frame"), QStringLiteral("Frame file to inspect."), QStringLiteral("file"));
  const QCommandLineOption demoFibers(QStringLiteral("demo-fibers"), QStringLiteral("Fibers lit in the demo (default 50)."), QStringLiteral("n"));
  const QCommandLineOption shot(QStringLiteral("screenshot"), QStringLiteral("Render the window to a PNG/PDF and exit."), QStringLiteral("file"));
  const QCommandLineOption extract(QStringLiteral("extract"), QStringLiteral("With --screenshot: extract the whole frame first."));
  const QCommandLineOption patches(QStringLiteral("extract-patches"), QStringLiteral("With --screenshot: extract n patches around the selection."), QStringLiteral("n"));
  const QCommandLineOption fiber(QStringLiteral("select-fiber"), QStringLiteral("Fiber to select."), QStringLiteral("n"));
  const QCommandLineOption wave(QStringLiteral("wave"), QStringLiteral("Wavelength to select [A]."), QStringLiteral("w"));
  const QCommandLineOption zoom(QStringLiteral("zoom"), QStringLiteral("Zoom on the selection (screen px per CCD px)."), QStringLiteral("z"));
  const QCommandLineOption raise(QStringLiteral("raise"), QStringLiteral("Dock to show in front: residuals, resolution, timelineDock, runComparisonDock, engineComparisonDock, sweepDock."), QStringLiteral("dock"));
  const QCommandLineOption view(QStringLiteral("view"), QStringLiteral("What to grab: window, ccd, spectrum, residuals, resolution, or a dock by name (e.g. timelineDock)."), QStringLiteral("name"));
  const QCommandLineOption overlays(QStringLiteral("overlays"), QStringLiteral("Overlays to switch on, comma separated (patchGrid, isoWavelength, maskedPixels, ...)."), QStringLiteral("list"));
  const QCommandLineOption size(QStringLiteral("size"), QStringLiteral("Window size WxH for --screenshot (default 1600x1000)."), QStringLiteral("WxH"));
  const QCommandLineOption compare(QStringLiteral("compare"), QStringLiteral("With --screenshot: compare two engines, e.g. cpu,cuda (whole frame with --extract)."), QStringLiteral("a,b"));
  const QCommandLineOption compareRuns(QStringLiteral("compare-runs"), QStringLiteral("With --compare: run the comparison n times (default 1)."), QStringLiteral("n"));
  const QCommandLineOption compareResults(QStringLiteral("compare-results"), QStringLiteral("With --screenshot: compare two results in Compare results: last, previous, frame, cpu, cuda or a frame file, e.g. last,frame."), QStringLiteral("a,b"));
  const QCommandLineOption sweep(QStringLiteral("sweep"), QStringLiteral("With --screenshot: run a CPU patch-size sweep NWAVESTEPS:NSUBBUNDLES[:WAVEPADFRACS], e.g. 50,75:3,5 (on the selection, else the whole frame)."), QStringLiteral("spec"));
  const QCommandLineOption openTrace(QStringLiteral("open-trace"), QStringLiteral("With --screenshot: open a Chrome trace JSON as a run."), QStringLiteral("file"));
  const QCommandLineOption heatmap(QStringLiteral("heatmap"), QStringLiteral("With --screenshot: per-patch CCD heatmap: wall, chi2, regularized, sweep."), QStringLiteral("kind"));
  const QCommandLineOption colormap(QStringLiteral("colormap"), QStringLiteral("With --screenshot: CCD colormap (grey, viridis, magma, diverging)."), QStringLiteral("name"));
  const QCommandLineOption highlight(QStringLiteral("highlight"), QStringLiteral("With --screenshot: highlight a phase's zones on the timelines."), QStringLiteral("phase"));
  const QCommandLineOption findZone(QStringLiteral("find-zone"), QStringLiteral("With --screenshot: find zones by name and jump to the slowest."), QStringLiteral("name"));
  const QCommandLineOption slowest(QStringLiteral("slowest-patch"), QStringLiteral("With --screenshot: show the slowest patches and jump to the slowest."));
  for (const auto* o : {&highlight, &findZone, &slowest}) cli.addOption(*o);
  const QCommandLineOption box(QStringLiteral("box"), QStringLiteral("With --screenshot: a box region x0,y0,x1,y1 (CCD px); its statistics go to the Region dock."), QStringLiteral("x0,y0,x1,y1"));
  const QCommandLineOption cutLine(QStringLiteral("cut"), QStringLiteral("With --screenshot: a cut line x0,y0,x1,y1 (CCD px) plotted in the Region dock."), QStringLiteral("x0,y0,x1,y1"));
  const QCommandLineOption invert(QStringLiteral("invert"), QStringLiteral("With --screenshot: invert the colormap."));
  for (const auto* o : {&box, &cutLine, &invert}) cli.addOption(*o);
  const QCommandLineOption timeWindow(QStringLiteral("time-window"), QStringLiteral("With --screenshot: show this window of the timeline, T0,T1 in ms of the shown run."), QStringLiteral("t0,t1"));
  const QCommandLineOption tooltip(QStringLiteral("tooltip"), QStringLiteral("With --screenshot: draw the timeline tooltip of the longest zone in view whose name contains this."), QStringLiteral("name"));
  const QCommandLineOption dockHeight(QStringLiteral("dock-height"), QStringLiteral("With --screenshot and --raise: the raised dock's share of the window height, in percent."), QStringLiteral("percent"));
  const QCommandLineOption tableShare(QStringLiteral("table-share"), QStringLiteral("With --screenshot: the Timeline dock's tables (phases, find zone) take this percentage of its width."), QStringLiteral("percent"));
  for (const auto* o : {&timeWindow, &tooltip, &dockHeight, &tableShare}) cli.addOption(*o);
  for (const auto* o : {&compare, &compareRuns, &compareResults, &preproc, &psf, &truth, &frame, &demoFibers, &shot, &extract, &patches, &fiber, &wave, &zoom,
                        &raise, &view, &overlays, &size, &sweep, &openTrace, &heatmap, &colormap})
    cli.addOption(*o);
  cli.process(app);

  const bool headless = cli.isSet(shot);
  spex::MainWindow window;
  window.setInteractive(!headless);
  if (headless) {
    int w = 1600, h = 1000;
    const QStringList wh = cli.value(size).split(QLatin1Char('x'));
    if (wh.size() == 2) {
      w = wh[0].toInt();
      h = wh[1].toInt();
    }
    window.resize(w, h);
    window.show();
  } else if (!QSettings().contains(QStringLiteral("window/geometry"))) {
    window.showMaximized(); // a first start: the CCD wants all the room there is
  } else {
    window.show();
  }

  bool ok = true;
  if (cli.isSet(preproc) || cli.isSet(psf)) {
    ok = window.openInputs(cli.value(preproc), cli.value(psf), cli.value(truth));
  } else {
    const int n = cli.isSet(demoFibers) ? cli.value(demoFibers).toInt()
                                        : QSettings().value(QStringLiteral("demo/fibers"), 50).toInt();
    ok = window.openDemo(n);
  }
  if (ok && cli.isSet(frame)) ok = window.openFrame(cli.value(frame));

  if (headless) {
    if (!ok) return 1;
    spex::ScreenshotOptions o;
    o.path = cli.value(shot);
    o.extract = cli.isSet(extract);
    o.patches = cli.value(patches).toInt();
    o.fiber = cli.isSet(fiber) ? cli.value(fiber).toInt() : -1;
    o.wave = cli.isSet(wave) ? cli.value(wave).toDouble() : std::nan("");
    o.zoom = cli.value(zoom).toDouble();
    o.raise = cli.value(raise);
    if (cli.isSet(view)) o.view = cli.value(view);
    o.compare = cli.value(compare).split(QLatin1Char(','), Qt::SkipEmptyParts);
    if (cli.isSet(compareRuns)) o.compareRuns = cli.value(compareRuns).toInt();
    o.compareResults = cli.value(compareResults).split(QLatin1Char(','), Qt::SkipEmptyParts);
    if (cli.isSet(overlays)) o.overlaysOn = cli.value(overlays).split(QLatin1Char(','), Qt::SkipEmptyParts);
    o.sweep = cli.value(sweep);
    o.openTrace = cli.value(openTrace);
    o.heatmap = cli.value(heatmap);
    o.colormap = cli.value(colormap);
    o.highlight = cli.value(highlight);
    o.findZone = cli.value(findZone);
    o.slowestPatch = cli.isSet(slowest);
    o.box = cli.value(box);
    o.cut = cli.value(cutLine);
    o.invert = cli.isSet(invert);
    o.timeWindow = cli.value(timeWindow);
    o.tooltip = cli.value(tooltip);
    o.dockHeight = cli.value(dockHeight).toInt();
    o.tableShare = cli.value(tableShare).toInt();
    return spex::takeScreenshot(window, o);
  }
  return app.exec();
}
