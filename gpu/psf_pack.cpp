#include "psf_pack.h"

#include "core/psf/gauss_hermite_psf.h"

namespace spex::gpu {

PackedPsf packPsf(const GaussHermitePsf& psf, PsfPart part) {
  PackedPsf p;
  auto add = [&](const LegendreSet& l) {
    DevLegendre d;
    d.offset = int(p.pool.size());
    d.ncoeff = l.coeff.cols;
    d.wmin = l.wavemin;
    d.wmax = l.wavemax;
    p.pool.insert(p.pool.end(), l.coeff.data.begin(), l.coeff.data.end());
    p.sets.push_back(d);
  };
  add(psf.xTrace);
  add(psf.yTrace);
  if (part == PsfPart::TracesOnly) return p;
  add(psf.ghSigX);
  add(psf.ghSigY);
  for (int i = 0; i <= psf.ghdegX; ++i)
    for (int j = 0; j <= psf.ghdegY; ++j) add(psf.ghCoeff(i, j));
  return p;
}

DevPsf describePsf(const GaussHermitePsf& psf, const double* pool, const DevLegendre* sets) {
  DevPsf d;
  d.pool = pool;
  d.sets = sets;
  d.nfiber = psf.nfiber;
  d.hsizeX = psf.hsizeX;
  d.hsizeY = psf.hsizeY;
  d.degX = psf.ghdegX;
  d.degY = psf.ghdegY;
  return d;
}

} // namespace spex::gpu
