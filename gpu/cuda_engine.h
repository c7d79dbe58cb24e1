// CudaEngine: the whole extraction (EXTRACTION.md §2-§4) on one or more NVIDIA GPUs,
// behind the same Engine interface as the CPU engine. The host reads nothing itself:
// it uploads the image, the PSF coefficients and the patch plan, launches batches of
// patches and copies the stitched frame back; spots, normal equations, Cholesky,
// decorrelation, chi2pix, pixmask_fraction, the model image and stitching all run on
// the device. Every phase is an NVTX range and a device-timed Profile range on the
// lane "cuda:N stream k".
//
// This header needs no CUDA headers, so the CLI and the app can include it freely;
// the free functions below never throw when no driver or no device is present.
#pragma once

#include "core/extract/engine.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <string>
#include <vector>

namespace spex {

struct GpuInfo {
  int device = 0;             // CUDA ordinal
  std::string name;           // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;   // compute capability
  std::size_t totalBytes = 0; // device memory
  std::size_t freeBytes = 0;
  int multiprocessors = 0;
};

// True when a driver and at least one CUDA device are usable; otherwise false with
// the reason in *why (e.g. "no CUDA driver: ...", "no CUDA device"). Never throws.
bool cudaAvailable(std::string* why = nullptr);

// The usable devices; empty (never throws) when there is no driver or device.
std::vector<GpuInfo> listGpus();

// Default device-memory budget of one engine on one device (CudaEngineOptions::
// memoryBudgetBytes = 0): everything the engine holds there for a full DESI frame
// (image, PSF, spot table, frame arrays, batch workspaces) stays within it, so many
// processes can share one GPU. Inside the budget the batch is kCudaTargetBatch
// patches per stream: the size that keeps the card busy (docs/benchmarks.md, "memory
// budget"), not the largest that fits.
constexpr std::size_t kCudaDefaultMemoryBudget = std::size_t(4) << 30;
constexpr int kCudaTargetBatch = 256;

// How the engine is set up. The engine reads no environment variables; the factory
// (app/engine_factory.cpp) turns SPEXLAB_CUDA_* and command-line options into these.
struct CudaEngineOptions {
  std::vector<int> gpus;  // devices to use (empty: all); bundles are split across them
  // Bytes of device memory the engine may hold on each device (0:
  // kCudaDefaultMemoryBudget). A budget smaller than the request's frame arrays plus
  // one patch per stream fails with a GpuError naming the budget and what it needed.
  std::size_t memoryBudgetBytes = 0;
  int streams = 2;   // workspaces (each with its own stream) per device
  int maxBatch = 0;  // patches per batch; 0: kCudaTargetBatch (less where the budget binds)
  // Signal decorrelation's fiber-block eigensolver (the kept 74 x 74 blocks of a
  // patch): Bisect, syevBatched's bisection method (SyevMethod::Bisect: bisection,
  // twisted factorizations, Newton-Schulz or CholQR (newtonSchulzEigh below), no QL chain; Issue 12, eighth round: the default
  // since its merge, warm frame 0.096-0.098 s against 0.101-0.102 s on an H100);
  // Tridiagonal, syevBatched's QL chain (gpu/batched_eigh.h; also what Bisect runs for
  // blocks over 80 or a workspace too small for it); Cusolver, cusolverDnXsyevBatched on
  // the same blocks (0.12 s a frame on an H100); Jacobi, the older shared-memory Jacobi
  // kernel on all blocks (0.29 s).
  // docs/benchmarks.md has the figures. Factory switch:
  // SPEXLAB_CUDA_EIGH=tridiagonal|cusolver|jacobi|bisect.
  enum class Eigh { Tridiagonal, Cusolver, Jacobi, Bisect };
  Eigh eigh = Eigh::Bisect;
  // syevBatched's pass 1 (Tridiagonal and Bisect; gpu/batched_eigh.h SyevReduce): Warp
  // (default), one warp a fiber block (gpu/eigh_reduce_warp.cuh; docs/benchmarks.md,
  // "Issue 12, ninth round: eigensolver reduce (eighred)": eigh one stream 40.1 -> 38.0 ms
  // in its first form); Block, the fused 192-thread kernel a block. The same reflectors
  // to rounding. Factory switch: SPEXLAB_CUDA_EIGH_REDUCE=block|warp.
  enum class EighReduce { Block, Warp };
  EighReduce eighReduce = EighReduce::Warp;
  // Bisect's pass 3 (gpu/batched_eigh.h SyevOrtho): true (default), Newton-Schulz steps
  // and the reflectors applied in registers (Issue 12, ninth round, eighns); false, the
  // eighth round's CholQR kernel. The same decomposition to rounding. Factory switch:
  // SPEXLAB_CUDA_EIGH_ORTHO=ns|cholqr.
  bool newtonSchulzEigh = true;
  // Bisect's eigenvalues (syevBatched's SyevValues; docs/benchmarks.md, Issue 12, ninth
  // round): DivisionFree (default), a kernel of their own before the vectors, bisection
  // on the division-free Sturm count (eigh one stream 40.1 -> 38.7 ms, warm frame 0.096
  // -> 0.093-0.094 s on an H100); Newton, the same kernel with Newton's steps once an
  // eigenvalue is isolated (a draw with DivisionFree); Ratio, quadsection on dstebz's
  // ratio count inside the vector kernel (the eighth round's). Factory switch:
  // SPEXLAB_CUDA_EIGH_VALUES=divfree|newton|ratio.
  enum class EighValues { DivisionFree, Newton, Ratio };
  EighValues eighValues = EighValues::DivisionFree;
  // Bisect's vector kernel (syevBatched's SyevVectors; docs/benchmarks.md, Issue 12,
  // ninth round, eighvec): true (default since the lead's second check of that round),
  // D+ and D- in shared memory, x stored once; false, D+, D- and x in the workspace
  // (global memory). The same vectors to the bit. Factory switch:
  // SPEXLAB_CUDA_EIGH_VECTORS=new|old.
  bool sharedEighVectors = true;
  // Cholesky: true (default), blocked by fiber with batched GEMMs (docs/benchmarks.md,
  // version 6); false, cusolverDnDpotrfBatched. Factory switch: SPEXLAB_CUDA_CHOLESKY.
  bool blockedCholesky = true;
  // The blocked Cholesky's block columns (gpu/batched_cholesky.h CholeskyKernel):
  // Tiled (default), one kernel each (diagonal block by 16-column tiles, L_kk^-1 and the
  // panel's triangular solve) plus the trailing update; Fused, the same two launches
  // with the diagonal block in one sweep of nb barrier-separated steps; Steps, the
  // older four launches. Factory switch: SPEXLAB_CUDA_CHOLESKY=tiled|fused|blocked.
  enum class CholeskyColumns { Tiled, Fused, Steps };
  CholeskyColumns choleskyColumns = CholeskyColumns::Tiled;
  // Normal equations. Tree (default): Lean with its warp sums (a pair's, y's, fw's, pm's)
  // done by one thread a sum from the lanes' partials in shared memory, in the butterfly's
  // order, and the column written straight into A (launchNormalEquationsLean with tree;
  // docs/benchmarks.md, "eighth round"). Lean: Pairs with fewer instructions a pair (gpu/kernels.h
  // launchNormalEquationsLean: each pair's lane-independent walk set up once by the thread
  // that lists it, 32-bit offsets, a pair's stamp loads in flight at once, no integer division
  // by a runtime width; docs/benchmarks.md, "seventh round"). Pairs: a thread block per
  // unknown (launchNormalEquationsPairs), the overlapping stamp pairs listed first. Tile: a block
  // per group of 8 unknowns (launchNormalEquationsTile), the group's corners and
  // weighted stamps in shared memory, the pairs' stamp loads pipelined; measured slower
  // on an H100 (docs/benchmarks.md, "sixth round"), kept for A/B. Both test candidates
  // inside the factor's block band only and write every entry of that band of the
  // lower triangle, so A is not cleared first. Scan:
  // the older kernel (each unknown tests every later one, both triangles written where
  // stamps overlap, A, y, fw and pm cleared by memsets first). iCov, y, fw and pm are
  // the same to the bit. Factory switch: SPEXLAB_CUDA_NORMAL=tree|lean|pairs|tile|scan.
  enum class NormalKernel { Tree, Lean, Tile, Pairs, Scan };
  NormalKernel normalKernel = NormalKernel::Tree;
  // The frame's spot table: true (default), a warp per spot (gpu/kernels.h SpotKernel::Warp);
  // false, a 128-thread block per spot (the older kernel). The same stamps to the bit.
  // Factory switch: SPEXLAB_CUDA_SPOTS=warp|block.
  bool spotWarps = true;
  // Normal equations on their block band (default): each patch's fiber coupling width
  // w is measured on the device from its stamps (fibers further apart than w share no
  // pixel, so those blocks of iCov are exactly zero); a batch's blocked Cholesky then
  // updates only the w blocks below each diagonal block, and L^-1 multiplies only the
  // band of L; where w reaches the patch's width the batch is solved densely. false:
  // always dense. Same results to rounding. Factory switch: SPEXLAB_CUDA_SOLVER.
  bool bandedSolve = true;
  // The covariance's fiber blocks by a selected inversion on the factor's block band
  // (default; gpu/batched_selected_inverse.h): the flux by block substitution through
  // the band and only the blocks of C = iCov^-1 inside the band, so L^-1 (n^2 doubles
  // a patch) is never formed or held and a batch holds more patches within the budget.
  // false: X = L^-1 whole, f = X^T X y and C_s = X(:, s)^T X(:, s), as before. Works
  // with either Cholesky and either band (dense: w = F - 1). Same results to rounding.
  // Factory switch: SPEXLAB_CUDA_INVERSE.
  bool selectedInverse = true;
  // The selected inversion by one kernel a patch that keeps G and the C panel in shared
  // memory through all its block columns (default; gpu/batched_selected_inverse.h
  // SelectedInverseKernel::Fused, where nb <= 80 and w nb <= 160), or by the GEMMs of
  // batched_gemm.h and a mirror kernel per block column (false: Steps). With
  // Gemm::Cublas the steps run. Same blocks to rounding (docs/benchmarks.md, "Issue 12,
  // eighth round: selected inversion (selinv3)"). Factory switch:
  // SPEXLAB_CUDA_SELINV=fused|steps.
  bool fusedSelectedInverse = true;
  // The batched GEMMs (the Cholesky's trailing updates, the selected inversion, the
  // fiber blocks, noise mode's Q): Tensor (default), the engine's own on the fp64
  // tensor cores (gpu/batched_gemm.h), so no cuBLAS handle is made and no warm-up runs;
  // Cublas, cublasDgemmStridedBatched on a handle per stream (docs/benchmarks.md,
  // "Issue 12, sixth round: tensor-core GEMMs (selgemm)"). Same results to rounding.
  // Factory switch: SPEXLAB_CUDA_GEMM=tensor|cublas.
  enum class Gemm { Tensor, Cublas };
  Gemm gemm = Gemm::Tensor;
  // Warm-up (docs/benchmarks.md, "Issue 12, fourth round"), with Gemm::Cublas only:
  // right after the handles exist, a thread of the engine does the first-use work of
  // cuBLAS's batched DGEMM (its first call in a process costs ~50 ms) on its own handle
  // and stream, beside the host's work before the first extraction's batches; that
  // extraction waits for it before its first batch. Factory switch:
  // SPEXLAB_CUDA_WARMUP=0 turns it off.
  bool warmUp = true;
  // A whole frame on one device: its frame arrays and batch workspaces allocated on a
  // thread of their own while the image is copied up (docs/benchmarks.md, "Issue 12,
  // fifth round"), not after it. Factory switch: SPEXLAB_CUDA_RESERVE=0 turns it off.
  bool reserveAhead = true;
  // The pipeline's ends overlapped with its batches (docs/design.md "Pipeline ends"):
  // a whole-frame request uploads the image and ivar in row blocks on a stream of their
  // own, with an event per block; its patches are taken in wavelength order (CCD rows),
  // so a batch waits only for the block of the last row it reads; and each wave step's
  // bins of the frame come back (on a download stream, through the pinned ring) and are
  // finalized on the host as soon as its batches are done, while later batches run.
  // The frame is the same to the bit. Selections and single patches are not affected.
  // Factory switch: SPEXLAB_CUDA_OVERLAP=0 turns it off.
  bool overlapEnds = true;
  // A whole frame without a plan in the request: device 0 evaluates the plan's corner
  // table and each patch's corner extents (8 ints a patch come back instead of the
  // ~9.5 MB table, which the host neither waits for nor pages in), and starts the
  // frame's spot table before the host sets the boxes. The plan is the same to the
  // bit (core/plan setPatchBoxes). Factory switch: SPEXLAB_CUDA_PLANAHEAD=0 turns it off.
  bool planAhead = true;
  // extractInto of a whole frame (or of a patch list without `accumulate`) into a kept
  // result of the plan's shape: its host arrays (~150 MB for a full r frame) are
  // written in place instead of allocated, zeroed and paged in again for each frame;
  // every bin the request does not fill is zeroed, so the result equals extract()'s
  // (docs/design.md "Kept results"). Factory switch: SPEXLAB_CUDA_KEEPRESULT=0 turns it
  // off (extractInto then makes a new result, as extract() does).
  bool keepResult = true;
};

// How one device's memory was split in the engine's last extraction (for reports).
struct CudaMemoryPlan {
  int device = 0;
  std::size_t budgetBytes = 0;   // the budget in force
  std::size_t fixedBytes = 0;    // image, PSF, spot table, frame arrays, patch table
  std::size_t batchBytes = 0;    // the workspaces of all streams
  std::size_t perPatchBytes = 0; // workspace bytes of one patch (estimate)
  int streams = 0;
  int batch = 0;                 // patches per batch
  int batches = 0;               // batches launched
  int maxCoupling = -1;          // widest fiber coupling of a patch (-1: not measured)
  int bandedBatches = 0;         // batches solved on their block band
};

class CudaEngine : public Engine {
public:
  // Throws GpuError when a listed device does not exist or CUDA is unusable.
  explicit CudaEngine(CudaEngineOptions options = {});
  ~CudaEngine() override;
  CudaEngine(const CudaEngine&) = delete;
  CudaEngine& operator=(const CudaEngine&) = delete;

  std::string name() const override; // "cuda:0", "cuda:0,1"
  ExtractionResult extract(const ExtractionRequest& request, ProgressSink& sink,
                           const CancelToken& cancel) override;
  // With `accumulate` and a patch list: straight into the caller's result (allocated
  // only when it has another shape), like the CPU engine: the patches' kept bins are
  // replaced and finalized, their model tiles filled (ExtractionResult::modelTiles)
  // and the model image redone inside their boxes (updateModelImage); nothing frame-
  // or CCD-sized is allocated, uploaded or copied back. Otherwise (keepResult) the
  // request's frame is written into `into`'s arrays when they have its shape, else
  // into new ones (the kept arrays stay where they are, for views reading them), and
  // `into` then equals what extract() returns; on a failure after the extraction began
  // `into` is left empty, or zeroed where its arrays were kept.
  void extractInto(const ExtractionRequest& request, ExtractionResult& into, ProgressSink& progress,
                   const CancelToken& cancel) override;

  const CudaEngineOptions& options() const { return m_options; }

  // Peak device memory this engine has held on each device (bytes), for reports.
  std::vector<std::size_t> peakDeviceBytes() const;
  // The memory split of the last extract() on each device.
  std::vector<CudaMemoryPlan> memoryPlans() const;

  struct Device; // per-GPU state (streams, handles, buffers), defined in cuda_engine.cpp

private:
  // extract() (into = false, keep = false: result is new), extractInto with
  // `accumulate` and a patch list (into = true) and the other extractInto calls with
  // keepResult (keep = true: result's arrays are reused when they fit the plan).
  void run(const ExtractionRequest& request, ExtractionResult& result, bool into, bool keep,
           ProgressSink& progress, const CancelToken& cancel);

  void joinWarmUp();
  CudaEngineOptions m_options;
  std::vector<std::unique_ptr<Device>> m_devices;
  // The warm-up (CudaEngineOptions::warmUp): its thread and when it ran (steady
  // clock, ns since its epoch), for the first extraction's profile. Its failures are
  // ignored: the extraction meets and reports the same ones.
  std::unique_ptr<std::thread> m_warm;
  int64_t m_warmStartNs = 0, m_warmEndNs = 0;
  bool m_warmReported = false;
};

// The card's ceilings, measured (docs/benchmarks.md): cuBLAS DGEMM of 8192^3 in FLOP/s
// and a 2 GiB device-to-device copy in bytes (read + write) per second.
struct DeviceCeilings {
  double dgemmFlops = 0;
  double copyBytesPerS = 0;
};
DeviceCeilings measureDeviceCeilings(int device);

// Factory for the CLI/app: throws GpuError with a clear message when CUDA is unusable.
// gpus: device ordinals (empty: all visible devices).
std::unique_ptr<Engine> makeCudaEngine(const std::vector<int>& gpus = {});
std::unique_ptr<Engine> makeCudaEngine(const CudaEngineOptions& options);

} // namespace spex
