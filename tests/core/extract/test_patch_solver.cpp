// One patch of the CPU engine against the textbook formulas (B&S 2010 eqs 4-19 with a
// dense A, dense inverse and a full eigen-decomposition of each fiber block of C), and
// the per-request spot cache (core/extract/spot_cache.h): the spots it serves equal
// GaussHermitePsf::spotInto bit for bit, each is computed once, fibers are freed with
// their last patch, and the engine's results with and without it are identical.
#include "core/extract/cpu_engine.h"
#include "core/extract/lapack.h"
#include "core/extract/patch_solver.h"
#include "core/extract/spot_cache.h"
#include "core/image.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"
#include "test_data.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <atomic>
#include <thread>
#include <tuple>

using namespace spex;

namespace {

class NullProgress : public ProgressSink {};

struct Reference {
  std::vector<double> f, flux, ivar, resolution; // as PatchSolution (kept fibers for the last three)
};

// Signal-mode decorrelation of patch p the long way round: A over the box pixels,
// C^-1 = A^T W A + the engine's weak prior (EXTRACTION.md §4.2), C by inverting it whole,
// and for each kept fiber Q_s = C_s^-1/2 = V diag(w^-1/2) V^T from its eigenpairs.
Reference textbook(const Patch& p, const PatchPlan& plan, const Image& img, const GaussHermitePsf& psf,
                   int ndiag) {
  const int nfib = p.nfiberPad, nw = p.nwavePad, n = nfib * nw;
  const PixelBox& box = p.box;
  const int bw = box.width(), npix = bw * box.height();
  std::vector<double> aw(std::size_t(npix) * n, 0.0), y(n, 0.0), fw(n, 0.0); // sqrt(W) A
  Spot sp;
  for (int a = 0; a < n; ++a) {
    psf.spotInto(p.fiberPad0 + a / nw, plan.waveAt(p.wavePad0 + a % nw), sp);
    for (int iy = 0; iy < sp.ny; ++iy)
      for (int ix = 0; ix < sp.nx; ++ix) {
        const int Y = sp.yc + iy, X = sp.xc + ix;
        if (!box.contains(X, Y)) continue;
        const double w = img.ivar(Y, X), v = sp.at(iy, ix);
        aw[(Y - box.y0) * bw + (X - box.x0) + std::size_t(a) * npix] = std::sqrt(w) * v;
        y[a] += w * v * img.pix(Y, X);
        fw[a] += w * v;
      }
  }
  std::vector<double> icov(std::size_t(n) * n, 0.0);
  lapack::syrkT(n, npix, 1.0, aw.data(), npix, 0.0, icov.data(), n);
  const double minweight = 1e-4 * *std::max_element(fw.begin(), fw.end());
  for (int a = 0; a < n; ++a)
    icov[a + std::size_t(a) * n] += (fw[a] <= minweight ? (minweight - fw[a]) * (minweight - fw[a]) : 0.0) + 1e-15;
  Reference r;
  r.f = y;
  if (lapack::potrf(n, icov.data(), n) != 0) qFatal("reference patch not SPD");
  lapack::potrs(n, 1, icov.data(), n, r.f.data(), n);
  std::vector<double> c(std::size_t(n) * n, 0.0);
  for (int i = 0; i < n; ++i) c[i + std::size_t(i) * n] = 1.0;
  lapack::potrs(n, n, icov.data(), n, c.data(), n);

  const int nk = 2 * ndiag + 1;
  r.flux.assign(n, 0.0);
  r.ivar.assign(n, 0.0);
  r.resolution.assign(std::size_t(nfib) * nk * nw, 0.0);
  std::vector<double> cs(std::size_t(nw) * nw), ev(nw), q(std::size_t(nw) * nw), work;
  std::vector<int> iwork;
  for (int s = p.keptFiberOffset(); s < p.keptFiberOffset() + p.nfiber; ++s) {
    const int c0 = s * nw;
    for (int j = 0; j < nw; ++j)
      for (int i = 0; i < nw; ++i) cs[i + std::size_t(j) * nw] = c[(c0 + i) + std::size_t(c0 + j) * n];
    lapack::syevd(nw, cs.data(), nw, ev.data(), work, iwork);
    const double floor = 1e-14 * ev[nw - 1];
    for (int i = 0; i < nw; ++i)
      for (int j = 0; j < nw; ++j) {
        double sum = 0;
        for (int k = 0; k < nw; ++k)
          sum += cs[i + std::size_t(k) * nw] * cs[j + std::size_t(k) * nw] / std::sqrt(std::max(ev[k], floor));
        q[i + std::size_t(j) * nw] = sum;
      }
    for (int i = 0; i < nw; ++i) {
      double si = 0, fl = 0;
      for (int j = 0; j < nw; ++j) {
        si += q[i + std::size_t(j) * nw];
        fl += q[i + std::size_t(j) * nw] * r.f[c0 + j];
      }
      r.flux[c0 + i] = fl / si;
      r.ivar[c0 + i] = si * si;
      for (int k = 0; k < nk; ++k) {
        const int j = i + ndiag - k; // RES[k, j] = R[j - ndiag + k, j] = R[i, j]
        if (j >= 0 && j < nw) r.resolution[(std::size_t(s) * nk + k) * nw + j] = q[i + std::size_t(j) * nw] / si;
      }
    }
  }
  return r;
}

} // namespace

class TestPatchSolver : public QObject {
  Q_OBJECT
  GaussHermitePsf psf;

private slots:
  void initTestCase() {
    lapack::singleThreadedBlas();
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    psf = readPsf(path);
  }

  void matchesTextbookFormulas() {
    // A bundle's first sub-bundle (one padding fiber), one in the middle, at the blue
    // end (padding bins beyond the grid), the middle and the red end of the CCD.
    for (const auto& [w0, w1, f0, nf] : {std::tuple{5760.0, 5900.0, 0, 10},
                                         std::tuple{6700.0, 6840.0, 245, 10},
                                         std::tuple{7480.0, 7620.0, 480, 10}}) {
      SimulationOptions so;
      so.wave = WaveGrid::fromRange(w0, w1, 0.8);
      so.fiberMin = f0;
      so.nFiber = nf;
      const Simulation sim = simulate(psf, so);
      const PatchPlan plan = makePatchPlan(psf, so.wave, f0, nf, PatchParams{});
      PatchSolveOptions opt;
      opt.ndiag = psf.hsizeY;
      opt.psferr = psf.psfErr;
      for (const int i : {0, int(plan.patches.size()) - 1}) {
        const Patch& p = plan.patches[i];
        PatchSolver solver;
        PatchSolution sol;
        solver.solve(p, plan, sim.image, psf, opt, sol);
        QVERIFY(!sol.failed && !sol.regularized);
        const Reference ref = textbook(p, plan, sim.image, psf, opt.ndiag);
        double fmax = 0, df = 0, dflux = 0, divar = 0, dres = 0;
        for (std::size_t a = 0; a < ref.f.size(); ++a) {
          fmax = std::max(fmax, std::abs(ref.f[a]));
          df = std::max(df, std::abs(ref.f[a] - sol.f[a]));
        }
        const int nw = p.nwavePad, nk = 2 * opt.ndiag + 1;
        for (int s = p.keptFiberOffset(); s < p.keptFiberOffset() + p.nfiber; ++s)
          for (int k = 0; k < nw; ++k) {
            const int a = s * nw + k;
            dflux = std::max(dflux, std::abs(ref.flux[a] - sol.flux[a]) * std::sqrt(ref.ivar[a]));
            divar = std::max(divar, std::abs(ref.ivar[a] - sol.ivar[a]) / ref.ivar[a]);
            for (int d = 0; d < nk; ++d) {
              const std::size_t e = (std::size_t(s) * nk + d) * nw + k;
              dres = std::max(dres, std::abs(ref.resolution[e] - sol.resolution[e]));
            }
          }
        qInfo("patch %d (fibers %d.., %.0f A): |df|/max|f| %.1e, |dflux| sqrt(ivar) %.1e, divar/ivar %.1e, "
              "|dR| %.1e (%s)",
              p.index, p.fiber0, plan.waveAt(p.wave0), df / fmax, dflux, divar, dres,
              sol.banded ? "banded" : "dense");
        // Different but equally exact arithmetic (band vs whole matrix, SymEigen's
        // reduction vs dsyevd's, fused multiply-adds or not, Q formed or not): agreement to rounding amplified by the
        // conditioning of C (~1e4 here), far below 1e-10.
        QVERIFY2(df < 1e-10 * fmax, qPrintable(QString::number(df / fmax)));
        QVERIFY2(dflux < 1e-10, qPrintable(QString::number(dflux)));
        QVERIFY2(divar < 1e-10, qPrintable(QString::number(divar)));
        QVERIFY2(dres < 1e-10, qPrintable(QString::number(dres)));
      }
    }
  }

  void batchedPatchesMatchSolveBitForBit() {
    // begin()/finish(): the kept fibers' blocks of several patches solved together, four
    // per vector, in groups that straddle patches (5 kept fibers each). Every patch must
    // come out with the same bits as solve() on it alone, whatever the batch (1..5
    // patches, one solver reused; lanes and partners change with the batch).
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(5760.0, 6100.0, 0.8);
    so.fiberMin = 20;
    so.nFiber = 10;
    const Simulation sim = simulate(psf, so);
    const PatchPlan plan = makePatchPlan(psf, so.wave, so.fiberMin, so.nFiber, PatchParams{});
    QVERIFY(plan.patches.size() >= 5);
    PatchSolveOptions opt;
    opt.ndiag = psf.hsizeY;
    opt.psferr = psf.psfErr;
    std::vector<PatchSolution> alone(plan.patches.size());
    {
      PatchSolver solver;
      for (std::size_t i = 0; i < plan.patches.size(); ++i) solver.solve(plan.patches[i], plan, sim.image, psf, opt, alone[i]);
    }
    PatchSolver solver;
    for (const int batch : {5, 1, 3, 2, 4}) {
      std::vector<PatchSolution> sols(plan.patches.size());
      for (std::size_t i0 = 0; i0 < plan.patches.size(); i0 += batch) {
        const std::size_t i1 = std::min(plan.patches.size(), i0 + batch);
        for (std::size_t i = i0; i < i1; ++i) solver.begin(plan.patches[i], plan, sim.image, psf, opt, sols[i]);
        solver.finish();
      }
      for (std::size_t i = 0; i < plan.patches.size(); ++i) {
        QVERIFY(!sols[i].failed);
        QVERIFY(sols[i].flux == alone[i].flux);
        QVERIFY(sols[i].ivar == alone[i].ivar);
        QVERIFY(sols[i].resolution == alone[i].resolution);
        QVERIFY(sols[i].f == alone[i].f);
        QVERIFY(sols[i].chi2pix == alone[i].chi2pix);
        double any = 0;
        for (double v : sols[i].ivar) any = std::max(any, v);
        QVERIFY(any > 0); // the blocks were solved, not left at zero
      }
    }
  }

  void cacheServesIdenticalSpotsOnce() {
    // 20 fibers across a bundle edge (25): sub-bundles share padding fibers only inside
    // a bundle, patches share wavepad bins along each sub-bundle.
    const WaveGrid g = WaveGrid::fromRange(6000, 6300, 0.8);
    const PatchPlan plan = makePatchPlan(psf, g, 15, 20, PatchParams{});
    std::vector<int> all;
    for (const Patch& p : plan.patches) all.push_back(p.index);
    std::set<std::pair<int, int>> distinct;
    long long calls = 0;
    for (const Patch& p : plan.patches)
      for (int s = 0; s < p.nfiberPad; ++s)
        for (int k = 0; k < p.nwavePad; ++k, ++calls) distinct.insert({p.fiberPad0 + s, p.wavePad0 + k});

    // One thread: exactly one evaluation per distinct (fiber, bin), bit-identical values.
    {
      SpotCache cache(psf, plan, all);
      Spot scratch, direct;
      const int ns = psf.spotNx() * psf.spotNy();
      for (const Patch& p : plan.patches)
        for (int s = 0; s < p.nfiberPad; ++s)
          for (int k = 0; k < p.nwavePad; ++k) {
            const SpotView v = cache.get(p.fiberPad0 + s, p.wavePad0 + k, scratch);
            psf.spotInto(p.fiberPad0 + s, plan.waveAt(p.wavePad0 + k), direct);
            QCOMPARE(v.xc, direct.xc);
            QCOMPARE(v.yc, direct.yc);
            QVERIFY(std::memcmp(v.v, direct.v.data(), sizeof(double) * ns) == 0);
          }
      QCOMPARE(cache.computed(), (long long)distinct.size());
      QCOMPARE(cache.computed() + cache.reused(), calls);
      qInfo("%lld spot requests, %zu distinct: %.2f evaluations per spot without the cache", calls,
            distinct.size(), double(calls) / distinct.size());
      QVERIFY(calls > 1.5 * distinct.size()); // 2.07 on a full frame, less on this small piece
    }

    // Fibers are freed with the last patch that uses them, and only then.
    {
      SpotCache cache(psf, plan, all);
      Spot scratch;
      for (const Patch& p : plan.patches)
        for (int s = 0; s < p.nfiberPad; ++s) cache.get(p.fiberPad0 + s, p.wavePad0, scratch);
      const int live = cache.liveFibers();
      QVERIFY(live >= 20);
      const Patch& first = plan.patches[0];
      int shared = 0; // fibers of the first patch used by patches of another sub-bundle
      for (int f = first.fiberPad0; f < first.fiberPad0 + first.nfiberPad; ++f)
        for (const Patch& o : plan.patches)
          if (o.subbundle != first.subbundle || o.bundle != first.bundle)
            if (f >= o.fiberPad0 && f < o.fiberPad0 + o.nfiberPad) {
              ++shared;
              break;
            }
      for (const Patch& p : plan.patches)
        if (p.bundle == first.bundle && p.subbundle == first.subbundle) cache.release(p);
      QCOMPARE(cache.liveFibers(), live - (first.nfiberPad - shared));
      for (const Patch& p : plan.patches)
        if (p.bundle != first.bundle || p.subbundle != first.subbundle) cache.release(p);
      QCOMPARE(cache.liveFibers(), 0);
    }

    // Two threads asking for the same spots at once: every view holds the right values.
    {
      SpotCache cache(psf, plan, all);
      const int ns = psf.spotNx() * psf.spotNy();
      std::atomic<int> bad{0};
      auto work = [&](bool reverse) {
        Spot direct;
        std::vector<Spot> scratch(plan.patches[0].nunknown());
        for (std::size_t i = 0; i < plan.patches.size(); ++i) {
          const Patch& p = plan.patches[reverse ? plan.patches.size() - 1 - i : i];
          for (int s = 0; s < p.nfiberPad; ++s)
            for (int k = 0; k < p.nwavePad; ++k) {
              const SpotView v = cache.get(p.fiberPad0 + s, p.wavePad0 + k, scratch[s * p.nwavePad + k]);
              psf.spotInto(p.fiberPad0 + s, plan.waveAt(p.wavePad0 + k), direct);
              if (v.xc != direct.xc || v.yc != direct.yc ||
                  std::memcmp(v.v, direct.v.data(), sizeof(double) * ns) != 0)
                ++bad;
            }
        }
      };
      std::thread t1(work, false), t2(work, true);
      t1.join();
      t2.join();
      QCOMPARE(bad.load(), 0);
      QCOMPARE(cache.computed() + cache.reused(), 2 * calls);
      QVERIFY(cache.computed() >= (long long)distinct.size());
    }
  }

  void engineResultsIdenticalWithAndWithoutCache() {
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6100, 6400, 0.8);
    so.fiberMin = 20;
    so.nFiber = 15;
    const Simulation sim = simulate(psf, so);
    auto run = [&](bool cache) {
      ExtractionRequest req;
      req.image = &sim.image;
      req.psf = &psf;
      req.wave = so.wave;
      req.fiberMin = so.fiberMin;
      req.nFiber = so.nFiber;
      req.threads = 2;
      CpuEngineOptions o;
      o.spotCache = cache;
      NullProgress np;
      CancelToken ct;
      return CpuEngine(o).extract(req, np, ct);
    };
    const ExtractionResult a = run(true), b = run(false);
    auto same = [](const std::vector<double>& x, const std::vector<double>& y) {
      return x.size() == y.size() && std::memcmp(x.data(), y.data(), sizeof(double) * x.size()) == 0;
    };
    QVERIFY(same(a.flux.data, b.flux.data));
    QVERIFY(same(a.ivar.data, b.ivar.data));
    QVERIFY(same(a.deconvolved.data, b.deconvolved.data));
    QVERIFY(same(a.chi2pix.data, b.chi2pix.data));
    QVERIFY(same(a.pixmaskFraction.data, b.pixmaskFraction.data));
    QVERIFY(same(a.resolution.data, b.resolution.data));
    QVERIFY(a.mask.data == b.mask.data);
  }
};

QTEST_GUILESS_MAIN(TestPatchSolver)
#include "test_patch_solver.moc"
