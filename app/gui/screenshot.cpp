#include "screenshot.h"

#include "analysis_docks.h"
#include "comparison_dock.h"
#include "main_window.h"

#include "widgets/colormap.h"
#include "widgets/comparison/frame_comparison_view.h"
#include "image_tools.h"
#include "widgets/residual_view.h"
#include "widgets/side_by_side_view.h"
#include "widgets/profiling/engine_comparison_view.h"
#include "widgets/profiling/slowest_patches.h"
#include "widgets/profiling/time_axis_state.h"
#include "widgets/profiling/timeline_view.h"
#include "widgets/profiling/zone_finder.h"

#include "widgets/view_state.h"

#include <QApplication>
#include <QLabel>
#include <QSplitter>
#include <QPainter>
#include <QToolTip>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QTabWidget>
#include <QTableWidget>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace spex {

namespace {
void settle(int ms) {
  // Let queued replots, resizes and layout passes run before grabbing.
  QElapsedTimer t;
  t.start();
  while (t.elapsed() < ms) QApplication::processEvents(QEventLoop::AllEvents, 20);
}

bool waitForJob(MainWindow& w) {
  if (!w.isBusy()) return true;
  QEventLoop loop;
  QObject::connect(&w, &MainWindow::jobFinished, &loop, &QEventLoop::quit);
  loop.exec();
  return true;
}
// "x0,y0,x1,y1" -> four numbers; false when it is not that.
bool fourNumbers(const QString& text, double v[4]) {
  const QStringList p = text.split(QLatin1Char(','));
  if (p.size() != 4) return false;
  for (int i = 0; i < 4; ++i) {
    bool ok = false;
    v[i] = p[i].trimmed().toDouble(&ok);
    if (!ok) return false;
  }
  return true;
}

bool applyImageTools(MainWindow& w, const ScreenshotOptions& opt) {
  if (opt.invert) {
    ScaleSettings s = w.scale();
    s.inverted = true;
    w.setScale(s);
  }
  double v[4];
  if (!opt.box.isEmpty()) {
    if (!fourNumbers(opt.box, v)) {
      std::fprintf(stderr, "spexlab: --box expects x0,y0,x1,y1 in CCD pixels, got '%s'\n", qPrintable(opt.box));
      return false;
    }
    w.ccdView()->setBoxRegion(QRectF(QPointF(v[0], v[1]), QPointF(v[2], v[3])).normalized());
  }
  if (!opt.cut.isEmpty()) {
    if (!fourNumbers(opt.cut, v)) {
      std::fprintf(stderr, "spexlab: --cut expects x0,y0,x1,y1 in CCD pixels, got '%s'\n", qPrintable(opt.cut));
      return false;
    }
    w.ccdView()->setCutLine(QLineF(v[0], v[1], v[2], v[3]));
  }
  // Side by side shows the residual view's arrays: let that finish first.
  w.residualView()->waitForUpdate();
  if (ImageTools* tools = ImageTools::of(&w)) {
    SideBySideView* sbs = tools->sideBySide();
    sbs->waitForUpdate();
    // The crosshair on the selected point, as if the cursor were there.
    const auto psf = w.document()->psf();
    const int f = w.viewState()->selectedFiber();
    const double wave = w.viewState()->selectedWave();
    if (psf && f >= 0 && std::isfinite(wave)) sbs->showPixel(QPointF(psf->x(f, wave), psf->y(f, wave)));
  }
  return true;
}
} // namespace

int takeScreenshot(MainWindow& w, const ScreenshotOptions& opt) {
  settle(200);
  for (const QString& key : opt.overlaysOn)
    for (int i = 0; i < kOverlayCount; ++i)
      if (overlayKey(Overlay(i)) == key) w.overlayAction(Overlay(i))->setChecked(true);
  if (!opt.colormap.isEmpty()) {
    ScaleSettings s = w.scale();
    s.colormap = colormapFromName(opt.colormap);
    w.setScale(s);
  }

  ViewState* vs = w.viewState();
  const auto psf = w.document()->psf();
  if (opt.fiber >= 0 && psf && opt.fiber < psf->nfiber) {
    vs->selectFiber(opt.fiber);
    double wave = opt.wave;
    if (!std::isfinite(wave)) wave = 0.5 * (psf->waveMin() + psf->waveMax());
    vs->setSelectedWave(wave);
    if (opt.patches > 0 && w.document()->plan()) {
      const PatchPlan& plan = *w.document()->plan();
      const int bin = int(std::lround((wave - plan.wave.wmin) / plan.wave.dw));
      const int p0 = plan.patchAt(opt.fiber, std::clamp(bin, 0, plan.wave.n - 1));
      QVector<int> sel;
      if (p0 >= 0) {
        // The patch under the selection and its neighbours in wavelength and fiber.
        const Patch& p = plan.patches[p0];
        const int half = std::max(1, opt.patches / 2);
        std::vector<int> near = plan.patchesInRegion(p.fiber0 - 5 * (half / 3), p.fiber0 + p.nfiber + 5 * (half / 3),
                                                     std::max(0, p.wave0 - plan.params.nwavestep * half / 2),
                                                     p.wave0 + p.nwave + plan.params.nwavestep * half / 2);
        // Nearest first, so the patch under the selection is always among them.
        auto distance = [&](int q) {
          const Patch& o = plan.patches[q];
          return std::abs(o.wave0 - p.wave0) / double(std::max(1, p.nwave)) +
                 std::abs(o.fiber0 - p.fiber0) / double(std::max(1, p.nfiber));
        };
        std::stable_sort(near.begin(), near.end(), [&](int a, int b) { return distance(a) < distance(b); });
        for (int q : near)
          if (sel.size() < opt.patches) sel.push_back(q);
        std::sort(sel.begin(), sel.end());
      }
      vs->setSelectedPatches(sel);
    }
    if (opt.zoom > 0) vs->setView(QPointF(psf->x(opt.fiber, wave), psf->y(opt.fiber, wave)), opt.zoom);
  }
  if (opt.compare.size() == 2) {
    AnalysisDocks* docks = AnalysisDocks::of(&w);
    if (!docks) return 2;
    EngineComparisonView* v = docks->engineComparison();
    for (int run = 1; run <= std::max(1, opt.compareRuns); ++run) {
      QEventLoop loop;
      bool ok = false;
      const auto c = QObject::connect(docks, &AnalysisDocks::comparisonFinished, &loop, [&](bool good) {
        ok = good;
        loop.quit();
      });
      if (!docks->compareEngines(opt.compare[0], opt.compare[1], opt.extract)) {
        std::fprintf(stderr, "spexlab: %s\n", qPrintable(v->message()));
        return 2;
      }
      loop.exec();
      QObject::disconnect(c);
      if (!ok || !v->hasComparison()) {
        std::fprintf(stderr, "spexlab: comparison failed: %s\n", qPrintable(v->message()));
        return 2;
      }
      std::printf("comparison %d of %d: %s vs %s\n", run, opt.compareRuns, qPrintable(opt.compare[0]),
                  qPrintable(opt.compare[1]));
      const QTableWidget* t = v->table();
      for (int r = 0; r < t->rowCount(); ++r)
        std::printf("  %-34s %s\n", qPrintable(t->item(r, 0)->text()), qPrintable(t->item(r, 1)->text()));
    }
    QDockWidget* d = docks->engineComparisonDock();
    d->show();
    d->raise();
  } else if (opt.extract || opt.patches > 0) {
    if (!w.runExtraction(opt.extract)) return 2;
    waitForJob(w);
  }
  AnalysisDocks* docks = AnalysisDocks::of(&w);
  if (opt.compareResults.size() == 2) {
    ComparisonDock* d = docks ? docks->resultComparisonDock() : nullptr;
    if (!d) return 2;
    const QString a = d->choiceFor(opt.compareResults[0]), b = d->choiceFor(opt.compareResults[1]);
    if (a.isEmpty() || b.isEmpty()) {
      std::fprintf(stderr, "spexlab: --compare-results: no result '%s'; there are: %s\n",
                   qPrintable(a.isEmpty() ? opt.compareResults[0] : opt.compareResults[1]),
                   qPrintable(d->choices().join(QStringLiteral("; "))));
      return 2;
    }
    if (!d->choose(a, b) || !d->compare()) {
      std::fprintf(stderr, "spexlab: %s\n", qPrintable(d->view()->message()));
      return 2;
    }
    std::printf("a = %s\nb = %s\n", qPrintable(a), qPrintable(b));
    if (!d->view()->overlapNote().isEmpty()) std::printf("%s\n", qPrintable(d->view()->overlapNote()));
    std::printf("%s", qPrintable(d->view()->tableText()));
    d->show();
    d->raise();
  }
  if (!opt.sweep.isEmpty()) {
    const QStringList parts = opt.sweep.split(QLatin1Char(':'));
    if (!docks || parts.size() < 2 || parts.size() > 3) {
      std::fprintf(stderr, "spexlab: --sweep expects NWAVESTEPS:NSUBBUNDLES[:WAVEPADFRACS], e.g. 50,75:3,5\n");
      return 2;
    }
    docks->setSweepFields(parts[0], parts[1], parts.value(2, QStringLiteral("0.2")), false);
    QEventLoop loop;
    QObject::connect(docks, &AnalysisDocks::sweepFinished, &loop, &QEventLoop::quit);
    if (!docks->startSweep()) {
      std::fprintf(stderr, "spexlab: the sweep did not start\n");
      return 2;
    }
    loop.exec();
    const SweepResult& r = docks->sweepResult();
    int good = 0;
    for (const SweepRow& row : r.rows) good += row.ok();
    if (good == 0) {
      std::fprintf(stderr, "spexlab: no sweep setting succeeded\n");
      return 2;
    }
    std::printf("sweep: %d settings, %d ok (%s accuracy)\n", int(r.rows.size()), good, sweepModeName(r.mode));
    docks->sweepDock()->show();
    docks->sweepDock()->raise();
  }
  if (!opt.openTrace.isEmpty() && (!docks || !docks->openTrace(opt.openTrace))) return 2;
  if (!opt.heatmap.isEmpty()) {
    static const std::pair<const char*, AnalysisDocks::Heatmap> kinds[] = {
        {"none", AnalysisDocks::Heatmap::None},
        {"wall", AnalysisDocks::Heatmap::WallTime},
        {"chi2", AnalysisDocks::Heatmap::Chi2},
        {"regularized", AnalysisDocks::Heatmap::Regularized},
        {"sweep", AnalysisDocks::Heatmap::Sweep}};
    bool known = false;
    for (const auto& [name, kind] : kinds)
      if (opt.heatmap == QLatin1String(name)) {
        known = true;
        if (!docks || !docks->setHeatmap(kind)) {
          std::fprintf(stderr, "spexlab: no %s heatmap: %s\n", name, docks ? qPrintable(docks->statusText()) : "");
          return 2;
        }
      }
    if (!known) {
      std::fprintf(stderr, "spexlab: --heatmap is one of none, wall, chi2, regularized, sweep\n");
      return 2;
    }
  }
  if (!applyImageTools(w, opt)) return 2;
  if (docks) {
    auto* tabs = docks->timelineDock()->findChild<QTabWidget*>(QStringLiteral("timelineTabs"));
    if (!opt.highlight.isEmpty()) docks->timeAxis()->setHighlightedPhase(opt.highlight);
    if (!opt.findZone.isEmpty()) {
      if (tabs) tabs->setCurrentWidget(docks->zoneFinder());
      docks->zoneFinder()->find(opt.findZone);
      const auto& m = docks->zoneFinder()->matches();
      if (m.empty()) {
        std::fprintf(stderr, "spexlab: no zone named like %s\n", qPrintable(opt.findZone));
        return 2;
      }
      docks->zoneFinder()->table()->selectRow(0);
      docks->timeline()->showZone(0, m.front());
    }
    if (opt.slowestPatch) {
      if (tabs) tabs->setCurrentWidget(docks->slowestPatches());
      const auto& ps = docks->slowestPatches()->patches();
      if (ps.empty()) {
        std::fprintf(stderr, "spexlab: the shown run has no patches\n");
        return 2;
      }
      docks->slowestPatches()->table()->selectRow(0);
      docks->timeline()->showZone(0, ps.front().longest);
      docks->jumpToPatch(ps.front().patch);
    }
  }
  if (!opt.timeWindow.isEmpty()) {
    const QStringList p = opt.timeWindow.split(QLatin1Char(','));
    bool ok0 = false, ok1 = false;
    const double a = p.size() == 2 ? p[0].toDouble(&ok0) : 0, b = p.size() == 2 ? p[1].toDouble(&ok1) : 0;
    if (!docks || !ok0 || !ok1 || !(b > a)) {
      std::fprintf(stderr, "spexlab: --time-window wants T0,T1 in ms with T1 > T0, got %s\n", qPrintable(opt.timeWindow));
      return 2;
    }
    docks->timeAxis()->setViewRange(int64_t(std::llround(a * 1e6)), int64_t(std::llround(b * 1e6)));
  }
  if (!opt.raise.isEmpty())
    for (QDockWidget* d : w.findChildren<QDockWidget*>())
      if (d->objectName().startsWith(opt.raise)) {
        d->show();
        d->raise();
        if (opt.dockHeight > 0)
          w.resizeDocks({d}, {w.height() * std::min(opt.dockHeight, 90) / 100}, Qt::Vertical);
      }
  if (opt.tableShare > 0 && docks)
    if (auto* split = docks->timelineDock()->findChild<QSplitter*>()) {
      settle(100);
      const int total = split->width(), share = std::min(opt.tableShare, 90);
      split->setSizes({total * (100 - share) / 100, total * share / 100});
    }
  settle(400);
  QWidget* target = opt.view == QLatin1String("window") ? &w : nullptr;
  for (QDockWidget* d : w.findChildren<QDockWidget*>())
    if (d->objectName() == opt.view) target = d;
  if (!opt.tooltip.isEmpty()) {
    // A tooltip is a window of its own that grab() leaves out: draw its text, as the
    // timeline makes it, into the picture where the pointer would be.
    TimelineView* tl = docks ? docks->timeline() : nullptr;
    if (!tl || !target || !tl->profile()) {
      std::fprintf(stderr, "spexlab: --tooltip needs a shown run and --view window or a dock\n");
      return 2;
    }
    const Profile& prof = *tl->profile();
    int best = -1;
    for (std::size_t i = 0; i < prof.ranges.size(); ++i) {
      const ProfileRange& r = prof.ranges[i];
      if (!QString::fromStdString(r.name).contains(opt.tooltip) || r.endNs <= tl->viewStart() ||
          r.startNs >= tl->viewEnd() || tl->rowOf(0, int(i)) < 0)
        continue;
      if (best < 0 || r.durationNs() > prof.ranges[best].durationNs()) best = int(i);
    }
    if (best < 0) {
      std::fprintf(stderr, "spexlab: --tooltip: no zone named like %s in view\n", qPrintable(opt.tooltip));
      return 2;
    }
    const ProfileRange& r = prof.ranges[best];
    const int64_t mid = (std::max(r.startNs, tl->viewStart()) + std::min(r.endNs, tl->viewEnd())) / 2;
    const QPoint at(int(tl->xOf(mid)), tl->rowTop(tl->rowOf(0, best)) + TimelineView::kRowHeight / 2);
    QLabel tip;
    tip.setText(tl->toolTipAt(at));
    tip.setTextFormat(Qt::RichText);
    tip.setPalette(QToolTip::palette());
    tip.setAutoFillBackground(true);
    tip.setMargin(6);
    tip.setFrameStyle(QFrame::Box | QFrame::Plain);
    tip.setFont(QToolTip::font());
    tip.adjustSize();
    QPixmap shot = target->grab();
    QPoint pos = tl->mapTo(target, at) + QPoint(12, 16);
    pos.setX(std::clamp(pos.x(), 0, std::max(0, shot.width() - tip.width())));
    if (pos.y() + tip.height() > shot.height()) pos.setY(std::max(0, pos.y() - 32 - tip.height()));
    QPainter painter(&shot);
    tip.render(&painter, pos);
    // The pointer: a small arrow at the hovered point.
    const QPoint p0 = tl->mapTo(target, at);
    const QPolygon arrow({p0, p0 + QPoint(0, 15), p0 + QPoint(10, 11)});
    painter.setBrush(Qt::white);
    painter.setPen(Qt::black);
    painter.drawPolygon(arrow);
    painter.end();
    std::printf("spexlab: tooltip of %s at %.3f ms\n", r.name.c_str(), mid * 1e-6);
    if (!shot.save(opt.path)) {
      std::fprintf(stderr, "spexlab: could not write %s\n", qPrintable(opt.path));
      return 1;
    }
    std::printf("spexlab: wrote %s\n", qPrintable(opt.path));
    return 0;
  }
  // A dock by its object name: that dock alone.
  for (QDockWidget* d : w.findChildren<QDockWidget*>())
    if (d->objectName() == opt.view) {
      if (!d->grab().save(opt.path)) {
        std::fprintf(stderr, "spexlab: could not write %s\n", qPrintable(opt.path));
        return 1;
      }
      std::printf("spexlab: wrote %s\n", qPrintable(opt.path));
      return 0;
    }
  if (!w.exportView(opt.view, opt.path)) return 1;
  std::printf("spexlab: wrote %s\n", qPrintable(opt.path));
  return 0;
}

} // namespace spex
