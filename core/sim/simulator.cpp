// Frames with known truth: spectra -> photons per bin -> the EXTRACTION.md §2/§4
// forward model (each bin a delta at its wavelength, spread by its pixel-integrated
// spot) -> Poisson and read noise -> defects. The extraction on the same grid then
// recovers the photons, which is what the engine tests rely on.
#include "simulator.h"

#include "../errors.h"
#include "../threads.h"
#include "random.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <numbers>
#include <string>
#include <thread>

namespace spex {

namespace {

// Seed purposes for mixSeed: each part of a simulation draws from its own stream.
constexpr uint64_t kPurposeSpectrum = 0x73696d2d73706563ull; // "sim-spec"
constexpr uint64_t kPurposeSkyPick = 0x73696d2d736b7970ull;  // "sim-skyp"
constexpr uint64_t kPurposeNoise = 0x73696d2d6e6f6973ull;    // "sim-nois"
constexpr uint64_t kPurposeDefects = 0x73696d2d64656663ull;  // "sim-defc"
constexpr uint64_t kPurposeFiberMap = 0x73696d2d666d6170ull; // "sim-fmap"

constexpr double kInvSqrt2 = 0.70710678118654752440;

// Photons of a Gaussian line (total flux, centre, sigma in Angstrom) falling into the
// bin [w - dw/2, w + dw/2]: bin-integrated, so lines conserve flux on any grid.
double lineInBin(double flux, double centre, double sigma, double w, double dw) {
  const double a = (w - 0.5 * dw - centre) / sigma;
  const double b = (w + 0.5 * dw - centre) / sigma;
  if (a > 9.0 || b < -9.0) return 0.0;
  return flux * 0.5 * (std::erf(b * kInvSqrt2) - std::erf(a * kInvSqrt2));
}

struct Line {
  double wave;  // Angstrom
  double flux;  // photons
  double sigma; // Angstrom
};

// Night-sky lines in the r band (air wavelengths; [OI] 5577/6300/6364, Na D, and the
// strong OH Meinel bands), with rough relative strengths for a ~900 s dark exposure.
// Intrinsically unresolved: 0.6 A sigma keeps them narrow but not single-bin spikes.
const Line kSkyLines[] = {
    {5577.34, 12000, 0.6}, {5889.95, 2500, 0.6}, {5895.92, 2000, 0.6}, {6300.30, 6000, 0.6},
    {6363.78, 2000, 0.6},  {6533.04, 900, 0.6},  {6553.62, 700, 0.6},  {6834.00, 1500, 0.6},
    {6863.96, 2500, 0.6},  {6923.22, 3000, 0.6}, {6948.94, 2500, 0.6}, {7316.28, 4000, 0.6},
    {7340.89, 3500, 0.6},  {7369.25, 3000, 0.6}, {7401.69, 2500, 0.6}, {7524.12, 2000, 0.6},
    {7571.75, 3000, 0.6},  {7750.64, 3500, 0.6}, {7794.11, 3500, 0.6},
};

// Sky continuum, photons per Angstrom, rising slowly to the red.
double skyContinuum(double w) {
  return 12.0 + 8.0 * (w - 5500.0) / 2500.0;
}

double skyInBin(double w, double dw) {
  double p = skyContinuum(w) * dw;
  for (const Line& l : kSkyLines) p += lineInBin(l.flux, l.wave, l.sigma, w, dw);
  return p;
}

// One target's spectrum: a smooth continuum with a few broad absorption dips and a few
// emission lines, drawn from the fiber's own stream over the PSF's whole domain (so it
// does not depend on the grid or on which other fibers are simulated).
struct TargetSpectrum {
  double level = 0, slope = 0, curve = 0;
  double wlo = 0, whi = 0;
  std::vector<Line> dips; // flux field = fractional depth
  std::vector<Line> lines;

  TargetSpectrum(SimRng& rng, double wmin, double wmax) : wlo(wmin), whi(wmax) {
    level = rng.logUniform(25.0, 375.0); // photons / A: ~20..300 per 0.8 A bin
    slope = rng.uniform(-0.4, 0.4);
    curve = rng.uniform(-0.2, 0.2);
    const int ndip = rng.uniformInt(4);
    for (int i = 0; i < ndip; ++i)
      dips.push_back({rng.uniform(wmin, wmax), rng.uniform(0.1, 0.4), rng.uniform(3.0, 8.0)});
    const int nline = rng.uniformInt(5);
    for (int i = 0; i < nline; ++i)
      lines.push_back(
          {rng.uniform(wmin, wmax), rng.logUniform(300.0, 5000.0), rng.logUniform(0.8, 2.5)});
  }

  double photons(double w, double dw) const {
    const double x = 2.0 * (w - wlo) / (whi - wlo) - 1.0;
    double c = level * (1.0 + slope * x + curve * (x * x - 1.0 / 3.0));
    for (const Line& d : dips) {
      const double z = (w - d.wave) / d.sigma;
      if (std::fabs(z) < 9.0) c *= 1.0 - d.flux * std::exp(-0.5 * z * z);
    }
    double p = std::max(c, 0.05 * level) * dw;
    for (const Line& l : lines) p += lineInBin(l.flux, l.wave, l.sigma, w, dw);
    return p;
  }
};

// One fiber's contribution: photons * spot for every bin, with the stamp corners.
// Workers fill these in parallel; the image is then summed in fiber order, so the
// result is bitwise the same for any number of threads.
struct FiberLight {
  std::vector<double> phot; // photons per bin (extended grid)
  std::vector<int> xc, yc;  // stamp corners per bin
  std::vector<double> v;    // [bin][ny][nx] photons * spot
};

void lightOfFiber(const GaussHermitePsf& psf, int fiber, const std::vector<double>& waves,
                  FiberLight& out, Spot& spot) {
  const std::size_t n = waves.size(), stamp = std::size_t(psf.spotNx()) * psf.spotNy();
  out.xc.assign(n, 0);
  out.yc.assign(n, 0);
  out.v.resize(n * stamp);
  for (std::size_t k = 0; k < n; ++k) {
    double* dst = out.v.data() + k * stamp;
    const double p = out.phot[k];
    if (p == 0.0) {
      std::fill(dst, dst + stamp, 0.0);
      continue;
    }
    psf.spotInto(fiber, waves[k], spot);
    out.xc[k] = spot.xc;
    out.yc[k] = spot.yc;
    for (std::size_t i = 0; i < stamp; ++i) dst[i] = p * spot.v[i];
  }
}

// Adds a fiber's light into img, clipped to the CCD.
void addLight(const GaussHermitePsf& psf, const FiberLight& light, Array2D<double>& img) {
  const int nx = psf.spotNx(), ny = psf.spotNy();
  const std::size_t stamp = std::size_t(nx) * ny;
  for (std::size_t k = 0; k < light.xc.size(); ++k) {
    if (light.phot[k] == 0.0) continue;
    const int xc = light.xc[k], yc = light.yc[k];
    const int iy0 = std::max(0, -yc), iy1 = std::min(ny, img.rows - yc);
    const int ix0 = std::max(0, -xc), ix1 = std::min(nx, img.cols - xc);
    const double* v = light.v.data() + k * stamp;
    for (int iy = iy0; iy < iy1; ++iy) {
      double* row = img.row(yc + iy) + xc;
      const double* s = v + std::size_t(iy) * nx;
      for (int ix = ix0; ix < ix1; ++ix) row[ix] += s[ix];
    }
  }
}

// Renders fibers fiberMin .. fiberMin + nFiber - 1 into img. photOf(i, phot) fills
// fiber i's photons per bin; it runs on worker threads, one fiber per call, so it
// must only touch fiber i's own data. Spots are the cost (~2 us each), so they are
// computed in parallel batches; the sums stay in fiber order.
void renderFibers(const GaussHermitePsf& psf, int fiberMin, int nFiber,
                  const std::vector<double>& waves,
                  const std::function<void(int, std::vector<double>&)>& photOf,
                  Array2D<double>& img, int threads) {
  if (threads <= 0) threads = std::min(8, defaultThreadCount().threads);
  threads = std::clamp(threads, 1, nFiber);
  std::vector<FiberLight> batch(threads);
  std::vector<Spot> spots(threads);
  auto work = [&](int slot, int i) {
    photOf(i, batch[slot].phot);
    lightOfFiber(psf, fiberMin + i, waves, batch[slot], spots[slot]);
  };
  for (int first = 0; first < nFiber; first += threads) {
    const int count = std::min(threads, nFiber - first);
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errors(count);
    for (int t = 1; t < count; ++t)
      pool.emplace_back([&, t] {
        try {
          work(t, first + t);
        } catch (...) {
          errors[t] = std::current_exception();
        }
      });
    try {
      work(0, first);
    } catch (...) {
      errors[0] = std::current_exception();
    }
    for (std::thread& th : pool) th.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
    for (int t = 0; t < count; ++t) addLight(psf, batch[t], img);
  }
}

void checkGridInPsf(const GaussHermitePsf& psf, const WaveGrid& wave, const char* who) {
  if (wave.size() <= 0) throw InputError(std::string(who) + ": empty wavelength grid");
  const double tol = 1e-6;
  if (wave.at(0) < psf.waveMin() - tol || wave.last() > psf.waveMax() + tol) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s: wavelength grid %.3f..%.3f A is outside the PSF domain %.3f..%.3f A", who,
                  wave.at(0), wave.last(), psf.waveMin(), psf.waveMax());
    throw InputError(buf);
  }
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}

} // namespace

Array2D<double> renderPhotons(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin,
                              const Array2D<double>& phot, int threads) {
  checkGridInPsf(psf, wave, "renderPhotons");
  if (phot.cols != wave.size())
    throw InputError("renderPhotons: photons have " + std::to_string(phot.cols) +
                     " bins, the grid has " + std::to_string(wave.size()));
  if (fiberMin < 0 || fiberMin + phot.rows > psf.nfiber)
    throw InputError("renderPhotons: fibers " + std::to_string(fiberMin) + ".." +
                     std::to_string(fiberMin + phot.rows - 1) + " are outside the PSF's 0.." +
                     std::to_string(psf.nfiber - 1));
  std::vector<double> waves(wave.size());
  for (int k = 0; k < wave.size(); ++k) waves[k] = wave.at(k);
  Array2D<double> img(psf.npixY, psf.npixX, 0.0);
  if (phot.rows == 0) return img;
  renderFibers(
      psf, fiberMin, phot.rows, waves,
      [&](int i, std::vector<double>& p) { p.assign(phot.row(i), phot.row(i) + phot.cols); }, img,
      threads);
  return img;
}

Simulation simulate(const GaussHermitePsf& psf, const SimulationOptions& opt) {
  checkGridInPsf(psf, opt.wave, "simulate");
  if (opt.nFiber <= 0 || opt.fiberMin < 0 || opt.fiberMin + opt.nFiber > psf.nfiber)
    throw InputError("simulate: fibers " + std::to_string(opt.fiberMin) + " + " +
                     std::to_string(opt.nFiber) + " do not fit the PSF's " +
                     std::to_string(psf.nfiber) + " fibers");
  if (opt.edgePad < 0) throw InputError("simulate: edgePad must be >= 0");
  if (!(opt.readNoise >= 0.0)) throw InputError("simulate: readNoise must be >= 0");
  if (!(opt.emptyFiberFraction >= 0.0 && opt.emptyFiberFraction <= 1.0))
    throw InputError("simulate: emptyFiberFraction must be in [0, 1]");

  const int nwave = opt.wave.size();
  const double dw = opt.wave.dw;

  // Extended grid: edgePad bins beyond each end, same step, restricted to where the
  // PSF is defined. waves[k] is grid bin (k - first) of the extended grid.
  std::vector<double> waves;
  int centre0 = -1; // index in waves of grid bin 0
  for (int k = -opt.edgePad; k < nwave + opt.edgePad; ++k) {
    const double w = opt.wave.at(k);
    const bool inGrid = k >= 0 && k < nwave;
    if (!inGrid && (w < psf.waveMin() || w > psf.waveMax())) continue;
    if (k == 0) centre0 = int(waves.size());
    waves.push_back(w);
  }

  // Which lit fibers are empty (sky only): an exact count, so a 25-fiber frame has
  // some too, picked by a partial Fisher-Yates shuffle.
  std::vector<char> isSky(opt.nFiber, 0);
  {
    int nsky = int(std::lround(opt.emptyFiberFraction * opt.nFiber));
    if (opt.emptyFiberFraction > 0.0 && opt.nFiber >= 4) nsky = std::max(nsky, 1);
    nsky = std::min(nsky, opt.nFiber);
    std::vector<int> order(opt.nFiber);
    for (int i = 0; i < opt.nFiber; ++i) order[i] = i;
    SimRng rng(
        mixSeed(opt.seed, kPurposeSkyPick, uint64_t(opt.fiberMin) << 32 | uint64_t(opt.nFiber)));
    for (int i = 0; i < nsky; ++i) {
      const int j = i + rng.uniformInt(opt.nFiber - i);
      std::swap(order[i], order[j]);
      isSky[order[i]] = 1;
    }
  }

  Simulation sim;
  sim.truth.fiberMin = opt.fiberMin;
  sim.truth.wave.resize(nwave);
  for (int k = 0; k < nwave; ++k) sim.truth.wave[k] = opt.wave.at(k);
  sim.truth.phot = Array2D<double>(opt.nFiber, nwave, 0.0);

  Image& img = sim.image;
  img.ny = psf.npixY;
  img.nx = psf.npixX;
  img.pix = Array2D<double>(img.ny, img.nx, 0.0); // the true model until noise is drawn

  std::vector<double> sky(waves.size());
  for (std::size_t k = 0; k < waves.size(); ++k) sky[k] = skyInBin(waves[k], dw);

  auto photOf = [&](int i, std::vector<double>& phot) {
    SimRng rng(mixSeed(opt.seed, kPurposeSpectrum, uint64_t(opt.fiberMin + i)));
    const TargetSpectrum target(rng, psf.waveMin(), psf.waveMax());
    phot.resize(waves.size());
    for (std::size_t k = 0; k < waves.size(); ++k)
      phot[k] = sky[k] + (isSky[i] ? 0.0 : target.photons(waves[k], dw));
    std::copy(phot.begin() + centre0, phot.begin() + centre0 + nwave, sim.truth.phot.row(i));
  };
  renderFibers(psf, opt.fiberMin, opt.nFiber, waves, photOf, img.pix, opt.threads);

  // IVAR from the true model so pulls are unit normal; then the noisy pixels. One
  // stream in raster order: the same seed gives the same frame.
  img.ivar = Array2D<double>(img.ny, img.nx, 0.0);
  img.mask = Array2D<int32_t>(img.ny, img.nx, 0);
  {
    const double rn2 = opt.readNoise * opt.readNoise;
    SimRng rng(mixSeed(opt.seed, kPurposeNoise));
    for (std::size_t p = 0; p < img.pix.size(); ++p) {
      const double m = img.pix.data[p];
      const double var = rn2 + m;
      img.ivar.data[p] = var > 0.0 ? 1.0 / var : 0.0;
      if (opt.noise) img.pix.data[p] = double(rng.poisson(m)) + opt.readNoise * rng.normal();
    }
  }

  if (opt.defects) {
    SimRng rng(mixSeed(opt.seed, kPurposeDefects));
    // The lit band: columns reached by the lit fibers' spots anywhere on the grid.
    double xlo = psf.npixX, xhi = 0;
    for (int i = 0; i < opt.nFiber; ++i)
      for (double w : {waves.front(), 0.5 * (waves.front() + waves.back()), waves.back()}) {
        const double x = psf.x(opt.fiberMin + i, w);
        xlo = std::min(xlo, x - psf.hsizeX);
        xhi = std::max(xhi, x + psf.hsizeX);
      }
    const int bandLo = std::clamp(int(std::floor(xlo)), 0, img.nx - 1);
    const int bandHi = std::clamp(int(std::ceil(xhi)), bandLo + 1, img.nx);
    auto maskPixel = [&](int y, int x, int32_t bit) {
      img.mask(y, x) |= bit;
      img.ivar(y, x) = 0.0;
    };

    // Columns through the traces: pick a lit fiber, go to its trace mid-band, offset by
    // up to 2 px so the trace's bend walks across the column.
    const int ncol = 2 + rng.uniformInt(2);
    std::vector<int> cols;
    const double wmid = 0.5 * (opt.wave.at(0) + opt.wave.last());
    while (int(cols.size()) < ncol) {
      const int fiber = opt.fiberMin + rng.uniformInt(opt.nFiber);
      const int c =
          std::clamp(int(std::lround(psf.x(fiber, wmid))) + rng.uniformInt(5) - 2, 0, img.nx - 1);
      if (std::find(cols.begin(), cols.end(), c) != cols.end()) continue;
      cols.push_back(c);
      if (cols.size() == 1) { // a dead column: no charge over the full height
        for (int y = 0; y < img.ny; ++y) {
          img.pix(y, c) = 0.0;
          maskPixel(y, c, kSimMaskDead);
        }
      } else { // a hot segment from some row up to the top
        const int y0 = rng.uniformInt(img.ny / 2);
        for (int y = y0; y < img.ny; ++y) {
          img.pix(y, c) += 150.0;
          maskPixel(y, c, kSimMaskBad);
        }
      }
    }

    // Cosmic rays: single hits and short straight tracks in the lit band, scaled with
    // its width (~60 on a full frame, ~20 for one bundle).
    const int ncosmic = 20 + int(std::lround(40.0 * (bandHi - bandLo) / img.nx));
    for (int e = 0; e < ncosmic; ++e) {
      const double x0 = rng.uniform(bandLo, bandHi), y0 = rng.uniform(0, img.ny);
      const int len = 1 + rng.uniformInt(8);
      const double ang = rng.uniform(0.0, 2.0 * std::numbers::pi);
      const double dx = std::cos(ang), dy = std::sin(ang);
      for (int s = 0; s < len; ++s) {
        const int x = int(std::lround(x0 + s * dx)), y = int(std::lround(y0 + s * dy));
        if (x < 0 || x >= img.nx || y < 0 || y >= img.ny) continue;
        img.pix(y, x) += rng.logUniform(800.0, 8000.0);
        maskPixel(y, x, kSimMaskCosmic);
      }
    }
  }
  img.sanitize();

  // Header cards as a real preproc IMAGE HDU carries them (desispec's readers check
  // FLAVOR; the frame writer copies CAMERA and friends).
  img.header.set("CAMERA", quoted(opt.camera.name()), "camera");
  img.header.set("SPECGRPH", std::to_string(opt.camera.petal), "spectrograph");
  img.header.set("PETAL", std::to_string(opt.camera.petal), "petal");
  img.header.set("EXPID", std::to_string(90000 + opt.seed % 10000), "exposure id");
  img.header.set("NIGHT", "20250101", "night of observation");
  img.header.set("FLAVOR", quoted("science"), "exposure flavor");
  img.header.set("OBSTYPE", quoted("SCIENCE"), "exposure type");
  img.header.set("EXPTIME", "900.0", "exposure time [s]");
  img.header.set("TARGTRA", "150.1", "target RA [deg]");
  img.header.set("TARGTDEC", "2.2", "target Dec [deg]");
  img.header.set("MJD-OBS", "60676.25", "MJD at start of exposure");
  img.header.set("BUNIT", quoted("electron"), "pixel units");
  img.header.set("SIMSEED", std::to_string(opt.seed), "SpexLab simulator seed");

  // FIBERMAP for every PSF fiber. Lit fibers are SKY exactly when simulated empty;
  // unlit ones get the same fraction of SKY by their own draw.
  FiberMapTable& fm = sim.fibermap;
  img.fibermap.fiber.clear();
  for (int s = 0; s < psf.nfiber; ++s) {
    SimRng rng(mixSeed(opt.seed, kPurposeFiberMap, uint64_t(s)));
    const bool lit = s >= opt.fiberMin && s < opt.fiberMin + opt.nFiber;
    const double draw = rng.uniform();
    const bool skyFiber = lit ? isSky[s - opt.fiberMin] != 0 : draw < opt.emptyFiberFraction;
    const int32_t fiberNo = kFibersPerPetal * opt.camera.petal + s;
    fm.fiber.push_back(fiberNo);
    fm.targetid.push_back(39627000000000000LL + int64_t(rng.bits() % 1000000000000ULL));
    fm.objtype.push_back(skyFiber ? "SKY" : "TGT");
    fm.fiberstatus.push_back(0);
    // A 1.6 deg field around (150.1, 2.2), fibers scattered over it.
    const double r = 1.6 * std::sqrt(rng.uniform()), phi = rng.uniform(0.0, 2.0 * std::numbers::pi);
    fm.targetDec.push_back(2.2 + r * std::sin(phi));
    fm.targetRa.push_back(150.1 + r * std::cos(phi) / std::cos(2.2 * std::numbers::pi / 180.0));
    img.fibermap.fiber.push_back(fiberNo);
  }
  return sim;
}

WaveGrid desiArmGrid(char arm) {
  switch (arm) {
  case 'b': return WaveGrid::fromRange(3600, 5800, 0.8);
  case 'r': return WaveGrid::fromRange(5760, 7620, 0.8);
  case 'z': return WaveGrid::fromRange(7520, 9824, 0.8);
  default: {
    std::string what = "no DESI arm 'x' (b, r or z)";
    what[13] = arm;
    throw InputError(what);
  }
  }
}

SyntheticPsfOptions SyntheticPsfOptions::forCamera(const Camera& c) {
  SyntheticPsfOptions o;
  o.camera = c.name();
  const WaveGrid g = desiArmGrid(c.arm);
  // r keeps the historical 5550-7800 (210 A below, 180 A above the grid); b and z get
  // 30 A of room each side, the traces' extra 5 A and parameters' 10 A come on top.
  if (c.arm == 'r') return o;
  o.waveMin = g.wmin - 30;
  o.waveMax = g.last() + 30;
  return o;
}

DemoData makeDemo(int nFiber, uint64_t seed) {
  DemoData d;
  SyntheticPsfOptions po;
  po.seed = seed;
  d.psf = makeSyntheticPsf(po);
  SimulationOptions so;
  so.wave = WaveGrid::fromRange(5760, 7620, 0.8);
  so.fiberMin = 0;
  so.nFiber = std::clamp(nFiber, 1, d.psf.nfiber);
  so.seed = seed;
  d.sim = simulate(d.psf, so);
  return d;
}

} // namespace spex
