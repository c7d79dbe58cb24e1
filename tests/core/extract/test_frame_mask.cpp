// ALLBADPIX (docs/desi.md): SpexLab flags a bin when its spot's masked weight is
// within 1e-9 of 1; desispec when pixmask_fraction == 1.0 exactly. Ours must be a
// superset of desispec's on every input: checked on the rule itself (finalizeFrame
// over hand-set fractions) and on an extraction whose masked blocks cover whole spots,
// partly and wholly, where desispec's rule is applied to the same fractions.
#include "core/extract/cpu_engine.h"
#include "core/extract/engine.h"
#include "core/sim/simulator.h"

#include <QTest>

#include <cmath>

using namespace spex;

namespace {
class NullProgress : public ProgressSink {};

bool desispecAllBad(double pm) { return pm == 1.0; } // mask[pixmask_fraction == 1.0]
bool desispecSomeBad(double pm) { return pm > 0.5; }
} // namespace

class TestFrameMask : public QObject {
  Q_OBJECT

private slots:
  void ruleIsSuperset() {
    const std::vector<double> fractions{0.0, 0.3, 0.5, 0.5000001, 0.9, 1.0 - 1e-6, 1.0 - 2e-9,
                                        1.0 - 1e-9, 1.0 - 1e-12, 1.0 - 1e-16, 1.0, 1.0 + 1e-15};
    ExtractionResult r;
    r.nfiber = 1;
    r.nwave = int(fractions.size());
    r.wave = WaveGrid{6000, 6000 + 0.8 * (r.nwave - 1), 0.8, r.nwave};
    r.flux = Array2D<double>(1, r.nwave, 1.0);
    r.ivar = Array2D<double>(1, r.nwave, 1.0);
    r.mask = Array2D<uint32_t>(1, r.nwave, 0u);
    r.chi2pix = Array2D<double>(1, r.nwave, 1.0);
    r.covered = Array2D<uint8_t>(1, r.nwave, 1);
    r.pixmaskFraction = Array2D<double>(1, r.nwave);
    for (int j = 0; j < r.nwave; ++j) r.pixmaskFraction(0, j) = fractions[std::size_t(j)];
    finalizeFrame(r);
    for (int j = 0; j < r.nwave; ++j) {
      const double pm = fractions[std::size_t(j)];
      const bool all = r.mask(0, j) & kAllBadPix, some = r.mask(0, j) & kSomeBadPix;
      if (desispecAllBad(pm)) QVERIFY2(all, qPrintable(QString::number(pm, 'g', 17)));
      QCOMPARE(some, desispecSomeBad(pm));      // SOMEBADPIX: the same rule
      QCOMPARE(all, pm >= 1.0 - 1e-9);          // ours: within 1e-9 of 1
    }
  }

  void extractionIsSuperset() {
    SyntheticPsfOptions po;
    po.nfiber = 25;
    po.npixX = 400;
    po.seed = 3;
    const GaussHermitePsf psf = makeSyntheticPsf(po);
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6200, 6400, 0.8);
    so.nFiber = 25;
    so.defects = false;
    so.seed = 9;
    Simulation sim = simulate(psf, so);
    // A block over fibers 10..13 around 6300 A, wide enough to hold whole spots of the
    // middle fibers and parts of the outer ones; a short masked column through fiber 4.
    const double w0 = 6300;
    const int y0 = int(std::lround(psf.y(11, w0)));
    const int xa = int(std::lround(psf.x(10, w0))), xb = int(std::lround(psf.x(13, w0)));
    for (int y = y0 - 25; y <= y0 + 25; ++y)
      for (int x = xa - 3; x <= xb + 3; ++x) sim.image.ivar(y, x) = 0;
    const int col = int(std::lround(psf.x(4, 6250)));
    for (int y = y0 - 200; y <= y0 + 200; ++y) sim.image.ivar(y, col) = 0;

    ExtractionRequest req;
    req.image = &sim.image;
    req.psf = &psf;
    req.wave = so.wave;
    req.fiberMin = 0;
    req.nFiber = 25;
    req.threads = 2;
    NullProgress np;
    CancelToken ct;
    const ExtractionResult r = CpuEngine().extract(req, np, ct);
    long theirs = 0, ours = 0, missed = 0, extra = 0, someDiff = 0;
    for (int f = 0; f < r.nfiber; ++f)
      for (int j = 0; j < r.nwave; ++j) {
        const double pm = r.pixmaskFraction(f, j);
        const bool all = r.mask(f, j) & kAllBadPix;
        theirs += desispecAllBad(pm);
        ours += all;
        missed += desispecAllBad(pm) && !all;
        extra += all && !desispecAllBad(pm);
        someDiff += bool(r.mask(f, j) & kSomeBadPix) != desispecSomeBad(pm);
        if (all) QVERIFY(pm >= 1.0 - 1e-9 && pm <= 1.0 + 1e-9);
      }
    qInfo("ALLBADPIX: desispec's rule %ld bins, ours %ld (%ld more: fractions that round "
          "below 1), missed %ld; SOMEBADPIX differs in %ld",
          theirs, ours, extra, missed, someDiff);
    QVERIFY(ours > 0);  // the block covers whole spots
    QCOMPARE(missed, 0L);
    QCOMPARE(someDiff, 0L);
    QVERIFY(ours >= theirs);
  }
};

QTEST_GUILESS_MAIN(TestFrameMask)
#include "test_frame_mask.moc"
