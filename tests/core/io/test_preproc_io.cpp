// readPreproc/writePreproc: the shared simulated exposure (gzip-compressed), the
// extraction mask applied to IVAR (EXTRACTION.md §1), bad pixels counted and masked,
// float masks, and write -> read round trips checked with raw CFITSIO.
#include "core/errors.h"
#include "core/io/fits_file.h"
#include "core/io/preproc_io.h"
#include "io_test_util.h"
#include "test_data.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <limits>

using namespace spex;

class TestPreprocIo : public QObject {
  Q_OBJECT

private:
  QTemporaryDir m_tmp;
  std::string tmp(const std::string& n) { return m_tmp.path().toStdString() + "/" + n; }

private slots:
  void initTestCase() { QVERIFY(m_tmp.isValid()); }

  void sharedSimulation() {
    SPEX_REQUIRE_DATA(path, "sim-r0-bundle0-6000-6500/preproc.fits.gz");
    const Image img = readPreproc(path);
    QCOMPARE(img.path, path);
    QCOMPARE(img.ny, 4128);
    QCOMPARE(img.nx, 4114);
    QCOMPARE(img.pix.rows, 4128);
    QCOMPARE(img.pix.cols, 4114);
    QCOMPARE(img.nonFinitePixels, 0);
    QCOMPARE(img.header.getString("CAMERA"), std::string("r0"));
    QCOMPARE(img.header.getString("FLAVOR"), std::string("science"));
    QVERIFY(!img.header.find("EXTNAME"));
    QVERIFY(!img.header.find("NAXIS1"));
    QCOMPARE(img.fibermap.sourceFile, path);
    QCOMPARE(img.fibermap.fiber.size(), std::size_t(500));
    for (int i = 0; i < 500; ++i) QCOMPARE(img.fibermap.fiber[std::size_t(i)], i);

    // Independent read of the raw planes.
    iotest::Raw raw(path);
    raw.hdu("IVAR");
    const std::vector<double> ivar = raw.pixels();
    raw.hdu("MASK");
    const std::vector<double> mask = raw.pixels();
    raw.hdu("IMAGE");
    const std::vector<double> pix = raw.pixels();
    long masked = 0, cosmic = 0, live = 0;
    for (std::size_t i = 0; i < ivar.size(); ++i) {
      const int32_t m = int32_t(mask[i]);
      QCOMPARE(img.mask.data[i], m);
      QCOMPARE(img.pix.data[i], pix[i]);
      if (m & kExtractionMaskBits) {
        ++masked;
        if (img.ivar.data[i] != 0.0)
          QFAIL(("ivar not 0 at masked pixel " + std::to_string(i)).c_str());
        if ((m & 16) && ivar[i] == 0 && m != 1) ++cosmic;
      } else {
        if (img.ivar.data[i] != ivar[i])
          QFAIL(("ivar changed at clean pixel " + std::to_string(i)).c_str());
        live += ivar[i] > 0;
      }
    }
    QVERIFY(masked > 0);
    QVERIFY(cosmic > 0);    // the README's cosmic-like pixels (bit 4)
    QVERIFY(live > 100000); // bundle 0's traces
  }

  void badPixelsAreMaskedAndCounted() {
    Image img = iotest::smallImage(6, 8);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    img.pix(0, 0) = nan;
    img.pix(1, 1) = std::numeric_limits<double>::infinity();
    img.ivar(2, 2) = -1.0;
    img.ivar(3, 3) = nan;
    img.ivar(4, 4) = -0.5;
    img.mask(5, 5) = 1 << 4; // COSMIC: an extraction bit
    img.mask(5, 6) = 1 << 8; // not an extraction bit: pixel stays usable
    img.mask(5, 7) = 1 << 9; // BADAMP
    const std::string p = tmp("bad.fits");
    writePreproc(p, img, iotest::smallFibermap({0, 1, 2}));
    const Image back = readPreproc(p); // not fatal
    QCOMPARE(back.nonFinitePixels, 5);
    for (auto [y, x] : std::vector<std::pair<int, int>>{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}}) {
      QCOMPARE(back.ivar(y, x), 0.0);
      QVERIFY(std::isfinite(back.pix(y, x)));
    }
    QCOMPARE(back.ivar(5, 5), 0.0);
    QCOMPARE(back.ivar(5, 7), 0.0);
    QCOMPARE(back.ivar(5, 6), double(float(img.ivar(5, 6))));
    QCOMPARE(back.mask(5, 6), 1 << 8);
    QCOMPARE(back.ivar(0, 1), double(float(img.ivar(0, 1))));
  }

  void writeReadRoundTrip() {
    Image img = iotest::smallImage(7, 9);
    img.mask(3, 4) = 2;
    const std::string p = tmp("preproc.fits");
    writePreproc(p, img, iotest::smallFibermap({3, 1, 2, 0}));
    {
      iotest::Raw raw(p);
      QCOMPARE(raw.hduCount(), 4);
      raw.hduIndex(0);
      QCOMPARE(raw.extname(), std::string("IMAGE"));
      QCOMPARE(raw.bitpix(), -32);
      QCOMPARE(raw.str("CAMERA"), std::string("r0"));
      QCOMPARE(raw.lng("EXPID"), 1234LL);
      raw.hdu("IVAR");
      QCOMPARE(raw.bitpix(), -32);
      raw.hdu("MASK");
      QCOMPARE(raw.bitpix(), 32);
      raw.hdu("FIBERMAP");
      QCOMPARE(raw.rows(), 4L);
      QCOMPARE(raw.longColumn("FIBER"), (std::vector<long long>{3, 1, 2, 0}));
      QCOMPARE(raw.longColumn("TARGETID")[0], 1000000000003LL);
      QCOMPARE(raw.stringColumn("OBJTYPE", 3),
               (std::vector<std::string>{"TGT", "TGT", "TGT", "SKY"}));
      QCOMPARE(raw.longColumn("FIBERSTATUS"), (std::vector<long long>{0, 0, 0, 0}));
      QVERIFY(raw.colnum("TARGET_RA") > 0 && raw.colnum("TARGET_DEC") > 0);
    }
    const Image back = readPreproc(p);
    QCOMPARE(back.ny, 7);
    QCOMPARE(back.nx, 9);
    for (std::size_t i = 0; i < img.pix.size(); ++i)
      QCOMPARE(back.pix.data[i], double(float(img.pix.data[i])));
    QCOMPARE(back.mask(3, 4), 2);
    QCOMPARE(back.ivar(3, 4), 0.0);
    QCOMPARE(back.header.getString("FLAVOR"), std::string("science"));
    QCOMPARE(back.fibermap.fiber, (std::vector<int32_t>{3, 1, 2, 0}));
    QCOMPARE(back.fibermap.sourceFile, p);
  }

  void floatMaskAndNoFibermapAreFine() {
    const std::string p = tmp("floatmask.fits");
    {
      AtomicOutput out(p);
      FitsFile& f = out.file();
      f.writeImage("IMAGE", FitsPixel::Float64, Array2D<double>(3, 4, 5.0));
      f.writeImage("IVAR", FitsPixel::Float64, Array2D<double>(3, 4, 2.0));
      Array2D<double> m(3, 4, 0.0);
      m(1, 2) = 16.0;
      f.writeImage("MASK", FitsPixel::Float32, m);
      out.commit();
    }
    const Image img = readPreproc(p);
    QCOMPARE(img.mask(1, 2), 16);
    QCOMPARE(img.ivar(1, 2), 0.0);
    QCOMPARE(img.ivar(0, 0), 2.0);
    QVERIFY(img.fibermap.sourceFile.empty());
    QVERIFY(img.fibermap.fiber.empty());
  }
};

QTEST_APPLESS_MAIN(TestPreprocIo)
#include "test_preproc_io.moc"
