// Simulated frames: reproducible, flux-conserving, with the truth that was rendered,
// unit-normal pulls from the stated IVAR, defects that are masked, and the content a
// DESI r frame has (sky fibers, sky lines, continua, header, fibermap).
#include "core/errors.h"
#include "core/sim/simulator.h"

#include <QElapsedTimer>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <numeric>

using namespace spex;

namespace {

// One bundle on the grid of the shared peer simulation: quick, and away from the CCD
// edges so every spot of the grid is whole.
SimulationOptions bundleOptions(int fiberMin = 100) {
  SimulationOptions o;
  o.wave = WaveGrid::fromRange(6000, 6500, 0.8);
  o.fiberMin = fiberMin;
  o.nFiber = 25;
  return o;
}

double sum(const std::vector<double>& v) {
  // Pairwise-free but compensated: the image holds ~1e8 electrons over 1.7e7 pixels.
  long double s = 0;
  for (double x : v) s += x;
  return double(s);
}

} // namespace

class TestSimSimulator : public QObject {
  Q_OBJECT
  GaussHermitePsf psf;   // the default r-camera PSF
  GaussHermitePsf small; // 50 fibers on 800 x 1200 px: cheap frames for the plumbing
  // Shared bundle frames (each image is 340 MB, so tests reuse them): with noise and
  // defects, and the exact model of the same spectra.
  Simulation noisy, exact;

private slots:
  void initTestCase() {
    psf = makeSyntheticPsf();
    SyntheticPsfOptions so;
    so.nfiber = 50;
    so.npixX = 800;
    so.npixY = 1200;
    small = makeSyntheticPsf(so);
    SimulationOptions o = bundleOptions();
    noisy = simulate(psf, o);
    o.noise = o.defects = false;
    exact = simulate(psf, o);
  }

  void truthLayoutAndContent() {
    const Simulation& sim = noisy;
    QCOMPARE(sim.truth.fiberMin, 100);
    QCOMPARE(sim.truth.phot.rows, 25);
    QCOMPARE(sim.truth.phot.cols, 626);
    QCOMPARE(int(sim.truth.wave.size()), 626);
    QCOMPARE(sim.truth.wave.front(), 6000.0);
    QVERIFY(std::fabs(sim.truth.wave.back() - 6500.0) < 1e-9);
    QCOMPARE(sim.image.ny, 4128);
    QCOMPARE(sim.image.nx, 4114);
    QCOMPARE(sim.image.pix.rows, 4128);
    QCOMPARE(sim.image.ivar.cols, 4114);
    QCOMPARE(sim.image.mask.size(), sim.image.pix.size());

    // Fibermap: every PSF fiber; the lit SKY fibers are exactly the sky-only spectra.
    QCOMPARE(int(sim.fibermap.rows()), 500);
    QCOMPARE(int(sim.fibermap.objtype.size()), 500);
    QCOMPARE(int(sim.fibermap.targetid.size()), 500);
    QCOMPARE(int(sim.fibermap.targetRa.size()), 500);
    QCOMPARE(int(sim.fibermap.targetDec.size()), 500);
    QCOMPARE(int(sim.image.fibermap.fiber.size()), 500);
    for (int s = 0; s < 500; ++s) {
      QCOMPARE(sim.fibermap.fiber[s], s);
      QCOMPARE(sim.fibermap.fiberstatus[s], 0);
      QVERIFY(sim.fibermap.objtype[s] == "TGT" || sim.fibermap.objtype[s] == "SKY");
      QVERIFY(sim.fibermap.targetid[s] > 0);
    }
    std::vector<int> sky, tgt;
    for (int i = 0; i < 25; ++i) (sim.fibermap.objtype[100 + i] == "SKY" ? sky : tgt).push_back(i);
    QCOMPARE(int(sky.size()), 3); // round(0.1 * 25) -> 2.5 rounds to 3
    const Array2D<double>& ph = sim.truth.phot;
    for (int k = 0; k < 626; ++k) {
      for (int i : sky) QCOMPARE(ph(i, k), ph(sky[0], k)); // one sky for all fibers
      for (int i : tgt) QVERIFY(ph(i, k) > ph(sky[0], k)); // targets add light
      for (int i = 0; i < 25; ++i) QVERIFY(std::isfinite(ph(i, k)) && ph(i, k) > 0);
    }
    // Sky lines: [OI] 6300.30 and 6363.78 stand far above the sky continuum.
    auto bin = [&](double w) { return int(std::lround((w - 6000) / 0.8)); };
    std::vector<double> skyRow(ph.row(sky[0]), ph.row(sky[0]) + 626);
    std::vector<double> sorted = skyRow;
    std::nth_element(sorted.begin(), sorted.begin() + 313, sorted.end());
    const double median = sorted[313];
    QVERIFY(median > 5 && median < 30); // ~10-16 photons per bin of sky continuum
    QVERIFY(skyRow[bin(6300.30)] > 50 * median);
    QVERIFY(skyRow[bin(6363.78)] > 20 * median);
    // Continua of tens to a few hundred photons per bin.
    for (int i : tgt) {
      std::vector<double> row(ph.row(i), ph.row(i) + 626);
      std::nth_element(row.begin(), row.begin() + 313, row.end());
      QVERIFY2(row[313] > 15 && row[313] < 500, qPrintable(QString::number(row[313])));
    }
    // Header cards of a real preproc IMAGE HDU.
    QCOMPARE(sim.image.header.getString("CAMERA"), std::string("r0"));
    QCOMPARE(sim.image.header.getString("FLAVOR"), std::string("science"));
    QCOMPARE(sim.image.header.getString("BUNIT"), std::string("electron"));
    for (const char* key : {"SPECGRPH", "EXPID", "NIGHT", "EXPTIME"})
      QVERIFY2(sim.image.header.find(key), key);
  }

  void reproducibleFromSeed() {
    SimulationOptions o = bundleOptions();
    const Simulation& a = noisy;
    const Simulation b = simulate(psf, o);
    QVERIFY(a.image.pix.data == b.image.pix.data);
    QVERIFY(a.image.ivar.data == b.image.ivar.data);
    QVERIFY(a.image.mask.data == b.image.mask.data);
    QVERIFY(a.truth.phot.data == b.truth.phot.data);
    QVERIFY(a.fibermap.targetid == b.fibermap.targetid);
    o.seed = 43;
    const Simulation c = simulate(psf, o);
    QVERIFY(c.image.pix.data != a.image.pix.data);
    QVERIFY(c.truth.phot.data != a.truth.phot.data);
    QVERIFY(c.image.mask.data != a.image.mask.data);
  }

  // A target's spectrum depends on (seed, fiber) only, not on which other fibers or
  // which grid are simulated, so sub-frames are consistent with the full frame.
  void spectraIndependentOfSelection() {
    SimulationOptions o = bundleOptions(0);
    o.noise = o.defects = false;
    const Simulation all = simulate(small, o);
    o.fiberMin = 5;
    o.nFiber = 10;
    o.wave = WaveGrid::fromRange(6100, 6300, 0.8);
    const Simulation part = simulate(small, o);
    int compared = 0;
    for (int i = 0; i < 10; ++i) {
      const int s = 5 + i;
      if (all.fibermap.objtype[s] != "TGT" || part.fibermap.objtype[s] != "TGT") continue;
      for (int k = 0; k < part.truth.phot.cols; ++k) {
        const double a = all.truth.phot(s, k + 125), p = part.truth.phot(i, k);
        QVERIFY(std::fabs(a - p) <= 1e-12 * a);
      }
      ++compared;
    }
    QVERIFY(compared >= 5);
  }

  void noiselessIsTheModel() {
    SimulationOptions o = bundleOptions();
    o.noise = false;
    o.defects = false;
    o.edgePad = 0;
    const Simulation sim = simulate(psf, o);
    // With no pad the image is exactly the truth rendered through the PSF.
    const Array2D<double> model = renderPhotons(psf, o.wave, o.fiberMin, sim.truth.phot);
    QVERIFY(model.data == sim.image.pix.data);
    for (std::size_t p = 0; p < model.size(); p += 997)
      QCOMPARE(sim.image.ivar.data[p], 1.0 / (9.0 + model.data[p]));
    for (int32_t m : sim.image.mask.data) QCOMPARE(m, 0);
    // Flux conservation: all spots of this grid lie on the CCD, so the image holds
    // every photon (EXTRACTION.md §2: spots sum to 1), to rounding.
    const double photons = sum(sim.truth.phot.data), electrons = sum(sim.image.pix.data);
    QVERIFY2(std::fabs(electrons - photons) < 1e-9 * photons,
             qPrintable(QString("%1 vs %2").arg(electrons, 0, 'g', 17).arg(photons, 0, 'g', 17)));
    // The edge pad adds light beyond the grid's ends, in the rows the pad maps to.
    const Simulation& padded = exact;
    QVERIFY(padded.truth.phot.data == sim.truth.phot.data);
    const double extra = sum(padded.image.pix.data) - electrons;
    QVERIFY(extra > 0.05 * photons && extra < 0.3 * photons); // 80 of 706 bins
    const int rowBelow = int(psf.y(112, 6000 - 20 * 0.8)), rowInside = int(psf.y(112, 6250));
    const int col = int(std::lround(psf.x(112, 6000)));
    QCOMPARE(sim.image.pix(rowBelow, col), 0.0);
    QVERIFY(padded.image.pix(rowBelow, col) > 1.0);
    QCOMPARE(padded.image.pix(rowInside, col), sim.image.pix(rowInside, col));
  }

  // Spots are computed on worker threads but summed in fiber order: the frame must
  // not depend on the thread count.
  void threadCountDoesNotMatter() {
    SimulationOptions o = bundleOptions(10);
    o.nFiber = 7;
    o.threads = 1;
    const Simulation one = simulate(small, o);
    o.threads = 3;
    const Simulation three = simulate(small, o);
    QVERIFY(one.image.pix.data == three.image.pix.data);
    QVERIFY(one.truth.phot.data == three.truth.phot.data);
    QVERIFY(renderPhotons(small, o.wave, 10, one.truth.phot, 1).data ==
            renderPhotons(small, o.wave, 10, one.truth.phot, 4).data);
  }

  void renderPhotonsConservesFlux() {
    // Arbitrary photons including zeros and a spike, fibers at a bundle edge.
    const WaveGrid g = WaveGrid::fromRange(5760, 7620, 0.8);
    Array2D<double> ph(6, g.size(), 0.0);
    for (int i = 0; i < ph.rows; ++i)
      for (int k = 0; k < ph.cols; ++k) ph(i, k) = (k % 17 == 0) ? 0.0 : 10.0 + (i * 31 + k) % 50;
    ph(2, 1000) = 1e6;
    const Array2D<double> img = renderPhotons(psf, g, 22, ph);
    QCOMPARE(img.rows, psf.npixY);
    QCOMPARE(img.cols, psf.npixX);
    const double photons = sum(ph.data), electrons = sum(img.data);
    QVERIFY(std::fabs(electrons - photons) < 1e-9 * photons);
    for (double v : img.data) QVERIFY(v >= 0.0);
    // Flux stays near its traces: nothing lands more than a spot away.
    const double xlo = psf.x(22, 6700) - 20, xhi = psf.x(27, 6700) + 20;
    for (int y = 0; y < img.rows; y += 7)
      for (int x = 0; x < img.cols; x += 3)
        if (x < xlo || x > xhi) QCOMPARE(img(y, x), 0.0);
    QVERIFY_THROWS_EXCEPTION(InputError,
                             renderPhotons(psf, WaveGrid::fromRange(5000, 6000, 1), 0, ph));
    QVERIFY_THROWS_EXCEPTION(InputError, renderPhotons(psf, g, 496, ph));
  }

  // (pix - model) sqrt(ivar) must be unit normal (IVAR from the true model). Defects
  // only add masked pixels, so the unmasked ones are pure noise draws.
  void noisePullsAreUnitNormal() {
    QVERIFY(noisy.truth.phot.data == exact.truth.phot.data);
    for (std::size_t p = 0; p < exact.image.pix.size(); ++p)
      if (noisy.image.mask.data[p] == 0)
        QCOMPARE(noisy.image.ivar.data[p], exact.image.ivar.data[p]);
    auto check = [&](double minModel, double maxModel, int minCount) {
      long double s1 = 0, s2 = 0;
      long n = 0;
      for (std::size_t p = 0; p < exact.image.pix.size(); ++p) {
        const double m = exact.image.pix.data[p];
        if (m < minModel || m >= maxModel || noisy.image.mask.data[p]) continue;
        const double z = (noisy.image.pix.data[p] - m) * std::sqrt(noisy.image.ivar.data[p]);
        s1 += z;
        s2 += z * z;
        ++n;
      }
      QVERIFY2(n >= minCount, qPrintable(QString::number(n)));
      const double mean = double(s1 / n), sd = std::sqrt(double(s2 / n) - mean * mean);
      // The mean of n unit-variance pulls has sd 1/sqrt(n); the sample sd has sd
      // ~sqrt((kurt - 1) / 4n) with kurtosis ~3 for these nearly Gaussian pulls, so
      // sqrt(1 / 2n). 5 sd each: never a false alarm, yet a 2% error in the variance
      // (e.g. ivar missing the read noise) fails on the ~1e5 lit pixels.
      QVERIFY2(std::fabs(mean) < 5.0 / std::sqrt(double(n)),
               qPrintable(QString("mean pull %1 over %2 px").arg(mean).arg(n)));
      QVERIFY2(std::fabs(sd - 1.0) < 5.0 * std::sqrt(0.5 / n),
               qPrintable(QString("pull sd %1 over %2 px").arg(sd).arg(n)));
    };
    check(5.0, 1e300, 50000);  // lit pixels: Poisson dominates or matches read noise
    check(10.0, 1e300, 20000); // the PTRS branch of the Poisson sampler
    check(150.0, 1e300, 500);  // the brightest: sky-line and emission-line peaks
    check(0.0, 1e-3, 1000000); // dark pixels: read noise only
  }

  void defectsAreMasked() {
    const SimulationOptions o = bundleOptions();
    const Image& im = noisy.image;
    int cosmic = 0, dead = 0, bad = 0;
    for (std::size_t p = 0; p < im.mask.size(); ++p) {
      const int32_t m = im.mask.data[p];
      if (m)
        QCOMPARE(im.ivar.data[p], 0.0);
      else
        QVERIFY(im.ivar.data[p] > 0.0);
      QVERIFY((m & ~(kSimMaskBad | kSimMaskDead | kSimMaskCosmic)) == 0);
      QVERIFY((m & kExtractionMaskBits) == m);
      cosmic += (m & kSimMaskCosmic) != 0;
      dead += (m & kSimMaskDead) != 0;
      bad += (m & kSimMaskBad) != 0;
    }
    QVERIFY2(cosmic >= 20 && cosmic <= 200, qPrintable(QString::number(cosmic)));
    QCOMPARE(dead, im.ny); // one dead column over the full height
    QVERIFY(bad > 0 && bad <= 2 * im.ny);
    // Masked columns cross the lit traces: each lies within 3 px of a lit fiber's
    // trace somewhere on the grid.
    std::vector<int> cols;
    for (int x = 0; x < im.nx; ++x)
      if (im.mask(im.ny - 1, x) & (kSimMaskDead | kSimMaskBad)) cols.push_back(x);
    QVERIFY(cols.size() == 2 || cols.size() == 3);
    for (int c : cols) {
      bool crosses = false;
      for (int s = o.fiberMin; s < o.fiberMin + o.nFiber; ++s)
        crosses = crosses || std::fabs(psf.x(s, 6250) - c) <= 3.0;
      QVERIFY(crosses);
      if (im.mask(0, c) & kSimMaskDead) // no charge, except cosmics hitting it later
        for (int y = 0; y < im.ny; ++y)
          if (!(im.mask(y, c) & kSimMaskCosmic)) QCOMPARE(im.pix(y, c), 0.0);
    }
    // Cosmics are bright: every cosmic pixel holds at least its 800 e- deposit.
    for (std::size_t p = 0; p < im.mask.size(); ++p)
      if (im.mask.data[p] & kSimMaskCosmic && !(im.mask.data[p] & kSimMaskDead))
        QVERIFY(im.pix.data[p] > 700);
    // Without defects nothing is masked.
    for (int32_t m : exact.image.mask.data) QCOMPARE(m, 0);
  }

  void rejectsBadRequests() {
    SimulationOptions o = bundleOptions();
    o.wave = WaveGrid::fromRange(5500, 6000, 0.8); // starts below the PSF domain
    QVERIFY_THROWS_EXCEPTION(InputError, simulate(psf, o));
    o = bundleOptions(490);
    QVERIFY_THROWS_EXCEPTION(InputError, simulate(psf, o));
    o = bundleOptions();
    o.readNoise = -1;
    QVERIFY_THROWS_EXCEPTION(InputError, simulate(psf, o));
    // Pad bins beyond the PSF domain are skipped, not an error.
    o = bundleOptions(0);
    o.wave = WaveGrid::fromRange(5550, 5600, 0.8);
    o.noise = o.defects = false;
    const Simulation edge = simulate(small, o);
    QCOMPARE(edge.truth.phot.cols, 63);
  }

  // The demo the app opens: a full r frame, timed.
  void fullFrameDemo() {
    QElapsedTimer t;
    t.start();
    const DemoData d = makeDemo();
    const double secs = t.nsecsElapsed() * 1e-9;
    qInfo("makeDemo(500): %.2f s", secs);
    QCOMPARE(d.sim.truth.phot.rows, 500);
    QCOMPARE(d.sim.truth.phot.cols, 2326);
    QCOMPARE(d.sim.truth.fiberMin, 0);
    int sky = 0;
    for (const std::string& t : d.sim.fibermap.objtype) sky += t == "SKY";
    QCOMPARE(sky, 50);
    // Every fiber is lit: light along every trace mid-band. Sky alone puts ~5.6 e- per
    // row into the 3 central columns; over 41 rows (123 px, read noise sd ~33 e- in
    // all) a fiber has > 230 e-: require half of that per unmasked pixel.
    for (int s = 0; s < 500; ++s) {
      const int x = int(std::lround(d.psf.x(s, 6700))), y = int(std::lround(d.psf.y(s, 6700)));
      double box = 0;
      int used = 0;
      for (int dy = -20; dy <= 20; ++dy)
        for (int dx = -1; dx <= 1; ++dx)
          if (d.sim.image.mask(y + dy, x + dx) == 0) {
            box += d.sim.image.pix(y + dy, x + dx);
            ++used;
          }
      QVERIFY2(used > 60 && box / used > 0.5 * 230.0 / 123.0,
               qPrintable(QString("fiber %1: %2 e- over %3 px").arg(s).arg(box).arg(used)));
    }
    QVERIFY(secs < 60); // a few seconds on one core; generous for loaded CI machines
  }
};

QTEST_GUILESS_MAIN(TestSimSimulator)
#include "test_sim_simulator.moc"
