#!/bin/bash
# spexlab-cli extract --mpi under mpirun -n 2 writes one frame, the same as one
# process writes (every bin, mask and resolution element equal); without --mpi a
# rank started by mpirun says it works alone. Usage: mpi_extract_test.sh CLI MPIEXEC
set -euo pipefail
CLI=$1
MPIEXEC=$2
dir=$(mktemp -d /tmp/spexlab-mpi-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$CLI" simulate -o "$dir/sim" -n 50 -w 6000,6200,0.8 --seed 11 --quiet
common=(-i "$dir/sim/preproc.fits" -p "$dir/sim/psf.fits" -w 6000,6200,0.8 -s 0 -n 50
        --nsubbundles 1 --engine cpu --threads 1)
"$CLI" extract "${common[@]}" -o "$dir/one.fits" -m "$dir/one-model.fits" --quiet
"$MPIEXEC" -n 2 "$CLI" extract --mpi "${common[@]}" -o "$dir/two.fits" -m "$dir/two-model.fits" \
  > "$dir/two.log" 2>&1 || { cat "$dir/two.log"; fail "mpirun -n 2 extract --mpi failed"; }
[ -f "$dir/two.fits" ] || fail "no frame written by the MPI run"
ls "$dir"/two.fits.tmp-* 2>/dev/null && fail "a temporary frame was left behind"
# One line of output: only rank 0 reports.
n=$(grep -c "^extracted" "$dir/two.log" || true)
[ "$n" = 1 ] || { cat "$dir/two.log"; fail "expected one report from rank 0, got $n"; }
json=$("$CLI" compare "$dir/one.fits" "$dir/two.fits" --json)
echo "$json"
for key in '"maxPull":0(\.0+)?[,}]' '"maxRelIvar":0(\.0+)?[,}]' '"maxResolution":0(\.0+)?[,}]' '"maskDifferences":0(\.0+)?[,}]'; do
  echo "$json" | grep -Eq "$key" || fail "MPI frame differs from the one-process frame ($key)"
done

# Without --mpi: each rank says it is alone (and still writes a whole frame).
"$MPIEXEC" -n 2 "$CLI" extract "${common[@]}" -o "$dir/alone.fits" --quiet > "$dir/alone.log" 2>&1 ||
  { cat "$dir/alone.log"; fail "mpirun without --mpi failed"; }
grep -q "without --mpi: this process works alone" "$dir/alone.log" ||
  { cat "$dir/alone.log"; fail "no 'works alone' note"; }
echo "PASS"
