// The CUDA engine's kernel profile (ExtractionRequest::profileKernels): every kernel,
// copy and set the engine's streams run is recorded through the CUPTI Activity API
// (device start/end, grid, block, registers, shared memory, bytes) and fitted under
// the engine phase it ran in (core/profile/kernel_trace.h). Each DeviceTimeline phase
// pushes a CUPTI external correlation id while its work is launched, so a kernel that
// cuBLAS or cuSOLVER launches inside "panel" is tagged with that phase.
//
// CUPTI is optional at build time (SPEXLAB_HAVE_CUPTI, gpu/CMakeLists.txt): without it
// the tracer's constructor throws GpuError saying so. CUPTI's activity state is global
// to the process, so one tracer runs at a time (a second waits for the first).
#pragma once

#include "core/profile/kernel_trace.h"
#include "core/profile/profile.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace spex::gpu {

class KernelTracer {
public:
  // Enables the activity kinds; throws GpuError naming why it cannot (no CUPTI in this
  // build, or a CUPTI error such as another profiler holding it).
  explicit KernelTracer(ProfileRecorder& rec);
  ~KernelTracer(); // disables the activity kinds
  KernelTracer(const KernelTracer&) = delete;
  KernelTracer& operator=(const KernelTracer&) = delete;

  static bool compiledIn();

  uint64_t nextPhaseId() { return ++m_lastId; }
  // Tag the calling thread's launches with a phase id (nested pushes: the innermost).
  static void push(uint64_t id);
  static void pop();

  // The lane of a stream's activities that no phase claims.
  void addStream(int device, cudaStream_t s, int lane);
  void addPhases(std::vector<PhaseWindow> windows);

  // With every device idle: flushes CUPTI, fits the activities under the phases of p
  // (recorded by `rec`, the recorder given to the constructor) and adds them to p.
  void finish(Profile& p);

private:
  int64_t clockOffset() const; // recorder ns - CUPTI ns, sampled back to back
  ProfileRecorder& m_rec;
  std::unique_lock<std::mutex> m_lock; // the process-wide tracer lock
  std::atomic<uint64_t> m_lastId{0};
  int64_t m_offsetStart = 0;
  std::mutex m_mutex;
  KernelTraceInput m_input;
  bool m_enabled = false;
};

} // namespace spex::gpu
