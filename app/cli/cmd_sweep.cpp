// `spexlab-cli sweep`: the patch-size sweep of core/sweep on a simulated frame (pulls
// against the truth) or a real one (agreement with a reference extraction), printed
// as a table with the best setting per engine marked, and written as CSV/JSON.
#include "commands.h"

#include "app/engine_factory.h"
#include "core/errors.h"
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"
#include "core/sweep/sweep.h"
#include "cli_common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unistd.h>

namespace spex::cli {

namespace {

std::vector<int> intList(const std::string& text, const std::string& name) {
  std::vector<int> out;
  for (double v : numberList(text, name)) {
    if (v != std::floor(v) || v < 1 || v > 1e6)
      throw InputError("option " + name + " expects positive integers, got '" + text + "'");
    out.push_back(int(v));
  }
  return out;
}

// Default sweep grid: 400 A from 5760 A (DESI r) when the PSF covers it with room for
// the simulator's edge padding, else from 50 A above the PSF's blue end. A sweep runs
// the region once per setting, so the default is small.
WaveGrid sweepWave(const std::string& wavelength, const GaussHermitePsf& psf) {
  if (!wavelength.empty()) return parseWaveOption(wavelength);
  double w0 = 5760;
  if (w0 < psf.waveMin() + 50 || w0 + 450 > psf.waveMax()) w0 = std::ceil(psf.waveMin()) + 50;
  return WaveGrid::fromRange(w0, std::min(w0 + 400, std::floor(psf.waveMax()) - 50), 0.8);
}

class NullProgress : public ProgressSink {};

std::string rowTable(const SweepResult& r, double tolerance) {
  const std::vector<SweepRow> best = r.bestSettings(tolerance);
  auto isBest = [&](const SweepRow& row) {
    for (const SweepRow& b : best)
      if (b.engine == row.engine && b.nwavestep == row.nwavestep &&
          b.nsubbundles == row.nsubbundles && b.wavepadFrac == row.wavepadFrac)
        return true;
    return false;
  };
  std::string out;
  char line[256];
  const char* acc = r.mode == SweepMode::Truth       ? "pull mean   pull std"
                    : r.mode == SweepMode::Reference ? " max pull  <0.01 sig"
                                                     : "";
  std::snprintf(line, sizeof line, "  %-10s %6s %5s %7s %8s %9s %13s  %s\n", "engine", "nwave",
                "nsub", "wavepad", "patches", "wall s", "bins/s", acc);
  out += line;
  for (const SweepRow& row : r.rows) {
    std::snprintf(line, sizeof line, "%c %-10s %6d %5d %3d/%-3g %8d", isBest(row) ? '*' : ' ',
                  row.engine.c_str(), row.nwavestep, row.nsubbundles, row.wavepad, row.wavepadFrac,
                  row.patches);
    out += line;
    if (!row.ok()) {
      out += "  failed: " + row.error + "\n";
      continue;
    }
    std::snprintf(line, sizeof line, " %9.3f %13.0f", row.wallS, row.throughput);
    out += line;
    if (r.mode == SweepMode::Truth)
      std::snprintf(line, sizeof line, "  %9.4f %10.4f\n", row.pullMean, row.pullStd);
    else if (r.mode == SweepMode::Reference)
      std::snprintf(line, sizeof line, "  %9.3g %10.4f\n", row.refMaxPull, row.refFracBelow);
    else
      std::snprintf(line, sizeof line, "\n");
    out += line;
  }
  return out;
}

} // namespace

int cmdSweep(const std::vector<std::string>& args) {
  CLI::App app("Time and check patch sizes on a region: speed and accuracy per setting.",
               "spexlab-cli sweep");
  setupApp(app);
  std::string input, psfPath, wavelength, nwavestepList = "30,50,80", nsubList = "1,5",
              wavepadList = "0.2", engineList = "auto", gpuList, csvOut, jsonOut, truthPath,
              referencePath, regionFibers, regionWave;
  int specmin = 0, nspec = -1, threads = 0, repeat = 1;
  int64_t seed = 42;
  double tolerance = 0;
  bool quiet = false, timingOnly = false;
  PatchParams base;
  app.add_option("-i,--input", input, "preproc image (default: simulated through the PSF)");
  app.add_option("-p,--psf", psfPath, "PSF file (default: the synthetic PSF)");
  app.add_option("-w,--wavelength", wavelength, "wmin,wmax[,dw] (default: 400 A from 5760 A)");
  app.add_option("-s,--specmin", specmin, "first fiber")->capture_default_str()->check(CLI::NonNegativeNumber);
  auto* nspecOpt = app.add_option("-n,--nspec", nspec, "number of fibers (default 25)");
  app.add_option("--nwavestep", nwavestepList, "wavelengths per patch, a list")->capture_default_str();
  app.add_option("--nsubbundles", nsubList, "sub-bundles per bundle, a list")->capture_default_str();
  app.add_option("--wavepad-frac", wavepadList, "wavelength padding fractions, a list")->capture_default_str();
  app.add_option("--bundlesize", base.bundlesize, "spectra per bundle")->capture_default_str();
  app.add_option("--pixpad-frac", base.pixpadFrac, "pixel padding, fraction of a spot")->capture_default_str();
  app.add_option("--engine", engineList, "engines to sweep, e.g. cpu,cuda")->capture_default_str();
  app.add_option("--gpus", gpuList, "GPU devices, e.g. 0,1");
  app.add_option("-t,--threads", threads, "CPU threads (0: all cores)")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--csv", csvOut, "write the rows as CSV");
  app.add_option("--json", jsonOut, "write the rows as JSON");
  app.add_option("--truth", truthPath, "truth file of -i (pulls against it)");
  app.add_option("--reference", referencePath, "reference frame of -i (agreement with it)");
  app.add_option("--region-fibers", regionFibers, "FIRST,END (END exclusive) of the scored region");
  app.add_option("--region-wave", regionWave, "WMIN,WMAX of the scored region");
  auto* repeatOpt = app.add_option("--repeat", repeat, "runs per setting (>= 1)")->capture_default_str();
  app.add_option("--seed", seed, "simulation seed")->capture_default_str();
  auto* tolOpt = app.add_option("--tolerance", tolerance, "accuracy tolerance for the best setting");
  app.add_flag("--timing-only", timingOnly, "no accuracy, timing only");
  app.add_flag("--quiet", quiet, "print nothing");
  if (!parseArgs(app, args)) return 0;
  if (repeatOpt->count() && repeat < 1) throw InputError("--repeat must be >= 1, got " + std::to_string(repeat));
  checkWritable(csvOut, "--csv");
  checkWritable(jsonOut, "--json");

  GaussHermitePsf psf;
  Image image;
  std::optional<Truth> truth;
  std::optional<ExtractionResult> reference;
  std::string source;
  if (!input.empty()) {
    if (psfPath.empty()) throw InputError("sweep -i needs -p psf.fits too");
    psf = readPsf(psfPath);
    image = readPreproc(input);
    source = input;
  } else {
    psf = !psfPath.empty() ? readPsf(psfPath) : makeSyntheticPsf();
  }

  SweepSpec spec;
  spec.wave = sweepWave(wavelength, psf);
  spec.fiberMin = specmin;
  spec.nFiber = nspecOpt->count() ? nspec : std::min(25, psf.nfiber - spec.fiberMin);
  spec.base.bundlesize = base.bundlesize;
  spec.base.pixpadFrac = base.pixpadFrac;
  spec.base.validate();
  spec.nwavestep = intList(nwavestepList, "--nwavestep");
  spec.nsubbundles = intList(nsubList, "--nsubbundles");
  spec.wavepadFrac = numberList(wavepadList, "--wavepad-frac");
  spec.threads = threads;
  spec.repeat = repeat;
  spec.region = {spec.fiberMin, spec.fiberMin + spec.nFiber, spec.wave.wmin, spec.wave.last()};
  if (!regionFibers.empty()) {
    const auto v = numberList(regionFibers, "--region-fibers");
    if (v.size() != 2) throw InputError("--region-fibers expects FIRST,END (END exclusive)");
    spec.region.fiber0 = int(v[0]);
    spec.region.fiber1 = int(v[1]);
  }
  if (!regionWave.empty()) {
    const auto v = numberList(regionWave, "--region-wave");
    if (v.size() != 2) throw InputError("--region-wave expects WMIN,WMAX in Angstrom");
    spec.region.waveMin = v[0];
    spec.region.waveMax = v[1];
  }

  if (input.empty()) {
    SimulationOptions so;
    so.wave = spec.wave;
    so.fiberMin = spec.fiberMin;
    so.nFiber = spec.nFiber;
    so.seed = uint64_t(seed);
    Simulation sim = simulate(psf, so);
    image = std::move(sim.image);
    truth = std::move(sim.truth);
    source = std::string("simulated through ") + (!psfPath.empty() ? psfPath : "the synthetic PSF");
  } else if (!truthPath.empty()) {
    truth = readTruth(truthPath);
  } else if (!referencePath.empty()) {
    reference = readFrame(referencePath);
  }

  std::vector<EngineChoice> choices;
  std::vector<Engine*> engines;
  // --engine cpu,cuda sweeps both engines on the same settings.
  const std::vector<int> gpus = parseGpus(gpuList);
  std::stringstream kinds(engineList);
  for (std::string one; std::getline(kinds, one, ',');) {
    if (one.empty()) continue;
    choices.push_back(makeEngine(one, gpus));
    if (!choices.back().note.empty())
      std::fprintf(stderr, "spexlab-cli sweep: %s\n", choices.back().note.c_str());
    engines.push_back(choices.back().engine.get());
  }
  if (engines.empty()) throw InputError("--engine names no engine");

  CancelToken cancel;
  if (!input.empty() && !truth && !reference && !timingOnly) {
    // Real data without truth: agreement with the default setting on the first engine.
    if (!quiet)
      std::fprintf(stderr, "spexlab-cli sweep: no --truth or --reference; comparing with the "
                           "default patch setting on %s\n", engines[0]->name().c_str());
    ExtractionRequest req;
    req.image = &image;
    req.psf = &psf;
    req.wave = spec.wave;
    req.fiberMin = spec.fiberMin;
    req.nFiber = spec.nFiber;
    req.params = spec.base;
    req.threads = spec.threads;
    NullProgress np;
    reference = engines[0]->extract(req, np, cancel);
  }
  if (timingOnly) {
    truth.reset();
    reference.reset();
  }

  SweepInputs in;
  in.image = &image;
  in.psf = &psf;
  in.truth = truth ? &*truth : nullptr;
  in.reference = reference ? &*reference : nullptr;

  std::mutex mu;
  const bool tty = !quiet && ::isatty(2);
  SweepProgressFn progress = [&](const SweepProgress& p) {
    if (!tty) return;
    std::lock_guard lock(mu);
    std::fprintf(stderr, "\rsetting %d/%d: %d/%d patches   ", p.row + 1, p.rows, p.patchesDone,
                 p.patchesTotal);
    if (p.rowDone && p.row + 1 == p.rows) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
  const SweepResult result = runSweep(engines, in, spec, progress, cancel);
  if (!tolOpt->count()) tolerance = result.mode == SweepMode::Reference ? 0.1 : 0.02;

  if (!csvOut.empty()) writeTextAtomic(csvOut, result.toCsv());
  if (!jsonOut.empty()) writeTextAtomic(jsonOut, result.toJson());
  if (!quiet) {
    std::printf("sweep: fibers %d..%d x %.1f..%.1f A (%d bins) of a %d x %d frame; input %s\n",
                result.region.fiber0, result.region.fiber1 - 1, result.region.waveMin,
                result.region.waveMax, result.regionBins, spec.nFiber, spec.wave.n, source.c_str());
    std::printf("accuracy: %s%s\n\n", sweepModeName(result.mode),
                result.mode == SweepMode::Truth ? " (pulls over the region's bins; want mean 0, std 1)"
                : result.mode == SweepMode::Reference ? " (|fa-fb|/sigma against the reference)"
                                                      : "");
    std::printf("%s", rowTable(result, tolerance).c_str());
    std::printf("\n* fastest setting within %g of the best accuracy, per engine\n", tolerance);
  }
  int failed = 0;
  for (const SweepRow& r : result.rows) failed += !r.ok();
  return failed == int(result.rows.size()) ? 1 : 0;
}

} // namespace spex::cli
