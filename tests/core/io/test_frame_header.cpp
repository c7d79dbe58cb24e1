// desispec's frame-header conventions (frame_header.h, docs/desi.md): file names
// shortened against the production roots, DEPNAM/DEPVER pairs, the requested grid of
// a barycentric-corrected extraction, numpy's arange values, desispec's default grid,
// HELIOCOR and --no-scores in a written frame, the -m model file, checksums.
#include "core/errors.h"
#include "core/io/fits_file.h"
#include "core/io/frame_header.h"
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "core/plan/patch_plan.h"
#include "io_test_util.h"
#include "test_data.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstdlib>

using namespace spex;

namespace {

ExtractionResult smallResult(int fiberMin, int nfiber, const WaveGrid& g) {
  ExtractionResult r;
  r.engine = "cpu";
  r.fiberMin = fiberMin;
  r.nfiber = nfiber;
  r.nwave = g.n;
  r.ndiag = 1;
  r.wave = g;
  r.flux = Array2D<double>(nfiber, g.n, 2.0);
  r.ivar = Array2D<double>(nfiber, g.n, 1.0);
  r.mask = Array2D<uint32_t>(nfiber, g.n, 0u);
  r.chi2pix = Array2D<double>(nfiber, g.n, 1.0);
  r.resolution = Array3D<double>(nfiber, 3, g.n);
  for (std::size_t i = 0; i < r.resolution.size(); ++i) r.resolution.data[i] = 1.0 / 3;
  return r;
}

} // namespace

class TestFrameHeader : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;
  std::string tmp(const std::string& n) { return m_tmp.path().toStdString() + "/" + n; }

private slots:
  void initTestCase() { QVERIFY(m_tmp.isValid()); }

  void shortensLikeDesispec() {
    const std::string calib = "/global/cfs/cdirs/desi/spectro/desi_spectro_calib/trunk";
    const std::string redux = "/global/cfs/cdirs/desi/spectro/redux";
    QCOMPARE(shortenFilename(redux + "/daily/preproc/20261122/00001234/preproc-r0-00001234.fits.gz",
                             calib, redux, std::string("daily")),
             std::string("SPECPROD/preproc/20261122/00001234/preproc-r0-00001234.fits.gz"));
    QCOMPARE(shortenFilename(calib + "/spec/sp0/x.fits", calib, redux, std::string("daily")),
             std::string("SPCALIB/spec/sp0/x.fits"));
    // os.path.join: a redux root with a trailing slash, an absolute SPECPROD.
    QCOMPARE(shortenFilename("/r/daily/a.fits", std::nullopt, std::string("/r/"), std::string("daily")),
             std::string("SPECPROD/a.fits"));
    QCOMPARE(shortenFilename("/p/a.fits", std::nullopt, std::string("/r"), std::string("/p")),
             std::string("SPECPROD/a.fits"));
    // Unset variables or other places: unchanged; a plain prefix test, as startswith.
    QCOMPARE(shortenFilename("/r/daily/a.fits", std::nullopt, std::string("/r"), std::nullopt),
             std::string("/r/daily/a.fits"));
    QCOMPARE(shortenFilename("psf.fits", calib, redux, std::string("daily")), std::string("psf.fits"));
    QCOMPARE(shortenFilename("/r/dailyX/a.fits", std::nullopt, std::string("/r"), std::string("daily")),
             std::string("SPECPRODX/a.fits"));
    // From the environment.
    ::setenv("DESI_SPECTRO_REDUX", "/r", 1);
    ::setenv("SPECPROD", "loa", 1);
    ::unsetenv("DESI_SPECTRO_CALIB");
    QCOMPARE(shortenFilename("/r/loa/x.fits"), std::string("SPECPROD/x.fits"));
  }

  void dependenciesKeepSlots() {
    const std::string p = tmp("deps.fits");
    {
      FitsFile f = FitsFile::create(p);
      f.writeImage("X", FitsPixel::Float32, Array2D<float>(2, 2, 0.f));
      f.writeString("DEPNAM00", "python");
      f.writeString("DEPVER00", "3.11");
      f.writeString("DEPNAM01", "spexlab");
      f.writeString("DEPVER01", "0.0.1");
      writeDependencies(f, {{"spexlab", "9.9"}, {"cfitsio", "4.020"}, {"SPECPROD", "NOT_SET"}});
      f.close();
    }
    FitsFile f = FitsFile::openRead(p);
    QCOMPARE(f.readString("DEPNAM00"), std::string("python"));
    QCOMPARE(f.readString("DEPVER01"), std::string("9.9")); // updated in its slot
    QCOMPARE(f.readString("DEPNAM02"), std::string("cfitsio"));
    QCOMPARE(f.readString("DEPNAM03"), std::string("SPECPROD"));
    QCOMPARE(f.readString("DEPVER03"), std::string("NOT_SET"));
    QVERIFY(!f.hasKey("DEPNAM04"));
    const auto deps = spexlabDependencies();
    QCOMPARE(deps.front().first, std::string("spexlab"));
    QCOMPARE(deps.front().second, std::string(SPEXLAB_VERSION));
    QCOMPARE(deps.size(), std::size_t(10));
  }

  void requestedGridAndArange() {
    const WaveGrid asked = WaveGrid::fromRange(6000.0, 6500.0, 0.8);
    for (double factor : {1.000042212625016, 0.9999065187088558, 1.0}) {
      WaveGrid ext = asked;
      ext.wmin = asked.wmin / factor;
      ext.wmax = asked.wmax / factor;
      ext.dw = asked.dw / factor;
      const WaveGrid back = requestedGrid(ext, factor);
      QCOMPARE(back.wmin, 6000.0);
      QCOMPARE(back.wmax, 6500.0);
      QCOMPARE(back.dw, 0.8);
      QCOMPARE(back.n, 626);
    }
    // numpy.arange(6000, 6500.4, 0.8): step (6000 + 0.8) - 6000, not 0.8.
    const std::vector<double> w = arangeValues(asked);
    QCOMPARE(w.size(), std::size_t(626));
    QCOMPARE(w[0], 6000.0);
    QCOMPARE(w[1], 6000.8);
    const double delta = 6000.8 - 6000.0;
    QCOMPARE(w[625], 6000.0 + 625 * delta);
  }

  void defaultGridIsDesispecs() {
    SPEX_REQUIRE_DATA(psfPath, "psf-r0-00067784.fits");
    const GaussHermitePsf psf = readPsf(psfPath);
    // The PSF HDU's WAVEMIN/WAVEMAX (5543, 7827), not the traces' (5543, 7826).
    const WaveGrid g = defaultFrameGrid(psf);
    QCOMPARE(g.wmin, 5543.0);
    QCOMPARE(g.dw, 0.8);
    QCOMPARE(g.n, 2856); // len(arange(5543, 7827 + 0.4, 0.8))
    QVERIFY(std::abs(g.last() - 7827.0) < 1e-9);
    // The planner takes it (the last bin lies 1 A past the traces' domain).
    const PatchPlan plan = makePatchPlan(psf, g, 0, 25, PatchParams{});
    QVERIFY(!plan.patches.empty());
  }

  void heliocorAndNoScores() {
    Image img = iotest::smallImage(4, 5);
    const WaveGrid asked = WaveGrid::fromRange(6000.0, 6040.0, 0.8);
    const double factor = 0.9999065187088558;
    WaveGrid ext = asked;
    ext.wmin /= factor;
    ext.wmax /= factor;
    ext.dw /= factor;
    const std::string p = tmp("helio.fits");
    FrameMeta meta;
    meta.heliocor = factor;
    meta.scores = false;
    meta.inputPsf = "/nowhere/psf.fits"; // no such file: no ORIG_PSF, no error
    writeFrame(p, smallResult(3, 4, ext), img, meta);
    {
      FitsFile f = FitsFile::openRead(p);
      QCOMPARE(f.readDouble("HELIOCOR"), factor);
      QCOMPARE(f.readDouble("WAVEMIN"), 6000.0);
      QCOMPARE(f.readDouble("WAVESTEP"), 0.8);
      QCOMPARE(f.readLong("FIBERMIN"), 3LL); // no FIBERMAP: 500 x petal 0 + specmin
      QVERIFY(!f.hasKey("ORIG_PSF"));
      QVERIFY(!f.tryMoveTo("SCORES"));
      for (int i = 0; i < f.hduCount(); ++i) {
        f.moveToIndex(i);
        QVERIFY(f.verifyChecksum());
      }
    }
    const ExtractionResult back = readFrame(p);
    QCOMPARE(back.heliocor, factor);
    QCOMPARE(back.wave.wmin, 6000.0); // the requested grid, as desispec writes it

    // heliocor 1: no HELIOCOR even when the input header carries one.
    img.header.set("HELIOCOR", "1.0001");
    const std::string q = tmp("nohelio.fits");
    writeFrame(q, smallResult(0, 2, asked), img, FrameMeta{});
    FitsFile f = FitsFile::openRead(q);
    QVERIFY(!f.hasKey("HELIOCOR"));
    QVERIFY(f.tryMoveTo("SCORES"));
  }

  void modelFileAsDesispecWritesIt() {
    SPEX_REQUIRE_DATA(psfPath, "psf-r0-00067784.fits");
    Image img = iotest::smallImage(6, 7);
    Array2D<double> model(6, 7);
    for (std::size_t i = 0; i < model.size(); ++i) model.data[i] = 0.25 * double(i);
    const ExtractionResult r = smallResult(0, 2, WaveGrid::fromRange(6000, 6008, 0.8));
    FrameMeta meta;
    meta.inputImage = "preproc-r0-00001234.fits";
    meta.inputPsf = psfPath; // a real PSF: its PSF HDU's IN_PSF becomes ORIG_PSF
    const std::string p = tmp("model.fits");
    writeModel(p, model, img, r, meta);
    QCOMPARE(readModel(p).data, model.data);
    FitsFile f = FitsFile::openRead(p);
    QCOMPARE(f.hduCount(), 1);
    QCOMPARE(f.hduName(), std::string("IMAGE"));
    QCOMPARE(f.readString("BUNIT"), std::string("electron"));
    QCOMPARE(f.readString("CAMERA"), std::string("r0"));
    QCOMPARE(f.readLong("NSPEC"), 2LL);
    QCOMPARE(f.readDouble("WAVESTEP"), 0.8);
    QCOMPARE(f.readString("IN_IMG"), meta.inputImage);
    QCOMPARE(f.readString("ORIG_PSF"),
             std::string("SPECPROD/calibnight/20201214/psfnight-r0-20201214.fits"));
    QCOMPARE(f.readLong("NSUBBUND"), 5LL);
    QVERIFY(f.hasKey("DEPNAM00"));
    QVERIFY(f.verifyChecksum());
  }
};

QTEST_GUILESS_MAIN(TestFrameHeader)
#include "test_frame_header.moc"
