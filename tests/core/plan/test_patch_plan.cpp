// Patch plan geometry (EXTRACTION.md §3) on the real PSF: wavelength grid length,
// bundle and sub-bundle padding, the last partial patch, pixel boxes and CCD clipping.
#include "core/errors.h"
#include "core/io/psf_io.h"
#include "core/plan/patch_plan.h"
#include "core/psf/gauss_hermite_psf.h"
#include "test_data.h"

#include <QTest>
#include <algorithm>
#include <climits>
#include <cmath>

using namespace spex;

class TestPatchPlan : public QObject {
  Q_OBJECT
  GaussHermitePsf psf;

  // Pixel extent of padded spots, recomputed here from the spots themselves.
  void extent(const Patch& p, int k0, int nk, int& x0, int& x1, int& y0, int& y1,
              const WaveGrid& g) {
    x0 = y0 = INT_MAX;
    x1 = y1 = INT_MIN;
    for (int f = p.fiberPad0; f < p.fiberPad0 + p.nfiberPad; ++f)
      for (int k = k0; k < k0 + nk; ++k) {
        const Spot s = psf.spot(f, g.at(k));
        x0 = std::min(x0, s.xc);
        x1 = std::max(x1, s.xc + s.nx);
        y0 = std::min(y0, s.yc);
        y1 = std::max(y1, s.yc + s.ny);
      }
  }

private slots:
  void initTestCase() {
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    psf = readPsf(path);
  }

  void waveGridLengthFollowsArange() {
    QCOMPARE(WaveGrid::fromRange(6000, 6500, 0.8).n, 626);
    QCOMPARE(WaveGrid::fromRange(5760, 7620, 0.8).n, 2326);
    QCOMPARE(WaveGrid::fromRange(6000, 6000, 0.8).n, 1);
    QCOMPARE(WaveGrid::fromRange(6000, 6000.79, 0.8).n, 2); // arange(6000, 6001.19, .8)
    QVERIFY_THROWS_EXCEPTION(InputError, WaveGrid::fromRange(6500, 6000, 0.8));
    QVERIFY_THROWS_EXCEPTION(InputError, WaveGrid::fromRange(6000, 6500, 0));
    QVERIFY_THROWS_EXCEPTION(InputError, WaveGrid::fromRange(6000, 6500, -0.8));
    QVERIFY_THROWS_EXCEPTION(InputError, WaveGrid::fromRange(NAN, 6500, 0.8));
  }

  void defaultBundleLayout() {
    const WaveGrid g = WaveGrid::fromRange(6000, 6500, 0.8);
    const PatchPlan plan = makePatchPlan(psf, g, 0, 25, PatchParams{});
    QCOMPARE(plan.wavepad, 12);
    // 5 sub-bundles x ceil(626 / 50) = 13 wavelength patches.
    QCOMPARE(int(plan.patches.size()), 5 * 13);
    for (const Patch& p : plan.patches) {
      QCOMPARE(p.nfiber, 5);
      QCOMPARE(p.nwavePad, 50 + 2 * 12);
      QCOMPARE(p.wavePad0, p.wave0 - 12);
      // One padding fiber on each side, none beyond the bundle edges (fibers 0, 24).
      QCOMPARE(p.fiberPad0, std::max(0, p.fiber0 - 1));
      QCOMPARE(p.fiberPad0 + p.nfiberPad, std::min(25, p.fiber0 + 5 + 1));
    }
    // Last partial patch keeps 626 - 12*50 = 26 bins but solves a full window.
    const Patch& last = plan.patches.back();
    QCOMPARE(last.wave0, 600);
    QCOMPARE(last.nwave, 26);
    QCOMPARE(last.nwavePad, 74);
  }

  void everyBinBelongsToExactlyOnePatch() {
    const WaveGrid g = WaveGrid::fromRange(5760, 7620, 0.8);
    PatchParams pp;
    pp.nsubbundles = 3; // uneven split 9, 8, 8
    pp.nwavestep = 37;
    const PatchPlan plan = makePatchPlan(psf, g, 20, 40, pp); // crosses bundles 0 and 1
    std::vector<int> count(40 * g.n, 0);
    for (const Patch& p : plan.patches)
      for (int f = p.fiber0; f < p.fiber0 + p.nfiber; ++f)
        for (int w = p.wave0; w < p.wave0 + p.nwave; ++w) count[(f - 20) * g.n + w]++;
    QVERIFY(std::all_of(count.begin(), count.end(), [](int c) { return c == 1; }));
    for (int f = 20; f < 60; f += 7)
      for (int w = 0; w < g.n; w += 101) {
        const int i = plan.patchAt(f, w);
        QVERIFY(i >= 0);
        const Patch& p = plan.patches[i];
        QVERIFY(f >= p.fiber0 && f < p.fiber0 + p.nfiber && w >= p.wave0 && w < p.wave0 + p.nwave);
      }
    // Sub-bundles of bundle 1 are 25 split 9/8/8; padding stays inside bundle 1 (25..49).
    for (const Patch& p : plan.patches) {
      QCOMPARE(p.bundle, p.fiber0 / 25);
      QVERIFY(p.fiberPad0 >= p.bundle * 25);
      QVERIFY(p.fiberPad0 + p.nfiberPad <= (p.bundle + 1) * 25);
      if (p.bundle == 1) QVERIFY(p.nfiber == 9 || p.nfiber == 8);
    }
    // A partial first bundle (fibers 20..24): its sub-bundle starting at 17 keeps 20..24
    // and pads with fiber 19 (in the bundle, outside the request).
    const Patch& first = plan.patches.front();
    QCOMPARE(first.fiber0, 20);
    QCOMPARE(first.fiberPad0, 19);
    const auto region = plan.patchesInRegion(30, 31, 100, 101);
    QCOMPARE(int(region.size()), 1);
    QCOMPARE(region[0], plan.patchAt(30, 100));
  }

  void pixelBoxesFollowPixpad() {
    const WaveGrid g = WaveGrid::fromRange(6000, 6500, 0.8);
    PatchParams pp;
    const PatchPlan plan = makePatchPlan(psf, g, 100, 25, pp);
    for (const Patch& p : {plan.patches[3], plan.patches[30]}) {
      int px0, px1, py0, py1, cx0, cx1, cy0, cy1;
      extent(p, p.wavePad0, p.nwavePad, px0, px1, py0, py1, g);
      extent(p, p.wave0, pp.nwavestep, cx0, cx1, cy0, cy1, g);
      QCOMPARE(p.box.x0, px0);
      QCOMPARE(p.box.x1, px1);
      QCOMPARE(p.box.y0, py0 + int((cy0 - py0) * 0.2));
      QCOMPARE(p.box.y1, py1 - int((py1 - cy1) * 0.2));
      QVERIFY(!p.clipped);
      // The box holds every kept spot whole.
      for (int f = p.fiber0; f < p.fiber0 + p.nfiber; ++f)
        for (int k = p.wave0; k < p.wave0 + p.nwave; ++k) {
          const Spot s = psf.spot(f, g.at(k));
          QVERIFY(s.xc >= p.box.x0 && s.xc + s.nx <= p.box.x1);
          QVERIFY(s.yc >= p.box.y0 && s.yc + s.ny <= p.box.y1);
        }
    }
  }

  void boxesAreClippedAtCcdEdges() {
    // The PSF domain starts below row 0: the first patch's padded spots fall off the CCD.
    const WaveGrid g = WaveGrid::fromRange(std::ceil(psf.waveMin()), std::floor(psf.waveMax()), 0.8);
    const PatchPlan plan = makePatchPlan(psf, g, 0, 25, PatchParams{});
    bool lowClipped = false, highClipped = false;
    for (const Patch& p : plan.patches) {
      QVERIFY(p.box.x0 >= 0 && p.box.x1 <= psf.npixX && p.box.y0 >= 0 && p.box.y1 <= psf.npixY);
      if (p.clipped && p.box.y0 == 0) lowClipped = true;
      if (p.clipped && p.box.y1 == psf.npixY) highClipped = true;
    }
    QVERIFY(lowClipped);
    QVERIFY(highClipped);
  }

  void planFromGivenCornersIsTheSame() {
    // Corners evaluated outside the plan (as the CUDA engine does on the device), here
    // by GaussHermitePsf::corner over planCornerRange: the same plan, patch by patch.
    // A fiber range inside a bundle, one at a bundle start, and the last fibers.
    const WaveGrid g = WaveGrid::fromRange(6000, 6500, 0.8);
    for (auto [f0, nf] : {std::pair{3, 17}, std::pair{25, 25}, std::pair{480, 20}}) {
      PlanCorners c = planCornerRange(psf, g, f0, nf, PatchParams{});
      QVERIFY(c.f1 > c.f0 && c.k1 > c.k0);
      QCOMPARE(c.f0, std::max(f0 - 1, (f0 / 25) * 25));
      const int nk = c.k1 - c.k0;
      c.x.resize(std::size_t(c.f1 - c.f0) * nk);
      c.y.resize(c.x.size());
      for (int f = c.f0; f < c.f1; ++f)
        for (int k = c.k0; k < c.k1; ++k)
          psf.corner(f, g.at(k), c.x[std::size_t(f - c.f0) * nk + (k - c.k0)],
                     c.y[std::size_t(f - c.f0) * nk + (k - c.k0)]);
      const PatchPlan a = makePatchPlan(psf, g, f0, nf, PatchParams{});
      const PatchPlan b = makePatchPlan(psf, g, f0, nf, PatchParams{}, c);
      QCOMPARE(b.patches.size(), a.patches.size());
      for (std::size_t i = 0; i < a.patches.size(); ++i) {
        const Patch &p = a.patches[i], &q = b.patches[i];
        QVERIFY(p.box.x0 == q.box.x0 && p.box.x1 == q.box.x1 && p.box.y0 == q.box.y0 && p.box.y1 == q.box.y1);
        QVERIFY(p.fiberPad0 == q.fiberPad0 && p.nfiberPad == q.nfiberPad && p.wavePad0 == q.wavePad0 &&
                p.clipped == q.clipped);
      }
      // Corners of another range (or short arrays) are an error naming both ranges.
      PlanCorners shifted = c;
      ++shifted.k0;
      QVERIFY_THROWS_EXCEPTION(InputError, makePatchPlan(psf, g, f0, nf, PatchParams{}, shifted));
      PlanCorners shortArrays = c;
      shortArrays.y.pop_back();
      QVERIFY_THROWS_EXCEPTION(InputError, makePatchPlan(psf, g, f0, nf, PatchParams{}, shortArrays));
    }
    // An invalid fiber range has an empty corner range (the plan says what is wrong).
    const PlanCorners bad = planCornerRange(psf, g, 490, 20, PatchParams{});
    QVERIFY(bad.f1 <= bad.f0);
  }

  void skeletonAndExtentsMakeThePlan() {
    // The plan in two steps (the CUDA engine's plan ahead: the device takes the
    // extents): the skeleton, each patch's corner extents, the boxes from them. Patch
    // for patch the plan makePatchPlan makes, every field, for ranges inside a bundle,
    // at a bundle start, at the PSF's last fibers (boxes clipped at the CCD), with a
    // partial last patch and other pixpad and wavepad fractions.
    struct Case { int f0, nf; double w0, w1; PatchParams pp; };
    PatchParams narrow;
    narrow.pixpadFrac = 0.3;
    narrow.wavepadFrac = 0.5;
    narrow.nwavestep = 37;
    for (const Case& c : {Case{3, 17, 6000, 6500, PatchParams{}}, Case{25, 25, 5760, 7620, PatchParams{}},
                          Case{480, 20, 5600, 7780, narrow}, Case{0, 50, 6000, 6033.6, narrow}}) {
      const WaveGrid g = WaveGrid::fromRange(c.w0, c.w1, 0.8);
      const PatchPlan whole = makePatchPlan(psf, g, c.f0, c.nf, c.pp);
      PatchPlan two = makePatchSkeleton(psf, g, c.f0, c.nf, c.pp);
      QCOMPARE(two.patches.size(), whole.patches.size());
      for (const Patch& p : two.patches) QVERIFY(p.box.empty() && !p.clipped);
      PlanCorners corners = planCornerRange(psf, g, c.f0, c.nf, c.pp);
      const int nk = corners.k1 - corners.k0;
      corners.x.resize(std::size_t(corners.f1 - corners.f0) * nk);
      corners.y.resize(corners.x.size());
      for (int f = corners.f0; f < corners.f1; ++f)
        for (int k = corners.k0; k < corners.k1; ++k)
          psf.corner(f, g.at(k), corners.x[std::size_t(f - corners.f0) * nk + (k - corners.k0)],
                     corners.y[std::size_t(f - corners.f0) * nk + (k - corners.k0)]);
      const std::vector<PatchExtents> ext = patchExtents(two, psf, corners);
      QCOMPARE(ext.size(), whole.patches.size());
      setPatchBoxes(two, psf, ext);
      int clipped = 0;
      for (std::size_t i = 0; i < whole.patches.size(); ++i) {
        const Patch &p = whole.patches[i], &q = two.patches[i];
        QVERIFY(p.index == q.index && p.bundle == q.bundle && p.subbundle == q.subbundle && p.fiber0 == q.fiber0 &&
                p.nfiber == q.nfiber && p.fiberPad0 == q.fiberPad0 && p.nfiberPad == q.nfiberPad &&
                p.wave0 == q.wave0 && p.nwave == q.nwave && p.wavePad0 == q.wavePad0 && p.nwavePad == q.nwavePad);
        QVERIFY2(p.box.x0 == q.box.x0 && p.box.x1 == q.box.x1 && p.box.y0 == q.box.y0 && p.box.y1 == q.box.y1 &&
                     p.clipped == q.clipped,
                 qPrintable(QString("patch %1").arg(i)));
        // The extents are those of the corners themselves (spot size not added).
        const PixelBox& b = p.box;
        QVERIFY(p.clipped || (b.x0 == ext[i].pad[0] && b.x1 == ext[i].pad[1] + psf.spotNx()));
        clipped += p.clipped ? 1 : 0;
      }
      QCOMPARE(two.npixX, whole.npixX);
      QCOMPARE(two.wavepad, whole.wavepad);
      if (c.f0 == 480) QVERIFY(clipped > 0); // the CCD edge is in this case
      // Extents of another count, corners of another range: errors.
      std::vector<PatchExtents> fewer(ext.begin(), ext.end() - 1);
      QVERIFY_THROWS_EXCEPTION(InputError, setPatchBoxes(two, psf, fewer));
      PlanCorners shifted = corners;
      ++shifted.k1;
      QVERIFY_THROWS_EXCEPTION(InputError, patchExtents(two, psf, shifted));
    }
    // The skeleton checks the request as makePatchPlan does.
    const WaveGrid g = WaveGrid::fromRange(6000, 6500, 0.8);
    QVERIFY_THROWS_EXCEPTION(InputError, makePatchSkeleton(psf, g, 490, 20, PatchParams{}));
    QVERIFY_THROWS_EXCEPTION(InputError, makePatchSkeleton(psf, WaveGrid::fromRange(3000, 3500, 0.8), 0, 5, PatchParams{}));
  }

  void rejectsBadRequests() {
    const WaveGrid g = WaveGrid::fromRange(6000, 6500, 0.8);
    QVERIFY_THROWS_EXCEPTION(InputError, makePatchPlan(psf, g, 490, 20, PatchParams{}));
    QVERIFY_THROWS_EXCEPTION(InputError, makePatchPlan(psf, g, -1, 5, PatchParams{}));
    QVERIFY_THROWS_EXCEPTION(InputError, makePatchPlan(psf, g, 0, 0, PatchParams{}));
    QVERIFY_THROWS_EXCEPTION(InputError,
                             makePatchPlan(psf, WaveGrid::fromRange(3600, 5800, 0.8), 0, 25, PatchParams{}));
    PatchParams bad;
    bad.nsubbundles = 0;
    QVERIFY_THROWS_EXCEPTION(InputError, makePatchPlan(psf, g, 0, 25, bad));
    bad = PatchParams{};
    bad.pixpadFrac = 1.5;
    QVERIFY_THROWS_EXCEPTION(InputError, makePatchPlan(psf, g, 0, 25, bad));
  }
};

QTEST_GUILESS_MAIN(TestPatchPlan)
#include "test_patch_plan.moc"
