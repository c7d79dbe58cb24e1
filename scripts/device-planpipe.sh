#!/usr/bin/env bash
# Issue 12, seventh round (plan ahead): the checks of one GPU call, run from the bundle
# folder after run.sh has unpacked it (docs/benchmarks.md, "Issue 12, seventh round").
# SPEXLAB_CUDA_PLANAHEAD=0 is the old path (A), 1 the new (B), in one process each,
# alternating; then a kernel-profile trace of each with its ends (first batch), the new
# kernel against the host, the engine suite, and compute-sanitizer on the new path.
cd "$(dirname "$0")"
D=/tmp/dev
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export SPEXLAB_TEST_DATA=$D/data QT_QPA_PLATFORM=offscreen PATH=/usr/local/cuda/bin:$PATH
B=$D/bin
PSF=$D/data/psf-r0-00067784.fits
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
echo "=== test_device_psf (extents kernel, corners)"
timeout 60 $B/test_device_psf patchExtentsMatchHostToTheBit planCornersMatchHostToTheBit 2>&1 \
  | tee $OUT/test_device_psf.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
echo "=== A/B: bench --repeat 7, SPEXLAB_CUDA_PLANAHEAD=0 (old) and 1 (new), alternating"
for k in 0 1 0 1 0 1; do
  echo "planahead $k:"; SPEXLAB_CUDA_PLANAHEAD=$k timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 2>&1 \
    | tee -a $OUT/bench_ahead$k.txt | grep -E "^wall|^plan |^plan corners|^spots|peak"
done
echo "=== traces (bench --repeat 3 --profile, last run) and their ends"
for k in 0 1; do
  echo "planahead $k:"; SPEXLAB_CUDA_PLANAHEAD=$k timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 3 --quiet \
    --profile $OUT/trace$k.json > $OUT/bench_trace$k.txt 2>&1; grep -E "^wall" $OUT/bench_trace$k.txt
  python3 ./trace-summary.py $OUT/trace$k.json | grep -E " plan$| prefetch$|enqueue|ends:|wall"
done
echo "=== kernel profile: occupancy and ends"
for k in 0 1; do
  echo "planahead $k:"; SPEXLAB_CUDA_PLANAHEAD=$k timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 3 \
    --profile-kernels --profile $OUT/tracek$k.json > $OUT/bench_kernels$k.txt 2>&1
  grep -E "^wall|over the|[Ee]xtents|cornerTable|spotTable" $OUT/bench_kernels$k.txt | head -8
  python3 ./trace-summary.py $OUT/tracek$k.json | grep -E " plan$|ends:|wall"
done
echo "=== one patch per request (warm engine, 100 requests)"
timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --one-patch 100 2>&1 | tee $OUT/onepatch.txt | grep -iE "median|p95" | head -3
echo "=== test_cuda_engine"
timeout 110 $B/test_cuda_engine 2>&1 | tee $OUT/test_cuda_engine.log | grep -E "PASS|FAIL|SKIP|QINFO|Totals|Loc|QWARN"
echo "=== compute-sanitizer"
timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_device_psf patchExtentsMatchHostToTheBit 2>&1 \
  | tee $OUT/memcheck_psf.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck psf rc ${PIPESTATUS[0]}"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_engine nonSpdPatchesBehaveLikeCpu \
  wholeRequestWithItsPlan 2>&1 | tee $OUT/memcheck.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck engine rc ${PIPESTATUS[0]}"
