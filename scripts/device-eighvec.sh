#!/usr/bin/env bash
# Issue 12, ninth round (eighvec), from the bundle folder (cp scripts/device-eighvec.sh
# .device/; bash .device/device-eighvec.sh): pass 2's vectors with D+/D- in shared memory
# (SPEXLAB_CUDA_EIGH_VECTORS=new, SyevVectors::Shared, syevBisectSharedKernel) against
# the workspace kernel (old, syevBisectKernel). test_batched_eigh: the bit-for-bit slot,
# the accuracy rows with shared vectors, bisectFrameTimed's A/B (SPEXLAB_EIGH_TIMED_VECTORS=1:
# default vs shared alternating, 23 500 / 1 235 / 995 blocks); compute-sanitizer memcheck
# and racecheck of the small bit-for-bit slot (SPEXLAB_EIGH_SANITIZE=1); one stream with
# the kernel profile, new and old. ~60-90 s.
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
echo "=== test_batched_eigh: bit for bit, accuracy with shared vectors, frame A/B"; el
timeout 60 $B/test_batched_eigh sharedVectorsMatchGlobalToTheBit "bisectMatchesLapack:divfree, shared vectors" \
  2>&1 | tee $OUT/eighvec_slots.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
SPEXLAB_EIGH_TIMED_VECTORS=1 timeout 60 $B/test_batched_eigh bisectFrameTimed 2>&1 | tee $OUT/eighvec_frame.log \
  | grep -E "PASS|FAIL|QINFO|Totals|Loc"
echo "=== memcheck, racecheck (sharedVectorsMatchGlobalToTheBit, SPEXLAB_EIGH_SANITIZE=1)"; el
for tool in memcheck racecheck; do
  SPEXLAB_EIGH_SANITIZE=1 timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 \
    $B/test_batched_eigh sharedVectorsMatchGlobalToTheBit 2>&1 \
    | tee $OUT/$tool-eighvec.log | grep -E "ERROR SUMMARY|RACE|Totals"; echo "$tool rc ${PIPESTATUS[0]}"
done
echo "=== one stream, kernel profile, SPEXLAB_CUDA_EIGH_VECTORS=new / old"; el
for k in new old; do echo "vectors $k, 1 stream:"
  SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_EIGH_VECTORS=$k timeout 40 $B/spexlab-cli bench --engine cuda --psf $PSF \
    --repeat 3 --profile-kernels > $OUT/bench1_vec_$k.txt 2>&1
  grep -E "^wall|^eigh|syev|Sturm|^device" $OUT/bench1_vec_$k.txt | head -20
done
el
