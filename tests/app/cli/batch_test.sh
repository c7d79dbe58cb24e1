#!/bin/bash
# spexlab-cli batch JOBS: every good job writes the frame `extract` writes for the same
# line; a bad job (missing input) is reported by name while the others still run and
# the exit code is 1; a JOBS line that does not parse is an error naming its line
# number before anything runs; the summary table and the read/extract/write trace
# are there; with MPI, two ranks share the jobs. Usage: batch_test.sh CLI [MPIEXEC]
set -euo pipefail
CLI=$1
MPIEXEC=${2:-}
dir=$(mktemp -d /tmp/spexlab-batch-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$CLI" simulate -o "$dir/sim" -n 25 -w 6000,6100,0.8 --seed 5 --quiet
line() { echo "-i $dir/sim/preproc.fits -p $dir/sim/psf.fits -o $dir/$1 -w 6000,6100,0.8 -s 0 -n 25 --nsubbundles 1 ${2:-}"; }
{
  echo "# three frames and one that cannot be read"
  line a.fits "-m $dir/a-model.fits"
  echo "desi_extract_spectra -i $dir/missing.fits -p $dir/sim/psf.fits -o $dir/bad.fits"
  echo
  line b.fits
  line c.fits
} > "$dir/jobs.txt"

set +e
"$CLI" batch "$dir/jobs.txt" --engine cpu --threads 1 --profile "$dir/batch.json" > "$dir/out.log" 2> "$dir/err.log"
code=$?
set -e
cat "$dir/out.log" "$dir/err.log"
[ $code = 1 ] || fail "exit code $code with one bad job, expected 1"
grep -q "job 'bad.fits' (JOBS line 3) failed: read: .*missing.fits" "$dir/err.log" || fail "bad job not reported by name"
for f in a b c; do [ -f "$dir/$f.fits" ] || fail "$f.fits not written"; done
[ -f "$dir/a-model.fits" ] || fail "model of a not written"
[ ! -e "$dir/bad.fits" ] || fail "bad job left a frame"
grep -Eq "^frame +read s +extract s +write s +wait s" "$dir/out.log" || fail "no summary table"
grep -q "3 of 4 frames ok" "$dir/out.log" || fail "summary count"
for lane in '"read"' '"extract"' '"write"'; do grep -q "$lane" "$dir/batch.json" || fail "trace lacks $lane"; done
# The engine's lanes sit right under extract: read, extract, main..., write last.
lanes=$(grep -o '"name":"thread_name","pid":1,"tid":[0-9]*,"args":{"name":"[^"]*"' "$dir/batch.json" | sed 's/.*"name":"//; s/"$//' | tr '\n' ' ')
case "$lanes" in
  "read extract main "*"write ") ;;
  *) fail "trace lanes not read, extract, the engine's, write: $lanes" ;;
esac

# --profile-kernels: the CPU engine has no kernels, so asking for it with --engine cpu
# is an error before any job runs.
{ line k1.fits; line k2.fits; } > "$dir/kjobs.txt"
if "$CLI" batch "$dir/kjobs.txt" --engine cpu --profile-kernels > /dev/null 2> "$dir/errk.log"; then
  fail "batch --engine cpu --profile-kernels accepted"
fi
grep -q "profile-kernels needs the CUDA engine (a GPU): the CPU engine was asked for" "$dir/errk.log" ||
  { cat "$dir/errk.log"; fail "--profile-kernels on the CPU engine: no plain message"; }
[ ! -e "$dir/k1.fits" ] || fail "a job ran although --profile-kernels cannot be served"
# With the default engine: on a machine without a GPU the same refusal, naming why
# there is no GPU; with one, the kernels are in the trace under their phases.
set +e
"$CLI" batch "$dir/kjobs.txt" --profile-kernels --profile "$dir/kbatch.json" > "$dir/k.log" 2> "$dir/errk2.log"
code=$?
set -e
if [ $code != 0 ]; then
  cat "$dir/errk2.log"
  grep -q "profile-kernels needs the CUDA engine (a GPU): no usable GPU" "$dir/errk2.log" ||
    grep -q "kernel profile (--profile-kernels): this build has no CUPTI" "$dir/errk2.log" ||
    fail "batch --profile-kernels failed without saying it needs a GPU"
  [ ! -e "$dir/k1.fits" ] || fail "a job ran although --profile-kernels cannot be served"
else
  cat "$dir/k.log"
  grep -q '"cat":"kernel"' "$dir/kbatch.json" || fail "GPU batch trace has no kernels"
  grep -q '"registers":' "$dir/kbatch.json" || fail "GPU batch trace kernels lack their launch"
  grep -q '"copy_kind":"HtoD"' "$dir/kbatch.json" || fail "GPU batch trace has no host-to-device copy"
  grep -q "kernel profile (all frames)" "$dir/k.log" || fail "no kernel table"
  for f in k1 k2; do [ -f "$dir/$f.fits" ] || fail "$f.fits not written with --profile-kernels"; done
fi

# The batch frame is the frame extract writes for the same line.
"$CLI" extract $(line single.fits) --engine cpu --threads 1 --quiet
json=$("$CLI" compare "$dir/single.fits" "$dir/b.fits" --json)
echo "$json" | grep -Eq '"maxPull":0(\.0+)?[,}]' || fail "batch frame differs from extract's: $json"
echo "$json" | grep -Eq '"maskDifferences":0(\.0+)?[,}]' || fail "batch mask differs: $json"

# A line that does not parse: error naming it, nothing run.
rm -f "$dir"/[abc].fits
{ line a.fits; echo "-i x.fits -p y.fits -o z.fits --bogus 3"; } > "$dir/badjobs.txt"
if "$CLI" batch "$dir/badjobs.txt" --engine cpu 2> "$dir/err2.log"; then fail "bad JOBS accepted"; fi
grep -q "line 2: .*--bogus" "$dir/err2.log" || { cat "$dir/err2.log"; fail "no line number"; }
[ ! -e "$dir/a.fits" ] || fail "a job ran although JOBS was bad"

if [ -n "$MPIEXEC" ]; then
  { line m1.fits; line m2.fits; line m3.fits; } > "$dir/mpijobs.txt"
  "$MPIEXEC" -n 2 "$CLI" batch "$dir/mpijobs.txt" --mpi --engine cpu --threads 1 > "$dir/mpi.log" 2>&1 ||
    { cat "$dir/mpi.log"; fail "batch --mpi failed"; }
  cat "$dir/mpi.log"
  grep -q "rank 0: .*2 of 2 frames ok" "$dir/mpi.log" || fail "rank 0 should take jobs 1 and 3"
  grep -q "rank 1: .*1 of 1 frames ok" "$dir/mpi.log" || fail "rank 1 should take job 2"
  for f in m1 m2 m3; do
    json=$("$CLI" compare "$dir/single.fits" "$dir/$f.fits" --json)
    echo "$json" | grep -Eq '"maxPull":0(\.0+)?[,}]' || fail "$f differs: $json"
  done
fi
echo PASS
