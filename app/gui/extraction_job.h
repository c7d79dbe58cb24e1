// ExtractionJob: runs one or more engines on a worker thread so the GUI thread never
// waits (DESIGN.md "Threads", docs/gui.md "Architecture"). Each engine fills a result
// the caller owns (the Document's, for that engine) in place through
// Engine::extractInto; finished patches are reported as plan indices, queued and
// handed to the GUI thread in batches through one queued call at a time, so a flood
// of small patches costs one event per batch and no copies. Engines stay warm between
// jobs (the EngineRegistry the job is given). It is the app's one job runner: the
// Document's extractions, the CPU-vs-CUDA comparison and the patch-size sweep
// (JobSpec::client, JobSpec::task) all run here, one at a time.
#pragma once

#include "core/extract/engine.h"
#include "core/image.h"
#include "core/psf/gauss_hermite_psf.h"

#include <QFuture>
#include <QObject>
#include <QStringList>
#include <QThreadPool>
#include <QVector>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace spex {

class EngineRegistry;

// What one job does: the inputs, the plan (built once, by the Document), the patches
// (nullopt: all) and, per engine in order, the result it fills.
struct JobSpec {
  std::shared_ptr<const Image> image;
  std::shared_ptr<const GaussHermitePsf> psf;
  std::shared_ptr<const PatchPlan> plan;
  std::optional<std::vector<int>> patches;
  int threads = 0;
  bool model = true; // the residual view needs it
  bool profileKernels = false; // ExtractionRequest::profileKernels (CUDA runs)
  struct Target {
    QString engine; // "cpu", "cuda"
    std::shared_ptr<ExtractionResult> result;
  };
  std::vector<Target> targets;
  // Keep each target's own numbers (runOwnBins: the bins this run extracted, a copy)
  // for the run history: made on the worker once the engine is done, so the GUI thread
  // never copies a frame (ExtractionJob::runValues).
  bool keepRunValues = false;
  // Who asked: empty for the Document's own extraction (its results, its live views);
  // another name (the CPU-vs-CUDA comparison's "compare") for a client that owns its
  // targets' results. Every listener of the job's signals checks ExtractionJob::client().
  QString client;
  // A job of another shape (the sweep): when set, the worker runs it instead of the
  // targets, with the job's EngineRegistry (lease engines from it: the warm ones) and
  // its cancel token; it returns true when it stopped because it was cancelled. An
  // exception it throws is reported as engineFailed(client, message).
  std::function<bool(EngineRegistry&, const CancelToken&)> task;
};

class ExtractionJob : public QObject {
  Q_OBJECT
public:
  // Engines come from `engines` (kept warm between jobs); a registry of its own when null.
  explicit ExtractionJob(std::shared_ptr<EngineRegistry> engines = nullptr, QObject* parent = nullptr);
  std::shared_ptr<EngineRegistry> engines() const { return m_engines; }
  ~ExtractionJob() override; // cancels and waits: engines hold pointers into the spec

  // False (and nothing started) when a job is already running.
  bool start(JobSpec spec);
  void cancel();
  bool isRunning() const { return m_running; }
  bool isCancelling() const { return m_cancel.cancelled(); }
  // The client of the running job, or of the last one once it finished (JobSpec::client):
  // the signals of a job are handled before the next job can start.
  QString client() const { return m_client; }
  // The own numbers of the engine's last finished run of a job with keepRunValues
  // (null otherwise): valid from its engineFinished on.
  std::shared_ptr<const ExtractionResult> runValues(const QString& engine) const;
  // For tests and shutdown: blocks until the worker is done (events still need
  // processing for the results to arrive).
  void waitForWorker();

signals:
  void engineStarted(const QString& engine, int totalPatches);
  // Patches (plan indices) whose bins in the engine's result are final now.
  void patchesDone(const QString& engine, const QVector<int>& patches, int done, int total);
  // The engine is done with its result: shape, diagnostics, profile and model are final.
  void engineFinished(const QString& engine);
  void engineFailed(const QString& engine, const QString& message);
  void finished(bool cancelled);

private:
  class Sink;
  void run(JobSpec spec);
  void enqueue(const QString& engine, int patch, int done, int total);
  void drain();
  template <class F>
  void post(F&& f);

  std::shared_ptr<EngineRegistry> m_engines;
  QThreadPool m_thread; // one worker: jobs run one at a time
  QFuture<void> m_future;
  CancelToken m_cancel;
  bool m_running = false;
  QString m_client;
  std::mutex m_mutex;
  QString m_engine;          // the engine whose patches are queued
  QVector<int> m_queue;      // its finished patches not yet handed over
  int m_done = 0, m_total = 0;
  std::atomic<bool> m_posted{false};
  std::map<QString, std::shared_ptr<const ExtractionResult>> m_runValues; // GUI thread
};

} // namespace spex
