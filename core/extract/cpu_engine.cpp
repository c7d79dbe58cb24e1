#include "cpu_engine.h"

#include "../errors.h"
#include "../image.h"
#include "../psf/gauss_hermite_psf.h"
#include "../threads.h"
#include "lapack.h"
#include "patch_solver.h"
#include "spot_cache.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

namespace spex {

namespace {

bool sameParams(const PatchParams& a, const PatchParams& b) {
  auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  return a.bundlesize == b.bundlesize && a.nsubbundles == b.nsubbundles && a.nwavestep == b.nwavestep &&
         a.wavepadFrac == b.wavepadFrac && a.pixpadFrac == b.pixpadFrac &&
         same(a.regularize, b.regularize) && same(a.psferr, b.psferr) && a.mode == b.mode;
}

bool sameGrid(const WaveGrid& a, const WaveGrid& b) {
  return a.wmin == b.wmin && a.wmax == b.wmax && a.dw == b.dw && a.n == b.n;
}

} // namespace

// Patches a worker takes at a time: their kept fibers' eigenproblems are solved
// together, four per vector (PatchSolver::begin/finish); five kept fibers per patch fill
// whole groups of four only across patches (docs/benchmarks.md, "eighth pass").
constexpr int kBatch = 4;

struct CpuEngine::Workspace {
  PatchSolver solver;
  PatchSolution sol[kBatch];
};

CpuEngine::CpuEngine(CpuEngineOptions options) : m_options(options) {}
CpuEngine::~CpuEngine() = default;

ExtractionResult CpuEngine::extract(const ExtractionRequest& req, ProgressSink& progress,
                                    const CancelToken& cancel) {
  ExtractionResult result;
  extractInto(req, result, progress, cancel);
  return result;
}

void CpuEngine::extractInto(const ExtractionRequest& req, ExtractionResult& result,
                            ProgressSink& progress, const CancelToken& cancel) {
  ProfileRecorder rec;
  rec.setThreadLaneName("main");
  std::vector<int> todo;
  std::shared_ptr<const PatchPlan> planPtr;
  {
    ScopedRange whole(&rec, "extract");
    {
      // The request's plan, or for a plan-less request a kept one when nothing it
      // depends on changed (plan_cache.h).
      ScopedRange r(&rec, "plan");
      planPtr = m_plans.planFor(req);
      validateRequest(req, *planPtr);
    }
    const PatchPlan& plan = *planPtr;
    const GaussHermitePsf& psf = *req.psf;
    const Image& image = *req.image;
    {
      // The frame-sized arrays (and the CCD-sized model): 0.1-0.2 s on a full frame.
      // A result that already has this plan's shape (the caller keeps it between
      // requests) is reused: only the bins and model boxes of its previous patches are
      // cleared, so a request for a few patches allocates nothing frame-sized.
      ScopedRange r(&rec, "allocate");
      bool filledHere;
      {
        std::lock_guard lock(m_mutex);
        filledHere = m_filled == &result && m_filledPlan == planPtr;
        m_filled = nullptr; // until this request completes
      }
      const bool accumulate = req.accumulate;
      const bool shaped =
          result.nfiber == plan.nFiber && result.fiberMin == plan.fiberMin &&
          result.nwave == plan.wave.n && result.ndiag == psf.hsizeY &&
          sameGrid(result.wave, plan.wave) && sameParams(result.params, plan.params) &&
          result.flux.rows == plan.nFiber && result.flux.cols == plan.wave.n &&
          result.model.has_value() == req.model &&
          (!req.model || (result.model->rows == psf.npixY && result.model->cols == psf.npixX));
      // Accumulating, a result of this shape is kept whoever filled it (its tiles say
      // what its model holds); otherwise only the one this engine filled last (its
      // patch list says what to clear).
      const bool tiled = !req.model || result.modelTiles.size() == plan.patches.size();
      if (accumulate && shaped && tiled) {
        // nothing to clear: the requested patches overwrite their own bins and tiles
      } else if (!accumulate && shaped && filledHere) {
        clearPatches(result, plan);
        result.modelTiles.clear();
      } else {
        result.allocate(plan, psf.hsizeY, req.model, psf.npixX, psf.npixY);
        result.modelTiles.clear();
        if (accumulate && req.model) result.modelTiles.resize(plan.patches.size());
      }
      if (accumulate && req.patches) {
        std::vector<PatchDiagnostics> keep;
        for (const PatchDiagnostics& d : result.patches)
          if (std::find(req.patches->begin(), req.patches->end(), d.patch) == req.patches->end()) keep.push_back(d);
        result.patches = std::move(keep);
      } else {
        result.patches.clear();
      }
      result.cancelled = false;
    }
    result.engine = name();
    result.psferr = effectivePsfErr(req);
    result.nonFinitePixels = image.nonFinitePixels;
    if (req.patches)
      todo = *req.patches;
    else
      for (const Patch& p : plan.patches) todo.push_back(p.index);

    PatchSolveOptions opt;
    opt.psferr = result.psferr;
    opt.regularize = req.params.regularize;
    opt.mode = req.params.mode;
    opt.ndiag = psf.hsizeY;
    opt.model = req.model;
    opt.solver = m_options.solver;
    opt.eigenVectors = m_options.eigenVectors;

    int nthreads = resolveThreads(req.threads);
    nthreads = std::max(1, std::min<int>(nthreads, int(todo.size())));
    lapack::singleThreadedBlas();

    std::atomic<int> next{0}, done{0};
    std::atomic<long> noData{0}, nonFinite{0};
    const bool tiles = req.model && req.accumulate;
    std::mutex modelMutex, diagMutex, errorMutex;
    std::exception_ptr error;
    const int total = int(todo.size());

    // Spots shared by overlapping patches are evaluated once (spot_cache.h).
    std::unique_ptr<SpotCache> spotCache;
    if (m_options.spotCache) spotCache = std::make_unique<SpotCache>(psf, plan, todo);

    // Per-thread solvers and their scratch live in the engine between requests.
    std::vector<std::unique_ptr<Workspace>> ws;
    {
      std::lock_guard lock(m_mutex);
      while (int(ws.size()) < nthreads && !m_pool.empty()) {
        ws.push_back(std::move(m_pool.back()));
        m_pool.pop_back();
      }
    }
    while (int(ws.size()) < nthreads) ws.push_back(std::make_unique<Workspace>());

    // Assembly and final values of one solved patch (after PatchSolver::finish), their
    // zones marked with the patch of the zone they run in (zone: the batch's last), so
    // that every patch stays one "patch" zone with its work nested inside.
    auto finishPatch = [&](const Patch& p, const PatchSolution& sol, int zone) {
      {
        ScopedRange ra(&rec, "assemble", zone);
        // Keep the central fibers and bins (EXTRACTION.md §3); each (fiber, bin)
        // belongs to one patch, so these writes never overlap between threads.
        const int nw = sol.nwave, nk = 2 * sol.ndiag + 1;
        const int fo = p.keptFiberOffset(), wo = p.keptWaveOffset();
        for (int s = 0; s < p.nfiber; ++s) {
          const int rf = p.fiber0 + s - plan.fiberMin;
          for (int k = 0; k < p.nwave; ++k) {
            const int a = (fo + s) * nw + wo + k;
            const int bin = p.wave0 + k;
            result.flux(rf, bin) = sol.flux[a];
            result.ivar(rf, bin) = sol.ivar[a];
            result.deconvolved(rf, bin) = sol.f[a];
            result.chi2pix(rf, bin) = sol.chi2pix[a];
            result.pixmaskFraction(rf, bin) = sol.pixmask[a];
            for (int d = 0; d < nk; ++d)
              result.resolution(rf, d, bin) =
                  sol.resolution[(std::size_t(fo + s) * nk + d) * nw + wo + k];
            result.covered(rf, bin) = 1;
          }
        }
        if (req.model && !sol.model.empty()) {
          const int bw = p.box.width();
          if (tiles) {
            // The patch's own tile (same box every time: no allocation when redone).
            Array2D<double>& t = result.modelTiles[std::size_t(p.index)];
            if (t.rows != p.box.height() || t.cols != bw) t = Array2D<double>(p.box.height(), bw);
            std::copy(sol.model.begin(), sol.model.begin() + std::ptrdiff_t(t.size()), t.data.begin());
          } else {
            std::lock_guard lock(modelMutex);
            Array2D<double>& m = *result.model;
            for (int y = 0; y < p.box.height(); ++y) {
              const double* src = sol.model.data() + std::size_t(y) * bw;
              double* dst = m.row(p.box.y0 + y) + p.box.x0;
              for (int x = 0; x < bw; ++x) dst[x] += src[x];
            }
          }
        }
      } // assemble
      {
        // Final values (per Angstrom, mask) as soon as the patch is done, so a
        // result read while the job runs is right for every finished patch.
        // Inside the patch zone: a patch's zones all nest under it.
        ScopedRange rf(&rec, "finalize", zone);
        const FinalizeCounts c = finalizeRegion(result, keptRegion(plan, p.index));
        noData += c.noData;
        nonFinite += c.nonFinite;
      }
    };

    auto worker = [&](int t) {
      if (t > 0) rec.setThreadLaneName("cpu thread " + std::to_string(t));
      PatchSolver& solver = ws[std::max(0, t - 1)]->solver;
      PatchSolution* sols = ws[std::max(0, t - 1)]->sol;
      try {
        for (;;) {
          if (cancel.cancelled()) return;
          {
            std::lock_guard lock(errorMutex);
            if (error) return;
          }
          // Up to kBatch patches in a row; fewer near the end so that both threads
          // finish together.
          const int left = total - next.load();
          const int want = std::clamp(left / (2 * nthreads), 1, kBatch);
          const int i0 = next.fetch_add(want);
          if (i0 >= total) return;
          const int count = std::min(want, total - i0);
          std::chrono::steady_clock::time_point t0[kBatch];
          for (int k = 0; k < count; ++k) {
            const Patch& p = plan.patches[todo[i0 + k]];
            t0[k] = std::chrono::steady_clock::now();
            // Each patch is one "patch" zone; the batch's eigenproblems and the
            // assembly of its patches fall in the last one's (and carry its index).
            ScopedRange rp(&rec, "patch", p.index);
            solver.begin(p, plan, image, psf, opt, sols[k], &rec, spotCache.get());
            if (spotCache) spotCache->release(p);
            if (k + 1 < count) continue;
            solver.finish(&rec, p.index);
            // Patch by patch: assembled, final, reported; a cancel stops before the next
            // (the batch's remaining solutions are dropped, as patches not yet begun).
            for (int j = 0; j < count; ++j) {
              const Patch& pj = plan.patches[todo[i0 + j]];
              const PatchSolution& sol = sols[j];
              finishPatch(pj, sol, p.index);
              PatchDiagnostics diag;
              diag.patch = pj.index;
              diag.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0[j]).count();
              diag.chi2 = sol.chi2;
              diag.regularized = sol.regularized;
              diag.failed = sol.failed;
              diag.lane = rec.currentLane();
              {
                std::lock_guard lock(diagMutex);
                result.patches.push_back(diag);
              }
              progress.patchDone(pj.index, done.fetch_add(1) + 1, total);
              if (j + 1 < count && cancel.cancelled()) return;
            }
          }
        }
      } catch (...) {
        solver.dropQueue(); // the batch's solutions are not finished
        std::lock_guard lock(errorMutex);
        if (!error) error = std::current_exception();
      }
    };

    if (nthreads == 1) {
      worker(0); // on the calling thread, its lane stays "main"
    } else {
      std::vector<std::thread> pool;
      for (int t = 0; t < nthreads; ++t) pool.emplace_back(worker, t + 1);
      for (auto& th : pool) th.join();
    }
    {
      std::lock_guard lock(m_mutex);
      for (auto& w : ws) m_pool.push_back(std::move(w));
    }
    if (error) std::rethrow_exception(error);
    result.cancelled = cancel.cancelled() && done.load() < total;
    std::sort(result.patches.begin(), result.patches.end(),
              [](const PatchDiagnostics& a, const PatchDiagnostics& b) { return a.patch < b.patch; });
    result.noDataBins = noData.load();
    result.nonFiniteBins = nonFinite.load();
    if (tiles) {
      ScopedRange r(&rec, "model image");
      std::vector<int> finished;
      for (const PatchDiagnostics& d : result.patches)
        if (std::find(todo.begin(), todo.end(), d.patch) != todo.end()) finished.push_back(d.patch);
      updateModelImage(result, plan, finished);
    }
    result.lastPatches = todo;
  }
  result.profile = rec.finish();
  std::lock_guard lock(m_mutex);
  m_filled = &result;
  m_filledPlan = planPtr;
}

void CpuEngine::clearPatches(ExtractionResult& r, const PatchPlan& plan) {
  const int nk = 2 * r.ndiag + 1;
  for (const PatchDiagnostics& d : r.patches) {
    if (d.patch < 0 || d.patch >= int(plan.patches.size())) continue;
    const Patch& p = plan.patches[d.patch];
    for (int s = 0; s < p.nfiber; ++s) {
      const int f = p.fiber0 + s - plan.fiberMin;
      for (int k = 0; k < p.nwave; ++k) {
        const int w = p.wave0 + k;
        r.flux(f, w) = r.ivar(f, w) = r.chi2pix(f, w) = r.pixmaskFraction(f, w) = 0;
        r.deconvolved(f, w) = 0;
        r.mask(f, w) = 0;
        r.covered(f, w) = 0;
        for (int dd = 0; dd < nk; ++dd) r.resolution(f, dd, w) = 0;
      }
    }
    if (r.model)
      for (int y = p.box.y0; y < p.box.y1; ++y)
        std::fill(r.model->row(y) + p.box.x0, r.model->row(y) + p.box.x1, 0.0);
  }
}

} // namespace spex
