// The engine options every running subcommand shares (extract, batch, bench):
// --gpus, --gpu-memory and, under `--mpi`, which GPU a rank takes.
#pragma once

#include "app/engine_factory.h"
#include "mpi_job.h"
#include "options.h"

namespace spex::cli {

// --gpus 0,1 picks devices; without it, an MPI rank takes GPU (local rank mod GPUs
// visible), so 4 GPUs x 5 ranks give each GPU its 5 ranks. --gpu-memory 6G or 0.2
// (a fraction of the device) is the CUDA engine's budget (engine_factory.h).
EngineOptions engineOptionsFrom(const Options& o, const MpiJob& mpi);

} // namespace spex::cli
