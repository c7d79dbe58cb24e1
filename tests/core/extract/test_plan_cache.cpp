// The plan cache of requests that carry no plan (core/extract/plan_cache.h): a plan is
// built once per (PSF, grid, fibers, parameters) and rebuilt when any of them changes,
// a PSF edited in place included; carried plans are checked and leave the cache alone;
// the CPU engine uses it.
#include "core/errors.h"
#include "core/extract/cpu_engine.h"
#include "core/extract/plan_cache.h"
#include "core/image.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"
#include "test_data.h"

#include <QTest>

using namespace spex;

namespace {

class NullProgress : public ProgressSink {};

// The plan's geometry equals a plan built now for the request: a stale plan (made for
// a PSF before an edit, or for other parameters) differs in its boxes or patches.
bool sameGeometry(const PatchPlan& a, const PatchPlan& b) {
  if (a.patches.size() != b.patches.size() || a.fiberMin != b.fiberMin || a.nFiber != b.nFiber ||
      a.wave.n != b.wave.n || a.wave.wmin != b.wave.wmin)
    return false;
  for (std::size_t i = 0; i < a.patches.size(); ++i) {
    const Patch& p = a.patches[i];
    const Patch& q = b.patches[i];
    if (p.fiber0 != q.fiber0 || p.nfiber != q.nfiber || p.wave0 != q.wave0 || p.nwave != q.nwave ||
        p.box.x0 != q.box.x0 || p.box.x1 != q.box.x1 || p.box.y0 != q.box.y0 || p.box.y1 != q.box.y1)
      return false;
  }
  return true;
}

} // namespace

class TestPlanCache : public QObject {
  Q_OBJECT
  GaussHermitePsf psf;

  ExtractionRequest request(const GaussHermitePsf* p, double w0 = 6000, int f0 = 25, int nf = 25) const {
    ExtractionRequest req;
    req.psf = p;
    req.wave = WaveGrid::fromRange(w0, w0 + 200, 0.8);
    req.fiberMin = f0;
    req.nFiber = nf;
    return req;
  }
  static PatchPlan fresh(const ExtractionRequest& r) {
    return makePatchPlan(*r.psf, r.wave, r.fiberMin, r.nFiber, r.params);
  }

private slots:
  void initTestCase() {
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    psf = readPsf(path);
  }

  void repeatedRequestsShareOnePlan() {
    PlanCache cache;
    const ExtractionRequest req = request(&psf);
    const auto a = cache.planFor(req);
    const auto b = cache.planFor(req);
    QCOMPARE(a.get(), b.get());
    QCOMPARE(cache.builds(), 1);
    QVERIFY(sameGeometry(*a, fresh(req)));
  }

  void everyInputOfThePlanRebuildsIt() {
    PlanCache cache(8);
    const ExtractionRequest base = request(&psf);
    const auto p0 = cache.planFor(base);
    int builds = 1;
    auto expectNew = [&](const ExtractionRequest& r, const char* what) {
      const auto p = cache.planFor(r);
      QVERIFY2(p.get() != p0.get(), what);
      QVERIFY2(cache.builds() == ++builds, what);
      QVERIFY2(sameGeometry(*p, fresh(r)), what);
    };
    expectNew(request(&psf, 6100), "grid");
    expectNew(request(&psf, 6000, 50), "first fiber");
    expectNew(request(&psf, 6000, 25, 20), "fiber count");
    ExtractionRequest r = base;
    r.params.nwavestep = 40;
    expectNew(r, "nwavestep");
    r = base;
    r.params.pixpadFrac = 0.5;
    expectNew(r, "pixpad_frac");
    r = base;
    r.params.psferr = 0.02;
    expectNew(r, "psferr");
    // Back to the first request: still kept (capacity 8), not rebuilt.
    QCOMPARE(cache.planFor(base).get(), p0.get());
    QCOMPARE(cache.builds(), builds);
  }

  void psfEditedInPlaceRebuilds() {
    // Same address, other traces: the plan must follow the PSF, not its address.
    GaussHermitePsf edited = psf;
    PlanCache cache;
    const ExtractionRequest req = request(&edited);
    const auto p0 = cache.planFor(req);
    for (int f = 0; f < edited.yTrace.coeff.rows; ++f) edited.yTrace.coeff(f, 0) += 40.0; // 40 rows down
    const auto p1 = cache.planFor(req);
    QVERIFY(p1.get() != p0.get());
    QVERIFY(!sameGeometry(*p1, *p0));
    QVERIFY(sameGeometry(*p1, fresh(req)));
    // The trace's domain alone (same coefficients) moves every trace too.
    edited.xTrace.wavemax += 50.0;
    const auto p2 = cache.planFor(req);
    QVERIFY(p2.get() != p1.get());
    QVERIFY(!sameGeometry(*p2, *p1));
    QVERIFY(sameGeometry(*p2, fresh(req)));
    QCOMPARE(cache.builds(), 3);
  }

  void leastRecentlyUsedPlanIsDropped() {
    PlanCache cache(2);
    const ExtractionRequest a = request(&psf, 6000), b = request(&psf, 6100), c = request(&psf, 6200);
    const auto pa = cache.planFor(a);
    cache.planFor(b);
    QCOMPARE(cache.planFor(a).get(), pa.get()); // a is now the most recent
    cache.planFor(c);                            // drops b
    QCOMPARE(cache.builds(), 3);
    QCOMPARE(cache.planFor(a).get(), pa.get());
    cache.planFor(b);
    QCOMPARE(cache.builds(), 4);
  }

  void carriedPlanIsCheckedAndBypassesTheCache() {
    PlanCache cache;
    ExtractionRequest req = request(&psf);
    req.plan = std::make_shared<const PatchPlan>(fresh(req));
    QCOMPARE(cache.planFor(req).get(), req.plan.get());
    QCOMPARE(cache.builds(), 0);
    ExtractionRequest other = request(&psf, 6100);
    other.plan = req.plan; // made for another grid
    try {
      cache.planFor(other);
      QFAIL("a plan made for another grid was accepted");
    } catch (const InputError& e) {
      QVERIFY2(QString(e.what()).contains("wavelength grid"), e.what());
    }
    ExtractionRequest none;
    QVERIFY_THROWS_EXCEPTION(InputError, cache.planFor(none));
  }

  void cpuEngineBuildsOnePlanForPlanLessRequests() {
    // Plan-less requests to one engine: one plan; a PSF edited in place between
    // requests gets a new one, and the result equals a fresh engine's.
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6100, 0.8);
    so.fiberMin = 25;
    so.nFiber = 10;
    GaussHermitePsf edited = psf;
    const Simulation sim = simulate(edited, so);
    ExtractionRequest req;
    req.image = &sim.image;
    req.psf = &edited;
    req.wave = so.wave;
    req.fiberMin = 25;
    req.nFiber = 10;
    req.threads = 1;
    NullProgress np;
    CancelToken ct;
    CpuEngine engine;
    const ExtractionResult r1 = engine.extract(req, np, ct);
    const ExtractionResult r2 = engine.extract(req, np, ct);
    QCOMPARE(engine.plansBuilt(), 1);
    QVERIFY(r1.flux.data == r2.flux.data);
    for (int f = 0; f < edited.yTrace.coeff.rows; ++f) edited.yTrace.coeff(f, 0) += 0.5;
    const ExtractionResult r3 = engine.extract(req, np, ct);
    QCOMPARE(engine.plansBuilt(), 2);
    QVERIFY(r3.flux.data == CpuEngine().extract(req, np, ct).flux.data);
    QVERIFY(r3.flux.data != r1.flux.data);
    // A request carrying its plan builds none.
    ExtractionRequest carried = req;
    attachPlan(carried);
    CpuEngine other;
    other.extract(carried, np, ct);
    QCOMPARE(other.plansBuilt(), 0);
  }
};

QTEST_GUILESS_MAIN(TestPlanCache)
#include "test_plan_cache.moc"
