// Profile: timed, nested phase ranges of one run, drawn by the timeline view and
// written as Chrome trace JSON. ScopedRange is the one instrumentation type: it
// opens an NVTX range of the same name (so nsys lines up with the app) and records
// the phase into a ProfileRecorder. Cheap enough to leave on.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace spex {

struct ProfileRange {
  std::string name;
  int64_t startNs = 0; // since the profile's origin
  int64_t endNs = 0;
  int lane = 0;        // index into Profile::lanes
  int depth = 0;       // nesting depth within its lane, 0 = outermost
  int patch = -1;      // patch or batch id, -1 if none
  // Index into Profile::kernels when this range is a device activity (a kernel, copy
  // or set recorded by the CUDA engine's kernel profile), -1 for a phase. Such a range
  // sits on its stream's lane one level below the phase it ran in.
  int kernel = -1;
  int64_t durationNs() const { return endNs - startNs; }
};

// How a kernel was launched (CUPTI's kernel record): grid and block size, registers per
// thread, static and dynamic shared memory per block (bytes).
struct KernelLaunch {
  int grid[3] = {0, 0, 0};
  int block[3] = {0, 0, 0};
  int registers = 0;
  int staticShared = 0;
  int dynamicShared = 0;
  bool operator==(const KernelLaunch&) const = default;
};

// What CUPTI recorded about one device activity (docs/profiling.md, "Kernel profile").
// Its time, lane and depth are those of the ProfileRange pointing at it.
struct KernelRecord {
  std::string kind;       // "kernel", "memcpy" or "memset"
  std::string phase;      // innermost engine phase it ran in ("" none found)
  std::string rootPhase;  // outermost phase of that nesting ("" none)
  int device = 0;         // CUDA device ordinal
  int stream = 0;         // CUPTI stream id
  unsigned correlation = 0; // CUPTI correlation id of the launching API call
  KernelLaunch launch;      // kernels
  uint64_t bytes = 0;       // copies and sets: bytes moved
  std::string copyKind;     // copies: "HtoD", "DtoH", "DtoD", ...
  std::string symbol;       // kernels: the mangled name (the range's name is shortened)
};

// How the device activities were fitted to the engine's phases (kernel_trace.h).
struct KernelTraceInfo {
  bool on = false;           // the run recorded a kernel profile
  int64_t clockShiftNs = 0;  // shift applied to CUPTI times to meet the phases' event times
  int64_t maxClampNs = 0;    // most any activity was trimmed to stay inside its phase
  int unattributed = 0;      // activities of the engine's streams outside every phase
  uint64_t dropped = 0;      // records CUPTI dropped (buffers full)
};

// One kernel (or copy) name inside one phase: the phase table's per-kernel breakdown.
struct KernelStats {
  std::string phase;  // innermost phase ("" for activities outside every phase)
  std::string name;
  std::string kind;   // "kernel", "memcpy", "memset"
  int count = 0;
  double totalS = 0, meanS = 0, minS = 0, maxS = 0;
  double phaseTotalS = 0; // total device time of the phase's ranges (same window)
  double share = 0;       // totalS / phaseTotalS (0 when the phase is unknown)
  // Kernels: the launch configuration of the first launch; sameLaunch says whether
  // every launch had it, sameBlock whether every launch had its block, registers and
  // shared memory (the grid of a batched kernel follows the batch's size).
  KernelLaunch launch;
  bool sameLaunch = true;
  bool sameBlock = true;
  // Copies and sets: bytes moved by the launches counted, and their rate over the
  // launches' whole durations (bytes / s; 0 when unknown). copyKind is the direction
  // ("HtoD", ...), "mixed" when the launches differ.
  uint64_t bytes = 0;
  double bytesPerS = 0;
  std::string copyKind;
};

// How busy one device was over a window (the kernel profile's device lanes): the union
// of its activities' intervals, so overlapping kernels on two streams count once. What
// is not busy is idle: before the first activity (host work ahead of the device), after
// the last, and in the gaps between. A developer reads from it whether a run is bound by
// the device or waits on the host (docs/profiling.md, "Device occupancy").
struct DeviceOccupancy {
  int device = 0;
  double windowS = 0;      // the window's length
  double busyS = 0;        // some kernel, copy or set running
  double kernelS = 0;      // some kernel running
  double concurrentS = 0;  // two or more kernels running at once
  double copyOnlyS = 0;    // copies or sets running and no kernel
  double leadS = 0;        // from the window's start to the first activity
  double tailS = 0;        // from the last activity's end to the window's end
  double gapS = 0;         // idle between the first activity and the last
  double largestGapS = 0;  // the longest such idle stretch
  double largestGapAtS = 0; // where it starts, on the profile's clock (s from its origin)
  int gaps = 0;            // how many idle stretches lie between the first and the last
};

struct PhaseStats {
  std::string name;
  int count = 0;
  double totalS = 0, meanS = 0, minS = 0, maxS = 0;
  double share = 0; // totalS / wall
  // Self time: the zones' durations less the time of their direct children (zones of
  // depth + 1 inside them on the same lane), so self times add up to the busy time of
  // a lane instead of counting nested phases twice (totalS is the inclusive time).
  double selfS = 0;
};

struct Profile {
  std::vector<std::string> lanes;     // "main", "cpu thread 1", "cuda:0 stream 1"
  std::vector<ProfileRange> ranges;
  int64_t wallNs = 0;                 // wall time of the whole run
  std::vector<KernelRecord> kernels;  // device activities (ranges with kernel >= 0)
  KernelTraceInfo kernelTrace;

  int laneIndex(const std::string& name); // finds or adds
  // Per-phase statistics over ranges intersecting [t0, t1) (whole profile by default),
  // sorted by total time, descending; share is relative to the window (or wallNs).
  // Kernel ranges are not phases: they are left out here (see kernelStats).
  std::vector<PhaseStats> phaseStats(int64_t t0 = 0, int64_t t1 = -1) const;
  // Per (phase, kernel name) statistics of the kernel ranges intersecting [t0, t1)
  // (clipped to it, as phaseStats), with each one's share of its phase's device time;
  // ordered by phase total, then kernel total, both descending. Empty without kernels.
  std::vector<KernelStats> kernelStats(int64_t t0 = 0, int64_t t1 = -1) const;
  // Per device with activities in [t0, t1) (clipped to it; whole profile by default),
  // by device ordinal.
  std::vector<DeviceOccupancy> deviceOccupancy(int64_t t0 = 0, int64_t t1 = -1) const;

  std::string toChromeTrace() const;                   // {"traceEvents":[...]}
  static Profile fromChromeTrace(const std::string&);  // throws SpexError
  void append(const Profile& other, int64_t offsetNs = 0); // lanes merged by name
};

// One phase of two runs side by side (the run comparison's table): statistics of
// each run and the ratio of their totals.
struct PhaseComparison {
  std::string name;
  PhaseStats a, b;   // count 0 where the phase is absent from that run
  double ratio = 0;  // b.totalS / a.totalS; NaN when run a has none
  // b.meanS / a.meanS: per call, for runs with different numbers of calls; NaN when
  // either run has none.
  double ratioPerCall = 0;
};
// Phases of both runs, in order of the larger total, descending.
std::vector<PhaseComparison> comparePhases(const Profile& a, const Profile& b);
// The same from statistics already made (e.g. of a selected time window).
std::vector<PhaseComparison> comparePhases(const std::vector<PhaseStats>& a, const std::vector<PhaseStats>& b);

// Self time of every range (ns, in the order of p.ranges): its duration less the part
// of it its direct children cover (ranges of depth + 1 on the same lane inside it).
std::vector<int64_t> selfTimesNs(const Profile& p);

// One patch (or batch) of a run: its outermost zones (those whose parent zone does not
// belong to the same patch), the slowest-patches list of the timeline.
struct PatchTime {
  int patch = -1;
  int64_t totalNs = 0;  // sum of its outermost zones' durations
  int zones = 0;        // how many outermost zones (1 on the CPU engine: "patch")
  int longest = -1;     // index into Profile::ranges of its longest outermost zone
};
// Every patch of the profile, slowest first (ties: lower patch id first).
std::vector<PatchTime> patchTimes(const Profile& p);

// The first nesting problem of a profile, "" when there is none: on each lane a range
// of depth d > 0 lies inside a range of depth d - 1, and ranges of one depth do not
// overlap (ScopedRange's promise; a trace from elsewhere may break it).
std::string checkNesting(const Profile& p);

// Chrome trace files; errors name the file. The write goes to a temporary file that
// is renamed, so a failure never leaves half a trace.
Profile readChromeTraceFile(const std::string& path);
void writeChromeTraceFile(const Profile& p, const std::string& path);

// Thread-safe collector of ranges; one per run.
class ProfileRecorder {
public:
  ProfileRecorder();
  int64_t nowNs() const;
  int currentLane();                         // lane of the calling thread
  void setThreadLaneName(const std::string&); // names the calling thread's lane
  int lane(const std::string& name);
  void add(ProfileRange r);
  Profile finish();                          // sets wallNs, returns the profile

private:
  std::chrono::steady_clock::time_point m_origin;
  std::mutex m_mutex;
  Profile m_profile;
  std::map<std::size_t, int> m_threadLanes;  // hashed thread id -> lane
  int m_threadCount = 0;
};

// Opens an NVTX range named `name` and records [ctor, dtor) into the recorder
// (if any) on the calling thread's lane, nested by depth.
class ScopedRange {
public:
  ScopedRange(ProfileRecorder* rec, const char* name, int patch = -1);
  ~ScopedRange();
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;

private:
  ProfileRecorder* m_rec;
  const char* m_name;
  int m_patch;
  int64_t m_start;
};

// True when NVTX calls are compiled in.
bool nvtxCompiledIn();

} // namespace spex
