// The CUDA engine's per-patch diagnostics and coverage (engine_device.h).
#include "engine_device.h"

#include <algorithm>

namespace spex::gpu {

void collectDiagnostics(const PatchPlan& plan, const std::vector<int>& todo, int launched, const double* chi2,
                        const std::vector<char>& regularized, const std::vector<char>& failed,
                        const std::vector<int>& batchOf, const std::vector<int>& laneOf, int batches,
                        const DeviceTimeline& tl, ExtractionResult& result,
                        std::vector<PatchDiagnostics>& diags, bool markCovered) {
  const std::size_t first = diags.size();
  for (int i = 0; i < launched; ++i) {
    const Patch& p = plan.patches[todo[i]];
    PatchDiagnostics d;
    d.patch = p.index;
    d.chi2 = chi2[i];
    d.regularized = regularized[i];
    d.failed = failed[i];
    d.lane = laneOf[i];
    diags.push_back(d);
    if (!markCovered) continue;
    for (int s = 0; s < p.nfiber; ++s)
      for (int k = 0; k < p.nwave; ++k) result.covered(p.fiber0 + s - plan.fiberMin, p.wave0 + k) = 1;
  }
  // Per-patch time: its batch's device time shared equally.
  std::vector<double> batchSeconds(batches, 0.0);
  std::vector<int> batchCount(batches, 0);
  for (int i = 0; i < launched; ++i) ++batchCount[batchOf[i]];
  for (int i = 0; i < launched; ++i) {
    const int b = batchOf[i];
    if (batchSeconds[b] == 0.0) batchSeconds[b] = tl.seconds(laneOf[i], b);
    diags[first + i].seconds = batchSeconds[b] / std::max(1, batchCount[b]);
  }
}

} // namespace spex::gpu
