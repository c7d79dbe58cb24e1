// The simulator: a synthetic DESI-like Gauss-Hermite PSF and preproc frames rendered
// through any PSF from known spectra, with the truth. Deterministic for a seed. It
// is what the app opens by default, so a fresh machine needs nothing else.
#pragma once

#include "../image.h"
#include "../io/frame_io.h"
#include "../io/preproc_io.h"
#include "../plan/patch_plan.h"
#include "../psf/gauss_hermite_psf.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace spex {

// DESI's extraction grid of an arm as desi_proc passes it with -w (dw 0.8):
// b 3600-5800, r 5760-7620, z 7520-9824 A. InputError for another arm.
WaveGrid desiArmGrid(char arm);

struct SyntheticPsfOptions {
  // Sets waveMin/waveMax so the arm's grid (desiArmGrid) lies inside the PSF's
  // domain with room (b 3570-5830, r 5550-7800, z 7490-9854) and camera to c.
  static SyntheticPsfOptions forCamera(const Camera& c);
  std::string camera = "r0"; // CAMERA of the PSF HDU
  int nfiber = 500; // 20 bundles of 25
  int bundlesize = 25;
  int npixX = 4114, npixY = 4128;
  double waveMin = 5550, waveMax = 7800; // r camera
  int hsizeX = 8, hsizeY = 5;
  int ghdeg = 6;
  int legdeg = 3;
  uint64_t seed = 1;
};

// 500 fibers in bundles with gaps, curved traces, sigmas and GH terms varying with
// wavelength; returns an in-memory PSF (write it with writePsf).
// Domains: traces over [waveMin - 5, waveMax + 5] (degree 5), PSF parameters over
// [waveMin - 10, waveMax + 10] (degree legdeg), deliberately unequal. Fibers sit
// 7.3 px apart inside a bundle, bundles are spread evenly over the CCD with ~36 px
// margins (InputError if they do not fit with gaps of at least 2 pitches). Smaller
// CCDs and fewer fibers are allowed, which keeps tests fast.
GaussHermitePsf makeSyntheticPsf(const SyntheticPsfOptions& opt = {});

// Least-squares Legendre series of f over [wmin, wmax] (ncoeff terms), from f at
// max(3 ncoeff, 24) Chebyshev nodes: exact for polynomials of degree < ncoeff, and
// close to the best uniform approximation otherwise. Coefficients in the
// EXTRACTION.md §1 convention (u = 2 (w - wmin) / (wmax - wmin) - 1).
std::vector<double> fitLegendre(const std::function<double(double)>& f, double wmin, double wmax,
                                int ncoeff);

struct SimulationOptions {
  WaveGrid wave = WaveGrid::fromRange(5760, 7620, 0.8);
  int fiberMin = 0;
  int nFiber = 500;
  int edgePad = 40;       // bins of signal simulated beyond each end of the grid
  double readNoise = 3.0; // electrons
  bool noise = true;      // Poisson + read noise; false: the exact model
  bool defects = true;    // masked columns and cosmic-like pixels
  double emptyFiberFraction = 0.1;
  uint64_t seed = 42;
  int threads = 0; // spot workers; 0: up to 8 cores. Same image for any value.
  // CAMERA, SPECGRPH and PETAL of the preproc header; the FIBERMAP's FIBER column is
  // 500 petal + PSF fiber index, as in real preprocs of that petal.
  Camera camera;
};

// Preproc MASK bits the simulator sets (desispec ccdmask): all are extraction bits,
// and every masked pixel also has IVAR 0.
constexpr int32_t kSimMaskBad = 1 << 0;    // hot column segment
constexpr int32_t kSimMaskDead = 1 << 2;   // dead column (IMAGE 0)
constexpr int32_t kSimMaskCosmic = 1 << 4; // cosmic-ray hit or short track

struct Simulation {
  Image image; // ivar from the true model (pulls unit normal)
  FiberMapTable fibermap;
  Truth truth; // photons per bin on opt.wave (fibers fiberMin..)
};

// Renders spectra (continua, emission lines, sky lines shared by all fibers, some
// empty fibers) through psf onto its CCD. Only the chosen fibers are lit.
// - Fibers are PSF fiber indices (0 .. psf.nfiber - 1), as everywhere in core; the
//   FIBERMAP's FIBER column is 500 opt.camera.petal + index (one row per PSF fiber).
// - The header is a science exposure's: CAMERA/SPECGRPH/PETAL of opt.camera, EXPID,
//   NIGHT, FLAVOR/OBSTYPE, EXPTIME 900, pointing TARGTRA/TARGTDEC (150.1, 2.2) and
//   MJD-OBS (so --barycentric-correction works on it).
// - Spectra are photon densities per Angstrom times dw (lines integrated over each bin),
//   drawn from a stream per (seed, fiber): fiber 7 gets the same spectrum whether 25
//   or 500 fibers are simulated, and for any grid.
// - Every bin of opt.wave extended by edgePad bins each side is a delta at its
//   wavelength (EXTRACTION.md §2/§4); pad bins outside the PSF domain are skipped. The
//   grid itself must lie inside the PSF domain (InputError otherwise).
// - The whole CCD carries read noise and IVAR = 1/(readNoise^2 + model) from the true
//   model (0 where that variance is 0); unlit pixels are ordinary pixels, not masked.
// - Defects (opt.defects): 2 or 3 columns through the lit fibers, one DEAD over the full
//   height (IMAGE 0), the others BAD (hot by 150 e-) over part of it; tens of COSMIC
//   hits and short tracks (1..8 px, 800..8000 e- each) inside the lit band. IVAR 0 on
//   all of them.
Simulation simulate(const GaussHermitePsf& psf, const SimulationOptions& opt = {});

// Renders given photons per bin (phot[nFiber, nwave] on grid wave, fibers from fiberMin)
// with no noise: the exact expected image. Used by the noiseless recovery tests.
// threads as in SimulationOptions; the image is bitwise the same for any value.
Array2D<double> renderPhotons(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin,
                              const Array2D<double>& phot, int threads = 0);

// What the app opens when nothing else is given: makeSyntheticPsf({seed}) and a
// simulated frame of fibers [0, nFiber) over 5760-7620 A, dw 0.8 (DESI's r grid), with
// noise and defects, sim seed = seed.
struct DemoData {
  GaussHermitePsf psf;
  Simulation sim;
};
DemoData makeDemo(int nFiber = 500, uint64_t seed = 1);

// Writes dir/psf.fits, dir/preproc.fits and dir/truth.fits (creating dir) through
// writePsf, writePreproc and writeTruth. Lives in its own file (simulation_files.cpp)
// so programs that only simulate in memory do not pull in the FITS writers.
void writeSimulation(const std::string& dir, const GaussHermitePsf& psf, const Simulation& sim);

} // namespace spex
