#include "extraction_job.h"

#include "widgets/background.h"

#include "app/engine_factory.h"
#include "core/errors.h"

#include <QMetaObject>
#include <QtConcurrent/QtConcurrentRun>

namespace spex {

class ExtractionJob::Sink : public ProgressSink {
public:
  Sink(ExtractionJob* job, QString engine) : m_job(job), m_engine(std::move(engine)) {}
  void patchDone(const PatchOutput& out, int done, int total) override {
    PatchUpdate u;
    u.engine = m_engine;
    if (out.patch) u.patch = *out.patch;
    u.flux = out.flux;
    u.ivar = out.ivar;
    u.diagnostics = out.diagnostics;
    m_job->enqueue(std::move(u), done, total);
  }

private:
  ExtractionJob* m_job;
  QString m_engine;
};

ExtractionJob::ExtractionJob(QObject* parent) : QObject(parent) {}

ExtractionJob::~ExtractionJob() {
  m_cancel.cancel();
  m_future.waitForFinished();
}

template <class F>
void ExtractionJob::post(F&& f) {
  // Queued onto the job's (GUI) thread; dropped if the job is destroyed first.
  QMetaObject::invokeMethod(this, std::forward<F>(f), Qt::QueuedConnection);
}

bool ExtractionJob::start(JobSpec spec) {
  if (m_running) return false;
  m_running = true;
  m_cancel.reset();
  m_future = QtConcurrent::run(backgroundPool(), [this, spec = std::move(spec)]() mutable { run(std::move(spec)); });
  return true;
}

void ExtractionJob::cancel() {
  if (m_running) m_cancel.cancel();
}

void ExtractionJob::waitForWorker() { m_future.waitForFinished(); }

void ExtractionJob::enqueue(PatchUpdate&& u, int done, int total) {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_engine = u.engine;
    m_queue.push_back(std::move(u));
    m_done = done;
    m_total = total;
  }
  // At most one drain in flight: it takes everything queued by the time it runs.
  if (!m_posted.exchange(true)) post([this] { drain(); });
}

void ExtractionJob::drain() {
  QVector<PatchUpdate> batch;
  QString engine;
  int done = 0, total = 0;
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_posted = false;
    batch.swap(m_queue);
    engine = m_engine;
    done = m_done;
    total = m_total;
  }
  if (batch.isEmpty()) return;
  emit patchesDone(batch);
  emit progress(engine, done, total);
}

void ExtractionJob::run(JobSpec spec) {
  bool cancelled = false;
  for (const QString& name : spec.engines) {
    if (m_cancel.cancelled()) {
      cancelled = true;
      break;
    }
    try {
      std::unique_ptr<Engine>& engine = m_engines[name];
      if (!engine) engine = makeEngine(name.toStdString()).engine; // warm from now on
      ExtractionRequest req;
      req.image = spec.image.get();
      req.psf = spec.psf.get();
      req.wave = spec.wave;
      req.fiberMin = spec.fiberMin;
      req.nFiber = spec.nFiber;
      req.params = spec.params;
      req.patches = spec.patches;
      req.model = spec.model;
      req.threads = spec.threads;
      req.profileKernels = spec.profileKernels;
      const PatchPlan plan = makePatchPlan(*spec.psf, spec.wave, spec.fiberMin, spec.nFiber, spec.params);
      const int total = spec.patches ? int(spec.patches->size()) : int(plan.patches.size());
      if (spec.freshResults.contains(name)) {
        auto live = std::make_shared<ExtractionResult>();
        live->engine = name.toStdString();
        live->allocate(plan, spec.ndiag, false, 0, 0);
        post([this, name, live] { emit liveResultReady(name, live); });
      }
      post([this, name, total] { emit engineStarted(name, total); });
      Sink sink(this, name);
      auto result = std::make_shared<ExtractionResult>(engine->extract(req, sink, m_cancel));
      if (result->cancelled) cancelled = true;
      post([this, name, result] {
        drain(); // patches posted before this still belong before the final result
        emit engineFinished(name, result);
      });
    } catch (const CancelledError&) {
      cancelled = true;
    } catch (const std::exception& e) {
      const QString msg = QString::fromStdString(e.what());
      post([this, name, msg] {
        drain();
        emit engineFailed(name, msg);
      });
    }
    if (cancelled) break;
  }
  post([this, cancelled] {
    drain();
    m_running = false;
    emit finished(cancelled);
  });
}

} // namespace spex
