#include "kernel_trace.h"

#include <algorithm>
#include <cstdlib>
#include <cxxabi.h>
#include <memory>

namespace spex {

std::string shortKernelName(const std::string& symbol) {
  std::string s = symbol;
  if (s.rfind("_Z", 0) == 0) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(s.c_str(), nullptr, nullptr, &status),
                                            std::free);
    if (status == 0 && d) s = d.get();
  }
  // The parameter list: the last top-level "(...)" at the end.
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (std::size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      else if (s[i] == '(' && --depth == 0) {
        if (i > 0) s.erase(i);
        break;
      }
    }
  }
  for (const std::string& noise : {std::string("(anonymous namespace)::")})
    for (std::size_t at; (at = s.find(noise)) != std::string::npos;) s.erase(at, noise.size());
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

namespace {

const char* kindName(DeviceActivity::Kind k) {
  switch (k) {
  case DeviceActivity::Kind::Kernel: return "kernel";
  case DeviceActivity::Kind::Memcpy: return "memcpy";
  case DeviceActivity::Kind::Memset: return "memset";
  }
  return "kernel";
}

} // namespace

void attachKernelTrace(Profile& p, const KernelTraceInput& in) {
  const std::vector<PhaseWindow>& ph = in.phases;
  std::unordered_map<uint64_t, std::size_t> byId;
  for (std::size_t i = 0; i < ph.size(); ++i) byId[ph[i].id] = i;
  // Phases per lane, by start, for the time fallback and the trims.
  std::map<int, std::vector<std::size_t>> onLane;
  for (std::size_t i = 0; i < ph.size(); ++i) onLane[ph[i].lane].push_back(i);
  for (auto& [lane, v] : onLane)
    std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) { return ph[a].startNs < ph[b].startNs; });

  struct Item {
    const DeviceActivity* a;
    int64_t t0, t1;
    int lane;
    long parent; // index into ph, -1 none
  };
  std::vector<Item> items;
  items.reserve(in.activities.size());
  for (const DeviceActivity& a : in.activities) {
    Item it{&a, int64_t(a.startNs) + in.clockOffsetNs, int64_t(a.endNs) + in.clockOffsetNs, 0, -1};
    if (it.t1 < it.t0) it.t1 = it.t0;
    const auto ext = in.external.find(a.correlation);
    const auto win = ext == in.external.end() ? byId.end() : byId.find(ext->second);
    if (win != byId.end()) {
      it.parent = long(win->second);
      it.lane = ph[win->second].lane;
    } else {
      const auto sl = in.streamLanes.find({a.device, a.stream});
      if (sl == in.streamLanes.end()) continue; // not the engine's work
      it.lane = sl->second;
    }
    items.push_back(it);
  }

  // The anchor lag per device: how far activities start before their phase opens.
  std::map<int, int64_t> shift;
  for (const Item& it : items)
    if (it.parent >= 0) {
      int64_t& s = shift[it.a->device];
      s = std::max(s, ph[it.parent].startNs - it.t0);
    }
  int64_t maxShift = 0;
  for (auto& [dev, s] : shift) maxShift = std::max(maxShift, s);
  for (Item& it : items) {
    const auto s = shift.find(it.a->device);
    if (s != shift.end()) {
      it.t0 += s->second;
      it.t1 += s->second;
    }
  }

  // Time fallback: the innermost phase on the lane holding the midpoint.
  for (Item& it : items) {
    if (it.parent >= 0) continue;
    const auto lv = onLane.find(it.lane);
    if (lv == onLane.end()) continue;
    const int64_t mid = it.t0 + (it.t1 - it.t0) / 2;
    for (std::size_t i : lv->second) {
      if (ph[i].startNs > mid) break;
      if (ph[i].endNs > mid && (it.parent < 0 || ph[i].depth > ph[it.parent].depth)) it.parent = long(i);
    }
  }

  int64_t maxClamp = 0;
  int unattributed = 0;
  for (const Item& it : items) {
    const DeviceActivity& a = *it.a;
    int64_t t0 = it.t0, t1 = it.t1;
    const int depth = it.parent >= 0 ? ph[it.parent].depth + 1 : 0;
    if (it.parent >= 0) {
      const PhaseWindow& w = ph[it.parent];
      const int64_t c0 = std::clamp(t0, w.startNs, w.endNs), c1 = std::clamp(t1, w.startNs, w.endNs);
      maxClamp = std::max({maxClamp, std::abs(c0 - t0), std::abs(c1 - t1)});
      t0 = c0;
      t1 = c1;
    } else {
      ++unattributed;
    }
    // Stay clear of the phases beside it (same lane, same depth): stream order says
    // they did not overlap, so an overlap is what is left of the clock difference.
    if (const auto lv = onLane.find(it.lane); lv != onLane.end())
      for (std::size_t i : lv->second) {
        const PhaseWindow& w = ph[i];
        if (w.startNs >= t1) break;
        if (w.depth != depth || w.endNs <= t0) continue;
        const int64_t mid = t0 + (t1 - t0) / 2, b0 = t0, b1 = t1;
        // Out on the side of its midpoint; one that lies wholly inside the sibling
        // shrinks to nothing at that edge.
        if (mid < w.startNs + (w.endNs - w.startNs) / 2) {
          t1 = std::min(t1, w.startNs);
          t0 = std::min(t0, t1);
        } else {
          t0 = std::max(t0, w.endNs);
          t1 = std::max(t1, t0);
        }
        maxClamp = std::max({maxClamp, std::abs(t0 - b0), std::abs(t1 - b1)});
      }
    KernelRecord k;
    k.kind = kindName(a.kind);
    if (it.parent >= 0) {
      k.phase = ph[it.parent].name;
      k.rootPhase = ph[it.parent].root.empty() ? k.phase : ph[it.parent].root;
    }
    k.device = a.device;
    k.stream = int(a.stream);
    k.correlation = a.correlation;
    k.launch = a.launch;
    k.bytes = a.bytes;
    k.copyKind = a.copyKind;
    ProfileRange r;
    if (a.kind == DeviceActivity::Kind::Kernel) {
      k.symbol = a.name;
      r.name = shortKernelName(a.name);
    } else {
      r.name = a.kind == DeviceActivity::Kind::Memset ? "memset" : "memcpy " + a.copyKind;
    }
    r.startNs = t0;
    r.endNs = t1;
    r.lane = it.lane;
    r.depth = depth;
    r.patch = it.parent >= 0 ? ph[it.parent].patch : -1;
    r.kernel = int(p.kernels.size());
    p.kernels.push_back(std::move(k));
    p.ranges.push_back(std::move(r));
  }
  p.kernelTrace.on = true;
  p.kernelTrace.clockShiftNs = maxShift;
  p.kernelTrace.maxClampNs = maxClamp;
  p.kernelTrace.unattributed = unattributed;
  p.kernelTrace.dropped = in.dropped;
  std::stable_sort(p.ranges.begin(), p.ranges.end(),
                   [](const ProfileRange& a, const ProfileRange& b) { return a.startNs < b.startNs; });
}

} // namespace spex
