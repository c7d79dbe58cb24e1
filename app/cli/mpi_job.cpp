#include "mpi_job.h"

#include "core/errors.h"
#include "core/plan/patch_plan.h"
#include "core/plan/rank_split.h"
#include "core/psf/gauss_hermite_psf.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#ifdef SPEXLAB_HAVE_MPI
#include <mpi.h>
#endif

namespace spex::cli {

namespace {

int envInt(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : -1;
}

} // namespace

bool mpiBuilt() {
#ifdef SPEXLAB_HAVE_MPI
  return true;
#else
  return false;
#endif
}

int launcherJobSize(int* rank) {
  struct {
    const char *size, *rank;
  } const vars[] = {{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                    {"PMI_SIZE", "PMI_RANK"},
                    {"PMIX_SIZE", "PMIX_RANK"}};
  for (const auto& v : vars)
    if (const int n = envInt(v.size); n > 0) {
      if (rank) *rank = std::max(0, envInt(v.rank));
      return n;
    }
  // srun sets SLURM_NTASKS in the batch script too; only a job step (SLURM_STEP_ID)
  // means this process is one of the tasks.
  if (envInt("SLURM_STEP_ID") >= 0 && std::getenv("SLURM_PROCID"))
    if (const int n = envInt("SLURM_NTASKS"); n > 0) {
      if (rank) *rank = std::max(0, envInt("SLURM_PROCID"));
      return n;
    }
  if (rank) *rank = 0;
  return 1;
}

MpiJob::MpiJob(bool use, const std::string& command) {
  if (!use) {
    int rank = 0;
    if (const int n = launcherJobSize(&rank); n > 1)
      std::fprintf(stderr,
                   "spexlab-cli %s: rank %d of %d started by mpirun/srun without --mpi: this "
                   "process works alone (every rank does the whole job); add --mpi to share it\n",
                   command.c_str(), rank, n);
    return;
  }
#ifdef SPEXLAB_HAVE_MPI
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) MPI_Init(nullptr, nullptr);
  m_active = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &m_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &m_size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, m_rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &m_localRank);
  MPI_Comm_free(&node);
#else
  throw InputError("--mpi: this spexlab-cli was built without MPI (install OpenMPI, "
                   "libopenmpi-dev, and configure with -DSPEXLAB_MPI=ON)");
#endif
}

MpiJob::~MpiJob() {
#ifdef SPEXLAB_HAVE_MPI
  if (m_active) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
#endif
}

void MpiJob::narrow(ExtractionRequest& request) const {
  if (!m_active) return;
  const FiberRange r = rankFiberRange(request.fiberMin, request.nFiber, request.params.bundlesize,
                                      m_rank, m_size);
  request.fiberMin = r.fiberMin;
  request.nFiber = r.nFiber;
}

void MpiJob::checkAll(bool failed, const std::string& why) const {
  if (!m_active) {
    if (failed) throw SpexError(why);
    return;
  }
#ifdef SPEXLAB_HAVE_MPI
  int mine = failed ? 1 : 0, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!any) return;
  if (failed) throw SpexError("rank " + std::to_string(m_rank) + ": " + why);
  throw SpexError(std::to_string(any) + " other rank" + (any == 1 ? "" : "s") +
                  " failed (see their messages); no frame written");
#endif
}

long MpiJob::sum(long value) const {
#ifdef SPEXLAB_HAVE_MPI
  if (m_active) {
    long out = 0;
    MPI_Allreduce(&value, &out, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return out;
  }
#endif
  return value;
}

void MpiJob::gather(ExtractionResult& part, const ExtractionRequest& whole) const {
  if (!m_active) return;
#ifdef SPEXLAB_HAVE_MPI
  // Rows per rank, in rank order (the same split narrow() made).
  std::vector<int> rows(m_size);
  for (int r = 0; r < m_size; ++r)
    rows[r] = rankFiberRange(whole.fiberMin, whole.nFiber, whole.params.bundlesize, r, m_size).nFiber;
  ExtractionResult all;
  if (root()) {
    const PatchPlan plan = makePatchPlan(*whole.psf, whole.wave, whole.fiberMin, whole.nFiber,
                                         whole.params);
    all.allocate(plan, whole.psf->hsizeY, whole.model, whole.psf->npixX, whole.psf->npixY);
    all.engine = part.engine + " x " + std::to_string(m_size) + " MPI ranks";
    all.psferr = part.psferr;
    all.profile = part.profile;
    all.patches = part.patches;
  }
  auto gatherRows = [&](auto& mine, auto& dest, int perRow, MPI_Datatype type) {
    std::vector<int> counts(m_size), displs(m_size);
    int at = 0;
    for (int r = 0; r < m_size; ++r) {
      counts[r] = rows[r] * perRow;
      displs[r] = at;
      at += counts[r];
    }
    MPI_Gatherv(mine.data.data(), rows[m_rank] * perRow, type, root() ? dest.data.data() : nullptr,
                counts.data(), displs.data(), type, 0, MPI_COMM_WORLD);
  };
  // A rank without a bundle sends nothing but still takes part in every collective.
  const int nw = whole.wave.n, nd = 2 * whole.psf->hsizeY + 1;
  gatherRows(part.flux, all.flux, nw, MPI_DOUBLE);
  gatherRows(part.ivar, all.ivar, nw, MPI_DOUBLE);
  gatherRows(part.mask, all.mask, nw, MPI_UINT32_T);
  gatherRows(part.resolution, all.resolution, nd * nw, MPI_DOUBLE);
  gatherRows(part.chi2pix, all.chi2pix, nw, MPI_DOUBLE);
  gatherRows(part.pixmaskFraction, all.pixmaskFraction, nw, MPI_DOUBLE);
  gatherRows(part.deconvolved, all.deconvolved, nw, MPI_DOUBLE);
  gatherRows(part.covered, all.covered, nw, MPI_UINT8_T);
  if (whole.model && !part.model) part.model = Array2D<double>(whole.psf->npixY, whole.psf->npixX);
  if (whole.model)
    MPI_Reduce(part.model->data.data(), root() ? all.model->data.data() : nullptr,
               int(part.model->size()), MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (root()) {
    all.nonFinitePixels = part.nonFinitePixels; // every rank read the same image
    part = std::move(all);
  }
#else
  (void)part;
  (void)whole;
#endif
}

} // namespace spex::cli
