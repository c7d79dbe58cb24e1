#!/usr/bin/env bash
# Issue 12, eighth round (kept results), second check: the engine suite on the final
# code, the warm-frame A/B (SPEXLAB_CUDA_KEEPRESULT=0, 1 alternating), and `batch` of 6
# identical frames with each setting (frames 3-6 of the kept run extract into the
# result of a frame written before): every frame compared with the first and with the
# other setting's; compute-sanitizer on the engine's whole-request tests.
cd "$(dirname "$0")"
D=/tmp/dev
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
bash ./run.sh gpu
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export SPEXLAB_TEST_DATA=$D/data QT_QPA_PLATFORM=offscreen PATH=/usr/local/cuda/bin:$PATH
B=$D/bin
PSF=$D/data/psf-r0-00067784.fits
echo "=== A/B: bench --repeat 7, SPEXLAB_CUDA_KEEPRESULT=0 (old) and 1 (new), alternating"
for k in 0 1 0 1; do
  echo "keepresult $k:"; SPEXLAB_CUDA_KEEPRESULT=$k timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 --json 2>/dev/null \
    > $OUT/bench_keep$k.$RANDOM.json; python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('walls', ' '.join('%.4f'%w for w in j['walls_s']), 'median %.4f'%j['median_s'])" $(ls -t $OUT/bench_keep$k.*.json | head -1)
done
echo "=== batch of 6 identical frames, SPEXLAB_CUDA_KEEPRESULT=1 then 0"
for k in 1 0; do
  SPEXLAB_CUDA_KEEPRESULT=$k SPEXLAB_PSF=$PSF timeout 60 bash ./bench-batch.sh -N 6 --cli $B/spexlab-cli --dir $D/bb$k \
    -- --engine cuda --gpus 0 > $OUT/batch$k.txt 2>&1; echo "keepresult $k rc $?"; grep -E "frames ok|frames/hour|extract" $OUT/batch$k.txt | head -12
  [ -d $D/bb1/sim ] && [ ! -d $D/bb0/sim ] && mkdir -p $D/bb0 && cp -r $D/bb1/sim $D/bb0/sim
done
for i in 2 3 4 5 6; do
  $B/spexlab-cli compare $D/bb1/out/frame-p1-1.fits $D/bb1/out/frame-p1-$i.fits > $OUT/cmp1-$i.txt 2>&1
  echo "kept frame $i vs frame 1: $(grep -E 'max \|fa-fb\||bins with different MASK|max \|Ra' $OUT/cmp1-$i.txt | tr -s ' ' | tr '\n' ';')"
done
$B/spexlab-cli compare $D/bb0/out/frame-p1-6.fits $D/bb1/out/frame-p1-6.fits > $OUT/cmp01.txt 2>&1
echo "frame 6 kept vs new arrays: $(grep -E 'max \|fa-fb\||bins with different MASK|max \|Ra' $OUT/cmp01.txt | tr -s ' ' | tr '\n' ';')"
echo "=== test_cuda_engine"
timeout 100 $B/test_cuda_engine 2>&1 | tee $OUT/test_cuda_engine.log | grep -E "^PASS|^FAIL|Totals|Loc|keptResult|overlappedEnds|plannedAhead|kernelProfileMatchesPhases\(\) [12] stream|pulls mean"
echo "=== compute-sanitizer"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_engine nonSpdPatchesBehaveLikeCpu \
  wholeRequestWithItsPlan 2>&1 | tee $OUT/memcheck.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck engine rc ${PIPESTATUS[0]}"
