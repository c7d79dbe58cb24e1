#include "engine_options.h"

#include "core/errors.h"

#include <cmath>

namespace spex::cli {

EngineOptions engineOptionsFrom(const Options& o, const MpiJob& mpi) {
  EngineOptions e;
  if (o.has("--gpus")) {
    for (double v : numberList(o.str("--gpus"), "--gpus")) {
      if (v < 0 || v != std::floor(v)) throw InputError("--gpus expects device numbers like 0,1");
      e.gpus.push_back(int(v));
    }
  } else if (mpi.active() && o.str("--engine", "auto") != "cpu") {
    if (const int n = visibleGpuCount(); n > 0) e.gpus = {mpi.localRank() % n};
  }
  if (o.has("--gpu-memory")) e.gpuMemoryBytes = gpuMemoryBudget(o.str("--gpu-memory"), e.gpus);
  return e;
}

} // namespace spex::cli
