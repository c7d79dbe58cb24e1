// CpuEngine: the reference implementation of Engine. Patches are solved in parallel
// by a pool of worker threads (one PatchSolver each) with single-threaded LAPACK.
#pragma once

#include "engine.h"
#include "patch_solver.h"

namespace spex {

struct CpuEngineOptions {
  NormalSolver solver = NormalSolver::Auto; // SPEXLAB_CPU_SOLVER=auto|dense|banded
};

class CpuEngine : public Engine {
public:
  explicit CpuEngine(CpuEngineOptions options = {}) : m_options(options) {}
  std::string name() const override { return "cpu"; }
  ExtractionResult extract(const ExtractionRequest& request, ProgressSink& progress,
                           const CancelToken& cancel) override;

private:
  CpuEngineOptions m_options;
};

// Checks a request before any work: image and PSF present and of matching CCD size,
// patch indices valid. Throws InputError. Both engines call it.
void validateRequest(const ExtractionRequest& request, const PatchPlan& plan);

// Effective PSF error of a request (the PSF's PSFERR unless given).
double effectivePsfErr(const ExtractionRequest& request);

} // namespace spex
