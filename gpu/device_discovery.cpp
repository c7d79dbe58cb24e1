// Device discovery (cuda_engine.h): which CUDA devices are there and usable. Never
// throws: no driver or no device is an answer, not an error.
#include "cuda_engine.h"
#include "device_discovery.h"

#include <cuda_runtime.h>

namespace spex {

bool cudaAvailable(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = std::string("no CUDA driver or device (") + cudaGetErrorString(e) + ")";
    return false;
  }
  if (n <= 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess && prop.major >= gpu::kMinComputeMajor) return true;
  }
  if (why) *why = "no CUDA device of compute capability 8.0 or newer (this build's minimum)";
  return false;
}

std::vector<GpuInfo> listGpus() {
  std::vector<GpuInfo> out;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return out;
  }
  int cur = 0;
  cudaGetDevice(&cur);
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    GpuInfo g;
    g.device = d;
    g.name = prop.name;
    g.major = prop.major;
    g.minor = prop.minor;
    g.totalBytes = prop.totalGlobalMem;
    g.multiprocessors = prop.multiProcessorCount;
    std::size_t fr = 0, tot = 0;
    if (cudaSetDevice(d) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess)
      g.freeBytes = fr;
    cudaGetLastError();
    out.push_back(g);
  }
  cudaSetDevice(cur);
  return out;
}

} // namespace spex
