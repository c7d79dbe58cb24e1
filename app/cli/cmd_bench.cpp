// `spexlab-cli bench`: time an extraction and print a per-phase table (or JSON).
#include "commands.h"

#include "app/engine_factory.h"
#include "cli_common.h"
#include "engine_options.h"
#include "kernel_table.h"
#include "mpi_job.h"
#include "core/errors.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "core/plan/patch_plan.h"
#include "core/sim/simulator.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <sys/resource.h>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <thread>

namespace spex::cli {

namespace {

std::string phaseTable(const ExtractionResult& r, int threads) {
  // share = a phase's summed time over the time the workers had (wall x threads);
  // per-patch phases run on every worker at once, so their totals exceed the wall.
  std::ostringstream os;
  const double wall = r.profile.wallNs * 1e-9;
  const int lanes = std::max(1, threads);
  char line[256];
  std::snprintf(line, sizeof line, "%-20s %8s %12s %12s %8s\n", "phase", "count", "total s",
                "mean ms", "share");
  os << line;
  for (const PhaseStats& s : r.profile.phaseStats()) {
    const double share = s.name == "extract" || s.name == "plan" || s.name == "finalize" ||
                                 s.name == "read" || s.name == "write"
                             ? s.totalS / wall
                             : s.totalS / (wall * lanes);
    std::snprintf(line, sizeof line, "%-20s %8d %12.3f %12.3f %7.1f%%\n", s.name.c_str(), s.count,
                  s.totalS, 1e3 * s.meanS, 100 * share);
    os << line;
  }
  return os.str();
}

// Achieved FLOP rates of the CUDA engine's dense solver steps, from the operation
// counts of the batch layout (kernels.h: every patch solved as F fiber blocks of nb
// bins, n = F nb) over the device time of each step. With several streams the steps
// of different batches overlap, so each step's device time includes time it shared:
// the rates are lower bounds.
std::string solverRateTable(const ExtractionResult& r, const ExtractionRequest& req, double dgemm) {
  const PatchPlan plan = makePatchPlan(*req.psf, req.wave, req.fiberMin, req.nFiber, req.params);
  int F = 1;
  for (const Patch& p : plan.patches) F = std::max(F, p.nfiberPad);
  const double nb = plan.patches.empty() ? 0 : plan.patches.front().nwavePad;
  const double n = F * nb, P = double(r.patches.size());
  double inverse = F * nb * nb * nb / 3; // diagonal blocks
  for (int i = 1; i < F; ++i) inverse += 2 * nb * nb * nb * (double(i) * i + i);
  const auto stats = r.profile.phaseStats();
  // Without an "inverse" phase the fiber blocks came from the selected inversion on the
  // band (CudaEngineOptions::selectedInverse): its rate is stated against the work of
  // the full path for the same blocks (L^-1 and X_f^T X_f), an effective rate.
  const bool selected = std::none_of(stats.begin(), stats.end(), [](const PhaseStats& s) { return s.name == "inverse"; });
  const double fiberBlocks = nb * nb * nb * F * (F + 1);
  const struct {
    const char* phase;
    double flops;
    const char* what;
  } steps[] = {{"cholesky", P * n * n * n / 3, "n^3/3 per patch (the flops of an unblocked one)"},
               {"inverse", P * inverse, "L^-1 by nb-blocks, dense GEMMs"},
               {"fiber blocks", P * (selected ? inverse + fiberBlocks : fiberBlocks),
                selected ? "selected inversion; effective: the flops of L^-1 + C_f = X_f^T X_f"
                         : "C_f = X_f^T X_f, F(F+1) nb^3"}};
  std::ostringstream os;
  char line[256];
  std::snprintf(line, sizeof line, "\nsolver steps (n = %d = %d x %d, %d patches; rates are lower bounds):\n",
                int(n), F, int(nb), int(P));
  os << line;
  std::snprintf(line, sizeof line, "%-14s %10s %10s %10s %10s  %s\n", "step", "GFLOP", "device s",
                "TFLOP/s", "of DGEMM", "count");
  os << line;
  for (const auto& st : steps) {
    const auto it = std::find_if(stats.begin(), stats.end(),
                                 [&](const PhaseStats& s) { return s.name == st.phase; });
    if (it == stats.end() || it->totalS <= 0) continue;
    const double rate = st.flops / it->totalS;
    char share[32] = "-";
    if (dgemm > 0) std::snprintf(share, sizeof share, "%.1f%%", 100 * rate / dgemm);
    std::snprintf(line, sizeof line, "%-14s %10.1f %10.4f %10.2f %10s  %s\n", st.phase,
                  st.flops * 1e-9, it->totalS, rate * 1e-12, share, st.what);
    os << line;
  }
  return os.str();
}

struct Inputs {
  GaussHermitePsf psf;
  Image image;
  std::string source; // for the summary
};

double cpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Quantile q of v (nearest rank on the sorted values; v not empty).
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const std::size_t i = std::size_t(std::ceil(q * double(v.size()))) - (q > 0 ? 1 : 0);
  return v[std::min(i, v.size() - 1)];
}

// --one-patch N: N requests of one patch each on one warm engine, as the workbench
// makes them (the plan attached, the result accumulated in place), after a first
// request that is reported apart (it allocates the frame's arrays and, on a GPU, pays
// the first use of every kernel). Patches spread evenly over the plan. Each request
// is timed from the call to the result in memory (host clock), with the process's CPU
// time (all threads) and the engine's phases.
int onePatchBench(Engine& engine, ExtractionRequest req, int count, bool json, const std::string& source) {
  attachPlan(req);
  const int np = int(req.plan->patches.size());
  if (np < 1) throw InputError("--one-patch: the plan has no patches");
  req.accumulate = true;
  ExtractionResult r;
  ProgressSink progress; // no bar: one patch is over before it would draw
  CancelToken cancel;
  auto once = [&](int patch, double& wall, double& cpu) {
    req.patches = std::vector<int>{patch};
    const double c0 = cpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    engine.extractInto(req, r, progress, cancel);
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu = cpuSeconds() - c0;
    if (r.patches.empty()) throw SpexError("--one-patch: the engine returned no patch for plan patch " + std::to_string(patch));
  };
  double firstWall = 0, firstCpu = 0;
  once(np / 2, firstWall, firstCpu);
  std::vector<double> walls, cpus;
  std::map<std::string, std::vector<double>> phases; // per request, 0 where absent
  std::vector<std::string> order;
  for (int k = 0; k < count; ++k) {
    const int patch = int((long(k) * np) / count + np / (2 * count)) % np;
    double w = 0, c = 0;
    once(patch, w, c);
    walls.push_back(w);
    cpus.push_back(c);
    for (const PhaseStats& st : r.profile.phaseStats()) {
      auto& v = phases[st.name];
      if (v.empty()) order.push_back(st.name);
      v.resize(std::size_t(k), 0.0);
      v.push_back(st.totalS);
    }
  }
  for (auto& [name, v] : phases) v.resize(std::size_t(count), 0.0);
  std::sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    return quantile(phases[a], 0.5) > quantile(phases[b], 0.5);
  });
  if (json) {
    nlohmann::ordered_json ph = nlohmann::ordered_json::array();
    for (const std::string& n : order)
      ph.push_back({{"name", n}, {"median_s", quantile(phases[n], 0.5)}, {"p95_s", quantile(phases[n], 0.95)}});
    const nlohmann::ordered_json out = {{"engine", engine.name()}, {"source", source},
                                        {"plan_patches", np}, {"requests", count},
                                        {"first_s", firstWall}, {"first_cpu_s", firstCpu},
                                        {"walls_s", walls}, {"cpu_s", cpus},
                                        {"median_s", quantile(walls, 0.5)}, {"p95_s", quantile(walls, 0.95)},
                                        {"cpu_median_s", quantile(cpus, 0.5)}, {"cpu_p95_s", quantile(cpus, 0.95)},
                                        {"phases", std::move(ph)}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("one patch on a warm engine (%s): %d requests of one patch each, spread over the plan's %d "
              "patches\ninput: %s\n\n", engine.name().c_str(), count, np, source.c_str());
  std::printf("%-34s %10s %10s %10s %10s\n", "per request", "median ms", "p95 ms", "min ms", "max ms");
  auto row = [](const std::string& name, const std::vector<double>& v) {
    std::printf("%-34s %10.2f %10.2f %10.2f %10.2f\n", name.c_str(), 1e3 * quantile(v, 0.5), 1e3 * quantile(v, 0.95),
                1e3 * quantile(v, 0), 1e3 * quantile(v, 1));
  };
  row("wall, request to result in memory", walls);
  row("cpu time (user + system)", cpus);
  std::printf("\nphases (summed over the request's ranges, every lane):\n");
  for (const std::string& n : order) row("  " + n, phases[n]);
  std::printf("\nfirst request (not counted): %.2f ms wall, %.2f ms cpu\n", 1e3 * firstWall, 1e3 * firstCpu);
  return 0;
}

} // namespace

int cmdBench(const std::vector<std::string>& args) {
  CLI::App app("Time an extraction and print a per-phase table.", "spexlab-cli bench");
  setupApp(app);
  std::string input, psfPath, wavelength, engine = "auto", gpus, gpuMemory, patches, profilePath;
  int specmin = 0, nspec = -1, threads = 0, repeat = 1;
  int64_t seed = 42;
  double psferr = 0;
  bool json = false, decorrelate = false, quiet = false, ceilings = false, model = false,
       profileKernels = false;
  PatchParams params;
  app.add_option("-i,--input", input, "preproc image (default: simulated through the PSF)");
  app.add_option("-p,--psf", psfPath, "PSF file (default: the synthetic PSF)");
  app.add_option("-s,--specmin", specmin, "first fiber")->capture_default_str()->check(CLI::NonNegativeNumber);
  auto* nspecOpt = app.add_option("-n,--nspec", nspec, "number of fibers (default: all from specmin)");
  app.add_option("-w,--wavelength", wavelength, "wmin,wmax[,dw] (default 5760,7620,0.8)");
  app.add_option("-r,--regularize", params.regularize, "regularization amount")->capture_default_str();
  app.add_option("--bundlesize", params.bundlesize, "spectra per bundle")->capture_default_str();
  app.add_option("--nsubbundles", params.nsubbundles, "sub-bundles per bundle")->capture_default_str();
  app.add_option("--nwavestep", params.nwavestep, "wavelengths per patch")->capture_default_str();
  app.add_option("--pixpad-frac", params.pixpadFrac, "pixel padding, fraction of a spot")->capture_default_str();
  app.add_option("--wavepad-frac", params.wavepadFrac, "wavelength padding, fraction of a spot")->capture_default_str();
  auto* psferrOpt = app.add_option("--psferr", psferr, "fractional PSF model error (default: the PSF's)");
  app.add_flag("--decorrelate-fibers", decorrelate, "decorrelate across fibers too");
  app.add_option("--engine", engine, "cpu | cuda | auto")->capture_default_str();
  app.add_option("--gpus", gpus, "GPU devices, e.g. 0,1");
  app.add_option("--gpu-memory", gpuMemory, "CUDA device-memory budget: a size (6G) or a fraction (0.2)");
  app.add_option("-t,--threads", threads, "CPU threads (0: all cores)")->capture_default_str()->check(CLI::NonNegativeNumber);
  auto* repeatOpt = app.add_option("--repeat", repeat, "runs to time (>= 1); the median is reported")->capture_default_str();
  app.add_option("--seed", seed, "simulation seed")->capture_default_str();
  app.add_option("--patches", patches, "plan indices, e.g. 10,11,12: time a selection on a warm engine");
  int onePatch = 0;
  auto* onePatchOpt = app.add_option("--one-patch", onePatch,
                                     "N: time N requests of one patch each on one warm engine (median, p95, "
                                     "phases), as the workbench makes them");
  app.add_flag("-m,--model", model, "also build the CCD model image (nothing is written)");
  app.add_flag("--json", json, "print the result as JSON");
  app.add_flag("--profile-kernels", profileKernels,
               "CUDA engine: record every kernel and copy (CUPTI) in every run and print the per-kernel "
               "table of the last (the walls then include its cost)");
  app.add_option("--profile", profilePath,
                 "write the last run's Chrome trace (JSON; with --profile-kernels its kernels too)");
  app.add_flag("--ceilings", ceilings, "also measure the GPU's DGEMM and copy ceilings");
  app.add_flag("--quiet", quiet, "no progress bar");
  if (!parseArgs(app, args)) return 0;
  if (repeatOpt->count() && repeat < 1)
    throw InputError("--repeat must be >= 1, got " + std::to_string(repeat));
  if (onePatchOpt->count()) {
    if (onePatch < 1) throw InputError("--one-patch must be >= 1, got " + std::to_string(onePatch));
    if (!patches.empty()) throw InputError("--one-patch picks its own patches; leave out --patches");
    if (repeatOpt->count()) throw InputError("--one-patch N times N requests; leave out --repeat");
  }
  if (!profilePath.empty() && onePatchOpt->count())
    throw InputError("--profile writes a whole run's trace; --one-patch times many small requests");
  checkWritable(profilePath, "profile output", {input, psfPath});
  if (psferrOpt->count()) params.psferr = psferr;
  if (decorrelate) params.mode = Decorrelation::Noise;
  params.validate();

  Inputs in;
  const auto t0 = std::chrono::steady_clock::now();
  const WaveGrid wave = wavelength.empty() ? WaveGrid::fromRange(5760, 7620, 0.8) : parseWaveOption(wavelength);
  if (!input.empty()) {
    if (psfPath.empty()) throw InputError("bench -i needs -p psf.fits too");
    in.psf = readPsf(psfPath);
    in.image = readPreproc(input);
    in.source = input;
  } else {
    in.psf = !psfPath.empty() ? readPsf(psfPath) : makeSyntheticPsf();
    SimulationOptions so;
    so.wave = wave;
    so.fiberMin = specmin;
    so.nFiber = nspecOpt->count() ? nspec : in.psf.nfiber - so.fiberMin;
    so.seed = uint64_t(seed);
    in.image = simulate(in.psf, so).image;
    in.source = std::string("simulated through ") + (!psfPath.empty() ? psfPath : "the synthetic PSF");
  }
  const double prepS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  ExtractionRequest req;
  req.image = &in.image;
  req.psf = &in.psf;
  req.wave = wave;
  req.fiberMin = specmin;
  req.nFiber = nspecOpt->count() ? nspec : in.psf.nfiber - req.fiberMin;
  req.params = params;
  req.threads = threads;
  req.model = model;
  req.profileKernels = profileKernels;
  if (!patches.empty()) {
    std::vector<int> pick;
    for (double v : numberList(patches, "--patches")) {
      if (v < 0 || v != std::floor(v)) throw InputError("--patches expects plan indices like 0,1,2, got '" + patches + "'");
      pick.push_back(int(v));
    }
    req.patches = pick;
  }
  EngineChoice choice = makeEngine(engine, engineOptionsFrom(gpus, gpuMemory, engine, MpiJob(false, "bench")));
  if (!choice.note.empty()) std::fprintf(stderr, "spexlab-cli bench: %s\n", choice.note.c_str());
  if (onePatch > 0) return onePatchBench(*choice.engine, req, onePatch, json, in.source);
  std::vector<double> walls;
  ExtractionResult r;
  TerminalProgress progress(!json && !quiet);
  CancelToken cancel;
  // Process CPU time (user + system) over the extractions (cpuSeconds): on a shared
  // machine wall times swing with the load, CPU time much less (docs/benchmarks.md).
  std::vector<double> cpus;
  for (int i = 0; i < repeat; ++i) {
    const double c0 = cpuSeconds();
    choice.engine->extractInto(req, r, progress, cancel); // warm: r is kept between repeats
    cpus.push_back(cpuSeconds() - c0);
    walls.push_back(r.profile.wallNs * 1e-9);
  }
  if (!profilePath.empty()) writeTextAtomic(profilePath, r.profile.toChromeTrace());
  std::vector<double> sorted = walls;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const int nthreads = req.threads > 0 ? req.threads : int(std::thread::hardware_concurrency());
  const int lanes = choice.engine->name() == "cpu" ? nthreads : 1;
  const double bins = double(r.nfiber) * r.nwave;
  if (json) {
    nlohmann::ordered_json phases = nlohmann::ordered_json::array();
    for (const PhaseStats& s : r.profile.phaseStats())
      phases.push_back({{"name", s.name}, {"count", s.count}, {"total_s", s.totalS},
                        {"mean_s", s.meanS}, {"min_s", s.minS}, {"max_s", s.maxS}});
    nlohmann::ordered_json out = {{"engine", choice.engine->name()},
                                {"source", in.source},
                                {"nfiber", r.nfiber},
                                {"nwave", r.nwave},
                                {"patches", r.patches.size()},
                                {"threads", nthreads},
                                {"walls_s", walls},
                                {"cpu_s", cpus},
                                {"median_s", median},
                                {"profile_kernels", profileKernels},
                                {"phases", std::move(phases)}};
    if (!r.profile.kernels.empty()) {
      nlohmann::ordered_json ks = nlohmann::ordered_json::array();
      for (const KernelStats& s : r.profile.kernelStats())
        ks.push_back({{"phase", s.phase}, {"name", s.name}, {"kind", s.kind}, {"count", s.count},
                      {"total_s", s.totalS}, {"mean_s", s.meanS}, {"phase_total_s", s.phaseTotalS},
                      {"share", s.share}});
      out["kernels"] = std::move(ks);
      nlohmann::ordered_json occ = nlohmann::ordered_json::array();
      for (const DeviceOccupancy& o : r.profile.deviceOccupancy())
        occ.push_back({{"device", o.device}, {"window_s", o.windowS}, {"busy_s", o.busyS},
                       {"kernel_s", o.kernelS}, {"concurrent_s", o.concurrentS},
                       {"copy_only_s", o.copyOnlyS}, {"lead_s", o.leadS}, {"tail_s", o.tailS},
                       {"gap_s", o.gapS}, {"largest_gap_s", o.largestGapS},
                       {"largest_gap_at_s", o.largestGapAtS}, {"gaps", o.gaps}});
      out["occupancy"] = std::move(occ);
    }
    // A path need not be UTF-8: replace what is not, rather than fail after the run.
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("bench: %d fibers x %d wavelengths (%.1f..%.1f A), %zu patches, engine %s, %d thread%s\n",
              r.nfiber, r.nwave, r.wave.wmin, r.wave.last(), r.patches.size(),
              choice.engine->name().c_str(), nthreads, nthreads == 1 ? "" : "s");
  std::printf("input: %s (prepared in %.1f s)\n\n", in.source.c_str(), prepS);
  std::printf("%s", phaseTable(r, lanes).c_str());
  if (!r.profile.kernels.empty())
    std::printf("\nkernel profile (last run):\n%s", kernelTable(r.profile).c_str());
  std::printf("\nwall: median %.3f s over %d run%s (", median, repeat, repeat == 1 ? "" : "s");
  for (std::size_t i = 0; i < walls.size(); ++i) std::printf("%s%.3f", i ? ", " : "", walls[i]);
  std::printf(")\ncpu time (user + system, all threads): ");
  for (std::size_t i = 0; i < cpus.size(); ++i) std::printf("%s%.3f", i ? ", " : "", cpus[i]);
  std::printf(" s\nthroughput: %.0f bins/s, %.1f patches/s\n", bins / median, r.patches.size() / median);
  const std::vector<std::size_t> peak = enginePeakDeviceBytes(*choice.engine);
  for (std::size_t d = 0; d < peak.size(); ++d)
    std::printf("peak device memory held by the engine on GPU %zu: %.2f GiB\n", d,
                double(peak[d]) / double(1ull << 30));
  for (const std::string& line : engineMemoryNotes(*choice.engine)) std::printf("memory: %s\n", line.c_str());
  if (!peak.empty()) {
    double dgemm = 0;
    if (ceilings) {
      const std::vector<int> g = parseGpus(gpus);
      const GpuCeilings c = measureGpuCeilings(g.empty() ? 0 : g.front());
      dgemm = c.dgemmFlops;
      std::printf("ceilings measured on that GPU: DGEMM %.1f TFLOP/s (cuBLAS, 8192^3), device copy "
                  "%.0f GB/s (read + write)\n", c.dgemmFlops * 1e-12, c.copyBytesPerS * 1e-9);
    }
    std::printf("%s", solverRateTable(r, req, dgemm).c_str());
  }
  return 0;
}

} // namespace spex::cli
