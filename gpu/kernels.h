// Plain data shared by the host orchestration (cuda_engine.cpp) and the kernels
// (*.cu), and the launchers of those kernels. Matrices are column-major (cuBLAS and
// cuSOLVER convention): M(i, j) at M[i + j * ld].
//
// Batch layout (EXTRACTION.md §4): every patch of a batch is solved as an n x n
// system with n = F * nb, F = the largest nfiberPad in the plan, nb = nwavePad.
// Unknown a = i * nb + k is fiber block i (PSF fiber fiberPad0 + i), bin k (grid
// index wavePad0 + k). Patches with fewer fibers are padded with identity blocks.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace spex::gpu {

// One Legendre-parameterised quantity (EXTRACTION.md §1): coefficients for fiber f
// at pool[offset + f * ncoeff + k], domain [wmin, wmax].
struct DevLegendre {
  int offset = 0;
  int ncoeff = 0;
  double wmin = 0, wmax = 0;
};

// Sets: 0 XTRACE, 1 YTRACE, 2 GHSIGX, 3 GHSIGY, 4 + i * (degY + 1) + j GH-i-j.
struct DevPsf {
  const double* pool = nullptr;
  const DevLegendre* sets = nullptr;
  int nfiber = 0;
  int hsizeX = 0, hsizeY = 0;
  int degX = 0, degY = 0;
};
constexpr int kSetX = 0, kSetY = 1, kSetSigX = 2, kSetSigY = 3, kSetGH = 4;

// Spots of fibers [f0, f0 + nf) at grid indices [k0, k0 + nk) (w = wmin + k dw),
// stamp values [ny][nx] per spot, stamp corners (xc, yc).
struct SpotTable {
  double* v = nullptr;
  int2* corner = nullptr;
  int f0 = 0, nf = 0, k0 = 0, nk = 0;
  int nx = 0, ny = 0;
  __host__ __device__ long long index(int fiber, int k) const {
    return (long long)(fiber - f0) * nk + (k - k0);
  }
};

// One patch as the kernels see it (core/plan/patch_plan.h Patch, flattened).
struct DevPatch {
  int fiberPad0, nfiberPad, wavePad0; // solved
  int keptFiberOff, nfiber;           // kept fibers: blocks keptFiberOff ..
  int keptWaveOff, nwave;             // kept bins: k = keptWaveOff ..
  int outFiber, outWave;              // row and bin of the first kept value in the output
  int x0, x1, y0, y1;                 // pixel box, clipped to the CCD
};

// Device frame arrays (rows = this device's fibers), per bin (not per Angstrom).
struct DevFrame {
  double* flux = nullptr;
  double* ivar = nullptr;
  double* resolution = nullptr; // [nrow][2 ndiag + 1][nwave]
  double* chi2pix = nullptr;
  double* pixmask = nullptr;
  double* deconvolved = nullptr;
  double* model = nullptr;      // [npixY][npixX] or null
  int nrow = 0, nwave = 0, ndiag = 0;
};

// Everything a batch's kernels need.
struct BatchView {
  const DevPatch* patches = nullptr; // this batch's patches
  int count = 0;                     // patches in the batch
  int F = 0, nb = 0, n = 0;
  SpotTable spots;
  const double* pix = nullptr;       // image [npixY][npixX]
  const double* ivar = nullptr;
  int npixX = 0, npixY = 0;
  double regularize = 0;
  double psferr = 0.01;
  double* A = nullptr;      // [count][n][n] iCov, then its Cholesky factor L (lower)
  // Fiber blocks below the diagonal that the steps after the normal equations read
  // (the factor's band; F - 1: the whole lower triangle). launchNormalEquationsPairs
  // writes exactly the lower triangle's blocks i - band .. i of every block row i.
  int band = 0;
  double* X = nullptr;      // [count][n][n] L^-1 (lower; upper blocks stay zero); null with
                            // the selected inversion (batched_selected_inverse.h)
  double* T = nullptr;      // [count][nb][(F-1) nb] GEMM scratch
  double* C = nullptr;      // [count][F][nb][nb] fiber blocks of iCov^-1 (selected
                            // inversion: L_kk^-1 between the Cholesky and the inversion)
  double* y = nullptr;      // [count][n] A^T W p
  double* fw = nullptr;     // [count][n] fluxweight
  double* pm = nullptr;     // [count][n] pixmask_fraction
  double* f = nullptr;      // [count][n] deconvolved flux
  int* info = nullptr;      // [count] Cholesky info (0: success)
  double* mbuf = nullptr;   // [count][maxBoxArea] model over the box
  double* cbuf = nullptr;   // [count][maxBoxArea] chi^2 per pixel (-1: excluded)
  double* chi2 = nullptr;   // [count] mean chi^2 per used pixel
  // [count][maxBoxArea] or null: each patch's own model over its box (rows of the box
  // width; the kept unknowns' A f, what the model image adds for the patch), zero for
  // a failed patch: the per-patch model tiles of ExtractionResult::modelTiles.
  double* tiles = nullptr;
  int maxBoxArea = 0;
  DevFrame out;
  int noise = 0;            // Decorrelation::Noise: Q from the whole patch
  int givenEigen = 0;       // signal mode: eigen-pairs from cuSOLVER in K/KW, not Jacobi
  int maxKept = 0;          // kept fibers per patch slot in K
  double* K = nullptr;      // [count][maxKept][nb][nb] kept blocks, then eigenvectors
  double* KW = nullptr;     // [count][maxKept][nb] eigenvalues
  double* W = nullptr;      // noise mode: eigenvalues [count][n]
};

// Launchers (each checks the launch and throws GpuError on failure).
// Warp (default): a warp per spot, four a block; Block: a 128-thread block per spot (the
// older kernel). The same values and corners to the bit.
enum class SpotKernel { Warp, Block };
void launchSpotTable(const DevPsf& psf, const SpotTable& table, double wmin, double dw,
                     cudaStream_t stream, SpotKernel kind = SpotKernel::Warp);
// Spots at arbitrary (fiber, w) pairs into table-shaped storage (nf = count, nk = 1);
// used by the tests against the C++ evaluation.
void launchSpotList(const DevPsf& psf, const int* fibers, const double* waves, int count,
                    double* v, int2* corner, cudaStream_t stream, SpotKernel kind = SpotKernel::Warp);
// Stamp corners (GaussHermitePsf::corner, to the bit) of fibers [f0, f0 + nf) at grid
// bins [k0, k0 + nk) (w = wmin + k dw) into x and y at [(f - f0) * nk + (k - k0)]: the
// corner table a patch plan is made from (core/plan/patch_plan.h PlanCorners).
void launchCornerTable(const DevPsf& psf, int f0, int nf, int k0, int nk, double wmin, double dw, int* x,
                       int* y, cudaStream_t stream);
// Each patch's corner extents (core/plan PatchExtents, to the bit: integer min and
// max) from the corner table launchCornerTable made (fibers from f0, bins from k0, nk
// bins a fiber): win[5 p ..] = fiberPad0, nfiberPad, wavePad0, nwavePad, wave0 of
// patch p; out[8 p ..] = pad {xmin, xmax, ymin, ymax}, then core (bins wave0 .. wave0 +
// step). A warp per patch.
void launchPatchExtents(const int* x, const int* y, int f0, int k0, int nk, const int* win, int count, int step,
                        int* out, cudaStream_t stream);
void launchLegendreSums(const double* coeff, int ncoeff, const double* u, int count,
                        double* out, cudaStream_t stream);
void launchGaussHermiteBasis(int deg, int hsize, const double* d, const double* sigma,
                             int count, double* out, cudaStream_t stream);

// out[p] = the fiber coupling width of patch p: the largest fiber distance between two
// stamps that overlap inside its box (blocks of iCov further apart are exactly zero).
void launchFiberCoupling(const DevPatch* patches, int count, const SpotTable& st, int nb, int* out,
                         cudaStream_t stream);
// iCov (both triangles, only where stamps overlap: A must be zero first), y, fw, pm of
// the patches' real unknowns (y, fw, pm zero first too).
void launchNormalEquations(const BatchView& b, cudaStream_t stream);
// The same values to the bit, written as the later steps read them: every entry of the
// lower triangle's block band (b.band), zeros included, and y, fw, pm of every unknown,
// so nothing needs clearing first; the upper triangle and the lower blocks outside the
// band keep what they held. Needs normalEquationsPairsFit (stamps of at most 65535 px,
// fewer than 2^31 spots, 0 <= band < F); throws GpuError otherwise.
bool normalEquationsPairsFit(const BatchView& b);
void launchNormalEquationsPairs(const BatchView& b, cudaStream_t stream);
// The same values to the bit, written as launchNormalEquationsPairs writes them, by one
// thread block per group of 8 unknowns (shared corners and stamps, pipelined pair
// loads); slower than the pair kernel on an H100 (23.3 vs 16.7 ms a frame), kept for A/B. Needs normalEquationsTileFit (normalEquationsPairsFit, n < 65536 and the
// block's shared memory within the device's); throws GpuError otherwise.
bool normalEquationsTileFit(const BatchView& b);
// The same values to the bit, written as launchNormalEquationsPairs writes them, by the
// same block per unknown with fewer instructions a pair (its walk set up once by the
// thread that lists it, 32-bit offsets, a pair's stamp loads in flight at once, no integer
// division by a runtime width). Needs normalEquationsLeanFit (normalEquationsPairsFit,
// stamps at most 255 px wide, all stamp values of the table under 2^32, at most 65535
// candidates a column and n < 2^22); throws GpuError otherwise.
// tree: the same kernel with every warp sum (a pair's, y's, fw's and pm's) done by one thread
// a sum from the lanes' partials in shared memory, in the butterfly's order (treeSum: the
// same values to the bit, fewer instructions; docs/benchmarks.md, "eighth round").
bool normalEquationsLeanFit(const BatchView& b);
void launchNormalEquationsLean(const BatchView& b, cudaStream_t stream, bool tree = false);
void launchNormalEquationsTile(const BatchView& b, cudaStream_t stream);
void launchPrior(const BatchView& b, cudaStream_t stream);
// L_kk^-1 of every diagonal block of the factors in b.A into D: block k of patch p at
// D + p * strideD + k * stepD, leading dimension ldD (batched_cholesky.h DiagInverses;
// the upper triangle written as zeros).
void launchTriangularInverseDiag(const BatchView& b, double* D, int ldD, long long stepD, long long strideD,
                                 cudaStream_t stream);
// Blocked Cholesky step k: factor diagonal block k in place, L_kk^-1 into D (as above),
// info on failure; copy a panel T (M x nb, ld M, stride sT) back below diagonal block k
// (M rows: the whole column below the block, or its band).
void launchCholeskyDiag(const BatchView& b, int k, double* D, int ldD, long long stepD, long long strideD,
                        cudaStream_t stream);
void launchCopyPanel(const BatchView& b, int k, int M, long long sT, cudaStream_t stream);
// Block column k in one launch (batched_cholesky.h CholeskyKernel::tiled and ::fused):
// diagonal block factored with L_kk^-1 into D as above (tiled: by 16-column tiles, the
// pivot chain in one warp; else one sweep of nb steps), then the M panel rows below it
// L_ik = A_ik L_kk^-T in place in A; for nb <= 80 (choleskyColumnFusedFits).
bool choleskyColumnFusedFits(int nb);
void launchCholeskyColumnFused(const BatchView& b, int k, int M, double* D, int ldD, long long stepD,
                               long long strideD, bool tiled, cudaStream_t stream);
void launchSolveFlux(const BatchView& b, cudaStream_t stream);
void launchDecorrelateSignal(const BatchView& b, cudaStream_t stream);
void launchGatherKeptBlocks(const BatchView& b, cudaStream_t stream);
void launchNoiseScale(const BatchView& b, double* E, cudaStream_t stream);
void launchNoiseOutputs(const BatchView& b, cudaStream_t stream);
void launchChi2Model(const BatchView& b, cudaStream_t stream);

// Jacobi sweep counters of the signal decorrelation on the current device (for the
// benchmark notes): total sweeps, blocks, largest sweep count; optionally reset.
struct JacobiStats {
  unsigned long long sweeps = 0, blocks = 0, maxSweeps = 0;
};
JacobiStats jacobiStats(bool reset);
// Ascending eigenvalues of count packed symmetric nb x nb matrices by the engine's
// Jacobi solver (for the comparison with cuSOLVER in the tests).
void launchJacobiEigenvalues(const double* C, int nb, int count, double* w, cudaStream_t stream);

// Throws GpuError "what: <cuda error>" when err is not cudaSuccess.
void throwIfCuda(cudaError_t err, const char* what, const char* file, int line);

} // namespace spex::gpu

#define SPEX_CUDA(call) ::spex::gpu::throwIfCuda((call), #call, __FILE__, __LINE__)
#define SPEX_CUDA_LAUNCH(what) ::spex::gpu::throwIfCuda(cudaGetLastError(), what, __FILE__, __LINE__)
