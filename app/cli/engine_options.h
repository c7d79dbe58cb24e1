// The engine options the running subcommands share (extract, batch, bench): --gpus,
// --gpu-memory and, under `--mpi`, which GPU a rank takes.
#pragma once

#include "app/engine_factory.h"
#include "mpi_job.h"

#include <string>

namespace spex::cli {

// gpus "0,1" picks devices; when empty, an MPI rank of a non-CPU engine takes GPU
// (local rank mod GPUs visible), so 4 GPUs x 5 ranks give each GPU its 5 ranks.
// gpuMemory "6G" or "0.2" (a fraction of the device) is the CUDA engine's budget
// (engine_factory.h gpuMemoryBudget); empty: the engine's default.
EngineOptions engineOptionsFrom(const std::string& gpus, const std::string& gpuMemory,
                                const std::string& engineKind, const MpiJob& mpi);

} // namespace spex::cli
