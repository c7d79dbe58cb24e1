#include "document.h"

#include "core/bary/barycentric.h"

#include "core/errors.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"

#include <cmath>

namespace spex {

namespace {

bool sameShape(const ExtractionResult& a, const ExtractionResult& b) {
  return a.fiberMin == b.fiberMin && a.nfiber == b.nfiber && a.nwave == b.nwave &&
         a.ndiag == b.ndiag && std::abs(a.wave.wmin - b.wave.wmin) < 1e-9 &&
         std::abs(a.wave.dw - b.wave.dw) < 1e-12;
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
  m_models.clear();
  m_coveredBefore.clear();
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
    if (it != m_results.end() && it.value()) out.push_back({it.key(), it.value()});
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

QString Document::modelSource() const {
  if (!m_lastModel.isEmpty() && m_models.value(m_lastModel)) return m_lastModel;
  for (auto it = m_models.begin(); it != m_models.end(); ++it)
    if (it.value()) return it.key();
  return {};
}

void Document::clearResults() {
  for (auto it = m_results.begin(); it != m_results.end(); ++it) touch(it.key());
  m_results.clear();
  m_models.clear();
  m_coveredBefore.clear();
  m_lastModel.clear();
  touchModel();
  emit resultsChanged();
}

bool Document::beginRun(const QString& engine, const PatchPlan& plan) {
  auto& cur = m_results[engine];
  ExtractionResult shape;
  shape.fiberMin = plan.fiberMin;
  shape.nfiber = plan.nFiber;
  shape.nwave = plan.wave.n;
  shape.ndiag = m_psf ? m_psf->hsizeY : 0;
  shape.wave = plan.wave;
  const bool fresh = !cur || !sameShape(*cur, shape) || cur->flux.empty();
  if (fresh) {
    // Shape only, no arrays: the worker allocates them (adoptLiveResult).
    cur = std::make_shared<ExtractionResult>();
    cur->engine = engine.toStdString();
    cur->fiberMin = shape.fiberMin;
    cur->nfiber = shape.nfiber;
    cur->nwave = shape.nwave;
    cur->ndiag = shape.ndiag;
    cur->wave = shape.wave;
    cur->params = plan.params;
    // The earlier result is gone, and with it what its model showed.
    if (m_models.remove(engine)) touchModel();
    m_freshRuns.insert(engine);
  } else {
    m_freshRuns.remove(engine);
  }
  m_coveredBefore[engine] = cur->covered;
  touch(engine);
  return fresh;
}

void Document::adoptLiveResult(const QString& engine, std::shared_ptr<ExtractionResult> live) {
  auto& cur = m_results[engine];
  // Only into the placeholder it was made for.
  if (live && cur && cur->flux.empty() && sameShape(*cur, *live)) {
    cur = std::move(live);
    touch(engine);
  }
}

void Document::endRuns() {
  for (auto it = m_results.begin(); it != m_results.end();) {
    if (it.value() && it.value()->flux.empty() && it.value()->nfiber > 0) {
      touch(it.key());
      it = m_results.erase(it);
    } else {
      ++it;
    }
  }
  m_freshRuns.clear();
  m_coveredBefore.clear();
}

void Document::applyPatches(const QVector<PatchUpdate>& updates) {
  for (const PatchUpdate& u : updates) {
    auto it = m_results.find(u.engine);
    if (it == m_results.end() || !it.value()) continue;
    ExtractionResult& r = *it.value();
    if (r.flux.empty()) continue; // placeholder: the live result has not arrived
    const Patch& p = u.patch;
    for (int f = 0; f < p.nfiber && f < u.flux.rows; ++f) {
      const int row = p.fiber0 + f - r.fiberMin;
      if (row < 0 || row >= r.nfiber) continue;
      for (int w = 0; w < p.nwave && w < u.flux.cols; ++w) {
        const int bin = p.wave0 + w;
        if (bin < 0 || bin >= r.nwave) continue;
        r.flux(row, bin) = u.flux(f, w);
        r.ivar(row, bin) = u.ivar(f, w);
        r.covered(row, bin) = 1;
      }
    }
    touch(u.engine);
  }
  emit resultsChanged();
}

void Document::finishRun(const QString& engine, std::shared_ptr<ExtractionResult> fin) {
  auto& cur = m_results[engine];
  const Array2D<uint8_t> before = m_coveredBefore.take(engine);
  // A result that began empty this run holds nothing the final one lacks: take the
  // final one as it is instead of copying a whole frame's arrays on the GUI thread.
  const bool fresh = m_freshRuns.remove(engine);
  // The model leaves the result for an immutable snapshot (model()); bins whose
  // spots it holds are known by `overlap` below.
  std::shared_ptr<Array2D<double>> newModel;
  if (fin->model) {
    newModel = std::make_shared<Array2D<double>>(std::move(*fin->model));
    fin->model.reset();
  }
  bool overlap = false;
  if (!cur || !sameShape(*cur, *fin) || fresh || cur->flux.empty()) {
    cur = fin;
    overlap = true; // nothing of an earlier model survives
  } else {
    // Merge: bins this run covered take its values; the rest keep earlier runs'.
    ExtractionResult& r = *cur;
    const bool all = fin->covered.empty();
    for (int f = 0; f < r.nfiber; ++f)
      for (int w = 0; w < r.nwave; ++w) {
        if (!all && !fin->covered(f, w)) continue;
        if (!before.empty() && before(f, w)) overlap = true;
        r.flux(f, w) = fin->flux(f, w);
        r.ivar(f, w) = fin->ivar(f, w);
        if (!fin->mask.empty()) r.mask(f, w) = fin->mask(f, w);
        if (!fin->chi2pix.empty()) r.chi2pix(f, w) = fin->chi2pix(f, w);
        if (!fin->pixmaskFraction.empty()) r.pixmaskFraction(f, w) = fin->pixmaskFraction(f, w);
        if (!fin->deconvolved.empty()) r.deconvolved(f, w) = fin->deconvolved(f, w);
        if (!fin->resolution.empty())
          for (int k = 0; k < r.resolution.n1; ++k) r.resolution(f, k, w) = fin->resolution(f, k, w);
        r.covered(f, w) = 1;
      }
    r.patches.insert(r.patches.end(), fin->patches.begin(), fin->patches.end());
    r.profile = fin->profile;
    r.engine = fin->engine;
    r.cancelled = fin->cancelled;
  }
  if (newModel) {
    // Each (fiber, bin) adds its own spots to the model (EXTRACTION.md §4.9), so the
    // models of disjoint runs add up; a run that redid bins replaces the model. The
    // sum goes into the new array: the old one may be in a view's worker right now.
    const auto old = m_models.value(engine);
    if (old && !overlap && old->size() == newModel->size())
      for (std::size_t i = 0; i < newModel->size(); ++i) newModel->data[i] += old->data[i];
    m_models[engine] = std::move(newModel);
    m_lastModel = engine;
    touchModel();
  }
  touch(engine);
  emit resultsChanged();
}

} // namespace spex
