#include "commands.h"

#include "app/engine_factory.h"
#include "core/errors.h"
#include "core/extract/compare.h"
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "core/plan/patch_plan.h"
#include "core/sim/simulator.h"
#include "options.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace spex::cli {

namespace {

namespace fs = std::filesystem;

// Options shared by extract and bench, as desi_extract_spectra spells them.
const std::map<std::string, std::string> kAliases = {
    {"-i", "--input"},    {"-p", "--psf"},        {"-o", "--output"}, {"-m", "--model"},
    {"-w", "--wavelength"}, {"-s", "--specmin"},  {"-n", "--nspec"},  {"-r", "--regularize"},
    {"-t", "--threads"},  {"-f", "--fibermap"}};
const std::set<std::string> kExtractValued = {
    "--input",       "--psf",          "--output",       "--model",   "--wavelength",
    "--specmin",     "--nspec",        "--regularize",   "--bundlesize", "--nsubbundles",
    "--nwavestep",   "--psferr",       "--pixpad-frac",  "--wavepad-frac", "--engine",
    "--threads",     "--profile",      "--gpus",         "--fibermap", "--repeat", "--seed"};

PatchParams paramsFrom(const Options& o) {
  PatchParams p;
  p.bundlesize = o.integer("--bundlesize", p.bundlesize);
  p.nsubbundles = o.integer("--nsubbundles", p.nsubbundles);
  p.nwavestep = o.integer("--nwavestep", p.nwavestep);
  p.pixpadFrac = o.number("--pixpad-frac", p.pixpadFrac);
  p.wavepadFrac = o.number("--wavepad-frac", p.wavepadFrac);
  p.regularize = o.number("--regularize", p.regularize);
  if (o.has("--psferr")) p.psferr = o.number("--psferr", 0.01);
  if (o.has("--decorrelate-fibers")) p.mode = Decorrelation::Noise;
  p.validate();
  return p;
}

// -w wmin,wmax,dw; default the PSF's domain rounded inwards to whole Angstroms
// (desispec: ceil(wmin), floor(wmax)) with dw = 0.8.
WaveGrid waveFrom(const Options& o, const GaussHermitePsf& psf) {
  if (o.has("--wavelength")) {
    const auto v = numberList(o.str("--wavelength"), "-w/--wavelength");
    if (v.size() != 3 && v.size() != 2)
      throw InputError("-w/--wavelength expects wmin,wmax[,dw], got '" + o.str("--wavelength") + "'");
    return WaveGrid::fromRange(v[0], v[1], v.size() == 3 ? v[2] : 0.8);
  }
  return WaveGrid::fromRange(std::ceil(psf.waveMin()), std::floor(psf.waveMax()), 0.8);
}

std::vector<int> gpusFrom(const Options& o) {
  std::vector<int> out;
  if (!o.has("--gpus")) return out;
  for (double v : numberList(o.str("--gpus"), "--gpus")) {
    if (v < 0 || v != std::floor(v)) throw InputError("--gpus expects device numbers like 0,1");
    out.push_back(int(v));
  }
  return out;
}

// Fails early, before minutes of work, when an output cannot be written.
void checkWritable(const std::string& path, const std::string& what,
                   const std::vector<std::string>& inputs) {
  if (path.empty()) return;
  for (const auto& in : inputs)
    if (!in.empty() && fs::exists(in) && fs::exists(path) && fs::equivalent(in, path))
      throw InputError(what + " '" + path + "' is one of the inputs; refusing to overwrite it");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir))
    throw InputError(what + " '" + path + "': directory '" + dir.string() + "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    throw InputError(what + " '" + path + "': directory '" + dir.string() + "' is not writable");
  if (fs::is_directory(path)) throw InputError(what + " '" + path + "' is a directory");
}

void writeTextAtomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw InputError("cannot write '" + path + "'");
    out << text;
    if (!out.good()) {
      out.close();
      std::remove(tmp.c_str());
      throw InputError("cannot write '" + path + "'");
    }
  }
  fs::rename(tmp, path);
}

// A progress bar on a terminal (stderr), nothing otherwise.
class TerminalProgress : public ProgressSink {
public:
  explicit TerminalProgress(bool enabled) : m_enabled(enabled && ::isatty(2)) {}
  void patchDone(const PatchOutput&, int done, int total) override {
    if (!m_enabled) return;
    std::lock_guard lock(m_mutex);
    const auto now = std::chrono::steady_clock::now();
    if (done != total && now - m_last < std::chrono::milliseconds(100)) return;
    m_last = now;
    const int width = 40, filled = total ? width * done / total : width;
    std::fprintf(stderr, "\r[%.*s%*s] %3d%%  %d/%d patches", filled,
                 "########################################", width - filled, "",
                 total ? 100 * done / total : 100, done, total);
    if (done == total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

private:
  bool m_enabled;
  std::mutex m_mutex;
  std::chrono::steady_clock::time_point m_last{};
};

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
  const struct {
    const char* phase;
    double flops;
    const char* what;
  } steps[] = {{"cholesky", P * n * n * n / 3, "n^3/3 per patch (the flops of an unblocked one)"},
               {"inverse", P * inverse, "L^-1 by nb-blocks, dense GEMMs"},
               {"fiber blocks", P * nb * nb * nb * F * (F + 1), "C_f = X_f^T X_f, F(F+1) nb^3"}};
  std::ostringstream os;
  char line[256];
  std::snprintf(line, sizeof line, "\nsolver steps (n = %d = %d x %d, %d patches; rates are lower bounds):\n",
                int(n), F, int(nb), int(P));
  os << line;
  std::snprintf(line, sizeof line, "%-14s %10s %10s %10s %10s  %s\n", "step", "GFLOP", "device s",
                "TFLOP/s", "of DGEMM", "count");
  os << line;
  const auto stats = r.profile.phaseStats();
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

} // namespace

int cmdExtract(const std::vector<std::string>& args) {
  Options o(kAliases, kExtractValued, {"--decorrelate-fibers", "--quiet"});
  o.parse(args);
  if (!o.positional().empty())
    throw InputError("unexpected argument '" + o.positional()[0] + "'");
  for (const char* req : {"--input", "--psf", "--output"})
    if (!o.has(req)) throw InputError(std::string("missing required option ") + req);
  const std::string in = o.str("--input"), psfPath = o.str("--psf"), out = o.str("--output"),
                    modelOut = o.str("--model"), profileOut = o.str("--profile");
  checkWritable(out, "output", {in, psfPath});
  checkWritable(modelOut, "model output", {in, psfPath, out});
  checkWritable(profileOut, "profile output", {in, psfPath, out});
  const PatchParams params = paramsFrom(o);
  const bool quiet = o.has("--quiet");

  const auto t0 = std::chrono::steady_clock::now();
  GaussHermitePsf psf = readPsf(psfPath);
  Image image = readPreproc(in);
  const double readS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (image.nonFinitePixels > 0)
    std::fprintf(stderr, "spexlab-cli extract: warning: %d pixels with NaN/Inf values or negative/NaN ivar treated as masked\n",
                 image.nonFinitePixels);

  ExtractionRequest req;
  req.image = &image;
  req.psf = &psf;
  req.wave = waveFrom(o, psf);
  req.fiberMin = o.integer("--specmin", 0);
  req.nFiber = o.integer("--nspec", psf.nfiber - req.fiberMin);
  req.params = params;
  req.model = !modelOut.empty();
  req.threads = o.integer("--threads", 0);
  if (req.threads < 0) throw InputError("--threads must be >= 0");

  EngineChoice choice = makeEngine(o.str("--engine", "auto"), gpusFrom(o));
  if (!choice.note.empty()) std::fprintf(stderr, "spexlab-cli extract: %s\n", choice.note.c_str());
  TerminalProgress progress(!quiet);
  CancelToken cancel;
  ExtractionResult r = choice.engine->extract(req, progress, cancel);

  const auto tw = std::chrono::steady_clock::now();
  FrameMeta meta;
  meta.inputImage = in;
  meta.inputPsf = psfPath;
  writeFrame(out, r, image, meta);
  if (r.model) writeModel(modelOut, *r.model, image, r, meta);
  const double writeS = std::chrono::duration<double>(std::chrono::steady_clock::now() - tw).count();
  if (!profileOut.empty()) {
    // Reading and writing happen outside the engine; put them on the main lane.
    Profile p = r.profile;
    const int lane = p.laneIndex("main");
    const int64_t readNs = int64_t(readS * 1e9), writeNs = int64_t(writeS * 1e9);
    Profile shifted;
    shifted.lanes = p.lanes;
    shifted.ranges.push_back({"read", 0, readNs, lane, 0, -1});
    shifted.append(p, readNs);
    shifted.ranges.push_back({"write", readNs + p.wallNs, readNs + p.wallNs + writeNs, lane, 0, -1});
    shifted.wallNs = readNs + p.wallNs + writeNs;
    writeTextAtomic(profileOut, shifted.toChromeTrace());
  }

  if (!quiet) {
    int regularized = 0, failed = 0;
    for (const auto& d : r.patches) {
      regularized += d.regularized;
      failed += d.failed;
    }
    long masked = 0;
    for (uint32_t m : r.mask.data) masked += m != 0;
    std::printf("extracted %d fibers (%d..%d) x %d wavelengths (%.1f..%.1f A, step %.2f) with %s\n",
                r.nfiber, r.fiberMin, r.fiberMin + r.nfiber - 1, r.nwave, r.wave.wmin,
                r.wave.last(), r.wave.dw, choice.engine->name().c_str());
    std::printf("  %zu patches in %.2f s (read %.2f s, write %.2f s); %d regularized, %d failed\n",
                r.patches.size(), r.profile.wallNs * 1e-9, readS, writeS, regularized, failed);
    std::printf("  %ld bins masked; wrote %s%s%s\n", masked, out.c_str(),
                modelOut.empty() ? "" : " and ", modelOut.c_str());
  }
  return 0;
}

int cmdSimulate(const std::vector<std::string>& args) {
  std::set<std::string> valued = kExtractValued;
  valued.insert("--camera"); // b0..z9: the arm's wavelengths, the petal's FIBERs
  Options o(kAliases, valued, {"--no-noise", "--no-defects", "--quiet"});
  o.parse(args);
  if (!o.has("--output")) throw InputError("missing required option -o DIR");
  const std::string dir = o.str("--output");
  const Camera camera = parseCamera(o.str("--camera", "r0"));
  fs::create_directories(dir);
  GaussHermitePsf psf;
  if (o.has("--psf")) {
    psf = readPsf(o.str("--psf"));
  } else {
    SyntheticPsfOptions so = SyntheticPsfOptions::forCamera(camera);
    so.seed = uint64_t(o.integer("--seed", 42));
    psf = makeSyntheticPsf(so);
  }
  SimulationOptions so;
  so.camera = camera;
  so.wave = o.has("--wavelength") ? waveFrom(o, psf) : desiArmGrid(camera.arm);
  so.fiberMin = o.integer("--specmin", 0);
  so.nFiber = o.integer("--nspec", psf.nfiber - so.fiberMin);
  so.noise = !o.has("--no-noise");
  so.defects = !o.has("--no-defects");
  so.seed = uint64_t(o.integer("--seed", 42));
  const auto t0 = std::chrono::steady_clock::now();
  Simulation sim = simulate(psf, so);
  writeSimulation(dir, psf, sim);
  if (!o.has("--quiet"))
    std::printf("simulated %s fibers %d..%d on %d wavelengths (%.1f..%.1f A) in %.1f s; wrote %s/{psf,preproc,truth}.fits\n",
                camera.name().c_str(), so.fiberMin, so.fiberMin + so.nFiber - 1, so.wave.n,
                so.wave.wmin, so.wave.last(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                dir.c_str());
  return 0;
}

int cmdBench(const std::vector<std::string>& args) {
  Options o(kAliases, kExtractValued, {"--json", "--decorrelate-fibers", "--quiet", "--ceilings"});
  o.parse(args);
  const PatchParams params = paramsFrom(o);
  Inputs in;
  const auto t0 = std::chrono::steady_clock::now();
  if (o.has("--input")) {
    if (!o.has("--psf")) throw InputError("bench -i needs -p psf.fits too");
    in.psf = readPsf(o.str("--psf"));
    in.image = readPreproc(o.str("--input"));
    in.source = o.str("--input");
  } else {
    in.psf = o.has("--psf") ? readPsf(o.str("--psf")) : makeSyntheticPsf();
    SimulationOptions so;
    so.wave = o.has("--wavelength") ? waveFrom(o, in.psf) : WaveGrid::fromRange(5760, 7620, 0.8);
    so.fiberMin = o.integer("--specmin", 0);
    so.nFiber = o.integer("--nspec", in.psf.nfiber - so.fiberMin);
    so.seed = uint64_t(o.integer("--seed", 42));
    in.image = simulate(in.psf, so).image;
    in.source = std::string("simulated through ") + (o.has("--psf") ? o.str("--psf") : "the synthetic PSF");
  }
  const double prepS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  ExtractionRequest req;
  req.image = &in.image;
  req.psf = &in.psf;
  req.wave = o.has("--wavelength") ? waveFrom(o, in.psf) : WaveGrid::fromRange(5760, 7620, 0.8);
  req.fiberMin = o.integer("--specmin", 0);
  req.nFiber = o.integer("--nspec", in.psf.nfiber - req.fiberMin);
  req.params = params;
  req.threads = o.integer("--threads", 0);
  EngineChoice choice = makeEngine(o.str("--engine", "auto"), gpusFrom(o));
  if (!choice.note.empty()) std::fprintf(stderr, "spexlab-cli bench: %s\n", choice.note.c_str());
  const int repeat = std::max(1, o.integer("--repeat", 1));
  std::vector<double> walls;
  ExtractionResult r;
  TerminalProgress progress(!o.has("--json") && !o.has("--quiet"));
  CancelToken cancel;
  for (int i = 0; i < repeat; ++i) {
    r = choice.engine->extract(req, progress, cancel);
    walls.push_back(r.profile.wallNs * 1e-9);
  }
  std::vector<double> sorted = walls;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const int threads = req.threads > 0 ? req.threads : int(std::thread::hardware_concurrency());
  const int lanes = choice.engine->name() == "cpu" ? threads : 1;
  const double bins = double(r.nfiber) * r.nwave;
  if (o.has("--json")) {
    std::printf("{\"engine\":\"%s\",\"source\":\"%s\",\"nfiber\":%d,\"nwave\":%d,\"patches\":%zu,"
                "\"threads\":%d,\"walls_s\":[",
                choice.engine->name().c_str(), in.source.c_str(), r.nfiber, r.nwave,
                r.patches.size(), threads);
    for (std::size_t i = 0; i < walls.size(); ++i) std::printf("%s%.6f", i ? "," : "", walls[i]);
    std::printf("],\"median_s\":%.6f,\"phases\":[", median);
    bool first = true;
    for (const PhaseStats& s : r.profile.phaseStats()) {
      std::printf("%s{\"name\":\"%s\",\"count\":%d,\"total_s\":%.6f,\"mean_s\":%.9f,\"min_s\":%.9f,\"max_s\":%.9f}",
                  first ? "" : ",", s.name.c_str(), s.count, s.totalS, s.meanS, s.minS, s.maxS);
      first = false;
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf("bench: %d fibers x %d wavelengths (%.1f..%.1f A), %zu patches, engine %s, %d thread%s\n",
              r.nfiber, r.nwave, r.wave.wmin, r.wave.last(), r.patches.size(),
              choice.engine->name().c_str(), threads, threads == 1 ? "" : "s");
  std::printf("input: %s (prepared in %.1f s)\n\n", in.source.c_str(), prepS);
  std::printf("%s", phaseTable(r, lanes).c_str());
  std::printf("\nwall: median %.3f s over %d run%s (", median, repeat, repeat == 1 ? "" : "s");
  for (std::size_t i = 0; i < walls.size(); ++i) std::printf("%s%.3f", i ? ", " : "", walls[i]);
  std::printf(")\nthroughput: %.0f bins/s, %.1f patches/s\n", bins / median, r.patches.size() / median);
  const std::vector<std::size_t> peak = enginePeakDeviceBytes(*choice.engine);
  for (std::size_t d = 0; d < peak.size(); ++d)
    std::printf("peak device memory held by the engine on GPU %zu: %.2f GiB\n", d,
                double(peak[d]) / double(1ull << 30));
  if (!peak.empty()) {
    double dgemm = 0;
    if (o.has("--ceilings")) {
      const std::vector<int> gpus = gpusFrom(o);
      const GpuCeilings c = measureGpuCeilings(gpus.empty() ? 0 : gpus.front());
      dgemm = c.dgemmFlops;
      std::printf("ceilings measured on that GPU: DGEMM %.1f TFLOP/s (cuBLAS, 8192^3), device copy "
                  "%.0f GB/s (read + write)\n", c.dgemmFlops * 1e-12, c.copyBytesPerS * 1e-9);
    }
    std::printf("%s", solverRateTable(r, req, dgemm).c_str());
  }
  return 0;
}

int cmdCompare(const std::vector<std::string>& args) {
  Options o({}, {"--max-sigma"}, {"--json"});
  o.parse(args);
  if (o.positional().size() != 2) throw InputError("compare needs two frame files: a.fits b.fits");
  const ExtractionResult a = readFrame(o.positional()[0]);
  const ExtractionResult b = readFrame(o.positional()[1]);
  const FrameComparison c = compareFrames(a, b);
  if (o.has("--json"))
    std::printf("%s\n", c.toJson().c_str());
  else
    std::printf("%s vs %s\n%s", o.positional()[0].c_str(), o.positional()[1].c_str(),
                c.toText().c_str());
  if (o.has("--max-sigma") && c.maxPull > o.number("--max-sigma", 0)) return 3;
  return 0;
}

} // namespace spex::cli
