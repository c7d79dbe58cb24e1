// Raw frame scores (core/extract/scores): against the SCORES HDU desispec wrote into
// frame-desispec-bary.fits, recomputed from that file's own FLUX/IVAR/WAVELENGTH/MASK;
// and desispec's rules (band choice, tophat edges, numpy gradient and median) on small
// grids where the answer is known by hand.
#include "core/errors.h"
#include "core/extract/scores.h"
#include "core/io/fits_file.h"
#include "test_data.h"

#include <fitsio.h>

#include <QtTest>

#include <algorithm>
#include <cmath>

using namespace spex;

namespace {

const char* kFrame = "sim-r0-bundle0-6000-6500/frame-desispec-bary.fits";

std::string unquote(std::string v) {
  if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

// TTYPEn, its comment and TFORMn of the SCORES HDU, read through CFITSIO
// (FitsFile::readHeader leaves column keys out).
struct Column {
  std::string name, comment, form;
};
Column scoresColumn(const std::string& path, int n) {
  fitsfile* f = nullptr;
  int status = 0;
  char name[FLEN_VALUE] = {}, comment[FLEN_COMMENT] = {}, form[FLEN_VALUE] = {};
  fits_open_file(&f, path.c_str(), READONLY, &status);
  fits_movnam_hdu(f, BINARY_TBL, const_cast<char*>("SCORES"), 0, &status);
  fits_read_keyword(f, ("TTYPE" + std::to_string(n)).c_str(), name, comment, &status);
  fits_read_keyword(f, ("TFORM" + std::to_string(n)).c_str(), form, nullptr, &status);
  int closeStatus = 0;
  if (f) fits_close_file(f, &closeStatus);
  if (status) return {};
  return {unquote(name), comment, unquote(form)};
}

} // namespace

class TestScores : public QObject {
  Q_OBJECT

private slots:
  void matchesDesispecFrame() {
    SPEX_REQUIRE_DATA(path, kFrame);
    FitsFile f = FitsFile::openRead(path);
    f.moveTo("FLUX");
    const Array2D<double> flux = f.readImage2D<double>();
    f.moveTo("IVAR");
    const Array2D<double> ivar = f.readImage2D<double>(flux.rows, flux.cols);
    f.moveTo("MASK");
    const Array2D<uint32_t> mask = f.readImage2D<uint32_t>(flux.rows, flux.cols);
    f.moveTo("WAVELENGTH");
    const std::vector<double> wave = f.readImage1D(flux.cols);
    f.moveTo("SCORES");
    QCOMPARE(f.numRows(), long(flux.rows));

    const FrameScores s = computeRawScores(flux, ivar, wave, &mask);
    QCOMPARE(s.names.size(), std::size_t(3));
    QCOMPARE(s.columns.size(), std::size_t(3));
    QCOMPARE(s.comments.size(), std::size_t(3));
    for (int k = 0; k < 3; ++k) {
      // Same columns, order, dtype ('D') and TTYPE comments as desispec's table.
      const Column col = scoresColumn(path, k + 1);
      QCOMPARE(QString::fromStdString(col.name), QString::fromStdString(s.names[k]));
      QCOMPARE(QString::fromStdString(col.form), QString("D"));
      QCOMPARE(QString::fromStdString(col.comment), QString::fromStdString(s.comments[k]));

      // desispec scored the float64 extraction, the file holds it as float32: each term
      // carries a relative rounding of up to ~2^-23 (1.2e-7), far below 1e-6.
      const std::vector<double> ref = f.readColumnDouble(s.names[k]);
      double worst = 0;
      for (int i = 0; i < flux.rows; ++i) {
        const double diff = std::fabs(s.columns[k][i] - ref[i]);
        worst = std::max(worst, diff / std::fabs(ref[i]));
        QVERIFY2(diff <= 1e-6 * std::fabs(ref[i]),
                 qPrintable(QString("%1 fiber %2: ours %3, desispec %4")
                                .arg(QString::fromStdString(s.names[k]))
                                .arg(i)
                                .arg(s.columns[k][i], 0, 'g', 17)
                                .arg(ref[i], 0, 'g', 17)));
      }
      qInfo("%s: worst relative difference %.2e over %d fibers", s.names[k].c_str(), worst,
            flux.rows);
    }
  }

  // Band from the mean wavelength, tophat [lo, hi), numpy.gradient on an uneven grid,
  // numpy.median of an even count, negative ivar as 0, the MASK ignored.
  void rulesOnSmallGrids() {
    // Mean exactly 5800: 'b'; the bin at 5800 is outside b's [4000, 5800).
    const std::vector<double> wb = {5700.0, 5750.0, 5800.0, 5850.0, 5900.0};
    QCOMPARE(scoreBandOf(wb).band, 'b');
    Array2D<double> flux(2, 5), ivar(2, 5);
    const double fl[2][5] = {{10, 20, 1000, 1000, 1000}, {-4, 8, 1000, 1000, 1000}};
    const double iv[2][5] = {{4, 1, 1, 1, 1}, {-1, 9, 1, 1, 1}};
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 5; ++j) flux(i, j) = fl[i][j], ivar(i, j) = iv[i][j];
    const FrameScores s = computeRawScores(flux, ivar, wb, nullptr);
    QCOMPARE(s.names[0], std::string("SUM_RAW_COUNT_B"));
    QCOMPARE(s.names[1], std::string("MEDIAN_RAW_COUNT_B"));
    QCOMPARE(s.names[2], std::string("MEDIAN_RAW_SNR_B"));
    QCOMPARE(s.comments[2], std::string("median SNR/sqrt(A) in wave. range 4000,5800A"));
    // Bins 5700 and 5750 only; dwave = 50 there.
    QCOMPARE(s.columns[0][0], 30.0);
    QCOMPARE(s.columns[1][0], (10.0 / 50 + 20.0 / 50) / 2);
    QCOMPARE(s.columns[2][0], (2 * 10.0 / std::sqrt(50.0) + 1 * 20.0 / std::sqrt(50.0)) / 2);
    QCOMPARE(s.columns[0][1], 4.0);
    // ivar -1 counts as 0: SNR terms {0, 3 * 8 / sqrt(50)}.
    QCOMPARE(s.columns[2][1], (0.0 + 3 * 8.0 / std::sqrt(50.0)) / 2);
    // The frame MASK does not enter, as in desispec.
    Array2D<uint32_t> mask(2, 5, 0xffffffffu);
    const FrameScores m = computeRawScores(flux, ivar, wb, &mask);
    for (int k = 0; k < 3; ++k) QCOMPARE(m.columns[k], s.columns[k]);

    // Uneven z grid: numpy.gradient = {1, 1.5, 2.5, 3}; odd-count median.
    const std::vector<double> wz = {8000.0, 8001.0, 8003.0, 8006.0};
    Array2D<double> fz(1, 4), vz(1, 4, 1.0);
    const double fzv[4] = {3.0, 3.0, 5.0, 6.0};
    for (int j = 0; j < 4; ++j) fz(0, j) = fzv[j];
    const FrameScores z = computeRawScores(fz, vz, wz, nullptr);
    QCOMPARE(z.names[1], std::string("MEDIAN_RAW_COUNT_Z"));
    QCOMPARE(z.columns[0][0], 17.0);
    // flux/dwave = {3, 2, 2, 2}: median 2.
    QCOMPARE(z.columns[1][0], 2.0);
    QCOMPARE(z.comments[0], std::string("sum counts in wave. range 7600,9800A"));

    // Errors name what is wrong.
    QVERIFY_THROWS_EXCEPTION(InputError,
                             computeRawScores(flux, Array2D<double>(2, 4), wb, nullptr));
    QVERIFY_THROWS_EXCEPTION(InputError, computeRawScores(flux, ivar, wz, nullptr));
    Array2D<uint32_t> badMask(1, 5);
    QVERIFY_THROWS_EXCEPTION(InputError, computeRawScores(flux, ivar, wb, &badMask));
    // Mean 7000 ('r') but no bin in [5800, 7600).
    Array2D<double> f2(1, 2, 1.0);
    try {
      computeRawScores(f2, f2, {5000.0, 9000.0}, nullptr);
      QFAIL("expected InputError");
    } catch (const InputError& e) {
      QVERIFY2(std::string(e.what()).find("[5800, 7600)") != std::string::npos, e.what());
    }
  }
};

QTEST_GUILESS_MAIN(TestScores)
#include "test_scores.moc"
