#include "device_timeline.h"

namespace spex::gpu {

EventPool::~EventPool() {
  for (cudaEvent_t e : m_free) cudaEventDestroy(e);
}

cudaEvent_t EventPool::acquire() {
  if (!m_free.empty()) {
    const cudaEvent_t e = m_free.back();
    m_free.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  SPEX_CUDA(cudaEventCreate(&e));
  ++m_created;
  return e;
}

void DeviceTimeline::flushFirst(std::size_t n, ProfileRecorder& rec, cudaEvent_t t0, int64_t hostT0) {
  std::vector<PhaseWindow> windows;
  for (std::size_t i = 0; i < n; ++i) {
    const Pending& p = m_pending[i];
    float ta = 0, tb = 0;
    SPEX_CUDA(cudaEventElapsedTime(&ta, t0, p.a));
    SPEX_CUDA(cudaEventElapsedTime(&tb, t0, p.b));
    ProfileRange r;
    r.name = p.name;
    r.startNs = hostT0 + int64_t(double(ta) * 1e6);
    r.endNs = hostT0 + int64_t(double(tb) * 1e6);
    r.lane = p.lane;
    r.depth = p.depth;
    r.patch = p.id;
    if (p.depth == 0) {
      float ms = 0;
      SPEX_CUDA(cudaEventElapsedTime(&ms, p.a, p.b));
      m_doneSeconds.push_back(DoneSeconds{p.lane, p.id, ms * 1e-3});
    }
    if (m_tracer) {
      PhaseWindow w;
      w.id = p.traceId;
      w.name = p.name;
      w.root = p.root;
      w.lane = p.lane;
      w.depth = p.depth;
      w.patch = p.id;
      w.startNs = r.startNs;
      w.endNs = r.endNs;
      windows.push_back(std::move(w));
    }
    rec.add(std::move(r));
  }
  if (m_tracer && !windows.empty()) m_tracer->addPhases(std::move(windows));
  for (std::size_t i = 0; i < n; ++i) {
    m_pool.release(m_pending[i].a);
    m_pool.release(m_pending[i].b);
  }
  m_pending.erase(m_pending.begin(), m_pending.begin() + std::ptrdiff_t(n));
}

void DeviceTimeline::flush(ProfileRecorder& rec, cudaEvent_t t0, int64_t hostT0) {
  flushFirst(m_pending.size(), rec, t0, hostT0);
  m_doneSeconds.clear();
}

std::size_t DeviceTimeline::flushDone(ProfileRecorder& rec, cudaEvent_t t0, int64_t hostT0) {
  if (!m_open.empty()) return 0;
  std::size_t n = 0;
  while (n < m_pending.size()) {
    // A phase's end event completes after its start (both on its stream).
    const cudaError_t q = cudaEventQuery(m_pending[n].b);
    if (q == cudaErrorNotReady) {
      (void)cudaGetLastError(); // not an error: the phase still runs
      break;
    }
    SPEX_CUDA(q);
    ++n;
  }
  flushFirst(n, rec, t0, hostT0);
  return n;
}

double DeviceTimeline::seconds(int lane, int id) const {
  double s = 0;
  for (const DoneSeconds& d : m_doneSeconds)
    if (d.lane == lane && d.id == id) s += d.s;
  for (const Pending& p : m_pending)
    if (p.lane == lane && p.id == id && p.depth == 0) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, p.a, p.b) == cudaSuccess) s += ms * 1e-3;
    }
  return s;
}

void DeviceTimeline::drop() {
  for (const Pending& p : m_pending) {
    m_pool.release(p.a);
    m_pool.release(p.b);
  }
  m_pending.clear();
  m_doneSeconds.clear();
}

} // namespace spex::gpu
