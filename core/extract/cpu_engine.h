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

// Checks a request before any work: image and PSF present and of matching CCD size,
// patch indices valid. Throws InputError. Both engines call it.
void validateRequest(const ExtractionRequest& request, const PatchPlan& plan);

// Effective PSF error of a request (the PSF's PSFERR unless given).
double effectivePsfErr(const ExtractionRequest& request);

} // namespace spex
