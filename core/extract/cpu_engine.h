// CpuEngine: the reference implementation of Engine. Patches are solved in parallel
// by a pool of worker threads (one PatchSolver each) with single-threaded LAPACK.
#pragma once

#include "engine.h"
#include "patch_solver.h"
#include "plan_cache.h"

#include <memory>
#include <mutex>
#include <vector>

namespace spex {

struct CpuEngineOptions {
  NormalSolver solver = NormalSolver::Auto; // SPEXLAB_CPU_SOLVER=auto|dense|banded
  bool spotCache = true; // each spot of a request computed once (SPEXLAB_CPU_SPOT_CACHE=0: off)
  // The fiber blocks' eigenvectors (sym_eigen.h; SPEXLAB_CPU_EIGH=twisted|ql).
  EigenVectors eigenVectors = EigenVectors::Twisted;
};

// Warm between requests: a request that carries no plan gets one from the engine's
// PlanCache (rebuilt only when the PSF's traces, the grid, the fibers or the patch
// parameters change), and one solver with its scratch buffers per worker thread is
// kept, so a request for a few patches costs the patches.
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
  // Plans this engine has built for requests that carried none (tests, notes).
  int plansBuilt() const { return m_plans.builds(); }

private:
  struct Workspace;
  CpuEngineOptions m_options;
  PlanCache m_plans; // plans of plan-less requests (thread-safe itself)
  std::mutex m_mutex; // guards the members below (concurrent requests are allowed)
  std::vector<std::unique_ptr<Workspace>> m_pool;
  // The result the last completed extractInto filled and its plan: only that one is
  // reused in place (its patch list says what to clear).
  const ExtractionResult* m_filled = nullptr;
  std::shared_ptr<const PatchPlan> m_filledPlan;

  static void clearPatches(ExtractionResult& result, const PatchPlan& plan);
};

} // namespace spex
