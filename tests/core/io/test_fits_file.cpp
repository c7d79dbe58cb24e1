// FitsFile and AtomicOutput: keys, headers, images of each type, tables, row edits,
// HDU copies, error messages, and atomic writes that never leave partial files.
#include "core/errors.h"
#include "core/io/fits_file.h"
#include "core/io/fits_scan.h"
#include "io_test_util.h"
#include "test_data.h"

#include <QTemporaryDir>
#include <QTest>
#include <cstring>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

using namespace spex;

class TestFitsFile : public QObject {
  Q_OBJECT

private:
  QTemporaryDir m_tmp;
  std::string tmp(const std::string& name) { return m_tmp.path().toStdString() + "/" + name; }

private slots:
  void initTestCase() { QVERIFY(m_tmp.isValid()); }

  void keysRoundTripExactly() {
    const std::string p = tmp("keys.fits");
    {
      AtomicOutput out(p);
      FitsFile& f = out.file();
      f.writeImage("FIRST", FitsPixel::Float32, Array2D<double>(2, 3, 1.5));
      f.writeString("NAME", "r0", "camera");
      f.writeString("QUOTE", "it's");
      const std::string longValue(150, 'x');
      f.writeString("LONGSTR", longValue + "END");
      f.writeLong("BIG", 1234567890123LL);
      f.writeDouble("STEP", 0.8);
      f.writeDouble("TINY", 1e-300);
      f.writeDouble("THIRD", 1.0 / 3.0);
      f.writeDouble("WHOLE", 5543.0);
      f.writeBool("FLAG", true);
      QVERIFY_THROWS_EXCEPTION(FitsError, f.writeDouble("BAD", std::nan("")));
      out.commit();
    }
    FitsFile f = FitsFile::openRead(p);
    QCOMPARE(f.hduName(), std::string("FIRST"));
    QCOMPARE(f.readString("NAME"), std::string("r0"));
    QCOMPARE(f.readString("QUOTE"), std::string("it's"));
    QCOMPARE(f.readString("LONGSTR"), std::string(150, 'x') + "END");
    QCOMPARE(f.readLong("BIG"), 1234567890123LL);
    QCOMPARE(f.readDouble("STEP"), 0.8); // exact, not 15 digits
    QCOMPARE(f.readDouble("TINY"), 1e-300);
    QCOMPARE(f.readDouble("THIRD"), 1.0 / 3.0);
    QCOMPARE(f.readDouble("WHOLE"), 5543.0);
    QCOMPARE(f.readInt("WHOLE"), 5543); // "5543.0" is still an integer value
    QCOMPARE(f.readBool("FLAG"), true);
    QVERIFY(!f.readDoubleOpt("NOPE").has_value());
    QVERIFY(!f.readLongOpt("NOPE").has_value());
    QVERIFY(!f.readStringOpt("NOPE").has_value());
    QVERIFY(!f.hasKey("NOPE"));
    QVERIFY(f.hasKey("STEP"));
    try {
      f.readDouble("NOPE");
      QFAIL("missing key did not throw");
    } catch (const FitsError& e) {
      QCOMPARE(e.file(), p);
      QCOMPARE(e.hdu(), std::string("FIRST"));
      QCOMPARE(e.key(), std::string("NOPE"));
      QVERIFY(std::string(e.what()).find("missing") != std::string::npos);
    }
    try {
      f.readLong("NAME");
      QFAIL("string read as integer did not throw");
    } catch (const FitsError& e) {
      QCOMPARE(e.key(), std::string("NAME"));
      QVERIFY2(std::string(e.what()).find("is a string, expected an integer") != std::string::npos,
               e.what());
    }
    try {
      f.readInt("BIG");
      QFAIL("out-of-range int did not throw");
    } catch (const FitsError& e) {
      QCOMPARE(e.key(), std::string("BIG"));
    }
  }

  void headerCopySkipsStructuralKeys() {
    const std::string p = tmp("header.fits");
    FitsHeader h;
    h.set("CAMERA", "'b1      '", "camera");
    h.set("EXPTIME", "900.5", "seconds");
    h.set("NAXIS1", "99");       // structural: must not be copied
    h.set("EXTNAME", "'WRONG'"); // structural: must not be copied
    h.cards.push_back({"COMMENT", "", "a comment card"});
    h.cards.push_back({"HISTORY", "", "made by a test"});
    h.set("LONGPATH", "'" + std::string(100, 'p') + "'");
    {
      AtomicOutput out(p);
      out.file().writeImage("IMG", FitsPixel::Float64, Array2D<double>(4, 5, 2.0));
      out.file().writeHeader(h);
      out.commit();
    }
    FitsFile f = FitsFile::openRead(p);
    QCOMPARE(f.hduName(), std::string("IMG"));
    const auto shape = f.imageShape();
    QCOMPARE(shape, (std::vector<long>{4, 5}));
    FitsHeader back = f.readHeader();
    QCOMPARE(back.getString("CAMERA"), std::string("b1"));
    QCOMPARE(back.getString("EXPTIME"), std::string("900.5"));
    QVERIFY(!back.find("NAXIS1"));
    QVERIFY(!back.find("EXTNAME"));
    QVERIFY(!back.find("BITPIX"));
    QCOMPARE(back.getString("LONGPATH"), std::string(100, 'p'));
    bool comment = false, history = false;
    for (const auto& c : back.cards) {
      comment = comment || (c.key == "COMMENT" && c.comment == "a comment card");
      history = history || (c.key == "HISTORY" && c.comment == "made by a test");
    }
    QVERIFY(comment);
    QVERIFY(history);
  }

  void imagesOfEveryType() {
    const std::string p = tmp("images.fits");
    Array2D<double> d(3, 4);
    for (std::size_t i = 0; i < d.size(); ++i) d.data[i] = 0.1 * double(i) - 0.35;
    Array2D<uint32_t> u(3, 4);
    for (std::size_t i = 0; i < u.size(); ++i) u.data[i] = uint32_t(i) | 0x80000000u;
    Array2D<int32_t> m(3, 4);
    for (std::size_t i = 0; i < m.size(); ++i) m.data[i] = int32_t(i) - 6;
    Array3D<double> cube(2, 3, 4);
    for (std::size_t i = 0; i < cube.size(); ++i) cube.data[i] = double(i);
    {
      AtomicOutput out(p);
      FitsFile& f = out.file();
      f.writeImage("F64", FitsPixel::Float64, d);
      f.writeImage("F32", FitsPixel::Float32, d);
      f.writeImage("U32", FitsPixel::UInt32, u);
      f.writeImage("I32", FitsPixel::Int32, m);
      f.writeImage("CUBE", FitsPixel::Float32, cube);
      f.writeImage("VEC", FitsPixel::Float64, std::vector<double>{1, 2, 3});
      out.commit();
    }
    {
      iotest::Raw raw(p);
      raw.hdu("U32");
      QCOMPARE(raw.bitpix(), 32);
      QCOMPARE(raw.dbl("BZERO"), 2147483648.0);
      raw.hdu("CUBE");
      QCOMPARE(raw.naxes(), (std::vector<long>{4, 3, 2}));
    }
    FitsFile f = FitsFile::openRead(p);
    QCOMPARE(f.hduCount(), 6);
    f.moveTo("F64");
    QCOMPARE(f.readImage2D<double>(3, 4).data, d.data);
    f.moveTo("F32");
    const auto f32 = f.readImage2D<double>();
    for (std::size_t i = 0; i < d.size(); ++i) QCOMPARE(f32.data[i], double(float(d.data[i])));
    f.moveTo("U32");
    QCOMPARE(f.readImage2D<uint32_t>().data, u.data);
    f.moveTo("I32");
    QCOMPARE(f.readImage2D<int32_t>().data, m.data);
    QCOMPARE(f.readImage2D<double>()(0, 0), -6.0);
    f.moveTo("CUBE");
    const auto c = f.readImage3D<double>(2, 3, 4);
    QCOMPARE(c.data, cube.data);
    QVERIFY_THROWS_EXCEPTION(FitsError, f.readImage2D<double>()); // 3D is not 2D
    f.moveTo("VEC");
    QCOMPARE(f.readImage1D(3), (std::vector<double>{1, 2, 3}));
    f.moveTo("F64");
    try {
      f.readImage2D<double>(4, 3);
      QFAIL("shape check did not throw");
    } catch (const FitsError& e) {
      QCOMPARE(e.hdu(), std::string("F64"));
      QVERIFY2(std::string(e.what()).find("3 x 4") != std::string::npos, e.what());
    }
    f.moveToIndex(0);
    QCOMPARE(f.hduName(), std::string("F64"));
    QCOMPARE(f.currentIndex(), 0);
    QVERIFY(!f.tryMoveTo("NOPE"));
    try {
      f.moveTo("NOPE");
      QFAIL("missing HDU did not throw");
    } catch (const FitsError& e) {
      QCOMPARE(e.hdu(), std::string("NOPE"));
      QCOMPARE(e.file(), p);
    }
  }

  void tablesRowsAndCopies() {
    const std::string p = tmp("table.fits");
    const std::string q = tmp("copy.fits");
    {
      AtomicOutput out(p);
      FitsFile& f = out.file();
      f.writeImage("", FitsPixel::Float32, Array2D<double>(0, 0));
      f.createTable("T",
                    {{"FIBER", "J", "", {}},
                     {"ID", "K", "", {}},
                     {"NAME", "5A", "", {}},
                     {"X", "D", "deg", {}},
                     {"COEFF", "6D", "", {3, 2}}},
                    5);
      f.writeColumn("FIBER", std::vector<int32_t>{4, 2, 9, 3, 1});
      f.writeColumn("ID", std::vector<int64_t>{40000000000LL, 20, 90, 30, 10});
      f.writeColumn("NAME", std::vector<std::string>{"d", "bb", "nine", "c", "a"});
      f.writeColumn("X", std::vector<double>{0.4, 0.2, 0.9, 0.3, 0.1});
      for (long r = 0; r < 5; ++r) {
        double v[6];
        for (int k = 0; k < 6; ++k) v[k] = 10.0 * r + k;
        f.writeCell("COEFF", r, v, 6);
      }
      out.commit();
    }
    FitsFile f = FitsFile::openRead(p);
    f.moveTo("T");
    QVERIFY(f.currentIsTable());
    QCOMPARE(f.numRows(), 5L);
    QVERIFY(f.hasColumn("fiber")); // case-insensitive like FITS
    QVERIFY(!f.hasColumn("NOPE"));
    QCOMPARE(f.readColumnInt("FIBER"), (std::vector<int32_t>{4, 2, 9, 3, 1}));
    QCOMPARE(f.readColumnLong("ID")[0], 40000000000LL);
    QCOMPARE(f.readColumnDouble("FIBER")[2], 9.0);
    QCOMPARE(f.readColumnString("NAME")[2], std::string("nine"));
    QCOMPARE(f.columnCellShape("COEFF"), (std::vector<long>{3, 2}));
    const auto cell = f.readCellDouble("COEFF", 2, 3, 2);
    QCOMPARE(cell(0, 0), 20.0);
    QCOMPARE(cell(2, 1), 25.0);
    QVERIFY_THROWS_EXCEPTION(FitsError, f.readCellDouble("COEFF", 2, 2, 3));
    QVERIFY_THROWS_EXCEPTION(FitsError, f.readCellDouble("COEFF", 7));
    QVERIFY_THROWS_EXCEPTION(FitsError, f.readColumnInt("ID"));    // overflows int32
    QVERIFY_THROWS_EXCEPTION(FitsError, f.readColumnInt("COEFF")); // not a scalar
    try {
      f.readColumnInt("NOPE");
      QFAIL("missing column did not throw");
    } catch (const FitsError& e) {
      QCOMPARE(e.hdu(), std::string("T"));
      QCOMPARE(e.key(), std::string("NOPE"));
    }

    // Copy the table into a new file, drop rows and sort the rest by FIBER.
    {
      AtomicOutput out(q);
      FitsFile& g = out.file();
      g.writeImage("", FitsPixel::Float32, Array2D<double>(0, 0));
      g.copyHduFrom(f);
      QCOMPARE(g.hduName(), std::string("T"));
      g.deleteRows({2, 0}); // FIBER 9 and 4 go
      QCOMPARE(g.readColumnInt("FIBER"), (std::vector<int32_t>{2, 3, 1}));
      g.permuteRows({2, 0, 1});
      out.commit();
    }
    FitsFile g = FitsFile::openRead(q);
    g.moveTo("T");
    QCOMPARE(g.readColumnInt("FIBER"), (std::vector<int32_t>{1, 2, 3}));
    QCOMPARE(g.readColumnLong("ID"), (std::vector<int64_t>{10, 20, 30}));
    QCOMPARE(g.readColumnString("NAME"), (std::vector<std::string>{"a", "bb", "c"}));
    QCOMPARE(g.readCellDouble("COEFF", 0)(0, 0), 40.0); // old row 4
    iotest::Raw raw(q);
    raw.hdu("T");
    char unit[FLEN_VALUE] = {};
    int status = 0;
    fits_read_key(raw.f(), TSTRING, "TUNIT4", unit, nullptr, &status);
    QCOMPARE(status, 0);
    QCOMPARE(std::string(unit), std::string("deg"));
  }

  void openErrorsNameTheProblem() {
    const std::string missing = tmp("does-not-exist.fits");
    try {
      FitsFile::openRead(missing);
      QFAIL("no throw");
    } catch (const FitsError& e) {
      QCOMPARE(e.file(), missing);
      QVERIFY(std::string(e.what()).find("does not exist") != std::string::npos);
    }
    const std::string text = tmp("text.fits");
    std::ofstream(text) << "this is not a FITS file, just words\n";
    try {
      FitsFile::openRead(text);
      QFAIL("no throw");
    } catch (const FitsError& e) {
      QCOMPARE(e.file(), text);
      QVERIFY2(std::string(e.what()).find("not a FITS file") != std::string::npos, e.what());
    }
    try {
      FitsFile::openRead(m_tmp.path().toStdString());
      QFAIL("no throw");
    } catch (const FitsError& e) {
      QVERIFY(std::string(e.what()).find("directory") != std::string::npos);
    }
  }

  void gzipReadTransparently() {
    SPEX_REQUIRE_DATA(model, "sim-r0-bundle0-6000-6500/model-gpu_specter.fits.gz");
    FitsFile f = FitsFile::openRead(model);
    QCOMPARE(f.hduName(), std::string("MODEL"));
    QCOMPARE(f.imageShape(), (std::vector<long>{4128, 4114}));
    QCOMPARE(f.readString("CAMERA"), std::string("r0"));
  }

  void gzipInflatedOnceIntoMemory() {
    // Three HDUs, gzipped as two members (gzip's concatenation, which zlib and CFITSIO
    // read as one stream).
    const std::string plain = tmp("mem.fits");
    {
      AtomicOutput out(plain);
      FitsFile& f = out.file();
      f.writeImage("A", FitsPixel::Float32, Array2D<double>(30, 40, 2.5));
      f.createTable("T", {{"X", "J", "", {}}, {"NAME", "8A", "", {}}}, 3);
      f.writeColumn("X", std::vector<int32_t>{4, 5, 6});
      f.writeColumn("NAME", std::vector<std::string>{"a", "bb", "ccc"});
      f.writeString("EXTRA", "kept");
      f.writeImage("B", FitsPixel::Int32, Array2D<int32_t>(5, 6, 7));
      out.commit();
    }
    std::string bytes;
    {
      std::ifstream in(plain, std::ios::binary);
      std::ostringstream ss;
      ss << in.rdbuf();
      bytes = ss.str();
    }
    const std::string gz = tmp("mem.fits.gz");
    for (int member = 0; member < 2; ++member) {
      gzFile g = gzopen(gz.c_str(), member == 0 ? "wb" : "ab");
      const std::size_t cut = bytes.size() / 3;
      const std::string part = member == 0 ? bytes.substr(0, cut) : bytes.substr(cut);
      gzwrite(g, part.data(), unsigned(part.size()));
      gzclose(g);
    }
    const auto mem = inflateGzipFile(gz);
    QVERIFY(mem->inflated());
    QVERIFY(std::string(mem->data(), mem->size()) == bytes);

    FitsFile f = FitsFile::openRead(gz);
    f.moveTo("T");
    QCOMPARE(f.readColumnInt("X"), (std::vector<int32_t>{4, 5, 6}));
    // The HDU's bytes as the file holds them: A is one header block and two data
    // blocks (30 x 40 float32), so T starts at block 3; the plain file gives the same.
    const std::string raw = f.rawHdu();
    QCOMPARE(raw.size() % 2880, std::size_t(0));
    QVERIFY(raw == bytes.substr(3 * 2880, raw.size()));
    {
      FitsFile d = FitsFile::openRead(plain);
      d.moveTo("T");
      QVERIFY(d.rawHdu() == raw);
    }
    // A second handle on the same bytes moves on its own.
    FitsFile g = f.reopen();
    g.moveTo("B");
    QCOMPARE(g.readImage2D<int32_t>(5, 6)(4, 5), 7);
    QCOMPARE(f.hduName(), std::string("T"));
    QCOMPARE(f.readColumnString("NAME"), (std::vector<std::string>{"a", "bb", "ccc"}));

    // The HDU alone, without its file: a copy is the same HDU.
    FitsFile c = FitsFile::openHduCopy(raw, "copy of T");
    f = FitsFile();
    g = FitsFile();
    QCOMPARE(c.hduName(), std::string("T"));
    QCOMPARE(c.readString("EXTRA"), std::string("kept"));
    QCOMPARE(c.readColumnString("NAME"), (std::vector<std::string>{"a", "bb", "ccc"}));
    const std::string copied = tmp("copied.fits");
    {
      AtomicOutput out(copied);
      out.file().writeImage("P", FitsPixel::UInt8, Array2D<uint8_t>(1, 1, 0));
      out.file().copyHduFrom(c);
      out.commit();
    }
    {
      FitsFile back = FitsFile::openRead(copied);
      back.moveTo("T");
      QVERIFY(back.rawHdu() == raw);
    }

    // Hostile gzip files are still refused by name, before CFITSIO sees them.
    auto refused = [&](const std::string& name, const std::string& content, const char* says) {
      const std::string p = tmp(name);
      std::ofstream(p, std::ios::binary) << content;
      try {
        FitsFile::openRead(p);
        QFAIL(("no throw for " + name).c_str());
      } catch (const FitsError& e) {
        QCOMPARE(e.file(), p);
        QVERIFY2(std::string(e.what()).find(says) != std::string::npos, e.what());
      }
    };
    std::string zipped;
    {
      std::ifstream in(gz, std::ios::binary);
      std::ostringstream ss;
      ss << in.rdbuf();
      zipped = ss.str();
    }
    refused("cut.fits.gz", zipped.substr(0, zipped.size() - 100), "gzip stream is corrupt");
    refused("tail.fits.gz", zipped + "garbage!", "gzip trailer claims");
    std::string flipped = zipped;
    flipped[zipped.size() / 4] = char(~flipped[zipped.size() / 4]);
    refused("flipped.fits.gz", flipped, "gzip");
  }

  void checksumsOfEveryImageTypeVerify() {
    // writeImage sums the data it writes (DATASUM) and writeChecksums then sums only the
    // headers: CFITSIO's own verification, which re-reads every byte, must agree.
    const std::string p = tmp("sums.fits");
    Array2D<double> d(7, 13);
    for (std::size_t i = 0; i < d.size(); ++i) d.data[i] = (i % 3 ? 1.0 : -1.0) * std::pow(1.7, double(i % 40)) / 3.0;
    d.data[5] = std::nan("");
    d.data[6] = -0.0;
    d.data[7] = 3.4e38;
    Array2D<float> fl(5, 3);
    for (std::size_t i = 0; i < fl.size(); ++i) fl.data[i] = float(i) * 1.25f - 7.0f;
    Array2D<uint32_t> u(4, 9);
    for (std::size_t i = 0; i < u.size(); ++i) u.data[i] = uint32_t(i) * 0x1234567u;
    u.data[0] = 0x80000001u;
    u.data[1] = 0xFFFFFFFFu;
    Array2D<int32_t> s32(3, 11);
    for (std::size_t i = 0; i < s32.size(); ++i) s32.data[i] = int32_t(i * 7919) - 100000;
    std::vector<double> w(1001);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = 5760.0 + 0.8 * double(i);
    {
      AtomicOutput out(p);
      FitsFile& f = out.file();
      f.writeImage("F32D", FitsPixel::Float32, d);
      f.writeImage("F32F", FitsPixel::Float32, fl);
      f.writeImage("U32", FitsPixel::UInt32, u);
      f.writeImage("I32", FitsPixel::Int32, s32);
      f.writeImage("F64", FitsPixel::Float64, w);
      f.writeImage("U8", FitsPixel::UInt8, Array2D<uint8_t>(3, 3, 200)); // summed by CFITSIO
      f.writeImage("EMPTY", FitsPixel::Float32, Array2D<float>(0, 0));
      f.createTable("T", {{"X", "D", "", {}}}, 3);
      f.writeColumn("X", std::vector<double>{1, 2, 3});
      f.writeChecksums();
      out.commit();
    }
    FitsFile f = FitsFile::openRead(p);
    for (int i = 0; i < f.hduCount(); ++i) {
      f.moveToIndex(i);
      QVERIFY2(f.hasKey("DATASUM") && f.hasKey("CHECKSUM"), f.hduName().c_str());
      QVERIFY2(f.verifyChecksum(), f.hduName().c_str());
    }
    f.moveTo("U32");
    QCOMPARE(f.readImage2D<uint32_t>(4, 9).data, u.data);
  }

  // A float32 image written in pieces (writeFrame's RESOLUTION): the values read back
  // are the pieces in order, the data sums added piece by piece verify with CFITSIO's
  // own re-reading, and a piece past the end or a missing one is an error naming it.
  void imageWrittenInPiecesVerifies() {
    const std::string p = tmp("pieces.fits");
    Array3D<float> a(5, 3, 37); // 555 values in pieces of 200, 1, 0, 354
    for (std::size_t i = 0; i < a.size(); ++i) a.data[i] = float(std::sin(double(i))) * 3.0e4f;
    a.data[3] = -0.0f;
    a.data[4] = std::numeric_limits<float>::quiet_NaN();
    a.data[5] = 3.4e38f;
    {
      AtomicOutput out(p);
      FitsFile& f = out.file();
      f.writeImage("FIRST", FitsPixel::Float32, Array2D<float>(2, 2, 1.5f));
      f.beginFloatImage("PIECES", {5, 3, 37});
      long long at = 0;
      for (long long n : {200LL, 1LL, 0LL, 354LL}) {
        FitsDataSum sum;
        sum.addFloats(a.data.data() + at, n);
        f.writeImagePart(a.data.data() + at, n, sum);
        at += n;
      }
      f.endImage();
      f.writeChecksums();
      out.commit();
    }
    FitsFile f = FitsFile::openRead(p);
    for (int i = 0; i < f.hduCount(); ++i) {
      f.moveToIndex(i);
      QVERIFY2(f.verifyChecksum(), f.hduName().c_str());
    }
    f.moveTo("PIECES");
    const Array3D<float> back = f.readImage3D<float>();
    QCOMPARE(back.n0, 5);
    QCOMPARE(back.n1, 3);
    QCOMPARE(back.n2, 37);
    QCOMPARE(std::memcmp(back.data.data(), a.data.data(), a.size() * sizeof(float)), 0); // NaN, -0 too

    AtomicOutput bad(tmp("pieces-bad.fits"));
    FitsFile& g = bad.file();
    g.beginFloatImage("SHORT", {2, 5});
    FitsDataSum sum;
    try {
      g.writeImagePart(a.data.data(), 11, sum);
      QFAIL("a piece past the image's end was written");
    } catch (const FitsError& e) {
      QVERIFY2(QString(e.what()).contains("past the image's 10"), e.what());
    }
    g.writeImagePart(a.data.data(), 4, sum);
    try {
      g.endImage();
      QFAIL("an image missing values was ended");
    } catch (const FitsError& e) {
      QVERIFY2(QString(e.what()).contains("4 of its 10 values"), e.what());
    }
  }

  void gzipWrite() {
    const std::string p = tmp("small.fits.gz");
    {
      AtomicOutput out(p);
      QVERIFY(out.tempPath().rfind(tmp("small.fits.tmp-"), 0) == 0);
      out.file().writeImage("A", FitsPixel::Float64, Array2D<double>(10, 10, 3.0));
      out.commit();
    }
    std::ifstream in(p, std::ios::binary);
    unsigned char magic[2] = {};
    in.read(reinterpret_cast<char*>(magic), 2);
    QCOMPARE(int(magic[0]), 0x1f); // gzip
    QCOMPARE(int(magic[1]), 0x8b);
    FitsFile f = FitsFile::openRead(p);
    QCOMPARE(f.readImage2D<double>(10, 10)(9, 9), 3.0);
  }

  void atomicOutputChecksTheDirectory() {
    const std::string missingDir = tmp("no-such-dir") + "/out.fits";
    try {
      AtomicOutput out(missingDir);
      QFAIL("no throw");
    } catch (const FitsError& e) {
      QCOMPARE(e.file(), missingDir);
      QVERIFY2(std::string(e.what()).find("does not exist") != std::string::npos, e.what());
    }
    QVERIFY(!std::filesystem::exists(tmp("no-such-dir")));

    // A path whose "directory" is a regular file.
    const std::string plain = tmp("plain-file");
    std::ofstream(plain) << "x";
    try {
      AtomicOutput out(plain + "/out.fits");
      QFAIL("no throw");
    } catch (const FitsError& e) {
      QVERIFY2(std::string(e.what()).find("not a directory") != std::string::npos, e.what());
    }

    // A directory we may not write to. Root ignores permission bits, so as root use
    // /proc, where nobody can create files.
    std::string ro;
    if (::geteuid() != 0) {
      ro = tmp("readonly");
      std::filesystem::create_directory(ro);
      ::chmod(ro.c_str(), 0555);
    } else {
      ro = "/proc";
    }
    const std::string target = ro + "/out.fits";
    QVERIFY_THROWS_EXCEPTION(FitsError, AtomicOutput out(target));
    QVERIFY(!std::filesystem::exists(target));
    if (ro != "/proc") {
      QVERIFY(iotest::listDir(ro).empty());
      ::chmod(ro.c_str(), 0755);
    }
  }

  void failedWriteLeavesNothingAndKeepsTheOldFile() {
    const std::string dir = tmp("atomic");
    std::filesystem::create_directory(dir);
    const std::string p = dir + "/out.fits";
    {
      AtomicOutput out(p);
      out.file().writeImage("OLD", FitsPixel::Float64, Array2D<double>(2, 2, 7.0));
      out.commit();
    }
    const auto before = std::filesystem::file_size(p);
    std::string tempName;
    try {
      AtomicOutput out(p);
      tempName = out.tempPath();
      QVERIFY(std::filesystem::exists(tempName));
      out.file().writeImage("NEW", FitsPixel::Float64, Array2D<double>(50, 50, 1.0));
      out.file().writeDouble("BAD", std::numeric_limits<double>::infinity()); // throws
      out.commit();
      QFAIL("no throw");
    } catch (const FitsError&) {
    }
    QVERIFY(!tempName.empty());
    QVERIFY(!std::filesystem::exists(tempName));
    QCOMPARE(iotest::listDir(dir), (std::vector<std::string>{"out.fits"}));
    QCOMPARE(std::filesystem::file_size(p), before);
    FitsFile f = FitsFile::openRead(p);
    QCOMPARE(f.hduName(), std::string("OLD"));
    QCOMPARE(f.readImage2D<double>()(1, 1), 7.0);

    // Not committed, no exception: still nothing.
    { AtomicOutput out(dir + "/never.fits"); }
    QCOMPARE(iotest::listDir(dir), (std::vector<std::string>{"out.fits"}));
  }
};

QTEST_APPLESS_MAIN(TestFitsFile)
#include "test_fits_file.moc"
