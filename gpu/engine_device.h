// Internal to the CUDA engine (not for other callers): the per-device state the
// orchestrator (cuda_engine.cpp) and its parts share. A workspace is one stream with
// its library handles and batch buffers (engine_workspace.cpp sizes them against the
// memory budget); CudaEngine::Device is one GPU's streams, frame arrays and pinned
// staging. The batch pipeline (batch_pipeline.h) enqueues a batch's phases on a
// workspace; staging.h moves the image, PSF and results between host and device.
#pragma once

#include "cuda_engine.h"
#include "core/image.h"
#include "core/psf/gauss_hermite_psf.h"
#include "device_memory.h"
#include "device_timeline.h"
#include "kernels.h"
#include "staging.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace spex {
namespace gpu {

// One workspace: a stream, its library handles and the batch buffers.
struct Workspace {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr; // CudaEngineOptions::Gemm::Cublas only; null: batched_gemm.h
  cusolverDnHandle_t solver = nullptr;
  cusolverDnParams_t params = nullptr;
  int lane = 0;
  int capacity = 0; // patches the buffers hold for the current layout
  int n = 0, F = 0, nb = 0, maxBoxArea = 0;
  bool noise = false;
  bool syevLoop = false; // no batched syev of this size: syevd per patch
  bool potrf = false;    // Cholesky by cusolverDnDpotrfBatched instead of the blocked one
  bool cusolverEigh = false; // kept fiber blocks by cusolverDnXsyevBatched, not syevBatched
  bool bisectEigh = false;   // syevBatched's bisection method (where A holds its workspace)
  bool warpReduce = false;   // syevBatched's pass 1 by one warp a block (SyevReduce::Warp)
  bool newtonSchulzEigh = true; // its pass 3 (CudaEngineOptions::newtonSchulzEigh)
  CudaEngineOptions::EighValues eighValues = CudaEngineOptions::EighValues::DivisionFree; // its SyevValues
  bool sharedEighVectors = true;  // its SyevVectors (CudaEngineOptions::sharedEighVectors)
  // CudaEngineOptions::selectedInverse: no X; C holds L_kk^-1 after the Cholesky, then
  // the selected inversion's C_ss (batched_selected_inverse.h).
  bool selected = false;
  bool fusedSelected = true; // CudaEngineOptions::fusedSelectedInverse
  CudaEngineOptions::CholeskyColumns choleskyColumns = CudaEngineOptions::CholeskyColumns::Tiled; // CholeskyKernel
  // Normal-equation kernel (CudaEngineOptions::normalKernel): Tile and Pairs write the
  // factor's band with no memsets first.
  CudaEngineOptions::NormalKernel normalKernel = CudaEngineOptions::NormalKernel::Tree;
  DeviceArray<double> A, X, T, C, y, fw, pm, f, mbuf, cbuf, chi2, E, W, syevWork;
  DeviceArray<double> K, KW, kWork; // library eigensolver of the kept fiber blocks
  // Per-patch model tiles of the batch (BatchView::tiles), allocated only for requests
  // that fill ExtractionResult::modelTiles; `tiles` says whether this request does.
  DeviceArray<double> tile;
  bool tiles = false;
  std::vector<char> kHostWork;
  int maxKept = 0;
  DeviceArray<double*> Aptr;
  DeviceArray<int> info, info2;
  std::vector<char> syevHostWork;

  // Device bytes the buffers hold now.
  std::size_t bytes() const {
    std::size_t b = 0;
    for (const DeviceArray<double>* a : {&A, &X, &T, &C, &y, &fw, &pm, &f, &mbuf, &cbuf, &chi2, &E,
                                         &W, &syevWork, &K, &KW, &kWork, &tile})
      b += a->capacity() * sizeof(double);
    return b + Aptr.capacity() * sizeof(double*) + (info.capacity() + info2.capacity()) * sizeof(int);
  }
};

} // namespace gpu

struct CudaEngine::Device {
  int index = 0;
  gpu::SpotKernel spotKernel = gpu::SpotKernel::Warp; // CudaEngineOptions::spotWarps
  std::size_t held = 0;      // bytes allocated by the engine now
  std::size_t peak = 0;
  cudaStream_t main = nullptr;
  // CudaEngineOptions::overlapEnds: the image's row blocks go up on `upload`, the wave
  // steps' bins of the frame come down on `download`, beside the batches' streams.
  cudaStream_t upload = nullptr, download = nullptr;
  std::vector<std::unique_ptr<gpu::Workspace>> ws;
  gpu::DeviceArray<double> pix, ivar, pool, spotV, flux, ivarOut, res, chi2pix, pixmask, deconv, model;
  gpu::DeviceArray<gpu::DevLegendre> sets;
  // What pool and sets hold (gpu::uploadPsf): the packed tables last uploaded and where
  // to, so a request with the same PSF uploads nothing.
  std::vector<double> psfPool;
  std::vector<gpu::DevLegendre> psfSets;
  const double* psfPoolAt = nullptr;
  const gpu::DevLegendre* psfSetsAt = nullptr;
  bool psfUploaded = false;
  gpu::DeviceArray<int2> corner;
  gpu::DeviceArray<gpu::DevPatch> patches, retryPatches;
  gpu::DeviceArray<int> planCorners; // the plan's corner table, x then y (computePlanCorners)
  // The plan ahead (launchPlanAhead): each patch's window (5 ints) and extents (8 ints).
  gpu::DeviceArray<int> planWindows, planExtents;
  gpu::PinnedArray<int> hPlanWindows, hPlanExtents;
  gpu::DeviceArray<int> coupling; // per patch of the request (CudaEngineOptions::bandedSolve)
  gpu::PinnedArray<int> hInfo, hCoupling;
  gpu::PinnedArray<double> hChi2, hTiles; // hTiles: the request's model tiles (BatchView::tiles)
  // A few patches' image rectangle on its way up (uploadImage) and their columns of the
  // frame rows on the way down (downloadColumns); rectCopied: the rectangle's last copy.
  gpu::PinnedArray<double> hRect, hColumns;
  cudaEvent_t rectCopied = nullptr;
  gpu::EventPool events; // the timeline's and the streams' synchronisation events
  CudaMemoryPlan plan; // of the last extraction
  gpu::PinnedStager stager; // pageable host arrays <-> device through pinned chunks (staging.h)
  std::size_t limit = SIZE_MAX; // workspaces may not take held past this (the budget)
  // The batch that last fitted the budget for a layout, so a warm call does not try
  // a larger one again (the library workspaces are only known once allocated).
  struct Fit {
    int n = 0, F = 0, nb = 0, maxBoxArea = 0, maxKept = 0, W = 0;
    bool noise = false, keptEigh = false;
    std::size_t budget = 0, fixed = 0;
    int batch = 0;
    bool same(const Fit& o) const {
      return n == o.n && F == o.F && nb == o.nb && maxBoxArea == o.maxBoxArea && maxKept == o.maxKept &&
             W == o.W && noise == o.noise && keptEigh == o.keptEigh && budget == o.budget && fixed == o.fixed;
    }
  } fit;

  void track() { peak = std::max(peak, held); }
  ~Device() {
    cudaSetDevice(index);
    for (auto& w : ws) {
      if (w->params) cusolverDnDestroyParams(w->params);
      if (w->solver) cusolverDnDestroy(w->solver);
      if (w->cublas) cublasDestroy(w->cublas);
      if (w->stream) cudaStreamDestroy(w->stream);
    }
    if (main) cudaStreamDestroy(main);
    if (upload) cudaStreamDestroy(upload);
    if (download) cudaStreamDestroy(download);
    if (rectCopied) cudaEventDestroy(rectCopied);
  }
};

namespace gpu {

// Bytes of batch workspace one patch needs (an: the library workspaces are known only once allocated); without X = L^-1
// where the selected inversion replaces it.
std::size_t bytesPerPatch(int n, int F, int nb, int maxBoxArea, bool noise, bool selected);

// Allocates w for `cap` patches of the layout (n = F nb, boxes of maxBoxArea pixels,
// noise mode's extra arrays); false when the device ran out or the budget (dev.limit)
// would be passed.
bool reserveWorkspace(Workspace& w, CudaEngine::Device& dev, int cap, int n, int F, int nb,
                      int maxBoxArea, bool noise);
void releaseWorkspace(Workspace& w, CudaEngine::Device& dev);

// Before the request's fixed arrays grow by `growth` bytes: where that would take
// the engine past its budget, the batch workspaces go first (runDevice sizes them
// again from what is left), so the engine's peak stays within the budget.
void makeRoom(CudaEngine::Device& dev, std::size_t growth, std::size_t budget);

// Kept fiber blocks and their eigen-pairs for `cap` patches of maxKept blocks each
// (K, KW, info2), and cuSOLVER's workspace when it solves them.
bool reserveKeptEigh(Workspace& w, CudaEngine::Device& dev, int cap, int nb, int maxKept);

// Transfers (engine_transfers.cpp). The PSF as a coefficient pool and set descriptors
// (kernels.h DevPsf), on s, synchronous (the host tables are temporaries).
void uploadPsf(const GaussHermitePsf& psf, CudaEngine::Device& dev, cudaStream_t s, DevPsf& out);
// Image and ivar into dev.pix and dev.ivar on dev.main; returns once the host arrays
// have been read. Only rows [y0, y1) and columns [x0, x1) are copied (clamped to the
// image; y1 < 0 or x1 < 0: all): a request for a few patches reads no pixel outside its
// patches' boxes (the kernels test every pixel against the box), so it uploads just
// their bounding rectangle, and nothing of an earlier image is ever reused. Whole
// rows go through the pinned stager; a rectangle narrower than the image and under
// two stager chunks is packed into pinned memory and copied as two 2D transfers.
// reserveImage first.
void uploadImage(const Image& image, CudaEngine::Device& dev, int y0 = 0, int y1 = -1, int x0 = 0, int x1 = -1);
// The whole image and ivar on stream s in blocks of rows, in order (CudaEngineOptions::
// overlapEnds): after block k's copies are enqueued, rowsDone(k, y1) is called (rows
// [0, y1) then follow every transfer enqueued on s: an event recorded there marks
// them). Returns once the host arrays have been read. reserveImage first.
void uploadImageRows(const Image& image, CudaEngine::Device& dev, cudaStream_t s, int rowsPerBlock,
                     const std::function<void(int block, int y1)>& rowsDone);
// The device arrays uploadImage fills, allocated within the budget (makeRoom).
void reserveImage(const Image& image, CudaEngine::Device& dev, std::size_t budget);
// The corner table of the request's patch plan (core/plan/patch_plan.h PlanCorners)
// evaluated on the device from the uploaded PSF, on dev.main, synchronous; false (out
// empty) when the request's fibers or parameters are not a valid plan (makePatchPlan
// then says why).
bool computePlanCorners(CudaEngine::Device& dev, const DevPsf& psf, const ExtractionRequest& req,
                        std::size_t budget, PlanCorners& out);
// CudaEngineOptions::planAhead: the request's plan with the device taking its corners
// and each patch's extents, in two steps. launchPlanAhead makes the skeleton (core/plan
// makePatchSkeleton) and enqueues on dev.main its windows' copy, the corner table, the
// extents kernel and their copy back (8 ints a patch, pinned); false (nothing enqueued,
// skeleton and range empty) when the request is not a valid plan (makePatchPlan then
// says why). finishPlanAhead waits for them and sets the boxes (setPatchBoxes): the
// plan makePatchPlan makes, to the bit. `range` gets the corners' range (no values).
bool launchPlanAhead(CudaEngine::Device& dev, const DevPsf& psf, const ExtractionRequest& req, std::size_t budget,
                     PlanCorners& range, PatchPlan& skeleton);
void finishPlanAhead(CudaEngine::Device& dev, const GaussHermitePsf& psf, PatchPlan& skeleton);
// After every workspace's stream: the device's frame rows (nfw = rows x bins values
// from element offset `off` of each frame array; the resolution nk times that) into
// result, and the model image (npix values) into `model` when not null. Synchronous.
void downloadFrame(CudaEngine::Device& dev, ExtractionResult& result, std::size_t off, std::size_t nfw,
                   int nk, double* model, std::size_t npix);

// After every workspace's stream: bins [k0, k1) of the device's nrow frame rows (of
// nwave bins each) into pinned memory, out = flux, ivar, chi2pix, pixmaskFraction,
// deconvolved (each [nrow][k1 - k0]) then resolution ([nrow][nk][k1 - k0]), as
// 2D copies. Synchronous. false (nothing copied) when that is two stager chunks or
// more: the caller downloads whole rows (downloadFrame). `out` stays valid until the
// next call.
bool downloadColumns(CudaEngine::Device& dev, int nrow, int nwave, int nk, int k0, int k1, const double*& out);

// Host side after the D2H (engine_results.cpp): a diagnostics entry for each of the
// first `launched` patches of todo (chi2, retry flags, stream lane, an equal share of
// its batch's device time from the timeline) appended to diags, and (markCovered: not
// where the wave steps' download marked them) their kept bins marked covered in result.
void collectDiagnostics(const PatchPlan& plan, const std::vector<int>& todo, int launched, const double* chi2,
                        const std::vector<char>& regularized, const std::vector<char>& failed,
                        const std::vector<int>& batchOf, const std::vector<int>& laneOf, int batches,
                        const DeviceTimeline& tl, ExtractionResult& result,
                        std::vector<PatchDiagnostics>& diags, bool markCovered = true);

} // namespace gpu
} // namespace spex
