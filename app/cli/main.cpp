// spexlab-cli: a drop-in for desi_extract_spectra plus simulate, bench and compare.
#include "app/engine_factory.h"
#include "cli_common.h"
#include "commands.h"
#include "process_exit.h"
#include "core/errors.h"

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: spexlab-cli <command> [options]\n"
               "\n"
               "commands:\n"
               "  extract   extract spectra from a preproc image (desi_extract_spectra options)\n"
               "            -i preproc.fits -p psf.fits -o frame.fits [-m model.fits]\n"
               "            [-w wmin,wmax,dw] [-s specmin] [-n nspec] [-r regularize]\n"
               "            [--bundlesize 25] [--nsubbundles 5] [--nwavestep 50] [--psferr X]\n"
               "            [--pixpad-frac 0.8] [--wavepad-frac 0.2] [--decorrelate-fibers]\n"
               "            [-f fibermap.fits] [--barycentric-correction] [--no-scores] [-v]\n"
               "            [--engine cpu|cuda|auto | --no-gpu | --gpu] [--gpus 0,1] [--threads N]\n"
               "            [--gpu-memory 6G|0.2] [--mpi: bundles shared by MPI ranks]\n"
               "            [--profile trace.json] [--profile-kernels] [--quiet]\n"
               "  batch     many frames in one process, IO overlapped: JOBS [--engine] [--gpus]\n"
               "            [--gpu-memory] [--threads N] [--mpi] [--profile trace.json] [--profile-kernels]\n"
               "            [--quiet]\n"
               "            JOBS: one desi_extract_spectra argument list per line (-i -p -o ...)\n"
               "  simulate  write a synthetic PSF, a simulated preproc image and its truth\n"
               "            -o DIR [--psf psf.fits] [-s 0] [-n 500] [-w 5760,7620,0.8]\n"
               "            [--seed 42] [--no-noise] [--no-defects]\n"
               "  bench     time an extraction and print a per-phase table\n"
               "            [-i preproc.fits -p psf.fits | --psf psf.fits | (synthetic)]\n"
               "            [-s -n -w] [--engine] [--threads N] [--repeat 1] [--json] [--profile-kernels]\n"
               "  compare   agreement statistics of two frames: a.fits b.fits [--json]\n"
               "            [--max-sigma X: exit 3 if any bin differs by more than X sigma]\n"
               "  sweep     time and check patch sizes on a region: [-i -p [--truth|--reference F] | --psf]\n"
               "            [-s -n -w] [--nwavestep 30,50,80] [--nsubbundles 1,5] [--wavepad-frac 0.2]\n"
               "            [--engine cpu,cuda] [--threads N] [--csv out.csv] [--json out.json]\n"
               "  version   versions and GPUs found\n"
               "\n"
               "spexlab-cli <command> --help lists a command's options; desi_extract_spectra\n"
               "(built beside spexlab-cli) is `spexlab-cli extract` under desispec's name.\n");
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    usage(args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string cmd = args[0];
  args.erase(args.begin());
  const std::string prog = "spexlab-cli " + cmd;
  // `spexlab-cli <cmd> --help` prints that command's options (CLI11).
  if (cmd == "extract") {
    const int rc = spex::cli::guarded(prog, [&] { return spex::cli::cmdExtract(args, prog); });
    if (spex::cli::detachedExitRequested()) spex::cli::exitLeavingTeardown(rc);
    return rc;
  }
  if (cmd == "simulate") return spex::cli::guarded(prog, [&] { return spex::cli::cmdSimulate(args); });
  if (cmd == "bench") return spex::cli::guarded(prog, [&] { return spex::cli::cmdBench(args); });
  if (cmd == "compare") return spex::cli::guarded(prog, [&] { return spex::cli::cmdCompare(args); });
  if (cmd == "sweep") return spex::cli::guarded(prog, [&] { return spex::cli::cmdSweep(args); });
  if (cmd == "batch") return spex::cli::guarded(prog, [&] { return spex::cli::cmdBatch(args); });
  if (cmd == "version" || cmd == "--version") {
    std::printf("spexlab-cli %s\nCUDA engine: %s\nGPUs: %s\n", SPEXLAB_VERSION,
                spex::cudaBuilt() ? "built" : "not built", spex::describeGpus().c_str());
    return 0;
  }
  std::fprintf(stderr, "spexlab-cli: unknown command '%s'\n\n", cmd.c_str());
  usage(stderr);
  return 2;
}
