#!/usr/bin/env bash
# Issue 12, eighth round, the lead's second check (from the bundle folder): main with
# the bisection eigensolver as the default. The suites it touches and the sanitizers,
# the cold process and CPU vs CUDA through files, the warm frame alternating the
# default and SPEXLAB_CUDA_EIGH=tridiagonal (the QL chain), one patch, and a
# kernel-profile trace of the warm frame (docs/profiling.md's screenshots).
cd "$(dirname "$0")"
D=/tmp/dev
OUT=${OUT:-/tmp/out}
mkdir -p $OUT
bash ./run.sh gpu eigh engine memcheck cold onepatch kernels racecheck
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export SPEXLAB_TEST_DATA=$D/data QT_QPA_PLATFORM=offscreen PATH=/usr/local/cuda/bin:$PATH
B=$D/bin
PSF=$D/data/psf-r0-00067784.fits
echo "=== warm frame, bench --repeat 7: default (bisect) and SPEXLAB_CUDA_EIGH=tridiagonal alternating"
for r in 1 2 3; do for k in "" tridiagonal; do echo "eigh ${k:-default}:"
  SPEXLAB_CUDA_EIGH=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 2>&1 | grep -E "^wall|peak"
done; done
echo "=== bench --repeat 5 --ceilings (default)"
timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --ceilings 2>&1 | tail -25
echo "=== kernel-profile trace of the warm frame"
timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 3 --profile-kernels --profile $OUT/trace-warm.json 2>&1 | grep -E "^wall|device 0"
echo "=== cold extract processes (three more)"
for i in 1 2 3; do
  s=$(date +%s%N); $B/spexlab-cli extract -i $D/frame/preproc.fits -p $D/frame/psf.fits -o $D/frame/frame-cold$i.fits \
    -w 5760,7620,0.8 --engine cuda > $OUT/cold$i.log 2>&1; echo "cold $i rc $? process wall: $(( ($(date +%s%N) - s) / 1000000 )) ms"
done
