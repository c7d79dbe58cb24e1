#include "document.h"

#include "core/extract/compare.h"

#include "core/bary/barycentric.h"

#include "core/errors.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"

#include <cmath>

namespace spex {

namespace {

bool hasShape(const ExtractionResult& r, const PatchPlan& plan, int ndiag) {
  return r.fiberMin == plan.fiberMin && r.nfiber == plan.nFiber && r.nwave == plan.wave.n && r.ndiag == ndiag &&
         r.wave.wmin == plan.wave.wmin && r.wave.dw == plan.wave.dw && r.flux.rows == plan.nFiber &&
         r.flux.cols == plan.wave.n;
}

RunSettings settingsFor(const GaussHermitePsf& psf, const RunSettings& keep) {
  RunSettings s = keep; // keep the user's patch parameters, engine and threads
  s.dw = keep.dw > 0 ? keep.dw : 0.8;
  s.wmin = std::ceil(psf.waveMin());
  // The grid's last point must stay inside the PSF domain.
  s.wmax = s.wmin + std::floor((psf.waveMax() - s.wmin) / s.dw) * s.dw;
  s.fiberMin = 0;
  s.nFiber = psf.nfiber;
  return s;
}

} // namespace

Document::Document(QObject* parent) : QObject(parent) {}

void Document::adoptInputs(std::shared_ptr<Image> image, std::shared_ptr<GaussHermitePsf> psf,
                           std::shared_ptr<Truth> truth, const QString& title) {
  m_image = std::move(image);
  m_psf = std::move(psf);
  m_truth = std::move(truth);
  m_title = title;
  for (auto it = m_results.begin(); it != m_results.end(); ++it) touch(it.key());
  m_results.clear();
  m_pending.clear();
  m_lastModel.clear();
  touchModel();
  m_settings = settingsFor(*m_psf, m_settings);
  rebuildPlan();
  emit inputsChanged();
  emit truthChanged();
  emit planChanged();
  emit resultsChanged();
}

void Document::loadDemo(int nFiber) {
  DemoData demo = makeDemo(nFiber);
  loadSimulation(std::move(demo.psf), std::move(demo.sim),
                 tr("demo: synthetic PSF, %1 simulated fibers").arg(nFiber));
}

void Document::loadSimulation(GaussHermitePsf psf, Simulation sim, const QString& title) {
  psf.validate();
  auto p = std::make_shared<GaussHermitePsf>(std::move(psf));
  auto img = std::make_shared<Image>(std::move(sim.image));
  auto truth = std::make_shared<Truth>(std::move(sim.truth));
  m_preprocPath.clear();
  m_psfPath.clear();
  // The simulated grid and fibers are what there is to extract.
  const int nFiber = truth->phot.rows;
  adoptInputs(img, p, truth, title);
  if (truth->wave.size() > 1) {
    RunSettings s = m_settings;
    s.wmin = truth->wave.front();
    s.wmax = truth->wave.back();
    s.dw = truth->wave[1] - truth->wave[0];
    s.fiberMin = truth->fiberMin;
    s.nFiber = nFiber;
    setSettings(s);
  }
}

void Document::loadInputs(const QString& preproc, const QString& psfPath, const QString& truthPath) {
  auto psf = std::make_shared<GaussHermitePsf>(readPsf(psfPath.toStdString()));
  auto img = std::make_shared<Image>(readPreproc(preproc.toStdString()));
  if (img->nx != psf->npixX || img->ny != psf->npixY)
    throw InputError("preproc '" + preproc.toStdString() + "' IMAGE is " + std::to_string(img->nx) +
                     " x " + std::to_string(img->ny) + " (x, y) but PSF '" + psfPath.toStdString() +
                     "' has NPIX_X x NPIX_Y = " + std::to_string(psf->npixX) + " x " +
                     std::to_string(psf->npixY) + ": they are not from the same camera");
  std::shared_ptr<Truth> truth;
  if (!truthPath.isEmpty()) truth = std::make_shared<Truth>(readTruth(truthPath.toStdString()));
  m_preprocPath = preproc;
  m_psfPath = psfPath;
  adoptInputs(img, psf, truth, preproc);
  if (truth && truth->wave.size() > 1) {
    // A simulation's truth names the grid and fibers it was made on.
    RunSettings s = m_settings;
    s.wmin = truth->wave.front();
    s.wmax = truth->wave.back();
    s.dw = truth->wave[1] - truth->wave[0];
    s.fiberMin = truth->fiberMin;
    s.nFiber = truth->phot.rows;
    setSettings(s);
  }
}

void Document::loadTruth(const QString& path) {
  m_truth = std::make_shared<Truth>(readTruth(path.toStdString()));
  emit truthChanged();
}

void Document::loadFrame(const QString& path) {
  if (!m_psf) throw InputError("open a PSF (File > Open inputs) before a frame: the frame alone "
                               "does not say where its fibers fall on the CCD");
  auto r = std::make_shared<ExtractionResult>(readFrame(path.toStdString()));
  const std::string p = path.toStdString();
  // A barycentric-corrected frame stores the requested grid; its spectra were
  // extracted at grid / HELIOCOR, which is where they fall on the CCD.
  if (r->heliocor != 1.0) r->wave = barycentricExtractionGrid(r->wave, r->heliocor);
  if (r->fiberMin < 0 || r->fiberMin + r->nfiber > m_psf->nfiber)
    throw InputError("frame '" + p + "' holds fibers " + std::to_string(r->fiberMin) + ".." +
                     std::to_string(r->fiberMin + r->nfiber - 1) + " but the open PSF has " +
                     std::to_string(m_psf->nfiber) + " fibers (0.." + std::to_string(m_psf->nfiber - 1) + ")");
  if (r->nwave > 0 && (r->wave.wmin < m_psf->waveMin() - 1 || r->wave.last() > m_psf->waveMax() + 1))
    throw InputError("frame '" + p + "' covers " + std::to_string(r->wave.wmin) + ".." +
                     std::to_string(r->wave.last()) + " A, outside the open PSF's " +
                     std::to_string(m_psf->waveMin()) + ".." + std::to_string(m_psf->waveMax()) + " A");
  if (r->ndiag > 0 && r->resolution.n1 != 2 * r->ndiag + 1)
    throw InputError("frame '" + p + "': RESOLUTION has " + std::to_string(r->resolution.n1) +
                     " diagonals, expected 2 ndiag + 1");
  m_results[QStringLiteral("frame")] = r;
  touch(QStringLiteral("frame"));
  // Extract on the frame's own grid and fibers, so results line up with it.
  RunSettings s = m_settings;
  s.wmin = r->wave.wmin;
  s.wmax = r->wave.last();
  s.dw = r->wave.dw;
  s.fiberMin = r->fiberMin;
  s.nFiber = r->nfiber;
  setSettings(s);
  emit resultsChanged();
}

void Document::setSettings(const RunSettings& s) {
  m_settings = s;
  rebuildPlan();
  emit planChanged();
}

void Document::rebuildPlan() {
  m_plan.reset();
  m_planError.clear();
  if (!m_psf) return;
  try {
    const WaveGrid g = WaveGrid::fromRange(m_settings.wmin, m_settings.wmax, m_settings.dw);
    m_plan = std::make_shared<PatchPlan>(
        makePatchPlan(*m_psf, g, m_settings.fiberMin, m_settings.nFiber, m_settings.params));
  } catch (const std::exception& e) {
    m_planError = QString::fromStdString(e.what());
  }
}

QString Document::planSummary() const {
  if (!m_plan) return m_planError;
  int maxUnknown = 0;
  for (const Patch& p : m_plan->patches) maxUnknown = std::max(maxUnknown, p.nunknown());
  return tr("%1 patches: fibers %2-%3 x %4 bins (%5-%6 \u00c5), wavepad %7, up to %8 unknowns per patch")
      .arg(m_plan->patches.size())
      .arg(m_plan->fiberMin)
      .arg(m_plan->fiberMin + m_plan->nFiber - 1)
      .arg(m_plan->wave.n)
      .arg(m_plan->wave.wmin, 0, 'f', 1)
      .arg(m_plan->wave.last(), 0, 'f', 1)
      .arg(m_plan->wavepad)
      .arg(maxUnknown);
}

QVector<SpectrumSource> Document::sources() const {
  QVector<SpectrumSource> out;
  for (const char* name : {"cpu", "cuda", "frame"}) {
    const auto it = m_results.find(QString::fromLatin1(name));
    if (it != m_results.end() && it.value()) out.push_back({name, it.value()});
  }
  return out;
}

std::shared_ptr<const ExtractionResult> Document::result(const QString& name) const {
  return m_results.value(name);
}

std::vector<std::shared_ptr<const ExtractionResult>> Document::results() const {
  std::vector<std::shared_ptr<const ExtractionResult>> out;
  for (const auto& r : m_results) out.push_back(r);
  return out;
}

void Document::touchModel() {
  m_modelChange = {m_modelRevision, m_modelRevision + 1, true, {}};
  ++m_modelRevision;
}

std::shared_ptr<const Array2D<double>> Document::model(const QString& name) const {
  const auto r = m_results.value(name);
  // An engine writes its model while it runs: nobody reads it until it is done.
  if (!r || !r->model || r->model->empty() || m_running.contains(name)) return nullptr;
  return std::shared_ptr<const Array2D<double>>(r, &*r->model); // lives with the result
}

QString Document::modelSource() const {
  if (!m_lastModel.isEmpty() && model(m_lastModel)) return m_lastModel;
  for (auto it = m_results.begin(); it != m_results.end(); ++it)
    if (model(it.key())) return it.key();
  return {};
}

void Document::clearResults() {
  for (auto it = m_results.begin(); it != m_results.end(); ++it) touch(it.key());
  m_results.clear();
  m_pending.clear();
  m_running.clear();
  m_lastModel.clear();
  touchModel();
  emit resultsChanged();
}

std::shared_ptr<ExtractionResult> Document::beginRun(const QString& engine) {
  m_running.insert(engine);
  auto cur = m_results.value(engine);
  const int ndiag = m_psf ? m_psf->hsizeY : 0;
  if (cur && m_plan && hasShape(*cur, *m_plan, ndiag)) return cur;
  auto fresh = std::make_shared<ExtractionResult>();
  fresh->engine = engine.toStdString();
  m_pending[engine] = fresh;
  return fresh;
}

void Document::patchesDone(const QString& engine, const QVector<int>& /*patches*/) {
  if (auto p = m_pending.take(engine)) {
    // The run's new result replaces the earlier one (of another shape), model too.
    const bool hadModel = m_results.value(engine) && m_results.value(engine)->model;
    m_results[engine] = std::move(p);
    if (hadModel) touchModel();
  }
  touch(engine);
  emit resultsChanged();
}

void Document::finishRun(const QString& engine) {
  m_running.remove(engine);
  const bool wasPending = m_pending.contains(engine);
  if (auto p = m_pending.take(engine)) m_results[engine] = std::move(p);
  const auto r = m_results.value(engine);
  if (!r) return;
  if (r->model) {
    // Only the boxes of the patches this run redid changed (updateModelImage), unless
    // the result is new, was filled by an engine without model tiles, or the run was
    // not one engine's.
    const bool boxed = !wasPending && m_lastModel == engine && m_plan &&
                       r->modelTiles.size() == m_plan->patches.size();
    if (boxed) {
      ModelChange c{m_modelRevision, m_modelRevision + 1, false, {}};
      for (int i : r->lastPatches)
        if (i >= 0 && i < int(m_plan->patches.size())) c.boxes.push_back(m_plan->patches[std::size_t(i)].box);
      m_modelChange = std::move(c);
      ++m_modelRevision;
    } else {
      touchModel();
    }
    m_lastModel = engine;
  }
  // Its bins were final at patchesDone; only a result shown first now is news to views.
  if (wasPending) touch(engine);
  emit resultsChanged();
}

void Document::endRuns() {
  m_pending.clear();
  m_running.clear();
}

std::shared_ptr<const ExtractionResult> Document::runSummary(const QString& engine) const {
  const auto r = m_results.value(engine);
  if (!r) return nullptr;
  auto s = std::make_shared<ExtractionResult>();
  s->engine = r->engine;
  s->fiberMin = r->fiberMin;
  s->nfiber = r->nfiber;
  s->nwave = r->nwave;
  s->ndiag = r->ndiag;
  s->wave = r->wave;
  s->params = r->params;
  s->psferr = r->psferr;
  s->profile = r->profile;
  s->cancelled = r->cancelled;
  s->lastPatches = r->lastPatches;
  // This run's patches (a flag per plan index: a whole frame's 5 700 x 5 700 finds took
  // tens of ms on the GUI thread).
  int top = 0;
  for (int i : r->lastPatches) top = std::max(top, i + 1);
  std::vector<char> mine(std::size_t(top), 0);
  for (int i : r->lastPatches)
    if (i >= 0) mine[std::size_t(i)] = 1;
  for (const PatchDiagnostics& d : r->patches)
    if (d.patch >= 0 && d.patch < top && mine[std::size_t(d.patch)]) s->patches.push_back(d);
  return s;
}

std::shared_ptr<const ExtractionResult> Document::runValues(const QString& engine) const {
  const auto r = m_results.value(engine);
  if (!r || !m_plan) return nullptr;
  return runOwnBins(*r, *m_plan);
}

} // namespace spex
