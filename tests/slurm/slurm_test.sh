#!/bin/bash
# A real single-node Slurm on this machine: munged, slurmctld and slurmd started as
# root from a temporary folder, scripts/slurm/cpu-node.sbatch submitted with sbatch
# on a small batch of simulated frames (2 ranks x 1 CPU), waited for, its frames
# checked against one `extract`, and every daemon stopped again (by its pid file).
# Skips (exit 77) when not root or when Slurm/munge are not installed.
# Usage: slurm_test.sh CLI SOURCE_DIR
set -uo pipefail
CLI=$1
SRC=$2
for b in munged slurmctld slurmd sbatch sinfo; do
  command -v $b > /dev/null || { echo "SKIP: $b not installed"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: starting slurmctld/slurmd needs root"; exit 77; }

D=$(mktemp -d /tmp/spexlab-slurm-XXXXXX)
chmod 755 "$D"
host=$(hostname -s)
port=$((20000 + RANDOM % 20000))
cleanup() {
  for p in slurmd slurmctld munged; do
    [ -f "$D/$p.pid" ] && kill "$(cat "$D/$p.pid")" 2> /dev/null
  done
  sleep 1
  for p in slurmd slurmctld munged; do
    [ -f "$D/$p.pid" ] && kill -9 "$(cat "$D/$p.pid")" 2> /dev/null
  done
  rm -rf "$D"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$D"/*.log; do echo "== $f"; tail -20 "$f"; done
  exit 1
}

# munge with its own key and socket (the system's are left alone).
dd if=/dev/urandom of="$D/munge.key" bs=1024 count=1 status=none
chmod 600 "$D/munge.key"
munged --force --key-file="$D/munge.key" --socket="$D/munge.sock" --pid-file="$D/munged.pid" \
  --log-file="$D/munged.log" --seed-file="$D/munged.seed" || fail "munged did not start"

cpus=$(nproc)
mkdir -p "$D/state" "$D/spool"
cat > "$D/slurm.conf" <<CONF
ClusterName=spexlabtest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$D/munge.sock
CredType=cred/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$D/slurm.conf
slurmctld -i -f "$D/slurm.conf" || fail "slurmctld did not start"
slurmd -f "$D/slurm.conf" || fail "slurmd did not start"
for i in $(seq 60); do
  sinfo -h -o %t 2> /dev/null | grep -q idle && break
  sleep 1
done
sinfo -h -o %t | grep -q idle || fail "node never became idle: $(sinfo 2>&1)"

# A small batch: 3 frames of 25 fibers, 2 ranks.
"$CLI" simulate -o "$D/sim" -n 25 -w 6000,6100,0.8 --seed 9 --quiet || fail "simulate"
for f in f1 f2 f3; do
  echo "-i $D/sim/preproc.fits -p $D/sim/psf.fits -o $D/$f.fits -w 6000,6100,0.8 -s 0 -n 25 --nsubbundles 1"
done > "$D/night.jobs"
"$CLI" extract -i "$D/sim/preproc.fits" -p "$D/sim/psf.fits" -o "$D/ref.fits" -w 6000,6100,0.8 \
  -s 0 -n 25 --nsubbundles 1 --engine cpu --quiet || fail "reference extract"

# srun starts the OpenMPI ranks through PMIx where Slurm has the mpi/pmix plugin
# (Debian 12's slurm-wlm does); where it has not, mpirun starts them inside the
# allocation, as some sites do (docs/scale.md).
launcher=mpirun
srun --mpi=list 2>&1 | grep -q pmix && launcher=srun
echo "launcher: $launcher"
jobid=$(cd "$D" && JOBS=$D/night.jobs SPEXLAB_CLI=$CLI SPEXLAB_LAUNCHER=$launcher \
  SPEXLAB_BATCH_ARGS="--threads 1" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  OMPI_MCA_btl=self,vader OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_rmaps_base_oversubscribe=1 \
  sbatch --parsable --wait --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 --time=10 \
  --output="$D/job-%j.log" "$SRC/scripts/slurm/cpu-node.sbatch") || fail "sbatch job failed"
echo "job $jobid done"
cat "$D"/job-*.log
for f in f1 f2 f3; do
  [ -f "$D/$f.fits" ] || fail "$f.fits not written by the Slurm job"
  json=$("$CLI" compare "$D/ref.fits" "$D/$f.fits" --json) || fail "compare $f"
  echo "$json" | grep -Eq '"maxPull":0(\.0+)?[,}]' || fail "$f differs from one extract: $json"
done
grep -q "rank 1: " "$D"/job-*.log || fail "the job did not run 2 MPI ranks"
echo PASS
