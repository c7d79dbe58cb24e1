// The Engine interface and the data that crosses it (DESIGN.md "Data flow"). The CPU
// engine (cpu_engine.h) and the CUDA engine (gpu/) implement it; views, CLI and
// comparison code only see ExtractionRequest and ExtractionResult.
#pragma once

#include "../array.h"
#include "../plan/patch_plan.h"
#include "../profile/profile.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spex {

struct Image;
struct GaussHermitePsf;

// Frame MASK bits (desispec specmask).
enum FrameMaskBits : uint32_t {
  kSomeBadPix = 1u << 0,
  kAllBadPix = 1u << 1,
  kBad2DFit = 1u << 7,
  // No usable extraction in this bin although its pixels were not all masked: its patch
  // failed (Cholesky failed even regularized) or the result does not fit a float32
  // frame (non-finite or beyond 3.4e38). Flux and ivar are 0. desispec's NODATA
  // ("No data exists"); docs/reliability.md says why this bit.
  kNoData = 1u << 8,
};
// BAD2DFIT where chi2pix exceeds this (desispec.scripts.extract: chi2pix > 100.0).
constexpr double kBad2DFitChi2 = 100.0;

struct ExtractionRequest {
  const Image* image = nullptr;
  const GaussHermitePsf* psf = nullptr;
  WaveGrid wave;
  int fiberMin = 0;
  int nFiber = 0;
  PatchParams params;
  std::optional<std::vector<int>> patches; // indices into the plan; nullopt: all
  // The plan of (psf, wave, fiberMin, nFiber, params), built once by whoever makes the
  // request (the workbench's Document, attachPlan()) and carried with it: engines
  // check that it fits the request (requestPlan) and never build their own from it.
  std::shared_ptr<const PatchPlan> plan;
  bool model = false;                      // also build the CCD model image
  int threads = 0;                         // CPU threads; 0: all cores
  // CUDA engine: record every kernel, copy and set through CUPTI into the result's
  // profile, under the phase each ran in (docs/profiling.md, "Kernel profile"). Costs
  // time; a build without CUPTI fails the extraction with a GpuError saying so. The
  // CPU engine has no kernels and ignores it.
  bool profileKernels = false;
  // extractInto only. false: the result holds this request's patches alone (bins of
  // earlier requests are cleared). true: the result accumulates: this request's
  // patches replace their own bins and model tiles, everything else is kept (the
  // workbench's live result, one per engine, owned by the Document).
  bool accumulate = false;
};

struct PatchDiagnostics {
  int patch = -1;
  double seconds = 0;     // wall time of the patch solve
  double chi2 = 0;        // mean chi^2 per used pixel
  bool regularized = false; // Cholesky failed, solved again with regularize = 1e-4
  bool failed = false;      // failed even then; outputs zeroed
  int lane = 0;
};

// A field added here that is neither a frame array nor the shape must also be reset in
// the CUDA engine's kept results (gpu/cuda_engine.cpp, resetAllButArrays).
struct ExtractionResult {
  std::string engine;
  int fiberMin = 0;
  int nfiber = 0;
  int nwave = 0;
  int ndiag = 0;
  WaveGrid wave;
  PatchParams params;
  double psferr = 0.01;
  Array2D<double> flux;            // [nfiber, nwave] electron / Angstrom
  Array2D<double> ivar;            // [nfiber, nwave] per Angstrom^2
  Array2D<uint32_t> mask;          // [nfiber, nwave] frame mask bits
  Array3D<double> resolution;      // [nfiber, 2 ndiag + 1, nwave]
  Array2D<double> chi2pix;         // [nfiber, nwave]
  Array2D<double> pixmaskFraction; // [nfiber, nwave]
  Array2D<double> deconvolved;     // [nfiber, nwave] f, photons per bin (not per A)
  Array2D<uint8_t> covered;        // [nfiber, nwave] 1 where a chosen patch filled it
  std::optional<Array2D<double>> model; // [npixY, npixX] when requested
  // With `accumulate` and a model: each extracted patch's own model over its box
  // (modelTiles[i] for plan patch i, empty until it is extracted); `model` is their
  // sum, updated only inside the boxes of the patches a request changed
  // (updateModelImage). Re-extracting a patch replaces its tile, so the model stays
  // exact however requests overlap.
  std::vector<Array2D<double>> modelTiles;
  std::vector<int> lastPatches;          // plan indices the last request filled
  std::vector<PatchDiagnostics> patches; // one per extracted patch
  Profile profile;
  std::vector<int32_t> fibers;     // FIBER of each row (the FIBERMAP's); empty: unknown
  double heliocor = 1.0;           // HELIOCOR of a frame read from a file
  int nonFinitePixels = 0;         // input pixels treated as masked (NaN, Inf, ivar<0)
  long noDataBins = 0;             // bins finalizeFrame set to NODATA (see kNoData)
  long nonFiniteBins = 0;          // of those, the ones whose result was not finite/float32
  bool cancelled = false;          // stopped early: only `covered` bins are filled

  // The FIBER number of row s (petal p: 500 p + spectrum index) when fibers are known,
  // else the spectrum index fiberMin + s.
  int fiberNumber(int s) const {
    return fibers.size() == std::size_t(nfiber) ? int(fibers[std::size_t(s)]) : fiberMin + s;
  }

  // Allocates every array for the plan's size with zeros.
  void allocate(const PatchPlan& plan, int ndiag, bool withModel, int npixX, int npixY);
};

// Where engines report progress: `patch` (a plan index) is done, its kept bins in the
// result being filled are final (per Angstrom, masked) and will not change again in
// this request. Called from worker threads, so implementations must be thread-safe
// and quick (queue the index, do not draw); readers find the values in the result
// itself (no copies cross this interface).
class ProgressSink {
public:
  virtual ~ProgressSink() = default;
  virtual void patchDone(int /*patch*/, int /*done*/, int /*total*/) {}
};

class CancelToken {
public:
  void cancel() { m_flag.store(true); }
  bool cancelled() const { return m_flag.load(std::memory_order_relaxed); }
  void reset() { m_flag.store(false); }

private:
  std::atomic<bool> m_flag{false};
};

class Engine {
public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0; // "cpu", "cuda:0"
  // Throws InputError for bad requests. When cancelled it stops starting patches and
  // returns what finished, with `cancelled` set and `covered` marking the filled bins.
  virtual ExtractionResult extract(const ExtractionRequest&, ProgressSink&, const CancelToken&) = 0;
  // The same into a result the caller keeps between requests (a warm engine answering
  // patch selections; see ExtractionRequest::accumulate): engines that can reuse its
  // arrays do so, the CPU engine without any frame- or CCD-sized allocation for a few
  // patches. By default: extract() and mergePatches().
  virtual void extractInto(const ExtractionRequest& request, ExtractionResult& into,
                           ProgressSink& progress, const CancelToken& cancel);
};

// Fibers [f0, f1) x bins [w0, w1) of a result (relative to its fiberMin); the default
// (or an empty one) is the whole frame.
struct FrameRegion {
  int f0 = 0, f1 = -1, w0 = 0, w1 = -1;
};

// Checks a request before any work: image and PSF present and of matching CCD size,
// patch indices valid. Throws InputError. Every engine calls it.
void validateRequest(const ExtractionRequest& request, const PatchPlan& plan);

// The request's plan: `plan` when set, after checking it was made for this request's
// grid, fibers, parameters and CCD (InputError naming the field that differs), else
// one built for it now. attachPlan() sets `plan` when it is missing.
std::shared_ptr<const PatchPlan> requestPlan(const ExtractionRequest& request);
void attachPlan(ExtractionRequest& request);

// Effective PSF error of a request (the PSF's PSFERR unless given).
double effectivePsfErr(const ExtractionRequest& request);

// Applies the per-Angstrom conversion and the frame mask rules (EXTRACTION.md §5) to
// a result whose flux/ivar are per bin; both engines call it once at the end. Bins
// with no usable result (failed patches, values a float32 frame cannot hold) get
// flux 0, ivar 0 and kNoData, counted in noDataBins / nonFiniteBins. Only covered
// bins count; a region holding every covered bin gives the same result while reading
// (and allocating) no more than the region.
void finalizeFrame(ExtractionResult& result, FrameRegion region = {});

// The same for one region on the calling thread, returning its counts instead of
// storing them: engines finalize each patch's kept bins as it finishes (disjoint
// regions, so worker threads may call it at once), so a result read while a job runs
// holds final values for every finished patch.
struct FinalizeCounts {
  long noData = 0, nonFinite = 0;
};
FinalizeCounts finalizeRegion(ExtractionResult& result, FrameRegion region);

// The kept bins of plan patch i as a region of the result.
FrameRegion keptRegion(const PatchPlan& plan, int patch);

// Recomputes result.model inside the union of the boxes of `changed` (plan indices)
// as the sum of result.modelTiles over them, tiles added in plan order: the pixels
// equal a recomputation over the whole CCD bit for bit, whatever was there before.
void updateModelImage(ExtractionResult& result, const PatchPlan& plan, const std::vector<int>& changed);

// Copies patches' kept bins (all arrays, covered set), diagnostics and model from a
// result extracted for them alone into a kept result of the same shape (allocating it
// when it has another shape): what extractInto with `accumulate` does for engines
// that cannot write into the caller's result directly.
void mergePatches(ExtractionResult& into, ExtractionResult&& from, const PatchPlan& plan,
                  const std::vector<int>& patches);

} // namespace spex
