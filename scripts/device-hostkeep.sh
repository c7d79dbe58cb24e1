#!/usr/bin/env bash
# Issue 12, eighth round (kept results): the checks of one GPU call, run from the bundle
# folder (docs/benchmarks.md, "Issue 12, eighth round"). run.sh unpacks the bundle and runs
# `gpu staging`; then the warm frame with SPEXLAB_CUDA_KEEPRESULT=0 (the old path, A: new
# host arrays every frame) and 1 (B: the kept result written in place), one process
# each, alternating; a plain and a kernel-profile trace of each with its ends; the
# engine suite, the cold process and compute-sanitizer (run.sh engine cold memcheck).
cd "$(dirname "$0")"
D=/tmp/dev
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
bash ./run.sh gpu staging
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export SPEXLAB_TEST_DATA=$D/data QT_QPA_PLATFORM=offscreen PATH=/usr/local/cuda/bin:$PATH
B=$D/bin
PSF=$D/data/psf-r0-00067784.fits
echo "=== A/B: bench --repeat 7, SPEXLAB_CUDA_KEEPRESULT=0 (old) and 1 (new), alternating"
for k in 0 1 0 1; do
  echo "keepresult $k:"; SPEXLAB_CUDA_KEEPRESULT=$k timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 --json 2>/dev/null \
    > $OUT/bench_keep$k.$RANDOM.json; python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('walls', ' '.join('%.4f'%w for w in j['walls_s']), 'median %.4f'%j['median_s'])" $(ls -t $OUT/bench_keep$k.*.json | head -1)
done
echo "=== traces (bench --repeat 3 --profile, last run) and their ends"
for k in 0 1; do
  echo "keepresult $k:"; SPEXLAB_CUDA_KEEPRESULT=$k timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 3 --quiet \
    --profile $OUT/trace$k.json > $OUT/bench_trace$k.txt 2>&1; grep -E "^wall" $OUT/bench_trace$k.txt
  python3 ./trace-summary.py $OUT/trace$k.json > $OUT/trace$k.summary.txt; grep -E " plan$|allocate|clear|finalize|assemble|ends:|wall" $OUT/trace$k.summary.txt
  python3 ./trace-tail.py $OUT/trace$k.json 6 0
done
echo "=== kernel profile: occupancy and ends"
for k in 0 1; do
  echo "keepresult $k:"; SPEXLAB_CUDA_KEEPRESULT=$k timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 3 \
    --profile-kernels --profile $OUT/tracek$k.json > $OUT/bench_kernels$k.txt 2>&1
  grep -E "^wall|over the|busy|idle" $OUT/bench_kernels$k.txt | head -6
  python3 ./trace-summary.py $OUT/tracek$k.json > $OUT/tracek$k.summary.txt; grep -E " plan$|allocate|clear|ends:|wall" $OUT/tracek$k.summary.txt
  python3 ./trace-tail.py $OUT/tracek$k.json 6 0
done
echo "=== test_cuda_engine (kept result first)"
timeout 25 $B/test_cuda_engine keptResultMatchesToTheBit 2>&1 | tee $OUT/test_kept.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
bash ./run.sh engine cold memcheck
