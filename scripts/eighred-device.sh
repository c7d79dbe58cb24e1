#!/usr/bin/env bash
# Issue 12, ninth round (eighred): the one-warp reduce on the GPU machine, one call.
# Usage (device tool): copy it beside the bundle (.device-eighred/) and run it from there
# Needs the bundle of scripts/device-bundle.sh build build/tests/gpu/test_eigh_reduce_warp
# [build/extra/test_batched_eigh_v1: the kernel of call 1, for A/B].
set -u
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
D=/tmp/dev
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p $D && tar -xJf $HERE/stage.tar.xz -C $D || exit 1
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export SPEXLAB_TEST_DATA=$D/data QT_QPA_PLATFORM=offscreen PATH=/usr/local/cuda/bin:$PATH
B=$D/bin
PSF=$D/data/psf-r0-00067784.fits
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv | tee $OUT/gpu.txt
el "eigh tests"
timeout 110 $B/test_batched_eigh 2>&1 | tee $OUT/eigh.log \
  | grep -E "PASS|FAIL|QINFO.*(one warp|block   |vs block|bisect: n 74, lda 74, batch 300|^QINFO.*n 74, lda 74, batch 300)|Totals|Loc"
timeout 20 $B/test_eigh_reduce_warp 2>&1 | tee -a $OUT/eigh.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
el "first form of the kernel (call 1's), same call"
[ -x $B/test_batched_eigh_v1 ] && timeout 30 $B/test_batched_eigh_v1 warpReduceFrameTimed 2>&1 | tee $OUT/eigh_v1.log \
  | grep -E "FAIL|QINFO.*(one warp|block   )|Totals"
el "engine one stream, kernel profile"
for r in block warp; do
  echo "reduce $r, 1 stream:"
  SPEXLAB_CUDA_EIGH_REDUCE=$r SPEXLAB_CUDA_STREAMS=1 timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 \
    --profile-kernels 2>&1 | tee $OUT/bench1_$r.txt | grep -E "^wall|syev|^eigh"
done
el "warm frame alternating"
for r in block warp block warp; do
  echo "reduce $r:"
  SPEXLAB_CUDA_EIGH_REDUCE=$r timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 --quiet 2>&1 \
    | tee -a $OUT/bench_ab.txt | grep -E "^wall"
done
el "memcheck"
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_batched_eigh warpReduceEveryOrder 2>&1 \
  | tee $OUT/memcheck.log | grep -E "ERROR SUMMARY|FAIL|Totals"; echo "memcheck rc ${PIPESTATUS[0]}"
el "racecheck (syevReduceWarpKernel only)"
for opt in --kernel-name --filter; do
  timeout 50 compute-sanitizer --tool racecheck $opt kns=syevReduceWarpKernel --error-exitcode 9 \
    $B/test_batched_eigh warpReduceEveryOrder > $OUT/racecheck.log 2>&1
  rc=$?; grep -E "ERROR SUMMARY|RACE|FAIL|Totals" $OUT/racecheck.log; echo "racecheck ($opt) rc $rc"
  grep -q "SUMMARY" $OUT/racecheck.log && break
  head -5 $OUT/racecheck.log
done
left=$(( 228 - ($(date +%s) - t0) ))
el "engine suite (${left} s left)"
timeout $left $B/test_cuda_engine 2>&1 | tee $OUT/engine.log | grep -E "PASS|FAIL|QINFO.*eighReduces|Totals|Loc"
el "done"
cd $OUT && tar -czf logs.tgz *.log *.txt && ls
