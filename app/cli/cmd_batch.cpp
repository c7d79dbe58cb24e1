// spexlab-cli batch JOBS: a night's frames in one process (DESIGN.md "Scale-out").
//
// JOBS holds one desi_extract_spectra argument list per line (-i -p -o [-m] [-w] [-s]
// [-n] ...); blank lines and lines starting with # are skipped. Every line is checked
// before any work, and a bad one is an error naming its line number. Three threads
// form a pipeline so that reading frame k+1 and writing frame k-1 overlap the
// extraction of frame k on one warm engine:
//
//   reader --[slot: 1 frame read ahead]--> extractor --[slot: 1 frame]--> writer
//
// Each slot holds one frame, so at most one frame waits read, one is extracted and
// one is written (plus the one handed over): memory stays bounded for any JOBS length.
// A job that fails (unreadable input, bad PSF, engine error, unwritable output) is
// reported by its output name and the rest still run; the exit code is 0 only when
// every job succeeded. With --mpi, jobs are dealt to ranks (job i to rank i mod size)
// and each rank takes GPU (local rank mod GPUs). The summary table lists per frame
// the read, extract, write and wait (extractor idle for input) times; --profile
// writes the batch as a Chrome trace with read/extract/write lanes, the engine's own
// lanes right under extract; --profile-kernels (CUDA engine) adds every kernel and copy
// there under its phase (docs/profiling.md, "Kernel profile") and prints their table.
#include "commands.h"

#include "app/engine_factory.h"
#include "core/bary/barycentric.h"
#include "core/errors.h"
#include "core/io/fits_file.h"
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "core/plan/patch_plan.h"
#include "core/profile/profile.h"
#include "engine_options.h"
#include "kernel_table.h"
#include "mpi_job.h"
#include "cli_common.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace spex::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// What one JOBS line asks for.
struct Job {
  int line = 0;
  int index = 0; // position among all jobs (for the profile and MPI dealing)
  std::string input, psf, output, model;
  std::optional<std::string> wavelength;
  std::optional<int> specmin, nspec;
  PatchParams params;
  bool barycentric = false; // --barycentric-correction (desi_proc passes it for science frames)
  bool scores = true;       // --no-scores
};

// Splits a line into words: whitespace separates, '...' and "..." quote.
std::vector<std::string> splitWords(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;
  char quote = 0;
  for (char c : line) {
    if (quote) {
      if (c == quote)
        quote = 0;
      else
        cur += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      have = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (have || !cur.empty()) out.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += c;
    }
  }
  if (quote) throw InputError(std::string("unterminated ") + quote + " quote");
  if (have || !cur.empty()) out.push_back(cur);
  return out;
}

std::vector<Job> readJobs(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("JOBS file '" + path + "' cannot be read");
  std::vector<Job> jobs;
  std::string text;
  int lineNo = 0;
  std::set<std::string> outputs;
  while (std::getline(in, text)) {
    ++lineNo;
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos || text[first] == '#') continue;
    try {
      std::vector<std::string> words = splitWords(text);
      // The program name may lead the line, as in a desi_proc log.
      if (!words.empty() && (fs::path(words[0]).filename() == "desi_extract_spectra" ||
                             fs::path(words[0]).filename() == "spexlab-cli"))
        words.erase(words.begin());
      if (!words.empty() && words[0] == "extract") words.erase(words.begin());
      Job j;
      std::string wavelength;
      int specmin = 0, nspec = 0;
      double psferr = 0.01;
      bool decorrelate = false;
      PatchParams& p = j.params;
      CLI::App app("one JOBS line", "JOBS line");
      setupApp(app);
      app.add_option("-i,--input", j.input)->required();
      app.add_option("-p,--psf", j.psf)->required();
      app.add_option("-o,--output", j.output)->required();
      app.add_option("-m,--model", j.model);
      app.add_option("-w,--wavelength", wavelength);
      auto* smin = app.add_option("-s,--specmin", specmin);
      auto* nsp = app.add_option("-n,--nspec", nspec);
      app.add_option("-r,--regularize", p.regularize);
      app.add_option("--bundlesize", p.bundlesize);
      app.add_option("--nsubbundles", p.nsubbundles);
      app.add_option("--nwavestep", p.nwavestep);
      auto* perr = app.add_option("--psferr", psferr);
      app.add_option("--pixpad-frac", p.pixpadFrac);
      app.add_option("--wavepad-frac", p.wavepadFrac);
      app.add_flag("--decorrelate-fibers", decorrelate);
      bool noScores = false;
      app.add_flag("--barycentric-correction", j.barycentric);
      app.add_flag("--no-scores", noScores);
      // Accepted as desi_extract_spectra does: SpexLab's engine always runs.
      bool ignored = false;
      app.add_flag("--gpu-specter,--use-specter,--mpi,--gpu,--use-gpu,--no-gpu", ignored);
      if (!parseArgs(app, words)) throw InputError("--help is not a job");
      j.line = lineNo;
      j.index = int(jobs.size());
      if (!wavelength.empty()) {
        parseWaveOption(wavelength); // checked now, used when the PSF is read
        j.wavelength = wavelength;
      }
      if (smin->count()) j.specmin = specmin;
      if (nsp->count()) j.nspec = nspec;
      if (perr->count()) p.psferr = psferr;
      if (decorrelate) p.mode = Decorrelation::Noise;
      j.scores = !noScores;
      p.validate();
      if (!outputs.insert(fs::weakly_canonical(j.output).string()).second)
        throw InputError("output '" + j.output + "' is written by an earlier line too");
      jobs.push_back(std::move(j));
    } catch (const SpexError& e) {
      throw InputError("JOBS '" + path + "' line " + std::to_string(lineNo) + ": " + e.what());
    }
  }
  if (jobs.empty()) throw InputError("JOBS '" + path + "' holds no job");
  return jobs;
}

// One frame on its way through the pipeline.
struct Frame {
  const Job* job = nullptr;
  std::unique_ptr<GaussHermitePsf> psf;
  std::unique_ptr<Image> image;
  ExtractionRequest request;
  ExtractionResult result;
  double heliocor = 1.0;
  std::string error; // set by the stage that failed; later stages pass it on
  int64_t read0 = 0, read1 = 0, extract0 = 0, extract1 = 0, write0 = 0, write1 = 0, waitNs = 0;
};

// A hand-over point holding at most one frame; close() ends the stream.
class Slot {
public:
  void put(std::unique_ptr<Frame> f) {
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return !m_frame; });
    m_frame = std::move(f);
    m_cv.notify_all();
  }
  std::unique_ptr<Frame> take() { // nullptr once closed and empty
    std::unique_lock lock(m_mutex);
    m_cv.wait(lock, [&] { return m_frame || m_closed; });
    std::unique_ptr<Frame> f = std::move(m_frame);
    m_cv.notify_all();
    return f;
  }
  void close() {
    std::lock_guard lock(m_mutex);
    m_closed = true;
    m_cv.notify_all();
  }

private:
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::unique_ptr<Frame> m_frame;
  bool m_closed = false;
};

WaveGrid waveOf(const Job& j, const GaussHermitePsf& psf) {
  if (j.wavelength) return parseWaveOption(*j.wavelength);
  return defaultFrameGrid(psf); // extract's default
}

std::string jobName(const Job& j) { return fs::path(j.output).filename().string(); }

} // namespace

int cmdBatch(const std::vector<std::string>& args) {
  CLI::App app("Extract many frames in one process, reading and writing overlapped.",
               "spexlab-cli batch");
  setupApp(app);
  std::string jobsPath, engineKind = "auto", gpus, gpuMemory, profilePath;
  int threads = 0;
  bool useMpi = false, quiet = false, profileKernels = false;
  app.add_option("JOBS", jobsPath, "one desi_extract_spectra argument list per line")->required();
  app.add_option("--engine", engineKind, "cpu | cuda | auto");
  app.add_option("--gpus", gpus, "GPU devices, e.g. 0,1 (with --mpi: local rank mod GPUs)");
  app.add_option("--gpu-memory", gpuMemory, "CUDA device-memory budget: a size (6G) or a fraction (0.2)");
  app.add_option("-t,--threads", threads, "CPU threads per process (0: the CPUs given)");
  app.add_option("--profile", profilePath, "Chrome trace of the batch (read/extract/write lanes)");
  app.add_flag("--profile-kernels", profileKernels,
               "CUDA engine: record every kernel and copy (CUPTI) into the --profile trace under its "
               "frame and phase, and print a per-kernel table (slower; docs/profiling.md)");
  app.add_flag("--mpi", useMpi, "deal the jobs to MPI ranks");
  app.add_flag("--quiet", quiet, "no summary table");
  if (!parseArgs(app, args)) return 0;
  const std::vector<Job> all = readJobs(jobsPath);
  MpiJob mpi(useMpi, "batch");
  if (threads < 0) throw InputError("--threads must be >= 0");
  std::vector<const Job*> mine;
  for (const Job& j : all)
    if (j.index % mpi.size() == mpi.rank()) mine.push_back(&j);

  EngineChoice choice = makeEngine(engineKind, engineOptionsFrom(gpus, gpuMemory, engineKind, mpi));
  if (!choice.note.empty()) std::fprintf(stderr, "spexlab-cli batch: %s\n", choice.note.c_str());
  Engine& engine = *choice.engine;
  if (profileKernels && engine.name() == "cpu")
    // Before any job runs: a night's batch should not find out at the end that it
    // recorded nothing.
  {
    std::string why = choice.note; // "no usable GPU (...); using the CPU engine" when auto fell back
    if (const auto cut = why.find("; using the CPU engine"); cut != std::string::npos) why.resize(cut);
    throw InputError("--profile-kernels needs the CUDA engine (a GPU): " +
                     (why.empty() ? std::string("the CPU engine was asked for (--engine cpu)") : why) +
                     "; the CPU engine runs no GPU kernels, so no job was run");
  }

  const auto origin = Clock::now();
  auto now = [&] { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - origin).count(); };
  Slot toExtract, toWrite;
  std::vector<std::unique_ptr<Frame>> done;
  std::mutex doneMutex;
  // The result of the frame written last, handed to the next extraction: the CUDA
  // engine writes a result of the frame's shape in place (Engine::extractInto, docs/
  // design.md "Kept results"), so a frame does not allocate and page in ~150 MB of host
  // arrays again. As many results are alive as before (the one being extracted, the
  // one being written). Not for the CPU engine: it reuses only the result object it
  // filled last, and its allocation is a small part of its frame.
  const bool recycle = engine.name() != "cpu";
  std::mutex spareMutex;
  ExtractionResult spare;

  std::thread reader([&] {
    for (const Job* j : mine) {
      auto f = std::make_unique<Frame>();
      f->job = j;
      f->read0 = now();
      try {
        f->psf = std::make_unique<GaussHermitePsf>(readPsf(j->psf));
        f->image = std::make_unique<Image>(readPreproc(j->input));
        ExtractionRequest& r = f->request;
        r.image = f->image.get();
        r.psf = f->psf.get();
        r.wave = waveOf(*j, *f->psf);
        if (j->barycentric) {
          // As extract does: the frame keeps the requested grid, the engine runs on it
          // divided by the factor (preproc header, else the FIBERMAP's).
          const BaryInputs b = baryInputsFromHeaders(
              f->image->header, f->image->fibermap.sourceFile.empty() ? nullptr : &f->image->fibermap.header);
          f->heliocor = barycentricFactor(b.raDeg, b.decDeg, b.mjdMid);
          r.wave = barycentricExtractionGrid(r.wave, f->heliocor);
        }
        r.fiberMin = j->specmin.value_or(0);
        r.nFiber = j->nspec.value_or(f->psf->nfiber - r.fiberMin);
        r.params = j->params;
        r.model = !j->model.empty();
        r.threads = threads;
        r.profileKernels = profileKernels;
      } catch (const std::exception& e) {
        f->error = std::string("read: ") + e.what();
        f->image.reset();
        f->psf.reset();
      }
      f->read1 = now();
      toExtract.put(std::move(f)); // waits while a frame is already read ahead
    }
    toExtract.close();
  });

  std::thread writer([&] {
    while (std::unique_ptr<Frame> f = toWrite.take()) {
      f->write0 = now();
      if (f->error.empty()) {
        try {
          FrameMeta meta;
          meta.inputImage = f->job->input;
          meta.inputPsf = f->job->psf;
          meta.heliocor = f->heliocor;
          meta.scores = f->job->scores;
          // Frame and model together, as extract writes them (fits_file.h).
          OutputTransaction outputs;
          if (f->result.model) writeModel(f->job->model, *f->result.model, *f->image, f->result, meta);
          writeFrame(f->job->output, f->result, *f->image, meta);
          outputs.commit();
        } catch (const std::exception& e) {
          f->error = std::string("write: ") + e.what();
        }
      }
      f->write1 = now();
      // Keep only the timings: the frame's arrays go now (bounded memory), or its
      // result to the next extraction (recycle).
      f->image.reset();
      f->psf.reset();
      if (recycle && f->error.empty()) {
        std::lock_guard lock(spareMutex);
        spare = std::move(f->result);
      }
      f->result = ExtractionResult{};
      std::lock_guard lock(doneMutex);
      done.push_back(std::move(f));
    }
  });

  Profile batchProfile;
  // Lanes in this order: read, extract, the engine's lanes (its main thread, CUDA
  // streams) as the first frame brings them, write.
  const int readLane = batchProfile.laneIndex("read"), extractLane = batchProfile.laneIndex("extract");
  {
    int64_t idleFrom = now();
    while (std::unique_ptr<Frame> f = toExtract.take()) {
      f->waitNs = now() - idleFrom;
      f->extract0 = now();
      if (f->error.empty()) {
        try {
          ProgressSink progress;
          CancelToken cancel;
          if (recycle) {
            ExtractionResult r;
            {
              std::lock_guard lock(spareMutex);
              r = std::move(spare);
              spare = ExtractionResult{};
            }
            engine.extractInto(f->request, r, progress, cancel);
            f->result = std::move(r);
          } else {
            f->result = engine.extract(f->request, progress, cancel);
          }
          // The engine's own phases sit under the frame's extract range.
          batchProfile.append(f->result.profile, f->extract0);
        } catch (const std::exception& e) {
          f->error = std::string("extract: ") + e.what();
        }
      }
      f->extract1 = now();
      if (!f->error.empty())
        std::fprintf(stderr, "spexlab-cli batch: job '%s' (JOBS line %d) failed: %s\n",
                     jobName(*f->job).c_str(), f->job->line, f->error.c_str());
      toWrite.put(std::move(f)); // waits while the writer still holds the last one
      idleFrom = now();
    }
    toWrite.close();
  }
  reader.join();
  writer.join();
  const double wallS = now() * 1e-9;

  std::sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a->job->index < b->job->index; });
  const int writeLane = batchProfile.laneIndex("write");
  int failed = 0;
  for (const auto& f : done) {
    const int id = f->job->index;
    batchProfile.ranges.push_back({"read", f->read0, f->read1, readLane, 0, id});
    batchProfile.ranges.push_back({"extract", f->extract0, f->extract1, extractLane, 0, id});
    batchProfile.ranges.push_back({"write", f->write0, f->write1, writeLane, 0, id});
    if (!f->error.empty()) {
      ++failed;
      if (f->error.rfind("write: ", 0) == 0)
        std::fprintf(stderr, "spexlab-cli batch: job '%s' (JOBS line %d) failed: %s\n",
                     jobName(*f->job).c_str(), f->job->line, f->error.c_str());
    }
  }
  batchProfile.wallNs = now();

  std::ostringstream table;
  char line[512];
  const std::string who = mpi.active() ? "rank " + std::to_string(mpi.rank()) + ": " : "";
  std::snprintf(line, sizeof line, "%s%-32s %8s %8s %8s %8s  %s\n", who.c_str(), "frame", "read s",
                "extract s", "write s", "wait s", "status");
  table << line;
  double sumRead = 0, sumExtract = 0, sumWrite = 0, sumWait = 0;
  for (const auto& f : done) {
    const double r = (f->read1 - f->read0) * 1e-9, e = (f->extract1 - f->extract0) * 1e-9,
                 w = (f->write1 - f->write0) * 1e-9, wt = f->waitNs * 1e-9;
    sumRead += r;
    sumExtract += e;
    sumWrite += w;
    sumWait += wt;
    std::snprintf(line, sizeof line, "%s%-32s %8.3f %8.3f %8.3f %8.3f  %s\n", who.c_str(),
                  jobName(*f->job).c_str(), r, e, w, wt, f->error.empty() ? "ok" : f->error.c_str());
    table << line;
  }
  const int ok = int(done.size()) - failed;
  std::snprintf(line, sizeof line, "%s%-32s %8.3f %8.3f %8.3f %8.3f\n", who.c_str(), "total", sumRead,
                sumExtract, sumWrite, sumWait);
  table << line;
  std::snprintf(line, sizeof line,
                "%s%d of %zu frames ok on %s in %.2f s wall: %.1f s/frame, %.0f frames/hour "
                "(series would take %.2f s; overlap saved %.0f%%)\n",
                who.c_str(), ok, done.size(), engine.name().c_str(), wallS,
                done.empty() ? 0.0 : wallS / double(done.size()),
                wallS > 0 ? 3600.0 * ok / wallS : 0.0, sumRead + sumExtract + sumWrite,
                sumRead + sumExtract + sumWrite > 0
                    ? 100.0 * (1 - wallS / (sumRead + sumExtract + sumWrite))
                    : 0.0);
  table << line;
  for (const std::size_t peak : enginePeakDeviceBytes(engine)) {
    std::snprintf(line, sizeof line, "%speak device memory: %.2f GiB\n", who.c_str(),
                  double(peak) / double(1ull << 30));
    table << line;
  }
  if (!quiet) std::printf("%s", table.str().c_str());
  if (!quiet && profileKernels) std::printf("\n%skernel profile (all frames):\n%s", who.c_str(), kernelTable(batchProfile).c_str());
  std::fflush(stdout);

  if (!profilePath.empty()) {
    std::string path = profilePath;
    if (mpi.active() && mpi.size() > 1) {
      const auto dot = path.rfind(".json");
      path = (dot == std::string::npos ? path : path.substr(0, dot)) + ".rank" +
             std::to_string(mpi.rank()) + ".json";
    }
    writeChromeTraceFile(batchProfile, path);
  }
  const long failedAll = mpi.sum(failed);
  if (mpi.root() && mpi.active() && mpi.size() > 1 && !quiet)
    std::printf("all ranks: %ld of %zu jobs failed\n", failedAll, all.size());
  return failedAll == 0 ? 0 : 1;
}

} // namespace spex::cli
