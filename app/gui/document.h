// Document: what the workbench has open. The PSF, the preproc image, the truth of a
// simulation, the run settings with the patch plan they give, and the results per
// source ("cpu", "cuda", "frame"). It is the app's data layer: views get const
// pointers from it, jobs fill it, and it says what changed with signals.
// Loaders throw SpexError and leave the document as it was when they fail.
#pragma once

#include "extraction_job.h"

#include "core/io/frame_io.h"
#include "core/extract/spectrum_source.h"
#include "core/plan/run_settings.h"

#include <QMap>
#include <QSet>
#include <QObject>
#include <QString>

#include <memory>

namespace spex {

struct Simulation;

class Document : public QObject {
  Q_OBJECT
public:
  explicit Document(QObject* parent = nullptr);

  // --- loading (all throw SpexError on bad input and change nothing then)
  void loadDemo(int nFiber);
  void loadSimulation(GaussHermitePsf psf, Simulation sim, const QString& title);
  void loadInputs(const QString& preproc, const QString& psf, const QString& truth = {});
  void loadTruth(const QString& path);
  void loadFrame(const QString& path); // needs a PSF open (for the CCD geometry)

  std::shared_ptr<const Image> image() const { return m_image; }
  std::shared_ptr<const GaussHermitePsf> psf() const { return m_psf; }
  std::shared_ptr<const Truth> truth() const { return m_truth; }
  QString title() const { return m_title; }
  QString preprocPath() const { return m_preprocPath; }
  QString psfPath() const { return m_psfPath; }

  // --- settings and plan
  RunSettings settings() const { return m_settings; }
  void setSettings(const RunSettings& s); // rebuilds the plan (cheap)
  std::shared_ptr<const PatchPlan> plan() const { return m_plan; }
  QString planError() const { return m_planError; }
  QString planSummary() const;

  // --- results
  // One result per source ("cpu", "cuda": what that engine extracted so far, each run
  // filling its patches in place; "frame": an opened frame). While a job runs an
  // engine writes into its result from a worker thread: views read the bins of the
  // patches reported done (patchesDone) and the shape; the rest (diagnostics, profile,
  // model) belongs to the engine until engineFinished.
  QVector<SpectrumSource> sources() const; // "cpu", "cuda", "frame" when present
  std::shared_ptr<const ExtractionResult> result(const QString& name) const;
  std::vector<std::shared_ptr<const ExtractionResult>> results() const;
  // The newest result with a model image, for the residual view, and that image (the
  // result's own model, updated in place inside the boxes of the patches each run
  // redoes; see modelChange()).
  QString modelSource() const;
  std::shared_ptr<const Array2D<double>> model(const QString& name) const;
  void clearResults();

  // Results are filled in place, so a view cannot tell by pointer that one changed.
  // Each result has a revision that every change to it raises, and modelRevision()
  // rises whenever a model image changes, appears or goes (run, clear, new inputs):
  // views compare these, never the pointers alone.
  quint64 revision(const QString& name) const { return m_revisions.value(name, 0); }
  quint64 modelRevision() const { return m_modelRevision; }
  // What the last model change did: from revision `from` to `to`, only the pixels in
  // `boxes` (CCD x, y) changed. A view showing `from` may update just those; any other
  // view recomputes everything. `all` when the change was not confined to boxes.
  struct ModelChange {
    quint64 from = 0, to = 0;
    bool all = true;
    std::vector<PixelBox> boxes;
  };
  const ModelChange& modelChange() const { return m_modelChange; }

  // A run of `engine` over the current plan starts: the result it fills. The kept one
  // when it has the plan's shape (the run adds to it), else a new one that views see
  // from its first finished patch (the engine allocates its arrays on its thread).
  std::shared_ptr<ExtractionResult> beginRun(const QString& engine);
  void patchesDone(const QString& engine, const QVector<int>& patches); // live, per batch
  void finishRun(const QString& engine);
  // The job is over: results that never got a finished patch are dropped.
  void endRuns();
  // What a run leaves in the run history: its shape, parameters, diagnostics (of its
  // own patches) and profile, without the arrays (they go on changing in place).
  std::shared_ptr<const ExtractionResult> runSummary(const QString& engine) const;
  // The numbers of the engine's last run alone, for comparisons: flux, ivar, mask,
  // resolution and covered cropped to the spectra and bins its patches kept (the
  // bounding box; bins of earlier runs inside it are uncovered, ivar 0). Small for a
  // selection, one frame's worth for a whole-frame run; null before any run.
  std::shared_ptr<const ExtractionResult> runValues(const QString& engine) const;

signals:
  void inputsChanged();  // new image/PSF: everything resets
  void truthChanged();
  void planChanged();
  void resultsChanged(); // emitted per batch; the window throttles redraws

private:
  void adoptInputs(std::shared_ptr<Image> image, std::shared_ptr<GaussHermitePsf> psf,
                   std::shared_ptr<Truth> truth, const QString& title);
  void rebuildPlan();
  void touch(const QString& name) { m_revisions[name] = ++m_revisionCounter; }
  void touchModel(); // a change that is not confined to boxes

  std::shared_ptr<const Image> m_image;
  std::shared_ptr<const GaussHermitePsf> m_psf;
  std::shared_ptr<const Truth> m_truth;
  QString m_title, m_preprocPath, m_psfPath;
  RunSettings m_settings;
  std::shared_ptr<const PatchPlan> m_plan;
  QString m_planError;
  QMap<QString, std::shared_ptr<ExtractionResult>> m_results;
  QMap<QString, std::shared_ptr<ExtractionResult>> m_pending; // new results not shown yet
  QSet<QString> m_running; // engines filling their result now
  QString m_lastModel;
  ModelChange m_modelChange;
  QMap<QString, quint64> m_revisions;
  quint64 m_revisionCounter = 0;
  quint64 m_modelRevision = 0;
};

} // namespace spex
