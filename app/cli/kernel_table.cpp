#include "kernel_table.h"

#include <cstdio>
#include <sstream>

namespace spex::cli {

std::string kernelTable(const Profile& p, int maxPerPhase) {
  std::ostringstream os;
  char line[512];
  const auto stats = p.kernelStats();
  std::snprintf(line, sizeof line, "%-66s %7s %11s %10s %7s\n", "phase / kernel", "count", "total ms",
                "mean us", "share");
  os << line;
  std::size_t i = 0;
  while (i < stats.size()) {
    const std::string& phase = stats[i].phase;
    std::size_t end = i;
    double kernelSum = 0;
    while (end < stats.size() && stats[end].phase == phase) kernelSum += stats[end++].totalS;
    const double ptot = stats[i].phaseTotalS;
    std::snprintf(line, sizeof line, "%-66s %7s %11.3f %10s %6.1f%%\n",
                  phase.empty() ? "(outside every phase)" : phase.c_str(), "", 1e3 * (ptot > 0 ? ptot : kernelSum),
                  "", ptot > 0 ? 100 * kernelSum / ptot : 0.0);
    os << line;
    int shown = 0, otherCount = 0;
    double otherTotal = 0;
    for (std::size_t k = i; k < end; ++k) {
      const KernelStats& s = stats[k];
      if (shown < maxPerPhase) {
        std::string name = s.name.size() > 64 ? s.name.substr(0, 61) + "..." : s.name;
        std::snprintf(line, sizeof line, "  %-64s %7d %11.3f %10.1f %6.1f%%\n", name.c_str(), s.count,
                      1e3 * s.totalS, 1e6 * s.meanS, 100 * s.share);
        os << line;
        ++shown;
      } else {
        otherCount += s.count;
        otherTotal += s.totalS;
      }
    }
    if (otherCount) {
      std::snprintf(line, sizeof line, "  %-64s %7d %11.3f %10.1f %6.1f%%\n", "(other kernels)", otherCount,
                    1e3 * otherTotal, 1e6 * otherTotal / otherCount, ptot > 0 ? 100 * otherTotal / ptot : 0.0);
      os << line;
    }
    i = end;
  }
  const KernelTraceInfo& t = p.kernelTrace;
  std::snprintf(line, sizeof line,
                "%zu device activities; phase share = activities' time over the phase's device time; "
                "clock shift %.1f us, largest trim %.1f us, %d outside every phase, %llu dropped\n",
                p.kernels.size(), t.clockShiftNs * 1e-3, t.maxClampNs * 1e-3, t.unattributed,
                (unsigned long long)t.dropped);
  os << line;
  os << occupancyLines(p);
  return os.str();
}

std::string occupancyLines(const Profile& p) {
  std::ostringstream os;
  char line[512];
  for (const DeviceOccupancy& o : p.deviceOccupancy()) {
    const double ms = 1e3, idle = o.leadS + o.gapS + o.tailS;
    std::snprintf(line, sizeof line,
                  "device %d over the %.1f ms run: busy %.1f ms (%.0f %%): kernels %.1f (two or more at once "
                  "%.1f), copies alone %.1f; idle %.1f ms: %.1f before the first activity, %.1f after the "
                  "last, %.1f in %d gap%s (largest %.2f, at %.1f)\n",
                  o.device, ms * o.windowS, ms * o.busyS, o.windowS > 0 ? 100 * o.busyS / o.windowS : 0.0,
                  ms * o.kernelS, ms * o.concurrentS, ms * o.copyOnlyS, ms * idle, ms * o.leadS, ms * o.tailS,
                  ms * o.gapS, o.gaps, o.gaps == 1 ? "" : "s", ms * o.largestGapS,
                  ms * o.largestGapAtS);
    os << line;
  }
  return os.str();
}

} // namespace spex::cli
