// Frame, model and truth files (EXTRACTION.md §5): gpu_specter's frame and model and
// the simulation truth from the shared data; SpexLab frames written and read back
// with every HDU, type, unit and key checked by raw CFITSIO; FIBERMAP trimmed to the
// extracted fibers; failed writes leave nothing and keep the old file.
#include "core/errors.h"
#include "core/io/fits_scan.h"
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "io_test_util.h"
#include "test_data.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <fstream>
#include <sstream>

using namespace spex;

namespace {

ExtractionResult syntheticResult(int fiberMin, int nfiber, int nwave, int ndiag) {
  ExtractionResult r;
  r.engine = "cpu";
  r.fiberMin = fiberMin;
  r.nfiber = nfiber;
  r.nwave = nwave;
  r.ndiag = ndiag;
  r.wave = WaveGrid{6000.0, 6000.0 + 0.8 * (nwave - 1), 0.8, nwave};
  r.params.bundlesize = 25;
  r.params.nsubbundles = 5;
  r.params.nwavestep = 30;
  r.params.wavepadFrac = 0.3;
  r.params.pixpadFrac = 0.7;
  r.params.regularize = 1e-3;
  r.params.mode = Decorrelation::Noise;
  r.psferr = 0.015;
  r.flux = Array2D<double>(nfiber, nwave);
  r.ivar = Array2D<double>(nfiber, nwave);
  r.mask = Array2D<uint32_t>(nfiber, nwave, 0u);
  r.chi2pix = Array2D<double>(nfiber, nwave);
  r.resolution = Array3D<double>(nfiber, 2 * ndiag + 1, nwave);
  for (int s = 0; s < nfiber; ++s)
    for (int j = 0; j < nwave; ++j) {
      r.flux(s, j) = 10.0 * s + 0.1 * j - 1.0;
      r.ivar(s, j) = 0.5 + 0.01 * j;
      r.chi2pix(s, j) = 1.0 + 0.001 * s * j;
      for (int k = 0; k < 2 * ndiag + 1; ++k) r.resolution(s, k, j) = 0.1 * k + 0.001 * s;
    }
  r.mask(1, 2) = kSomeBadPix;
  r.mask(2, 3) = kSomeBadPix | kAllBadPix | kBad2DFit;
  r.mask(0, 0) = 0x80000001u; // the top bit must survive the uint32 storage
  r.covered = Array2D<uint8_t>(nfiber, nwave, 1);
  return r;
}

std::string fileBytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A file's bytes with the time of writing taken out: CFITSIO's CHECKSUM card (whose
// value covers its own dated comment) blanked, DATASUM's value kept, its comment blanked.
std::string undatedBytes(const std::string& p) {
  std::string b = fileBytes(p);
  for (std::size_t i = 0; i + 80 <= b.size(); i += 80) {
    if (b.compare(i, 9, "CHECKSUM=") == 0) b.replace(i, 80, std::string(80, ' '));
    if (b.compare(i, 9, "DATASUM =") == 0) b.replace(i + 30, 50, std::string(50, ' '));
  }
  return b;
}

} // namespace

class TestFrameIo : public QObject {
  Q_OBJECT

private:
  QTemporaryDir m_tmp;
  std::string tmp(const std::string& n) { return m_tmp.path().toStdString() + "/" + n; }

  // A small preproc whose FIBERMAP holds 12 fibers in shuffled order.
  Image sourceImage() {
    const std::string p = tmp("src-preproc.fits");
    if (!std::filesystem::exists(p))
      writePreproc(p, iotest::smallImage(4, 5),
                   iotest::smallFibermap({7, 0, 5, 3, 9, 4, 6, 1, 2, 8, 10, 11}));
    return readPreproc(p);
  }

private slots:
  void initTestCase() { QVERIFY(m_tmp.isValid()); }

  void readGpuSpecterFrame() {
    SPEX_REQUIRE_DATA(path, "sim-r0-bundle0-6000-6500/frame-gpu_specter.fits");
    const ExtractionResult r = readFrame(path);
    QCOMPARE(r.nfiber, 25);
    QCOMPARE(r.nwave, 626);
    QCOMPARE(r.ndiag, 5);
    QCOMPARE(r.fiberMin, 0);
    QCOMPARE(r.wave.n, 626);
    QCOMPARE(r.wave.wmin, 6000.0);
    QVERIFY(std::abs(r.wave.dw - 0.8) < 1e-9);
    QVERIFY(std::abs(r.wave.last() - 6500.0) < 1e-6);
    QCOMPARE(r.resolution.n0, 25);
    QCOMPARE(r.resolution.n1, 11);
    QCOMPARE(r.resolution.n2, 626);
    QCOMPARE(r.mask.rows, 25);
    QCOMPARE(r.chi2pix.cols, 626);
    QCOMPARE(r.covered.size(), std::size_t(25 * 626));
    for (uint8_t c : r.covered.data) QCOMPARE(int(c), 1);
    // Values as raw CFITSIO reads them (float32 on disk).
    iotest::Raw raw(path);
    raw.hduIndex(0);
    QCOMPARE(raw.pixels(), r.flux.data);
    raw.hdu("IVAR");
    QCOMPARE(raw.pixels(), r.ivar.data);
    raw.hdu("MASK");
    QCOMPARE(raw.bitpix(), 64);
    const auto m = raw.pixels();
    for (std::size_t i = 0; i < m.size(); ++i) QCOMPARE(double(r.mask.data[i]), m[i]);
    raw.hdu("RESOLUTION");
    QCOMPARE(raw.pixels(), r.resolution.data);
    // The central diagonal dominates where there is signal.
    long positive = 0;
    for (int s = 0; s < 25; ++s)
      for (int j = 10; j < 616; ++j) positive += r.ivar(s, j) > 0 && r.resolution(s, 5, j) > 0.1;
    QVERIFY(positive > 1000);
  }

  void readSharedTruthAndModel() {
    SPEX_REQUIRE_DATA(truthPath, "sim-r0-bundle0-6000-6500/truth.fits");
    const Truth t = readTruth(truthPath);
    QCOMPARE(t.phot.rows, 25);
    QCOMPARE(t.phot.cols, 626);
    QCOMPARE(t.wave.size(), std::size_t(626));
    QCOMPARE(t.wave.front(), 6000.0);
    QVERIFY(std::abs(t.wave.back() - 6500.0) < 1e-6);
    QCOMPARE(t.fiberMin, 0);
    double total = 0;
    for (double v : t.phot.data) total += v;
    QVERIFY(total > 0);

    SPEX_REQUIRE_DATA(modelPath, "sim-r0-bundle0-6000-6500/model-gpu_specter.fits.gz");
    const Array2D<double> model = readModel(modelPath);
    QCOMPARE(model.rows, 4128);
    QCOMPARE(model.cols, 4114);
  }

  void frameRoundTrip() {
    const Image img = sourceImage();
    QCOMPARE(img.fibermap.fiber.size(), std::size_t(12));
    const ExtractionResult r = syntheticResult(3, 5, 40, 2);
    FrameMeta meta;
    meta.inputImage = "preproc-r0-00001234.fits";
    meta.inputPsf = "psf-r0-00001234.fits";
    const std::string p = tmp("frame.fits");
    writeFrame(p, r, img, meta);

    {
      iotest::Raw raw(p);
      QCOMPARE(raw.hduCount(), 8);
      const std::vector<std::string> names{"FLUX",       "IVAR",     "MASK",    "WAVELENGTH",
                                           "RESOLUTION", "FIBERMAP", "CHI2PIX", "SCORES"};
      for (int i = 0; i < 8; ++i) {
        raw.hduIndex(i);
        QCOMPARE(raw.extname(), names[std::size_t(i)]);
        QVERIFY(raw.hasKey("CHECKSUM") && raw.hasKey("DATASUM")); // every HDU
      }
      raw.hdu("FLUX");
      QCOMPARE(raw.bitpix(), -32);
      QCOMPARE(raw.naxes(), (std::vector<long>{40, 5}));
      QCOMPARE(raw.str("BUNIT"), std::string("electron/Angstrom"));
      QCOMPARE(raw.str("CAMERA"), std::string("r0")); // from the image header
      QCOMPARE(raw.str("FLAVOR"), std::string("science"));
      QCOMPARE(raw.lng("EXPID"), 1234LL);
      QCOMPARE(raw.lng("SPECMIN"), 3LL);
      QCOMPARE(raw.lng("SPECMAX"), 7LL);
      QCOMPARE(raw.lng("NSPEC"), 5LL);
      QCOMPARE(raw.lng("NWAVE"), 40LL);
      QCOMPARE(raw.dbl("WAVEMIN"), 6000.0);
      QCOMPARE(raw.dbl("WAVESTEP"), 0.8);
      QCOMPARE(raw.str("IN_IMG"), meta.inputImage);
      QCOMPARE(raw.str("IN_PSF"), meta.inputPsf);
      QCOMPARE(raw.lng("BUNDLSIZ"), 25LL);
      QCOMPARE(raw.lng("NSUBBUND"), 5LL);
      QCOMPARE(raw.lng("NWAVSTEP"), 30LL);
      QCOMPARE(raw.lng("WAVEPAD"), 13LL);
      QCOMPARE(raw.dbl("PIXPADFR"), 0.7);
      QCOMPARE(raw.dbl("REGULARZ"), 1e-3);
      QCOMPARE(raw.dbl("PSFERR"), 0.015);
      QCOMPARE(raw.str("DECORR"), std::string("NOISE"));
      raw.hdu("IVAR");
      QCOMPARE(raw.bitpix(), -32);
      QCOMPARE(raw.str("BUNIT"), std::string("Angstrom2/electron2"));
      raw.hdu("MASK");
      QCOMPARE(raw.bitpix(), 32);
      QCOMPARE(raw.dbl("BZERO"), 2147483648.0);
      QCOMPARE(raw.pixels()[0], double(0x80000001u));
      raw.hdu("WAVELENGTH");
      QCOMPARE(raw.bitpix(), -64);
      QCOMPARE(raw.str("BUNIT"), std::string("Angstrom"));
      QCOMPARE(raw.naxes(), (std::vector<long>{40}));
      QCOMPARE(raw.pixels()[39], 6000.0 + 39 * 0.8);
      raw.hdu("RESOLUTION");
      QCOMPARE(raw.bitpix(), -32);
      QCOMPARE(raw.naxes(),
               (std::vector<long>{40, 5, 5})); // NAXIS1 nwave, NAXIS2 2ndiag+1, NAXIS3 nfiber
      raw.hdu("FLUX");
      QCOMPARE(raw.lng("FIBERMIN"), 1LL); // desispec: min(FIBER) of the frame's rows
      raw.hdu("FIBERMAP");
      // Rows 3..7 of the source table, in its order, whatever FIBER they hold
      // (desispec: fibermap[specmin:specmin+nspec]).
      const std::vector<long long> fibers{3, 9, 4, 6, 1};
      QCOMPARE(raw.rows(), 5L);
      QCOMPARE(raw.longColumn("FIBER"), fibers);
      const auto tid = raw.longColumn("TARGETID");
      for (int i = 0; i < 5; ++i) QCOMPARE(tid[std::size_t(i)], 1000000000000LL + fibers[std::size_t(i)]);
      QCOMPARE(raw.stringColumn("OBJTYPE", 3)[2], std::string("SKY")); // FIBER 4
      raw.hdu("CHI2PIX");
      QCOMPARE(raw.bitpix(), -32);
    }

    const ExtractionResult back = readFrame(p);
    QCOMPARE(back.engine, std::string("cpu"));
    QCOMPARE(back.fiberMin, 3);
    QCOMPARE(back.fibers, (std::vector<int32_t>{3, 9, 4, 6, 1}));
    QCOMPARE(back.fiberNumber(1), 9);
    QCOMPARE(back.nfiber, 5);
    QCOMPARE(back.nwave, 40);
    QCOMPARE(back.ndiag, 2);
    QCOMPARE(back.wave.wmin, r.wave.wmin);
    QCOMPARE(back.wave.dw, r.wave.dw);
    QCOMPARE(back.wave.wmax, r.wave.wmax);
    QCOMPARE(back.wave.n, r.wave.n);
    QCOMPARE(back.params.nwavestep, 30);
    QCOMPARE(back.params.wavepadFrac, 0.3);
    QCOMPARE(back.params.pixpadFrac, 0.7);
    QCOMPARE(back.params.regularize, 1e-3);
    QVERIFY(back.params.mode == Decorrelation::Noise);
    QCOMPARE(back.psferr, 0.015);
    QCOMPARE(back.mask.data, r.mask.data);
    for (std::size_t i = 0; i < r.flux.size(); ++i) {
      QCOMPARE(back.flux.data[i], double(float(r.flux.data[i])));
      QCOMPARE(back.ivar.data[i], double(float(r.ivar.data[i])));
      QCOMPARE(back.chi2pix.data[i], double(float(r.chi2pix.data[i])));
    }
    for (std::size_t i = 0; i < r.resolution.size(); ++i)
      QCOMPARE(back.resolution.data[i], double(float(r.resolution.data[i])));
  }

  void gpuSpecterFrameRewritten() {
    // gpu_specter's frame written again by SpexLab with the FIBERMAP copied from the
    // gzip-compressed preproc (500 rows): 25 rows remain and every number survives.
    SPEX_REQUIRE_DATA(framePath, "sim-r0-bundle0-6000-6500/frame-gpu_specter.fits");
    SPEX_REQUIRE_DATA(preprocPath, "sim-r0-bundle0-6000-6500/preproc.fits.gz");
    const ExtractionResult r = readFrame(framePath);
    Image img;
    img.fibermap.sourceFile = preprocPath;
    for (int i = 0; i < 500; ++i) img.fibermap.fiber.push_back(i); // its FIBER column
    img.header.set("FLAVOR", "'science '");
    const std::string p = tmp("frame-rewritten.fits");
    FrameMeta meta;
    meta.inputImage = preprocPath;
    meta.inputPsf = "psf-r0-00067784.fits";
    meta.camera = "r0";
    writeFrame(p, r, img, meta);
    {
      iotest::Raw raw(p);
      raw.hdu("FIBERMAP");
      QCOMPARE(raw.rows(), 25L);
      const auto fiber = raw.longColumn("FIBER");
      for (int i = 0; i < 25; ++i) QCOMPARE(fiber[std::size_t(i)], (long long)i);
      raw.hdu("MASK");
      QCOMPARE(raw.bitpix(), 32); // uint32, not gpu_specter's int64
    }
    const ExtractionResult back = readFrame(p);
    QCOMPARE(back.flux.data, r.flux.data);
    QCOMPARE(back.ivar.data, r.ivar.data);
    QCOMPARE(back.mask.data, r.mask.data);
    QCOMPARE(back.resolution.data, r.resolution.data);
    QCOMPARE(back.chi2pix.data, r.chi2pix.data);
    QCOMPARE(back.wave.wmin, r.wave.wmin);
    QCOMPARE(back.wave.dw, r.wave.dw);
    QCOMPARE(back.ndiag, 5);
  }

  void fibermapKeptInMemoryIsCopiedByteForByte() {
    // The preproc's FIBERMAP HDU is kept at read time; the frame written from it must be
    // the frame written by reopening the preproc (as before), byte for byte, for the
    // shared .gz preproc and a plain copy of it, and needs no preproc file any more.
    SPEX_REQUIRE_DATA(gzPath, "sim-r0-bundle0-6000-6500/preproc.fits.gz");
    const std::string gz = tmp("kept-preproc.fits.gz"), plain = tmp("kept-preproc.fits");
    std::filesystem::copy_file(gzPath, gz, std::filesystem::copy_options::overwrite_existing);
    {
      const auto bytes = inflateGzipFile(gz);
      std::ofstream(plain, std::ios::binary).write(bytes->data(), std::streamsize(bytes->size()));
    }
    ExtractionResult r = syntheticResult(3, 5, 20, 2); // rows 3..7 of 500
    std::string framesFromMemory[2];
    for (int k = 0; k < 2; ++k) {
      const std::string src = k == 0 ? gz : plain;
      Image img = readPreproc(src);
      QCOMPARE(img.fibermap.sourceFile, src);
      QVERIFY(img.fibermap.hduBytes.size() > 2880);
      QCOMPARE(img.fibermap.hduBytes.size() % 2880, std::size_t(0));
      QVERIFY(img.fibermap.hduBytes.compare(0, 20, "XTENSION= 'BINTABLE'") == 0);

      const std::string fromFile = tmp("frame-reopened-" + std::to_string(k) + ".fits");
      Image reopened = img;
      reopened.fibermap.hduBytes.clear(); // the writer reads the rows from the preproc
      writeFrame(fromFile, r, reopened, {});

      // The preproc gone, the frame is still written, from memory.
      const std::string moved = src + ".away";
      std::filesystem::rename(src, moved);
      const std::string fromMemory = tmp("frame-memory-" + std::to_string(k) + ".fits");
      writeFrame(fromMemory, r, img, {});
      std::filesystem::rename(moved, src);

      QVERIFY2(undatedBytes(fromMemory) == undatedBytes(fromFile), src.c_str());
      iotest::Raw raw(fromMemory);
      raw.hdu("FIBERMAP");
      QCOMPARE(raw.rows(), 5L);
      QCOMPARE(raw.longColumn("FIBER"), (std::vector<long long>{3, 4, 5, 6, 7}));
      framesFromMemory[k] = undatedBytes(fromMemory);
    }
    // Same image, same rows: the .gz and the plain preproc give the same frame.
    QVERIFY(framesFromMemory[0] == framesFromMemory[1]);
  }

  void noSourceFibermapIsMinimal() {
    Image img = iotest::smallImage(4, 5);
    const ExtractionResult r = syntheticResult(10, 3, 8, 1);
    const std::string p = tmp("frame-nofm.fits");
    FrameMeta meta;
    meta.camera = "b2";
    writeFrame(p, r, img, meta);
    iotest::Raw raw(p);
    QCOMPARE(raw.str("CAMERA"), std::string("b2")); // meta wins over the header
    QVERIFY(!raw.hasKey("IN_IMG"));
    raw.hdu("FIBERMAP");
    QCOMPARE(raw.longColumn("FIBER"), (std::vector<long long>{10, 11, 12}));
    QCOMPARE(readFrame(p).fiberMin, 10);
  }

  void failedWritesLeaveNothing() {
    const std::string dir = tmp("atomic");
    std::filesystem::create_directory(dir);
    const std::string p = dir + "/frame.fits";
    Image img = sourceImage();
    const ExtractionResult r = syntheticResult(0, 4, 20, 2);
    writeFrame(p, r, img, {});
    const std::string before = fileBytes(p);

    // The FIBERMAP source vanished: the failure comes after FLUX..RESOLUTION are
    // written, and must leave the old frame and no temporary behind.
    Image gone = img;
    gone.fibermap.sourceFile = dir + "/missing-preproc.fits";
    gone.fibermap.hduBytes.clear(); // not kept: the writer must reopen the source
    ExtractionResult r2 = syntheticResult(0, 4, 20, 2);
    r2.flux(0, 0) = 999;
    try {
      writeFrame(p, r2, gone, {});
      QFAIL("no throw");
    } catch (const FitsError& e) {
      QCOMPARE(e.file(), gone.fibermap.sourceFile);
    }
    QCOMPARE(iotest::listDir(dir), (std::vector<std::string>{"frame.fits"}));
    QVERIFY(fileBytes(p) == before);

    // Inconsistent result: refused before anything is created.
    ExtractionResult bad = syntheticResult(0, 4, 20, 2);
    bad.ivar = Array2D<double>(4, 19);
    QVERIFY_THROWS_EXCEPTION(InputError, writeFrame(dir + "/bad.fits", bad, img, {}));
    QCOMPARE(iotest::listDir(dir), (std::vector<std::string>{"frame.fits"}));

    // Missing directory.
    try {
      writeFrame(dir + "/nope/frame.fits", r, img, {});
      QFAIL("no throw");
    } catch (const FitsError& e) {
      QVERIFY2(std::string(e.what()).find("does not exist") != std::string::npos, e.what());
    }
    QVERIFY(!std::filesystem::exists(dir + "/nope"));
  }

  void modelAndTruthRoundTrip() {
    Image img = iotest::smallImage(6, 7);
    Array2D<double> model(6, 7);
    for (std::size_t i = 0; i < model.size(); ++i) model.data[i] = 0.5 * double(i);
    const std::string mp = tmp("model.fits");
    writeModel(mp, model, img);
    const Array2D<double> mb = readModel(mp);
    QCOMPARE(mb.data, model.data); // exact in float32
    {
      iotest::Raw raw(mp);
      QCOMPARE(raw.extname(), std::string("IMAGE")); // desispec's model HDU
      QCOMPARE(raw.str("BUNIT"), std::string("electron"));
      QVERIFY(raw.hasKey("CHECKSUM") && raw.hasKey("DATASUM"));
      QCOMPARE(raw.str("CAMERA"), std::string("r0"));
    }

    Truth t;
    t.fiberMin = 25;
    t.wave = {5000.0, 5000.8, 5001.6};
    t.phot = Array2D<double>(2, 3);
    for (std::size_t i = 0; i < t.phot.size(); ++i) t.phot.data[i] = 1.0 / (1.0 + double(i));
    const std::string tp = tmp("truth.fits");
    writeTruth(tp, t);
    const Truth tb = readTruth(tp);
    QCOMPARE(tb.fiberMin, 25);
    QCOMPARE(tb.wave, t.wave);
    QCOMPARE(tb.phot.data, t.phot.data); // float64
    QCOMPARE(tb.phot.rows, 2);
  }
};

QTEST_APPLESS_MAIN(TestFrameIo)
#include "test_frame_io.moc"
