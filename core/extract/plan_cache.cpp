#include "plan_cache.h"

#include "../errors.h"
#include "../psf/gauss_hermite_psf.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace spex {

namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(uint64_t u) { h = (h ^ u) * 1099511628211ull; }
  void add(double d) {
    uint64_t u;
    std::memcpy(&u, &d, sizeof u);
    add(u);
  }
  void add(const LegendreSet& s) {
    add(s.wavemin);
    add(s.wavemax);
    add(uint64_t(s.coeff.rows) << 32 ^ uint64_t(s.coeff.cols));
    for (double d : s.coeff.data) add(d);
  }
};

bool sameParams(const PatchParams& a, const PatchParams& b) {
  auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  return a.bundlesize == b.bundlesize && a.nsubbundles == b.nsubbundles && a.nwavestep == b.nwavestep &&
         a.wavepadFrac == b.wavepadFrac && a.pixpadFrac == b.pixpadFrac &&
         same(a.regularize, b.regularize) && same(a.psferr, b.psferr) && a.mode == b.mode;
}

} // namespace

uint64_t planPsfHash(const GaussHermitePsf& psf) {
  Fnv f;
  f.add(psf.xTrace);
  f.add(psf.yTrace);
  f.add(psf.ghSigX.wavemin);
  f.add(psf.ghSigX.wavemax);
  f.add(uint64_t(psf.nfiber));
  f.add(uint64_t(psf.npixX) << 32 ^ uint64_t(psf.npixY));
  f.add(uint64_t(psf.hsizeX) << 32 ^ uint64_t(psf.hsizeY));
  return f.h;
}

bool PlanCache::Key::operator==(const Key& o) const {
  return psf == o.psf && psfHash == o.psfHash && wave.wmin == o.wave.wmin && wave.wmax == o.wave.wmax &&
         wave.dw == o.wave.dw && wave.n == o.wave.n && fiberMin == o.fiberMin && nFiber == o.nFiber &&
         sameParams(params, o.params);
}

PlanCache::PlanCache(int capacity) : m_capacity(std::max(1, capacity)) {}

std::shared_ptr<const PatchPlan> PlanCache::planFor(const ExtractionRequest& req) {
  if (!req.psf) throw InputError("extraction request has no PSF");
  if (req.plan) return requestPlan(req); // carried by the request: checked, not rebuilt
  const Key key{req.psf, planPsfHash(*req.psf), req.wave, req.fiberMin, req.nFiber, req.params};
  {
    std::lock_guard lock(m_mutex);
    for (std::size_t i = 0; i < m_entries.size(); ++i)
      if (m_entries[i].key == key) {
        std::rotate(m_entries.begin(), m_entries.begin() + std::ptrdiff_t(i),
                    m_entries.begin() + std::ptrdiff_t(i) + 1);
        return m_entries.front().plan;
      }
  }
  // Built outside the lock (a full frame's plan takes ~0.1 s); two threads missing at
  // once both build, and the second keeps the first's entry.
  auto plan = requestPlan(req);
  std::lock_guard lock(m_mutex);
  ++m_builds;
  for (const Entry& e : m_entries)
    if (e.key == key) return e.plan;
  m_entries.insert(m_entries.begin(), Entry{key, plan});
  if (int(m_entries.size()) > m_capacity) m_entries.pop_back();
  return plan;
}

int PlanCache::builds() const {
  std::lock_guard lock(m_mutex);
  return m_builds;
}

void PlanCache::clear() {
  std::lock_guard lock(m_mutex);
  m_entries.clear();
}

} // namespace spex
