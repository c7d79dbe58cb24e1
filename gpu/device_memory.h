// Device and pinned host memory of the CUDA engine: arrays that grow on demand and
// count the bytes the engine holds (CudaEngineOptions::memoryBudgetBytes), and the
// status checks of the CUDA libraries.
#pragma once

#include "core/errors.h"
#include "kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <string>

namespace spex::gpu {

inline void checkCublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw GpuError(std::string("cuBLAS error ") + std::to_string(int(s)) + " in " + what);
}
inline void checkCusolver(cusolverStatus_t s, const char* what) {
  if (s != CUSOLVER_STATUS_SUCCESS)
    throw GpuError(std::string("cuSOLVER error ") + std::to_string(int(s)) + " in " + what);
}

// Device memory that grows on demand and counts what the engine holds.
template <class T>
class DeviceArray {
public:
  DeviceArray() = default;
  ~DeviceArray() { release(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  // Ensures room for n elements; returns false on cudaErrorMemoryAllocation or when
  // *held would pass limit (the caller shrinks its batch), throws GpuError on any
  // other failure.
  bool reserve(std::size_t n, std::size_t* held, std::size_t limit = SIZE_MAX) {
    if (n <= m_cap) return true;
    if (held && *held - m_cap * sizeof(T) + std::max<std::size_t>(n, 1) * sizeof(T) > limit)
      return false;
    release(held);
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T));
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return false;
    }
    SPEX_CUDA(e);
    m_p = static_cast<T*>(p);
    m_cap = n;
    if (held) *held += m_cap * sizeof(T);
    return true;
  }
  void need(std::size_t n, std::size_t* held, const char* what) {
    if (!reserve(n, held))
      throw GpuError(std::string("out of device memory allocating ") + what + " (" +
                     std::to_string(n * sizeof(T) >> 20) + " MiB)");
  }
  void release(std::size_t* held = nullptr) {
    if (m_p) cudaFree(m_p);
    if (held && m_cap) *held -= m_cap * sizeof(T);
    m_p = nullptr;
    m_cap = 0;
  }
  T* get() const { return m_p; }
  std::size_t capacity() const { return m_cap; }
  // Bytes held would grow by this much for room for n elements.
  std::size_t growth(std::size_t n) const { return n > m_cap ? (n - m_cap) * sizeof(T) : 0; }

private:
  T* m_p = nullptr;
  std::size_t m_cap = 0;
};

template <class T>
class PinnedArray {
public:
  ~PinnedArray() {
    if (m_p) cudaFreeHost(m_p);
  }
  T* get(std::size_t n) {
    if (n > m_cap) {
      if (m_p) cudaFreeHost(m_p);
      m_p = nullptr;
      void* p = nullptr;
      SPEX_CUDA(cudaMallocHost(&p, std::max<std::size_t>(n, 1) * sizeof(T)));
      m_p = static_cast<T*>(p);
      m_cap = n;
    }
    return m_p;
  }

private:
  T* m_p = nullptr;
  std::size_t m_cap = 0;
};

} // namespace spex::gpu
