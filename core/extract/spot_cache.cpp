#include "spot_cache.h"

#include <algorithm>
#include <climits>

namespace spex {

SpotCache::SpotCache(const GaussHermitePsf& psf, const PatchPlan& plan, const std::vector<int>& patches)
    : m_psf(psf), m_plan(plan), m_ns(psf.spotNx() * psf.spotNy()) {
  int f0 = INT_MAX, f1 = INT_MIN, b0 = INT_MAX, b1 = INT_MIN;
  for (int i : patches) {
    const Patch& p = plan.patches[i];
    f0 = std::min(f0, p.fiberPad0);
    f1 = std::max(f1, p.fiberPad0 + p.nfiberPad);
    b0 = std::min(b0, p.wavePad0);
    b1 = std::max(b1, p.wavePad0 + p.nwavePad);
  }
  if (f0 >= f1) return;
  m_fiber0 = f0;
  m_bin0 = b0;
  m_nbin = b1 - b0;
  m_fibers = std::vector<Fiber>(f1 - f0);
  for (int i : patches) {
    const Patch& p = plan.patches[i];
    for (int f = p.fiberPad0; f < p.fiberPad0 + p.nfiberPad; ++f) ++m_fibers[f - f0].pending;
  }
}

SpotCache::~SpotCache() = default;

SpotView SpotCache::get(int fiber, int bin, Spot& scratch) {
  const int fi = fiber - m_fiber0, bi = bin - m_bin0;
  auto compute = [&]() {
    m_psf.spotInto(fiber, m_plan.waveAt(bin), scratch);
    m_computed.fetch_add(1, std::memory_order_relaxed);
    return SpotView{scratch.xc, scratch.yc, scratch.v.data()};
  };
  if (fi < 0 || fi >= int(m_fibers.size()) || bi < 0 || bi >= m_nbin) return compute();
  Chunk* c;
  {
    Fiber& f = m_fibers[fi];
    std::lock_guard lock(f.mutex);
    if (f.chunks.empty()) f.chunks.resize((m_nbin + kChunk - 1) / kChunk);
    std::unique_ptr<Chunk>& slot = f.chunks[bi / kChunk];
    if (!slot) {
      slot = std::make_unique<Chunk>();
      slot->v.reset(new double[std::size_t(kChunk) * m_ns]); // no clearing pass
    }
    c = slot.get();
  }
  const int k = bi % kChunk;
  double* v = c->v.get() + std::size_t(k) * m_ns;
  uint8_t s = c->state[k].load(std::memory_order_acquire);
  if (s == 2) {
    m_reused.fetch_add(1, std::memory_order_relaxed);
    return SpotView{c->xc[k], c->yc[k], v};
  }
  if (s == 0 && c->state[k].compare_exchange_strong(s, 1, std::memory_order_acq_rel)) {
    // Straight into the slot (no scratch and copy): the same values as spotInto.
    int xc, yc;
    m_psf.spotValues(fiber, m_plan.waveAt(bin), xc, yc, v);
    m_computed.fetch_add(1, std::memory_order_relaxed);
    c->xc[k] = xc;
    c->yc[k] = yc;
    c->state[k].store(2, std::memory_order_release);
    return SpotView{xc, yc, v};
  }
  return compute(); // another worker is filling this slot right now
}

void SpotCache::release(const Patch& p) {
  for (int f = p.fiberPad0; f < p.fiberPad0 + p.nfiberPad; ++f) {
    const int fi = f - m_fiber0;
    if (fi < 0 || fi >= int(m_fibers.size())) continue;
    Fiber& fb = m_fibers[fi];
    std::vector<std::unique_ptr<Chunk>> freed;
    {
      std::lock_guard lock(fb.mutex);
      if (--fb.pending <= 0) freed.swap(fb.chunks);
    }
  }
}

int SpotCache::liveFibers() {
  int live = 0;
  for (Fiber& f : m_fibers) {
    std::lock_guard lock(f.mutex);
    live += !f.chunks.empty();
  }
  return live;
}

} // namespace spex
