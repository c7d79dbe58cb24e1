// The fiber blocks of a covariance from the inverse of its Cholesky factor, batched
// (the signal decorrelation's C_s, EXTRACTION.md §4.4): for `batch` lower-triangular
// X = L^-1 of order n = nblk * nb (column-major, leading dimension n, matrix b at
// X + b * n * n), the diagonal nb x nb blocks s of X^T X = (L L^T)^-1:
//   C_s = X(s nb : n, s)^T X(s nb : n, s)      (block column s of X below the diagonal)
// for s in [lo, hi), one strided-batched GEMM per block column (batched_gemm.h: fp64
// tensor cores, or cuBLAS where a handle is given). Like
// LAPACK's dsyrk on each block column, but the full nb x nb block is written. Tested
// against a plain host product (tests/gpu/test_batched_fiber_blocks.cpp).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace spex::gpu {

// C: block s of matrix b at C + b * strideC + s * nb * nb (nb x nb, leading dimension
// nb); blocks outside [lo, hi) are not written. The upper triangles of X's diagonal
// blocks are read and must be zero (the engine's X keeps them so); X's blocks above
// the diagonal blocks are never read.
// cublas: null for the engine's own GEMMs, or a cuBLAS handle (set to `stream`).
// Asynchronous on `stream`; throws GpuError for bad arguments, GpuError naming cuBLAS's
// status on failure.
void fiberBlocksBatched(cublasHandle_t cublas, int nblk, int nb, int lo, int hi, const double* X,
                        double* C, long long strideC, int batch, cudaStream_t stream);

} // namespace spex::gpu
