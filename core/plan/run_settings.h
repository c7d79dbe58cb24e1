// RunSettings: what the next extraction asks for, as the user set it (the workbench's
// Parameters, the Document that builds the plan from it): the wavelength grid, the
// fiber range, the patch parameters, the engine kind and the CPU threads. Qt-free, so
// the document (app/gui) and the Parameters view (widgets/) share it from below both.
#pragma once

#include "core/plan/patch_plan.h"

#include <string>

namespace spex {

struct RunSettings {
  double wmin = 5760, wmax = 7620, dw = 0.8;
  int fiberMin = 0;
  int nFiber = 25;
  PatchParams params;
  std::string engine = "cpu"; // "cpu", "cuda", "both", "auto" (app/engine_factory.h)
  int threads = 0;            // 0: all cores
  // CUDA engine: record every kernel and copy through CUPTI into the run's profile
  // (the timeline's stream lanes, the phase table's kernel rows); off by default.
  bool profileKernels = false;
};

} // namespace spex
