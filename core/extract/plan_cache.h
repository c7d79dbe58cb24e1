// PlanCache: the patch plan of requests that carry none (the CLI's extract and bench,
// the Python binding, tests), kept while nothing it depends on changes. A request that
// carries a plan (engine.h, ExtractionRequest::plan) gets that plan, checked by
// requestPlan(), and leaves the cache alone. Thread-safe.
#pragma once

#include "engine.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace spex {

class PlanCache {
public:
  // Plans kept at once: the most recently used ones (a workbench comparing two
  // parameter sets, or two fiber ranges, alternates between two).
  explicit PlanCache(int capacity = 4);

  // The request's plan: the carried one (checked, InputError naming what differs), or a
  // kept plan made for the same PSF (its address and a hash of everything the plan
  // reads from it: traces with their domains, the GH-sigma domain, fiber count, CCD and
  // stamp size), wavelength grid, fibers and patch parameters, or a new one, then kept.
  std::shared_ptr<const PatchPlan> planFor(const ExtractionRequest& request);

  int builds() const;   // plans this cache has built (tests, notes)
  void clear();

private:
  struct Key {
    const GaussHermitePsf* psf = nullptr;
    uint64_t psfHash = 0;
    WaveGrid wave;
    int fiberMin = 0, nFiber = 0;
    PatchParams params;
    bool operator==(const Key& o) const;
  };
  struct Entry {
    Key key;
    std::shared_ptr<const PatchPlan> plan;
  };
  int m_capacity;
  mutable std::mutex m_mutex;
  std::vector<Entry> m_entries; // most recently used first
  int m_builds = 0;
};

// What a plan reads from a PSF, hashed (FNV-1a over the bits): trace coefficients and
// domains, the GH-sigma domain, fiber count, CCD size and stamp half-sizes.
uint64_t planPsfHash(const GaussHermitePsf& psf);

} // namespace spex
