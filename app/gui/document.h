// Document: what the workbench has open. The PSF, the preproc image, the truth of a
// simulation, the run settings with the patch plan they give, and the results per
// source ("cpu", "cuda", "frame"). It is the app's data layer: views get const
// pointers from it, jobs fill it, and it says what changed with signals.
// Loaders throw SpexError and leave the document as it was when they fail.
#pragma once

#include "extraction_job.h"

#include "core/io/frame_io.h"
#include "widgets/parameter_panel.h"
#include "widgets/spectrum_source.h"

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
  QVector<SpectrumSource> sources() const; // "cpu", "cuda", "frame" when present
  std::shared_ptr<const ExtractionResult> result(const QString& name) const;
  std::vector<std::shared_ptr<const ExtractionResult>> results() const;
  // The newest result with a model image, for the residual view, and that image. A
  // model is never changed once handed out: a merge makes a new one (a view's worker
  // may still read the old one), so the pointer and modelRevision() both move.
  QString modelSource() const;
  std::shared_ptr<const Array2D<double>> model(const QString& name) const { return m_models.value(name); }
  void clearResults();

  // Results are filled and merged in place, so a view cannot tell by pointer that one
  // changed. Each result has a revision that every change to it raises, and
  // modelRevision() rises whenever a model image changes, appears or goes (merge,
  // clear, new inputs): views compare these, never the pointers alone.
  quint64 revision(const QString& name) const { return m_revisions.value(name, 0); }
  quint64 modelRevision() const { return m_modelRevision; }

  // A job for `engine` over `plan` starts: previous results of the same shape are
  // kept and merged into. Returns true when there is none: the result is then an
  // empty placeholder of the right shape (views show nothing for it) until the job's
  // worker delivers the allocated live result through adoptLiveResult, so the GUI
  // thread never allocates and clears a whole frame's arrays.
  bool beginRun(const QString& engine, const PatchPlan& plan);
  void adoptLiveResult(const QString& engine, std::shared_ptr<ExtractionResult> live);
  void applyPatches(const QVector<PatchUpdate>& updates); // live, per patch
  void finishRun(const QString& engine, std::shared_ptr<ExtractionResult> result);
  // The job is over: drops placeholders that never got their live result (cancelled
  // before that engine started).
  void endRuns();

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
  void touchModel() { ++m_modelRevision; }

  std::shared_ptr<const Image> m_image;
  std::shared_ptr<const GaussHermitePsf> m_psf;
  std::shared_ptr<const Truth> m_truth;
  QString m_title, m_preprocPath, m_psfPath;
  RunSettings m_settings;
  std::shared_ptr<const PatchPlan> m_plan;
  QString m_planError;
  QMap<QString, std::shared_ptr<ExtractionResult>> m_results;
  // Model images, moved out of the results when a run finishes (see model()).
  QMap<QString, std::shared_ptr<const Array2D<double>>> m_models;
  QMap<QString, Array2D<uint8_t>> m_coveredBefore; // per running engine
  QSet<QString> m_freshRuns; // running engines whose result began empty
  QString m_lastModel;
  QMap<QString, quint64> m_revisions;
  quint64 m_revisionCounter = 0;
  quint64 m_modelRevision = 0;
};

} // namespace spex
