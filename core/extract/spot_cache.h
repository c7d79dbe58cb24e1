// SpotCache: the spots of one request, each (fiber, grid bin) computed once. Patches
// overlap (one padding fiber on each side, wavepad bins at each end), so without it
// every spot of a full frame is evaluated about twice (7/5 x 74/50 = 2.07 times for
// DESI's default patches). Spots are computed on first use by whichever worker asks,
// with the same function (GaussHermitePsf::spotValues at PatchPlan::waveAt, written
// straight into the cache's slot; spotInto without the cache), so the results are the
// same bit for bit. Storage is per fiber in chunks of bins and is released when the
// last pending patch that uses the fiber is done, so a full frame holds only the fibers
// of the sub-bundles in flight (a few tens of MB).
#pragma once

#include "../plan/patch_plan.h"
#include "../psf/gauss_hermite_psf.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace spex {

// A spot's stamp: corner (xc, yc) and psf.spotNy() x psf.spotNx() values, row-major.
struct SpotView {
  int xc = 0;
  int yc = 0;
  const double* v = nullptr;
};

class SpotCache {
public:
  // For the patches (indices into plan.patches) of one request; psf and plan must
  // outlive the cache.
  SpotCache(const GaussHermitePsf& psf, const PatchPlan& plan, const std::vector<int>& patches);
  ~SpotCache();
  SpotCache(const SpotCache&) = delete;
  SpotCache& operator=(const SpotCache&) = delete;

  // The spot of PSF fiber `fiber` at grid bin `bin` (PatchPlan::waveAt; may lie outside
  // the grid, as padding does). Thread-safe. When another thread is computing the same
  // spot at that moment it is computed again into `scratch` (identical values), and the
  // view points there; otherwise into the cache. Views stay valid until release() of
  // every patch using the fiber.
  SpotView get(int fiber, int bin, Spot& scratch);
  // Patch p is done: fibers that no pending patch uses any more are freed.
  void release(const Patch& p);

  // Spots evaluated, and spots served without evaluation (for the notes and tests).
  long long computed() const { return m_computed.load(); }
  long long reused() const { return m_reused.load(); }
  // Fibers whose spots are held now.
  int liveFibers();

private:
  static constexpr int kChunk = 32; // bins per chunk
  struct Chunk {
    std::unique_ptr<double[]> v;           // kChunk stamps, uninitialised: a stamp is
                                           // written before its state says ready
    int xc[kChunk] = {}, yc[kChunk] = {};
    std::atomic<uint8_t> state[kChunk];    // 0 empty, 1 being computed, 2 ready
  };
  struct Fiber {
    std::mutex mutex;
    std::vector<std::unique_ptr<Chunk>> chunks; // by (bin - bin0) / kChunk, made on demand
    int pending = 0;                            // patches still to release this fiber
  };
  const GaussHermitePsf& m_psf;
  const PatchPlan& m_plan;
  int m_fiber0 = 0, m_bin0 = 0, m_nbin = 0, m_ns = 0;
  std::vector<Fiber> m_fibers;
  std::atomic<long long> m_computed{0}, m_reused{0};
};

} // namespace spex
