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

namespace spex {

struct SyntheticPsfOptions {
  int nfiber = 500;          // 20 bundles of 25
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
GaussHermitePsf makeSyntheticPsf(const SyntheticPsfOptions& opt = {});

struct SimulationOptions {
  WaveGrid wave = WaveGrid::fromRange(5760, 7620, 0.8);
  int fiberMin = 0;
  int nFiber = 500;
  int edgePad = 40;          // bins of signal simulated beyond each end of the grid
  double readNoise = 3.0;    // electrons
  bool noise = true;         // Poisson + read noise; false: the exact model
  bool defects = true;       // masked columns and cosmic-like pixels
  double emptyFiberFraction = 0.1;
  uint64_t seed = 42;
};

struct Simulation {
  Image image;               // ivar from the true model (pulls unit normal)
  FiberMapTable fibermap;
  Truth truth;               // photons per bin on opt.wave (fibers fiberMin..)
};

// Renders spectra (continua, emission lines, sky lines shared by all fibers, some
// empty fibers) through psf onto its CCD. Only the chosen fibers are lit.
Simulation simulate(const GaussHermitePsf& psf, const SimulationOptions& opt = {});

// Renders given photons per bin (phot[nFiber, nwave] on grid wave, fibers from fiberMin)
// with no noise: the exact expected image. Used by the noiseless recovery tests.
Array2D<double> renderPhotons(const GaussHermitePsf& psf, const WaveGrid& wave, int fiberMin,
                              const Array2D<double>& phot);

} // namespace spex
