#include "psf_pack.h"

#include "core/psf/gauss_hermite_psf.h"

#include <cstring>

namespace spex::gpu {

namespace {

// The sets in the kernels' order (psf_pack.h); `add` returns false to stop.
template <class Add>
void forEachSet(const GaussHermitePsf& psf, PsfPart part, Add&& add) {
  if (!add(psf.xTrace) || !add(psf.yTrace) || part == PsfPart::TracesOnly) return;
  if (!add(psf.ghSigX) || !add(psf.ghSigY)) return;
  for (int i = 0; i <= psf.ghdegX; ++i)
    for (int j = 0; j <= psf.ghdegY; ++j)
      if (!add(psf.ghCoeff(i, j))) return;
}

DevLegendre describeSet(const LegendreSet& l, std::size_t offset) {
  DevLegendre d;
  d.offset = int(offset);
  d.ncoeff = l.coeff.cols;
  d.wmin = l.wavemin;
  d.wmax = l.wavemax;
  return d;
}

} // namespace

PackedPsf packPsf(const GaussHermitePsf& psf, PsfPart part) {
  PackedPsf p;
  std::size_t total = 0;
  forEachSet(psf, part, [&](const LegendreSet& l) {
    total += l.coeff.data.size();
    return true;
  });
  p.pool.reserve(total);
  forEachSet(psf, part, [&](const LegendreSet& l) {
    p.sets.push_back(describeSet(l, p.pool.size()));
    p.pool.insert(p.pool.end(), l.coeff.data.begin(), l.coeff.data.end());
    return true;
  });
  return p;
}

bool samePacked(const GaussHermitePsf& psf, const std::vector<double>& pool, const std::vector<DevLegendre>& sets,
                PsfPart part) {
  std::size_t offset = 0, k = 0;
  bool same = true;
  forEachSet(psf, part, [&](const LegendreSet& l) {
    const std::size_t m = l.coeff.data.size();
    const DevLegendre d = describeSet(l, offset);
    same = k < sets.size() && offset + m <= pool.size() && sets[k].offset == d.offset &&
           sets[k].ncoeff == d.ncoeff && sets[k].wmin == d.wmin && sets[k].wmax == d.wmax &&
           std::memcmp(pool.data() + offset, l.coeff.data.data(), m * sizeof(double)) == 0;
    offset += m;
    ++k;
    return same;
  });
  return same && k == sets.size() && offset == pool.size();
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
