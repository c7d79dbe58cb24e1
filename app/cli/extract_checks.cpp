#include "extract_checks.h"

#include "core/errors.h"
#include "core/plan/patch_plan.h"
#include "core/psf/gauss_hermite_psf.h"

#include <algorithm>
#include <cstdio>
#include <unistd.h>

namespace spex::cli {

int boundNwavestep(int nwavestep, const ExtractionRequest& req, std::string& note) {
  int step = nwavestep;
  const int floor = PatchParams{}.nwavestep;
  if (step > req.wave.n && step > floor) {
    step = std::max(req.wave.n, floor);
    note = "--nwavestep " + std::to_string(nwavestep) + " is wider than the " +
           std::to_string(req.wave.n) + "-bin wavelength grid; using " + std::to_string(step);
  }
  PatchParams p = req.params;
  p.nwavestep = step;
  // One patch's dense solve holds about five n x n double matrices (normal matrix,
  // factor, inverse and the decorrelation scratch, patch_solver.cpp), n = solved
  // fibers x solved bins.
  const int fibers = std::min(p.bundlesize, (p.bundlesize + p.nsubbundles - 1) / p.nsubbundles) + 2;
  const double n = double(fibers) * (step + 2.0 * p.wavepad());
  const double bytes = 5.0 * n * n * 8.0;
  const double physical = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
  if (physical > 0 && bytes > 0.5 * physical) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "--nwavestep %d needs about %.1f GiB for one patch (%.0f unknowns), more than "
                  "half of this machine's %.1f GiB; use a smaller --nwavestep (default %d)",
                  step, bytes / (1u << 30), n, physical / (1u << 30), floor);
    throw InputError(buf);
  }
  return step;
}

int reportUnusableBins(const ExtractionResult& r, const char* command) {
  if (r.noDataBins == 0) return 0;
  int failed = 0;
  for (const auto& d : r.patches) failed += d.failed;
  std::fprintf(stderr,
               "spexlab-cli %s: warning: %ld bins have no usable extraction (%d failed patches, %ld "
               "bins with values a float32 frame cannot hold): written with flux 0, ivar 0 and MASK "
               "bit NODATA (8); exit status %d\n",
               command, r.noDataBins, failed, r.nonFiniteBins, kExitUnusableBins);
  return kExitUnusableBins;
}

} // namespace spex::cli
