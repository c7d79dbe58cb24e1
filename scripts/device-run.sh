#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool), from .device/: unpacks the
# bundle made by scripts/device-bundle.sh and runs the named steps, logs under $OUT.
#   gpu     nvidia-smi summary          psf     test_device_psf
#   eigh    test_batched_eigh (syevBatched against LAPACK dsyevd)
#   chol    test_batched_cholesky (block-banded Cholesky and L^-1 against LAPACK dpotrf/dtrtri)
#   fiber   test_batched_fiber_blocks (fiber blocks of X^T X against a host product)
#   selinv  test_batched_selected_inverse (selected inversion and banded solve against LAPACK
#           dpotrf/dpotrs and the CPU's BandedCholesky::selectedInverse)
#   gemm    test_batched_gemm (the engine's tensor-core batched GEMM against a long-double host product)
#   gemmab  warm medians with SPEXLAB_CUDA_GEMM=tensor|cublas, alternating, then one stream each
#           with the kernel profile (phase rows and the GEMM kernels' rows)
#   coldgemm  cold `extract --engine cuda` processes, tensor (default) and cublas (with its
#           warm-up) alternately, 4 each, trace summaries (trace-summary.py), frames compared
#   invab   warm medians with SPEXLAB_CUDA_INVERSE=selected|full (selected inversion or L^-1
#           whole), alternating, then one stream each (phase times)
#   staging test_staging (pinned-ring uploads/downloads; frame-sized copy times)
#   eighab  warm median with each fiber-block eigensolver (SPEXLAB_CUDA_EIGH), same process order
#   engine  test_cuda_engine (CUDA vs CPU, pulls, non-SPD, subsets)
#   cold    simulate a full r frame to files, then one cold `extract --engine cuda`
#           (new process: CUDA init, FITS read, extraction, FITS write) and a CPU
#           extraction of the same files with all cores, then `compare`
#   coldab  cold `extract --engine cuda` processes, this build against spexlab-cli-main (main's
#           build, bundled as an extra binary) alternately, with `--help` and trace summaries
#           (docs/benchmarks.md, "Cold process"); SPEXLAB_CUDA_RESERVE=0 and
#           SPEXLAB_DETACHED_EXIT=0; CPU-engine processes; the driver's own start-up
#           through python ctypes; main's frame against this build's, byte for byte
#   memcheck2 compute-sanitizer memcheck on test_cuda_engine wholeRequestWithItsPlan and
#           accumulateFillsModelTilesLikeCpu
#   onepatch  bench --one-patch 100 (one patch per request, warm engine): CUDA, CUDA with the
#           model tiles, the CPU engine
#   pack    everything under $OUT into one logs.tgz (the device tool brings back 8 files)
#   bench   spexlab-cli bench --engine cuda --repeat 5 (warm median) and --json
#   streams the warm median with 1, 3 and 4 streams, and with the Jacobi kernel
#   budgets the warm median and peak memory by device-memory budget and batch size
#           (SPEXLAB_CUDA_MEMORY, SPEXLAB_CUDA_BATCH; the default is 4 GiB)
#   bench1  bench on GPU 0 only (--gpus 0); bench2 over GPUs 0 and 1 (--gpus 0,1)
#   memcheck / racecheck   compute-sanitizer on the small engine tests
#   cholab  warm medians with SPEXLAB_CUDA_CHOLESKY=tiled|fused|blocked (block columns by one
#           kernel, diagonal block by tiles or in one sweep, or by four launches), alternating,
#           then one stream each (phase times), and racecheck of test_batched_cholesky
#           notPositiveDefiniteFusedAndSteps and everyBandwidth (tiled, partial tiles)
#   cholprof  per-launch device time of the block-column kernel by block column (kernel trace of
#             one extract, one stream, tiled and fused twice)
#   raceeigh  compute-sanitizer racecheck on syevBatched (three workspace sizes)
#   normab  warm medians with SPEXLAB_CUDA_NORMAL=pairs|scan (the pair-list normal equations
#           or the older kernel), two streams alternating, then one stream each with the
#           kernel profile (the normal-equations rows and the occupancy line), then
#           test_cuda_engine normalEquationKernelsAgree and racecheck/memcheck of the pair kernel
#   norm2ab warm medians (bench --repeat 7) alternating SPEXLAB_CUDA_NORMAL=tile|pairs with
#           SPEXLAB_CUDA_SPOTS=warp|block (tile warp, pairs block, pairs warp), two streams, then
#           one stream each with the kernel profile; test_cuda_engine normalEquationKernelsAgree,
#           test_device_psf spotKernelsAgreeToTheBit; racecheck and memcheck of both new kernels
#   selinv3ab warm medians (bench --repeat 7) alternating SPEXLAB_CUDA_SELINV=fused|steps, two
#           passes, then one stream each with the kernel profile; test_cuda_engine
#           fusedSelectedInverseMatchesSteps; racecheck of the fused selected inversion
#   norm3ab warm medians (bench --repeat 5) alternating SPEXLAB_CUDA_NORMAL=lean|pairs (and other
#           builds of the lean kernel bundled as spexlab-cli-NAME), two streams, two passes, then
#           one stream each with the kernel profile; test_cuda_engine normalEquationKernelsAgree;
#           memcheck of the lean kernel
#   norm3x  racecheck of the lean kernel; Nsight Compute's warp-instruction count of one
#           normal-equations launch of each variant of norm3ab (where ncu is there)
#   norm5ab warm medians (bench --repeat 7) alternating SPEXLAB_CUDA_NORMAL=tree|lean, two
#           streams, two passes; one stream each with the kernel profile (--repeat 5);
#           test_cuda_engine normalEquationKernelsAgree; memcheck of the tree kernel (the default)
#   norm5x  racecheck of the tree kernel; Nsight Compute's warp-instruction count of one
#           normal-equations launch, tree and lean (where ncu is there)
#   solverab  warm medians with SPEXLAB_CUDA_SOLVER=auto|dense (block band or dense), two
#             streams alternating, then one stream each (phase times)
#   guisel  spexlab-bench-gui's 6-patch selection, CUDA (warm) then CPU engine (bundle it:
#           scripts/device-bundle.sh build build/app/gui/spexlab-bench-gui)
#   gui     the workbench offscreen on the frame of `cold` (made if missing): CPU vs
#           CUDA on the whole frame, twice in one process, screenshot + tables
#   ceilings  spexlab-cli bench --ceilings alone (cuBLAS DGEMM/cuSOLVER rates)
#   kernels   the kernel profile (CUPTI): test_cuda_engine kernelProfileMatchesPhases (kernels
#             vs phase device times, one and two streams), the warm median of bench with and
#             without --profile-kernels (its cost), and a Chrome trace with kernels of one
#             `extract --profile-kernels` on the frame of `cold` (made if missing)
#   batch20   spexlab-cli batch of 20 full r frames on GPU 0, IO overlapped: frames/hour,
#             summary table, trace batch-1.json (bench-batch.sh)
#   procs5    5 batch processes at once on GPU 0 (4 frames each, --gpu-memory 0.15):
#             aggregate frames/hour and each process's peak device memory, no MPS
#   procs5mps the same under CUDA MPS (control daemon started and stopped here)
#   multi   several GPUs (issue 15): one frame over 1 and all GPUs, 40-frame batches a GPU and shared
cd "$(dirname "$0")"
D=/tmp/dev
mkdir -p $D && tar -xJf stage.tar.xz -C $D || exit 1
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export SPEXLAB_TEST_DATA=$D/data QT_QPA_PLATFORM=offscreen PATH=/usr/local/cuda/bin:$PATH
export QT_PLUGIN_PATH=$D/plugins FONTCONFIG_FILE=$D/fonts.conf XDG_RUNTIME_DIR=/tmp/xdg-run
B=$D/bin
PSF=$D/data/psf-r0-00067784.fits
OUT=${OUT:-/tmp/out}
# Wall time of a whole process (GNU time is not always installed there).
walltime() {
  local s=$(date +%s%N) rc
  "$@"; rc=$?
  echo "process wall: $(( ($(date +%s%N) - s) / 1000000 )) ms"
  return $rc
}
mkdir -p "$OUT"
for step in "$@"; do
  echo "=== $step"
  case $step in
    gpu) nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv | tee $OUT/gpu.txt
         ldd $B/test_cuda_engine | grep "not found" ;;
    psf) timeout 120 $B/test_device_psf 2>&1 | tee $OUT/test_device_psf.log | grep -E "PASS|FAIL|SKIP|QINFO|Totals|Loc" ;;
    chol) timeout 120 $B/test_batched_cholesky 2>&1 | tee $OUT/test_batched_cholesky.log | grep -E "PASS|FAIL|SKIP|QINFO|Totals|Loc" ;;
    eigh) timeout 120 $B/test_batched_eigh 2>&1 | tee $OUT/test_batched_eigh.log | grep -E "PASS|FAIL|SKIP|QINFO|Totals|Loc" ;;
    selinv) timeout 120 $B/test_batched_selected_inverse 2>&1 | tee $OUT/test_batched_selected_inverse.log | grep -E "PASS|FAIL|SKIP|QINFO|Totals|Loc" ;;
    invab) for k in selected full selected full; do echo "inverse $k:"; SPEXLAB_CUDA_INVERSE=$k timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 2>&1 \
               | tee $OUT/bench_inverse_$k.txt | grep -E "^wall|^cholesky|^inverse|^banded solve|^fiber blocks|^solve|^eigh|^decorrelate|memory:|batch"; done
           echo "one stream:"; for k in selected full; do echo "inverse $k, 1 stream:"; SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_INVERSE=$k timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 2>&1 \
               | tee $OUT/bench_inverse1_$k.txt | grep -E "^wall|^cholesky|^inverse|^banded solve|^fiber blocks|^solve|^eigh|^decorrelate|^normal|^chi2|^diagonal|^panel|^trailing"; done ;;
    gemm) timeout 200 $B/test_batched_gemm 2>&1 | tee $OUT/test_batched_gemm.log | grep -E "PASS|FAIL|SKIP|QINFO|Totals|Loc" ;;
    gemmab) for k in tensor cublas tensor cublas; do echo "gemm $k:"; SPEXLAB_CUDA_GEMM=$k timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 2>&1 \
               | tee $OUT/bench_gemm_$k.txt | grep -E "^wall|^cholesky|^fiber blocks|^solve|^decorrelate|memory:"; done
            for k in tensor cublas tensor cublas; do echo "gemm $k, 1 stream, kernel profile:"; SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_GEMM=$k timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --profile-kernels 2>&1 \
               | tee $OUT/bench_gemm1_$k.txt | grep -E "^wall|^cholesky|^fiber blocks|^trailing|^block column|^banded|^solve|^decorrelate|^eigh|^normal|^  .*([Gg]emm|cutlass|sm[89]0_|selectedDiag)|^device [0-9]"; done ;;
    coldgemm) mkdir -p $D/frame
            [ -f $D/frame/preproc.fits ] || $B/spexlab-cli simulate -o $D/frame --psf $PSF -w 5760,7620,0.8 > $OUT/simulate.log 2>&1
            for k in 1 2 3 4; do for g in tensor cublas; do
              s=$(date +%s%N)
              SPEXLAB_CUDA_GEMM=$g $B/spexlab-cli extract -i $D/frame/preproc.fits -p $D/frame/psf.fits -o $D/frame/frame-$g$k.fits \
                -w 5760,7620,0.8 --engine cuda --profile $OUT/coldgemm-$g$k.json > $OUT/coldgemm-$g$k.log 2>&1
              w=$(( ($(date +%s%N) - s) / 1000000 ))
              echo "--- $g$k: process wall: $w ms"; grep patches $OUT/coldgemm-$g$k.log; python3 ./trace-summary.py $OUT/coldgemm-$g$k.json $w
            done; done
            $B/spexlab-cli compare $D/frame/frame-cublas1.fits $D/frame/frame-tensor1.fits 2>&1 | tail -4 ;;
    fiber) timeout 120 $B/test_batched_fiber_blocks 2>&1 | tee $OUT/test_batched_fiber_blocks.log | grep -E "PASS|FAIL|SKIP|QINFO|Totals|Loc" ;;
    staging) timeout 120 $B/test_staging 2>&1 | tee $OUT/test_staging.log | grep -E "PASS|FAIL|SKIP|QINFO|Totals|Loc" ;;
    eighab) for k in tridiagonal cusolver tridiagonal cusolver; do echo "eigh $k:"; SPEXLAB_CUDA_EIGH=$k timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 2>&1 \
               | tee $OUT/bench_eigh_$k.txt | grep -E "^wall|^eigh|^decorrelate|peak|memory:"; done ;;
    engine) timeout 400 $B/test_cuda_engine 2>&1 | tee $OUT/test_cuda_engine.log | grep -E "PASS|FAIL|SKIP|QINFO|Totals|Loc|QWARN" ;;
    cold) mkdir -p $D/frame
          [ -f $D/frame/preproc.fits ] || $B/spexlab-cli simulate -o $D/frame --psf $PSF -w 5760,7620,0.8 > $OUT/simulate.log 2>&1
          walltime $B/spexlab-cli extract -i $D/frame/preproc.fits -p $D/frame/psf.fits -o $D/frame/frame-cuda.fits \
             -w 5760,7620,0.8 --engine cuda --profile $OUT/trace-cuda.json > $OUT/cold-cuda.log 2>&1
          tail -8 $OUT/cold-cuda.log
          walltime $B/spexlab-cli extract -i $D/frame/preproc.fits -p $D/frame/psf.fits -o $D/frame/frame-cpu.fits \
             -w 5760,7620,0.8 --engine cpu --profile $OUT/trace-cpu.json > $OUT/cold-cpu.log 2>&1
          tail -4 $OUT/cold-cpu.log
          $B/spexlab-cli compare $D/frame/frame-cpu.fits $D/frame/frame-cuda.fits 2>&1 | tee $OUT/compare-cpu-cuda.txt ;;
    coldab) # Cold processes, this build against spexlab-cli-main (main's build, bundled as an
            # extra binary) alternately, 3 each, then the warm-up off twice: `--help`
            # (process start and exit alone) and a whole extract, its trace summed up
            # (trace-summary.py; "outside the trace" = process start + exit).
            mkdir -p $D/frame
            [ -f $D/frame/preproc.fits ] || $B/spexlab-cli simulate -o $D/frame --psf $PSF -w 5760,7620,0.8 > $OUT/simulate.log 2>&1
            cold1() { # tag binary [env...]
              local tag=$1 c=$2 s w; shift 2
              s=$(date +%s%N); env "$@" $c --help > /dev/null; echo "--- $tag: --help $(( ($(date +%s%N) - s) / 1000000 )) ms"
              s=$(date +%s%N)
              env "$@" $c extract -i $D/frame/preproc.fits -p $D/frame/psf.fits -o $D/frame/frame-$tag.fits \
                -w 5760,7620,0.8 --engine cuda --profile $OUT/cold-$tag.json > $OUT/cold-$tag.log 2>&1
              w=$(( ($(date +%s%N) - s) / 1000000 ))
              echo "process wall: $w ms"; grep patches $OUT/cold-$tag.log; python3 ./trace-summary.py $OUT/cold-$tag.json $w
            }
            for k in 1 2 3; do
              [ -x $B/spexlab-cli-main ] && cold1 main$k $B/spexlab-cli-main
              cold1 new$k $B/spexlab-cli
            done
            # This build with the workspaces allocated after the image's upload
            # (SPEXLAB_CUDA_RESERVE=0) and with the process's own teardown
            # (SPEXLAB_DETACHED_EXIT=0), twice each, between more runs of this build
            # (docs/benchmarks.md, "Issue 12, fifth round").
            cold1 noreserve1 $B/spexlab-cli SPEXLAB_CUDA_RESERVE=0
            cold1 new4 $B/spexlab-cli
            cold1 nodetach1 $B/spexlab-cli SPEXLAB_DETACHED_EXIT=0
            cold1 new5 $B/spexlab-cli
            cold1 noreserve2 $B/spexlab-cli SPEXLAB_CUDA_RESERVE=0
            cold1 nodetach2 $B/spexlab-cli SPEXLAB_DETACHED_EXIT=0
            cold1 new6 $B/spexlab-cli
            for k in 1 2; do s=$(date +%s%N); $B/spexlab-cli extract -i $D/frame/preproc.fits -p $D/frame/psf.fits -o $D/frame/frame-np.fits \
                -w 5760,7620,0.8 --engine cuda > $OUT/cold-noprofile-$k.log 2>&1
              echo "--- new without --profile: process wall $(( ($(date +%s%N) - s) / 1000000 )) ms"; grep patches $OUT/cold-noprofile-$k.log; done
            for k in 1 2; do for v in main new; do c=$B/spexlab-cli; [ $v = main ] && c=$B/spexlab-cli-main; [ -x $c ] || continue
              s=$(date +%s%N); $c extract -i $D/frame/preproc.fits -p $D/frame/psf.fits -o $D/frame/frame-cpu-$v.fits \
                -w 5760,7620,0.8 -n 5 --engine cpu > /dev/null 2>&1
              echo "--- cpu engine (5 fibers), $v: process wall $(( ($(date +%s%N) - s) / 1000000 )) ms"; done; done
            # The driver alone (python ctypes): cuInit, the primary context, and opening
            # cuBLAS + cuSOLVER, in both orders.
            for order in driver-first libs-first; do python3 - $order <<'PYEOF'
import ctypes, sys, time
t = [time.perf_counter()]
def mark(): t.append(time.perf_counter())
def libs():
    ctypes.CDLL("libcublas.so.13"); ctypes.CDLL("libcusolver.so.12")
if sys.argv[1] == "libs-first": libs(); mark()
rt = ctypes.CDLL("libcudart.so.13"); n = ctypes.c_int(); rt.cudaGetDeviceCount(ctypes.byref(n)); mark()
rt.cudaSetDevice(0); rt.cudaFree(None); mark()
if sys.argv[1] == "driver-first": libs(); mark()
d = [1e3 * (b - a) for a, b in zip(t, t[1:])]
names = (["open cuBLAS+cuSOLVER"] if sys.argv[1] == "libs-first" else []) + ["cudart + cuInit", "primary context"] + (["open cuBLAS+cuSOLVER"] if sys.argv[1] == "driver-first" else [])
print("driver alone (%s): " % sys.argv[1] + ", ".join("%s %.1f ms" % (k, v) for k, v in zip(names, d)))
PYEOF
            done
            $B/spexlab-cli compare $D/frame/frame-main1.fits $D/frame/frame-new1.fits 2>&1 | tail -3
            # Same bytes as main's frame apart from the checksum cards (their dates)?
            [ -f $D/frame/frame-main1.fits ] && python3 - $D/frame/frame-main1.fits $D/frame/frame-new1.fits <<'PYEOF'
import sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
cards = [a[i:i + 80] for i in range(0, min(len(a), len(b)), 80) if a[i:i + 80] != b[i:i + 80]]
other = [c for c in cards if not (c.startswith(b"CHECKSUM=") or c.startswith(b"DATASUM ="))]
print("frame bytes main vs new: sizes %d %d, %d cards differ, %d of them not CHECKSUM/DATASUM" % (len(a), len(b), len(cards), len(other)))
for c in other[:5]: print("  ", c)
PYEOF
            ;;
    memcheck2) # compute-sanitizer memcheck on the engine tests of cold2's paths: a whole
               # request with its plan (spot table over the plan's range, the PSF kept on a
               # warm engine) and the accumulated selections
               timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_engine wholeRequestWithItsPlan accumulateFillsModelTilesLikeCpu 2>&1 \
                 | tee $OUT/memcheck2.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck2 rc ${PIPESTATUS[0]}" ;;
    onepatch) # One patch per request on a warm engine (bench --one-patch): CUDA, with and
              # without the model tiles, then the CPU engine on every core, on the full r frame.
              timeout 150 $B/spexlab-cli bench --engine cuda --psf $PSF --one-patch 100 2>&1 | tee $OUT/onepatch-cuda.txt
              timeout 150 $B/spexlab-cli bench --engine cuda --psf $PSF --one-patch 100 -m 2>&1 | tee $OUT/onepatch-cuda-model.txt | head -5
              timeout 150 $B/spexlab-cli bench --engine cpu --psf $PSF --one-patch 100 2>&1 | tee $OUT/onepatch-cpu.txt ;;
    pack) # everything under $OUT into one archive (the device tool brings back 8 files)
          (cd $OUT && tar czf /tmp/logs.tgz . && rm -rf ./* && mv /tmp/logs.tgz ./) ;;
    bench) timeout 300 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --ceilings 2>&1 | tee $OUT/bench.txt
           timeout 300 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --json > $OUT/bench.json 2>&1 ;;
    streams) for k in 1 3 4; do echo "streams $k:"; SPEXLAB_CUDA_STREAMS=$k timeout 200 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --quiet 2>&1 \
               | tee $OUT/bench_streams$k.txt | grep -E "^wall|peak"; done
             echo "jacobi kernel:"; SPEXLAB_CUDA_EIGH=jacobi timeout 200 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --quiet 2>&1 \
               | tee $OUT/bench_jacobi.txt | grep -E "^wall" ;;
    budgets) for mb in 2G:0 16G:0 16G:512 32G:1175; do m=${mb%:*} b=${mb#*:}; echo "budget $m batch ${b/#0/default}:"
               SPEXLAB_CUDA_MEMORY=$m SPEXLAB_CUDA_BATCH=${b/#0/} timeout 120 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 2>&1 \
               | tee $OUT/bench_budget_${m}_$b.txt | grep -E "^wall|peak|memory:"; done ;;
    bench1) timeout 300 $B/spexlab-cli bench --engine cuda --gpus 0 --psf $PSF --repeat 5 2>&1 | tee $OUT/bench1.txt ;;
    bench2) timeout 300 $B/spexlab-cli bench --engine cuda --gpus 0,1 --psf $PSF --repeat 5 2>&1 | tee $OUT/bench2.txt ;;
    memcheck) timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_engine subsetAndSmallBatchesMatch nonSpdPatchesBehaveLikeCpu accumulateFillsModelTilesLikeCpu 2>&1 \
                | tee $OUT/memcheck.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck rc ${PIPESTATUS[0]}"
              timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_batched_eigh otherSizesAndStrides 2>&1 \
                | tee $OUT/memcheck_eigh.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck eigh rc ${PIPESTATUS[0]}"
              timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_batched_cholesky 2>&1 \
                | tee $OUT/memcheck_chol.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck cholesky rc ${PIPESTATUS[0]}"
              timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_batched_selected_inverse 2>&1 \
                | tee $OUT/memcheck_selinv.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck selected inverse rc ${PIPESTATUS[0]}"
              timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_batched_fiber_blocks 2>&1 \
                | tee $OUT/memcheck_fiber.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck fiber blocks rc ${PIPESTATUS[0]}"
              timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_batched_gemm 2>&1 \
                | tee $OUT/memcheck_gemm.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck gemm rc ${PIPESTATUS[0]}"
              timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_staging roundTripsEveryByte 2>&1 \
                | tee $OUT/memcheck_staging.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck staging rc ${PIPESTATUS[0]}" ;;
    solverab) for k in auto dense auto dense; do echo "solver $k:"; SPEXLAB_CUDA_SOLVER=$k timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 2>&1 \
               | tee $OUT/bench_solver_$k.txt | grep -E "^wall|^cholesky|^inverse|^fiber blocks|^solve|^eigh|memory:"; done
              echo "one stream:"; for k in auto dense; do echo "solver $k, 1 stream:"; SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_SOLVER=$k timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 2>&1 \
               | tee $OUT/bench_solver1_$k.txt | grep -E "^wall|^cholesky|^inverse|^fiber blocks|^eigh|^panel|^trailing|^diagonal"; done ;;
    cholab) # the blocked Cholesky's block columns tiled (default), fused or by four launches, alternating,
            # then one stream each (phase times), then racecheck of the one-launch kernels
            for k in tiled fused blocked tiled fused blocked; do echo "cholesky $k:"; SPEXLAB_CUDA_CHOLESKY=$k timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 2>&1 \
               | tee $OUT/bench_chol_$k.txt | grep -E "^wall|^cholesky|^solve|memory:"; done
            echo "one stream:"; for k in tiled fused blocked; do echo "cholesky $k, 1 stream:"; SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_CHOLESKY=$k timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 2>&1 \
               | tee $OUT/bench_chol1_$k.txt | grep -E "^wall|^cholesky|^solve|^block column|^panel|^trailing|^diagonal|^banded"; done
            timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_batched_cholesky notPositiveDefiniteFusedAndSteps everyBandwidth 2>&1 \
                | tee $OUT/racecheck_chol.log | grep -E "ERROR SUMMARY|RACE|PASS|FAIL|Totals"; echo "racecheck cholesky rc ${PIPESTATUS[0]}" ;;
    cholprof) # device time of each block-column launch by block column k (panel rows M = 148 for
              # k < 5, 74 for k = 5, 0 for k = 6) from one extract's kernel trace, one stream, tiled
              # then fused: the panel's share against the diagonal block's
              mkdir -p $D/frame
              [ -f $D/frame/preproc.fits ] || $B/spexlab-cli simulate -o $D/frame --psf $PSF -w 5760,7620,0.8 > $OUT/simulate.log 2>&1
              for k in tiled fused tiled fused; do
                SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_CHOLESKY=$k timeout 60 $B/spexlab-cli extract -i $D/frame/preproc.fits -p $D/frame/psf.fits \
                  -o $D/frame/frame-c.fits -w 5760,7620,0.8 --engine cuda --profile-kernels --profile $OUT/trace-chol-$k.json > $OUT/extract-chol-$k.log 2>&1
                python3 - $OUT/trace-chol-$k.json $k <<'PY'
import json, statistics, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and "cholColumnFusedKernel" in e.get("name", "")]
ev.sort(key=lambda e: e["ts"])
by = {}
for i, e in enumerate(ev): by.setdefault(i % 7, []).append(e["dur"])
print("%s: %d block-column launches; by k: " % (sys.argv[2], len(ev)) + ", ".join("k%d %.1f us" % (k, statistics.median(v)) for k, v in sorted(by.items())))
PY
              done ;;
    normab) for k in pairs scan pairs scan; do echo "normal $k:"; SPEXLAB_CUDA_NORMAL=$k timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 2>&1 \
               | tee $OUT/bench_normal_$k.txt | grep -E "^wall|^normal|memory:"; done
            for k in pairs scan; do echo "normal $k, 1 stream, kernel profile:"; SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_NORMAL=$k timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --profile-kernels 2>&1 \
               | tee $OUT/bench_normal1_$k.txt | grep -E "^wall|^normal|^  .*(ormalEquations|emset|priorKernel)|^device [0-9]"; done
            timeout 200 $B/test_cuda_engine normalEquationKernelsAgree 2>&1 | tee $OUT/test_normal_agree.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
            timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_engine subsetAndSmallBatchesMatch 2>&1 \
                | tee $OUT/racecheck_normal.log | grep -E "ERROR SUMMARY|RACE|PASS|FAIL|Totals"; echo "racecheck normal rc ${PIPESTATUS[0]}" ;;
    norm2ab) for r in 1 2; do for k in "tile warp" "pairs block" "pairs warp"; do set -- $k; echo "normal $1, spots $2:"
               SPEXLAB_CUDA_NORMAL=$1 SPEXLAB_CUDA_SPOTS=$2 timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 2>&1 \
               | tee $OUT/bench_norm2_$1_$r.txt | grep -E "^wall|memory:"; done; done
            for k in "tile warp" "pairs block"; do set -- $k; echo "normal $1, spots $2, 1 stream, kernel profile:"
               SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_NORMAL=$1 SPEXLAB_CUDA_SPOTS=$2 timeout 100 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --profile-kernels 2>&1 \
               | tee $OUT/bench_norm2_1s_$1.txt | grep -E "^wall|^normal|^spots|^chi2|^  .*(ormalEquations|spotTable|priorKernel|chi2|Chi2)|^device [0-9]"; done
            timeout 200 $B/test_cuda_engine normalEquationKernelsAgree 2>&1 | tee $OUT/test_normal_agree.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
            timeout 100 $B/test_device_psf 2>&1 | tee $OUT/test_device_psf.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
            timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_engine subsetAndSmallBatchesMatch 2>&1 \
                | tee $OUT/racecheck_normal.log | grep -E "ERROR SUMMARY|RACE|PASS|FAIL|Totals"; echo "racecheck tile rc ${PIPESTATUS[0]}"
            timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_device_psf spotKernelsAgreeToTheBit 2>&1 \
                | tee $OUT/racecheck_spots.log | grep -E "ERROR SUMMARY|RACE|PASS|FAIL|Totals"; echo "racecheck spots rc ${PIPESTATUS[0]}"
            timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_engine subsetAndSmallBatchesMatch 2>&1 \
                | tee $OUT/memcheck_normal.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck normal rc ${PIPESTATUS[0]}"
            timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_device_psf spotKernelsAgreeToTheBit 2>&1 \
                | tee $OUT/memcheck_spots.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck spots rc ${PIPESTATUS[0]}" ;;
    selinv3ab) # SPEXLAB_CUDA_SELINV=fused|steps: warm medians (bench --repeat 7, two streams)
               # alternating, two passes; then one stream each with the kernel profile; the
               # engine's fused-vs-steps test; racecheck of the fused kernel (small shapes)
               for r in 1 2; do for k in fused steps; do echo "selinv $k:"
                 SPEXLAB_CUDA_SELINV=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 2>&1 \
                 | tee $OUT/bench_selinv_${k}_$r.txt | grep -E "^wall|memory:"; done; done
               for k in fused steps; do echo "selinv $k, 1 stream, kernel profile:"
                 SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_SELINV=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --profile-kernels 2>&1 \
                 | tee $OUT/bench_selinv_1s_$k.txt | grep -E "^wall|^fiber blocks|^  .*(selectedInverseFused|gemmTileKernel|selectedDiag)|^device [0-9]"; done
               timeout 120 $B/test_cuda_engine fusedSelectedInverseMatchesSteps 2>&1 | tee $OUT/test_selinv_engine.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
               timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_batched_selected_inverse everyBandwidth failuresAreFlagged 2>&1 \
                 | tee $OUT/racecheck_selinv.log | grep -E "ERROR SUMMARY|RACE|PASS|FAIL|Totals"; echo "racecheck fused rc ${PIPESTATUS[0]}" ;;
    norm3ab) # variants: NAME:BINARY:SPEXLAB_CUDA_NORMAL; every other build bundled as spexlab-cli-NAME
             # (scripts/device-bundle.sh build path/to/spexlab-cli-NAME) runs as variant NAME with lean
             V="lean:spexlab-cli:lean"; for f in $B/spexlab-cli-*; do [ -x "$f" ] && V="$V ${f##*/spexlab-cli-}:${f##*/}:lean"; done
             V="$V pairs:spexlab-cli:pairs"
             for r in 1 2; do for v in $V; do IFS=: read -r nm bin k <<< "$v"; echo "normal $nm:"
               SPEXLAB_CUDA_NORMAL=$k timeout 60 $B/$bin bench --engine cuda --psf $PSF --repeat 5 2>&1 \
               | tee $OUT/bench_norm3_${nm}_$r.txt | grep -E "^wall|memory:"; done; done
             for v in $V; do IFS=: read -r nm bin k <<< "$v"; echo "normal $nm, 1 stream, kernel profile:"
               SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_NORMAL=$k timeout 60 $B/$bin bench --engine cuda --psf $PSF --repeat 3 --profile-kernels 2>&1 \
               | tee $OUT/bench_norm3_1s_$nm.txt | grep -E "^wall|^normal|^  .*(ormalEquations|priorKernel)|^device [0-9]"; done
             timeout 120 $B/test_cuda_engine normalEquationKernelsAgree 2>&1 | tee $OUT/test_normal_agree.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
             timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_engine subsetAndSmallBatchesMatch nonSpdPatchesBehaveLikeCpu 2>&1 \
                 | tee $OUT/memcheck_normal.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck lean rc ${PIPESTATUS[0]}" ;;
    norm3x) # racecheck of the lean kernel; Nsight Compute's warp-instruction count of one launch each
             timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_engine subsetAndSmallBatchesMatch 2>&1 \
                 | tee $OUT/racecheck_normal.log | grep -E "ERROR SUMMARY|RACE|PASS|FAIL|Totals"; echo "racecheck lean rc ${PIPESTATUS[0]}"
             V="lean:spexlab-cli:lean"; for f in $B/spexlab-cli-*; do [ -x "$f" ] && V="$V ${f##*/spexlab-cli-}:${f##*/}:lean"; done
             if command -v ncu > /dev/null; then for v in $V pairs:spexlab-cli:pairs; do IFS=: read -r nm bin k <<< "$v"; echo "normal $nm, ncu (one launch):"
               SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_NORMAL=$k timeout 90 ncu --kernel-name regex:normalEquations --launch-skip 4 --launch-count 1 \
                 --metrics smsp__inst_executed.sum,gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active \
                 $B/$bin bench --engine cuda --psf $PSF --repeat 1 --quiet > $OUT/ncu_norm3_$nm.txt 2>&1
               grep -E "normalEquations|inst_executed|duration|warps_active|issue_active|==ERR|==WARN" $OUT/ncu_norm3_$nm.txt | head -12; done
             else echo "no ncu"; fi ;;
    norm5ab) for r in 1 2; do for k in tree lean; do echo "normal $k:"
               SPEXLAB_CUDA_NORMAL=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 7 2>&1 \
               | tee $OUT/bench_norm5_${k}_$r.txt | grep -E "^wall|memory:"; done; done
             for k in tree lean; do echo "normal $k, 1 stream, kernel profile:"
               SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_NORMAL=$k timeout 60 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --profile-kernels 2>&1 \
               | tee $OUT/bench_norm5_1s_$k.txt | grep -E "^wall|^normal|^  .*(ormalEquations|priorKernel)|^device [0-9]"; done
             timeout 120 $B/test_cuda_engine normalEquationKernelsAgree 2>&1 | tee $OUT/test_normal_agree.log | grep -E "PASS|FAIL|QINFO|Totals|Loc"
             timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_engine subsetAndSmallBatchesMatch nonSpdPatchesBehaveLikeCpu 2>&1 \
                 | tee $OUT/memcheck_normal.log | grep -E "ERROR SUMMARY|PASS|FAIL|Totals"; echo "memcheck tree rc ${PIPESTATUS[0]}" ;;
    norm5x) timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_engine subsetAndSmallBatchesMatch 2>&1 \
                 | tee $OUT/racecheck_normal.log | grep -E "ERROR SUMMARY|RACE|PASS|FAIL|Totals"; echo "racecheck tree rc ${PIPESTATUS[0]}"
             if command -v ncu > /dev/null; then for k in tree lean; do echo "normal $k, ncu (one launch):"
               SPEXLAB_CUDA_STREAMS=1 SPEXLAB_CUDA_NORMAL=$k timeout 90 ncu --kernel-name regex:normalEquations --launch-skip 4 --launch-count 1 \
                 --metrics smsp__inst_executed.sum,gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active \
                 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 1 --quiet > $OUT/ncu_norm5_$k.txt 2>&1
               grep -E "normalEquations|inst_executed|duration|warps_active|issue_active|==ERR|==WARN" $OUT/ncu_norm5_$k.txt | head -12; done
             else echo "no ncu"; fi ;;
    raceeigh) timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_batched_eigh workspaceSizesAgree 2>&1 \
                | tee $OUT/racecheck_eigh.log | grep -E "ERROR SUMMARY|RACE|PASS|FAIL|Totals"; echo "racecheck eigh rc ${PIPESTATUS[0]}" ;;
    racecheck) timeout 300 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_cuda_engine subsetAndSmallBatchesMatch 2>&1 \
                | tee $OUT/racecheck.log | grep -E "ERROR SUMMARY|RACE|PASS|FAIL|Totals"; echo "racecheck rc ${PIPESTATUS[0]}" ;;
    gui) mkdir -p $D/frame /tmp/xdg-run && chmod 700 /tmp/xdg-run
         [ -f $D/frame/preproc.fits ] || $B/spexlab-cli simulate -o $D/frame --psf $PSF -w 5760,7620,0.8 > $OUT/simulate.log 2>&1
         timeout 400 $B/spexlab --preproc $D/frame/preproc.fits --psf $D/frame/psf.fits --truth $D/frame/truth.fits \
            --screenshot $OUT/gui-cpu-vs-cuda.png --size 1800x1200 --compare cpu,cuda --compare-runs 2 --extract 2>&1 \
            | grep -v propagateSizeHints | tee $OUT/gui-compare.txt ;;
    guisel) # The 6-patch selection in the workbench offscreen (spexlab-bench-gui, bundled as
            # an extra binary), CUDA engine kept warm between clicks, then the CPU engine,
            # with the GUI thread's CPU time per event (docs/benchmarks.md, issue 14).
            mkdir -p $D/benchgui /tmp/xdg-run && chmod 700 /tmp/xdg-run
            for e in cuda cpu; do
              SPEXLAB_BENCH_EVENTS=1 timeout 250 $B/spexlab-bench-gui 1 2 $D/benchgui selection $e 2>&1 \
                | grep -v propagateSizeHints | tee $OUT/guisel-$e.txt
            done ;;
    multi) # Issue 15 on a machine with several GPUs (docs/benchmarks.md, "Several GPUs"):
           # one frame split over 1 and G GPUs (--gpus; frames compared), warm medians
           # alternating, then 40-frame batches: 1 process on GPU 0, one process a GPU,
           # and 2 and 5 processes a GPU under CUDA MPS; GPU memory polled throughout.
        G=$(nvidia-smi -L | grep -c '^GPU'); ALL=$(seq -s, 0 $((G - 1)))
        nvidia-smi -L | tee $OUT/multi-gpus.txt
        nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 200 > $OUT/multi-mem.csv &
        SMI=$!
        mkdir -p $D/mg
        [ -f $D/mg/preproc.fits ] || $B/spexlab-cli simulate -o $D/mg --psf $PSF -w 5760,7620,0.8 > $OUT/multi-sim.log 2>&1
        for g in 0 $ALL; do
          walltime $B/spexlab-cli extract -i $D/mg/preproc.fits -p $D/mg/psf.fits -o $D/mg/frame-$g.fits \
            -w 5760,7620,0.8 --engine cuda --gpus $g 2>&1 | tail -3
        done
        $B/spexlab-cli compare $D/mg/frame-0.fits $D/mg/frame-$ALL.fits 2>&1 | tee $OUT/multi-compare.txt
        for r in 1 2; do for g in 0 $ALL; do echo "bench --gpus $g:"
          timeout 120 $B/spexlab-cli bench --engine cuda --gpus $g --psf $PSF --repeat 7 2>&1 | grep -E "median|peak|GPU" | tail -4
        done; done
        echo "-- 40 frames, 1 process, GPU 0"
        SPEXLAB_PSF=$PSF timeout 200 bash ./bench-batch.sh -N 40 --cli $B/spexlab-cli --dir $D/b1 \
          -- --engine cuda --gpus 0 2>&1 | tail -3
        echo "-- 40 frames, $G processes, one a GPU"
        SPEXLAB_PSF=$PSF timeout 200 bash ./bench-batch.sh -N $((40 / G)) -P $G -G $G --cli $B/spexlab-cli --dir $D/b2 \
          -- --engine cuda 2>&1 | tail -3
        export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
        mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d
        for k in 2 5; do echo "-- 40 frames, $k processes a GPU on $G GPUs, MPS"
          SPEXLAB_PSF=$PSF timeout 200 bash ./bench-batch.sh -N $((40 / (k * G))) -P $((k * G)) -G $G --cli $B/spexlab-cli \
            --dir $D/b$k -- --engine cuda --gpu-memory 0.15 2>&1 | tail -4
        done
        echo quit | nvidia-cuda-mps-control; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        kill $SMI
        awk -F', ' '{ if ($2 > m[$1]) m[$1] = $2 } END { for (g in m) printf "GPU %s peak memory used %d MiB\n", g, m[g] }' \
          $OUT/multi-mem.csv | tee $OUT/multi-peak.txt ;;
    batch20) SPEXLAB_PSF=$PSF timeout 500 bash ./bench-batch.sh -N 20 --cli $B/spexlab-cli --dir $D/bb \
        -- --engine cuda --gpus 0 2>&1 | tee $OUT/batch20.txt; cp $D/bb/batch-1.json $OUT/batch20-trace.json ;;
    procs5) SPEXLAB_PSF=$PSF timeout 500 bash ./bench-batch.sh -N 4 -P 5 --cli $B/spexlab-cli --dir $D/bb \
        -- --engine cuda --gpus 0 --gpu-memory 0.15 2>&1 | tee $OUT/procs5.txt ;;
    procs5mps) export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
        mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d
        SPEXLAB_PSF=$PSF timeout 500 bash ./bench-batch.sh -N 4 -P 5 --cli $B/spexlab-cli --dir $D/bb \
          -- --engine cuda --gpus 0 --gpu-memory 0.15 2>&1 | tee $OUT/procs5mps.txt
        echo quit | nvidia-cuda-mps-control; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY ;;
    kernels) timeout 300 $B/test_cuda_engine kernelProfileMatchesPhases 2>&1 | tee $OUT/test_kernel_profile.log \
               | grep -E "PASS|FAIL|SKIP|QINFO|Totals|Loc|QWARN"
             for k in plain kernels plain kernels; do f=""; [ $k = kernels ] && f=--profile-kernels
               echo "bench $k:"; timeout 150 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 5 --quiet $f 2>&1 \
                 | tee $OUT/bench_$k.txt | grep -E "^wall|peak"; done
             mkdir -p $D/frame
             [ -f $D/frame/preproc.fits ] || $B/spexlab-cli simulate -o $D/frame --psf $PSF -w 5760,7620,0.8 > $OUT/simulate.log 2>&1
             walltime $B/spexlab-cli extract -i $D/frame/preproc.fits -p $D/frame/psf.fits -o $D/frame/frame-k.fits \
               -w 5760,7620,0.8 --engine cuda --profile-kernels --profile $OUT/trace-kernels.json > $OUT/extract-kernels.log 2>&1
             head -40 $OUT/extract-kernels.log ;;
    ceilings) timeout 200 $B/spexlab-cli bench --engine cuda --psf $PSF --repeat 1 --ceilings 2>&1 | tee $OUT/ceilings.txt ;;
  esac
done
