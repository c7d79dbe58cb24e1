// Kernel profile: fitting device activities (kernels, copies, sets recorded by CUPTI in
// gpu/kernel_tracer.cpp) into a Profile under the engine phases they ran in. This half
// needs no CUDA: it works on plain records, so the CPU-only build compiles it and
// tests/core/profile checks it with synthetic activities.
//
// Clock domains (docs/profiling.md, "Kernel profile"): CUPTI stamps activities in its
// own nanosecond clock (cuptiGetTimestamp); the Profile counts nanoseconds since the
// ProfileRecorder's origin (steady_clock), and the engine places its device phases
// there through CUDA events anchored at a host-synchronised event. The tracer samples
// both host clocks back to back (KernelTraceInput::clockOffsetNs), then
// attachKernelTrace() removes what the event anchor adds on top of that: the host
// learns of the anchor event a little after the device passed it, so the phases sit
// late by that lag. Since no activity can start before the event that opens its phase
// (both on one stream), the largest such "early start" over a device is that lag; the
// activities of the device are shifted by it (never backwards), and what remains (the
// clock rates differ by parts per million) is trimmed so each activity lies inside its
// phase; the largest trim is reported.
#pragma once

#include "profile.h"

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spex {

// One device phase of the engine's timeline, on the recorder's clock.
struct PhaseWindow {
  uint64_t id = 0;       // the external correlation id pushed while it was launched
  std::string name;
  std::string root;      // its outermost enclosing phase (itself at depth 0)
  int lane = 0;
  int depth = 0;
  int patch = -1;        // batch id (-1: none)
  int device = 0;
  int64_t startNs = 0, endNs = 0;
};

// One CUPTI activity record, copied out of CUPTI's buffer.
struct DeviceActivity {
  enum class Kind { Kernel, Memcpy, Memset };
  Kind kind = Kind::Kernel;
  std::string name;       // kernel: mangled symbol; copies: unused
  uint64_t startNs = 0, endNs = 0; // CUPTI clock
  int device = 0;
  uint32_t stream = 0;     // CUPTI stream id
  uint32_t correlation = 0;
  KernelLaunch launch;    // kernels
  uint64_t bytes = 0;
  std::string copyKind;   // "HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "other"
};

struct KernelTraceInput {
  std::vector<PhaseWindow> phases;
  std::vector<DeviceActivity> activities;
  // CUPTI correlation id of an API call -> the phase id pushed around it.
  std::unordered_map<uint32_t, uint64_t> external;
  // (device, CUPTI stream id) -> lane, for activities outside every phase.
  std::map<std::pair<int, uint32_t>, int> streamLanes;
  int64_t clockOffsetNs = 0; // recorder ns = CUPTI ns + clockOffsetNs
  uint64_t dropped = 0;
};

// Adds one range per activity of the engine (those with a known phase or stream; the
// rest belong to other work in the process and are left out) and its KernelRecord,
// one depth below its phase on the phase's lane (depth 0 on its stream's lane when no
// phase holds it), sets p.kernelTrace and sorts p.ranges by start. An activity without
// an external correlation is given the innermost phase of its stream's lane that holds
// its midpoint.
void attachKernelTrace(Profile& p, const KernelTraceInput& in);

// "normalEquationsKernel<7>" from "_ZN4spex3gpu...": demangled, without the return type,
// "(anonymous namespace)::" and the parameter list; names longer than 120 characters
// are cut (the full symbol stays in KernelRecord::symbol). Unmangled names pass through.
std::string shortKernelName(const std::string& symbol);

} // namespace spex
