// Request checks shared by every engine (declared in engine.h).
#include "engine.h"

#include "../errors.h"
#include "../image.h"
#include "../psf/gauss_hermite_psf.h"

#include <cmath>
#include <string>

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

namespace {
bool sameParams(const PatchParams& a, const PatchParams& b) {
  auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  return a.bundlesize == b.bundlesize && a.nsubbundles == b.nsubbundles && a.nwavestep == b.nwavestep &&
         a.wavepadFrac == b.wavepadFrac && a.pixpadFrac == b.pixpadFrac && same(a.regularize, b.regularize) &&
         same(a.psferr, b.psferr) && a.mode == b.mode;
}
} // namespace

std::shared_ptr<const PatchPlan> requestPlan(const ExtractionRequest& req) {
  if (!req.psf) throw InputError("extraction request has no PSF");
  if (!req.plan)
    return std::make_shared<const PatchPlan>(makePatchPlan(*req.psf, req.wave, req.fiberMin, req.nFiber, req.params));
  const PatchPlan& p = *req.plan;
  const char* bad = nullptr;
  if (!(p.wave.wmin == req.wave.wmin && p.wave.dw == req.wave.dw && p.wave.n == req.wave.n)) bad = "wavelength grid";
  else if (p.fiberMin != req.fiberMin || p.nFiber != req.nFiber) bad = "fibers";
  else if (!sameParams(p.params, req.params)) bad = "patch parameters";
  else if (p.npixX != req.psf->npixX || p.npixY != req.psf->npixY) bad = "CCD size (the PSF's NPIX_X x NPIX_Y)";
  if (bad)
    throw InputError(std::string("extraction request: its patch plan was made for another ") + bad +
                     " than the request's; make the plan from the request (attachPlan)");
  return req.plan;
}

void attachPlan(ExtractionRequest& req) {
  if (!req.plan) req.plan = requestPlan(req);
}

double effectivePsfErr(const ExtractionRequest& req) {
  return std::isnan(req.params.psferr) ? req.psf->psfErr : req.params.psferr;
}

} // namespace spex
