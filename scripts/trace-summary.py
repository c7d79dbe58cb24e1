#!/usr/bin/env python3
"""One line per top-level range of a SpexLab Chrome trace (docs/benchmarks.md, "Cold
process"): start and length in ms, lane, name; and the trace's wall. Usage:
trace-summary.py TRACE.json [PROCESS_WALL_MS]"""
import json
import sys

t = json.load(open(sys.argv[1]))
ev = t["traceEvents"]
lanes = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
xs = [e for e in ev if e.get("ph") == "X"]
t0 = min(e["ts"] for e in xs)
for e in sorted(xs, key=lambda e: e["ts"]):
    lane = lanes.get(e.get("tid"), "?")
    depth = e.get("args", {}).get("depth", 0)
    if lane.startswith(("cuda:", "worker", "cpu thread")) or depth > 1:
        continue
    print("  %8.1f %8.1f  %-16s %s%s" % ((e["ts"] - t0) / 1e3, e["dur"] / 1e3, lane, "  " * depth, e["name"]))
wall = t.get("otherData", {}).get("wall_ns", 0) / 1e6
line = "  trace wall %.1f ms" % wall
if len(sys.argv) > 2:
    line += "; process wall %s ms; outside the trace %.1f ms" % (sys.argv[2], float(sys.argv[2]) - wall)
print(line)
