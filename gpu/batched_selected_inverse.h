// Selected inversion and solve on the block band of a batched Cholesky factor
// (EXTRACTION.md §4.3-4.4; the GPU counterpart of core/extract/banded_solver.h
// BandedCholesky::selectedInverse and solve). Input: what potrfBlockBandedBatched
// (batched_cholesky.h) leaves with a compact DiagInverses target: `batch` factors L of
// order n = nblk * nb in A (matrix b at A + b * n * n, column-major, leading dimension
// n), whose nb x nb blocks (i, j) with i - j > w are zero, and the inverses L_kk^-1 of
// their diagonal blocks in D (block k of matrix b at D + b * strideD + k * nb * nb,
// leading dimension nb, upper triangle zero). L's own diagonal blocks are never read.
// Neither routine forms L^-1 (n^2 doubles a matrix): the solve substitutes block by
// block through the band, and the selected inversion forms only the blocks of
// C = (L L^T)^-1 inside the band, going up from the last block column (Takahashi,
// Fagan & Chin 1973):
//   G = L(j+1 : j+w, j) L_jj^-1,   C(j+1 : j+w, j) = -C(j+1 : j+w, j+1 : j+w) G,
//   C_jj = L_jj^-T L_jj^-1 - C(j+1 : j+w, j)^T G,
// by one kernel a matrix that keeps G and the C panel in shared memory through all the
// block columns (SelectedInverseKernel::Fused, the default where nb <= 80 and w nb <= 160
// on sm_80+: the engine's 74-wide blocks, w <= 2), or by four strided-batched GEMMs
// (batched_gemm.h: fp64 tensor cores, or cuBLAS; L_jj^-T L_jj^-1 is one) and one kernel
// (C_jj mirrored to the bit, the transposed copies) per block column (Steps; also where
// a cuBLAS handle is given or the shapes do not fit the fused kernel). Tested
// against LAPACK (dpotrf, dpotri, dpotrs) and the CPU engine's BandedCholesky on
// random SPD block-banded batches (tests/gpu/test_batched_selected_inverse.cpp).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace spex::gpu {

// The blocks (i, j) of C = (L L^T)^-1 with j <= i <= j + w and j >= jmin: C_jj (full,
// symmetric to the bit) replaces L_jj^-1 in D block j and is also written over A's
// diagonal block j; C_ij (i > j) replaces L_ij in A, and its transpose C_ji goes into
// A's block (j, i) above the diagonal. Block columns left of jmin are left as they
// were (D keeps their L_kk^-1). The GEMMs need every block of C in the band to the
// right of column j, so jmin costs nothing to the blocks it keeps. T: scratch of
// blockBandedScratch(nblk, nb) doubles per matrix at stride strideT. cublas: null for
// the engine's own GEMMs (batched_gemm.h, the default), or a cuBLAS handle (set to
// `stream`) to run them through cuBLAS. Asynchronous on `stream`; throws GpuError for
// bad arguments and failed launches. Call it after potrsBlockBandedBatched where both are needed: it overwrites
// the band of L.
// kernel: Fused (one launch; T unused) or Steps (the GEMMs by block column, T their
// scratch); both give the same blocks to rounding (docs/benchmarks.md, "Issue 12,
// eighth round: selected inversion (selinv3)").
enum class SelectedInverseKernel { Fused, Steps };
void potriSelectedBlockBandedBatched(cublasHandle_t cublas, int nblk, int nb, int w, int jmin, double* A,
                                     double* D, long long strideD, double* T, long long strideT, int batch,
                                     cudaStream_t stream,
                                     SelectedInverseKernel kernel = SelectedInverseKernel::Fused);

// Whether SelectedInverseKernel::Fused takes these shapes on the current device (nb <= 80,
// min(w, nblk - 1) nb <= 160, compute capability 8.0 or newer); else the Steps run.
bool fusedSelectedInverseTakes(int nblk, int nb, int w);

// x = (L L^T)^-1 y for every matrix: forward then backward block substitution through
// the band (L_ij from A, i - j <= w; L_kk^-1 from D). y and x: n values per matrix at
// stride n (x may be y). Where info is not null and info[b] is 0, a solution with a
// value that is not finite sets info[b] = -1 (the engine fails such patches like a
// failed factorisation). Asynchronous on `stream`; throws GpuError for bad arguments.
void potrsBlockBandedBatched(int nblk, int nb, int w, const double* A, const double* D, long long strideD,
                             const double* y, double* x, int* info, int batch, cudaStream_t stream);

} // namespace spex::gpu
