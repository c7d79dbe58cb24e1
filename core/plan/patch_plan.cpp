#include "patch_plan.h"

#include "../errors.h"
#include "../parallel.h"
#include "../psf/gauss_hermite_psf.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <vector>

namespace spex {

WaveGrid WaveGrid::fromRange(double wmin, double wmax, double dw) {
  std::ostringstream why;
  if (!std::isfinite(wmin) || !std::isfinite(wmax) || !std::isfinite(dw))
    why << "wavelength range must be finite numbers";
  else if (dw <= 0)
    why << "wavelength step must be positive, got " << dw;
  else if (wmax < wmin)
    why << "wavelength range is reversed: " << wmin << " > " << wmax;
  if (!why.str().empty()) throw InputError(why.str());
  WaveGrid g;
  g.wmin = wmin;
  g.wmax = wmax;
  g.dw = dw;
  // numpy: len(arange(wmin, wmax + dw/2, dw)) = ceil((wmax + dw/2 - wmin) / dw).
  g.n = int(std::ceil((wmax + 0.5 * dw - wmin) / dw));
  if (g.n <= 0) throw InputError("wavelength range is empty");
  if (g.n > 1000000) throw InputError("wavelength grid too large (more than 1e6 bins)");
  return g;
}

void PatchParams::validate() const {
  std::ostringstream why;
  if (bundlesize < 1) why << "bundlesize must be >= 1, got " << bundlesize;
  else if (nsubbundles < 1 || nsubbundles > bundlesize)
    why << "nsubbundles must be in 1.." << bundlesize << ", got " << nsubbundles;
  else if (nwavestep < 1) why << "nwavestep must be >= 1, got " << nwavestep;
  else if (!(wavepadFrac >= 0) || wavepadFrac > 100)
    why << "wavepad fraction must be in 0..100, got " << wavepadFrac;
  else if (!(pixpadFrac >= 0 && pixpadFrac <= 1))
    why << "pixpad fraction must be in 0..1, got " << pixpadFrac;
  else if (!(regularize >= 0) || !std::isfinite(regularize))
    why << "regularize must be >= 0, got " << regularize;
  else if (!std::isnan(psferr) && !(psferr >= 0 && std::isfinite(psferr)))
    why << "psferr must be >= 0, got " << psferr;
  if (!why.str().empty()) throw InputError(why.str());
}

namespace {

// Start of sub-bundle k when a bundle of n fibers is split in m parts whose sizes
// differ by at most one, larger first (numpy array_split).
int splitStart(int n, int m, int k) {
  const int q = n / m, r = n % m;
  return k * q + std::min(k, r);
}

struct Extent {
  int xmin = INT_MAX, xmax = INT_MIN, ymin = INT_MAX, ymax = INT_MIN;
};

// Stamp corners of every (fiber, grid bin) the plan can touch, evaluated once: a
// patch's padded window overlaps its neighbours' (74 of 50 bins, 7 of 5 fibers), so
// evaluating per patch costs ~3.5x more Legendre sums. Filled in parallel over fibers.
class CornerTable {
public:
  CornerTable(const GaussHermitePsf& psf, const WaveGrid& g, int f0, int f1, int k0, int k1)
      : m_f0(f0), m_k0(k0), m_nk(k1 - k0), m_ownX(std::size_t(f1 - f0) * m_nk),
        m_ownY(m_ownX.size()), m_x(m_ownX.data()), m_y(m_ownY.data()) {
    const int nf = f1 - f0;
    auto fill = [&](int fa, int fb) {
      for (int f = fa; f < fb; ++f)
        for (int k = k0; k < k1; ++k) {
          int xc, yc;
          psf.corner(f, g.at(k), xc, yc);
          const std::size_t i = std::size_t(f - f0) * m_nk + (k - k0);
          m_ownX[i] = xc;
          m_ownY[i] = yc;
        }
    };
    parallelFor(nf, [&](int a, int b) { fill(f0 + a, f0 + b); }, 0, 8);
  }
  // From corners evaluated elsewhere (planCornerRange's range).
  explicit CornerTable(const PlanCorners& c)
      : m_f0(c.f0), m_k0(c.k0), m_nk(c.k1 - c.k0), m_x(c.x.data()), m_y(c.y.data()) {}

  // Pixel extent ([min, max) in x and y) of the spots of fibers [f0, f0+nf) at grid
  // bins [k0, k0+nk) — gpu_specter's get_xyrange.
  Extent extent(int f0, int nf, int k0, int nk, int nx, int ny) const {
    Extent e;
    for (int f = f0; f < f0 + nf; ++f) {
      const std::size_t row = std::size_t(f - m_f0) * m_nk + (k0 - m_k0);
      for (int k = 0; k < nk; ++k) {
        e.xmin = std::min(e.xmin, m_x[row + k]);
        e.xmax = std::max(e.xmax, m_x[row + k]);
        e.ymin = std::min(e.ymin, m_y[row + k]);
        e.ymax = std::max(e.ymax, m_y[row + k]);
      }
    }
    e.xmax += nx;
    e.ymax += ny;
    return e;
  }

private:
  int m_f0, m_k0, m_nk;
  std::vector<int> m_ownX, m_ownY; // when the table evaluated them itself
  const int* m_x;
  const int* m_y;
};

} // namespace

WaveGrid defaultFrameGrid(const GaussHermitePsf& psf) {
  // desispec.scripts.extract (gpu_specter path): wmin, wmax = the PSF HDU's WAVEMIN,
  // WAVEMAX; dw = 0.8; wave = arange(wmin, wmax + dw/2, dw).
  return WaveGrid::fromRange(psf.ghSigX.wavemin, psf.ghSigX.wavemax, 0.8);
}

namespace {
PatchPlan makePlan(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin, int nFiber,
                   const PatchParams& params, const PlanCorners* given);
} // namespace

PatchPlan makePatchPlan(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin, int nFiber,
                        const PatchParams& params) {
  return makePlan(psf, wave, fiberMin, nFiber, params, nullptr);
}

PatchPlan makePatchPlan(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin, int nFiber,
                        const PatchParams& params, const PlanCorners& corners) {
  return makePlan(psf, wave, fiberMin, nFiber, params, &corners);
}

PlanCorners planCornerRange(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin, int nFiber,
                            const PatchParams& params) {
  PlanCorners c;
  try {
    params.validate();
  } catch (const InputError&) {
    return c; // empty: makePatchPlan reports the problem
  }
  if (nFiber < 1 || fiberMin < 0 || fiberMin + nFiber > psf.nfiber || params.bundlesize < 1 ||
      params.nwavestep < 1 || wave.n < 1)
    return c; // empty: makePatchPlan reports the problem
  // Padded fibers stay inside their bundle; padded bins run wavepad past both ends and
  // the core window of the last patch a full nwavestep.
  const int bs = params.bundlesize, step = params.nwavestep, wp = params.wavepad();
  c.f0 = std::max(fiberMin - 1, (fiberMin / bs) * bs);
  c.f1 = std::min(fiberMin + nFiber + 1, psf.nfiber);
  const int nsteps = (wave.n + step - 1) / step;
  c.k0 = -wp;
  c.k1 = (nsteps - 1) * step + step + wp;
  return c;
}

namespace {

// The corners' range check of makePatchPlan(..., PlanCorners) and patchExtents.
void checkCorners(const PlanCorners& given, const PlanCorners& range) {
  if (given.f0 != range.f0 || given.f1 != range.f1 || given.k0 != range.k0 || given.k1 != range.k1 ||
      given.x.size() != std::size_t(range.f1 - range.f0) * (range.k1 - range.k0) ||
      given.y.size() != given.x.size())
    throw InputError("patch plan: the corners given cover fibers " + std::to_string(given.f0) + ".." +
                     std::to_string(given.f1) + ", bins " + std::to_string(given.k0) + ".." +
                     std::to_string(given.k1) + " (" + std::to_string(given.x.size()) +
                     " values), not the plan's fibers " + std::to_string(range.f0) + ".." +
                     std::to_string(range.f1) + ", bins " + std::to_string(range.k0) + ".." +
                     std::to_string(range.k1));
}

std::vector<PatchExtents> extentsFrom(const PatchPlan& plan, const CornerTable& corners) {
  std::vector<PatchExtents> out(plan.patches.size());
  const int step = plan.params.nwavestep;
  for (std::size_t i = 0; i < plan.patches.size(); ++i) {
    const Patch& p = plan.patches[i];
    const Extent pad = corners.extent(p.fiberPad0, p.nfiberPad, p.wavePad0, p.nwavePad, 0, 0);
    const Extent core = corners.extent(p.fiberPad0, p.nfiberPad, p.wave0, step, 0, 0);
    out[i] = PatchExtents{{pad.xmin, pad.xmax, pad.ymin, pad.ymax}, {core.xmin, core.xmax, core.ymin, core.ymax}};
  }
  return out;
}

PatchPlan makePlan(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin, int nFiber,
                   const PatchParams& params, const PlanCorners* given) {
  PatchPlan plan = makePatchSkeleton(psf, wave, fiberMin, nFiber, params);
  const PlanCorners range = planCornerRange(psf, wave, fiberMin, nFiber, params);
  if (given) checkCorners(*given, range);
  const CornerTable corners = given ? CornerTable(*given)
                                    : CornerTable(psf, wave, range.f0, range.f1, range.k0, range.k1);
  setPatchBoxes(plan, psf, extentsFrom(plan, corners));
  return plan;
}

} // namespace

PatchPlan makePatchSkeleton(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin, int nFiber,
                            const PatchParams& params) {
  params.validate();
  if (nFiber < 1) throw InputError("fiber range is empty (nspec = " + std::to_string(nFiber) + ")");
  if (fiberMin < 0 || fiberMin + nFiber > psf.nfiber)
    throw InputError("fibers " + std::to_string(fiberMin) + ".." +
                     std::to_string(fiberMin + nFiber - 1) + " outside the PSF's 0.." +
                     std::to_string(psf.nfiber - 1));
  if (wave.n < 1) throw InputError("wavelength grid is empty");
  // arange(wmin, wmax + dw/2, dw) may end up to half a step past wmax; allow that
  // much past the domain (Legendre series are smooth there).
  // The PSF HDU's own domain counts too: desispec's default grid runs over it
  // (defaultFrameGrid) and may pass the traces' domain by a fraction of an Angstrom.
  const double slack = 0.5 * wave.dw;
  const double lo = std::min(psf.waveMin(), psf.ghSigX.wavemin);
  const double hi = std::max(psf.waveMax(), psf.ghSigX.wavemax);
  if (wave.wmin < lo - 1e-9 || wave.last() > hi + slack) {
    std::ostringstream os;
    os << "wavelengths " << wave.wmin << ".." << wave.last() << " A outside the PSF's domain "
       << lo << ".." << hi << " A";
    throw InputError(os.str());
  }

  PatchPlan plan;
  plan.wave = wave;
  plan.fiberMin = fiberMin;
  plan.nFiber = nFiber;
  plan.params = params;
  plan.wavepad = params.wavepad();
  plan.npixX = psf.npixX;
  plan.npixY = psf.npixY;

  const int bs = params.bundlesize;
  const int wp = plan.wavepad;
  const int step = params.nwavestep;
  const int fiberEnd = fiberMin + nFiber;
  for (int b = fiberMin / bs; b * bs < fiberEnd; ++b) {
    const int bStart = b * bs;
    const int bEnd = std::min((b + 1) * bs, psf.nfiber); // padding stays in the bundle
    const int bSize = std::min(bs, psf.nfiber - bStart);
    const int nsub = std::min(params.nsubbundles, bSize);
    for (int sb = 0; sb < nsub; ++sb) {
      const int s0 = bStart + splitStart(bSize, nsub, sb);
      const int s1 = bStart + splitStart(bSize, nsub, sb + 1);
      const int f0 = std::max(s0, fiberMin), f1 = std::min(s1, fiberEnd);
      if (f1 <= f0) continue;
      // One extra fiber each side, inside the same bundle (EXTRACTION.md §3).
      const int p0 = std::max(f0 - 1, bStart), p1 = std::min(f1 + 1, bEnd);
      for (int iw = 0; iw < wave.n; iw += step) {
        Patch p;
        p.index = int(plan.patches.size());
        p.bundle = b;
        p.subbundle = sb;
        p.fiber0 = f0;
        p.nfiber = f1 - f0;
        p.fiberPad0 = p0;
        p.nfiberPad = p1 - p0;
        p.wave0 = iw;
        p.nwave = std::min(step, wave.n - iw);
        p.wavePad0 = iw - wp;
        p.nwavePad = step + 2 * wp;
        plan.patches.push_back(p);
      }
    }
  }
  return plan;
}

std::vector<PatchExtents> patchExtents(const PatchPlan& skeleton, const GaussHermitePsf& psf,
                                       const PlanCorners& corners) {
  checkCorners(corners, planCornerRange(psf, skeleton.wave, skeleton.fiberMin, skeleton.nFiber, skeleton.params));
  return extentsFrom(skeleton, CornerTable(corners));
}

void setPatchBoxes(PatchPlan& plan, const GaussHermitePsf& psf, const std::vector<PatchExtents>& extents) {
  if (extents.size() != plan.patches.size())
    throw InputError("patch plan: " + std::to_string(extents.size()) + " patch extents for " +
                     std::to_string(plan.patches.size()) + " patches");
  const int snx = psf.spotNx(), sny = psf.spotNy();
  const double keep = 1.0 - plan.params.pixpadFrac;
  for (std::size_t i = 0; i < plan.patches.size(); ++i) {
    Patch& p = plan.patches[i];
    const PatchExtents& e = extents[i];
    // x spans all padded spots; y spans the core window (nwavestep bins, also for
    // the last partial patch) plus pixpadFrac of the rows the padding would add.
    const int padYmin = e.pad[2], padYmax = e.pad[3] + sny, coreYmin = e.core[2], coreYmax = e.core[3] + sny;
    const int ylo = padYmin + int((coreYmin - padYmin) * keep);
    const int yhi = padYmax - int((padYmax - coreYmax) * keep);
    PixelBox box{e.pad[0], e.pad[1] + snx, ylo, yhi};
    p.clipped = box.x0 < 0 || box.y0 < 0 || box.x1 > psf.npixX || box.y1 > psf.npixY;
    box.x0 = std::clamp(box.x0, 0, psf.npixX);
    box.x1 = std::clamp(box.x1, 0, psf.npixX);
    box.y0 = std::clamp(box.y0, 0, psf.npixY);
    box.y1 = std::clamp(box.y1, 0, psf.npixY);
    p.box = box;
  }
}

std::vector<int> PatchPlan::patchesInRegion(int f0, int f1, int w0, int w1) const {
  std::vector<int> out;
  for (const Patch& p : patches)
    if (p.fiber0 < f1 && p.fiber0 + p.nfiber > f0 && p.wave0 < w1 && p.wave0 + p.nwave > w0)
      out.push_back(p.index);
  return out;
}

int PatchPlan::patchAt(int fiber, int bin) const {
  for (const Patch& p : patches)
    if (fiber >= p.fiber0 && fiber < p.fiber0 + p.nfiber && bin >= p.wave0 &&
        bin < p.wave0 + p.nwave)
      return p.index;
  return -1;
}

std::vector<int> PatchPlan::patchesForSelection(const std::vector<int>& picked, const std::vector<int>& fibers) const {
  std::vector<int> sel;
  for (int p : picked)
    if (p >= 0 && p < int(patches.size())) sel.push_back(p);
  if (sel.empty())
    for (int f : fibers)
      for (int p : patchesInRegion(f, f + 1, 0, wave.n)) sel.push_back(p);
  std::sort(sel.begin(), sel.end());
  sel.erase(std::unique(sel.begin(), sel.end()), sel.end());
  return sel;
}

} // namespace spex
