#!/usr/bin/env bash
# Issue 12, eighth round, the lead's check of merged main on the GPU machine (from the
# bundle folder, after scripts/device-bundle.sh): every suite and sanitizer (run.sh's
# standard steps), the warm frame with the eighth round's defaults and with the
# bisection eigensolver alternating, one stream with the kernel profile for both, a
# two-stream kernel-profile trace reduced to its kernel union and device-busy time,
# a 6-frame batch with kept results compared frame by frame, three cold processes.
cd "$(dirname "$0")"
D=/tmp/dev
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
bash ./run.sh gpu psf eigh chol selinv fiber gemm staging engine memcheck cold onepatch kernels raceeigh racecheck
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export SPEXLAB_TEST_DATA=$D/data QT_QPA_PLATFORM=offscreen PATH=/usr/local/cuda/bin:$PATH
B=$D/bin
PSF=$D/data/psf-r0-00067784.fits
echo "=== warm frame, bench --repeat 7: defaults (chain) and SPEXLAB_CUDA_EIGH=bisect alternating"
for r in 1 2; do for k in tridiagonal bisect; do echo "eigh $k:"
  SPEXLAB_CUDA_EIGH=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 2>&1 | grep -E "^wall|memory:"
done; done
echo "=== one stream, kernel profile"
for k in tridiagonal bisect; do echo "eigh $k, 1 stream:"
  SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_EIGH=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 \
    --profile-kernels > $OUT/bench_1s_$k.txt 2>&1; grep -E "^wall|^[a-z].* ms" $OUT/bench_1s_$k.txt | head -30
done
echo "=== two streams, kernel-profile trace"
for k in tridiagonal bisect; do
  SPEXLAB_CUDA_EIGH=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 3 --profile-kernels \
    --profile $OUT/trace2s_$k.json > $OUT/bench_2s_$k.txt 2>&1
  python3 - $OUT/trace2s_$k.json $k <<'PY'
import json, sys
t = json.load(open(sys.argv[1])); ev = t["traceEvents"]
lanes = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
xs = [e for e in ev if e.get("ph") == "X"]
t0 = min(e["ts"] for e in xs)
def union(iv):
    iv = sorted(iv); tot = 0; cs = ce = None
    for s, e in iv:
        if ce is None or s > ce:
            if ce is not None: tot += ce - cs
            cs, ce = s, e
        else: ce = max(ce, e)
    return tot + (ce - cs if ce is not None else 0)
kern = [(e["ts"], e["ts"] + e["dur"]) for e in xs if e.get("args", {}).get("kernel_kind") == "kernel"]
act = [(e["ts"], e["ts"] + e["dur"]) for e in xs if e.get("args", {}).get("kernel_kind") in ("kernel", "memcpy", "memset")]
wall = t.get("otherData", {}).get("wall_ns", 0) / 1e3
first = min(s for s, _ in act) - t0; last = max(e for _, e in act) - t0
print("%s: trace wall %.1f ms; kernels %d, one-stream sum %.1f ms, union %.1f ms; device busy %.1f ms; "
      "first activity %.1f ms, after the last %.1f ms" % (sys.argv[2], wall / 1e3, len(kern),
      sum(e - s for s, e in kern) / 1e3, union(kern) / 1e3, union(act) / 1e3, first / 1e3, (wall - last) / 1e3))
PY
done
echo "=== batch of 6 identical frames, kept results (default) and SPEXLAB_CUDA_KEEPRESULT=0"
for k in 1 0; do
  SPEXLAB_CUDA_KEEPRESULT=$k SPEXLAB_PSF=$PSF timeout 60 bash ./bench-batch.sh -N 6 --cli $B/spexlab-cli --dir $D/bb$k \
    -- --engine cuda --gpus 0 > $OUT/batch$k.txt 2>&1; echo "keepresult $k rc $?"; grep -E "frames ok|frames/hour" $OUT/batch$k.txt | head -3
  [ -d $D/bb1/sim ] && [ ! -d $D/bb0/sim ] && mkdir -p $D/bb0 && cp -r $D/bb1/sim $D/bb0/sim
done
for i in 2 6; do
  $B/spexlab-cli compare $D/bb1/out/frame-p1-1.fits $D/bb1/out/frame-p1-$i.fits > $OUT/cmp1-$i.txt 2>&1
  echo "kept frame $i vs frame 1:"; grep -iE "max|mask" $OUT/cmp1-$i.txt | head -5
done
$B/spexlab-cli compare $D/bb0/out/frame-p1-6.fits $D/bb1/out/frame-p1-6.fits > $OUT/cmp01.txt 2>&1
echo "frame 6 kept vs new arrays:"; grep -iE "max|mask" $OUT/cmp01.txt | head -5
echo "=== cold extract processes (three more)"
for i in 1 2 3; do
  s=$(date +%s%N); $B/spexlab-cli extract -i $D/frame/preproc.fits -p $D/frame/psf.fits -o $D/frame/frame-cold$i.fits \
    -w 5760,7620,0.8 --engine cuda > $OUT/cold$i.log 2>&1; echo "cold $i rc $? process wall: $(( ($(date +%s%N) - s) / 1000000 )) ms"
done
