#include "batched_fiber_blocks.h"

#include "batched_gemm.h"
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
  const int n = nblk * nb;
  const long long nn = (long long)n * n;
  for (int s = lo; s < hi; ++s) {
    const long long o = (long long)s * nb * (n + 1); // X(s nb, s nb)
    gemmStridedBatched(cublas, Trans::T, Trans::N, nb, nb, n - s * nb, 1.0, X + o, n, nn, X + o, n, nn, 0.0,
                       C + (long long)s * nb * nb, nb, strideC, batch, stream, "batched GEMM (fiber blocks)");
  }
}

} // namespace spex::gpu
