#include "extraction_job.h"

#include "core/extract/compare.h"

#include "app/engine_factory.h"
#include "core/errors.h"

#include <QMetaObject>
#include <QtConcurrent/QtConcurrentRun>

namespace spex {

class ExtractionJob::Sink : public ProgressSink {
public:
  Sink(ExtractionJob* job, QString engine) : m_job(job), m_engine(std::move(engine)) {}
  void patchDone(int patch, int done, int total) override { m_job->enqueue(m_engine, patch, done, total); }

private:
  ExtractionJob* m_job;
  QString m_engine;
};

ExtractionJob::ExtractionJob(std::shared_ptr<EngineRegistry> engines, QObject* parent)
    : QObject(parent), m_engines(engines ? std::move(engines) : std::make_shared<EngineRegistry>()) {
  m_thread.setMaxThreadCount(1);
}

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
  m_client = spec.client;
  m_cancel.reset();
  m_future = QtConcurrent::run(&m_thread, [this, spec = std::move(spec)]() mutable { run(std::move(spec)); });
  return true;
}

void ExtractionJob::cancel() {
  if (m_running) m_cancel.cancel();
}

void ExtractionJob::waitForWorker() { m_future.waitForFinished(); }

void ExtractionJob::enqueue(const QString& engine, int patch, int done, int total) {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_engine = engine;
    m_queue.push_back(patch);
    m_done = done;
    m_total = total;
  }
  // At most one drain in flight: it takes everything queued by the time it runs.
  if (!m_posted.exchange(true)) post([this] { drain(); });
}

std::shared_ptr<const ExtractionResult> ExtractionJob::runValues(const QString& engine) const {
  const auto it = m_runValues.find(engine);
  return it == m_runValues.end() ? nullptr : it->second;
}

void ExtractionJob::drain() {
  QVector<int> batch;
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
  emit patchesDone(engine, batch, done, total);
}

void ExtractionJob::run(JobSpec spec) {
  bool cancelled = false;
  if (spec.task) {
    try {
      cancelled = spec.task(*m_engines, m_cancel);
    } catch (const CancelledError&) {
      cancelled = true;
    } catch (const std::exception& e) {
      const QString name = spec.client, msg = QString::fromStdString(e.what());
      post([this, name, msg] { emit engineFailed(name, msg); });
    }
    post([this, cancelled] {
      drain();
      m_running = false;
      emit finished(cancelled);
    });
    return;
  }
  for (const JobSpec::Target& target : spec.targets) {
    const QString name = target.engine;
    if (m_cancel.cancelled()) {
      cancelled = true;
      break;
    }
    try {
      EngineRegistry::Lease engine = m_engines->lease(name.toStdString()); // warm between jobs
      ExtractionRequest req;
      req.image = spec.image.get();
      req.psf = spec.psf.get();
      req.plan = spec.plan;
      req.wave = spec.plan->wave;
      req.fiberMin = spec.plan->fiberMin;
      req.nFiber = spec.plan->nFiber;
      req.params = spec.plan->params;
      req.patches = spec.patches;
      req.model = spec.model;
      req.threads = spec.threads;
      req.profileKernels = spec.profileKernels;
      req.accumulate = true;
      const int total = spec.patches ? int(spec.patches->size()) : int(spec.plan->patches.size());
      post([this, name, total] { emit engineStarted(name, total); });
      Sink sink(this, name);
      engine->extractInto(req, *target.result, sink, m_cancel);
      if (target.result->cancelled) cancelled = true;
      // The result is final and no one writes it until the next job: copy the run's
      // own bins here rather than on the GUI thread (a whole frame: ~150 MB, ~140 ms).
      std::shared_ptr<const ExtractionResult> values;
      if (spec.keepRunValues && spec.plan) values = runOwnBins(*target.result, *spec.plan);
      post([this, name, values] {
        drain(); // patches posted before this still belong before the final result
        m_runValues[name] = values;
        emit engineFinished(name);
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
