// readPsf/writePsf on the real r0 PSF (EXTRACTION.md §1): its known facts, values
// equal to what raw CFITSIO reads, and write -> read round trips (also with LEGDEG 3,
// so nothing depends on the r0 file's degrees).
#include "core/errors.h"
#include "core/io/psf_io.h"
#include "io_test_util.h"
#include "test_data.h"

#include <QTemporaryDir>
#include <QTest>

#include <cmath>

using namespace spex;

namespace {
void compareSets(const LegendreSet& a, const LegendreSet& b, const char* what) {
  QVERIFY2(a.wavemin == b.wavemin && a.wavemax == b.wavemax, what);
  QVERIFY2(a.coeff.rows == b.coeff.rows && a.coeff.cols == b.coeff.cols, what);
  QVERIFY2(a.coeff.data == b.coeff.data, what);
}
} // namespace

class TestPsfIo : public QObject {
  Q_OBJECT

private:
  QTemporaryDir m_tmp;
  GaussHermitePsf m_psf;
  std::string m_path;

  void comparePsfs(const GaussHermitePsf& a, const GaussHermitePsf& b) {
    QCOMPARE(a.nfiber, b.nfiber);
    QCOMPARE(a.fiberMin, b.fiberMin);
    QCOMPARE(a.npixX, b.npixX);
    QCOMPARE(a.npixY, b.npixY);
    QCOMPARE(a.hsizeX, b.hsizeX);
    QCOMPARE(a.hsizeY, b.hsizeY);
    QCOMPARE(a.ghdegX, b.ghdegX);
    QCOMPARE(a.ghdegY, b.ghdegY);
    QCOMPARE(a.legdeg, b.legdeg);
    QCOMPARE(a.psfErr, b.psfErr);
    compareSets(a.xTrace, b.xTrace, "XTRACE");
    compareSets(a.yTrace, b.yTrace, "YTRACE");
    compareSets(a.ghSigX, b.ghSigX, "GHSIGX");
    compareSets(a.ghSigY, b.ghSigY, "GHSIGY");
    QCOMPARE(a.gh.size(), b.gh.size());
    for (std::size_t i = 0; i < a.gh.size(); ++i) compareSets(a.gh[i], b.gh[i], "GH");
    QCOMPARE(a.otherParams.size(), b.otherParams.size());
    for (const auto& [name, s] : a.otherParams) {
      QVERIFY2(b.otherParams.count(name), name.c_str());
      compareSets(s, b.otherParams.at(name), name.c_str());
    }
  }

private slots:
  void initTestCase() {
    QVERIFY(m_tmp.isValid());
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    m_path = path;
    m_psf = readPsf(path);
  }

  void realPsfKnownFacts() {
    const GaussHermitePsf& p = m_psf;
    QCOMPARE(p.path, m_path);
    QCOMPARE(p.nfiber, 500);
    QCOMPARE(p.fiberMin, 0);
    QCOMPARE(p.npixX, 4114);
    QCOMPARE(p.npixY, 4128);
    QCOMPARE(p.hsizeX, 8);
    QCOMPARE(p.hsizeY, 5);
    QCOMPARE(p.spotNx(), 17);
    QCOMPARE(p.spotNy(), 11);
    QCOMPARE(p.ghdegX, 6);
    QCOMPARE(p.ghdegY, 6);
    QCOMPARE(p.legdeg, 1);
    QCOMPARE(p.psfErr, 0.01); // no PSFERR key: the default (PSFERROR is not it)
    QCOMPARE(p.xTrace.ncoeff(), 7);
    QCOMPARE(p.yTrace.ncoeff(), 7);
    QCOMPARE(p.xTrace.coeff.rows, 500);
    QVERIFY(std::abs(p.xTrace.wavemin - 5543) < 1 && std::abs(p.xTrace.wavemax - 7826) < 1);
    QVERIFY(std::abs(p.yTrace.wavemin - 5543) < 1 && std::abs(p.yTrace.wavemax - 7826) < 1);
    QVERIFY(std::abs(p.ghSigX.wavemin - 5543) < 1 && std::abs(p.ghSigX.wavemax - 7827) < 1);
    QCOMPARE(p.ghSigX.ncoeff(), 2);
    QCOMPARE(p.gh.size(), std::size_t(49));
    for (const auto& s : p.gh) {
      QCOMPARE(s.coeff.rows, 500);
      QCOMPARE(s.coeff.cols, 2);
      QCOMPARE(s.wavemax, p.ghSigX.wavemax);
    }
    for (const char* name :
         {"TAILAMP", "TAILCORE", "TAILXSCA", "TAILYSCA", "TAILINDE", "BUNDLE", "STATUS", "CONT"})
      QVERIFY2(p.otherParams.count(name), name);
    QCOMPARE(p.otherParams.size(), std::size_t(8));
    // Traces land on the CCD, sigmas are a pixel or so.
    const double x = p.x(250, 6500), y = p.y(250, 6500);
    QVERIFY(x > 0 && x < p.npixX);
    QVERIFY(y > 0 && y < p.npixY);
    const double sig = p.ghSigX.eval(250, 6500);
    QVERIFY2(sig > 0.5 && sig < 2.5, std::to_string(sig).c_str());
    // GH-0-0 dominates.
    QVERIFY(p.ghCoeff(0, 0).eval(10, 6000) > 0.5);
  }

  void valuesEqualRawCfitsio() {
    iotest::Raw raw(m_path);
    raw.hduIndex(0);
    QCOMPARE(raw.extname(), std::string("XTRACE"));
    QCOMPARE(raw.pixels(), m_psf.xTrace.coeff.data);
    QCOMPARE(raw.dbl("WAVEMIN"), m_psf.xTrace.wavemin);
    raw.hdu("YTRACE");
    QCOMPARE(raw.pixels(), m_psf.yTrace.coeff.data);
    raw.hdu("PSF");
    const auto names = raw.stringColumn("PARAM", 8);
    QCOMPARE(names.size(), std::size_t(59));
    for (std::size_t r = 0; r < names.size(); ++r) {
      std::string n = names[r];
      const std::vector<double> cell = raw.cell("COEFF", long(r), 1000);
      const LegendreSet* s = nullptr;
      if (n == "GHSIGX")
        s = &m_psf.ghSigX;
      else if (n == "GHSIGY")
        s = &m_psf.ghSigY;
      else if (n.rfind("GH-", 0) == 0) {
        const int i = n[3] - '0', j = n[5] - '0';
        s = &m_psf.ghCoeff(i, j);
      } else
        s = &m_psf.otherParams.at(n);
      // COEFF TDIM (2,500): per fiber two Legendre coefficients, contiguous.
      QVERIFY2(s->coeff.data == cell, n.c_str());
    }
    QCOMPARE(m_psf.ghCoeff(3, 2).coeff(17, 1), raw.cell("COEFF", 2 + 2 * 7 + 3, 1000)[17 * 2 + 1]);
  }

  void writeReadRoundTrip() {
    const std::string out = m_tmp.path().toStdString() + "/psf-copy.fits";
    writePsf(out, m_psf);
    GaussHermitePsf back = readPsf(out);
    comparePsfs(m_psf, back);
    iotest::Raw raw(out);
    QCOMPARE(raw.str("EXTNAME"), std::string("XTRACE"));
    QCOMPARE(raw.str("PSFTYPE"), std::string("GAUSS-HERMITE"));
    raw.hdu("PSF");
    QCOMPARE(raw.str("TDIM2"), std::string("(2,500)"));
    QCOMPARE(raw.lng("HSIZEX"), 8LL);
    QCOMPARE(raw.lng("NPIX_Y"), 4128LL);
    QCOMPARE(raw.rows(), 59L);
  }

  void legdegThreeRoundTrip() {
    // Same PSF with two more (small) Legendre terms per parameter and a shifted domain.
    GaussHermitePsf p = m_psf;
    p.legdeg = 3;
    p.psfErr = 0.02;
    auto widen = [](LegendreSet& s) {
      Array2D<double> c(s.coeff.rows, 4);
      for (int r = 0; r < c.rows; ++r) {
        c(r, 0) = s.coeff(r, 0);
        c(r, 1) = s.coeff(r, 1);
        c(r, 2) = 1e-3 * r;
        c(r, 3) = -2e-4;
      }
      s.coeff = c;
      s.wavemin = 5500.25;
      s.wavemax = 7900.5;
    };
    widen(p.ghSigX);
    widen(p.ghSigY);
    for (auto& s : p.gh) widen(s);
    for (auto& [n, s] : p.otherParams) widen(s);
    const std::string out = m_tmp.path().toStdString() + "/psf-legdeg3.fits";
    writePsf(out, p);
    GaussHermitePsf back = readPsf(out);
    QCOMPARE(back.legdeg, 3);
    QCOMPARE(back.ghSigX.ncoeff(), 4);
    QCOMPARE(back.ghSigX.wavemin, 5500.25);
    comparePsfs(p, back);

    // Parameters that do not share one LEGDEG cannot be written in this format.
    GaussHermitePsf bad = p;
    bad.ghSigY.coeff = Array2D<double>(500, 2);
    QVERIFY_THROWS_EXCEPTION(InputError, writePsf(m_tmp.path().toStdString() + "/bad.fits", bad));
    QVERIFY(!std::filesystem::exists(m_tmp.path().toStdString() + "/bad.fits"));
  }
};

QTEST_APPLESS_MAIN(TestPsfIo)
#include "test_psf_io.moc"
