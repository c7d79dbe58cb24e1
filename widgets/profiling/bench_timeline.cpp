// Repaint benchmark of TimelineView (issue 5: 100 000 ranges, repaint < 30 ms). Not a
// test: prints the paint time at several zoom levels for a synthetic run shaped like
// the CPU engine's (16 worker lanes of patch ranges, each with nested solver phases).
// Usage: QT_QPA_PLATFORM=offscreen spexlab-bench-timeline [ranges=100000] [repeats=20]
#include "timeline_view.h"

#include <QApplication>
#include <QImage>

#include <algorithm>
#include <cstdio>
#include <random>

using namespace spex;

static Profile syntheticRun(int nranges) {
  Profile p;
  p.laneIndex("main");
  const int lanes = 16;
  for (int l = 1; l <= lanes; ++l) p.laneIndex("cpu thread " + std::to_string(l));
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int> dur(20000, 200000);
  const char* phases[] = {"spots", "projection", "normal equations", "solve", "decorrelate"};
  // Each patch: 1 range at depth 0 and 5 at depth 1.
  const int patches = std::max(1, nranges / 6);
  std::vector<int64_t> t(lanes + 1, 1000);
  for (int i = 0; i < patches; ++i) {
    const int lane = 1 + i % lanes;
    int64_t s = t[lane];
    const int64_t start = s;
    for (int k = 0; k < 5; ++k) {
      const int64_t d = dur(rng);
      p.ranges.push_back({phases[k], s, s + d, lane, 1, i});
      s += d;
    }
    p.ranges.push_back({"patch", start, s + 1000, lane, 0, i});
    t[lane] = s + 2000;
  }
  p.wallNs = *std::max_element(t.begin(), t.end()) + 1000;
  p.ranges.push_back({"extract", 0, p.wallNs, 0, 0, -1});
  return p;
}

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  const int n = argc > 1 ? std::atoi(argv[1]) : 100000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 20;
  auto prof = std::make_shared<Profile>(syntheticRun(n));
  TimelineView view;
  view.resize(1600, 420);
  view.setProfile(prof, QStringLiteral("synthetic"));
  view.show();
  QImage canvas(view.size(), QImage::Format_ARGB32_Premultiplied);
  std::printf("timeline repaint, %zu ranges on %zu lanes, widget %dx%d (median / max of %d paints)\n",
              prof->ranges.size(), prof->lanes.size(), view.width(), view.height(), repeats);
  std::printf("%-22s %10s %10s %10s %10s\n", "view", "median ms", "max ms", "boxes", "merged");
  struct Case {
    const char* name;
    double zoom;
  };
  for (Case c : {Case{"whole run", 1}, Case{"zoom 10x", 10}, Case{"zoom 100x", 100}, Case{"zoom 1000x", 1000}}) {
    view.resetView();
    view.zoomAt(view.gutterWidth() + (view.width() - view.gutterWidth()) * 0.5, c.zoom);
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) {
      // A pan step per paint, as while dragging.
      const int64_t step = (view.viewEnd() - view.viewStart()) / 200;
      view.setViewRange(view.viewStart() + (r % 2 ? step : -step), view.viewEnd() + (r % 2 ? step : -step));
      // render() runs paintEvent into an image, as a repaint does on screen.
      view.render(&canvas);
      ms.push_back(view.lastPaintMs());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%-22s %10.2f %10.2f %10d %10d\n", c.name, ms[ms.size() / 2], ms.back(),
                view.lastDrawnRanges(), view.lastMergedBlocks());
  }
  return 0;
}
