#!/usr/bin/env bash
# Issue 12, sixth round (pipeline ends): the checks of one GPU call, run from the bundle
# folder after run.sh has unpacked it (docs/benchmarks.md, "Issue 12, sixth round").
# SPEXLAB_CUDA_OVERLAP=0 is the old path (A), 1 the new (B), in one process each,
# alternating; then a trace of each with its ends, the kernel profile's occupancy line,
# one patch per request, the engine and staging tests, and compute-sanitizer on the new
# copy and event paths.
cd "$(dirname "$0")"
D=/tmp/dev
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export SPEXLAB_TEST_DATA=$D/data QT_QPA_PLATFORM=offscreen PATH=/usr/local/cuda/bin:$PATH
B=$D/bin
PSF=$D/data/psf-r0-00067784.fits
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
echo "=== A/B: bench --repeat 7, SPEXLAB_CUDA_OVERLAP=0 (old) and 1 (new), alternating"
for k in 0 1 0 1 0 1; do
  echo "overlap $k:"; SPEXLAB_CUDA_OVERLAP=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 2>&1 \
    | tee -a $OUT/bench_overlap$k.txt | grep -E "^wall|^H2D|^D2H|^finalize|peak"
done
echo "=== traces (bench --repeat 3 --profile, last run) and their ends"
for k in 0 1; do
  echo "overlap $k:"; SPEXLAB_CUDA_OVERLAP=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 3 --quiet \
    --profile $OUT/trace$k.json > $OUT/bench_trace$k.txt 2>&1; grep -E "^wall" $OUT/bench_trace$k.txt
  python3 ./trace-summary.py $OUT/trace$k.json | tail -2
done
echo "=== kernel profile: occupancy"
for k in 0 1; do
  echo "overlap $k:"; SPEXLAB_CUDA_OVERLAP=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 3 \
    --profile-kernels --profile $OUT/tracek$k.json > $OUT/bench_kernels$k.txt 2>&1
  grep -E "^wall|over the" $OUT/bench_kernels$k.txt; python3 ./trace-summary.py $OUT/tracek$k.json | tail -2
done
echo "=== one patch per request (warm engine, 100 requests)"
for k in 0 1; do
  echo "overlap $k:"; SPEXLAB_CUDA_OVERLAP=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --one-patch 100 2>&1 \
    | tee $OUT/onepatch$k.txt | grep -iE "median|p95|request" | head -4
done
echo "=== test_staging"
timeout 60 $B/test_staging 2>&1 | tee $OUT/test_staging.log | grep -E "PASS|FAIL|SKIP|QINFO|Totals|Loc"
echo "=== test_cuda_engine"
timeout 200 $B/test_cuda_engine 2>&1 | tee $OUT/test_cuda_engine.log | grep -E "PASS|FAIL|SKIP|QINFO|Totals|Loc|QWARN"
echo "=== compute-sanitizer"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_engine nonSpdPatchesBehaveLikeCpu \
  wholeRequestWithItsPlan 2>&1 | tee $OUT/memcheck.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck engine rc ${PIPESTATUS[0]}"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_staging blockUploadsWithAnEventPerBlock 2>&1 \
  | tee $OUT/memcheck_staging.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck staging rc ${PIPESTATUS[0]}"
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_engine nonSpdPatchesBehaveLikeCpu 2>&1 \
  | tee $OUT/racecheck.log | grep -E "ERROR SUMMARY|RACE|PASS|FAIL|Totals"; echo "racecheck rc ${PIPESTATUS[0]}"
