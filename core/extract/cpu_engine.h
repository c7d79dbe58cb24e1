// CpuEngine: the reference implementation of Engine. Patches are solved in parallel
// by a pool of worker threads (one PatchSolver each) with single-threaded LAPACK.
#pragma once

#include "engine.h"
#include "patch_solver.h"

#include <memory>
#include <mutex>
#include <vector>

namespace spex {

struct CpuEngineOptions {
  NormalSolver solver = NormalSolver::Auto; // SPEXLAB_CPU_SOLVER=auto|dense|banded
};

// Warm between requests: the engine keeps the last plan (rebuilt only when the PSF's
// traces, the grid, the fibers or the patch parameters change) and one solver with its
// scratch buffers per worker thread, so a request for a few patches costs the patches.
class CpuEngine : public Engine {
public:
  explicit CpuEngine(CpuEngineOptions options = {});
  ~CpuEngine() override;
  std::string name() const override { return "cpu"; }
  ExtractionResult extract(const ExtractionRequest& request, ProgressSink& progress,
                           const CancelToken& cancel) override;
  // Extracts into a result the caller keeps between requests. When `into` already has
  // this request's shape (same plan geometry, ndiag and model size) nothing frame- or
  // CCD-sized is allocated: the bins and model boxes of the patches it held are cleared
  // and the requested patches filled. Otherwise it is allocated afresh, as extract does.
  void extractInto(const ExtractionRequest& request, ExtractionResult& into, ProgressSink& progress,
                   const CancelToken& cancel) override;

private:
  struct PlanKey;
  struct Workspace;
  CpuEngineOptions m_options;
  std::mutex m_mutex; // guards the members below (concurrent requests are allowed)
  std::shared_ptr<const PatchPlan> m_plan;
  std::unique_ptr<PlanKey> m_planKey;
  std::vector<std::unique_ptr<Workspace>> m_pool;
  // The result the last completed extractInto filled and its plan: only that one is
  // reused in place (its patch list says what to clear).
  const ExtractionResult* m_filled = nullptr;
  std::shared_ptr<const PatchPlan> m_filledPlan;

  std::shared_ptr<const PatchPlan> planFor(const ExtractionRequest& request);
  static void clearPatches(ExtractionResult& result, const PatchPlan& plan);
};

} // namespace spex
