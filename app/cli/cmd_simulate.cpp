// `spexlab-cli simulate`: a synthetic (or given) PSF, a simulated preproc image and its
// truth, written to a directory.
#include "commands.h"

#include "cli_common.h"
#include "core/errors.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

namespace spex::cli {

int cmdSimulate(const std::vector<std::string>& args) {
  CLI::App app("Write a synthetic PSF, a simulated preproc image and its truth.", "spexlab-cli simulate");
  setupApp(app);
  std::string dir, psfPath, wavelength, cameraName = "r0";
  int specmin = 0, nspec = -1;
  int64_t seed = 42;
  bool noNoise = false, noDefects = false, quiet = false;
  app.add_option("-o,--output", dir, "output directory (psf.fits, preproc.fits, truth.fits)")->required();
  app.add_option("-p,--psf", psfPath, "simulate through this PSF instead of a synthetic one");
  app.add_option("-s,--specmin", specmin, "first fiber")->capture_default_str()->check(CLI::NonNegativeNumber);
  auto* nspecOpt = app.add_option("-n,--nspec", nspec, "number of fibers (default: all from specmin)");
  app.add_option("-w,--wavelength", wavelength, "wmin,wmax[,dw] (default: the camera arm's DESI grid)");
  app.add_option("--camera", cameraName, "b0..z9: the arm's wavelengths, the petal's FIBERs")->capture_default_str();
  app.add_option("--seed", seed, "random seed (PSF and noise)")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_flag("--no-noise", noNoise, "no Poisson or read noise");
  app.add_flag("--no-defects", noDefects, "no masked columns or cosmics");
  app.add_flag("--quiet", quiet, "print nothing");
  if (!parseArgs(app, args)) return 0;

  const Camera camera = parseCamera(cameraName);
  std::filesystem::create_directories(dir);
  GaussHermitePsf psf;
  if (!psfPath.empty()) {
    psf = readPsf(psfPath);
  } else {
    SyntheticPsfOptions so = SyntheticPsfOptions::forCamera(camera);
    so.seed = uint64_t(seed);
    psf = makeSyntheticPsf(so);
  }
  SimulationOptions so;
  so.camera = camera;
  so.wave = wavelength.empty() ? desiArmGrid(camera.arm) : parseWaveOption(wavelength);
  so.fiberMin = specmin;
  so.nFiber = nspecOpt->count() ? nspec : psf.nfiber - so.fiberMin;
  so.noise = !noNoise;
  so.defects = !noDefects;
  so.seed = uint64_t(seed);
  const auto t0 = std::chrono::steady_clock::now();
  Simulation sim = simulate(psf, so);
  writeSimulation(dir, psf, sim);
  if (!quiet)
    std::printf("simulated %s fibers %d..%d on %d wavelengths (%.1f..%.1f A) in %.1f s; wrote %s/{psf,preproc,truth}.fits\n",
                camera.name().c_str(), so.fiberMin, so.fiberMin + so.nFiber - 1, so.wave.n, so.wave.wmin, so.wave.last(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                dir.c_str());
  return 0;
}

} // namespace spex::cli
