#!/usr/bin/env python3
"""One line per top-level range of a SpexLab Chrome trace (docs/benchmarks.md, "Cold
process"): start and length in ms, lane, name; and the trace's wall. With device lanes,
one more line: the pipeline's ends (docs/benchmarks.md, "Issue 12, sixth round"): the
image's upload (H2D), the first batch's start (its "normal equations"), the last kernel
(or, without --profile-kernels, the last chi2pix phase), the last D2H, and the tail from
the last kernel to the end of the run. Usage: trace-summary.py TRACE.json [PROCESS_WALL_MS]"""
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
dev = [e for e in xs if lanes.get(e.get("tid"), "").startswith("cuda:")]
if dev:
    end = lambda e: (e["ts"] + e["dur"] - t0) / 1e3
    start = lambda e: (e["ts"] - t0) / 1e3
    h2d = [e for e in dev if e["name"] == "H2D"]
    big = max(h2d, key=lambda e: e["dur"]) if h2d else None  # the image's
    firstBatch = min((start(e) for e in dev if e["name"] == "normal equations"), default=float("nan"))
    kern = [e for e in dev if e.get("args", {}).get("kernel_kind") == "kernel"]
    lastKernel = max((end(e) for e in kern), default=None)
    what = "kernel"
    if lastKernel is None:
        lastKernel, what = max((end(e) for e in dev if e["name"] == "chi2pix"), default=float("nan")), "chi2pix"
    d2h = [e for e in dev if e["name"] == "D2H"]
    lastD2H = max((end(e) for e in d2h), default=float("nan"))
    print("  ends: image H2D %s; first batch %.1f; last %s %.1f; D2H x%d, last ends %.1f; "
          "tail after the last %s %.1f ms of %.1f" %
          ("%.1f-%.1f (%s)" % (start(big), end(big), lanes.get(big.get("tid"))) if big else "-",
           firstBatch, what, lastKernel, len(d2h), lastD2H, what, wall - lastKernel, wall))
line = "  trace wall %.1f ms" % wall
if len(sys.argv) > 2:
    line += "; process wall %s ms; outside the trace %.1f ms" % (sys.argv[2], float(sys.argv[2]) - wall)
print(line)
