#include "kernel_tracer.h"

#include "core/errors.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <unordered_map>

#ifdef SPEXLAB_HAVE_CUPTI
#include <cupti.h>
#endif

namespace spex::gpu {

bool KernelTracer::compiledIn() {
#ifdef SPEXLAB_HAVE_CUPTI
  return true;
#else
  return false;
#endif
}

#ifdef SPEXLAB_HAVE_CUPTI

namespace {

std::mutex g_tracerLock; // one KernelTracer at a time (CUPTI's state is per process)

// What CUPTI's buffer callbacks collect, between a tracer's start and its finish().
struct Collected {
  std::mutex mutex;
  std::vector<DeviceActivity> activities;
  std::unordered_map<uint32_t, uint64_t> external;
  uint64_t dropped = 0;
} g_collected;

constexpr std::size_t kBufferBytes = std::size_t(8) << 20;
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    // External correlation records are emitted with API records: enable both API kinds
    // (their records are dropped below) so launches through the runtime (our kernels)
    // and through the driver (cuBLAS, cuSOLVER) are tagged.
    CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

std::string cuptiError(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : ("CUPTI error " + std::to_string(int(r)));
}

void check(CUptiResult r, const char* what) {
  if (r != CUPTI_SUCCESS) throw GpuError(std::string("kernel profile: ") + what + ": " + cuptiError(r));
}

const char* copyKindName(uint8_t k) {
  switch (k) {
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
  case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
  case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
  default: return "other";
  }
}

// What every activity record kind has (CUpti_ActivityKernel10, Memcpy6, Memset4 name
// these fields alike): its device times, device, stream and launching call.
template <class Record>
DeviceActivity timed(DeviceActivity::Kind kind, const Record& r) {
  DeviceActivity a;
  a.kind = kind;
  a.startNs = r.start;
  a.endNs = r.end;
  a.device = int(r.deviceId);
  a.stream = r.streamId;
  a.correlation = r.correlationId;
  return a;
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *maxNumRecords = 0; // as many as fit
}

void CUPTIAPI bufferCompleted(CUcontext ctx, uint32_t streamId, uint8_t* buffer, size_t /*size*/,
                              size_t validSize) {
  std::vector<DeviceActivity> acts;
  std::vector<std::pair<uint32_t, uint64_t>> ext;
  CUpti_Activity* rec = nullptr;
  while (validSize && cuptiActivityGetNextRecord(buffer, validSize, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      DeviceActivity a = timed(DeviceActivity::Kind::Kernel, *k);
      a.name = k->name ? k->name : "?";
      KernelLaunch& l = a.launch;
      l.grid[0] = k->gridX, l.grid[1] = k->gridY, l.grid[2] = k->gridZ;
      l.block[0] = k->blockX, l.block[1] = k->blockY, l.block[2] = k->blockZ;
      l.registers = k->registersPerThread;
      l.staticShared = k->staticSharedMemory;
      l.dynamicShared = k->dynamicSharedMemory;
      acts.push_back(std::move(a));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      DeviceActivity a = timed(DeviceActivity::Kind::Memcpy, *m);
      a.bytes = m->bytes;
      a.copyKind = copyKindName(m->copyKind);
      acts.push_back(std::move(a));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      DeviceActivity a = timed(DeviceActivity::Kind::Memset, *m);
      a.bytes = m->bytes;
      acts.push_back(std::move(a));
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
        ext.emplace_back(e->correlationId, e->externalId);
      break;
    }
    default: break; // API records: only there to carry the external correlations
    }
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(ctx, streamId, &dropped);
  {
    std::lock_guard lock(g_collected.mutex);
    for (DeviceActivity& a : acts) g_collected.activities.push_back(std::move(a));
    for (auto& [c, id] : ext) g_collected.external[c] = id;
    g_collected.dropped += dropped;
  }
  std::free(buffer);
}

} // namespace

KernelTracer::KernelTracer(ProfileRecorder& rec) : m_rec(rec), m_lock(g_tracerLock) {
  static std::once_flag registered;
  static CUptiResult registerResult = CUPTI_SUCCESS;
  std::call_once(registered, [] { registerResult = cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted); });
  check(registerResult, "cuptiActivityRegisterCallbacks");
  // Records of an earlier tracer that came in late, and other work's, are not ours.
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  {
    std::lock_guard lock(g_collected.mutex);
    g_collected.activities.clear();
    g_collected.external.clear();
    g_collected.dropped = 0;
  }
  for (CUpti_ActivityKind k : kKinds) {
    const CUptiResult r = cuptiActivityEnable(k);
    if (r != CUPTI_SUCCESS) {
      for (CUpti_ActivityKind d : kKinds) cuptiActivityDisable(d);
      check(r, "cuptiActivityEnable");
    }
  }
  m_enabled = true;
  m_offsetStart = clockOffset();
}

KernelTracer::~KernelTracer() {
  if (!m_enabled) return;
  for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard lock(g_collected.mutex);
  g_collected.activities.clear();
  g_collected.external.clear();
}

void KernelTracer::push(uint64_t id) {
  cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
}

void KernelTracer::pop() {
  uint64_t last = 0;
  cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

int64_t KernelTracer::clockOffset() const {
  // Both clocks read back to back; the closest of a few tries (a preempted read would
  // widen the bracket).
  int64_t best = INT64_MAX, offset = 0;
  for (int i = 0; i < 7; ++i) {
    uint64_t c = 0;
    const int64_t a = m_rec.nowNs();
    cuptiGetTimestamp(&c);
    const int64_t b = m_rec.nowNs();
    if (b - a < best) {
      best = b - a;
      offset = a + (b - a) / 2 - int64_t(c);
    }
  }
  return offset;
}

void KernelTracer::addStream(int device, cudaStream_t s, int lane) {
  uint32_t id = 0;
  check(cuptiGetStreamIdEx(nullptr, reinterpret_cast<CUstream>(s), 0, &id), "cuptiGetStreamIdEx");
  std::lock_guard lock(m_mutex);
  m_input.streamLanes[{device, id}] = lane;
}

void KernelTracer::addPhases(std::vector<PhaseWindow> windows) {
  std::lock_guard lock(m_mutex);
  for (PhaseWindow& w : windows) m_input.phases.push_back(std::move(w));
}

void KernelTracer::finish(Profile& p) {
  check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  std::lock_guard lock(m_mutex);
  {
    std::lock_guard c(g_collected.mutex);
    m_input.activities.swap(g_collected.activities);
    m_input.external.swap(g_collected.external);
    m_input.dropped = g_collected.dropped;
    g_collected.activities.clear();
    g_collected.external.clear();
  }
  // Both host clocks run at the same rate; the mean of the samples at start and end.
  m_input.clockOffsetNs = m_offsetStart + (clockOffset() - m_offsetStart) / 2;
  attachKernelTrace(p, m_input);
}

#else // no CUPTI in this build

KernelTracer::KernelTracer(ProfileRecorder& rec) : m_rec(rec) {
  throw GpuError("kernel profile (--profile-kernels): this build has no CUPTI (libcupti was not found "
                 "when it was configured; see docs/profiling.md)");
}
KernelTracer::~KernelTracer() = default;
void KernelTracer::push(uint64_t) {}
void KernelTracer::pop() {}
int64_t KernelTracer::clockOffset() const { return 0; }
void KernelTracer::addStream(int, cudaStream_t, int) {}
void KernelTracer::addPhases(std::vector<PhaseWindow>) {}
void KernelTracer::finish(Profile&) {}

#endif

} // namespace spex::gpu
