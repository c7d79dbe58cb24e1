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

double effectivePsfErr(const ExtractionRequest& req) {
  return std::isnan(req.params.psferr) ? req.psf->psfErr : req.params.psferr;
}

} // namespace spex
