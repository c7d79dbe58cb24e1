// The CUDA math libraries (cuBLAS, cuSOLVER) and CUPTI, loaded when first needed.
//
// Mapping cuBLAS/cuBLASLt/cuSOLVER (and the cuSPARSE and nvJitLink they pull in) costs a
// process ~100-150 ms of CPU before main() (page faults of their relocations, cuBLASLt's
// static constructors), paid by every `spexlab-cli` run, `--help` and `--engine cpu`
// included, when they are linked. So libspexgpu does not link them: cuda_libraries.cpp
// defines the few cuBLAS, cuSOLVER and CUPTI entry points the engine calls, and each
// opens its library with dlopen on first use (docs/benchmarks.md, "Cold process").
// The CUDA runtime (libcudart, ~1 ms) and the driver stay as they were.
//
// A new cuBLAS/cuSOLVER/CUPTI function in gpu/ needs one line in cuda_libraries.cpp
// (the link fails with "undefined reference to cublasXxx" until it has one).
#pragma once

#include <string>
#include <vector>

namespace spex::gpu {

// Opens cuBLAS and cuSOLVER (once per process; later calls return the first answer).
// False with *why naming the library that could not be opened and the loader's
// reason. The engine factory calls this before making a CUDA engine, so that a missing
// library is reported by name instead of as a failed cublasCreate.
bool loadCudaMathLibraries(std::string* why = nullptr);

// The same for CUPTI (the kernel profile, --profile-kernels).
bool loadCupti(std::string* why = nullptr);

// The file names tried for a library, in order (for messages and tests): the plain
// soname (LD_LIBRARY_PATH, the executable's RUNPATH, ld.so.cache), then beside the
// loaded CUDA runtime, then in the toolkit this build was made with.
std::vector<std::string> cudaLibraryCandidates(const std::string& soname);

// Opens `soname` as the loaders above do (RTLD_NOW | RTLD_LOCAL, the candidates in
// order); false with *why naming it and each place tried. The handle stays open. For
// tests of the message; the engine's libraries go through loadCudaMathLibraries.
bool openCudaLibrary(const std::string& soname, std::string* why);

} // namespace spex::gpu
