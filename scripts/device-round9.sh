#!/usr/bin/env bash
# Issue 12, ninth round, the lead's first check (from the bundle folder): main with
# eighns (pass 3 by Newton-Schulz), eighval (eigenvalues on the division-free Sturm
# count), eighred (pass 1 by one warp a matrix) and cpu13 (the CPU's twisted vectors)
# merged. The eigensolver's suites and frame timings, sanitizers on the new kernels,
# the engine suite, CPU vs CUDA through files, the warm frame alternating the new
# defaults with the eighth round's eigensolver settings, one stream with the kernel
# profile. Fits ~330 s.
cd "$(dirname "$0")"
D=/tmp/dev
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s]"; }
bash ./run.sh gpu
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export SPEXLAB_TEST_DATA=$D/data QT_QPA_PLATFORM=offscreen PATH=/usr/local/cuda/bin:$PATH
B=$D/bin
PSF=$D/data/psf-r0-00067784.fits
OLD="SPEXLAB_CUDA_EIGH_ORTHO=cholqr SPEXLAB_CUDA_EIGH_VALUES=ratio SPEXLAB_CUDA_EIGH_REDUCE=block"
echo "=== test_batched_eigh"; el
timeout 150 $B/test_batched_eigh 2>&1 | tee $OUT/test_batched_eigh.log | grep -E "PASS|FAIL|Totals|Loc|blocks of 74|frame"
echo "=== sanitizers on the new kernels"; el
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 --kernel-name kns=syevReduceWarpKernel $B/test_batched_eigh warpReduceEveryOrder 2>&1 \
  | tee $OUT/racecheck_warp.log | grep -E "ERROR SUMMARY|RACE|Warning|PASS|FAIL|Totals" | sort | uniq -c | head; echo "racecheck warp rc ${PIPESTATUS[0]}"
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_batched_eigh bisectOrthoMethodsAgree 2>&1 \
  | tee $OUT/racecheck_bisect.log | grep -E "ERROR SUMMARY|RACE|PASS|FAIL|Totals"; echo "racecheck bisect rc ${PIPESTATUS[0]}"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_batched_eigh warpReduceMatchesLapack bisectOrthoMethodsAgree 2>&1 \
  | tee $OUT/memcheck_eigh.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck eigh rc ${PIPESTATUS[0]}"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_engine subsetAndSmallBatchesMatch nonSpdPatchesBehaveLikeCpu 2>&1 \
  | tee $OUT/memcheck_engine.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck engine rc ${PIPESTATUS[0]}"
echo "=== test_cuda_engine"; el
timeout 200 $B/test_cuda_engine 2>&1 | tee $OUT/test_cuda_engine.log | grep -E "PASS|FAIL|Totals|Loc|pull"
echo "=== cold, CPU vs CUDA through files"; el
bash ./run.sh cold 2>&1 | tail -14
echo "=== one stream, kernel profile: new defaults, then the eighth round's settings"; el
SPEXLAB_CUDA_STREAMS=1 timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --profile-kernels > $OUT/bench1_new.txt 2>&1
grep -E "^wall|^eigh|syev|^device" $OUT/bench1_new.txt | head -14
env $OLD SPEXLAB_CUDA_STREAMS=1 timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --profile-kernels > $OUT/bench1_old.txt 2>&1
grep -E "^wall|^eigh|syev|^device" $OUT/bench1_old.txt | head -14
echo "=== warm frame, bench --repeat 7, new defaults and the eighth round's eigensolver alternating"; el
for r in 1 2 3; do
  echo "new:"; timeout 30 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 2>&1 | grep -E "^wall|peak"
  echo "old:"; env $OLD timeout 30 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 2>&1 | grep -E "^wall|peak"
done
el
