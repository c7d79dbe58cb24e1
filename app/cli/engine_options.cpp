#include "engine_options.h"

#include "cli_common.h"

namespace spex::cli {

EngineOptions engineOptionsFrom(const std::string& gpus, const std::string& gpuMemory,
                                const std::string& engineKind, const MpiJob& mpi) {
  EngineOptions e;
  if (!gpus.empty()) {
    e.gpus = parseGpus(gpus);
  } else if (mpi.active() && engineKind != "cpu") {
    if (const int n = visibleGpuCount(); n > 0) e.gpus = {mpi.localRank() % n};
  }
  if (!gpuMemory.empty()) e.gpuMemoryBytes = gpuMemoryBudget(gpuMemory, e.gpus);
  return e;
}

} // namespace spex::cli
