#include "batched_fiber_blocks.h"

#include "device_memory.h"

#include <string>

namespace spex::gpu {

void fiberBlocksBatched(cublasHandle_t cublas, int nblk, int nb, int lo, int hi, const double* X,
                        double* C, long long strideC, int batch, cudaStream_t stream) {
  if (nblk < 1 || nb < 1 || lo < 0 || hi > nblk || batch < 0 || strideC < (long long)nblk * nb * nb)
    throw GpuError("fiberBlocksBatched: bad arguments (nblk " + std::to_string(nblk) + ", nb " +
                   std::to_string(nb) + ", blocks [" + std::to_string(lo) + ", " + std::to_string(hi) +
                   "), batch " + std::to_string(batch) + ", strideC " + std::to_string(strideC) + ")");
  if (batch == 0 || lo >= hi) return;
  checkCublas(cublasSetStream(cublas, stream), "cublasSetStream");
  const int n = nblk * nb;
  const long long nn = (long long)n * n;
  const double one = 1.0, zero = 0.0;
  for (int s = lo; s < hi; ++s) {
    const long long o = (long long)s * nb * (n + 1); // X(s nb, s nb)
    checkCublas(cublasDgemmStridedBatched(cublas, CUBLAS_OP_T, CUBLAS_OP_N, nb, nb, n - s * nb, &one,
                                          X + o, n, nn, X + o, n, nn, &zero,
                                          C + (long long)s * nb * nb, nb, strideC, batch),
                "cublasDgemmStridedBatched (fiber blocks)");
  }
}

} // namespace spex::gpu
