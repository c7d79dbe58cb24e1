// How many worker threads a process uses when nobody says (DESIGN.md "Scale-out"): the
// one place that decides, so the CPU engine, host loops and the CLI agree. Under
// Slurm or mpirun a rank is given a few CPUs; taking every core of the node would
// oversubscribe it, so the count follows what this process was given:
//   1. OMP_NUM_THREADS (first entry of a list, as OpenMP reads it), when a positive int;
//   2. else SLURM_CPUS_PER_TASK, when a positive int;
//   3. else the CPUs in the affinity mask (sched_getaffinity);
// and never more than the affinity mask holds (a larger request is clamped).
#pragma once

#include <string>

namespace spex {

struct ThreadCount {
  int threads = 1;
  std::string source; // "OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK", "affinity mask"
};

// Reads the environment and the affinity mask on each call (cheap).
ThreadCount defaultThreadCount();

// requested > 0: requested; otherwise defaultThreadCount().threads.
int resolveThreads(int requested);

// CPUs in this process's affinity mask (hardware_concurrency where unavailable).
int affinityCpuCount();

// Keeps BLAS (OpenBLAS) to one thread in the calling process: engine workers call
// LAPACK from many threads at once, and a threaded BLAS below them would multiply
// the thread count past the CPUs given.
void singleThreadedBlas();

} // namespace spex
