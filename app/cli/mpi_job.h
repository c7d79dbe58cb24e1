// MPI for spexlab-cli (DESIGN.md "Scale-out"): `extract --mpi` splits one frame's
// bundles over the ranks and gathers the spectra to rank 0, which writes the one
// frame; `batch --mpi` deals whole frames to ranks. MPI is optional at build time
// (SPEXLAB_MPI); without it `--mpi` is a clear error. Without `--mpi`, a process that
// mpirun or srun started as one of several ranks says that it is running alone.
#pragma once

#include "core/extract/engine.h"

#include <string>

namespace spex::cli {

// Size of the job this process was launched in by mpirun/srun, from the launcher's
// environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE, SLURM_NTASKS with
// SLURM_STEP_ID); 1 when none. `rank` gets this process's rank there.
int launcherJobSize(int* rank = nullptr);
bool mpiBuilt();

class MpiJob {
public:
  // use: `--mpi` was given. Initialises MPI (error without MPI support built);
  // otherwise, when launched as one of several ranks, prints one line to stderr
  // naming `command` and saying each rank extracts alone.
  MpiJob(bool use, const std::string& command);
  ~MpiJob(); // finalises MPI
  MpiJob(const MpiJob&) = delete;
  MpiJob& operator=(const MpiJob&) = delete;

  bool active() const { return m_active; }
  int rank() const { return m_rank; }
  int size() const { return m_size; }
  int localRank() const { return m_localRank; } // rank among the ranks of this node
  bool root() const { return m_rank == 0; }

  // Narrows a whole-frame request to this rank's bundles (rankFiberRange); a rank
  // with no bundle gets nFiber 0. No-op when not active.
  void narrow(ExtractionRequest& request) const;

  // Collective: every rank passes whether its part failed (and why); all ranks throw
  // SpexError naming the failing ranks if any did, so no rank waits forever.
  void checkAll(bool failed, const std::string& why) const;

  // Collective: gathers the ranks' parts of `whole` (the request before narrow) into
  // `part` on rank 0, which then holds the whole frame. Rows are fibers, so each
  // rank's block is contiguous; the model images are summed. No-op when not active.
  void gather(ExtractionResult& part, const ExtractionRequest& whole) const;

  // Collective sum of a count over the ranks (exit codes of batch ranks).
  long sum(long value) const;

private:
  bool m_active = false;
  int m_rank = 0, m_size = 1, m_localRank = 0;
};

} // namespace spex::cli
