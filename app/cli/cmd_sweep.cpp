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
#include "options.h"

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

const std::map<std::string, std::string> kSweepAliases = {
    {"-i", "--input"}, {"-p", "--psf"},      {"-w", "--wavelength"}, {"-s", "--specmin"},
    {"-n", "--nspec"}, {"-t", "--threads"}};
const std::set<std::string> kSweepValued = {
    "--input",        "--psf",         "--wavelength",   "--specmin",       "--nspec",
    "--nwavestep",    "--nsubbundles", "--wavepad-frac", "--bundlesize",    "--pixpad-frac",
    "--engine",       "--threads",     "--csv",          "--json",          "--truth",
    "--reference",    "--region-fibers", "--region-wave", "--repeat",       "--seed",
    "--tolerance",    "--gpus"};
const std::set<std::string> kSweepFlags = {"--quiet", "--timing-only"};

std::vector<int> intList(const Options& o, const std::string& name, std::vector<int> fallback) {
  if (!o.has(name)) return fallback;
  std::vector<int> out;
  for (double v : numberList(o.str(name), name)) {
    if (v != std::floor(v) || v < 1) throw InputError("option " + name + " expects positive integers, got '" + o.str(name) + "'");
    out.push_back(int(v));
  }
  return out;
}

// Default sweep grid: 400 A from 5760 A (DESI r) when the PSF covers it with room for
// the simulator's edge padding, else from 50 A above the PSF's blue end. A sweep runs
// the region once per setting, so the default is small.
WaveGrid sweepWave(const Options& o, const GaussHermitePsf& psf) {
  if (o.has("--wavelength")) {
    const auto v = numberList(o.str("--wavelength"), "-w/--wavelength");
    if (v.size() != 3 && v.size() != 2)
      throw InputError("-w/--wavelength expects wmin,wmax[,dw], got '" + o.str("--wavelength") + "'");
    return WaveGrid::fromRange(v[0], v[1], v.size() == 3 ? v[2] : 0.8);
  }
  double w0 = 5760;
  if (w0 < psf.waveMin() + 50 || w0 + 450 > psf.waveMax()) w0 = std::ceil(psf.waveMin()) + 50;
  return WaveGrid::fromRange(w0, std::min(w0 + 400, std::floor(psf.waveMax()) - 50), 0.8);
}

void writeTextAtomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out.good()) {
      out.close();
      std::remove(tmp.c_str());
      throw InputError("cannot write '" + path + "'");
    }
  }
  std::filesystem::rename(tmp, path);
}

// Fails before minutes of work when an output cannot be written.
void checkOutputDir(const std::string& path, const char* what) {
  if (path.empty()) return;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!std::filesystem::is_directory(dir) || ::access(dir.c_str(), W_OK) != 0)
    throw InputError(std::string(what) + " '" + path + "': directory '" + dir.string() +
                     "' does not exist or is not writable");
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
  Options o(kSweepAliases, kSweepValued, kSweepFlags);
  o.parse(args);
  if (!o.positional().empty()) throw InputError("unexpected argument '" + o.positional()[0] + "'");
  const std::string csvOut = o.str("--csv"), jsonOut = o.str("--json");
  checkOutputDir(csvOut, "--csv");
  checkOutputDir(jsonOut, "--json");
  const bool quiet = o.has("--quiet");

  GaussHermitePsf psf;
  Image image;
  std::optional<Truth> truth;
  std::optional<ExtractionResult> reference;
  std::string source;
  if (o.has("--input")) {
    if (!o.has("--psf")) throw InputError("sweep -i needs -p psf.fits too");
    psf = readPsf(o.str("--psf"));
    image = readPreproc(o.str("--input"));
    source = o.str("--input");
  } else {
    psf = o.has("--psf") ? readPsf(o.str("--psf")) : makeSyntheticPsf();
  }

  SweepSpec spec;
  spec.wave = sweepWave(o, psf);
  spec.fiberMin = o.integer("--specmin", 0);
  spec.nFiber = o.integer("--nspec", std::min(25, psf.nfiber - spec.fiberMin));
  spec.base.bundlesize = o.integer("--bundlesize", spec.base.bundlesize);
  spec.base.pixpadFrac = o.number("--pixpad-frac", spec.base.pixpadFrac);
  spec.base.validate();
  spec.nwavestep = intList(o, "--nwavestep", {30, 50, 80});
  spec.nsubbundles = intList(o, "--nsubbundles", {1, 5});
  spec.wavepadFrac = o.has("--wavepad-frac") ? numberList(o.str("--wavepad-frac"), "--wavepad-frac")
                                             : std::vector<double>{0.2};
  spec.threads = o.integer("--threads", 0);
  if (spec.threads < 0) throw InputError("--threads must be >= 0");
  spec.repeat = std::max(1, o.integer("--repeat", 1));
  spec.region = {spec.fiberMin, spec.fiberMin + spec.nFiber, spec.wave.wmin, spec.wave.last()};
  if (o.has("--region-fibers")) {
    const auto v = numberList(o.str("--region-fibers"), "--region-fibers");
    if (v.size() != 2) throw InputError("--region-fibers expects FIRST,END (END exclusive)");
    spec.region.fiber0 = int(v[0]);
    spec.region.fiber1 = int(v[1]);
  }
  if (o.has("--region-wave")) {
    const auto v = numberList(o.str("--region-wave"), "--region-wave");
    if (v.size() != 2) throw InputError("--region-wave expects WMIN,WMAX in Angstrom");
    spec.region.waveMin = v[0];
    spec.region.waveMax = v[1];
  }

  if (!o.has("--input")) {
    SimulationOptions so;
    so.wave = spec.wave;
    so.fiberMin = spec.fiberMin;
    so.nFiber = spec.nFiber;
    so.seed = uint64_t(o.integer("--seed", 42));
    Simulation sim = simulate(psf, so);
    image = std::move(sim.image);
    truth = std::move(sim.truth);
    source = std::string("simulated through ") + (o.has("--psf") ? o.str("--psf") : "the synthetic PSF");
  } else if (o.has("--truth")) {
    truth = readTruth(o.str("--truth"));
  } else if (o.has("--reference")) {
    reference = readFrame(o.str("--reference"));
  }

  std::vector<EngineChoice> choices;
  std::vector<Engine*> engines;
  // --engine cpu,cuda sweeps both engines on the same settings.
  std::vector<int> gpus;
  if (o.has("--gpus"))
    for (double g : numberList(o.str("--gpus"), "--gpus")) gpus.push_back(int(g));
  std::stringstream kinds(o.str("--engine", "auto"));
  for (std::string one; std::getline(kinds, one, ',');) {
    if (one.empty()) continue;
    choices.push_back(makeEngine(one, gpus));
    if (!choices.back().note.empty())
      std::fprintf(stderr, "spexlab-cli sweep: %s\n", choices.back().note.c_str());
    engines.push_back(choices.back().engine.get());
  }
  if (engines.empty()) throw InputError("--engine names no engine");

  CancelToken cancel;
  if (o.has("--input") && !truth && !reference && !o.has("--timing-only")) {
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
  if (o.has("--timing-only")) {
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
  const double tolerance = o.number("--tolerance", result.mode == SweepMode::Reference ? 0.1 : 0.02);

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
