// Speed benchmark of the spexlab workbench (issue: open a 4k x 4k frame and first paint
// < 1 s; pan/zoom repaint < 30 ms; the event loop never stalls > 50 ms while a
// whole-frame extraction runs). Not a test: it prints tables and never fails on time.
// Inputs are a full 500-fiber frame simulated through the synthetic ~4k x 4k PSF and
// written as preproc.fits + psf.fits, so the open path is the real FITS one.
// Also (issue 14): a 6-patch CPU selection, from the Extract click to the spectra
// painted (target <= 100 ms on the 2-core machine).
// Usage: QT_QPA_PLATFORM=offscreen spexlab-bench-gui [opens=5] [steps=50] [dir] [selection|repaint] [engine]
// ("selection": only the open and the 6-patch selection, no pan/zoom or whole frame;
// engine "cpu" (default) or "cuda" for the selection; SPEXLAB_BENCH_EVENTS=1 breaks a
// click's GUI-thread CPU time down by event).
#include "image_tools.h"
#include "main_window.h"

#include "core/sim/simulator.h"
#include "widgets/ccd_view.h"
#include "widgets/parameter_panel.h"
#include "widgets/spectrum_view.h"

#include <qcustomplot.h>
#include "widgets/view_state.h"

#include <QAction>
#include <QApplication>

#include <sys/resource.h>
#include <time.h>
#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QMetaEnum>
#include <QRegularExpression>
#include <QSettings>
#include <QThread>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace spex;

namespace {

// Counts paint events of one widget (seen before the paint runs; the paint is done
// once the processEvents call that delivered it returns).
class PaintCounter : public QObject {
public:
  int paints = 0;

protected:
  bool eventFilter(QObject* o, QEvent* e) override {
    if (e->type() == QEvent::Paint) ++paints;
    return QObject::eventFilter(o, e);
  }
};

struct Stats {
  double median = 0, p95 = 0, p99 = 0, max = 0;
  size_t n = 0;
};

Stats stats(std::vector<double> v) {
  Stats s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5))]; };
  s.median = at(0.5);
  s.p95 = at(0.95);
  s.p99 = at(0.99);
  s.max = v.back();
  return s;
}

void settle(int ms) {
  QElapsedTimer t;
  t.start();
  while (t.elapsed() < ms) QApplication::processEvents(QEventLoop::AllEvents, 20);
}

QString cpuModel() {
  QFile f(QStringLiteral("/proc/cpuinfo"));
  if (f.open(QIODevice::ReadOnly))
    for (const QByteArray& line : f.readAll().split('\n'))
      if (line.startsWith("model name")) return QString::fromLatin1(line.mid(line.indexOf(':') + 1).trimmed());
  return QStringLiteral("unknown CPU");
}

MainWindow* newWindow() {
  auto* w = new MainWindow;
  w->setInteractive(false);
  w->resize(1600, 1000);
  w->show();
  settle(300); // first layout and paint of the empty window, not timed
  return w;
}

// CPU time of the calling thread: what a paint costs whatever else the machine runs
// (wall time on a shared, loaded machine also counts the waits for a core).
double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// The GUI thread's resource use so far (getrusage RUSAGE_THREAD): where a repaint's
// wall time goes that its CPU time does not show (page faults, waits, preemption).
struct ThreadUse {
  double userMs = 0, sysMs = 0;
  long minflt = 0, vcsw = 0, ivcsw = 0;
};
ThreadUse threadUse() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return {u.ru_utime.tv_sec * 1e3 + u.ru_utime.tv_usec * 1e-3, u.ru_stime.tv_sec * 1e3 + u.ru_stime.tv_usec * 1e-3,
          u.ru_minflt, u.ru_nvcsw, u.ru_nivcsw};
}

struct Row {
  std::string what, figure, target, verdict;
};

// With SPEXLAB_BENCH_EVENTS set, the selection clicks also break the GUI thread's CPU
// time down by receiver class and event type (exclusive of nested events), to find
// what a click costs beyond the engine.
class ProfilingApp : public QApplication {
public:
  using QApplication::QApplication;
  bool recording = false;
  struct Acc {
    double ms = 0;
    long n = 0;
  };
  std::map<std::string, Acc> acc;
  // The last click's outermost events costing >= 0.2 ms: start (ms after `since`), CPU ms, name.
  struct Step {
    double at, wallMs, ms;
    std::string what;
  };
  void mark(const std::string& what) { steps.push_back({1e-6 * double(since.nsecsElapsed()), 0, 0, "-- " + what}); }
  std::vector<Step> steps;
  QElapsedTimer since;

  bool notify(QObject* o, QEvent* e) override {
    if (!recording || QThread::currentThread() != thread()) return QApplication::notify(o, e);
    // Named before delivery: the receiver (or the event) may be gone after it.
    const char* type = QMetaEnum::fromType<QEvent::Type>().valueToKey(e->type());
    std::string key = std::string(o->metaObject()->className()) + " " + (type ? type : std::to_string(int(e->type())));
    if (!o->objectName().isEmpty()) key += " (" + o->objectName().toStdString() + ")";
    const double t0 = threadCpuMs(), w0 = 1e-6 * double(since.nsecsElapsed());
    m_child.push_back(0);
    const bool r = QApplication::notify(o, e);
    const double dt = threadCpuMs() - t0;
    const double child = m_child.back();
    m_child.pop_back();
    if (!m_child.empty()) m_child.back() += dt;
    else if (dt >= 0.2) steps.push_back({w0, 1e-6 * double(since.nsecsElapsed()) - w0, dt, key});
    Acc& a = acc[key];
    a.ms += dt - child;
    ++a.n;
    return r;
  }

private:
  std::vector<double> m_child;
};

} // namespace

int main(int argc, char** argv) {
  ProfilingApp app(argc, argv);
  const bool profileEvents = qEnvironmentVariableIsSet("SPEXLAB_BENCH_EVENTS");
  // Own settings, cleared: no saved layout or scale from an earlier run or the real app.
  QApplication::setOrganizationName(QStringLiteral("SpexLab"));
  QApplication::setApplicationName(QStringLiteral("spexlab-bench-gui"));
  QSettings().clear();

  const int opens = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const int steps = argc > 2 ? std::max(2, std::atoi(argv[2])) : 50;
  const QString dir = argc > 3 ? QString::fromLocal8Bit(argv[3]) : QDir::tempPath() + QStringLiteral("/spexlab-bench-gui");
  const QString preproc = dir + QStringLiteral("/preproc.fits"), psfPath = dir + QStringLiteral("/psf.fits");
  const bool selectionOnly = argc > 4 && std::string(argv[4]) == "selection";
  // "repaint": only the open and the pan/zoom repaints (overlays, colour bar, axes and
  // panner on and off), no selection run and no whole-frame extraction.
  const bool repaintOnly = argc > 4 && std::string(argv[4]) == "repaint";
  // The selection's engine (argument 5): "cpu" (the default) or "cuda", kept warm
  // between clicks by the window's engine registry (the first click warms it).
  const QString selEngine = argc > 5 ? QString::fromLocal8Bit(argv[5]) : QStringLiteral("cpu");
  const int cores = QThread::idealThreadCount();
  std::vector<Row> rows;
  auto verdict = [](double v, double limit) { return std::string(v < limit ? "met" : "NOT met"); };
  char buf[160];

  // --- inputs: a full frame through the synthetic PSF, written once
  {
    QElapsedTimer t;
    t.start();
    DemoData demo = makeDemo(500);
    const double simS = t.nsecsElapsed() * 1e-9;
    writeSimulation(dir.toStdString(), demo.psf, demo.sim);
    std::printf("inputs: %d fibers, CCD %d x %d, simulated in %.2f s, written in %.2f s to %s\n",
                demo.psf.nfiber, demo.psf.npixX, demo.psf.npixY, simS, t.nsecsElapsed() * 1e-9 - simS,
                qPrintable(dir));
  }


  // --- open + first paint, each in a fresh window
  std::vector<double> openMs, loadMs;
  MainWindow* w = nullptr;
  for (int r = 0; r < opens; ++r) {
    delete w;
    w = newWindow();
    PaintCounter pc;
    w->ccdView()->installEventFilter(&pc);
    QElapsedTimer t;
    t.start();
    if (!w->openInputs(preproc, psfPath)) {
      std::fprintf(stderr, "spexlab-bench-gui: open failed: %s\n", qPrintable(w->lastError()));
      return 1;
    }
    loadMs.push_back(t.nsecsElapsed() * 1e-6);
    while (pc.paints == 0 && t.elapsed() < 20000) QApplication::processEvents(QEventLoop::AllEvents, 5);
    openMs.push_back(t.nsecsElapsed() * 1e-6);
    w->ccdView()->removeEventFilter(&pc);
  }
  const Stats so = stats(openMs), sl = stats(loadMs);
  std::printf("\nopen + first paint, %d fresh windows 1600x1000 (ccd view %dx%d)\n", opens,
              w->ccdView()->width(), w->ccdView()->height());
  std::printf("%-30s %10s %10s\n", "", "median ms", "max ms");
  std::printf("%-30s %10.1f %10.1f\n", "openInputs (read + render)", sl.median, sl.max);
  std::printf("%-30s %10.1f %10.1f\n", "openInputs + first paint", so.median, so.max);
  std::snprintf(buf, sizeof buf, "median %.0f ms, max %.0f ms (openInputs alone: median %.0f ms)", so.median,
                so.max, sl.median);
  rows.push_back({"open 4k x 4k frame + first paint", buf, "< 1 s", verdict(so.max, 1000)});
  settle(300);

  // --- 6-patch CPU selection: Extract clicked -> spectra painted
  if (!repaintOnly) {
    RunSettings sel = w->document()->settings();
    sel.engine = selEngine.toStdString();
    sel.threads = cores;
    w->document()->setSettings(sel);
    const auto plan = w->document()->plan();
    const int fiber = 12;
    const int bin = plan->wave.n / 2;
    const int p0 = plan->patchAt(fiber, bin);
    // Two sub-bundles x three wavelength steps around the fiber at mid-grid.
    QVector<int> six;
    for (int f : {fiber, fiber + plan->params.bundlesize / plan->params.nsubbundles})
      for (int db : {-1, 0, 1}) {
        const int p = plan->patchAt(f, bin + db * plan->params.nwavestep);
        if (p >= 0 && !six.contains(p)) six << p;
      }
    if (p0 < 0 || six.size() != 6) {
      std::fprintf(stderr, "spexlab-bench-gui: could not pick 6 patches\n");
      return 1;
    }
    w->viewState()->selectFiber(fiber);
    QCustomPlot* plot = w->spectrumView()->plot();
    std::vector<double> first, again, cpuMs, guiMs;
    // Process CPU time (user + system, all threads): on a shared machine the wall time
    // of a click swings with the load, its CPU time much less.
    auto cpuNow = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return 1e3 * double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-3 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
    };
    // CLOCK_MONOTONIC seconds of the clicks (for `perf record -k CLOCK_MONOTONIC` and
    // `perf report --time START,END`).
    auto monotonic = [] {
      timespec ts{};
      clock_gettime(CLOCK_MONOTONIC, &ts);
      return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
    };
    double clicksFrom = 0;
    for (int r = 0; r < 11; ++r) {
      if (r == 1) clicksFrom = monotonic();
      if (r == 0) w->clearResultsAction()->trigger(); // the first click allocates the frame's result
      settle(100);
      w->viewState()->setSelectedPatches(six);
      // The time each plot paint ended (a paint event is delivered here, so it is over
      // when the filter returns).
      struct PaintClock : QObject {
        QElapsedTimer* t = nullptr;
        double lastMs = -1;
        bool eventFilter(QObject* o, QEvent* e) override {
          if (e->type() != QEvent::Paint) return false;
          static_cast<QWidget*>(o)->removeEventFilter(this);
          o->event(e);
          o->installEventFilter(this);
          lastMs = t->nsecsElapsed() * 1e-6;
          return true;
        }
      } pc;
      bool done = false;
      double doneMs = 0;
      QElapsedTimer t;
      pc.t = &t;
      plot->installEventFilter(&pc);
      const auto c1 = QObject::connect(w->job(), &ExtractionJob::engineStarted, [&] { app.mark("engineStarted"); });
      const auto c2 = QObject::connect(w->job(), &ExtractionJob::patchesDone, [&](const QString&, const QVector<int>& b) {
        app.mark("patchesDone " + std::to_string(b.size()));
      });
      const auto c3 = QObject::connect(w->job(), &ExtractionJob::engineFinished, [&] { app.mark("engineFinished"); });
      const auto c = QObject::connect(w, &MainWindow::jobFinished, [&] {
        app.mark("jobFinished");
        done = true;
        doneMs = t.nsecsElapsed() * 1e-6;
      });
      QTimer wake; // the loop below sleeps in the event loop (as the app does); this bounds it
      wake.start(50);
      const double c0 = cpuNow(), g0 = threadCpuMs();
      app.recording = profileEvents && r > 0;
      app.steps.clear();
      t.start();
      app.since.start();
      w->extractSelectionAction()->trigger(); // what the toolbar button does
      app.mark("trigger() returned");
      while (!done && t.elapsed() < 60000) QApplication::processEvents(QEventLoop::WaitForMoreEvents);
      // Shown: the job is over and the plot has painted its final state: a paint after
      // the job ended, or the last one before it when nothing was left to draw.
      while (pc.lastMs < doneMs && t.elapsed() < doneMs + 300) QApplication::processEvents(QEventLoop::WaitForMoreEvents);
      const double ms = std::max(doneMs, pc.lastMs);
      app.recording = false;
      if (r > 0) cpuMs.push_back(cpuNow() - c0);
      if (r > 0) guiMs.push_back(threadCpuMs() - g0);
      std::fprintf(stderr, "click %d: CLOCK_MONOTONIC %.6f..%.6f, %.1f ms\n", r, monotonic() - 1e-9 * double(t.nsecsElapsed()),
                   monotonic(), ms);
      for (const auto& k : {c, c1, c2, c3}) QObject::disconnect(k);
      app.steps.push_back({pc.lastMs, 0, 0, "-- spectrum plot's last paint ended"});
      plot->removeEventFilter(&pc);
      wake.stop();
      if (!w->spectrumView()->fluxGraph(selEngine, fiber)) {
        std::fprintf(stderr, "spexlab-bench-gui: no spectrum after the selection run\n");
        return 1;
      }
      (r == 0 ? first : again).push_back(ms);
    }
    if (profileEvents) {
      // What one replot of the spectrum plot costs as it stands, per layer.
      QCustomPlot* sp = w->spectrumView()->plot();
      for (int pass = 0; pass < 2; ++pass) {
        std::vector<double> rp;
        for (int i = 0; i < 10; ++i) {
          const double c0 = threadCpuMs();
          sp->replot(QCustomPlot::rpImmediateRefresh);
          rp.push_back(threadCpuMs() - c0);
        }
        std::printf("  spectrum plot replot (%s): median %.2f ms CPU; graphs:", pass ? "graphs hidden" : "as shown",
                    stats(rp).median);
        for (int g = 0; g < sp->graphCount() && pass == 0; ++g)
          std::printf(" %d pts%s%s;", sp->graph(g)->dataCount(), sp->graph(g)->brush().style() != Qt::NoBrush ? " fill" : "",
                      sp->graph(g)->antialiased() ? " aa" : "");
        std::printf("\n");
        for (int g = 0; g < sp->graphCount(); ++g) sp->graph(g)->setVisible(pass != 0 ? true : false);
      }
      for (int only = 0; only < sp->graphCount(); ++only) {
        for (int g = 0; g < sp->graphCount(); ++g) sp->graph(g)->setVisible(g == only);
        std::vector<double> rp;
        int finite = 0;
        for (auto it = sp->graph(only)->data()->constBegin(); it != sp->graph(only)->data()->constEnd(); ++it)
          finite += std::isfinite(it->value);
        for (int i = 0; i < 10; ++i) {
          const double c0 = threadCpuMs();
          sp->replot(QCustomPlot::rpImmediateRefresh);
          rp.push_back(threadCpuMs() - c0);
        }
        const QCPRange kr = sp->graph(only)->keyAxis()->range(), vr = sp->graph(only)->valueAxis()->range();
        std::printf("  graph %d alone: %.2f ms (%d finite; keys %.1f..%.1f, values %.3g..%.3g)\n", only, stats(rp).median,
                    finite, kr.lower, kr.upper, vr.lower, vr.upper);
      }
      for (int g = 0; g < sp->graphCount(); ++g) sp->graph(g)->setVisible(true);
    }
    const Stats sa = stats(again), sc = stats(cpuMs), sg = stats(guiMs);
    std::fprintf(stderr, "clicks after the first: CLOCK_MONOTONIC %.6f,%.6f\n", clicksFrom, monotonic());
    std::printf("\n6-patch %s selection (fibers %d.., bins around %d, %d threads): Extract -> spectra painted\n",
                qPrintable(selEngine.toUpper()), fiber, bin, cores);
    std::printf("  first click (allocates the frame's result): %.1f ms; next clicks: median %.1f ms, max %.1f ms\n",
                first[0], sa.median, sa.max);
    std::printf("  next clicks, process CPU time (all threads): median %.1f ms, max %.1f ms; GUI thread: median %.1f ms\n",
                sc.median, sc.max, sg.median);
    if (profileEvents) {
      std::vector<std::pair<double, std::string>> top;
      double total = 0;
      for (const auto& [k, a] : app.acc) {
        top.push_back({a.ms, k + " x" + std::to_string(double(a.n) / double(again.size())).substr(0, 4)});
        total += a.ms;
      }
      std::sort(top.rbegin(), top.rend());
      std::printf("  GUI-thread CPU per click by event (exclusive, mean of %zu clicks; total %.1f ms):\n", again.size(),
                  total / double(again.size()));
      for (size_t i = 0; i < top.size() && i < 25; ++i)
        std::printf("    %7.2f ms  %s\n", top[i].first / double(again.size()), top[i].second.c_str());
      std::printf("  the last click's GUI-thread events >= 0.2 ms: start (wall ms after the click), wall ms, CPU ms:\n");
      for (const auto& st : app.steps)
        std::printf("    %7.1f %6.2f %6.2f  %s\n", st.at, st.wallMs, st.ms, st.what.c_str());
    }
    std::snprintf(buf, sizeof buf, "median %.0f ms, max %.0f ms (first click %.0f ms; CPU time median %.0f ms)",
                  sa.median, sa.max, first[0], sc.median);
    const bool cuda = selEngine == QLatin1String("cuda");
    rows.push_back({"6-patch " + selEngine.toUpper().toStdString() + " selection, click to spectra shown", buf,
                    cuda ? "<= 30 ms" : "<= 100 ms", verdict(sa.median, cuda ? 30.0001 : 100.0001)});
  }
  if (selectionOnly) {
    std::printf("\nMachine: %s, %d cores, Qt %s\n\n", qPrintable(cpuModel()), cores, qVersion());
    std::printf("| measurement | result | target | |\n|---|---|---|---|\n");
    for (const Row& r : rows)
      std::printf("| %s | %s | %s | %s |\n", r.what.c_str(), r.figure.c_str(), r.target.c_str(), r.verdict.c_str());
    delete w;
    QSettings().clear();
    return 0;
  }

  // --- pan/zoom repaints
  ViewState* vs = w->viewState();
  CcdView* ccd = w->ccdView();
  const auto psf = w->document()->psf();
  const QPointF mid(0.5 * psf->npixX, 0.5 * psf->npixY);
  struct Level {
    const char* name;
    double zoom; // 0: fit
  };
  const Level levels[] = {{"fit", 0}, {"1:1", 1}, {"4:1", 4}, {"0.25", 0.25}};
  // Median wall ms per part of the paint (ImageCanvas::lastPaintSections), per zoom.
  auto printSections = [](const std::vector<std::pair<const char*, std::map<QString, std::vector<double>>>>& perZoom) {
    std::vector<QString> names;
    for (const auto& [zoom, m] : perZoom)
      for (const auto& [name, v] : m)
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    std::printf("  per part of the paint, median wall ms:\n  %-22s", "");
    for (const auto& [zoom, m] : perZoom) std::printf(" %8s", zoom);
    std::printf("\n");
    for (const QString& name : names) {
      std::printf("  %-22s", qPrintable(name));
      for (const auto& [zoom, m] : perZoom) {
        auto it = m.find(name);
        if (it == m.end()) std::printf(" %8s", "-");
        else {
          std::vector<double> v = it->second;
          v.resize(std::max(v.size(), size_t(1)), 0.0);
          std::printf(" %8.2f", stats(v).median);
        }
      }
      std::printf("\n");
    }
  };
  auto panZoom = [&](const char* title) {
    std::vector<std::pair<const char*, std::map<QString, std::vector<double>>>> sections;
    std::printf("\n%s: %d steps per zoom (pan and zoom alternately), forced repaint() of the ccd view\n", title,
                steps);
    std::printf("%-8s %8s %10s %10s %10s %14s %10s %10s %8s %8s %8s %8s %8s\n", "zoom", "at", "median ms", "p95 ms",
                "max ms", "paintEvent med", "cpu med", "cpu p95", "sys ms", "faults", "waits", "preempt", "rebuilds");
    for (const Level& lv : levels) {
      if (lv.zoom == 0) ccd->fit();
      else vs->setView(mid, lv.zoom);
      const double z0 = vs->zoom();
      settle(50);
      // SPEXLAB_BENCH_SHOTS=DIR: the ccd view at the start of each pass, as PNGs (to
      // look at what the timed repaints draw, e.g. before and after a change).
      if (const QString shots = qEnvironmentVariable("SPEXLAB_BENCH_SHOTS"); !shots.isEmpty()) {
        QString name = QString::fromLatin1(title) + QLatin1Char('-') + QString::fromLatin1(lv.name);
        name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9.]+")), QStringLiteral("_"));
        QDir().mkpath(shots);
        ccd->grab().save(shots + QLatin1Char('/') + name + QStringLiteral(".png"));
      }
      std::vector<double> ms, inner, cpu;
      std::map<QString, std::vector<double>> parts;
      ThreadUse used; // summed over the timed repaints only
      const int builds0 = ccd->overlayLayerBuilds();
      for (int i = 0; i < steps; ++i) {
        if (i % 2 == 0) {
          // A drag step: 40 screen px, wandering right/up then back.
          const double d = 40.0 / vs->zoom() * ((i / 2) % 8 < 4 ? 1 : -1);
          vs->setCenter(vs->center() + QPointF(d, 0.5 * d));
        } else {
          // A wheel notch about the centre, in then out: the zoom stays near the level.
          vs->zoomAround((i / 2) % 2 ? 1 / 1.2 : 1.2, vs->center());
        }
        QElapsedTimer t;
        const ThreadUse u0 = threadUse();
        const double c0 = threadCpuMs();
        t.start();
        ccd->repaint();
        ms.push_back(t.nsecsElapsed() * 1e-6);
        cpu.push_back(threadCpuMs() - c0);
        const ThreadUse u1 = threadUse();
        used.sysMs += u1.sysMs - u0.sysMs;
        used.minflt += u1.minflt - u0.minflt;
        used.vcsw += u1.vcsw - u0.vcsw;
        used.ivcsw += u1.ivcsw - u0.ivcsw;
        inner.push_back(ccd->lastPaintMs());
        for (const auto& [name, partMs] : ccd->lastPaintSections()) parts[name].push_back(partMs);
        QApplication::processEvents(); // untimed: whatever the view change queued
      }
      const Stats s = stats(ms), si = stats(inner), sc = stats(cpu);
      // Per repaint, means: system time, minor page faults, voluntary context switches
      // (waits) and involuntary ones (preempted by another process).
      const double n = double(steps);
      // rebuilds: repaints that drew the overlay layer anew (the others moved it).
      std::printf("%-8s %8.3f %10.2f %10.2f %10.2f %14.2f %10.2f %10.2f %8.2f %8.1f %8.2f %8.2f %8d\n", lv.name, z0,
                  s.median, s.p95, s.max, si.median, sc.median, sc.p95, used.sysMs / n, used.minflt / n,
                  used.vcsw / n, used.ivcsw / n, ccd->overlayLayerBuilds() - builds0);
      std::snprintf(buf, sizeof buf, "median %.1f, p95 %.1f, max %.1f ms (GUI-thread CPU: median %.1f, p95 %.1f ms)",
                    s.median, s.p95, s.max, sc.median, sc.p95);
      rows.push_back({std::string("pan/zoom repaint, ") + lv.name + ", " + title, buf, "< 30 ms",
                      verdict(s.p95, 30)});
      // A part missing from some repaints counts 0 there.
      for (auto& [name, v] : parts) v.resize(size_t(steps), 0.0);
      sections.push_back({lv.name, std::move(parts)});
    }
    printSections(sections);
  };
  panZoom("default overlays");
  auto decorationPasses = [&](const char* what) {
    ImageTools* tools = ImageTools::of(w);
    if (!tools) return;
    const QList<QAction*> aids = {tools->colorBarAction(), tools->axesAction(), tools->pannerAction()};
    for (QAction* a : aids) a->setChecked(true);
    panZoom((std::string(what) + " + colour bar, pixel axes, panner").c_str());
    for (QAction* a : aids) a->setChecked(false);
    panZoom((std::string(what) + ", no colour bar/axes/panner").c_str());
    for (QAction* a : aids) a->setChecked(true);
  };
  if (repaintOnly) {
    for (int i = 0; i < kOverlayCount; ++i) w->overlayAction(Overlay(i))->setChecked(true);
    decorationPasses("all overlays");
  } else {

  // --- event loop during a whole-frame CPU extraction
  RunSettings rs = w->document()->settings();
  rs.engine = "cpu";
  rs.threads = cores;
  w->document()->setSettings(rs);
  ccd->fit();
  settle(200);
  std::vector<double> gaps, gapEnds; // ms
  QElapsedTimer clock;
  qint64 last = 0;
  QTimer tick;
  tick.setTimerType(Qt::PreciseTimer);
  tick.setInterval(5);
  QObject::connect(&tick, &QTimer::timeout, [&] {
    const qint64 now = clock.nsecsElapsed();
    gaps.push_back((now - last) * 1e-6);
    gapEnds.push_back(now * 1e-6);
    last = now;
  });
  // Ticks go on for 300 ms after the job ends, so a stall in the last result's
  // delivery (it runs just before jobFinished) shows up as a gap.
  QEventLoop loop;
  double wallS = 0, deliveredMs = 1e300;
  // Connected after the window's own handler: runs once the final result is in.
  QObject::connect(w->job(), &ExtractionJob::engineFinished, [&] {
    deliveredMs = std::min(deliveredMs, clock.nsecsElapsed() * 1e-6);
  });
  QObject::connect(w, &MainWindow::jobFinished, &loop, [&] {
    wallS = clock.nsecsElapsed() * 1e-9;
    QTimer::singleShot(300, &loop, &QEventLoop::quit);
  });
  clock.start();
  last = 0;
  tick.start();
  if (!w->runExtraction(true)) {
    std::fprintf(stderr, "spexlab-bench-gui: extraction did not start: %s\n", qPrintable(w->lastError()));
    return 1;
  }
  loop.exec();
  tick.stop();
  const Stats sg = stats(gaps);
  const long over50 = std::count_if(gaps.begin(), gaps.end(), [](double g) { return g > 50; });
  // Split: ticks while patches stream in, and the gap that holds the final result's
  // delivery (the first tick after the window's engineFinished handler returned).
  std::vector<double> running;
  double delivery = 0;
  for (size_t i = 0; i < gaps.size(); ++i) {
    if (gapEnds[i] < deliveredMs) running.push_back(gaps[i]);
    else if (gapEnds[i] - gaps[i] <= deliveredMs) delivery = std::max(delivery, gaps[i]);
  }
  const Stats sr = stats(running);
  const auto res = w->document()->result(QStringLiteral("cpu"));
  std::printf("\nwhole-frame CPU extraction (%zu patches, %d threads) with a 5 ms timer on the GUI thread\n",
              res ? res->patches.size() : size_t(0), rs.threads);
  std::printf("%-12s %8s %10s %10s %10s %10s %8s\n", "wall s", "ticks", "median ms", "p99 ms", "max ms",
              "gaps>50ms", "");
  std::printf("%-12.2f %8zu %10.2f %10.2f %10.2f %10ld\n", wallS, sg.n, sg.median, sg.p99, sg.max, over50);
  std::printf("  while patches stream in: p99 %.2f ms, max %.2f ms; gap holding the final result's delivery: %.1f ms\n",
              sr.p99, sr.max, delivery);
  std::snprintf(buf, sizeof buf,
                "largest gap %.1f ms, p99 %.1f ms, %ld gaps > 50 ms (while running: max %.1f ms; final delivery: "
                "%.0f ms); extraction %.1f s",
                sg.max, sg.p99, over50, sr.max, delivery, wallS);
  rows.push_back({"event-loop stall during whole-frame extraction", buf, "< 50 ms", verdict(sg.max, 50)});
  settle(300);

  // Same repaints with every overlay on and the extracted regions drawn, with the
  // image decorations of issue 14 (colour bar, pixel axes, the panner when zoomed in,
  // all on by default) and, for their cost, without them.
  for (int i = 0; i < kOverlayCount; ++i) w->overlayAction(Overlay(i))->setChecked(true);
  decorationPasses("all overlays, after extraction");
  } // !repaintOnly

  // --- summary
  std::printf("\nMachine: %s, %d cores, Qt %s, QT_QPA_PLATFORM=%s\n\n", qPrintable(cpuModel()), cores, qVersion(),
              qEnvironmentVariableIsSet("QT_QPA_PLATFORM") ? qgetenv("QT_QPA_PLATFORM").constData()
                                                           : qPrintable(QApplication::platformName()));
  std::printf("| measurement | result | target | |\n|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %s | %s |\n", r.what.c_str(), r.figure.c_str(), r.target.c_str(), r.verdict.c_str());
  delete w;
  QSettings().clear();
  return 0;
}
