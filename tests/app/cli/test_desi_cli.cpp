// desi_extract_spectra (and `spexlab-cli extract`, the same program) driven as desi_proc
// drives desispec's: every desispec option accepted, argparse's habits (-s0, --opt=v,
// unambiguous prefixes), desispec's option checks, -f/--fibermap, and the bench/compare
// option checks. Runs the real executables on the shared preproc and PSF.
#include "core/io/fits_file.h"
#include "core/io/frame_io.h"
#include "core/profile/profile.h"
#include "test_data.h"
#include "cli_run.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <fitsio.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

namespace fs = std::filesystem;
using namespace spex;

namespace {

using spextest::cli;
using spextest::exec;
using spextest::Run;

Run desi(const QStringList& args) { return exec(DESI_EXTRACT_SPECTRA, args); }

// A file holding only a copy of src's FIBERMAP HDU, then edited by f (raw CFITSIO,
// independent of SpexLab's reader).
void fibermapFile(const std::string& src, const std::string& dst,
                  const std::function<void(fitsfile*, int*)>& f) {
  fitsfile *in = nullptr, *out = nullptr;
  int s = 0;
  fs::remove(dst);
  fits_open_file(&in, src.c_str(), READONLY, &s);
  fits_create_file(&out, dst.c_str(), &s);
  fits_create_img(out, 8, 0, nullptr, &s);
  fits_movnam_hdu(in, BINARY_TBL, const_cast<char*>("FIBERMAP"), 0, &s);
  fits_copy_hdu(in, out, 0, &s);
  if (f) f(out, &s);
  fits_close_file(in, &s);
  fits_close_file(out, &s);
  QVERIFY2(s == 0, "test fixture: CFITSIO failed");
}

std::vector<int64_t> frameTargetIds(const std::string& frame) {
  FitsFile f = FitsFile::openRead(frame);
  f.moveTo("FIBERMAP");
  return f.readColumnLong("TARGETID");
}

} // namespace

class TestDesiCli : public QObject {
  Q_OBJECT
  QTemporaryDir tmp;
  QString P, I;

  QString t(const char* name) const { return tmp.path() + "/" + name; }
  // A small extraction: 5 fibers, 6000-6040 A.
  QStringList small(const QString& out, QStringList extra = {}) const {
    return QStringList{"-i", I, "-p", P, "-o", out, "-w", "6000.0,6040.0,0.8", "-s", "0", "-n", "5",
                       "--no-gpu", "-t", "2"} + extra;
  }

private slots:
  void initTestCase() {
    SPEX_REQUIRE_DATA(p, "psf-r0-00067784.fits");
    SPEX_REQUIRE_DATA(q, "sim-r0-bundle0-6000-6500/preproc.fits.gz");
    P = QString::fromStdString(p);
    I = QString::fromStdString(q);
    QVERIFY(tmp.isValid());
  }

  void helpListsEveryDesispecOption() {
    const Run r = desi({"--help"});
    QCOMPARE(r.code, 0);
    for (const char* o : {"--input", "--fibermap", "--psf", "--output", "--model", "--wavelength",
                          "--specmin", "--nspec", "--regularize", "--bundlesize", "--nsubbundles",
                          "--nwavestep", "--verbose", "--mpi", "--decorrelate-fibers", "--no-scores",
                          "--psferr", "--barycentric-correction", "--gpu-specter", "--use-specter",
                          "--gpu", "--use-gpu", "--no-gpu", "--pixpad-frac", "--wavepad-frac"})
      QVERIFY2(r.out.contains(QString::fromLatin1(o)), o);
    QVERIFY(r.out.contains("desi_extract_spectra"));
  }

  // argparse spellings give the same frame as the plain ones, bit for bit.
  void argparseHabitsGiveTheSameFrame() {
    const QString a = t("plain.fits"), b = t("habits.fits");
    const Run plain = cli(QStringList{"extract"} + small(a, {"--psferr", "0.01", "--nsubbundles", "5"}));
    QVERIFY2(plain.code == 0, qPrintable(plain.err));
    // -s0 -n5 attached, --opt=value, prefixes --psfe= / --nsub / --no-gp / --use-sp.
    const Run habits = desi({"-i", I, "-p", P, "--out=" + b, "-w", "6000.0,6040.0,0.8", "-s0", "-n5",
                             "--psfe=0.01", "--nsub", "5", "--no-gp", "--use-sp", "--gpu-specter",
                             "-t2", "-v"});
    QVERIFY2(habits.code == 0, qPrintable(habits.err));
    QVERIFY2(habits.out.contains("#--- Extraction Parameters ---"), qPrintable(habits.out)); // -v
    QVERIFY(habits.out.contains("engine:      cpu"));                                          // --no-gpu
    const ExtractionResult fa = readFrame(a.toStdString()), fb = readFrame(b.toStdString());
    QCOMPARE(fb.nfiber, 5);
    QCOMPARE(fb.nwave, 51);
    QCOMPARE(fb.flux.data, fa.flux.data);
    QCOMPARE(fb.ivar.data, fa.ivar.data);
    QCOMPARE(fb.chi2pix.data, fa.chi2pix.data);
  }

  void rejectedOptions_data() {
    QTest::addColumn<QString>("program"); // "desi", "extract", "bench", "compare"
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("expect");
    const QString out = t("rejected.fits");
    QTest::newRow("nsubbundles 4 with bundlesize 25") << "desi" << small(out, {"--nsubbundles", "4"}) << "bundlesize (25) must be evenly divisible by nsubbundles (4)";
    QTest::newRow("nsubbundles 3 with bundlesize 20") << "desi" << small(out, {"--bundlesize", "20", "--nsubbundles", "3"}) << "nsubbundles (3)";
    QTest::newRow("ambiguous prefix --no") << "desi" << small(out, {"--no"}) << "ambiguous option --no";
    QTest::newRow("ambiguous prefix --w") << "desi" << small(out, {"--w", "1"}) << "--wavelength, --wavepad-frac";
    QTest::newRow("unknown option") << "desi" << small(out, {"--frobnicate"}) << "--frobnicate";
    QTest::newRow("unknown short option") << "desi" << small(out, {"-q"}) << "-q";
    QTest::newRow("extract --repeat") << "extract" << small(out, {"--repeat", "2"}) << "--repeat";
    QTest::newRow("extract --seed") << "extract" << small(out, {"--seed", "7"}) << "--seed";
    QTest::newRow("--gpu with --no-gpu") << "desi" << small(out, {"--gpu"}) << "--no-gpu";
    QTest::newRow("--engine with --no-gpu") << "desi" << small(out, {"--engine", "cpu"}) << "--engine";
    QTest::newRow("output not .fits") << "desi" << small(t("frame.out")) << ".fits extension";
    QTest::newRow("nspec not a number") << "desi" << small(out, {"-n", "five"}) << "--nspec";
    QTest::newRow("nspec 0") << "desi" << small(out, {"-n", "0"}) << "nspec";
    QTest::newRow("negative specmin") << "desi" << small(out, {"-s", "-3"}) << "specmin";
    QTest::newRow("psferr negative") << "desi" << small(out, {"--psferr=-0.1"}) << "psferr";
    QTest::newRow("flag with a value") << "desi" << small(out, {"--no-scores=maybe"}) << "--no-scores";
    QTest::newRow("missing -i") << "desi" << QStringList{"-p", P, "-o", out} << "--input";
    QTest::newRow("-f missing file") << "desi" << small(out, {"-f", t("no-such-fibermap.fits")}) << "no-such-fibermap.fits";
    QTest::newRow("bench --repeat 0") << "bench" << QStringList{"--repeat", "0"} << "--repeat";
    QTest::newRow("bench --repeat -1") << "bench" << QStringList{"--repeat", "-1"} << "--repeat";
    QTest::newRow("bench --one-patch 0") << "bench" << QStringList{"--one-patch", "0"} << "--one-patch must be >= 1";
    QTest::newRow("bench --one-patch with --patches") << "bench" << QStringList{"--one-patch", "3", "--patches", "1,2"} << "leave out --patches";
    QTest::newRow("bench --one-patch with --repeat") << "bench" << QStringList{"--one-patch", "3", "--repeat", "2"} << "leave out --repeat";
    QTest::newRow("bench --profile with --one-patch") << "bench" << QStringList{"--one-patch", "3", "--profile", "t.json"} << "--profile writes a whole run";
    QTest::newRow("bench --profile into no directory") << "bench" << QStringList{"--profile", "/nonexistent-dir/t.json"} << "'/nonexistent-dir' does not exist";
    QTest::newRow("compare --max-sigma -1") << "compare" << QStringList{"a.fits", "b.fits", "--max-sigma", "-1"} << "--max-sigma";
    QTest::newRow("compare --max-sigma nan") << "compare" << QStringList{"a.fits", "b.fits", "--max-sigma", "nan"} << "--max-sigma";
  }

  void rejectedOptions() {
    QFETCH(QString, program);
    QFETCH(QStringList, args);
    QFETCH(QString, expect);
    fs::remove(t("rejected.fits").toStdString());
    const Run r = program == "desi" ? desi(args)
                  : program == "extract" ? cli(QStringList{"extract"} + args)
                                          : cli(QStringList{program} + args);
    QVERIFY2(!r.crashed, qPrintable(r.err));
    QVERIFY2(r.code != 0, qPrintable("exit 0; stdout: " + r.out));
    QVERIFY2(r.err.contains("error"), qPrintable(r.err));
    QVERIFY2(r.err.contains(expect), qPrintable("expected '" + expect + "' in: " + r.err));
    QVERIFY(!fs::exists(t("rejected.fits").toStdString()));
  }

  // --mpi is parsed; without MPI support built in it fails saying so.
  void mpiWithoutSupportSaysSo() {
    const Run r = desi(small(t("mpi.fits"), {"--mpi"}));
#ifndef SPEXLAB_EXTRACT_MPI
    QVERIFY(r.code != 0 && !r.crashed);
    QVERIFY2(r.err.contains("--mpi") && r.err.contains("MPI support"), qPrintable(r.err));
#else
    QVERIFY2(r.code == 0, qPrintable(r.err));
#endif
  }

  // -f replaces the preproc's FIBERMAP; rows specmin..specmin+nspec-1 go to the frame.
  void fibermapOptionReplacesThePreprocs() {
    const std::string fm = t("fibermap-own.fits").toStdString();
    // Same FIBER values, TARGETID 1000 + row: the frame must carry these.
    fibermapFile(I.toStdString(), fm, [](fitsfile* f, int* s) {
      long nrows = 0;
      fits_get_num_rows(f, &nrows, s);
      int col = 0;
      fits_get_colnum(f, CASEINSEN, const_cast<char*>("TARGETID"), &col, s);
      std::vector<long long> ids(static_cast<std::size_t>(nrows));
      for (long i = 0; i < nrows; ++i) ids[std::size_t(i)] = 1000 + i;
      fits_write_col(f, TLONGLONG, col, 1, 1, nrows, ids.data(), s);
    });
    const QString out = t("with-f.fits");
    const Run r = desi({"-i", I, "-p", P, "-o", out, "-w", "6000,6040,0.8", "-s", "3", "-n", "4",
                        "--no-gpu", "-t", "2", "-f", QString::fromStdString(fm)});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QCOMPARE(frameTargetIds(out.toStdString()), (std::vector<int64_t>{1003, 1004, 1005, 1006}));
  }

  void fibermapOfAnotherPetalIsRefused() {
    const std::string fm = t("fibermap-petal1.fits").toStdString();
    fibermapFile(I.toStdString(), fm, [](fitsfile* f, int* s) {
      long nrows = 0;
      fits_get_num_rows(f, &nrows, s);
      int col = 0;
      fits_get_colnum(f, CASEINSEN, const_cast<char*>("FIBER"), &col, s);
      std::vector<int> fib(static_cast<std::size_t>(nrows));
      for (long i = 0; i < nrows; ++i) fib[std::size_t(i)] = int(500 + i);
      fits_write_col(f, TINT, col, 1, 1, nrows, fib.data(), s);
    });
    const Run r = desi(small(t("petal.fits"), {"-f", QString::fromStdString(fm)}));
    QVERIFY(r.code != 0 && !r.crashed);
    QVERIFY2(r.err.contains("petal 1") && r.err.contains("petal 0") &&
                 r.err.contains("fibermap-petal1.fits"), qPrintable(r.err));
    QVERIFY(!fs::exists(t("petal.fits").toStdString()));
  }

  void fibermapWithTooFewRowsIsRefused() {
    const std::string fm = t("fibermap-short.fits").toStdString();
    fibermapFile(I.toStdString(), fm, [](fitsfile* f, int* s) {
      long nrows = 0;
      fits_get_num_rows(f, &nrows, s);
      fits_delete_rows(f, 3, nrows - 2, s); // keep rows 0, 1
    });
    const Run r = desi(small(t("short.fits"), {"-f", QString::fromStdString(fm)}));
    QVERIFY(r.code != 0 && !r.crashed);
    QVERIFY2(r.err.contains("2 rows") && r.err.contains("specmin + nspec = 5"), qPrintable(r.err));
    QVERIFY(!fs::exists(t("short.fits").toStdString()));

    // The same check on the preproc's own FIBERMAP (no -f).
    const std::string pre = t("short-fibermap-preproc.fits").toStdString();
    {
      fitsfile *in = nullptr, *out = nullptr;
      int s = 0;
      fits_open_file(&in, I.toStdString().c_str(), READONLY, &s);
      fits_create_file(&out, pre.c_str(), &s);
      fits_copy_file(in, out, 1, 1, 1, &s);
      fits_close_file(in, &s);
      fits_movnam_hdu(out, BINARY_TBL, const_cast<char*>("FIBERMAP"), 0, &s);
      long nrows = 0;
      fits_get_num_rows(out, &nrows, &s);
      fits_delete_rows(out, 3, nrows - 2, &s);
      fits_close_file(out, &s);
      QCOMPARE(s, 0);
    }
    const Run own = desi({"-i", QString::fromStdString(pre), "-p", P, "-o", t("short2.fits"), "-w",
                          "6000,6040,0.8", "-s", "0", "-n", "5", "--no-gpu"});
    QVERIFY(own.code != 0 && !own.crashed);
    QVERIFY2(own.err.contains("FIBERMAP has 2 rows") && own.err.contains("short-fibermap-preproc.fits"),
             qPrintable(own.err));
  }

  // desi_proc's own line, unchanged, against what desispec wrote from the same input.
  void desiProcLineRunsUnchanged() {
    SPEX_REQUIRE_DATA(ref, "sim-r0-bundle0-6000-6500/frame-desispec-bary.fits");
    const QString out = t("frame-r0.fits");
    const Run r = desi({"-i", I, "-p", P, "-o", out, "-w", "6000.0,6500.0,0.8", "-s", "0", "-n", "25",
                        "--psferr", "0.01", "--no-gpu", "--barycentric-correction"});
    QVERIFY2(r.code == 0, qPrintable(r.err + r.out));
    QVERIFY2(r.out.contains("HELIOCOR"), qPrintable(r.out));
    FitsFile mine = FitsFile::openRead(out.toStdString()), theirs = FitsFile::openRead(ref);
    // HELIOCOR as desispec's to 1e-9 (the bar; the bary tests show 2e-12).
    QVERIFY(std::abs(mine.readDouble("HELIOCOR") - theirs.readDouble("HELIOCOR")) < 1e-9);
    QVERIFY(mine.readDouble("HELIOCOR") != 1.0);
    // WAVELENGTH is the requested grid, not the extraction grid.
    mine.moveTo("WAVELENGTH");
    theirs.moveTo("WAVELENGTH");
    const std::vector<double> wm = mine.readImage1D(), wt = theirs.readImage1D();
    QCOMPARE(wm.size(), std::size_t(626));
    QCOMPARE(wm.size(), wt.size());
    for (std::size_t i = 0; i < wm.size(); ++i) QVERIFY(std::abs(wm[i] - wt[i]) < 1e-9);
    QVERIFY(mine.tryMoveTo("SCORES"));
    // Flux: >= 99.9 % of bins within 0.001 sigma of desispec's.
    const Run c = cli({"compare", out, QString::fromStdString(ref), "--json"});
    QVERIFY2(c.code == 0, qPrintable(c.err));
    const QJsonObject js = QJsonDocument::fromJson(c.out.toUtf8()).object();
    const QJsonArray th = js.value("thresholds").toArray(), below = js.value("fractionBelow").toArray();
    int k = -1;
    for (int i = 0; i < th.size(); ++i)
      if (std::abs(th[i].toDouble() - 1e-3) < 1e-12) k = i;
    QVERIFY(k >= 0);
    QVERIFY2(below[k].toDouble() >= 0.999, qPrintable(c.out));
    QVERIFY(js.value("nbins").toInt() > 15000);
  }

  void noScoresLeavesTheHduOut() {
    const QString with = t("scores.fits"), without = t("no-scores.fits");
    QCOMPARE(desi(small(with)).code, 0);
    QCOMPARE(desi(small(without, {"--no-scores"})).code, 0);
    FitsFile a = FitsFile::openRead(with.toStdString()), b = FitsFile::openRead(without.toStdString());
    QVERIFY(a.tryMoveTo("SCORES"));
    QVERIFY(!b.tryMoveTo("SCORES"));
    QVERIFY(b.tryMoveTo("FIBERMAP")); // the rest is there
  }

  // --barycentric-correction with no pointing anywhere: an error naming the keys.
  void barycentricWithoutPointingFails() {
    const std::string pre = t("no-pointing.fits").toStdString();
    {
      fitsfile *in = nullptr, *out = nullptr;
      int s = 0;
      fits_open_file(&in, I.toStdString().c_str(), READONLY, &s);
      fits_create_file(&out, pre.c_str(), &s);
      fits_copy_file(in, out, 1, 1, 1, &s);
      fits_close_file(in, &s);
      for (const char* hdu : {"IMAGE", "FIBERMAP"}) {
        fits_movnam_hdu(out, ANY_HDU, const_cast<char*>(hdu), 0, &s);
        for (const char* key : {"TARGTRA", "TARGTDEC", "SKYRA", "SKYDEC", "TELRA", "TELDEC", "RA", "DEC"}) {
          int ks = 0;
          fits_delete_key(out, key, &ks); // absent keys are fine
        }
      }
      fits_close_file(out, &s);
      QCOMPARE(s, 0);
    }
    const Run r = desi({"-i", QString::fromStdString(pre), "-p", P, "-o", t("nopoint.fits"), "-w",
                        "6000,6040,0.8", "-s", "0", "-n", "5", "--no-gpu", "--bary"});
    QVERIFY(r.code != 0 && !r.crashed);
    QVERIFY2(r.err.contains("TARGTRA") && r.err.contains("RA"), qPrintable(r.err));
    QVERIFY(!fs::exists(t("nopoint.fits").toStdString()));
  }

  // bench --json escapes what it prints (a path with quotes and backslashes).
  void benchJsonIsValidWithAnOddPath() {
    const QString odd = tmp.path() + "/we\"ird\\psf 1.fits";
    QVERIFY(QFile::copy(P, odd));
    const Run r = cli({"bench", "-p", odd, "-n", "2", "-w", "6000,6030,0.8", "--engine", "cpu",
                       "--threads", "2", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QJsonParseError perr{};
    const QJsonDocument doc = QJsonDocument::fromJson(r.out.toUtf8(), &perr);
    QVERIFY2(perr.error == QJsonParseError::NoError, qPrintable(perr.errorString() + ": " + r.out));
    QCOMPARE(doc.object().value("source").toString(), "simulated through " + odd);
    QCOMPARE(doc.object().value("nfiber").toInt(), 2);
    QCOMPARE(doc.object().value("nwave").toInt(), 38);
  }

  // bench --profile FILE: the last run's Chrome trace, readable back, with the phases
  // the table printed (its wall is the last of the walls).
  void benchProfileWritesTheLastRunsTrace() {
    const QString trace = tmp.path() + "/bench-trace.json";
    const Run r = cli({"bench", "-p", P, "-n", "2", "-w", "6000,6030,0.8", "--engine", "cpu", "--threads", "2",
                       "--repeat", "2", "--json", "--profile", trace});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QFile f(trace);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const spex::Profile prof = spex::Profile::fromChromeTrace(f.readAll().toStdString());
    const QJsonObject o = QJsonDocument::fromJson(r.out.toUtf8()).object();
    const QJsonArray walls = o.value("walls_s").toArray();
    QCOMPARE(walls.size(), 2);
    QCOMPARE(prof.wallNs * 1e-9, walls.last().toDouble());
    bool extract = false;
    for (const spex::ProfileRange& range : prof.ranges) extract = extract || range.name == "extract";
    QVERIFY(extract);
    QVERIFY(prof.phaseStats().size() >= 3);
  }

  // bench --one-patch N: N single-patch requests on one warm engine (the workbench's
  // way: plan attached, result accumulated), each timed; the JSON has one wall and one
  // CPU time per request, their median and p95, and the phases of the requests; the
  // table says the same in milliseconds.
  void benchOnePatchTimesEachRequest() {
    const QStringList args{"bench", "-p", P, "-s", "25", "-n", "25", "-w", "6000,6200,0.8", "--engine", "cpu",
                           "--threads", "2", "--one-patch", "5"};
    const Run r = cli(args + QStringList{"--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QJsonParseError perr{};
    const QJsonObject o = QJsonDocument::fromJson(r.out.toUtf8(), &perr).object();
    QVERIFY2(perr.error == QJsonParseError::NoError, qPrintable(perr.errorString() + ": " + r.out));
    QCOMPARE(o.value("engine").toString(), QString("cpu"));
    QCOMPARE(o.value("requests").toInt(), 5);
    const int np = o.value("plan_patches").toInt();
    QVERIFY2(np >= 5 * 5, qPrintable(r.out)); // 5 sub-bundles x at least 5 wavelength steps
    const QJsonArray walls = o.value("walls_s").toArray(), cpus = o.value("cpu_s").toArray();
    QCOMPARE(walls.size(), 5);
    QCOMPARE(cpus.size(), 5);
    double mx = 0;
    for (const QJsonValue& w : walls) {
      QVERIFY(w.toDouble() > 0);
      mx = std::max(mx, w.toDouble());
    }
    const double median = o.value("median_s").toDouble(), p95 = o.value("p95_s").toDouble();
    QVERIFY(median > 0 && median <= p95 && p95 <= mx);
    QVERIFY(o.value("first_s").toDouble() > 0);
    // Every request solved its one patch: the CPU engine's per-patch phases are there.
    QStringList names;
    for (const QJsonValue& ph : o.value("phases").toArray()) names << ph.toObject().value("name").toString();
    QVERIFY2(names.contains("patch") && names.contains("solve") && names.contains("decorrelate"),
             qPrintable(names.join(", ")));

    const Run table = cli(args);
    QVERIFY2(table.code == 0, qPrintable(table.err));
    QVERIFY2(table.out.contains("5 requests of one patch each") &&
                 table.out.contains("wall, request to result in memory") && table.out.contains("p95 ms"),
             qPrintable(table.out));
  }
};

QTEST_GUILESS_MAIN(TestDesiCli)
#include "test_desi_cli.moc"
