// spexlab-cli end to end: malformed inputs and bad options each give a clear error, a
// non-zero exit, no crash and no output file; a good run writes a frame that compare
// accepts; NaN pixels are masked with a warning; the profile is valid Chrome JSON.
#include "core/io/frame_io.h"
#include "core/profile/profile.h"
#include "test_data.h"
#include "cli_run.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <fitsio.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace spex;

namespace {

using spextest::cli;
using spextest::Run;

// Edits a copy of a FITS file in place with raw CFITSIO, independent of our reader.
void edit(const std::string& path, const std::function<void(fitsfile*, int*)>& f) {
  fitsfile* fp = nullptr;
  int status = 0;
  fits_open_file(&fp, path.c_str(), READWRITE, &status);
  f(fp, &status);
  fits_close_file(fp, &status);
  QVERIFY2(status == 0, "test fixture: CFITSIO edit failed");
}

// A small preproc-like file with the given HDUs and shape.
void smallPreproc(const std::string& path, bool ivar, bool mask, long nx = 64, long ny = 48,
                  long ivarNx = -1) {
  fitsfile* fp = nullptr;
  int status = 0;
  fits_create_file(&fp, path.c_str(), &status);
  std::vector<float> data(std::size_t(nx) * ny, 1.0f);
  auto img = [&](const char* name, long w, int bitpix, int type) {
    long naxes[2] = {w, ny};
    std::vector<float> d(std::size_t(w) * ny, 1.0f);
    fits_create_img(fp, bitpix, 2, naxes, &status);
    fits_write_img(fp, type, 1, long(d.size()), d.data(), &status);
    fits_update_key(fp, TSTRING, "EXTNAME", const_cast<char*>(name), nullptr, &status);
  };
  img("IMAGE", nx, FLOAT_IMG, TFLOAT);
  if (ivar) img("IVAR", ivarNx > 0 ? ivarNx : nx, FLOAT_IMG, TFLOAT);
  if (mask) img("MASK", nx, LONG_IMG, TFLOAT);
  fits_close_file(fp, &status);
  QVERIFY(status == 0);
}

} // namespace

class TestCli : public QObject {
  Q_OBJECT
  QTemporaryDir tmp;
  std::string psf, preproc;

  std::string t(const std::string& name) const { return tmp.path().toStdString() + "/" + name; }
  std::string copyPsf(const std::string& name) {
    const std::string p = t(name);
    fs::copy_file(psf, p, fs::copy_options::overwrite_existing);
    return p;
  }

private slots:
  void initTestCase() {
    SPEX_REQUIRE_DATA(p, "psf-r0-00067784.fits");
    SPEX_REQUIRE_DATA(q, "sim-r0-bundle0-6000-6500/preproc.fits.gz");
    psf = p;
    preproc = q;
    QVERIFY(tmp.isValid());
  }

  void helpForEveryCommand() {
    for (const char* c : {"extract", "simulate", "bench", "compare", "sweep"}) {
      const Run r = cli({QString::fromLatin1(c), QStringLiteral("--help")});
      QVERIFY2(r.code == 0 && !r.crashed, c);
      // CLI11's page for that command: its usage line and its own options.
      QVERIFY2(r.out.contains(QStringLiteral("spexlab-cli %1 [OPTIONS]").arg(QString::fromLatin1(c))), qPrintable(r.out));
      QVERIFY2(r.out.contains(QStringLiteral("-h,--help")), c);
    }
    QVERIFY(cli({"extract", "--help"}).out.contains("--barycentric-correction"));
    QVERIFY(cli({"sweep", "--help"}).out.contains("--nwavestep"));
    QVERIFY(cli({"--help"}).out.contains("  extract "));
    const Run bad = cli({QStringLiteral("sweep"), QStringLiteral("--nwavestep")});
    QVERIFY(bad.code != 0 && !bad.crashed);
    QVERIFY2(bad.err.contains("--nwavestep"), qPrintable(bad.err));
  }

  void malformedInputsFailCleanly_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("expect"); // must appear in stderr

    const QString P = QString::fromStdString(psf), I = QString::fromStdString(preproc);
    const QString good = "-w";
    auto extract = [&](const QString& in, const QString& ps, QStringList extra = {}) {
      QStringList a{"extract", "-i", in, "-p", ps, "-o", QString::fromStdString(t("out.fits")),
                    "-s", "0", "-n", "5", "-w", "6000,6100,0.8", "--engine", "cpu"};
      return a + extra;
    };
    // Files made below in initTestCase order; names tell what is wrong.
    {
      std::ofstream(t("notfits.fits")) << "SIMPLE? no, this is text, not FITS\n";
      std::ofstream(t("empty.fits"));
      std::ifstream src(psf, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(src)), {});
      std::ofstream(t("truncated-psf.fits"), std::ios::binary) << bytes.substr(0, 20000);
      fs::create_directories(t("adir.fits"));
      edit(copyPsf("no-ytrace.fits"), [](fitsfile* f, int* s) {
        fits_movnam_hdu(f, ANY_HDU, const_cast<char*>("YTRACE"), 0, s);
        fits_delete_hdu(f, nullptr, s);
      });
      edit(copyPsf("no-psf-hdu.fits"), [](fitsfile* f, int* s) {
        fits_movnam_hdu(f, ANY_HDU, const_cast<char*>("PSF"), 0, s);
        fits_delete_hdu(f, nullptr, s);
      });
      for (const char* key : {"LEGDEG", "NPIX_X", "HSIZEX", "GHDEGY", "WAVEMIN"})
        edit(copyPsf(std::string("no-") + key + ".fits"), [key](fitsfile* f, int* s) {
          fits_movnam_hdu(f, ANY_HDU, const_cast<char*>("PSF"), 0, s);
          fits_delete_key(f, key, s);
        });
      edit(copyPsf("reversed-domain.fits"), [](fitsfile* f, int* s) {
        fits_movnam_hdu(f, ANY_HDU, const_cast<char*>("PSF"), 0, s);
        double v = 5000;
        fits_update_key(f, TDOUBLE, "WAVEMAX", &v, nullptr, s);
      });
      smallPreproc(t("no-ivar.fits"), false, true);
      smallPreproc(t("no-mask.fits"), true, false);
      smallPreproc(t("ivar-shape.fits"), true, true, 64, 48, 32);
      smallPreproc(t("small-ccd.fits"), true, true);
    }
    auto T = [&](const char* n) { return QString::fromStdString(t(n)); };
    QTest::newRow("missing input") << extract(T("nowhere.fits"), P) << "nowhere.fits";
    QTest::newRow("missing psf") << extract(I, T("nowhere-psf.fits")) << "nowhere-psf.fits";
    QTest::newRow("input not FITS") << extract(T("notfits.fits"), P) << "notfits.fits";
    QTest::newRow("empty input") << extract(T("empty.fits"), P) << "empty.fits";
    QTest::newRow("truncated psf") << extract(I, T("truncated-psf.fits")) << "truncated-psf.fits";
    QTest::newRow("directory as input") << extract(T("adir.fits"), P) << "adir.fits";
    QTest::newRow("psf without YTRACE") << extract(I, T("no-ytrace.fits")) << "YTRACE";
    QTest::newRow("psf without PSF HDU") << extract(I, T("no-psf-hdu.fits")) << "PSF";
    for (const char* key : {"LEGDEG", "NPIX_X", "HSIZEX", "GHDEGY", "WAVEMIN"})
      QTest::newRow(qPrintable(QString("psf without %1").arg(key)))
          << extract(I, T(qPrintable(QString("no-%1.fits").arg(key)))) << key;
    QTest::newRow("psf WAVEMAX < WAVEMIN") << extract(I, T("reversed-domain.fits")) << "WAVEM";
    QTest::newRow("preproc without IVAR") << extract(T("no-ivar.fits"), P) << "IVAR";
    QTest::newRow("preproc without MASK") << extract(T("no-mask.fits"), P) << "MASK";
    QTest::newRow("IVAR shape differs") << extract(T("ivar-shape.fits"), P) << "IVAR";
    QTest::newRow("image not the PSF's CCD size") << extract(T("small-ccd.fits"), P) << "NPIX";
    QStringList w = extract(I, P);
    auto withW = [&](const QString& v) {
      QStringList a = w;
      a[a.indexOf("-w") + 1] = v;
      return a;
    };
    QTest::newRow("wavelengths outside the PSF") << withW("3600,5800,0.8") << "outside the PSF";
    QTest::newRow("reversed wavelengths") << withW("6100,6000,0.8") << "reversed";
    QTest::newRow("zero step") << withW("6000,6100,0") << "step";
    QTest::newRow("garbled wavelengths") << withW("abc") << "-w";
    QTest::newRow("fibers outside the PSF") << extract(I, P, {"-s", "490", "-n", "20"}) << "outside the PSF";
    QTest::newRow("no fibers") << extract(I, P, {"-n", "0"}) << "empty";
    QTest::newRow("unwritable output") << QStringList{"extract", "-i", I, "-p", P, "-o", "/proc/nope/frame.fits", "-n", "5"} << "/proc/nope";
    QTest::newRow("output is a directory") << QStringList{"extract", "-i", I, "-p", P, "-o", T("adir.fits"), "-n", "5"} << "directory";
    QTest::newRow("output is the input") << QStringList{"extract", "-i", I, "-p", P, "-o", I, "-n", "5"} << "input";
    QTest::newRow("unknown engine") << extract(I, P, {"--engine", "quantum"}) << "quantum";
    QTest::newRow("bad nsubbundles") << extract(I, P, {"--nsubbundles", "0"}) << "nsubbundles";
    QTest::newRow("bad pixpad") << extract(I, P, {"--pixpad-frac", "2"}) << "pixpad";
    QTest::newRow("unknown option") << extract(I, P, {"--frobnicate"}) << "--frobnicate";
    QTest::newRow("missing -o") << QStringList{"extract", "-i", I, "-p", P} << "--output";
    QTest::newRow("compare: not a frame") << QStringList{"compare", P, P} << "psf-r0";
  }

  void malformedInputsFailCleanly() {
    QFETCH(QStringList, args);
    QFETCH(QString, expect);
    fs::remove(t("out.fits"));
    const Run r = cli(args);
    QVERIFY2(!r.crashed, qPrintable(r.err));
    QVERIFY2(r.code != 0, qPrintable("exit 0; stdout: " + r.out));
    QVERIFY2(r.err.contains("error"), qPrintable(r.err));
    QVERIFY2(r.err.contains(expect), qPrintable("expected '" + expect + "' in: " + r.err));
    QVERIFY2(!fs::exists(t("out.fits")), "an output file was left behind");
    // No temporary files either.
    for (const auto& e : fs::directory_iterator(tmp.path().toStdString()))
      QVERIFY2(e.path().filename().string().find(".tmp") == std::string::npos,
               qPrintable(QString::fromStdString(e.path().string())));
  }

  void extractCompareAndProfile() {
    const QString out = QString::fromStdString(t("frame.fits"));
    const QString model = QString::fromStdString(t("model.fits"));
    const QString trace = QString::fromStdString(t("trace.json"));
    const Run r = cli({"extract", "-i", QString::fromStdString(preproc), "-p", QString::fromStdString(psf),
                       "-o", out, "-m", model, "-w", "6000,6100,0.8", "-s", "0", "-n", "10",
                       "--engine", "cpu", "--threads", "2", "--profile", trace});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("extracted 10 fibers"));
    const ExtractionResult f = readFrame(out.toStdString());
    QCOMPARE(f.nfiber, 10);
    QCOMPARE(f.nwave, 126);
    QVERIFY(fs::exists(model.toStdString()));
    std::ifstream in(trace.toStdString());
    const std::string json((std::istreambuf_iterator<char>(in)), {});
    const Profile p = Profile::fromChromeTrace(json);
    bool read = false, write = false, solve = false, resolution = false;
    for (const auto& pr : p.ranges) {
      read |= pr.name == "read";
      write |= pr.name == "write";
      solve |= pr.name == "solve";
      // The write's own steps, on their lane, inside the write.
      if (pr.name == "WAVELENGTH, RESOLUTION") {
        resolution = p.lanes.at(std::size_t(pr.lane)) == "write steps";
        for (const auto& w : p.ranges)
          if (w.name == "write") QVERIFY(pr.startNs >= w.startNs && pr.endNs <= w.endNs + 1000000);
      }
    }
    QVERIFY(read && write && solve && resolution);
    QCOMPARE(QString::fromStdString(checkNesting(p)), QString());

    const Run same = cli({"compare", out, out});
    QVERIFY2(same.code == 0, qPrintable(same.err));
    QVERIFY(same.out.contains("1e-05"));
    const Run strict = cli({"compare", out, out, "--max-sigma", "0"});
    QCOMPARE(strict.code, 0);
  }

  void detachedExitKeepsOutputsAndCodes() {
    // process_exit.h: with SPEXLAB_DETACHED_EXIT=1 (a CUDA extraction's default) the
    // process ends at once and a helper process does the teardown. The frame must be
    // the same bytes (apart from the checksum cards' dates), the whole summary must
    // reach the reader, and errors keep their code and message.
    auto run = [&](const QString& detached, const QStringList& args) {
      return cli(args, {"SPEXLAB_DETACHED_EXIT=" + detached});
    };
    auto extract = [&](const std::string& out) {
      return QStringList{"extract", "-i", QString::fromStdString(preproc), "-p", QString::fromStdString(psf),
                         "-o", QString::fromStdString(out), "-w", "6000,6100,0.8", "-s", "0", "-n", "10",
                         "--engine", "cpu", "--threads", "2"};
    };
    const Run a = run("1", extract(t("detached.fits"))), b = run("0", extract(t("inline.fits")));
    QVERIFY2(a.code == 0 && !a.crashed, qPrintable(a.err));
    QVERIFY2(b.code == 0 && !b.crashed, qPrintable(b.err));
    QVERIFY(a.out.contains("extracted 10 fibers") && a.out.contains("wrote"));
    auto bytes = [](const std::string& path) {
      std::ifstream in(path, std::ios::binary);
      return std::string((std::istreambuf_iterator<char>(in)), {});
    };
    const std::string fa = bytes(t("detached.fits")), fb = bytes(t("inline.fits"));
    QVERIFY(!fa.empty());
    QCOMPARE(fa.size(), fb.size());
    int cardsDiffering = 0;
    for (std::size_t c = 0; c + 80 <= fa.size(); c += 80) {
      if (fa.compare(c, 80, fb, c, 80) == 0) continue;
      const std::string card = fa.substr(c, 80);
      QVERIFY2(card.rfind("CHECKSUM=", 0) == 0 || card.rfind("DATASUM =", 0) == 0, card.c_str());
      ++cardsDiffering;
    }
    QVERIFY(cardsDiffering <= 2 * 8); // two cards per HDU at most
    const Run bad = run("1", extract(t("never.fits")).replaceInStrings(QString::fromStdString(preproc),
                                                                     QString::fromStdString(t("missing.fits"))));
    QCOMPARE(bad.code, 1);
    QVERIFY2(bad.err.contains("does not exist"), qPrintable(bad.err));
    QVERIFY(!fs::exists(t("never.fits")));
  }

  void profileKernelsOnTheCpuSaysSo() {
    // --profile-kernels asks the CUDA engine for CUPTI records; the CPU engine has no
    // kernels: the run goes on, says so once, and the trace holds no kernel records.
    const QString out = QString::fromStdString(t("frame-k.fits"));
    const QString trace = QString::fromStdString(t("trace-k.json"));
    const Run r = cli({"extract", "-i", QString::fromStdString(preproc), "-p", QString::fromStdString(psf),
                       "-o", out, "-w", "6000,6040,0.8", "-s", "0", "-n", "5", "--engine", "cpu",
                       "--threads", "2", "--profile", trace, "--profile-kernels"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("--profile-kernels: the CPU engine runs no GPU kernels"), qPrintable(r.err));
    QVERIFY(!r.out.contains("kernel profile"));
    std::ifstream in(trace.toStdString());
    const std::string json((std::istreambuf_iterator<char>(in)), {});
    const Profile p = Profile::fromChromeTrace(json);
    QVERIFY(!p.ranges.empty());
    QVERIFY(p.kernels.empty());
    QVERIFY(!p.kernelTrace.on);
    const Run help = cli({"extract", "--help"});
    QVERIFY(help.out.contains("--profile-kernels"));
  }

  void nanPixelsAreMaskedWithAWarning() {
    // Copy the shared preproc uncompressed and poison pixels on fiber 2's trace.
    const std::string p = t("nan-preproc.fits");
    {
      fitsfile *in = nullptr, *outf = nullptr;
      int s = 0;
      fits_open_file(&in, preproc.c_str(), READONLY, &s);
      fits_create_file(&outf, p.c_str(), &s);
      fits_copy_file(in, outf, 1, 1, 1, &s);
      fits_close_file(in, &s);
      fits_close_file(outf, &s);
      QCOMPARE(s, 0);
    }
    edit(p, [](fitsfile* f, int* s) {
      fits_movnam_hdu(f, IMAGE_HDU, const_cast<char*>("IMAGE"), 0, s);
      float nan = NAN, inf = INFINITY;
      // Around fiber 2 near 6050 A (rows ~870, columns ~140 in this PSF).
      for (long y = 860; y < 880; ++y) {
        long fp[2] = {141, y + 1};
        fits_write_pix(f, TFLOAT, fp, 1, (y % 2) ? &nan : &inf, s);
      }
      fits_movnam_hdu(f, IMAGE_HDU, const_cast<char*>("IVAR"), 0, s);
      float neg = -1;
      long fp[2] = {150, 901};
      fits_write_pix(f, TFLOAT, fp, 1, &neg, s);
    });
    const QString out = QString::fromStdString(t("nan-frame.fits"));
    const Run r = cli({"extract", "-i", QString::fromStdString(p), "-p", QString::fromStdString(psf),
                       "-o", out, "-w", "6000,6100,0.8", "-s", "0", "-n", "5", "--engine", "cpu"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("warning: 21 pixels"), qPrintable(r.err));
    const ExtractionResult f = readFrame(out.toStdString());
    for (double v : f.flux.data) QVERIFY(std::isfinite(v));
    for (double v : f.ivar.data) QVERIFY(std::isfinite(v) && v >= 0);
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
