#!/usr/bin/env bash
# Issue 12, ninth round (eighval), from the bundle folder: the eigenvalues of the
# bisection method in a kernel of their own on the division-free Sturm count
# (SPEXLAB_CUDA_EIGH_VALUES=divfree, the default; newton: Newton's steps once isolated)
# against the eighth round's ratio count inside the vector kernel (ratio).
# test_batched_eigh (its bisectFrameTimed slot: 23 500 blocks and the engine's batch
# sizes, chain / ratio / division-free / Newton alternating), compute-sanitizer memcheck
# and racecheck of the values kernels, one stream with the kernel profile per value
# path, the warm frame alternating. Argument "engine": then test_cuda_engine whole.
cd "$(dirname "$0")"
D=/tmp/dev
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
bash ./run.sh gpu eigh
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export SPEXLAB_TEST_DATA=$D/data QT_QPA_PLATFORM=offscreen PATH=/usr/local/cuda/bin:$PATH
B=$D/bin
PSF=$D/data/psf-r0-00067784.fits
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/test_batched_eigh bisectAgreesWithChain 2>&1 \
    | tee $OUT/$tool-eighval.log | grep -E "ERROR SUMMARY|RACE|Totals"; echo "$tool rc ${PIPESTATUS[0]}"
done
for k in newton divfree ratio; do echo "=== values $k, 1 stream, kernel profile"
  SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_EIGH_VALUES=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 \
    --profile-kernels 2>&1 | tee $OUT/prof-$k.txt | grep -E "^wall|syev|eigh|kernels"
done
echo "=== warm frame, bench --repeat 7, newton, divfree and ratio alternating"
for r in 1 2; do for k in newton ratio divfree; do echo "values $k:"
  SPEXLAB_CUDA_EIGH_VALUES=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 2>&1 | grep -E "^wall|peak"
done; done
if [ "${1:-}" = engine ]; then bash ./run.sh engine; fi
