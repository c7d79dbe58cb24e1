// Engine selection shared by spexlab-cli and the workbench: "cpu", "cuda" or "auto".
// Without a CUDA build, GPU or driver, "auto" falls back to the CPU engine and says
// why in one line; "cuda" fails with that reason.
#pragma once

#include "core/extract/engine.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace spex {

struct EngineChoice {
  std::unique_ptr<Engine> engine;
  std::string note; // one line for the user when auto fell back, else empty
};

// gpus: device ordinals to use (empty: all visible). Throws InputError for an unknown
// kind and GpuError when "cuda" cannot be had.
EngineChoice makeEngine(const std::string& kind, const std::vector<int>& gpus = {});

// "none: <reason>" or the GPUs found, for Help -> About and `spexlab-cli --version`.
std::string describeGpus();
bool cudaBuilt();

// Peak device memory (bytes) a CUDA engine has held on each of its GPUs; empty for
// other engines.
std::vector<std::size_t> enginePeakDeviceBytes(const Engine& engine);

// The GPU's measured ceilings (cuBLAS DGEMM FLOP/s, device copy bytes/s); throws
// GpuError without CUDA.
struct GpuCeilings {
  double dgemmFlops = 0, copyBytesPerS = 0;
};
GpuCeilings measureGpuCeilings(int device);

} // namespace spex
