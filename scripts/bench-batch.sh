#!/usr/bin/env bash
# Frames per hour of `spexlab-cli batch` on N frames with reading and writing
# overlapped (docs/scale.md). Simulates one full r frame (500 fibers, 5760-7620 A)
# once, then extracts it N times in one process (N outputs), and prints the batch's
# summary table; the Chrome trace (read/extract/write lanes) goes to DIR/batch.json
# for the workbench timeline (File > Open profile).
#
#   scripts/bench-batch.sh [-N 20] [-P procs] [-G gpus] [--dir DIR] [--cli PATH] [-- batch options]
#
# -P runs P batch processes at once on the same machine (each N frames): the
# aggregate frames/hour and each process's peak device memory are printed (with
# CUDA MPS running, they share the GPU through it; see docs/scale.md).
# -G spreads the processes over G GPUs: process p gets `--gpus (p-1) mod G` after the
# batch options (one process a GPU with -P G, several a GPU with -P k*G).
set -euo pipefail
N=20
P=1
G=0
DIR=${TMPDIR:-/tmp}/spexlab-bench-batch
CLI=${SPEXLAB_CLI:-$(dirname "$0")/../build/app/spexlab-cli}
while [ $# -gt 0 ]; do
  case $1 in
    -N) N=$2; shift 2 ;;
    -P) P=$2; shift 2 ;;
    -G) G=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --cli) CLI=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$DIR/out"
if [ ! -f "$DIR/sim/preproc.fits" ]; then
  PSF_ARG=()
  [ -n "${SPEXLAB_PSF:-}" ] && PSF_ARG=(--psf "$SPEXLAB_PSF")
  "$CLI" simulate -o "$DIR/sim" "${PSF_ARG[@]}" --quiet
fi
for p in $(seq 1 "$P"); do
  for i in $(seq 1 "$N"); do
    echo "-i $DIR/sim/preproc.fits -p $DIR/sim/psf.fits -o $DIR/out/frame-p$p-$i.fits -w 5760,7620,0.8"
  done > "$DIR/jobs-$p.txt"
done
start=$(date +%s.%N)
for p in $(seq 1 "$P"); do
  GPU_ARG=()
  [ "$G" -gt 0 ] && GPU_ARG=(--gpus $(( (p - 1) % G )))
  "$CLI" batch "$DIR/jobs-$p.txt" --profile "$DIR/batch-$p.json" "$@" "${GPU_ARG[@]}" > "$DIR/batch-$p.log" 2>&1 &
done
fail=0
wait || fail=1
for j in $(jobs -p); do wait "$j" || fail=1; done
end=$(date +%s.%N)
for p in $(seq 1 "$P"); do
  echo "=== process $p"; cat "$DIR/batch-$p.log"
  grep -q "$N of $N frames ok" "$DIR/batch-$p.log" || fail=1
done
awk -v s="$start" -v e="$end" -v n="$N" -v p="$P" 'BEGIN {
  w = e - s; printf "\n%d process(es) x %d frames in %.2f s wall: %.0f frames/hour aggregate\n", p, n, w, 3600 * n * p / w }'
grep -h "peak device memory" "$DIR"/batch-*.log | sort | uniq -c || true
exit $fail
