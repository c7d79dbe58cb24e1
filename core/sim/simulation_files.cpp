// Writing a simulation to disk. Kept apart from simulator.cpp so that linking the
// in-memory simulator never drags in the FITS writers.
#include "simulator.h"

#include "../errors.h"
#include "../io/frame_io.h"
#include "../io/preproc_io.h"
#include "../io/psf_io.h"

#include <filesystem>
#include <system_error>

namespace spex {

void writeSimulation(const std::string& dir, const GaussHermitePsf& psf, const Simulation& sim) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw SpexError("cannot create directory '" + dir + "': " + ec.message());
  const std::filesystem::path d(dir);
  writePsf((d / "psf.fits").string(), psf);
  writePreproc((d / "preproc.fits").string(), sim.image, sim.fibermap);
  writeTruth((d / "truth.fits").string(), sim.truth);
}

} // namespace spex
