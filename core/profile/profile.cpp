#include "profile.h"

#include "../errors.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#ifdef SPEXLAB_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace spex {

namespace {
thread_local int t_depth = 0;
}

bool nvtxCompiledIn() {
#ifdef SPEXLAB_HAVE_NVTX
  return true;
#else
  return false;
#endif
}

int Profile::laneIndex(const std::string& name) {
  for (std::size_t i = 0; i < lanes.size(); ++i)
    if (lanes[i] == name) return int(i);
  lanes.push_back(name);
  return int(lanes.size()) - 1;
}

namespace {

// Ranges of one lane sorted by start, outer first on ties, and the parent of each
// (index into p.ranges, -1 at the top): the zone of depth - 1 that contains it.
std::vector<int> parentsOf(const Profile& p) {
  std::vector<int> parent(p.ranges.size(), -1);
  std::vector<std::vector<int>> byLane(p.lanes.size());
  for (int i = 0; i < int(p.ranges.size()); ++i) {
    const ProfileRange& r = p.ranges[i];
    if (r.lane >= 0 && std::size_t(r.lane) < p.lanes.size()) byLane[r.lane].push_back(i);
  }
  for (auto& v : byLane) {
    std::stable_sort(v.begin(), v.end(), [&](int x, int y) {
      const ProfileRange &a = p.ranges[x], &b = p.ranges[y];
      return a.startNs != b.startNs ? a.startNs < b.startNs : a.depth < b.depth;
    });
    std::vector<int> open; // stack of enclosing ranges
    for (int i : v) {
      const ProfileRange& r = p.ranges[i];
      while (!open.empty() && (p.ranges[open.back()].endNs <= r.startNs || p.ranges[open.back()].depth >= r.depth))
        open.pop_back();
      if (!open.empty() && p.ranges[open.back()].depth == r.depth - 1) parent[i] = open.back();
      open.push_back(i);
    }
  }
  return parent;
}

} // namespace

std::vector<int64_t> selfTimesNs(const Profile& p) {
  std::vector<int64_t> self(p.ranges.size());
  for (std::size_t i = 0; i < p.ranges.size(); ++i) self[i] = p.ranges[i].durationNs();
  const std::vector<int> parent = parentsOf(p);
  for (std::size_t i = 0; i < p.ranges.size(); ++i) {
    if (parent[i] < 0 || p.ranges[i].kernel >= 0) continue; // kernels are not phases
    const ProfileRange &c = p.ranges[i], &q = p.ranges[parent[i]];
    self[parent[i]] -= std::max<int64_t>(0, std::min(c.endNs, q.endNs) - std::max(c.startNs, q.startNs));
  }
  return self;
}

std::vector<PatchTime> patchTimes(const Profile& p) {
  const std::vector<int> parent = parentsOf(p);
  std::map<int, PatchTime> by;
  for (int i = 0; i < int(p.ranges.size()); ++i) {
    const ProfileRange& r = p.ranges[i];
    if (r.patch < 0 || r.kernel >= 0) continue;
    if (parent[i] >= 0 && p.ranges[parent[i]].patch == r.patch) continue; // inside its own patch zone
    PatchTime& t = by[r.patch];
    t.patch = r.patch;
    t.totalNs += r.durationNs();
    ++t.zones;
    if (t.longest < 0 || r.durationNs() > p.ranges[t.longest].durationNs()) t.longest = i;
  }
  std::vector<PatchTime> out;
  for (auto& [k, t] : by) out.push_back(t);
  std::stable_sort(out.begin(), out.end(), [](const PatchTime& a, const PatchTime& b) { return a.totalNs > b.totalNs; });
  return out;
}

std::vector<PhaseStats> Profile::phaseStats(int64_t t0, int64_t t1) const {
  if (t1 < 0) t1 = std::max<int64_t>(wallNs, 1);
  const std::vector<int64_t> self = selfTimesNs(*this);
  std::vector<PhaseStats> out;
  auto find = [&](const std::string& n) -> PhaseStats& {
    for (auto& s : out)
      if (s.name == n) return s;
    out.push_back({});
    out.back().name = n;
    return out.back();
  };
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const ProfileRange& r = ranges[i];
    if (r.kernel >= 0 || r.endNs <= t0 || r.startNs >= t1) continue;
    // Clip to the window so statistics of a selected time range add up.
    const double d = double(std::min(r.endNs, t1) - std::max(r.startNs, t0)) * 1e-9;
    PhaseStats& s = find(r.name);
    // Self time in the same proportion as the clipped duration.
    s.selfS += r.durationNs() > 0 ? double(self[i]) * 1e-9 * d / (double(r.durationNs()) * 1e-9) : 0;
    if (s.count == 0) {
      s.minS = d;
      s.maxS = d;
    }
    s.count++;
    s.totalS += d;
    s.minS = std::min(s.minS, d);
    s.maxS = std::max(s.maxS, d);
  }
  const double window = double(t1 - t0) * 1e-9;
  for (auto& s : out) {
    s.meanS = s.count ? s.totalS / s.count : 0;
    s.share = window > 0 ? s.totalS / window : 0;
  }
  std::sort(out.begin(), out.end(),
            [](const PhaseStats& a, const PhaseStats& b) { return a.totalS > b.totalS; });
  return out;
}

std::vector<KernelStats> Profile::kernelStats(int64_t t0, int64_t t1) const {
  std::vector<KernelStats> out;
  if (kernels.empty()) return out;
  if (t1 < 0) t1 = std::max<int64_t>(wallNs, 1);
  auto clipped = [&](const ProfileRange& r) {
    return double(std::min(r.endNs, t1) - std::max(r.startNs, t0)) * 1e-9;
  };
  std::map<std::pair<std::string, std::string>, std::size_t> index; // (phase, name)
  std::vector<double> busy; // whole durations of the launches counted (for bytesPerS)
  for (const ProfileRange& r : ranges) {
    if (r.kernel < 0 || std::size_t(r.kernel) >= kernels.size()) continue;
    if (r.endNs <= t0 || r.startNs >= t1) continue;
    const KernelRecord& k = kernels[r.kernel];
    auto [it, added] = index.try_emplace({k.phase, r.name}, out.size());
    if (added) {
      busy.push_back(0);
      out.push_back({});
      out.back().phase = k.phase;
      out.back().name = r.name;
      out.back().kind = k.kind;
    }
    KernelStats& s = out[it->second];
    if (s.count == 0) {
      s.launch = k.launch;
      s.copyKind = k.copyKind;
    } else {
      s.sameLaunch = s.sameLaunch && k.launch == s.launch;
      KernelLaunch sameGrid = k.launch;
      std::copy(s.launch.grid, s.launch.grid + 3, sameGrid.grid);
      s.sameBlock = s.sameBlock && sameGrid == s.launch;
      if (k.copyKind != s.copyKind) s.copyKind = "mixed";
    }
    s.bytes += k.bytes;
    busy[it->second] += double(r.durationNs()) * 1e-9;
    const double d = clipped(r);
    s.minS = s.count ? std::min(s.minS, d) : d;
    s.maxS = s.count ? std::max(s.maxS, d) : d;
    s.count++;
    s.totalS += d;
  }
  // The phases' device time in the same window (phase ranges only).
  std::map<std::string, double> phaseTotal;
  for (const KernelStats& s : out) phaseTotal[s.phase] = 0;
  for (const ProfileRange& r : ranges) {
    if (r.kernel >= 0 || r.endNs <= t0 || r.startNs >= t1) continue;
    auto it = phaseTotal.find(r.name);
    if (it != phaseTotal.end()) it->second += clipped(r);
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    KernelStats& s = out[i];
    s.bytesPerS = s.bytes && busy[i] > 0 ? double(s.bytes) / busy[i] : 0;
    s.meanS = s.count ? s.totalS / s.count : 0;
    s.phaseTotalS = phaseTotal[s.phase];
    s.share = s.phaseTotalS > 0 ? s.totalS / s.phaseTotalS : 0;
  }
  std::sort(out.begin(), out.end(), [](const KernelStats& a, const KernelStats& b) {
    if (a.phase != b.phase)
      return a.phaseTotalS != b.phaseTotalS ? a.phaseTotalS > b.phaseTotalS : a.phase < b.phase;
    return a.totalS != b.totalS ? a.totalS > b.totalS : a.name < b.name;
  });
  return out;
}

std::vector<DeviceOccupancy> Profile::deviceOccupancy(int64_t t0, int64_t t1) const {
  if (t1 < 0) t1 = std::max<int64_t>(wallNs, 1);
  // A sweep over each device's activity edges: +1 at a start, -1 at an end, kernels and
  // copies counted apart. Between two edges the counts are constant.
  struct Edge {
    int64_t t;
    int kernels, copies;
  };
  std::map<int, std::vector<Edge>> edges;
  for (const ProfileRange& r : ranges) {
    if (r.kernel < 0 || std::size_t(r.kernel) >= kernels.size()) continue;
    const int64_t a = std::max(r.startNs, t0), b = std::min(r.endNs, t1);
    if (b <= a) continue;
    const KernelRecord& k = kernels[r.kernel];
    const bool isKernel = k.kind == "kernel";
    auto& e = edges[k.device];
    e.push_back({a, isKernel ? 1 : 0, isKernel ? 0 : 1});
    e.push_back({b, isKernel ? -1 : 0, isKernel ? 0 : -1});
  }
  std::vector<DeviceOccupancy> out;
  for (auto& [device, e] : edges) {
    std::sort(e.begin(), e.end(), [](const Edge& x, const Edge& y) { return x.t < y.t; });
    DeviceOccupancy o;
    o.device = device;
    o.windowS = double(t1 - t0) * 1e-9;
    o.leadS = double(e.front().t - t0) * 1e-9;
    o.tailS = double(t1 - e.back().t) * 1e-9;
    int nk = 0, nc = 0;
    for (std::size_t i = 0; i + 1 < e.size(); ++i) {
      nk += e[i].kernels;
      nc += e[i].copies;
      const double d = double(e[i + 1].t - e[i].t) * 1e-9;
      if (d <= 0) continue;
      if (nk > 0) o.kernelS += d;
      if (nk > 1) o.concurrentS += d;
      if (nk == 0 && nc > 0) o.copyOnlyS += d;
      if (nk > 0 || nc > 0) {
        o.busyS += d;
      } else {
        o.gapS += d;
        if (d > o.largestGapS) {
          o.largestGapS = d;
          o.largestGapAtS = double(e[i].t) * 1e-9;
        }
        o.gaps++;
      }
    }
    out.push_back(o);
  }
  return out;
}

std::string Profile::toChromeTrace() const {
  // One "X" event per range (ts/dur in microseconds, tid = lane, args.patch) and "M"
  // events naming the lanes, as DESIGN.md says. Nanoseconds are kept exactly in
  // args.ts_ns/dur_ns so an import gives back the same numbers.
  using json = nlohmann::ordered_json;
  json events = json::array();
  for (std::size_t i = 0; i < lanes.size(); ++i)
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", i},
                      {"args", {{"name", lanes[i]}}}});
  // Microseconds; a correctly rounded division prints as the shortest decimal (12.345).
  auto us = [](int64_t ns) { return double(ns) / 1000.0; };
  for (const ProfileRange& r : ranges) {
    json e = {{"ph", "X"},
              {"name", r.name},
              {"pid", 1},
              {"tid", r.lane},
              {"ts", us(r.startNs)},
              {"dur", us(r.durationNs())},
              {"args",
               {{"patch", r.patch},
                {"depth", r.depth},
                {"ts_ns", r.startNs},
                {"dur_ns", r.durationNs()}}}};
    if (r.kernel >= 0 && std::size_t(r.kernel) < kernels.size()) {
      // A device activity: Perfetto shows "cat" and the args; fromChromeTrace reads them.
      const KernelRecord& k = kernels[r.kernel];
      e["cat"] = k.kind;
      json& a = e["args"];
      a["kernel_kind"] = k.kind;
      a["phase"] = k.phase;
      a["root_phase"] = k.rootPhase;
      a["device"] = k.device;
      a["stream"] = k.stream;
      a["correlation"] = k.correlation;
      if (k.kind == "kernel") {
        const KernelLaunch& l = k.launch;
        a["grid"] = {l.grid[0], l.grid[1], l.grid[2]};
        a["block"] = {l.block[0], l.block[1], l.block[2]};
        a["registers"] = l.registers;
        a["static_shared"] = l.staticShared;
        a["dynamic_shared"] = l.dynamicShared;
        if (!k.symbol.empty()) a["symbol"] = k.symbol;
      } else {
        a["bytes"] = k.bytes;
        if (!k.copyKind.empty()) a["copy_kind"] = k.copyKind;
      }
    }
    events.push_back(std::move(e));
  }
  json other = {{"wall_ns", wallNs}};
  if (kernelTrace.on)
    other["kernel_trace"] = {{"clock_shift_ns", kernelTrace.clockShiftNs},
                             {"max_clamp_ns", kernelTrace.maxClampNs},
                             {"unattributed", kernelTrace.unattributed},
                             {"dropped", kernelTrace.dropped}};
  const json root = {{"displayTimeUnit", "ns"},
                     {"otherData", std::move(other)},
                     {"traceEvents", std::move(events)}};
  // Names come from users (zones, lanes): invalid UTF-8 is replaced, never an error.
  return root.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace {

// Numeric member of a JSON object as int64 (integers exactly, floats rounded); fallback
// when absent or not a number.
int64_t intOf(const nlohmann::json& obj, const char* key, int64_t fallback = 0) {
  if (!obj.is_object()) return fallback;
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return fallback;
  if (it->is_number_integer()) return it->get<int64_t>();
  return int64_t(std::llround(it->get<double>()));
}

double numOf(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return 0;
  const auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<double>() : 0;
}

const nlohmann::json* member(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

} // namespace

Profile Profile::fromChromeTrace(const std::string& text) {
  using nlohmann::json;
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    throw SpexError(std::string("not a Chrome trace: ") + e.what());
  }
  const json* events = root.is_array() ? &root : member(root, "traceEvents");
  if (!events || !events->is_array()) throw SpexError("Chrome trace has no traceEvents array");
  Profile p;
  if (const json* od = member(root, "otherData")) {
    p.wallNs = intOf(*od, "wall_ns");
    if (const json* kt = member(*od, "kernel_trace"); kt && kt->is_object()) {
      p.kernelTrace.on = true;
      p.kernelTrace.clockShiftNs = intOf(*kt, "clock_shift_ns");
      p.kernelTrace.maxClampNs = intOf(*kt, "max_clamp_ns");
      p.kernelTrace.unattributed = int(intOf(*kt, "unattributed"));
      p.kernelTrace.dropped = uint64_t(std::max<int64_t>(0, intOf(*kt, "dropped")));
    }
  }
  // Lanes are keyed by (pid, tid); names from "M" thread_name events.
  std::map<std::pair<int64_t, int64_t>, int> laneOf;
  auto lane = [&](int64_t pid, int64_t tid) {
    auto key = std::make_pair(pid, tid);
    auto it = laneOf.find(key);
    if (it != laneOf.end()) return it->second;
    const int idx = p.laneIndex(pid == 1 ? "lane " + std::to_string(tid)
                                         : "pid " + std::to_string(pid) + " tid " +
                                               std::to_string(tid));
    laneOf[key] = idx;
    return idx;
  };
  for (const json& e : *events) {
    const json* ph = member(e, "ph");
    if (!ph || !ph->is_string()) continue;
    const int64_t pid = intOf(e, "pid"), tid = intOf(e, "tid");
    const json* args = member(e, "args");
    const json* name = member(e, "name");
    if (*ph == "M") {
      const json* laneName = args ? member(*args, "name") : nullptr;
      if (name && *name == "thread_name" && laneName && laneName->is_string())
        p.lanes[lane(pid, tid)] = laneName->get<std::string>();
      continue;
    }
    if (*ph != "X") continue;
    ProfileRange r;
    r.name = name && name->is_string() ? name->get<std::string>() : "?";
    r.lane = lane(pid, tid);
    const json* tsNs = args ? member(*args, "ts_ns") : nullptr;
    const json* durNs = args ? member(*args, "dur_ns") : nullptr;
    if (tsNs && durNs && tsNs->is_number() && durNs->is_number()) {
      r.startNs = intOf(*args, "ts_ns");
      r.endNs = r.startNs + intOf(*args, "dur_ns");
    } else {
      r.startNs = int64_t(std::llround(numOf(e, "ts") * 1e3));
      r.endNs = r.startNs + int64_t(std::llround(numOf(e, "dur") * 1e3));
    }
    if (args) {
      r.patch = int(intOf(*args, "patch", r.patch));
      r.depth = int(intOf(*args, "depth", r.depth));
      const json* kind = member(*args, "kernel_kind");
      if (kind && kind->is_string()) {
        KernelRecord k;
        k.kind = kind->get<std::string>();
        auto str = [&](const char* key) {
          const json* v = member(*args, key);
          return v && v->is_string() ? v->get<std::string>() : std::string();
        };
        auto triple = [&](const char* key, int* out) {
          const json* v = member(*args, key);
          if (!v || !v->is_array()) return;
          for (std::size_t i = 0; i < 3 && i < v->size(); ++i)
            if ((*v)[i].is_number()) out[i] = (*v)[i].get<int>();
        };
        k.phase = str("phase");
        k.rootPhase = str("root_phase");
        k.copyKind = str("copy_kind");
        k.symbol = str("symbol");
        k.device = int(intOf(*args, "device"));
        k.stream = int(intOf(*args, "stream"));
        k.correlation = unsigned(intOf(*args, "correlation"));
        triple("grid", k.launch.grid);
        triple("block", k.launch.block);
        k.launch.registers = int(intOf(*args, "registers"));
        k.launch.staticShared = int(intOf(*args, "static_shared"));
        k.launch.dynamicShared = int(intOf(*args, "dynamic_shared"));
        k.bytes = uint64_t(std::max<int64_t>(0, intOf(*args, "bytes")));
        r.kernel = int(p.kernels.size());
        p.kernels.push_back(std::move(k));
      }
    }
    p.ranges.push_back(std::move(r));
  }
  if (p.wallNs == 0)
    for (const auto& r : p.ranges) p.wallNs = std::max(p.wallNs, r.endNs);
  return p;
}

void Profile::append(const Profile& other, int64_t offsetNs) {
  std::vector<int> map(other.lanes.size());
  for (std::size_t i = 0; i < other.lanes.size(); ++i) map[i] = laneIndex(other.lanes[i]);
  const int kernelBase = int(kernels.size());
  kernels.insert(kernels.end(), other.kernels.begin(), other.kernels.end());
  if (other.kernelTrace.on) {
    kernelTrace.on = true;
    kernelTrace.clockShiftNs = std::max(kernelTrace.clockShiftNs, other.kernelTrace.clockShiftNs);
    kernelTrace.maxClampNs = std::max(kernelTrace.maxClampNs, other.kernelTrace.maxClampNs);
    kernelTrace.unattributed += other.kernelTrace.unattributed;
    kernelTrace.dropped += other.kernelTrace.dropped;
  }
  for (ProfileRange r : other.ranges) {
    r.startNs += offsetNs;
    r.endNs += offsetNs;
    if (r.kernel >= 0) r.kernel += kernelBase;
    r.lane = (r.lane >= 0 && std::size_t(r.lane) < map.size()) ? map[r.lane] : laneIndex("?");
    ranges.push_back(std::move(r));
  }
  wallNs = std::max(wallNs, other.wallNs + offsetNs);
}

std::vector<PhaseComparison> comparePhases(const Profile& a, const Profile& b) {
  return comparePhases(a.phaseStats(), b.phaseStats());
}

std::vector<PhaseComparison> comparePhases(const std::vector<PhaseStats>& sa, const std::vector<PhaseStats>& sb) {
  std::vector<PhaseComparison> out;
  auto find = [&](const std::string& n) -> PhaseComparison& {
    for (auto& c : out)
      if (c.name == n) return c;
    out.push_back({});
    out.back().name = n;
    return out.back();
  };
  for (const PhaseStats& s : sa) find(s.name).a = s;
  for (const PhaseStats& s : sb) find(s.name).b = s;
  for (auto& c : out) {
    c.a.name = c.b.name = c.name;
    c.ratio = c.a.totalS > 0 ? c.b.totalS / c.a.totalS : std::numeric_limits<double>::quiet_NaN();
    c.ratioPerCall = c.a.count > 0 && c.b.count > 0 && c.a.meanS > 0 ? c.b.meanS / c.a.meanS
                                                                     : std::numeric_limits<double>::quiet_NaN();
  }
  std::stable_sort(out.begin(), out.end(), [](const PhaseComparison& x, const PhaseComparison& y) {
    return std::max(x.a.totalS, x.b.totalS) > std::max(y.a.totalS, y.b.totalS);
  });
  return out;
}

std::string checkNesting(const Profile& p) {
  // Per lane, sweep the ranges by start (outer first on ties) with a stack of open
  // ranges; each range must sit directly inside the stack's top at depth - 1.
  std::vector<std::vector<const ProfileRange*>> byLane(p.lanes.size());
  for (const ProfileRange& r : p.ranges) {
    if (r.lane < 0 || std::size_t(r.lane) >= p.lanes.size())
      return "range '" + r.name + "' has lane " + std::to_string(r.lane) + " of " +
             std::to_string(p.lanes.size());
    if (r.endNs < r.startNs) return "range '" + r.name + "' ends before it starts";
    byLane[r.lane].push_back(&r);
  }
  for (std::size_t lane = 0; lane < byLane.size(); ++lane) {
    auto& v = byLane[lane];
    // Ties: outer first; at one depth the one that ends first (an empty range at a
    // sibling's start is beside it, not inside it).
    std::stable_sort(v.begin(), v.end(), [](const ProfileRange* x, const ProfileRange* y) {
      if (x->startNs != y->startNs) return x->startNs < y->startNs;
      return x->depth != y->depth ? x->depth < y->depth : x->endNs < y->endNs;
    });
    std::vector<const ProfileRange*> open;
    for (const ProfileRange* r : v) {
      // A range that ends where r starts is closed, except for an empty r deeper than it:
      // an empty child at its parent's end (a copy clamped there) is inside the parent.
      while (!open.empty() && (open.back()->endNs < r->startNs ||
                               (open.back()->endNs == r->startNs &&
                                (r->endNs > r->startNs || r->depth <= open.back()->depth))))
        open.pop_back();
      while (!open.empty() && open.back()->depth >= r->depth) {
        if (open.back()->endNs > r->startNs)
          return "on lane '" + p.lanes[lane] + "', '" + r->name + "' (depth " +
                 std::to_string(r->depth) + ") overlaps '" + open.back()->name + "' (depth " +
                 std::to_string(open.back()->depth) + ")";
        open.pop_back();
      }
      if (r->depth != int(open.size()) ||
          (!open.empty() && (r->startNs < open.back()->startNs || r->endNs > open.back()->endNs)))
        return "on lane '" + p.lanes[lane] + "', '" + r->name + "' (depth " +
               std::to_string(r->depth) + ") is not inside a range of depth " +
               std::to_string(r->depth - 1);
      open.push_back(r);
    }
  }
  return {};
}

Profile readChromeTraceFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open Chrome trace '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  try {
    return Profile::fromChromeTrace(ss.str());
  } catch (const SpexError& e) {
    throw InputError("'" + path + "': " + e.what());
  }
}

void writeChromeTraceFile(const Profile& p, const std::string& path) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << p.toChromeTrace();
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw InputError("cannot write Chrome trace '" + path + "'");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw InputError("cannot write Chrome trace '" + path + "': " + ec.message());
  }
}

ProfileRecorder::ProfileRecorder() : m_origin(std::chrono::steady_clock::now()) {}

int64_t ProfileRecorder::nowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              m_origin)
      .count();
}

int ProfileRecorder::currentLane() {
  const std::size_t id = std::hash<std::thread::id>{}(std::this_thread::get_id());
  std::lock_guard lock(m_mutex);
  auto it = m_threadLanes.find(id);
  if (it != m_threadLanes.end()) return it->second;
  const std::string name = m_threadCount == 0 ? "main" : "cpu thread " + std::to_string(m_threadCount);
  ++m_threadCount;
  const int lane = m_profile.laneIndex(name);
  m_threadLanes[id] = lane;
  return lane;
}

void ProfileRecorder::setThreadLaneName(const std::string& name) {
  const std::size_t id = std::hash<std::thread::id>{}(std::this_thread::get_id());
  std::lock_guard lock(m_mutex);
  ++m_threadCount;
  m_threadLanes[id] = m_profile.laneIndex(name);
}

int ProfileRecorder::lane(const std::string& name) {
  std::lock_guard lock(m_mutex);
  return m_profile.laneIndex(name);
}

void ProfileRecorder::add(ProfileRange r) {
  std::lock_guard lock(m_mutex);
  m_profile.ranges.push_back(std::move(r));
}

Profile ProfileRecorder::finish() {
  std::lock_guard lock(m_mutex);
  m_profile.wallNs = nowNs();
  std::stable_sort(m_profile.ranges.begin(), m_profile.ranges.end(),
                   [](const ProfileRange& a, const ProfileRange& b) { return a.startNs < b.startNs; });
  return m_profile;
}

ScopedRange::ScopedRange(ProfileRecorder* rec, const char* name, int patch)
    : m_rec(rec), m_name(name), m_patch(patch), m_start(rec ? rec->nowNs() : 0) {
#ifdef SPEXLAB_HAVE_NVTX
  nvtxRangePushA(name);
#endif
  ++t_depth;
}

ScopedRange::~ScopedRange() {
  --t_depth;
#ifdef SPEXLAB_HAVE_NVTX
  nvtxRangePop();
#endif
  if (!m_rec) return;
  ProfileRange r;
  r.name = m_name;
  r.startNs = m_start;
  r.endNs = m_rec->nowNs();
  r.lane = m_rec->currentLane();
  r.depth = t_depth;
  r.patch = m_patch;
  m_rec->add(std::move(r));
}

} // namespace spex
