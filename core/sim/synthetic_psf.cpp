// The synthetic DESI-like r-camera PSF. Every quantity is first designed as a smooth
// function of wavelength and fiber position, then fitted with Legendre series over the
// file's domains, exactly as a real PSF file stores it: the fitted series IS the PSF,
// the design functions only shape it.
#include "simulator.h"

#include "../errors.h"
#include "../psf/legendre.h"
#include "random.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace spex {

namespace {

// Seed purposes for mixSeed, so the PSF's streams never coincide with the simulator's.
constexpr uint64_t kPurposeFiber = 0x7073662d66696272ull; // "psf-fibr"

// Least squares on Chebyshev nodes, precomputed once per (domain, ncoeff): fitting is
// then one small matrix-vector product per fiber and parameter.
class LegendreFitter {
public:
  LegendreFitter(double wmin, double wmax, int ncoeff)
      : m_ncoeff(ncoeff), m_nnode(std::max(3 * ncoeff, 24)) {
    const int n = m_ncoeff, m = m_nnode;
    // Chebyshev nodes keep the Legendre Vandermonde matrix close to orthogonal, so the
    // normal equations are well conditioned for any degree we use (<= ~10).
    m_nodes.resize(m);
    std::vector<double> v(std::size_t(m) * n);
    for (int j = 0; j < m; ++j) {
      const double u = std::cos(std::numbers::pi * (j + 0.5) / m);
      m_nodes[j] = wmin + 0.5 * (u + 1.0) * (wmax - wmin);
      double p0 = 1.0, p1 = u;
      for (int k = 0; k < n; ++k) {
        double pk;
        if (k == 0)
          pk = 1.0;
        else if (k == 1)
          pk = u;
        else {
          pk = ((2 * k - 1) * u * p1 - (k - 1) * p0) / k;
          p0 = p1;
          p1 = pk;
        }
        v[std::size_t(j) * n + k] = pk;
      }
    }
    // G = V^T V, Cholesky G = L L^T, then the projector P = G^-1 V^T (n x m).
    std::vector<double> g(std::size_t(n) * n, 0.0);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        for (int j = 0; j < m; ++j)
          g[a * n + b] += v[std::size_t(j) * n + a] * v[std::size_t(j) * n + b];
    for (int c = 0; c < n; ++c) {
      double d = g[c * n + c];
      for (int k = 0; k < c; ++k) d -= g[c * n + k] * g[c * n + k];
      d = std::sqrt(d);
      g[c * n + c] = d;
      for (int r = c + 1; r < n; ++r) {
        double s = g[r * n + c];
        for (int k = 0; k < c; ++k) s -= g[r * n + k] * g[c * n + k];
        g[r * n + c] = s / d;
      }
    }
    m_proj.assign(std::size_t(n) * m, 0.0);
    std::vector<double> col(n);
    for (int j = 0; j < m; ++j) {
      for (int k = 0; k < n; ++k) col[k] = v[std::size_t(j) * n + k];
      for (int r = 0; r < n; ++r) { // forward: L z = col
        double s = col[r];
        for (int k = 0; k < r; ++k) s -= g[r * n + k] * col[k];
        col[r] = s / g[r * n + r];
      }
      for (int r = n - 1; r >= 0; --r) { // back: L^T c = z
        double s = col[r];
        for (int k = r + 1; k < n; ++k) s -= g[k * n + r] * col[k];
        col[r] = s / g[r * n + r];
      }
      for (int k = 0; k < n; ++k) m_proj[std::size_t(k) * m + j] = col[k];
    }
  }

  const std::vector<double>& nodes() const { return m_nodes; }
  int ncoeff() const { return m_ncoeff; }

  // values[j] = f(nodes()[j]); writes ncoeff coefficients.
  void fit(const double* values, double* coeff) const {
    for (int k = 0; k < m_ncoeff; ++k) {
      const double* p = m_proj.data() + std::size_t(k) * m_nnode;
      double s = 0.0;
      for (int j = 0; j < m_nnode; ++j) s += p[j] * values[j];
      coeff[k] = s;
    }
  }

private:
  int m_ncoeff, m_nnode;
  std::vector<double> m_nodes;
  std::vector<double> m_proj; // [ncoeff][nnode]
};

// Per-fiber draws: small deviations from the smooth design, bounded to 3 sigma so a
// rare seed cannot push a trace off the CCD or a sigma out of range.
struct FiberDraw {
  double x0 = 0;   // CCD column of the trace at the reference point
  double xn = 0;   // position across the CCD, -1 (left edge) .. 1 (right edge)
  double yJit = 0; // rows
  double dispJit = 0;
  double sxJit = 0, syJit = 0;
  double ghJit[5] = {0, 0, 0, 0, 0};
};

double boundedNormal(SimRng& rng) {
  return std::clamp(rng.normal(), -3.0, 3.0);
}

// The GH-i-j design (EXTRACTION.md §2 notation): a mostly Gaussian core with a few
// percent of low-order shape terms that vary with wavelength (s in [-1, 1] over the
// camera) and position across the CCD (xn), like the real r0 PSF; higher orders tiny
// or zero. GH-0-0 is 1: spots are normalised after clipping anyway.
double ghDesign(int i, int j, double s, double xn, const FiberDraw& f) {
  const int key = i * 10 + j;
  switch (key) {
  case 0:
    return 1.0;
  case 10:
    return 0.010 * xn * (1.0 + 0.5 * s) + 0.002 * f.ghJit[0];
  case 1:
    return 0.006 * s + 0.003 * xn + 0.002 * f.ghJit[1];
  case 20:
    return 0.008 + 0.004 * s + 0.002 * f.ghJit[2];
  case 2:
    return 0.028 + 0.006 * s + 0.002 * f.ghJit[3];
  case 11:
    return -0.035 * xn * (0.8 + 0.2 * s) + 0.002 * f.ghJit[4];
  case 21:
    return -0.010 + 0.010 * s * xn;
  case 12:
    return 0.006 * xn;
  case 22:
    return -0.004 + 0.006 * s;
  case 30:
    return 0.004 * xn * s;
  case 3:
    return -0.004 * s;
  case 40:
    return 0.003;
  case 4:
    return 0.010;
  default:
    return 0.0;
  }
}

} // namespace

std::vector<double> fitLegendre(const std::function<double(double)>& f, double wmin, double wmax,
                                int ncoeff) {
  if (ncoeff <= 0) throw InputError("fitLegendre: ncoeff must be positive");
  if (!(wmin < wmax)) throw InputError("fitLegendre: empty domain");
  LegendreFitter fitter(wmin, wmax, ncoeff);
  std::vector<double> values(fitter.nodes().size());
  for (std::size_t j = 0; j < values.size(); ++j) values[j] = f(fitter.nodes()[j]);
  std::vector<double> c(ncoeff);
  fitter.fit(values.data(), c.data());
  return c;
}

GaussHermitePsf makeSyntheticPsf(const SyntheticPsfOptions& opt) {
  if (opt.nfiber <= 0 || opt.bundlesize <= 0)
    throw InputError("synthetic PSF: nfiber and bundlesize must be positive");
  if (opt.npixX < 64 || opt.npixY < 64) throw InputError("synthetic PSF: CCD smaller than 64 px");
  if (!(opt.waveMin < opt.waveMax) || opt.waveMin <= 20)
    throw InputError("synthetic PSF: need 20 < waveMin < waveMax");
  if (opt.hsizeX <= 0 || opt.hsizeY <= 0 || opt.ghdeg < 0 || opt.legdeg < 0)
    throw InputError("synthetic PSF: HSIZE must be positive, GHDEG and LEGDEG non-negative");

  // Fiber layout: 7.3 px pitch inside a bundle (DESI r: ~7.2), bundles spread over the
  // CCD with ~36 px margins; the spot half-width (8) and the trace bends (<= 7 px)
  // then stay on the CCD.
  constexpr double kPitch = 7.3;
  constexpr double kMargin = 36.0;
  const int nbundle = (opt.nfiber + opt.bundlesize - 1) / opt.bundlesize;
  const double intra = (opt.nfiber - nbundle) * kPitch;
  const double avail = opt.npixX - 2.0 * kMargin;
  double gap = nbundle > 1 ? (avail - intra) / (nbundle - 1) : 0.0;
  if (nbundle > 1 && gap < 2.0 * kPitch)
    throw InputError("synthetic PSF: " + std::to_string(opt.nfiber) + " fibers do not fit on " +
                     std::to_string(opt.npixX) + " columns");
  gap = std::min(gap, 6.0 * kPitch); // few fibers on a wide CCD: keep bundles together
  const double span = intra + (nbundle - 1) * gap;
  const double xStart = 0.5 * (opt.npixX - span);
  const double xMid = 0.5 * opt.npixX;

  std::vector<FiberDraw> draws(opt.nfiber);
  for (int s = 0; s < opt.nfiber; ++s) {
    SimRng rng(mixSeed(opt.seed, kPurposeFiber, uint64_t(s)));
    FiberDraw& d = draws[s];
    const int b = s / opt.bundlesize;
    d.x0 = xStart + (s - b) * kPitch + b * gap + 0.15 * boundedNormal(rng);
    d.xn = (d.x0 - xMid) / xMid;
    d.yJit = 0.3 * boundedNormal(rng);
    d.dispJit = 2e-4 * boundedNormal(rng);
    d.sxJit = boundedNormal(rng);
    d.syJit = boundedNormal(rng);
    for (double& g : d.ghJit) g = boundedNormal(rng);
  }

  const double wlo = opt.waveMin, whi = opt.waveMax;
  auto sOf = [&](double w) { return 2.0 * (w - wlo) / (whi - wlo) - 1.0; };

  // Traces. x bows 1.5 px toward lower columns mid-band and fans out toward the red at
  // the CCD edges (~6 px over the band for the outermost fibers): a mild smile.
  auto xDesign = [&](const FiberDraw& f, double w) {
    const double s = sOf(w);
    return f.x0 + 1.5 * (s * s - 1.0) + f.xn * (3.0 * s + 1.5 * s * s) +
           0.2 * std::sin(2.2 * s + 0.7 + 0.5 * f.xn);
  };
  // y runs from ~row 12 at waveMin to ~row npixY - 12 at waveMax (0.548 A/row on the
  // default CCD), convex like the real r camera (more rows per Angstrom in the red),
  // the CCD centre a few rows lower than its edges, plus a gentle wiggle.
  const double yMargin = 12.0;
  const double yLen = opt.npixY - 2.0 * yMargin;
  const double yQuad = 0.04 * yLen;
  auto yDesign = [&](const FiberDraw& f, double w) {
    const double t = (w - wlo) / (whi - wlo);
    return yMargin + yLen * (1.0 + 0.001 * f.xn * f.xn + f.dispJit) * t + yQuad * t * (t - 1.0) -
           8.0 * (1.0 - f.xn * f.xn) + f.yJit + 0.6 * std::sin(3.1 * t + 0.4);
  };
  auto sigXDesign = [&](const FiberDraw& f, double w) {
    const double s = sOf(w);
    return 1.10 + 0.06 * s + 0.05 * f.xn * f.xn + 0.02 * std::sin(2.5 * s) + 0.01 * f.sxJit;
  };
  auto sigYDesign = [&](const FiberDraw& f, double w) {
    const double s = sOf(w);
    return 1.16 + 0.07 * s + 0.04 * f.xn * f.xn + 0.015 * std::cos(2.0 * s) + 0.01 * f.syJit;
  };

  GaussHermitePsf psf;
  psf.nfiber = opt.nfiber;
  psf.fiberMin = 0;
  psf.camera = opt.camera;
  psf.npixX = opt.npixX;
  psf.npixY = opt.npixY;
  psf.hsizeX = opt.hsizeX;
  psf.hsizeY = opt.hsizeY;
  psf.ghdegX = opt.ghdeg;
  psf.ghdegY = opt.ghdeg;
  psf.legdeg = opt.legdeg;
  psf.psfErr = 0.01;

  // Unequal domains on purpose: nothing downstream may assume traces and parameters
  // share one (real files differ by an Angstrom or so; we use 5 A).
  const double traceLo = wlo - 5.0, traceHi = whi + 5.0;
  const double psfLo = wlo - 10.0, psfHi = whi + 10.0;
  constexpr int kTraceCoeff = 6; // degree 5
  const int nParamCoeff = opt.legdeg + 1;
  const LegendreFitter traceFit(traceLo, traceHi, kTraceCoeff);
  const LegendreFitter paramFit(psfLo, psfHi, nParamCoeff);

  auto makeSet = [&](double lo, double hi, int ncoeff) {
    LegendreSet set;
    set.wavemin = lo;
    set.wavemax = hi;
    set.coeff = Array2D<double>(opt.nfiber, ncoeff, 0.0);
    return set;
  };
  psf.xTrace = makeSet(traceLo, traceHi, kTraceCoeff);
  psf.yTrace = makeSet(traceLo, traceHi, kTraceCoeff);
  psf.ghSigX = makeSet(psfLo, psfHi, nParamCoeff);
  psf.ghSigY = makeSet(psfLo, psfHi, nParamCoeff);
  psf.gh.assign(std::size_t(opt.ghdeg + 1) * (opt.ghdeg + 1), makeSet(psfLo, psfHi, nParamCoeff));
  LegendreSet bundle = makeSet(psfLo, psfHi, nParamCoeff);

  std::vector<double> vals(std::max(traceFit.nodes().size(), paramFit.nodes().size()));
  auto fitTrace = [&](LegendreSet& set, int s, auto&& fn) {
    const auto& nodes = traceFit.nodes();
    for (std::size_t j = 0; j < nodes.size(); ++j) vals[j] = fn(draws[s], nodes[j]);
    traceFit.fit(vals.data(), set.coeff.row(s));
  };
  auto fitParam = [&](LegendreSet& set, int s, auto&& fn) {
    const auto& nodes = paramFit.nodes();
    bool allZero = true;
    for (std::size_t j = 0; j < nodes.size(); ++j) {
      vals[j] = fn(draws[s], nodes[j]);
      allZero = allZero && vals[j] == 0.0;
    }
    if (allZero) return; // keep unused GH terms exactly zero (coeff already 0)
    paramFit.fit(vals.data(), set.coeff.row(s));
  };

  for (int s = 0; s < opt.nfiber; ++s) {
    fitTrace(psf.xTrace, s, xDesign);
    fitTrace(psf.yTrace, s, yDesign);
    fitParam(psf.ghSigX, s, sigXDesign);
    fitParam(psf.ghSigY, s, sigYDesign);
    for (int i = 0; i <= opt.ghdeg; ++i)
      for (int j = 0; j <= opt.ghdeg; ++j) {
        LegendreSet& set = psf.gh[std::size_t(i) * (opt.ghdeg + 1) + j];
        if (i == 0 && j == 0) {
          set.coeff(s, 0) = 1.0; // exactly 1, not 1 up to fit rounding
          continue;
        }
        fitParam(set, s,
                 [&](const FiberDraw& f, double w) { return ghDesign(i, j, sOf(w), f.xn, f); });
      }
    bundle.coeff(s, 0) = double(s / opt.bundlesize);
  }
  psf.otherParams["BUNDLE"] = std::move(bundle);

  psf.validate();
  return psf;
}

} // namespace spex
