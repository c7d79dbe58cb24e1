// A small simulation for the GUI tests: a 50-fiber synthetic PSF on a 600 x 1000
// pixel CCD over 5900-6400 A (about DESI's 0.5 A per row), with bundle 0 lit on
// 6000-6300 A. Big enough to have bundles, sub-bundles, patches and defects, small
// enough that a whole-frame CPU extraction takes seconds.
#pragma once

#include "core/sim/simulator.h"

namespace spextest {

inline spex::SyntheticPsfOptions smallPsfOptions() {
  spex::SyntheticPsfOptions o;
  o.nfiber = 50;
  o.npixX = 600;
  o.npixY = 1000;
  o.waveMin = 5900;
  o.waveMax = 6400;
  o.seed = 3;
  return o;
}

inline spex::SimulationOptions smallSimOptions() {
  spex::SimulationOptions o;
  o.wave = spex::WaveGrid::fromRange(6000, 6300, 0.8);
  o.fiberMin = 0;
  o.nFiber = 25;
  o.edgePad = 20;
  o.seed = 5;
  return o;
}

struct SmallSim {
  spex::GaussHermitePsf psf;
  spex::Simulation sim;
};

inline SmallSim makeSmallSim() {
  SmallSim s;
  s.psf = spex::makeSyntheticPsf(smallPsfOptions());
  s.sim = spex::simulate(s.psf, smallSimOptions());
  return s;
}

} // namespace spextest
