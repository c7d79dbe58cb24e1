// Batched fp64 GEMM for the engine's small, fixed shapes (74- and 148-wide blocks of
// the block-banded Cholesky, the selected inversion and the fiber blocks), shaped like
// cuBLAS's cublasDgemmStridedBatched / BLAS dgemm:
//   C_b = alpha op(A_b) op(B_b) + beta C_b,   b = 0 .. batch - 1,
// column-major, matrix b of A at A + b * strideA (likewise B, C). On sm_90 the products
// run on the FP64 tensor cores as `mma.sync.aligned.m16n8k8.f64` (DMMA), on sm_80 as four
// m8n8k4 each: a thread block computes an 80 x 80 tile of one C_b (five warps of 16 x 80,
// ten m16n8 fragments each), op(A) and op(B) staged through shared memory 16 columns of
// k at a time, two stages of `cp.async` so the next chunk loads while this one is
// multiplied; older archs take the same loop on the FP64 units. Why not
// cuBLAS: its batched DGEMM runs these 74-wide products at ~10 TFLOP/s on an H100 and
// loads its kernels lazily (~130 ms of a cold process); docs/benchmarks.md, "Issue 12,
// sixth round: tensor-core GEMMs (selgemm)". Tested against a host product in long
// double on random batches (tests/gpu/test_batched_gemm.cpp).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace spex::gpu {

enum class Trans { N, T }; // op(X) = X or X^T, as BLAS's 'N' and 'T'

// BLAS semantics: m, n, k >= 0; lda >= max(1, rows of A as stored) (m for N, k for T),
// likewise ldb, and ldc >= max(1, m); beta = 0 means C is not read (NaN there does not
// spread), alpha = 0 means A and B are not read. C must not overlap A or B. Strides may
// be 0 for A and B (one matrix for the whole batch). Asynchronous on `stream`; throws
// GpuError for bad arguments or a failed launch.
void gemmStridedBatched(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* A, int lda,
                        long long strideA, const double* B, int ldb, long long strideB, double beta, double* C,
                        int ldc, long long strideC, int batch, cudaStream_t stream);

// The same through cuBLAS where `cublas` is not null (the A side of the engine's
// SPEXLAB_CUDA_GEMM switch; the handle is set to `stream`), else gemmStridedBatched.
// `what` names the product in error messages.
void gemmStridedBatched(cublasHandle_t cublas, Trans ta, Trans tb, int m, int n, int k, double alpha,
                        const double* A, int lda, long long strideA, const double* B, int ldb, long long strideB,
                        double beta, double* C, int ldc, long long strideC, int batch, cudaStream_t stream,
                        const char* what);

} // namespace spex::gpu
