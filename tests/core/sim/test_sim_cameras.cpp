// Every DESI arm end to end on a petal other than 0: the simulator writes a PSF and a
// preproc for camera b3, r5 and z7 (the arm's wavelengths, FIBER = 500 p + i,
// CAMERA/SPECGRPH/PETAL), the CPU engine extracts spectra 5..14 (-s 5 -n 10) over the
// arm's whole DESI grid, writeFrame writes the frame and readFrame reads it back:
// FIBERMAP rows, FIBER values, FIBERMIN, wave range and the extraction's quality.
#include "core/errors.h"
#include "core/extract/compare.h"
#include "core/extract/cpu_engine.h"
#include "core/io/fits_file.h"
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"
#include "test_data.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>

using namespace spex;

namespace {

class NullProgress : public ProgressSink {};

// Pulls (FLUX - R PHOT / dw) sqrt(IVAR) of frame rows against truth rows t0.., the
// first and last `edge` bins left out.
void pulls(const ExtractionResult& r, const Truth& t, int t0, int edge, double& mean, double& sd,
           long& n) {
  double s = 0, s2 = 0;
  n = 0;
  for (int f = 0; f < r.nfiber; ++f)
    for (int i = edge; i < r.nwave - edge; ++i) {
      if (r.ivar(f, i) <= 0) continue;
      double conv = 0;
      for (int k = 0; k <= 2 * r.ndiag; ++k) {
        const int j = i + r.ndiag - k;
        if (j >= 0 && j < r.nwave) conv += r.resolution(f, k, j) * t.phot(t0 + f, j);
      }
      const double x = (r.flux(f, i) - conv / r.wave.dw) * std::sqrt(r.ivar(f, i));
      s += x;
      s2 += x * x;
      ++n;
    }
  mean = s / double(n);
  sd = std::sqrt(s2 / double(n) - mean * mean);
}

} // namespace

class TestSimCameras : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;

private slots:
  void initTestCase() { QVERIFY(m_tmp.isValid()); }

  void parseCameraNames() {
    QCOMPARE(parseCamera("z7").arm, 'z');
    QCOMPARE(parseCamera("Z7").petal, 7);
    QCOMPARE(parseCamera("b0").name(), std::string("b0"));
    for (const char* bad : {"", "r", "q3", "r10", "7z"})
      QVERIFY_THROWS_EXCEPTION(InputError, parseCamera(bad));
    QCOMPARE(desiArmGrid('b').wmin, 3600.0);
    QCOMPARE(desiArmGrid('b').last(), 5800.0);
    QCOMPARE(desiArmGrid('z').n, 2881);
    QVERIFY(std::abs(desiArmGrid('z').last() - 9824.0) < 1e-9);
  }

  void endToEnd_data() {
    QTest::addColumn<QString>("camera");
    QTest::newRow("b3") << "b3";
    QTest::newRow("r5") << "r5";
    QTest::newRow("z7") << "z7";
  }

  void endToEnd() {
    QFETCH(QString, camera);
    const Camera cam = parseCamera(camera.toStdString());
    const int petal = cam.petal;
    const std::string dir = m_tmp.path().toStdString() + "/" + cam.name();

    // 25 fibers on a narrow CCD keep the files small; the rows (dispersion) are DESI's.
    SyntheticPsfOptions po = SyntheticPsfOptions::forCamera(cam);
    po.nfiber = 25;
    po.npixX = 400;
    po.seed = 11;
    SimulationOptions so;
    so.camera = cam;
    so.wave = desiArmGrid(cam.arm);
    so.fiberMin = 0;
    so.nFiber = 25;
    so.seed = 5;
    {
      const GaussHermitePsf psf = makeSyntheticPsf(po);
      writeSimulation(dir, psf, simulate(psf, so));
    }

    const GaussHermitePsf psf = readPsf(dir + "/psf.fits");
    const Image img = readPreproc(dir + "/preproc.fits");
    QCOMPARE(psf.camera, cam.name());
    QCOMPARE(img.header.getString("CAMERA"), cam.name());
    QCOMPARE(img.header.getString("SPECGRPH"), std::to_string(petal));
    QCOMPARE(img.header.getString("PETAL"), std::to_string(petal));
    QCOMPARE(img.fibermap.fiber.size(), std::size_t(25));
    for (int i = 0; i < 25; ++i) QCOMPARE(int(img.fibermap.fiber[std::size_t(i)]), 500 * petal + i);

    // -s 5 -n 10 over the arm's grid.
    ExtractionRequest req;
    req.image = &img;
    req.psf = &psf;
    req.wave = desiArmGrid(cam.arm);
    req.fiberMin = 5;
    req.nFiber = 10;
    req.threads = 2;
    NullProgress np;
    CancelToken ct;
    const ExtractionResult r = CpuEngine().extract(req, np, ct);
    FrameMeta meta;
    meta.inputImage = dir + "/preproc.fits";
    meta.inputPsf = dir + "/psf.fits";
    const std::string framePath = dir + "/frame.fits";
    writeFrame(framePath, r, img, meta);

    const ExtractionResult back = readFrame(framePath);
    QCOMPARE(back.fiberMin, 5);
    QCOMPARE(back.nfiber, 10);
    QCOMPARE(back.fibers.size(), std::size_t(10));
    for (int i = 0; i < 10; ++i) QCOMPARE(back.fiberNumber(i), 500 * petal + 5 + i);
    QCOMPARE(back.wave.wmin, req.wave.wmin);
    QCOMPARE(back.wave.n, req.wave.n);
    QVERIFY(std::abs(back.wave.last() - req.wave.last()) < 1e-6);
    QVERIFY(compareFrames(back, r).fractionBelow[3] >= 0.999); // float32 storage only
    {
      FitsFile f = FitsFile::openRead(framePath);
      QCOMPARE(f.readLong("FIBERMIN"), 500LL * petal + 5);
      QCOMPARE(f.readString("CAMERA"), cam.name());
      f.moveTo("FIBERMAP");
      QCOMPARE(f.numRows(), 10L);
      const std::vector<int32_t> fib = f.readColumnInt("FIBER");
      for (int i = 0; i < 10; ++i) QCOMPARE(int(fib[std::size_t(i)]), 500 * petal + 5 + i);
      f.moveTo("SCORES");
      QVERIFY(f.hasColumn(std::string("SUM_RAW_COUNT_") + char(std::toupper(cam.arm))));
    }

    // The extraction is right on every arm: pulls against the truth near N(0, 1).
    const Truth truth = readTruth(dir + "/truth.fits");
    double mean = 0, sd = 0;
    long n = 0;
    pulls(back, truth, 5 - truth.fiberMin, 6, mean, sd, n);
    qInfo("%s: %ld bins, pulls mean %.4f std %.4f", cam.name().c_str(), n, mean, sd);
    QVERIFY(n > 10 * (req.wave.n - 12) * 9 / 10);
    // ~28 000 bins: sampling error of the mean 0.006, of the std 0.004.
    QVERIFY(std::abs(mean) < 0.03);
    QVERIFY(std::abs(sd - 1) < 0.03);

    // A FIBERMAP too short for the request is refused, naming the rows.
    ExtractionResult wide = r;
    wide.fiberMin = 20;
    try {
      writeFrame(dir + "/short.fits", wide, img, meta);
      QFAIL("no throw");
    } catch (const InputError& e) {
      QVERIFY2(std::string(e.what()).find("has 25 rows") != std::string::npos, e.what());
    }
    QVERIFY(!std::filesystem::exists(dir + "/short.fits"));
  }
};

QTEST_GUILESS_MAIN(TestSimCameras)
#include "test_sim_cameras.moc"
