#include "threads.h"

#include <algorithm>
#include <cstdlib>
#include <sched.h>
#include <thread>

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace spex {

namespace {

// A positive integer at the start of an environment variable ("4", "4,2"), else 0.
int envCount(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || n <= 0 || n > 1 << 16) return 0;
  if (*end != '\0' && *end != ',' && *end != '(') return 0; // SLURM may write "4(x2)"
  return int(n);
}

} // namespace

int affinityCpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

ThreadCount defaultThreadCount() {
  const int cpus = affinityCpuCount();
  if (const int n = envCount("OMP_NUM_THREADS")) return {std::min(n, cpus), "OMP_NUM_THREADS"};
  if (const int n = envCount("SLURM_CPUS_PER_TASK")) return {std::min(n, cpus), "SLURM_CPUS_PER_TASK"};
  return {cpus, "affinity mask"};
}

int resolveThreads(int requested) {
  return requested > 0 ? requested : defaultThreadCount().threads;
}

void singleThreadedBlas() {
  if (openblas_set_num_threads) openblas_set_num_threads(1);
}

} // namespace spex
