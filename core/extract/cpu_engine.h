// CpuEngine: the reference implementation of Engine. Patches are solved in parallel
// by a pool of worker threads (one PatchSolver each) with single-threaded LAPACK.
#pragma once

#include "engine.h"

namespace spex {

class CpuEngine : public Engine {
public:
  std::string name() const override { return "cpu"; }
  ExtractionResult extract(const ExtractionRequest& request, ProgressSink& progress,
                           const CancelToken& cancel) override;
};

} // namespace spex
