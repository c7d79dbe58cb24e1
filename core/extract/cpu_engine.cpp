#include "cpu_engine.h"

#include "../errors.h"
#include "../image.h"
#include "../psf/gauss_hermite_psf.h"
#include "../threads.h"
#include "lapack.h"
#include "patch_solver.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

namespace spex {

void validateRequest(const ExtractionRequest& req, const PatchPlan& plan) {
  if (!req.image) throw InputError("extraction request has no image");
  if (!req.psf) throw InputError("extraction request has no PSF");
  const Image& im = *req.image;
  const GaussHermitePsf& psf = *req.psf;
  if (im.ny != psf.npixY || im.nx != psf.npixX || im.pix.rows != im.ny || im.pix.cols != im.nx ||
      im.ivar.rows != im.ny || im.ivar.cols != im.nx)
    throw InputError("image is " + std::to_string(im.nx) + " x " + std::to_string(im.ny) +
                     " (x, y) but the PSF's CCD (NPIX_X x NPIX_Y) is " + std::to_string(psf.npixX) +
                     " x " + std::to_string(psf.npixY));
  if (req.patches)
    for (int i : *req.patches)
      if (i < 0 || i >= int(plan.patches.size()))
        throw InputError("patch index " + std::to_string(i) + " outside the plan's 0.." +
                         std::to_string(int(plan.patches.size()) - 1));
}

double effectivePsfErr(const ExtractionRequest& req) {
  return std::isnan(req.params.psferr) ? req.psf->psfErr : req.params.psferr;
}

ExtractionResult CpuEngine::extract(const ExtractionRequest& req, ProgressSink& progress,
                                    const CancelToken& cancel) {
  ProfileRecorder rec;
  rec.setThreadLaneName("main");
  ExtractionResult result;
  std::vector<int> todo;
  PatchPlan plan;
  {
    ScopedRange whole(&rec, "extract");
    {
      ScopedRange r(&rec, "plan");
      if (!req.psf) throw InputError("extraction request has no PSF");
      plan = makePatchPlan(*req.psf, req.wave, req.fiberMin, req.nFiber, req.params);
      validateRequest(req, plan);
    }
    const GaussHermitePsf& psf = *req.psf;
    const Image& image = *req.image;
    {
      // The frame-sized arrays (and the CCD-sized model): 0.1-0.2 s on a full frame.
      ScopedRange r(&rec, "allocate");
      result.allocate(plan, psf.hsizeY, req.model, psf.npixX, psf.npixY);
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

    int nthreads = resolveThreads(req.threads);
    nthreads = std::max(1, std::min<int>(nthreads, int(todo.size())));
    lapack::singleThreadedBlas();

    std::atomic<int> next{0}, done{0};
    std::mutex modelMutex, diagMutex, errorMutex;
    std::exception_ptr error;
    const int total = int(todo.size());
    const double dw = plan.wave.dw;

    auto worker = [&](int t) {
      if (t > 0) rec.setThreadLaneName("cpu thread " + std::to_string(t));
      PatchSolver solver;
      PatchSolution sol;
      try {
        for (;;) {
          if (cancel.cancelled()) return;
          {
            std::lock_guard lock(errorMutex);
            if (error) return;
          }
          const int i = next.fetch_add(1);
          if (i >= total) return;
          const Patch& p = plan.patches[todo[i]];
          const auto t0 = std::chrono::steady_clock::now();
          {
            ScopedRange rp(&rec, "patch", p.index);
            solver.solve(p, plan, image, psf, opt, sol, &rec);
            ScopedRange ra(&rec, "assemble", p.index);
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
              std::lock_guard lock(modelMutex);
              Array2D<double>& m = *result.model;
              const int bw = p.box.width();
              for (int y = 0; y < p.box.height(); ++y) {
                const double* src = sol.model.data() + std::size_t(y) * bw;
                double* dst = m.row(p.box.y0 + y) + p.box.x0;
                for (int x = 0; x < bw; ++x) dst[x] += src[x];
              }
            }
          }
          PatchOutput out;
          out.patch = &p;
          out.diagnostics.patch = p.index;
          out.diagnostics.seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          out.diagnostics.chi2 = sol.chi2;
          out.diagnostics.regularized = sol.regularized;
          out.diagnostics.failed = sol.failed;
          out.diagnostics.lane = rec.currentLane();
          out.flux = Array2D<double>(p.nfiber, p.nwave);
          out.ivar = Array2D<double>(p.nfiber, p.nwave);
          for (int s = 0; s < p.nfiber; ++s)
            for (int k = 0; k < p.nwave; ++k) {
              out.flux(s, k) = result.flux(p.fiber0 + s - plan.fiberMin, p.wave0 + k) / dw;
              out.ivar(s, k) = result.ivar(p.fiber0 + s - plan.fiberMin, p.wave0 + k) * dw * dw;
            }
          {
            std::lock_guard lock(diagMutex);
            result.patches.push_back(out.diagnostics);
          }
          progress.patchDone(out, done.fetch_add(1) + 1, total);
        }
      } catch (...) {
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
    if (error) std::rethrow_exception(error);
    result.cancelled = cancel.cancelled() && done.load() < total;
    std::sort(result.patches.begin(), result.patches.end(),
              [](const PatchDiagnostics& a, const PatchDiagnostics& b) { return a.patch < b.patch; });
    {
      ScopedRange r(&rec, "finalize");
      finalizeFrame(result);
    }
  }
  result.profile = rec.finish();
  return result;
}

} // namespace spex
