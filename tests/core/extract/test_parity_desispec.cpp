// Parity with a production frame: the shared preproc and PSF extracted as desi_proc
// asks desispec to (-w 6000.0,6500.0,0.8 -s 0 -n 25 --psferr 0.01
// --barycentric-correction), written through writeFrame with FrameMeta and read back,
// against frame-desispec-bary.fits, what desispec's desi_extract_spectra wrote from
// the same inputs. Numbers, masks, FIBERMAP, SCORES, HELIOCOR and header keywords.
#include "core/bary/barycentric.h"
#include "core/extract/compare.h"
#include "core/extract/cpu_engine.h"
#include "core/io/fits_file.h"
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "test_data.h"

#include <QTemporaryDir>
#include <QTest>

#include <fitsio.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace spex;

namespace {

class NullProgress : public ProgressSink {};

// Raw bytes of every row of a binary table HDU, and its column names and forms: two
// FIBERMAPs with the same bytes and columns are the same rows.
struct TableBytes {
  std::vector<std::string> columns; // "TTYPE:TFORM"
  long rows = 0, width = 0;
  std::vector<unsigned char> bytes;
};

TableBytes tableBytes(const std::string& path, const char* extname) {
  fitsfile* f = nullptr;
  int status = 0, ncol = 0;
  TableBytes t;
  fits_open_file(&f, path.c_str(), READONLY, &status);
  fits_movnam_hdu(f, BINARY_TBL, const_cast<char*>(extname), 0, &status);
  fits_get_num_rows(f, &t.rows, &status);
  fits_get_num_cols(f, &ncol, &status);
  long long width = 0;
  fits_read_key(f, TLONGLONG, "NAXIS1", &width, nullptr, &status);
  t.width = long(width);
  for (int c = 1; c <= ncol; ++c) {
    char name[FLEN_VALUE] = "", form[FLEN_VALUE] = "";
    const std::string n = std::to_string(c);
    fits_read_key(f, TSTRING, ("TTYPE" + n).c_str(), name, nullptr, &status);
    fits_read_key(f, TSTRING, ("TFORM" + n).c_str(), form, nullptr, &status);
    t.columns.push_back(std::string(name) + ":" + form);
  }
  t.bytes.resize(std::size_t(t.rows * t.width));
  if (!t.bytes.empty()) fits_read_tblbytes(f, 1, 1, LONGLONG(t.bytes.size()), t.bytes.data(), &status);
  fits_close_file(f, &status);
  if (status) {
    char msg[FLEN_STATUS];
    fits_get_errstatus(status, msg);
    throw std::runtime_error(path + " " + extname + ": " + msg);
  }
  return t;
}

bool allChecksumsGood(const std::string& path) {
  FitsFile f = FitsFile::openRead(path);
  const int n = f.hduCount();
  for (int i = 0; i < n; ++i) {
    f.moveToIndex(i);
    if (!f.verifyChecksum()) return false;
  }
  return true;
}

} // namespace

class TestParityDesispec : public QObject {
  Q_OBJECT

  QTemporaryDir m_tmp;
  std::string m_ours, m_ref;
  ExtractionResult m_extracted;
  double m_heliocor = 1.0;

private slots:
  void initTestCase() {
    QVERIFY(m_tmp.isValid());
    SPEX_REQUIRE_DATA(psfPath, "psf-r0-00067784.fits");
    SPEX_REQUIRE_DATA(prePath, "sim-r0-bundle0-6000-6500/preproc.fits.gz");
    SPEX_REQUIRE_DATA(refPath, "sim-r0-bundle0-6000-6500/frame-desispec-bary.fits");
    m_ref = refPath;
    const GaussHermitePsf psf = readPsf(psfPath);
    const Image img = readPreproc(prePath);

    // --barycentric-correction: the factor from the preproc header, the extraction on
    // the requested grid divided by it.
    const BaryInputs in = baryInputsFromHeaders(img.header, nullptr);
    m_heliocor = barycentricFactor(in.raDeg, in.decDeg, in.mjdMid);
    const WaveGrid requested = WaveGrid::fromRange(6000.0, 6500.0, 0.8);

    ExtractionRequest req;
    req.image = &img;
    req.psf = &psf;
    req.wave = barycentricExtractionGrid(requested, m_heliocor);
    req.fiberMin = 0;
    req.nFiber = 25;
    req.params.psferr = 0.01;
    req.threads = 2;
    NullProgress np;
    CancelToken ct;
    m_extracted = CpuEngine().extract(req, np, ct);

    // desi_proc lays inputs out under $DESI_SPECTRO_REDUX/$SPECPROD; name ours so.
    ::setenv("DESI_SPECTRO_REDUX", "/global/cfs/cdirs/desi/spectro/redux", 1);
    ::setenv("SPECPROD", "daily", 1);
    ::unsetenv("DESI_SPECTRO_CALIB");
    FrameMeta meta;
    meta.inputImage = "/global/cfs/cdirs/desi/spectro/redux/daily/preproc/20261122/00001234/"
                      "preproc-r0-00001234.fits.gz";
    meta.inputPsf = "/global/cfs/cdirs/desi/spectro/redux/daily/exposures/20261122/00001234/"
                    "psf-r0-00001234.fits";
    meta.origPsf = psf.inPsf; // the PSF file's IN_PSF (the path above does not exist here)
    meta.heliocor = m_heliocor;
    m_ours = m_tmp.path().toStdString() + "/frame-r0-00001234.fits";
    writeFrame(m_ours, m_extracted, img, meta);
  }

  void heliocorMatches() {
    FitsFile ref = FitsFile::openRead(m_ref);
    FitsFile ours = FitsFile::openRead(m_ours);
    const double want = ref.readDouble("HELIOCOR");
    qInfo("HELIOCOR desispec %.17g, ours %.17g, diff %.3g", want, ours.readDouble("HELIOCOR"),
          ours.readDouble("HELIOCOR") - want);
    QVERIFY(std::abs(ours.readDouble("HELIOCOR") - want) < 1e-9);
    // The requested grid is what both write.
    QCOMPARE(ours.readDouble("WAVEMIN"), ref.readDouble("WAVEMIN"));
    QCOMPARE(ours.readDouble("WAVEMAX"), ref.readDouble("WAVEMAX"));
    QCOMPARE(ours.readDouble("WAVESTEP"), ref.readDouble("WAVESTEP"));
    ref.moveTo("WAVELENGTH");
    ours.moveTo("WAVELENGTH");
    QCOMPARE(ours.readImage1D(), ref.readImage1D()); // bit for bit: numpy's arange
  }

  void fluxAndMasksMatch() {
    const ExtractionResult ours = readFrame(m_ours), ref = readFrame(m_ref);
    QCOMPARE(ours.fiberMin, 0);
    QCOMPARE(ref.fiberMin, 0);
    QCOMPARE(ours.heliocor, m_heliocor);
    const FrameComparison c = compareFrames(ours, ref);
    qInfo("%s", c.toText().c_str());
    QVERIFY(c.nbins > 15000);
    // fractionBelow[2]: |fa - fb| / sigma < 1e-3.
    QVERIFY2(c.fractionBelow[2] >= 0.999, qPrintable(QString::number(c.fractionBelow[2], 'g', 8)));

    long chiClose = 0, chiBins = 0, some = 0, bad2d = 0, allRef = 0, allOurs = 0, allMissed = 0;
    for (int s = 0; s < ours.nfiber; ++s)
      for (int j = 0; j < ours.nwave; ++j) {
        const double a = ours.chi2pix(s, j), b = ref.chi2pix(s, j);
        ++chiBins;
        if (std::abs(a - b) <= 1e-3 * std::max(std::abs(b), 1e-30) || a == b) ++chiClose;
        const uint32_t ma = ours.mask(s, j), mb = ref.mask(s, j);
        some += (ma & kSomeBadPix) != (mb & kSomeBadPix);
        bad2d += (ma & kBad2DFit) != (mb & kBad2DFit);
        allRef += (mb & kAllBadPix) != 0;
        allOurs += (ma & kAllBadPix) != 0;
        allMissed += (mb & kAllBadPix) && !(ma & kAllBadPix);
      }
    qInfo("CHI2PIX within 1e-3 relative: %ld of %ld bins (%.5f); SOMEBADPIX differs in %ld, "
          "BAD2DFIT in %ld; ALLBADPIX desispec %ld, ours %ld, missed %ld",
          chiClose, chiBins, double(chiClose) / chiBins, some, bad2d, allRef, allOurs, allMissed);
    QVERIFY(double(chiClose) >= 0.99 * chiBins);
    QCOMPARE(some, 0L);
    QCOMPARE(bad2d, 0L);
    QCOMPARE(allMissed, 0L); // ours is a superset of desispec's
  }

  void fibermapRowsIdentical() {
    const TableBytes a = tableBytes(m_ours, "FIBERMAP"), b = tableBytes(m_ref, "FIBERMAP");
    QCOMPARE(a.rows, 25L);
    QCOMPARE(a.columns.size(), std::size_t(71));
    QCOMPARE(a.columns, b.columns);
    QCOMPARE(a.width, b.width);
    QVERIFY(a.bytes == b.bytes);
  }

  void scoresMatch() {
    FitsFile a = FitsFile::openRead(m_ours), b = FitsFile::openRead(m_ref);
    a.moveTo("SCORES");
    b.moveTo("SCORES");
    QCOMPARE(a.numRows(), 25L);
    for (const char* col : {"SUM_RAW_COUNT_R", "MEDIAN_RAW_COUNT_R", "MEDIAN_RAW_SNR_R"}) {
      const std::vector<double> x = a.readColumnDouble(col), y = b.readColumnDouble(col);
      QCOMPARE(x.size(), y.size());
      double worst = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double rel = std::abs(x[i] - y[i]) / std::max(std::abs(y[i]), 1e-12);
        worst = std::max(worst, std::abs(x[i] - y[i]) <= 1e-12 ? 0.0 : rel);
      }
      qInfo("%s: worst relative difference %.3g", col, worst);
      QVERIFY2(worst <= 1e-3, col);
    }
  }

  void keywordsAndChecksums() {
    FitsFile a = FitsFile::openRead(m_ours), b = FitsFile::openRead(m_ref);
    // Present in both primary headers, same value where it is a fact of the inputs.
    for (const char* key : {"NSPEC", "FIBERMIN", "CAMERA", "EXPID", "NIGHT", "MJD-OBS", "TARGTRA",
                            "EXPTIME", "BUNIT"})
      QCOMPARE(a.readStringOpt(key).value_or("<absent>"), b.readStringOpt(key).value_or("<absent>"));
    for (const char* key : {"IN_PSF", "IN_IMG", "ORIG_PSF"})
      QCOMPARE(a.readString(key), b.readString(key));
    QVERIFY(a.hasKey("SPEXLAB"));                   // desispec: SPECTER (gpu_specter's version)
    QCOMPARE(a.readString("DEPNAM00"), std::string("spexlab"));
    QVERIFY(a.hasKey("DEPVER00"));
    // desiutil's environment entries: SPECPROD and DESI_SPECTRO_REDUX as desispec saw them.
    auto depOf = [](FitsFile& f, const std::string& name) {
      for (int i = 0; i < 100; ++i) {
        char k[16];
        std::snprintf(k, sizeof k, "DEPNAM%02d", i);
        const auto n = f.readStringOpt(k);
        if (!n) break;
        if (*n == name) {
          std::snprintf(k, sizeof k, "DEPVER%02d", i);
          return f.readString(k);
        }
      }
      return std::string("<absent>");
    };
    for (const char* dep : {"SPECPROD", "DESI_SPECTRO_REDUX", "DESI_SPECTRO_CALIB"})
      QCOMPARE(depOf(a, dep), depOf(b, dep));
    for (int i = 0; i < b.hduCount(); ++i) {
      b.moveToIndex(i);
      a.moveTo(b.hduName());
      QVERIFY2(a.hasKey("CHECKSUM") && a.hasKey("DATASUM"), b.hduName().c_str());
    }
    QCOMPARE(a.hduCount(), b.hduCount());
    QVERIFY(allChecksumsGood(m_ours));
    QVERIFY(allChecksumsGood(m_ref));
  }
};

QTEST_GUILESS_MAIN(TestParityDesispec)
#include "test_parity_desispec.moc"
