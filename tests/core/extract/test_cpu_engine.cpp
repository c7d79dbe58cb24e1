// The CPU engine on the real r0 PSF: exact recovery of noiseless photons, unit pulls
// on a noisy bundle, resolution normalisation, masks, subsets and the model image.
#include "core/errors.h"
#include "core/extract/cpu_engine.h"
#include "core/image.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"
#include "result_sentinels.h"
#include "test_data.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace spex;

namespace {

struct Stats {
  double mean = 0, std = 0;
  long n = 0;
};

// (R t)_i from the RESOLUTION diagonals: RES[k, j] = R[j - nd + k, j].
double convolved(const ExtractionResult& r, const Array2D<double>& phot, int f, int i) {
  double s = 0;
  for (int k = 0; k <= 2 * r.ndiag; ++k) {
    const int j = i + r.ndiag - k;
    if (j >= 0 && j < r.nwave) s += r.resolution(f, k, j) * phot(f, j);
  }
  return s;
}

// A result extracted into a kept one against a fresh extraction: the frame arrays bit
// for bit; the model to rounding (model tiles overlap and are added as patches finish,
// in any order across threads; stale tiles would be O(1)).
void requireSameResult(const ExtractionResult& a, const ExtractionResult& b) {
  QVERIFY(a.flux.data == b.flux.data);
  QVERIFY(a.ivar.data == b.ivar.data);
  QVERIFY(a.mask.data == b.mask.data);
  QVERIFY(a.resolution.data == b.resolution.data);
  QVERIFY(a.chi2pix.data == b.chi2pix.data);
  QVERIFY(a.pixmaskFraction.data == b.pixmaskFraction.data);
  QVERIFY(a.deconvolved.data == b.deconvolved.data);
  QVERIFY(a.covered.data == b.covered.data);
  double dm = 0, mmax = 0;
  for (std::size_t i = 0; i < a.model->data.size(); ++i) {
    dm = std::max(dm, std::abs(a.model->data[i] - b.model->data[i]));
    mmax = std::max(mmax, std::abs(b.model->data[i]));
  }
  QVERIFY(mmax > 0);
  QVERIFY2(dm <= 1e-12 * mmax, qPrintable(QString::number(dm / mmax)));
  QCOMPARE(a.patches.size(), b.patches.size());
  QCOMPARE(a.noDataBins, b.noDataBins);
}

Stats pulls(const ExtractionResult& r, const Array2D<double>& phot, int edge) {
  double s = 0, s2 = 0;
  long n = 0;
  for (int f = 0; f < r.nfiber; ++f)
    for (int i = edge; i < r.nwave - edge; ++i) {
      if (r.ivar(f, i) <= 0 || r.mask(f, i)) continue;
      const double p = (r.flux(f, i) - convolved(r, phot, f, i) / r.wave.dw) * std::sqrt(r.ivar(f, i));
      s += p;
      s2 += p * p;
      ++n;
    }
  Stats st;
  st.n = n;
  st.mean = s / n;
  st.std = std::sqrt(s2 / n - st.mean * st.mean);
  return st;
}

class NullProgress : public ProgressSink {};

} // namespace

class TestCpuEngine : public QObject {
  Q_OBJECT
  GaussHermitePsf psf;

  ExtractionResult run(const Image& img, const WaveGrid& g, int f0, int nf, PatchParams pp = {},
                       std::optional<std::vector<int>> patches = std::nullopt, bool model = false) {
    ExtractionRequest req;
    req.image = &img;
    req.psf = &psf;
    req.wave = g;
    req.fiberMin = f0;
    req.nFiber = nf;
    req.params = pp;
    req.patches = std::move(patches);
    req.model = model;
    req.threads = 2;
    NullProgress np;
    CancelToken ct;
    return CpuEngine().extract(req, np, ct);
  }

private slots:
  void initTestCase() {
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    psf = readPsf(path);
  }

  void noiselessRecoversPhotons() {
    // Exact recovery needs every pixel a patch fits to hold only light it models. So:
    // only fibers 5..9 (one sub-bundle, whose padding fibers 4 and 10 are dark) are lit;
    // pixpad_frac is 0; and only bins 12..37 of every 50-bin patch are lit, so neither
    // the padding bins (whose spots the box cuts, and which the weak prior pulls to 0
    // when only a sliver remains) nor bins beyond the padding hold light. Then
    // C^-1 f = y has the photons as its solution, up to rounding (EXTRACTION.md §7).
    const WaveGrid g = WaveGrid::fromRange(6000, 6500, 0.8);
    Array2D<double> phot(25, g.n, 0.0);
    for (int f = 5; f < 10; ++f)
      for (int i = 0; i < g.n; ++i)
        if (i % 50 >= 12 && i % 50 < 38)
          phot(f, i) = 100 + 30 * f + 50 * std::sin(0.05 * i + f) + (i % 97 == 20 ? 2000 : 0);
    Image img;
    img.ny = psf.npixY;
    img.nx = psf.npixX;
    img.pix = renderPhotons(psf, g, 0, phot);
    img.ivar = Array2D<double>(img.ny, img.nx);
    for (std::size_t i = 0; i < img.pix.size(); ++i) img.ivar.data[i] = 1.0 / (9.0 + img.pix.data[i]);
    PatchParams pp;
    pp.pixpadFrac = 0.0;
    const ExtractionResult r = run(img, g, 0, 25, pp);
    double worst = 0, worstFlux = 0;
    int wf = 0, wi = 0;
    for (int f = 5; f < 10; ++f)
      for (int i = 0; i < g.n; ++i) {
        // Relative to the fiber's typical level, so dark bins must come out as ~0.
        const double e = std::abs(r.deconvolved(f, i) - phot(f, i)) / (100 + 30 * f);
        if (e > worst) {
          worst = e;
          wf = f;
          wi = i;
        }
        // flux = R f with f = photons. RESOLUTION keeps only R's band (rows lose
        // ~1e-3 beyond it, see resolutionRowsSumToOne), hence the looser bound.
        if (i >= r.ndiag && i < g.n - r.ndiag)
          worstFlux = std::max(worstFlux, std::abs(r.flux(f, i) * g.dw - convolved(r, phot, f, i)) /
                                              (100 + 30 * f));
      }
    qInfo("max relative |f - photons| = %.3g (fiber %d bin %d), |flux - R photons| = %.3g", worst,
          wf, wi, worstFlux);
    QVERIFY2(worst < 1e-8, qPrintable(QString::number(worst)));
    QVERIFY2(worstFlux < 5e-3, qPrintable(QString::number(worstFlux)));
  }

  void noisyBundlePullsAreUnitNormal() {
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(5760, 7620, 0.8);
    so.fiberMin = 0;
    so.nFiber = 25;
    so.seed = 7;
    const Simulation sim = simulate(psf, so);
    const ExtractionResult r = run(sim.image, so.wave, 0, 25);
    for (double v : r.flux.data) QVERIFY(std::isfinite(v));
    for (double v : r.ivar.data) QVERIFY(std::isfinite(v) && v >= 0);
    const Stats st = pulls(r, sim.truth.phot, 6);
    qInfo("pulls over %ld bins: mean %.4f std %.4f", st.n, st.mean, st.std);
    QVERIFY(st.n > 25 * 2000);
    QVERIFY2(std::abs(st.mean) < 0.02, qPrintable(QString::number(st.mean)));
    QVERIFY2(std::abs(st.std - 1) < 0.03, qPrintable(QString::number(st.std)));
    // Profile: the top range spans the run, patches nest their phases.
    bool sawExtract = false;
    for (const ProfileRange& pr : r.profile.ranges)
      if (pr.name == "extract") {
        sawExtract = true;
        QVERIFY(pr.durationNs() > 0.95 * r.profile.wallNs);
      }
    QVERIFY(sawExtract);
    QCOMPARE(int(r.patches.size()), 5 * 47);
  }

  void resolutionRowsSumToOne() {
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6500, 6700, 0.8);
    so.fiberMin = 50;
    so.nFiber = 25;
    const Simulation sim = simulate(psf, so);
    const ExtractionResult r = run(sim.image, so.wave, 50, 25);
    // Row i of R: sum_k RES[k, i + nd - k]. The band holds all but ~1e-4 of each row.
    double worst = 0;
    for (int f = 0; f < r.nfiber; ++f)
      for (int i = r.ndiag; i < r.nwave - r.ndiag; ++i) {
        double s = 0;
        for (int k = 0; k <= 2 * r.ndiag; ++k) s += r.resolution(f, k, i + r.ndiag - k);
        worst = std::max(worst, std::abs(s - 1));
      }
    qInfo("max |row sum - 1| of the banded R: %.3g", worst);
    QVERIFY2(worst < 1e-3, qPrintable(QString::number(worst)));
  }

  void maskedPixelsRaisePixmaskAndMask() {
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6200, 6400, 0.8);
    so.fiberMin = 0;
    so.nFiber = 25;
    so.defects = false;
    Simulation sim = simulate(psf, so);
    // Mask a block of rows over fiber 12 entirely (all bins there lose every pixel) and
    // one column through fiber 3's trace centre (a fraction of each spot).
    const int f = 12;
    const double w0 = 6300;
    const int yc = int(std::lround(psf.y(f, w0))), xc = int(std::lround(psf.x(f, w0)));
    for (int y = yc - 20; y <= yc + 20; ++y)
      for (int x = xc - 12; x <= xc + 12; ++x) sim.image.ivar(y, x) = 0;
    const int col = int(std::lround(psf.x(3, 6250)));
    for (int y = 0; y < sim.image.ny; ++y) sim.image.ivar(y, col) = 0;
    const ExtractionResult r = run(sim.image, so.wave, 0, 25);
    const int bin = int(std::lround((w0 - so.wave.wmin) / so.wave.dw));
    QVERIFY(r.pixmaskFraction(f, bin) > 0.999);
    QVERIFY(r.mask(f, bin) & kAllBadPix);
    QVERIFY(r.mask(f, bin) & kSomeBadPix);
    const int bin3 = int(std::lround((6250 - so.wave.wmin) / so.wave.dw));
    QVERIFY(r.pixmaskFraction(3, bin3) > 0.2 && r.pixmaskFraction(3, bin3) < 1);
    QVERIFY(r.pixmaskFraction(20, bin3) < 1e-12);
    QCOMPARE(r.mask(20, bin3), 0u);
    for (double v : r.flux.data) QVERIFY(std::isfinite(v));
  }

  void subsetMatchesWholeFrameAndModelIsSeamless() {
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6300, 0.8);
    so.fiberMin = 25;
    so.nFiber = 25;
    const Simulation sim = simulate(psf, so);
    const ExtractionResult whole = run(sim.image, so.wave, 25, 25, {}, std::nullopt, true);
    const PatchPlan plan = makePatchPlan(psf, so.wave, 25, 25, PatchParams{});
    const std::vector<int> pick = plan.patchesInRegion(30, 35, 60, 120);
    const ExtractionResult part = run(sim.image, so.wave, 25, 25, {}, pick);
    long coveredBins = 0;
    for (int f = 0; f < 25; ++f)
      for (int i = 0; i < so.wave.n; ++i) {
        if (!part.covered(f, i)) {
          QCOMPARE(part.flux(f, i), 0.0);
          continue;
        }
        ++coveredBins;
        QCOMPARE(part.flux(f, i), whole.flux(f, i));
        QCOMPARE(part.ivar(f, i), whole.ivar(f, i));
      }
    QCOMPARE(coveredBins, long(pick.size()) * 5 * 50);
    // The model image of the whole frame fits the data: chi^2 per pixel ~ 1 around the
    // traces (a model built from R f, or overwritten patches, would be far off).
    const Array2D<double>& m = *whole.model;
    double chi2 = 0;
    long n = 0;
    for (int f = 27; f < 48; f += 5)
      for (double w = 6050; w < 6250; w += 3.1) {
        const int x = int(std::lround(psf.x(f, w))), y = int(std::lround(psf.y(f, w)));
        const double iv = sim.image.ivar(y, x);
        if (iv <= 0) continue;
        const double d = sim.image.pix(y, x) - m(y, x);
        chi2 += d * d * iv;
        ++n;
      }
    qInfo("model chi2/pixel at trace centres: %.3f over %ld pixels", chi2 / n, n);
    QVERIFY(chi2 / n < 1.5 && chi2 / n > 0.5);
  }

  void warmEngineFillsSelectionsInPlace() {
    // One engine and one result kept between requests, as the workbench's patch
    // selections do: the second and later requests reuse the result's arrays (no
    // frame- or CCD-sized allocation) and still equal fresh extractions exactly,
    // model image included, with nothing left over from the previous selection.
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6300, 0.8);
    so.fiberMin = 25;
    so.nFiber = 25;
    const Simulation sim = simulate(psf, so);
    const PatchPlan plan = makePatchPlan(psf, so.wave, 25, 25, PatchParams{});
    const std::vector<int> pickA = plan.patchesInRegion(30, 35, 60, 120);
    const std::vector<int> pickB = plan.patchesInRegion(40, 50, 200, 260);
    QVERIFY(!pickA.empty() && !pickB.empty());
    CpuEngine engine;
    ExtractionResult kept;
    auto request = [&](std::optional<std::vector<int>> pick) {
      ExtractionRequest req;
      req.image = &sim.image;
      req.psf = &psf;
      req.wave = so.wave;
      req.fiberMin = 25;
      req.nFiber = 25;
      req.patches = std::move(pick);
      req.model = true;
      req.threads = 2;
      return req;
    };
    NullProgress np;
    CancelToken ct;
    engine.extractInto(request(pickA), kept, np, ct);
    const double* flux0 = kept.flux.data.data();
    const double* res0 = kept.resolution.data.data();
    const double* model0 = kept.model->data.data();
    for (const auto& pick : {pickB, pickA, pickB}) {
      engine.extractInto(request(pick), kept, np, ct);
      QCOMPARE(kept.flux.data.data(), flux0);
      QCOMPARE(kept.resolution.data.data(), res0);
      QCOMPARE(kept.model->data.data(), model0);
      QVERIFY(kept.profile.phaseStats().size() > 0);
      requireSameResult(kept, CpuEngine().extract(request(pick), np, ct));
    }
    // The whole frame into the same result, then a selection again.
    engine.extractInto(request(std::nullopt), kept, np, ct);
    requireSameResult(kept, CpuEngine().extract(request(std::nullopt), np, ct));
    engine.extractInto(request(pickA), kept, np, ct);
    requireSameResult(kept, CpuEngine().extract(request(pickA), np, ct));
    QCOMPARE(kept.flux.data.data(), flux0);
  }

  void keptResultHoldsNoStaleValues() {
    // A result kept between whole requests (bench's repeats, a process extracting
    // frame after frame): before the second request every element the first could have
    // written is set to a sentinel (NaN, all mask bits, coverage 2, NaN in the model
    // inside the first request's patch boxes, where the engine alone writes it); none
    // may survive the second request, which must equal a fresh extraction and reuse the
    // arrays. Then a patch list into the same result, sentinels again: equal to a fresh
    // extraction of the list (zero elsewhere).
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6200, 0.8);
    so.fiberMin = 25;
    so.nFiber = 10;
    const Simulation sim = simulate(psf, so);
    auto request = [&](std::optional<std::vector<int>> pick) {
      ExtractionRequest req;
      req.image = &sim.image;
      req.psf = &psf;
      req.wave = so.wave;
      req.fiberMin = 25;
      req.nFiber = 10;
      req.patches = std::move(pick);
      req.model = true;
      req.threads = 2;
      attachPlan(req);
      return req;
    };
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto fillSentinels = [&](ExtractionResult& r, const PatchPlan& plan) {
      spextest::fillFrameSentinels(r);
      // The model outside the patches' boxes is zero (no request writes there).
      Array2D<uint8_t> inBox(r.model->rows, r.model->cols);
      for (const PatchDiagnostics& d : r.patches) {
        const PixelBox& b = plan.patches[std::size_t(d.patch)].box;
        for (int y = std::max(0, b.y0); y < std::min(r.model->rows, b.y1); ++y)
          for (int x = std::max(0, b.x0); x < std::min(r.model->cols, b.x1); ++x) inBox(y, x) = 1;
      }
      long nonzeroOutside = 0;
      for (std::size_t i = 0; i < inBox.size(); ++i) {
        if (inBox.data[i]) r.model->data[i] = nan;
        else nonzeroOutside += r.model->data[i] != 0;
      }
      QCOMPARE(nonzeroOutside, 0L);
    };
    using spextest::sentinelsLeft;
    CpuEngine engine;
    NullProgress np;
    CancelToken ct;
    const ExtractionRequest whole = request(std::nullopt);
    ExtractionResult kept;
    engine.extractInto(whole, kept, np, ct);
    const double* flux0 = kept.flux.data.data();
    const double* model0 = kept.model->data.data();
    fillSentinels(kept, *whole.plan);
    QVERIFY(sentinelsLeft(kept) > long(kept.flux.size()) * 7);
    engine.extractInto(whole, kept, np, ct);
    QCOMPARE(kept.flux.data.data(), flux0);
    QCOMPARE(kept.model->data.data(), model0);
    QCOMPARE(sentinelsLeft(kept), 0L);
    requireSameResult(kept, CpuEngine().extract(whole, np, ct));

    ExtractionRequest some = whole; // the same plan: the engine's own kept result
    some.patches = whole.plan->patchesInRegion(27, 31, 60, 180);
    QVERIFY(some.patches->size() >= 2);
    fillSentinels(kept, *whole.plan);
    engine.extractInto(some, kept, np, ct);
    QCOMPARE(kept.flux.data.data(), flux0);
    QCOMPARE(sentinelsLeft(kept), 0L);
    requireSameResult(kept, CpuEngine().extract(some, np, ct));
  }

  void accumulatingResultEqualsOneExtractionOfEverything() {
    // The workbench's live result: requests with `accumulate` add their patches to
    // what earlier requests left, patches done again replace their own bins and model
    // tiles. After A, B (overlapping A's model boxes), A again, the result must equal
    // one extraction of A and B together: bins bit for bit, the model to rounding
    // against the engine's other model path, and bit for bit against tiles summed in
    // one go (updateModelImage adds tiles in plan order whatever changed).
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6300, 0.8);
    so.fiberMin = 25;
    so.nFiber = 25;
    const Simulation sim = simulate(psf, so);
    auto plan = std::make_shared<const PatchPlan>(makePatchPlan(psf, so.wave, 25, 25, PatchParams{}));
    const std::vector<int> pickA = plan->patchesInRegion(30, 35, 60, 120);
    const std::vector<int> pickB = plan->patchesInRegion(30, 40, 100, 160); // shares patches with A
    std::vector<int> both = pickA;
    both.insert(both.end(), pickB.begin(), pickB.end());
    std::sort(both.begin(), both.end());
    both.erase(std::unique(both.begin(), both.end()), both.end());
    QVERIFY(both.size() < pickA.size() + pickB.size());
    auto request = [&](const std::vector<int>& pick, bool accumulate) {
      ExtractionRequest req;
      req.image = &sim.image;
      req.psf = &psf;
      req.wave = so.wave;
      req.fiberMin = 25;
      req.nFiber = 25;
      req.plan = plan;
      req.patches = pick;
      req.model = true;
      req.threads = 2;
      req.accumulate = accumulate;
      return req;
    };
    NullProgress np;
    CancelToken ct;
    CpuEngine engine;
    ExtractionResult live;
    engine.extractInto(request(pickA, true), live, np, ct);
    const double* flux0 = live.flux.data.data();
    const double* model0 = live.model->data.data();
    engine.extractInto(request(pickB, true), live, np, ct);
    engine.extractInto(request(pickA, true), live, np, ct);
    QCOMPARE(live.flux.data.data(), flux0); // in place
    QCOMPARE(live.model->data.data(), model0);
    QVERIFY(live.lastPatches == pickA);
    QCOMPARE(live.patches.size(), both.size());

    const ExtractionResult once = CpuEngine().extract(request(both, false), np, ct);
    QVERIFY(live.flux.data == once.flux.data);
    QVERIFY(live.ivar.data == once.ivar.data);
    QVERIFY(live.mask.data == once.mask.data);
    QVERIFY(live.resolution.data == once.resolution.data);
    QVERIFY(live.chi2pix.data == once.chi2pix.data);
    QVERIFY(live.deconvolved.data == once.deconvolved.data);
    QVERIFY(live.covered.data == once.covered.data);
    double dm = 0, mmax = 0;
    for (std::size_t i = 0; i < once.model->size(); ++i) {
      dm = std::max(dm, std::abs(live.model->data[i] - once.model->data[i]));
      mmax = std::max(mmax, std::abs(once.model->data[i]));
    }
    QVERIFY(mmax > 0);
    QVERIFY2(dm <= 1e-12 * mmax, qPrintable(QString::number(dm / mmax)));

    ExtractionResult fresh;
    CpuEngine().extractInto(request(both, true), fresh, np, ct);
    QVERIFY(fresh.model->data == live.model->data);
    // And the model after a full recomputation from the tiles is the same array.
    Array2D<double> kept = *live.model;
    std::vector<int> all(plan->patches.size());
    std::iota(all.begin(), all.end(), 0);
    updateModelImage(live, *plan, all);
    QVERIFY(live.model->data == kept.data);

    // A plan made for another request is refused, naming what differs.
    ExtractionRequest wrong = request(pickA, true);
    wrong.fiberMin = 26;
    bool threw = false;
    try {
      engine.extractInto(wrong, live, np, ct);
    } catch (const InputError& e) {
      threw = QString::fromUtf8(e.what()).contains(QStringLiteral("fibers"));
    }
    QVERIFY(threw);
  }

  void cancelReturnsPartialResult() {
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 7000, 0.8);
    so.fiberMin = 0;
    so.nFiber = 25;
    const Simulation sim = simulate(psf, so);
    struct CancelAfter : ProgressSink {
      CancelToken* t;
      std::atomic<int> n{0};
      void patchDone(int, int, int) override {
        if (++n == 5) t->cancel();
      }
    } sink;
    CancelToken ct;
    sink.t = &ct;
    ExtractionRequest req;
    req.image = &sim.image;
    req.psf = &psf;
    req.wave = so.wave;
    req.fiberMin = 0;
    req.nFiber = 25;
    req.threads = 1;
    const ExtractionResult r = CpuEngine().extract(req, sink, ct);
    QVERIFY(r.cancelled);
    QCOMPARE(int(r.patches.size()), 5);
    const long covered = std::accumulate(r.covered.data.begin(), r.covered.data.end(), 0L);
    QCOMPARE(covered, 5L * 5 * 50);
  }
};

QTEST_GUILESS_MAIN(TestCpuEngine)
#include "test_cpu_engine.moc"
