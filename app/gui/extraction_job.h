// ExtractionJob: runs one or more engines on a worker thread so the GUI thread never
// waits (DESIGN.md "Threads"). Engines report finished patches from their own worker
// threads; the job queues them and hands them to the GUI thread in batches through
// one queued call at a time, so a flood of small patches costs one event per batch.
#pragma once

#include "core/extract/engine.h"
#include "core/image.h"
#include "core/psf/gauss_hermite_psf.h"

#include <QFuture>
#include <QObject>
#include <QStringList>
#include <QVector>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace spex {

// One finished patch, copied out of the engine (PatchOutput points into the
// engine's plan, which is gone by the time the GUI looks).
struct PatchUpdate {
  QString engine;
  Patch patch;
  Array2D<double> flux; // [patch.nfiber, patch.nwave], per Angstrom
  Array2D<double> ivar;
  PatchDiagnostics diagnostics;
};

struct JobSpec {
  std::shared_ptr<const Image> image;
  std::shared_ptr<const GaussHermitePsf> psf;
  WaveGrid wave;
  int fiberMin = 0;
  int nFiber = 0;
  PatchParams params;
  std::optional<std::vector<int>> patches; // nullopt: the whole plan
  int threads = 0;
  bool model = true;   // the residual view needs it
  QStringList engines; // "cpu", "cuda", run one after the other
  // Engines whose live result (what the views show while the job runs) is new: the
  // worker allocates it (over a hundred MB for a whole frame, too slow for the GUI
  // thread) and hands it over with liveResultReady before that engine's first patch.
  QStringList freshResults;
  int ndiag = 0; // the live result's resolution diagonals
  bool profileKernels = false; // ExtractionRequest::profileKernels (CUDA runs)
};

class ExtractionJob : public QObject {
  Q_OBJECT
public:
  explicit ExtractionJob(QObject* parent = nullptr);
  ~ExtractionJob() override; // cancels and waits: engines hold pointers into the spec

  // False (and nothing started) when a job is already running.
  bool start(JobSpec spec);
  void cancel();
  bool isRunning() const { return m_running; }
  bool isCancelling() const { return m_cancel.cancelled(); }
  // For tests and shutdown: blocks until the worker is done (events still need
  // processing for the results to arrive).
  void waitForWorker();

signals:
  void liveResultReady(const QString& engine, std::shared_ptr<spex::ExtractionResult> result);
  void engineStarted(const QString& engine, int totalPatches);
  void patchesDone(const QVector<spex::PatchUpdate>& updates);
  void progress(const QString& engine, int done, int total);
  void engineFinished(const QString& engine, std::shared_ptr<spex::ExtractionResult> result);
  void engineFailed(const QString& engine, const QString& message);
  void finished(bool cancelled);

private:
  class Sink;
  void run(JobSpec spec);
  void enqueue(PatchUpdate&& u, int done, int total);
  void drain();
  template <class F>
  void post(F&& f);

  QFuture<void> m_future;
  CancelToken m_cancel;
  bool m_running = false;
  // Engines kept warm between requests (CPU: plan and per-thread solver workspaces;
  // CUDA: context, handles and device memory within its budget), made on first use
  // by name ("cpu", "cuda"). Only the worker touches them, one run at a time.
  std::map<QString, std::unique_ptr<Engine>> m_engines;
  std::mutex m_mutex;
  QVector<PatchUpdate> m_queue;
  QString m_engine;
  int m_done = 0, m_total = 0;
  std::atomic<bool> m_posted{false};
};

} // namespace spex
