// The CUDA engine's device timeline: each phase is bracketed by two CUDA events on its
// stream (and an NVTX range of the same name on the host), turned into Profile ranges
// on the stream's lane once the device is idle. Events come from a per-device pool and
// go back to it, so a warm extraction creates none.
#pragma once

#include "core/profile/profile.h"
#include "kernel_tracer.h"
#include "kernels.h"

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdint>
#include <vector>

namespace spex::gpu {

// Timing events of one device, reused across extractions. Not thread-safe: one
// device's work runs on one host thread at a time.
class EventPool {
public:
  EventPool() = default;
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool(); // call with the pool's device current
  cudaEvent_t acquire();
  void release(cudaEvent_t e) { m_free.push_back(e); }
  std::size_t created() const { return m_created; }

private:
  std::vector<cudaEvent_t> m_free;
  std::size_t m_created = 0;
};

class DeviceTimeline {
public:
  explicit DeviceTimeline(EventPool& pool) : m_pool(pool) {}
  ~DeviceTimeline() { drop(); }
  DeviceTimeline(const DeviceTimeline&) = delete;
  DeviceTimeline& operator=(const DeviceTimeline&) = delete;

  // With a tracer (the kernel profile), each phase tags its launches with an
  // external correlation id, and flush() hands the tracer the phases' windows.
  void setTracer(KernelTracer* t) { m_tracer = t; }

  // Runs launch() between two events on stream s. depth 1: a step inside a phase
  // (e.g. "cholesky" inside "solve"), 2: a step of a step. id: batch (-1: none).
  template <class F>
  void phase(const char* name, int lane, int id, cudaStream_t s, F&& launch, int depth = 0) {
    const cudaEvent_t a = m_pool.acquire(), b = m_pool.acquire();
    const uint64_t traceId = m_tracer ? m_tracer->nextPhaseId() : 0;
    const char* root = m_open.empty() ? name : m_pending[m_open.front()].name;
    m_pending.push_back(Pending{name, lane, id, a, b, depth, traceId, root}); // nested phases append after it
    m_open.push_back(m_pending.size() - 1);
    SPEX_CUDA(cudaEventRecord(a, s));
    nvtxRangePushA(name);
    if (m_tracer) KernelTracer::push(traceId);
    auto close = [&] {
      if (m_tracer) KernelTracer::pop();
      nvtxRangePop();
      m_open.pop_back();
    };
    try {
      launch();
    } catch (...) {
      close();
      throw;
    }
    close();
    SPEX_CUDA(cudaEventRecord(b, s));
  }

  // Call after the device is idle: t0 was recorded (and waited for) at hostT0 (ns on
  // the recorder's clock). The events go back to the pool.
  void flush(ProfileRecorder& rec, cudaEvent_t t0, int64_t hostT0);
  // The same for the phases already done (in the order they were launched, up to the
  // first one whose end event has not completed), while later ones still run: a frame's
  // batches are turned into ranges as they finish, not all after the last (docs/
  // design.md "Pipeline ends"). Call between phases (none open). Returns how many.
  std::size_t flushDone(ProfileRecorder& rec, cudaEvent_t t0, int64_t hostT0);
  // Device time (s) of all top-level phases with this id on this lane (flushed or not).
  double seconds(int lane, int id) const;
  void drop();

private:
  struct Pending {
    const char* name;
    int lane;
    int id;
    cudaEvent_t a, b;
    int depth;
    uint64_t traceId; // external correlation id (0: not traced)
    const char* root; // the outermost open phase when it began
  };
  // Ranges of m_pending[0, n) into rec (and their windows to the tracer); their events
  // back to the pool, their top-level device times into m_doneSeconds.
  void flushFirst(std::size_t n, ProfileRecorder& rec, cudaEvent_t t0, int64_t hostT0);
  struct DoneSeconds {
    int lane, id;
    double s;
  };
  EventPool& m_pool;
  std::vector<Pending> m_pending;
  std::vector<DoneSeconds> m_doneSeconds; // top-level phases flushDone took
  std::vector<std::size_t> m_open; // indices of the phases being launched, outermost first
  KernelTracer* m_tracer = nullptr;
};

} // namespace spex::gpu
