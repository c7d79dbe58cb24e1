// Batched symmetric eigensolver for small matrices (the 74 x 74 fiber blocks of the
// signal decorrelation, EXTRACTION.md §4.4), shaped like LAPACK's dsyev with
// jobz = 'V', uplo = 'L' and a caller-provided workspace. Three passes
// (docs/benchmarks.md, CUDA engine, version 11):
//   1. reduce  one thread block per matrix, the matrix in shared memory: Householder
//              tridiagonalisation (dsytd2, each step's update and the next step's
//              matrix-vector product in one pass), then Q = H_0 ... H_{n-3}
//              accumulated in registers, a row per 16 lanes (n <= 80; larger n: in
//              place in shared memory, dorgtr/dorg2r); Q into A, the tridiagonal
//              (d, e) into the workspace (docs/benchmarks.md, Issue 12, fifth round);
//   2. QL      one thread per matrix: implicit QL with shifts on (d, e) (dsteqr), no
//              vectors; every sweep's Givens rotations are recorded in the workspace.
//              Thousands of these serial chains run at once instead of one per block;
//   3. apply   one thread block per matrix: the recorded rotations applied to the
//              rows of Q (a thread per row), four sweeps at a time pipelined in
//              registers (a column of Q read and written once per four sweeps),
//              eigenvalues sorted ascending with their vectors.
// A matrix whose rotations do not fit its share of the workspace runs the QL in pass
// 3 instead (one thread computes the rotations while the others apply them): any
// workspace from syevBatchedMinWorkspace up gives the same results, a larger one is
// faster. Tested alone against LAPACK's dsyevd on random SPD batches
// (tests/gpu/test_batched_eigh.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace spex::gpu {

// The method of pass 2 and 3. Chain: the QL chain above. Bisect (docs/benchmarks.md,
// Issue 12, eighth round; gpu/eigh_bisect.cuh): pass 1 leaves the reflectors; pass 2
// finds the eigenvalues of the tridiagonal by bisection on Sturm counts (SyevValues) and its
// eigenvectors by twisted factorizations (a thread per eigenvalue; clusters as dstein);
// pass 3 orthonormalises them (SyevOrtho below: Newton-Schulz by default, or CholQR) and
// multiplies by Q in registers (Z^T = V^T Q^T). n <= 80 (larger n run the chain); needs
// syevBatchedBisectWorkspace doubles of workspace.
enum class SyevMethod { Chain, Bisect };

// Pass 1's tridiagonalisation (docs/benchmarks.md, Issue 12, ninth round). Warp (the
// default since): one warp a matrix (gpu/eigh_reduce_warp.cuh: a lane's rows whole, no
// barrier, five matrices an SM), n <= 80 (larger n run Block). Block: the fused kernel,
// a 192-thread block a matrix (two barriers a step), kept for A/B. Both leave the same
// kind of reflectors and tridiagonal, equal to rounding.
enum class SyevReduce { Block, Warp };

// Pass 3 of the bisection method (docs/benchmarks.md, Issue 12, ninth round (eighns);
// gpu/eigh_bisect.cuh): NewtonSchulz (the default), X <- X (3I - X^T X) / 2 while the
// Gram matrix departs from I by more than 1e-9 (a CholQR pass first where by more than
// 1e-2), the last step and the reflectors applied in registers, 160 threads a matrix;
// CholQR, the eighth round's kernel (CholQR once, twice where needed, then Q by
// syevFormQKernel's tile). The same decomposition to rounding.
enum class SyevOrtho { NewtonSchulz, CholQR };

// How the bisection method finds the eigenvalues (docs/benchmarks.md, Issue 12, ninth
// round). DivisionFree (default) and Newton: a kernel of its own before pass 2, a thread
// per eigenvalue with the matrices packed (3 of n = 74 in 224 threads), bisection on the
// division-free Sturm count (the determinant recurrence, one FMA a row on the chain,
// rescaled by powers of two); pass 2 then ranks them and computes the vectors (23 500
// blocks: pass 2 12.35 -> 10.75 ms on an H100). Newton: once the bracket holds its
// eigenvalue alone, Newton's steps on the same recurrence (with its derivative), ~20
// counts an eigenvalue instead of ~53, but no faster on the device (the warp waits for
// its slowest lane and runs both count paths; kept for A/B). Ratio: inside pass 2,
// quadsection on the ratio form (dstebz's pivots), as in the eighth round. All end on a
// bracket of width eps ||T|| with the same backward error.
enum class SyevValues { DivisionFree, Newton, Ratio };

// Where the bisection method's pass 2 keeps each thread's twisted-factorization scratch
// (docs/benchmarks.md, Issue 12, ninth round, eighvec). Global: D+, D- and the vector
// in the workspace (the eighth and ninth rounds' syevBisectKernel). Shared: D+ and D- in
// one column of shared memory a thread (D- over D+ below the twist, D+ recomputed above
// it), the vector stored once (syevBisectSharedKernel, 4 blocks an SM at n = 74; the
// default). The same vectors to the bit.
enum class SyevVectors { Global, Shared };

// Largest n the shared-memory solver takes (n * n doubles must fit in a block's
// shared memory beside a few vectors).
constexpr int kSyevMaxN = 160;

// Doubles of workspace for `batch` matrices of order n so that a matrix's record may
// hold up to sweepsPerMatrix QL sweeps of n entries each (0: 3 n; random SPD matrices
// of n = 74 need ~2.03 n on average).
std::size_t syevBatchedWorkspace(int n, int batch, long long sweepsPerMatrix = 0);
// The least workspace the bisection method accepts (~3 n^2 + 3 n doubles a matrix;
// syevBatchedWorkspace's default is larger).
std::size_t syevBatchedBisectWorkspace(int n, int batch);
// The least workspace syevBatched accepts (no rotation record: every matrix then runs
// its QL in the apply pass, as the one-kernel solver of version 9 did).
std::size_t syevBatchedMinWorkspace(int n, int batch);

// Eigen-decomposition of `batch` symmetric n x n matrices, column-major with leading
// dimension lda, matrix b at A + b * strideA; only the lower triangle is read. On
// return column j of each matrix holds the unit eigenvector of eigenvalue
// W[b * n + j], eigenvalues ascending. info[b] = 0, or i > 0 when the QL iteration did
// not converge for eigenvalue i (then W and A are not defined). n <= kSyevMaxN.
// work: lwork >= syevBatchedMinWorkspace(n, batch) doubles of device memory, 16-byte
// aligned, each matrix taking an equal share. Asynchronous on `stream`; throws
// GpuError for bad arguments or a failed launch.
void syevBatched(int n, double* A, int lda, long long strideA, double* W, int* info, int batch,
                 double* work, std::size_t lwork, cudaStream_t stream, SyevMethod method = SyevMethod::Chain,
                 SyevOrtho ortho = SyevOrtho::NewtonSchulz, SyevValues values = SyevValues::DivisionFree,
                 SyevReduce reduce = SyevReduce::Warp, SyevVectors vectors = SyevVectors::Shared);

// The same, synchronous on the default stream, each pass timed (CUDA events), with
// clock-cycle counts per stage (thread 0 of a block, or the matrix's thread in the QL
// pass; means per matrix), the mean QL sweeps and rotations, and how many matrices
// fell back to the in-block QL: for the benchmark notes, not for production.
// qlLanes: matrices per warp in the QL pass (1, 2, 4, 8, 16 or 32; 0: as syevBatched chooses,
// 1 where the batch fits the GPU at once, else 32: docs/benchmarks.md, version 15 and
// Issue 12, fourth round).
// applyGroup: recorded sweeps applied together in pass 3 (1 or 4; 0: 4); every
// grouping gives the same eigenvectors to the bit.
// reduce: the pass-1 kernels (0: the fused tridiagonalisation (SyevReduce::Block) and,
// where n <= 80, Q by its own register-tile kernel; 1: the three-pass reduction of the
// fourth round, kept for A/B; 2: the fused kernel forming Q itself; 3: the one-warp
// kernel (SyevReduce::Warp, syevBatched's default), then Q as 0 (n <= 80, else as 0)).
// Method Bisect: 3 the one-warp kernel, anything else the fused kernel.
// method Bisect: qlSeconds / qlCycles are pass 2 (bisection and vectors), applySeconds /
// applyCycles pass 3 (CholQR and Q); sweeps the quadsection steps a matrix (all its
// eigenvalues), fallbacks the matrices with a cluster of close eigenvalues, rotations
// the matrices that took a second CholQR pass (ortho CholQR) or any CholQR pass
// (NewtonSchulz); orthoPasses the Newton-Schulz kernel's passes before its last step a
// matrix (Gram-and-step or CholQR; 0 where the twisted vectors' Gram matrix was within
// 1e-9 of I). With SyevValues::Newton or DivisionFree, valuesSeconds is the values
// kernel's part of qlSeconds, valuesCycles its thread 0's cycles a block
// (valuesMatsPerBlock matrices), and sweeps its counts a matrix.
struct SyevProfile {
  double seconds = 0, reduceSeconds = 0, qlSeconds = 0, applySeconds = 0, valuesSeconds = 0;
  double tridiagonalCycles = 0, formQCycles = 0, qlCycles = 0, applyCycles = 0, valuesCycles = 0;
  double sweeps = 0, rotations = 0, orthoPasses = 0;
  // Newton-Schulz pass 3, thread 0's cycles a block by phase: X in, Gram, the passes
  // before the last step, the last step, the reflectors in, their application and Z out.
  double orthoPhaseCycles[6] = {};
  long long fallbacks = 0;
};
SyevProfile syevBatchedProfile(int n, double* A, int lda, long long strideA, double* W, int* info,
                               int batch, double* work, std::size_t lwork, int qlLanes = 0,
                               int applyGroup = 0, int reduce = 0, SyevMethod method = SyevMethod::Chain,
                               SyevOrtho ortho = SyevOrtho::NewtonSchulz,
                               SyevValues values = SyevValues::DivisionFree,
                               SyevVectors vectors = SyevVectors::Shared);

} // namespace spex::gpu
