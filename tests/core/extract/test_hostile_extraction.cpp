// Extraction on hostile but readable inputs (issue 11, docs/reliability.md): a patch
// that fails must leave masked bins (NODATA), not silent zeros; an image of finite but
// absurd values (1e300) must give a frame that is finite or masked. The real r0 PSF,
// one sub-bundle of 5 fibers, 100 wavelengths: a second on two cores.
#include "core/extract/cpu_engine.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"
#include "test_data.h"

#include <QTest>

#include <cmath>
#include <limits>

using namespace spex;

namespace {
struct NullProgress : ProgressSink {};
} // namespace

class TestHostileExtraction : public QObject {
  Q_OBJECT
  GaussHermitePsf psf;
  WaveGrid grid = WaveGrid::fromRange(6000, 6079.2, 0.8);
  Simulation sim;

  ExtractionResult run(const GaussHermitePsf& p, const Image& img) {
    ExtractionRequest req;
    req.image = &img;
    req.psf = &p;
    req.wave = grid;
    req.fiberMin = 0;
    req.nFiber = 5;
    req.threads = 2;
    NullProgress np;
    CancelToken ct;
    return CpuEngine().extract(req, np, ct);
  }

private slots:
  void initTestCase() {
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    psf = readPsf(path);
    SimulationOptions so;
    so.wave = grid;
    so.nFiber = 5;
    so.seed = 3;
    so.defects = false;
    sim = simulate(psf, so);
  }

  void cleanRunHasNoNoData() {
    const ExtractionResult r = run(psf, sim.image);
    QCOMPARE(r.noDataBins, 0L);
    for (uint32_t m : r.mask.data) QVERIFY((m & kNoData) == 0);
  }

  void failedPatchBinsAreMaskedNoData() {
    // readPsf refuses GHSIGX = 0; a PSF built in memory is not read, so this is what
    // the engine meets if one slips through: every patch of the sub-bundle fails.
    GaussHermitePsf bad = psf;
    for (int c = 0; c < bad.ghSigX.coeff.cols; ++c) bad.ghSigX.coeff(2, c) = 0.0;
    const ExtractionResult r = run(bad, sim.image);
    int failed = 0;
    for (const auto& d : r.patches) failed += d.failed;
    qInfo("%d of %zu patches failed, %ld NODATA bins", failed, r.patches.size(), r.noDataBins);
    long noData = 0;
    for (int f = 0; f < r.nfiber; ++f)
      for (int w = 0; w < r.nwave; ++w) {
        QVERIFY(std::isfinite(r.flux(f, w)) && std::isfinite(r.ivar(f, w)));
        if (r.ivar(f, w) == 0 && !(r.mask(f, w) & kAllBadPix))
          QVERIFY2(r.mask(f, w) & kNoData, "ivar 0 without NODATA");
        noData += (r.mask(f, w) & kNoData) != 0;
      }
    QCOMPARE(noData, r.noDataBins);
    if (failed > 0) QVERIFY(r.noDataBins > 0);
    QVERIFY2(failed > 0 || r.noDataBins > 0, "a zero-width spot neither failed nor was masked");
  }

  void absurdFiniteImageGivesFiniteOrMaskedFrame() {
    Image img = sim.image;
    for (double& v : img.pix.data) v = 1e300;
    const ExtractionResult r = run(psf, img);
    constexpr double fmax = std::numeric_limits<float>::max();
    long masked = 0;
    for (int f = 0; f < r.nfiber; ++f)
      for (int w = 0; w < r.nwave; ++w) {
        QVERIFY(std::abs(r.flux(f, w)) <= fmax && r.ivar(f, w) >= 0 && r.ivar(f, w) <= fmax);
        QVERIFY(std::abs(r.chi2pix(f, w)) <= fmax);
        if (r.mask(f, w) & kNoData) {
          ++masked;
          QCOMPARE(r.ivar(f, w), 0.0);
        }
      }
    qInfo("1e300 image: %ld of %d bins NODATA (%ld not float32-representable)", masked,
          r.nfiber * r.nwave, r.nonFiniteBins);
    QVERIFY(r.nonFiniteBins > 0);
    QCOMPARE(masked, r.noDataBins);
  }
};

QTEST_GUILESS_MAIN(TestHostileExtraction)
#include "test_hostile_extraction.moc"
