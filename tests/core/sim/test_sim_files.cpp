// A simulation written with writeSimulation reads back through the same readers the
// engine and the app use: PSF exactly (float64 coefficients), preproc to float32
// precision with mask and header intact, truth exactly.
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"

#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <filesystem>

using namespace spex;

class TestSimFiles : public QObject {
  Q_OBJECT

private slots:
  void roundTrip() {
    // A small CCD keeps the files small; everything else is the default design.
    SyntheticPsfOptions po;
    po.nfiber = 50;
    po.npixX = 800;
    po.npixY = 1200;
    const GaussHermitePsf psf = makeSyntheticPsf(po);
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 7000, 0.8);
    so.fiberMin = 20;
    so.nFiber = 20;
    const Simulation sim = simulate(psf, so);

    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const std::string dir = tmp.path().toStdString() + "/sim/nested";
    writeSimulation(dir, psf, sim);
    for (const char* name : {"psf.fits", "preproc.fits", "truth.fits"})
      QVERIFY2(std::filesystem::exists(dir + "/" + name), name);

    const GaussHermitePsf p = readPsf(dir + "/psf.fits");
    QCOMPARE(p.nfiber, psf.nfiber);
    QCOMPARE(p.npixX, psf.npixX);
    QCOMPARE(p.npixY, psf.npixY);
    QCOMPARE(p.hsizeX, psf.hsizeX);
    QCOMPARE(p.hsizeY, psf.hsizeY);
    QCOMPARE(p.ghdegX, psf.ghdegX);
    QCOMPARE(p.legdeg, psf.legdeg);
    QCOMPARE(p.psfErr, psf.psfErr);
    QCOMPARE(p.xTrace.wavemin, psf.xTrace.wavemin);
    QCOMPARE(p.ghSigX.wavemax, psf.ghSigX.wavemax);
    QVERIFY(p.xTrace.coeff.data == psf.xTrace.coeff.data);
    QVERIFY(p.yTrace.coeff.data == psf.yTrace.coeff.data);
    QVERIFY(p.ghSigY.coeff.data == psf.ghSigY.coeff.data);
    for (std::size_t k = 0; k < psf.gh.size(); ++k)
      QVERIFY(p.gh[k].coeff.data == psf.gh[k].coeff.data);
    QVERIFY(p.otherParams.count("BUNDLE"));
    for (int s = 0; s < psf.nfiber; s += 7)
      for (double w : {5600.0, 6500.0, 7700.0}) {
        const Spot a = psf.spot(s, w), b = p.spot(s, w);
        QCOMPARE(a.xc, b.xc);
        QCOMPARE(a.yc, b.yc);
        QVERIFY(a.v == b.v);
      }

    const Image img = readPreproc(dir + "/preproc.fits");
    QCOMPARE(img.ny, sim.image.ny);
    QCOMPARE(img.nx, sim.image.nx);
    QVERIFY(img.mask.data == sim.image.mask.data);
    for (std::size_t i = 0; i < img.pix.size(); ++i) {
      // float32 on disk: 2^-24 relative, plus an absolute floor for values near 0.
      const double a = sim.image.pix.data[i], b = img.pix.data[i];
      QVERIFY(std::fabs(a - b) <= 6e-8 * std::fabs(a) + 1e-30);
      const double u = sim.image.ivar.data[i], v = img.ivar.data[i];
      QVERIFY(std::fabs(u - v) <= 6e-8 * u);
    }
    QCOMPARE(img.header.getString("CAMERA"), std::string("r0"));
    QCOMPARE(img.header.getString("FLAVOR"), std::string("science"));
    QCOMPARE(img.header.getString("BUNIT"), std::string("electron"));
    QCOMPARE(int(img.fibermap.fiber.size()), 50);
    QCOMPARE(img.fibermap.fiber[49], 49);

    const Truth t = readTruth(dir + "/truth.fits");
    QCOMPARE(t.fiberMin, 20);
    QVERIFY(t.wave == sim.truth.wave);
    QVERIFY(t.phot.data == sim.truth.phot.data);
    QCOMPARE(t.phot.rows, 20);
  }
};

QTEST_GUILESS_MAIN(TestSimFiles)
#include "test_sim_files.moc"
