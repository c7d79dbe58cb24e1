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
  int64_t durationNs() const { return endNs - startNs; }
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

  int laneIndex(const std::string& name); // finds or adds
  // Per-phase statistics over ranges intersecting [t0, t1) (whole profile by default),
  // sorted by total time, descending; share is relative to the window (or wallNs).
  std::vector<PhaseStats> phaseStats(int64_t t0 = 0, int64_t t1 = -1) const;

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
