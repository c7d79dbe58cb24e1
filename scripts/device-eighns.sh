#!/usr/bin/env bash
# Issue 12, ninth round (eighns): pass 3 of the bisection eigensolver by Newton-Schulz.
# From the bundle folder (cp scripts/device-eighns.sh .device/): the bisect slots of
# test_batched_eigh (23 500 blocks and the engine's batch sizes, chain / CholQR /
# Newton-Schulz in turn), one stream with the kernel profile for each pass-3 method,
# the warm frame alternating SPEXLAB_CUDA_EIGH_ORTHO=ns|cholqr, compute-sanitizer
# memcheck and racecheck of the new kernel, then the suites it touches. Fits 240 s.
cd "$(dirname "$0")"
D=/tmp/dev
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
T0=$(date +%s)
bash ./run.sh gpu
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export SPEXLAB_TEST_DATA=$D/data QT_QPA_PLATFORM=offscreen PATH=/usr/local/cuda/bin:$PATH
B=$D/bin
PSF=$D/data/psf-r0-00067784.fits
el() { echo "[$(( $(date +%s) - T0 )) s]"; }
echo "=== test_batched_eigh (the bisect slots first, then the rest)"; el
timeout 80 $B/test_batched_eigh bisectOrthoMethodsAgree bisectMatchesLapack bisectAgreesWithChain bisectFrameTimed 2>&1 \
  | tee $OUT/eigh_bisect.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
timeout 60 $B/test_batched_eigh fiberBlocksMatchLapack illConditionedMatchLapack otherSizesAndStrides \
  otherReduceKernelsMatchLapack workspaceSizesAgree badArgumentsAreErrors 2>&1 | tee $OUT/eigh_rest.log | grep -E "PASS|FAIL|Totals|Loc"
echo "=== one stream, kernel profile"; el
for k in ns cholqr; do echo "ortho $k, 1 stream:"
  SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_EIGH_ORTHO=$k timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 \
    --profile-kernels > $OUT/bench1_$k.txt 2>&1; grep -E "^wall|^eigh|syev|^device" $OUT/bench1_$k.txt | head -20
done
echo "=== warm frame, bench --repeat 7, alternating"; el
for r in 1 2; do for k in ns cholqr; do echo "ortho $k:"
  SPEXLAB_CUDA_EIGH_ORTHO=$k timeout 30 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 2>&1 | tee -a $OUT/warm.txt | grep -E "^wall|^eigh"
done; done
echo "=== memcheck, racecheck"; el
timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_batched_eigh bisectOrthoMethodsAgree 2>&1 \
  | tee $OUT/memcheck_ns.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck rc ${PIPESTATUS[0]}"
timeout 50 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_batched_eigh bisectOrthoMethodsAgree 2>&1 \
  | tee $OUT/racecheck_ns.log | grep -E "ERROR SUMMARY|RACE|PASS|FAIL|Totals"; echo "racecheck rc ${PIPESTATUS[0]}"
grep -E "^wall" $OUT/warm.txt > $OUT/warm_walls.txt; rm -f $OUT/eigh_rest.log $OUT/warm.txt
echo "=== test_cuda_engine"; el
left=$(( 228 - ($(date +%s) - T0) )); el; echo "whole test_cuda_engine, $left s left"
[ $left -gt 10 ] && timeout $left $B/test_cuda_engine 2>&1 | tee $OUT/engine.log | grep -E "PASS|FAIL|Totals|Loc"
el
