#!/usr/bin/env python3
"""The host ranges of a SpexLab Chrome trace that end in its last N ms (default 8) or
begin in its first M ms (default 3), device stream lanes and kernels left out: what the
host does around the device's work at the ends of a frame (docs/benchmarks.md, "Issue
12, eighth round"). Usage: trace-tail.py TRACE.json [N] [M]"""
import json
import sys

t = json.load(open(sys.argv[1]))
last = float(sys.argv[2]) if len(sys.argv) > 2 else 8.0
first = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
ev = t["traceEvents"]
lanes = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
xs = [e for e in ev if e.get("ph") == "X"]
t0 = min(e["ts"] for e in xs)
wall = t.get("otherData", {}).get("wall_ns", 0) / 1e6 or max((e["ts"] + e["dur"] - t0) / 1e3 for e in xs)
for e in sorted(xs, key=lambda e: e["ts"]):
    lane = lanes.get(e.get("tid"), "?")
    s = (e["ts"] - t0) / 1e3
    en = s + e["dur"] / 1e3
    if " stream " in lane or "kernel" in e.get("cat", "") or e["name"].startswith(("memcpy", "spex::", "void ")):
        continue
    if en > wall - last or s < first:
        print("  %8.2f %8.2f  %-22s %s" % (s, en, lane, e["name"]))
print("  wall %.2f ms" % wall)
