#!/usr/bin/env bash
# Issue 12, ninth round, the lead's second check (from the bundle folder): main with
# every branch of the round (eighns, eighval, eighred, eighvec, cpu13, cpu14) and the
# shared-memory vector kernel as the default. eighvec's A/B (bit-for-bit slot, frame
# timings, sanitizers), the frame-sized eigensolver three ways, the suites the round
# touched, CPU vs CUDA through files, the warm frame alternating the vector kernels,
# one patch, and a kernel-profile trace of the warm frame (docs/profiling.md). ~330 s.
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
echo "=== test_batched_eigh: vectors bit for bit, accuracy with shared vectors, the frame three ways"; el
timeout 60 $B/test_batched_eigh sharedVectorsMatchGlobalToTheBit "bisectMatchesLapack:divfree, shared vectors" \
  bisectMatchesLapack bisectOrthoMethodsAgree warpReduceMatchesLapack 2>&1 | tee $OUT/eigh_slots.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
timeout 90 $B/test_batched_eigh warpReduceFrameTimed 2>&1 | tee $OUT/eigh_frame3.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
SPEXLAB_EIGH_TIMED_VECTORS=1 timeout 60 $B/test_batched_eigh bisectFrameTimed 2>&1 | tee $OUT/eigh_vecab.log \
  | grep -E "PASS|FAIL|Totals|Loc|23500"
echo "=== sanitizers"; el
for tool in memcheck racecheck; do
  SPEXLAB_EIGH_SANITIZE=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 \
    $B/test_batched_eigh sharedVectorsMatchGlobalToTheBit 2>&1 \
    | tee $OUT/$tool-eighvec.log | grep -E "ERROR SUMMARY|RACE|Totals"; echo "$tool eighvec rc ${PIPESTATUS[0]}"
done
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_engine subsetAndSmallBatchesMatch nonSpdPatchesBehaveLikeCpu 2>&1 \
  | tee $OUT/memcheck_engine.log | grep -E "ERROR SUMMARY|Totals"; echo "memcheck engine rc ${PIPESTATUS[0]}"
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_engine subsetAndSmallBatchesMatch 2>&1 \
  | tee $OUT/racecheck_engine.log | grep -E "ERROR SUMMARY|RACE|Totals"; echo "racecheck engine rc ${PIPESTATUS[0]}"
echo "=== test_cuda_engine (shared vectors the default)"; el
timeout 150 $B/test_cuda_engine 2>&1 | tee $OUT/test_cuda_engine.log | grep -E "PASS|FAIL|Totals|Loc|pull"
echo "=== cold, CPU vs CUDA through files"; el
bash ./run.sh cold 2>&1 | tail -14
echo "=== one stream, kernel profile, vectors new / old"; el
for k in new old; do echo "vectors $k, 1 stream:"
  SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_EIGH_VECTORS=$k timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF \
    --repeat 5 --profile-kernels > $OUT/bench1_vec_$k.txt 2>&1
  grep -E "^wall|^eigh|syev|Sturm|^device" $OUT/bench1_vec_$k.txt | head -12
done
echo "=== warm frame, bench --repeat 7, vectors new / old alternating"; el
for r in 1 2 3; do for k in new old; do echo "vectors $k:"
  SPEXLAB_CUDA_EIGH_VECTORS=$k timeout 30 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 2>&1 | grep -E "^wall|peak"
done; done
echo "=== bench --repeat 5 --ceilings, one patch"; el
timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --ceilings 2>&1 | tail -22
bash ./run.sh onepatch 2>&1 | tail -12
echo "=== kernel-profile trace of the warm frame"; el
timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 3 --profile-kernels --profile $OUT/trace-warm.json 2>&1 | grep -E "^wall|device 0"
echo "=== cold extract processes (three more)"; el
for i in 1 2 3; do
  s=$(date +%s%N); $B/spexlab-cli extract -i $D/frame/preproc.fits -p $D/frame/psf.fits -o $D/frame/frame-cold$i.fits \
    -w 5760,7620,0.8 --engine cuda > $OUT/cold$i.log 2>&1; echo "cold $i rc $? process wall: $(( ($(date +%s%N) - s) / 1000000 )) ms"
done
el
