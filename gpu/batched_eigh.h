// Batched symmetric eigensolver for small matrices (the 74 x 74 fiber blocks of the
// signal decorrelation, EXTRACTION.md §4.4), shaped like LAPACK's dsyev with
// jobz = 'V', uplo = 'L'. One thread block per matrix, the matrix in shared memory:
// Householder tridiagonalisation (dsytd2), Q formed in place (dorgtr/dorg2r), then
// implicit QL with shifts on the tridiagonal (dsteqr), its rotations computed by one
// thread while the other warps apply the previous sweep's rotations to the rows of Q.
// Tested alone against LAPACK's dsyevd on random SPD batches (tests/gpu/
// test_batched_eigh.cpp).
#pragma once

#include <cuda_runtime.h>

namespace spex::gpu {

// Largest n the shared-memory solver takes (n * n doubles must fit in a block's
// shared memory beside a few vectors: 8 n^2 + 88 n bytes <= 227 KB).
constexpr int kSyevMaxN = 160;

// Eigen-decomposition of `batch` symmetric n x n matrices, column-major with leading
// dimension lda, matrix b at A + b * strideA; only the lower triangle is read. On
// return column j of each matrix holds the unit eigenvector of eigenvalue
// W[b * n + j], eigenvalues ascending. info[b] = 0, or i > 0 when the QL iteration did
// not converge for eigenvalue i (then W and A are not defined). n <= kSyevMaxN.
// Asynchronous on `stream`; throws GpuError for bad arguments or a failed launch.
void syevBatched(int n, double* A, int lda, long long strideA, double* W, int* info, int batch,
                 cudaStream_t stream);

// The same, synchronous on the default stream, timed (CUDA events) and with each
// matrix's mean clock cycles per stage as thread 0 of its block saw them, and its
// mean QL sweeps and rotations: for the benchmark notes, not for production.
struct SyevProfile {
  double seconds = 0;
  double tridiagonalCycles = 0, formQCycles = 0, qlCycles = 0, writeCycles = 0;
  double sweeps = 0, rotations = 0;
};
SyevProfile syevBatchedProfile(int n, double* A, int lda, long long strideA, double* W, int* info,
                               int batch);

} // namespace spex::gpu
