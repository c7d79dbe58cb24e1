// `spexlab-cli extract` and `desi_extract_spectra`: desispec's desi_extract_spectra
// command line (desispec/scripts/extract.py) on SpexLab's engines. Every option of
// desispec is accepted with its meaning; docs/usage.md lists what SpexLab does with each.
#include "commands.h"

#include "app/engine_factory.h"
#include "core/bary/barycentric.h"
#include "cli_common.h"
#include "process_exit.h"
#include "core/errors.h"
#include "core/io/fits_file.h"
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "engine_options.h"
#include "kernel_table.h"
#include "extract_checks.h"
#include "mpi_job.h"
#include "signals.h"


#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <future>

namespace spex::cli {

namespace {

struct ExtractOptions {
  std::string input, psf, output, model, wavelength, fibermap, profile, engine, gpus, gpuMemory;
  int specmin = 0, nspec = -1, threads = 0;
  PatchParams params;
  double psferr = std::numeric_limits<double>::quiet_NaN();
  bool verbose = false, quiet = false, mpi = false, decorrelate = false, noScores = false,
       barycentric = false, useSpecter = false, gpuSpecter = false, gpu = false, noGpu = false,
       profileKernels = false;
  CLI::Option *nspecOpt = nullptr, *psferrOpt = nullptr;
};

void addOptions(CLI::App& app, ExtractOptions& o) {
  setupApp(app);
  // desispec's options, in its order.
  app.add_option("-i,--input", o.input, "input preproc image")->required();
  app.add_option("-f,--fibermap", o.fibermap,
                 "input fibermap file: its FIBERMAP replaces the preproc's (rows specmin..specmin+nspec-1)");
  app.add_option("-p,--psf", o.psf, "input PSF file (Gauss-Hermite)")->required();
  app.add_option("-o,--output", o.output, "output frame file (*.fits)")->required();
  app.add_option("-m,--model", o.model, "output 2D pixel model file");
  app.add_option("-w,--wavelength", o.wavelength,
                 "wavemin,wavemax,dw (default: the PSF HDU's WAVEMIN..WAVEMAX, dw 0.8, both ends included)");
  app.add_option("-s,--specmin", o.specmin, "first spectrum (FIBERMAP row) to extract")
      ->capture_default_str();
  o.nspecOpt = app.add_option("-n,--nspec", o.nspec, "number of spectra to extract (default: all of the PSF from specmin)");
  app.add_option("-r,--regularize", o.params.regularize, "regularization amount")->capture_default_str();
  app.add_option("--bundlesize", o.params.bundlesize, "number of spectra per bundle")->capture_default_str();
  app.add_option("--nsubbundles", o.params.nsubbundles,
                 "number of extraction sub-bundles (must divide bundlesize)")->capture_default_str();
  app.add_option("--nwavestep", o.params.nwavestep,
                 "number of wavelength steps per divide-and-conquer extraction step")->capture_default_str();
  app.add_flag("-v,--verbose", o.verbose, "print the extraction parameters and more");
  app.add_flag("--mpi", o.mpi, "use MPI for parallelism (needs a build with MPI)");
  app.add_flag("--decorrelate-fibers", o.decorrelate, "decorrelate across fibers too (not recommended)");
  app.add_flag("--no-scores", o.noScores, "do not write the SCORES HDU");
  o.psferrOpt = app.add_option("--psferr", o.psferr,
                               "fractional PSF model error for chi2 and masks (default: the PSF file's PSFERR)");
  app.add_flag("--barycentric-correction", o.barycentric,
               "extract on the barycentric-corrected grid (HELIOCOR; WAVELENGTH stays as requested)");
  app.add_flag("--gpu-specter", o.gpuSpecter, "accepted for desispec compatibility: SpexLab's engine always runs");
  app.add_flag("--use-specter", o.useSpecter, "accepted for desispec compatibility: SpexLab's engine always runs");
  auto* gpu = app.add_flag("--gpu,--use-gpu", o.gpu, "extract on the GPU (the CUDA engine; fails if there is none)");
  auto* noGpu = app.add_flag("--no-gpu", o.noGpu, "extract on the CPU even if a GPU exists");
  gpu->excludes(noGpu);
  app.add_option("--pixpad-frac", o.params.pixpadFrac,
                 "fraction of a PSF spot size to pad in pixels")->capture_default_str();
  app.add_option("--wavepad-frac", o.params.wavepadFrac,
                 "fraction of a PSF spot size to pad in wavelengths")->capture_default_str();
  // SpexLab's own.
  auto* engine = app.add_option("--engine", o.engine, "cpu | cuda | auto (default auto: every GPU, else the CPU)")
                     ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  engine->excludes(gpu)->excludes(noGpu);
  app.add_option("--gpus", o.gpus, "GPU devices to use, e.g. 0,1 (default: all)");
  app.add_option("--gpu-memory", o.gpuMemory,
                 "CUDA device-memory budget per GPU: a size (6G) or a fraction of the device (0.2)");
  app.add_option("-t,--threads", o.threads, "CPU threads (0: all cores)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--profile", o.profile, "write a Chrome trace of the run (JSON)");
  app.add_flag("--profile-kernels", o.profileKernels,
               "CUDA engine: record every kernel and copy (CUPTI) into the trace and print a per-kernel "
               "table (slower; docs/profiling.md)");
  app.add_flag("--quiet", o.quiet, "print nothing but warnings and errors");
}

// The checks desispec makes before extracting (and ours on the files).
void validate(ExtractOptions& o) {
  if (o.params.nsubbundles >= 1 && o.params.bundlesize >= 1 &&
      o.params.bundlesize % o.params.nsubbundles != 0)
    throw InputError("bundlesize (" + std::to_string(o.params.bundlesize) +
                     ") must be evenly divisible by nsubbundles (" +
                     std::to_string(o.params.nsubbundles) + ")");
  if (o.output.find(".fits") == std::string::npos)
    throw InputError("-o/--output '" + o.output + "': extraction output file should have .fits extension");
  if (o.specmin < 0) throw InputError("-s/--specmin must be >= 0, got " + std::to_string(o.specmin));
  if (o.nspecOpt->count() && o.nspec < 1)
    throw InputError("-n/--nspec must be >= 1, got " + std::to_string(o.nspec) + " (fiber range is empty)");
  if (o.psferrOpt->count()) o.params.psferr = o.psferr;
  if (o.decorrelate) o.params.mode = Decorrelation::Noise;
  o.params.validate();
  // --mpi: the scale-out code defines SPEXLAB_EXTRACT_MPI where extract runs under MPI.
  if (o.mpi) {
#ifndef SPEXLAB_EXTRACT_MPI
    throw InputError("--mpi: this build of SpexLab has no MPI support for extract; run without "
                     "--mpi (one process already uses every core and GPU of a node)");
#endif
  }
}

std::string engineKind(const ExtractOptions& o) {
  if (o.noGpu) return "cpu";
  if (o.gpu) return "cuda";
  return o.engine.empty() ? "auto" : o.engine;
}

// -f FILE: its FIBERMAP replaces the preproc's, after checking that it has the rows
// asked for and that they belong to the preproc's petal.
void useFibermapFile(const std::string& path, Image& image, int specmin, int nspec) {
  FitsFile f = FitsFile::openRead(path); // names a missing or unreadable file
  f.moveTo("FIBERMAP");
  if (!f.currentIsTable()) f.fail("", "FIBERMAP is an image, expected a table");
  std::vector<int32_t> fiber = f.readColumnInt("FIBER");
  const long need = long(specmin) + nspec;
  if (long(fiber.size()) < need)
    throw InputError("-f/--fibermap '" + path + "': FIBERMAP has " + std::to_string(fiber.size()) +
                     " rows, fewer than specmin + nspec = " + std::to_string(need));
  if (const int petal = petalOf(image.header); petal >= 0) {
    for (long row = specmin; row < need; ++row)
      if (fiber[std::size_t(row)] < 0 || fiber[std::size_t(row)] / kFibersPerPetal != petal)
        throw InputError("-f/--fibermap '" + path + "': FIBERMAP row " + std::to_string(row) +
                         " holds FIBER " + std::to_string(fiber[std::size_t(row)]) + " (petal " +
                         std::to_string(fiber[std::size_t(row)] / kFibersPerPetal) +
                         "), but the preproc '" + image.path + "' is petal " + std::to_string(petal) +
                         " (CAMERA/SPECGRPH/PETAL); is this the fibermap of another petal?");
  }
  image.fibermap.sourceFile = path;
  image.fibermap.fiber = std::move(fiber);
  image.fibermap.header = f.readHeader();
  image.fibermap.hduBytes = f.rawHdu();
}

int runExtract(ExtractOptions& o, const std::string& prog) {
  validate(o);
  const std::string& in = o.input;
  checkWritable(o.output, "output", {in, o.psf, o.fibermap});
  checkWritable(o.model, "model output", {in, o.psf, o.output, o.fibermap});
  checkWritable(o.profile, "profile output", {in, o.psf, o.output, o.fibermap});

  MpiJob mpi(o.mpi, "extract"); // mpi_job.h: with --mpi the ranks share the bundles
  if (!mpi.root()) o.quiet = true, o.verbose = false;
  SignalGuard signals; // SIGINT/SIGTERM: cancel, clean temporaries, one line
  const auto t0 = std::chrono::steady_clock::now();
  // The engine is made while the files are read: for CUDA that is the driver's
  // start-up, the context and the cuBLAS/cuSOLVER handles, which need no input. Its
  // errors (and those of --gpus/--gpu-memory) are reported after the files' own, as
  // when it was made after them.
  struct MadeEngine {
    EngineChoice choice;
    int64_t ns = 0; // how long making it took
  };
  std::future<MadeEngine> engineMade = std::async(std::launch::async, [&o, &mpi] {
    const auto s = std::chrono::steady_clock::now();
    MadeEngine m{makeEngine(engineKind(o), engineOptionsFrom(o.gpus, o.gpuMemory, engineKind(o), mpi))};
    m.ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - s).count();
    return m;
  });
  // The PSF is read beside the preproc (it is small, but its open, header checks and
  // tables are ~10 ms of a cold start); errors keep their order: the PSF's first.
  std::future<GaussHermitePsf> psfRead =
      std::async(std::launch::async, [&o] { return readPsf(o.psf); });
  Image image;
  std::exception_ptr preprocError;
  try {
    image = readPreproc(in);
  } catch (...) {
    preprocError = std::current_exception();
  }
  GaussHermitePsf psf = psfRead.get();
  if (preprocError) std::rethrow_exception(preprocError);
  const int specmin = o.specmin;
  const int nspec = o.nspecOpt->count() ? o.nspec : psf.nfiber - specmin;
  // The PSF decides which fibers exist (the engine checks again); FIBERMAP rows next.
  if (nspec < 1 || specmin + nspec > psf.nfiber)
    throw InputError("fibers " + std::to_string(specmin) + ".." + std::to_string(specmin + nspec - 1) +
                     " outside the PSF's 0.." + std::to_string(psf.nfiber - 1) +
                     (nspec < 1 ? " (fiber range is empty)" : ""));
  if (!o.fibermap.empty()) useFibermapFile(o.fibermap, image, specmin, nspec);
  checkFibermapCovers(image.fibermap, specmin, nspec);
  const double readS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (image.nonFinitePixels > 0)
    std::fprintf(stderr, "%s: warning: %d pixels with NaN/Inf values or negative/NaN ivar treated as masked\n",
                 prog.c_str(), image.nonFinitePixels);

  // The requested grid is what the frame's WAVELENGTH holds; the extraction runs on it,
  // or on it divided by the barycentric factor.
  const WaveGrid requested = !o.wavelength.empty()
                                 ? parseWaveOption(o.wavelength)
                                 : defaultFrameGrid(psf);
  double heliocor = 1.0;
  WaveGrid extractGrid = requested;
  if (o.barycentric) {
    // Pointing and time from the preproc header, else the FIBERMAP's (the -f file's).
    const BaryInputs b = baryInputsFromHeaders(
        image.header, image.fibermap.sourceFile.empty() ? nullptr : &image.fibermap.header);
    heliocor = barycentricFactor(b.raDeg, b.decDeg, b.mjdMid);
    extractGrid = barycentricExtractionGrid(requested, heliocor);
    if (o.verbose)
      std::printf("barycentric correction: RA %.6f (%s), Dec %.6f (%s), MJD %.6f (%s + EXPTIME/2): factor %.12f\n",
                  b.raDeg, b.raKey.c_str(), b.decDeg, b.decKey.c_str(), b.mjdMid, b.mjdKey.c_str(), heliocor);
  }

  ExtractionRequest req;
  req.image = &image;
  req.psf = &psf;
  req.wave = extractGrid;
  req.fiberMin = specmin;
  req.nFiber = nspec;
  req.params = o.params;
  req.model = !o.model.empty();
  req.threads = o.threads;
  req.profileKernels = o.profileKernels;
  std::string stepNote;
  req.params.nwavestep = boundNwavestep(req.params.nwavestep, req, stepNote);
  if (!stepNote.empty()) std::fprintf(stderr, "%s: %s\n", prog.c_str(), stepNote.c_str());

  const auto tWait = std::chrono::steady_clock::now();
  MadeEngine made = engineMade.get();
  EngineChoice& choice = made.choice;
  const auto tEngine = std::chrono::steady_clock::now();
  const std::string engineName = choice.engine->name();
  if (!choice.note.empty() && mpi.root()) std::fprintf(stderr, "%s: %s\n", prog.c_str(), choice.note.c_str());
  if (o.profileKernels && engineName == "cpu" && mpi.root())
    std::fprintf(stderr, "%s: --profile-kernels: the CPU engine runs no GPU kernels; nothing to record\n",
                 prog.c_str());
  if (o.verbose && !o.quiet) {
    std::printf("#--- Extraction Parameters ---\n");
    std::printf("input:       %s\npsf:         %s\noutput:      %s\n", in.c_str(), o.psf.c_str(), o.output.c_str());
    std::printf("fibermap:    %s\n", image.fibermap.sourceFile.empty() ? "(none)" : image.fibermap.sourceFile.c_str());
    std::printf("wavelength:  %.4f - %.4f A steps %.4f (%d bins)\n", requested.wmin, requested.last(), requested.dw, requested.n);
    if (o.barycentric) std::printf("extracted on %.6f - %.6f A steps %.9f (HELIOCOR %.12f)\n", extractGrid.wmin, extractGrid.last(), extractGrid.dw, heliocor);
    std::printf("specmin:     %d\nnspec:       %d\nregularize:  %g\n", specmin, nspec, o.params.regularize);
    std::printf("bundlesize:  %d\nnsubbundles: %d\nnwavestep:   %d\n", o.params.bundlesize, o.params.nsubbundles, o.params.nwavestep);
    std::printf("engine:      %s\n#-----------------------------\n", engineName.c_str());
    std::fflush(stdout);
  }
  TerminalProgress progress(!o.quiet);
  CancelToken cancel;
  const ExtractionRequest whole = req;
  mpi.narrow(req); // this rank's bundles (all of them without --mpi)
  ExtractionResult r;
  std::string failure;
  {
    SignalGuard::Extracting scope(cancel);
    try {
      if (req.nFiber > 0) r = choice.engine->extract(req, progress, cancel);
    } catch (const SpexError& e) {
      if (!mpi.active()) throw;
      failure = e.what(); // every rank learns of it below; none waits forever
    }
  }
  if (const int sig = SignalGuard::received()) {
    std::fprintf(stderr, "%s: %s received; stopped after %zu patches, nothing written\n",
                 prog.c_str(), SignalGuard::name(sig), r.patches.size());
    return 128 + sig;
  }
  mpi.checkAll(!failure.empty(), failure);
  mpi.gather(r, whole);
  if (!mpi.root()) return 0; // rank 0 writes the one frame

  // The engine is not needed any more: its teardown (for CUDA the device memory, the
  // handles and the GPUs' contexts, ~0.1 s that the process would otherwise spend at
  // exit) runs while the outputs are written. Under MPI the contexts stay (the MPI
  // library may hold CUDA resources until MPI_Finalize); the engine still goes.
  // The preproc's pixel arrays (~0.35 GB for a full frame; the writers need only its
  // header and FIBERMAP) are freed there too.
  std::future<void> released = std::async(
      std::launch::async, [e = std::move(choice.engine), keep = mpi.active(), pix = std::move(image.pix),
                           ivar = std::move(image.ivar), mask = std::move(image.mask)]() mutable {
        if (keep)
          e.reset();
        else
          releaseEngineForExit(std::move(e));
        std::vector<double>().swap(pix.data);
        std::vector<double>().swap(ivar.data);
        std::vector<int32_t>().swap(mask.data);
      });
  const auto tw = std::chrono::steady_clock::now();
  FrameMeta meta;
  meta.inputImage = in;
  meta.inputPsf = o.psf;
  meta.heliocor = heliocor;
  meta.scores = !o.noScores;
  // The write's steps, for the trace (its lane "write steps").
  ProfileRecorder writeRec;
  if (!o.profile.empty()) {
    writeRec.setThreadLaneName("write steps");
    meta.profile = &writeRec;
  }
  {
    // Frame and model together: both written under temporary names, then renamed,
    // the model first and the frame last; any failure leaves both targets as they were.
    // The model (a CCD-sized image) is written on a thread beside the frame; the frame
    // is still renamed last.
    OutputTransaction outputs;
    outputs.renameLast(o.output);
    std::future<void> modelWritten;
    if (r.model)
      modelWritten = std::async(std::launch::async, [&] {
        OutputTransaction::Join join(outputs);
        writeModel(o.model, *r.model, image, r, meta);
      });
    writeFrame(o.output, r, image, meta); // on failure modelWritten's end is waited for
    if (modelWritten.valid()) modelWritten.get(); // the model's error, if any
    outputs.commit();
  }
  const double writeS = std::chrono::duration<double>(std::chrono::steady_clock::now() - tw).count();
  released.get();
  const double releaseS = std::chrono::duration<double>(std::chrono::steady_clock::now() - tw).count();
  if (!o.profile.empty()) {
    // Reading and writing happen outside the engine; put them on the main lane.
    // The engine's profile starts when it was ready (after the read, or after waiting
    // for the engine start when that took longer).
    Profile p = r.profile;
    const int lane = p.laneIndex("main");
    const auto ns = [t0](std::chrono::steady_clock::time_point t) {
      return int64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(t - t0).count());
    };
    const int64_t readNs = int64_t(readS * 1e9), writeNs = int64_t(writeS * 1e9);
    const int64_t waitStart = ns(tWait), extractStart = ns(tEngine), writeStart = ns(tw);
    Profile shifted;
    shifted.lanes = p.lanes;
    shifted.ranges.push_back({"read", 0, readNs, lane, 0, -1});
    if (extractStart - waitStart > 1000000)
      shifted.ranges.push_back({"wait for the engine", waitStart, extractStart, lane, 0, -1});
    // Made beside the reading, on its own lane, with the steps the factory timed.
    const int startLane = shifted.laneIndex("engine start");
    shifted.ranges.push_back({"engine start", 0, made.ns, startLane, 0, -1});
    for (const EngineChoice::Step& st : choice.steps)
      shifted.ranges.push_back({st.name, st.startNs, st.endNs,
                                st.ownLane ? shifted.laneIndex("engine libraries") : startLane,
                                st.ownLane ? 0 : 1, -1});
    shifted.append(p, extractStart);
    shifted.ranges.push_back({"write", writeStart, writeStart + writeNs, lane, 0, -1});
    shifted.append(writeRec.finish(), writeStart);
    shifted.ranges.push_back({"engine release", writeStart, writeStart + int64_t(releaseS * 1e9),
                              shifted.laneIndex("engine release"), 0, -1});
    shifted.wallNs = writeStart + std::max(writeNs, int64_t(releaseS * 1e9));
    writeTextAtomic(o.profile, shifted.toChromeTrace());
  }

  if (!o.quiet) {
    int regularized = 0, failed = 0;
    for (const auto& d : r.patches) {
      regularized += d.regularized;
      failed += d.failed;
    }
    long masked = 0;
    for (uint32_t m : r.mask.data) masked += m != 0;
    std::printf("extracted %d fibers (%d..%d) x %d wavelengths (%.1f..%.1f A, step %.2f) with %s\n",
                r.nfiber, r.fiberMin, r.fiberMin + r.nfiber - 1, requested.n, requested.wmin,
                requested.last(), requested.dw, engineName.c_str());
    if (o.barycentric) std::printf("  barycentric correction: HELIOCOR %.12f\n", heliocor);
    std::printf("  %zu patches in %.2f s (read %.2f s, write %.2f s); %d regularized, %d failed\n",
                r.patches.size(), r.profile.wallNs * 1e-9, readS, writeS, regularized, failed);
    std::printf("  %ld bins masked; wrote %s%s%s\n", masked, o.output.c_str(),
                o.model.empty() ? "" : " and ", o.model.c_str());
    if (!r.profile.kernels.empty()) std::printf("\nkernel profile:\n%s", kernelTable(r.profile).c_str());
  }
  // After a CUDA extraction the process's end (~0.1 s of kernel teardown) is left to
  // a helper (process_exit.h): the outputs are complete and synced by now.
  if (!mpi.active()) requestDetachedExit(engineName.rfind("cuda", 0) == 0);
  return reportUnusableBins(r, "extract");
}

} // namespace

int cmdExtract(const std::vector<std::string>& args, const std::string& prog) {
  CLI::App app("Extract spectra from a DESI preproc image (desi_extract_spectra's options).", prog);
  ExtractOptions o;
  addOptions(app, o);
  if (!parseArgs(app, args)) return 0;
  return runExtract(o, prog);
}

} // namespace spex::cli
