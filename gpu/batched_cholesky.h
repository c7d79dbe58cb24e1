// Batched block-banded Cholesky and triangular inverse for the normal equations of
// the patches (EXTRACTION.md §4.3), shaped like LAPACK's dpotrf and dtrtri ('L',
// 'N'): `batch` symmetric positive definite matrices of order n = nblk * nb, matrix b
// at A + b * n * n, column-major with leading dimension n, whose nb x nb blocks (i, j)
// with |i - j| > w are zero (w = nblk - 1: dense). Blocked by nb: each diagonal block
// factored (and inverted) in shared memory, the panel and trailing update of the w
// blocks below it as batched GEMMs (batched_gemm.h: the engine's own on the fp64 tensor
// cores where `cublas` is null, else cuBLAS's); L^-1 by block rows,
// multiplying only L's band. The same arithmetic as the dense blocked algorithm on the
// non-zero blocks (docs/benchmarks.md, CUDA engine, version 14). Tested against LAPACK
// on random SPD block-banded batches (tests/gpu/test_batched_cholesky.cpp).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <functional>

namespace spex::gpu {

// Optional wrapper around each step (the engine times them in its device timeline):
// called with the step's name ("diagonal block", "panel", "trailing update"; fused:
// "block column", "trailing update") and the work, which it must run once.
using BatchedStepHook = std::function<void(const char* step, const std::function<void()>& work)>;

// How potrfBlockBandedBatched runs each block column k. steps: the diagonal block
// (factor, then L_kk^-1 by a thread per column), the panel L_ik = A_ik L_kk^-T as a
// GEMM into T and a copy back into A, then the trailing update: four launches.
// fused: one kernel factors the diagonal block forming L_kk^-1 in the same sweep (nb
// dependent steps, two block barriers each) and applies the panel's triangular solve
// in shared memory, writing L_ik straight into A, then the trailing update from A: two
// launches (docs/benchmarks.md, "Cholesky launches"). tiled (default): the same two
// launches, the diagonal block factored by 16-column tiles: each tile's pivot chain in
// one warp's registers (shuffles, no block barrier), the rest of the tile's work as
// small products over the whole thread block, four barriers a tile
// (docs/benchmarks.md, "Cholesky latency (cholwarp)"). fused and tiled need nb <= 80
// and run as steps otherwise. All give the same info; the factors agree to rounding.
enum class CholeskyKernel { tiled, fused, steps };

// Scratch doubles per matrix that both routines need (T: nb x (nblk - 1) nb).
long long blockBandedScratch(int nblk, int nb);

// Where potrfBlockBandedBatched writes the inverses L_kk^-1 of L's diagonal blocks:
// block k of matrix b at p + b * stride + k * step, leading dimension ld (lower
// triangular, its upper triangle written as zeros). inX: the diagonal blocks of X =
// L^-1 (same layout as A), where trtriBlockBandedBatched continues from; compact: nblk
// blocks of nb x nb per matrix at D + b * stride (the selected inversion's layout,
// batched_selected_inverse.h).
struct DiagInverses {
  double* p = nullptr;
  int ld = 0;
  long long step = 0, stride = 0;
  static DiagInverses inX(double* X, int nblk, int nb) {
    const long long n = (long long)nblk * nb;
    return {X, int(n), nb * (n + 1), n * n};
  }
  static DiagInverses compact(double* D, int nb, long long stride) {
    return {D, nb, (long long)nb * nb, stride};
  }
};

// A = L L^T. Reads the lower triangle of A (blocks below the band must be zero; the
// upper triangle is never read, it may hold anything) and writes L over it; the
// diagonal blocks of X (same layout as A) receive L_kk^-1 with zero upper triangles.
// info[b] = 0, or j + 1 for the first column j whose pivot is not positive (as dpotrf);
// the factorisation then goes on with a unit pivot so that no NaN spreads. T: scratch
// of blockBandedScratch(nblk, nb) doubles per matrix at stride strideT. cublas: null
// for the engine's GEMMs, or a cuBLAS handle (set to `stream`). Asynchronous; throws GpuError for bad arguments and
// failed launches.
void potrfBlockBandedBatched(cublasHandle_t cublas, int nblk, int nb, int w, double* A, double* X,
                             double* T, long long strideT, int* info, int batch, cudaStream_t stream,
                             const BatchedStepHook& hook = {}, CholeskyKernel kernel = CholeskyKernel::tiled);
// The same with L_kk^-1 written where `inv` says (X need not exist): for the selected
// inversion and the banded solve (batched_selected_inverse.h), inv is compact.
void potrfBlockBandedBatched(cublasHandle_t cublas, int nblk, int nb, int w, double* A, const DiagInverses& inv,
                             double* T, long long strideT, int* info, int batch, cudaStream_t stream,
                             const BatchedStepHook& hook = {}, CholeskyKernel kernel = CholeskyKernel::tiled);

// X = L^-1 (lower triangular), from L in A (band w) and the diagonal blocks of X that
// potrfBlockBandedBatched wrote; X's blocks above the diagonal must be zero (they are
// read as zeros by the GEMMs) and stay zero.
void trtriBlockBandedBatched(cublasHandle_t cublas, int nblk, int nb, int w, const double* A, double* X,
                             double* T, long long strideT, int batch, cudaStream_t stream);

} // namespace spex::gpu
