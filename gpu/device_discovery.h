// Device discovery shared by the engine and its factory functions (cudaAvailable and
// listGpus are declared in cuda_engine.h).
#pragma once

namespace spex::gpu {

// Minimum compute capability of the machine code this build carries (80-real;90).
constexpr int kMinComputeMajor = 8;

} // namespace spex::gpu
