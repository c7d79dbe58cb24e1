// The CUDA engine against the CPU engine (the reference) on simulated frames through
// the real r0 PSF and the synthetic PSF, and against the truth on a full r frame.
#include "core/errors.h"
#include "core/extract/cpu_engine.h"
#include "core/image.h"
#include "core/io/psf_io.h"
#include "core/profile/profile.h"
#include "core/sim/simulator.h"
#include "gpu/cuda_engine.h"
#include "gpu/kernel_tracer.h"
#include "gpu/kernels.h"
#include "result_sentinels.h"
#include "test_data.h"

#include <QTest>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <algorithm>

using namespace spex;

namespace {

class NullProgress : public ProgressSink {};

// Largest CPU-vs-CUDA differences over the bins the CPU result covers.
struct Diff {
  double flux = 0;     // |dflux| sqrt(ivar)
  double ivar = 0;     // |divar| / ivar
  double res = 0;      // |dR|
  double chi2 = 0;     // |dchi2pix| / max(1, chi2pix)
  double pixmask = 0;  // |dpixmask|
  double deconv = 0;   // |df| sqrt(ivar) (photons vs per Angstrom: scaled by dw)
  double model = 0;    // |dmodel| / max|model|
  long maskDiff = 0, coverDiff = 0, nonFinite = 0, n = 0;
  QString text() const {
    return QString("bins %1: flux %2 ivar %3 res %4 chi2pix %5 pixmask %6 f %7 model %8 "
                   "mask diffs %9 cover diffs %10 non-finite %11")
        .arg(n).arg(flux).arg(ivar).arg(res).arg(chi2).arg(pixmask).arg(deconv).arg(model)
        .arg(maskDiff).arg(coverDiff).arg(nonFinite);
  }
};

Diff compare(const ExtractionResult& c, const ExtractionResult& g) {
  Diff d;
  for (int f = 0; f < c.nfiber; ++f)
    for (int w = 0; w < c.nwave; ++w) {
      if (c.covered(f, w) != g.covered(f, w)) ++d.coverDiff;
      for (double v : {g.flux(f, w), g.ivar(f, w), g.chi2pix(f, w), g.deconvolved(f, w)})
        if (!std::isfinite(v)) ++d.nonFinite;
      if (!c.covered(f, w)) continue;
      ++d.n;
      const double iv = std::max(c.ivar(f, w), g.ivar(f, w));
      d.flux = std::max(d.flux, std::abs(c.flux(f, w) - g.flux(f, w)) * std::sqrt(iv));
      d.deconv = std::max(d.deconv, std::abs(c.deconvolved(f, w) - g.deconvolved(f, w)) /
                                        c.wave.dw * std::sqrt(iv));
      if (iv > 0) d.ivar = std::max(d.ivar, std::abs(c.ivar(f, w) - g.ivar(f, w)) / iv);
      for (int k = 0; k <= 2 * c.ndiag; ++k)
        d.res = std::max(d.res, std::abs(c.resolution(f, k, w) - g.resolution(f, k, w)));
      d.chi2 = std::max(d.chi2, std::abs(c.chi2pix(f, w) - g.chi2pix(f, w)) /
                                    std::max(1.0, std::abs(c.chi2pix(f, w))));
      d.pixmask = std::max(d.pixmask, std::abs(c.pixmaskFraction(f, w) - g.pixmaskFraction(f, w)));
      if (c.mask(f, w) != g.mask(f, w)) ++d.maskDiff;
    }
  if (c.model && g.model) {
    double mx = 0, md = 0;
    for (std::size_t i = 0; i < c.model->data.size(); ++i) {
      mx = std::max(mx, std::abs(c.model->data[i]));
      md = std::max(md, std::abs(c.model->data[i] - g.model->data[i]));
    }
    d.model = mx > 0 ? md / mx : md;
  }
  return d;
}

void requireAgreement(const Diff& d) {
  qInfo("%s", qPrintable(d.text()));
  QVERIFY(d.n > 0);
  QCOMPARE(d.coverDiff, 0L);
  QCOMPARE(d.nonFinite, 0L);
  QVERIFY2(d.flux < 1e-6, qPrintable(d.text()));
  QVERIFY2(d.ivar < 1e-6, qPrintable(d.text()));
  QVERIFY2(d.res < 1e-8, qPrintable(d.text()));
  QVERIFY2(d.chi2 < 1e-6, qPrintable(d.text()));
  QVERIFY2(d.pixmask < 1e-12, qPrintable(d.text()));
  QVERIFY2(d.deconv < 1e-6, qPrintable(d.text()));
  QVERIFY2(d.model < 1e-9, qPrintable(d.text()));
  QCOMPARE(d.maskDiff, 0L);
}

// (R t)_i from the RESOLUTION diagonals: RES[k, j] = R[j - nd + k, j].
double convolved(const ExtractionResult& r, const Array2D<double>& phot, int f, int i) {
  double s = 0;
  for (int k = 0; k <= 2 * r.ndiag; ++k) {
    const int j = i + r.ndiag - k;
    if (j >= 0 && j < r.nwave) s += r.resolution(f, k, j) * phot(f, j);
  }
  return s;
}

// Every element of a result's frame arrays (result_sentinels.h) and model set to a value
// no extraction writes.
void fillSentinels(ExtractionResult& r) {
  spextest::fillFrameSentinels(r);
  if (r.model) std::fill(r.model->data.begin(), r.model->data.end(), std::numeric_limits<double>::quiet_NaN());
}

using spextest::sentinelsLeft;

} // namespace

class TestCudaEngine : public QObject {
  Q_OBJECT
  GaussHermitePsf realPsf;
  std::unique_ptr<CudaEngine> cuda;

  ExtractionRequest request(const GaussHermitePsf& psf, const Image& img, const WaveGrid& g,
                            int f0, int nf, PatchParams pp = {}, bool model = true) {
    ExtractionRequest req;
    req.image = &img;
    req.psf = &psf;
    req.wave = g;
    req.fiberMin = f0;
    req.nFiber = nf;
    req.params = pp;
    req.model = model;
    return req;
  }
  ExtractionResult runCpu(const ExtractionRequest& req) {
    NullProgress np;
    CancelToken ct;
    return CpuEngine().extract(req, np, ct);
  }
  ExtractionResult runCuda(const ExtractionRequest& req, Engine* e = nullptr) {
    NullProgress np;
    CancelToken ct;
    return (e ? e : cuda.get())->extract(req, np, ct);
  }

  // Bins where flux, ivar, deconvolved flux, pixmask_fraction or a resolution entry
  // (and, with maskAndCoverage, the mask or coverage) differ in any bit. chi2pix and
  // the model are left out: they are summed with atomics (the engine itself repeats
  // them only to ~1e-15).
  static long binsNotIdentical(const ExtractionResult& x, const ExtractionResult& y, bool maskAndCoverage) {
    long k = 0;
    for (int f = 0; f < x.nfiber; ++f)
      for (int w = 0; w < x.nwave; ++w) {
        bool d = x.flux(f, w) != y.flux(f, w) || x.ivar(f, w) != y.ivar(f, w) ||
                 x.deconvolved(f, w) != y.deconvolved(f, w) || x.pixmaskFraction(f, w) != y.pixmaskFraction(f, w);
        if (maskAndCoverage) d = d || x.mask(f, w) != y.mask(f, w) || x.covered(f, w) != y.covered(f, w);
        for (int j = 0; j <= 2 * x.ndiag; ++j) d = d || x.resolution(f, j, w) != y.resolution(f, j, w);
        k += d;
      }
    return k;
  }

  // A switch's old path (a) and new path (b), each run twice on its own warm engine (0,
  // 1): the second frames must be the same to the bit wherever the old path repeats
  // itself to the bit (chi2pix and the model are summed with atomics: to rounding), with
  // the same counts, flags and per-patch chi2. Returns the bins not identical: b1 vs a1,
  // a0 vs a1, b0 vs b1, for the caller's log.
  struct BitCounts {
    long differ, again, warm;
  };
  static BitCounts requireSameFrame(const ExtractionResult& a0, const ExtractionResult& a1,
                                    const ExtractionResult& b0, const ExtractionResult& b1, const Diff& diff) {
    const BitCounts n{binsNotIdentical(a1, b1, true), binsNotIdentical(a0, a1, true), binsNotIdentical(b0, b1, true)};
    requireAgreement(diff);
    if (QTest::currentTestFailed()) return n;
    [&] {
      QVERIFY2(diff.chi2 < 1e-12 && diff.model < 1e-12, qPrintable(diff.text()));
      if (n.again == 0) {
        QCOMPARE(n.differ, 0L);
        QCOMPARE(n.warm, 0L);
      }
      QCOMPARE(b1.noDataBins, a1.noDataBins);
      QCOMPARE(b1.nonFiniteBins, a1.nonFiniteBins);
      QCOMPARE(b1.patches.size(), a1.patches.size());
      for (std::size_t i = 0; i < a1.patches.size(); ++i) {
        QCOMPARE(b1.patches[i].patch, a1.patches[i].patch);
        QCOMPARE(b1.patches[i].regularized, a1.patches[i].regularized);
        QCOMPARE(b1.patches[i].failed, a1.patches[i].failed);
        QVERIFY(std::abs(b1.patches[i].chi2 - a1.patches[i].chi2) <= 1e-12 * std::max(1.0, a1.patches[i].chi2));
      }
    }();
    return n;
  }

private slots:
  void initTestCase() {
    std::string why;
    if (!cudaAvailable(&why)) QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(why)));
    SPEX_REQUIRE_DATA(path, "psf-r0-00067784.fits");
    realPsf = readPsf(path);
    cuda = std::make_unique<CudaEngine>();
    for (const GpuInfo& g : listGpus())
      qInfo("cuda:%d %s, %d SMs, %.1f GiB", g.device, g.name.c_str(), g.multiprocessors,
            g.totalBytes / 1073741824.0);
  }

  void realPsfTwoBundlesMatchCpu() {
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 0;
    so.nFiber = 50;
    so.seed = 3;
    const Simulation sim = simulate(realPsf, so);
    const ExtractionRequest req = request(realPsf, sim.image, so.wave, 0, 50);
    const ExtractionResult c = runCpu(req), g = runCuda(req);
    QCOMPARE(g.engine, cuda->name());
    QCOMPARE(g.patches.size(), c.patches.size());
    for (std::size_t i = 0; i < c.patches.size(); ++i) {
      QCOMPARE(g.patches[i].patch, c.patches[i].patch);
      QCOMPARE(g.patches[i].regularized, c.patches[i].regularized);
      QCOMPARE(g.patches[i].failed, c.patches[i].failed);
      QVERIFY(std::abs(g.patches[i].chi2 - c.patches[i].chi2) <= 1e-8 * std::max(1.0, c.patches[i].chi2));
    }
    requireAgreement(compare(c, g));
    // Device-timed phases on the stream lanes.
    bool sawStream = false, sawDecorrelate = false;
    for (const ProfileRange& r : g.profile.ranges) {
      if (g.profile.lanes[r.lane].find("stream") != std::string::npos) sawStream = true;
      if (r.name == "decorrelate") sawDecorrelate = true;
      QVERIFY(r.endNs >= r.startNs);
    }
    QVERIFY(sawStream && sawDecorrelate);
  }

  void syntheticPsfEdgesMatchCpu() {
    // The last bundle over the whole r grid: patches whose padding leaves the grid and
    // boxes clipped at the CCD edge, bundle-edge patches with 6 solved fibers.
    const GaussHermitePsf psf = makeSyntheticPsf();
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(5760, 7620, 0.8);
    so.fiberMin = 475;
    so.nFiber = 25;
    so.seed = 9;
    const Simulation sim = simulate(psf, so);
    const ExtractionRequest req = request(psf, sim.image, so.wave, 475, 25);
    requireAgreement(compare(runCpu(req), runCuda(req)));
  }

  void otherEigensolversMatchCpu() {
    // The fiber-block eigensolvers kept behind SPEXLAB_CUDA_EIGH and SPEXLAB_CUDA_EIGH_VALUES (the default,
    // syevBatched's bisection method, runs in every other test here; the QL chain,
    // the default before the eighth round, is checked here).
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 25;
    so.nFiber = 50;
    const Simulation sim = simulate(realPsf, so);
    const ExtractionRequest req = request(realPsf, sim.image, so.wave, 25, 50);
    const ExtractionResult c = runCpu(req);
    for (auto eigh : {CudaEngineOptions::Eigh::Cusolver, CudaEngineOptions::Eigh::Jacobi,
                      CudaEngineOptions::Eigh::Tridiagonal}) {
      CudaEngineOptions o;
      o.eigh = eigh;
      CudaEngine other(o);
      requireAgreement(compare(c, runCuda(req, &other)));
    }
    // The bisection method with its eighth-round pass 3 (CholQR; SPEXLAB_CUDA_EIGH_ORTHO=cholqr).
    CudaEngineOptions o;
    o.newtonSchulzEigh = false;
    CudaEngine cholqr(o);
    requireAgreement(compare(c, runCuda(req, &cholqr)));
    // The bisection method with its other eigenvalue paths (SPEXLAB_CUDA_EIGH_VALUES=
    // newton: Newton's steps once isolated; ratio: the eighth round's quadsection on the
    // ratio count inside the vector kernel).
    for (auto values : {CudaEngineOptions::EighValues::Newton, CudaEngineOptions::EighValues::Ratio}) {
      CudaEngineOptions o;
      o.eighValues = values;
      CudaEngine other(o);
      requireAgreement(compare(c, runCuda(req, &other)));
    }
  }

  void eighReducesMatchCpu() {
    // syevBatched's pass 1 by the other kernel than the default (SPEXLAB_CUDA_EIGH_REDUCE;
    // CudaEngineOptions::eighReduce), under the bisection method and the QL chain.
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 25;
    so.nFiber = 50;
    const Simulation sim = simulate(realPsf, so);
    const ExtractionRequest req = request(realPsf, sim.image, so.wave, 25, 50);
    const ExtractionResult c = runCpu(req);
    const auto other = CudaEngineOptions().eighReduce == CudaEngineOptions::EighReduce::Warp
                           ? CudaEngineOptions::EighReduce::Block
                           : CudaEngineOptions::EighReduce::Warp;
    for (auto eigh : {CudaEngineOptions::Eigh::Bisect, CudaEngineOptions::Eigh::Tridiagonal}) {
      CudaEngineOptions o;
      o.eigh = eigh;
      o.eighReduce = other;
      CudaEngine e(o);
      requireAgreement(compare(c, runCuda(req, &e)));
    }
  }

  void otherEighVectorsMatchCpu() {
    // The bisection method's vector kernel other than the default (SPEXLAB_CUDA_EIGH_VECTORS:
    // scratch in shared memory, SyevVectors::Shared, or in the workspace; eighvec) against
    // the CPU engine, as every eigensolver here, and against the default: syevBatched
    // gives the same vectors to the bit either way (test_batched_eigh), so the frames
    // agree as two runs of one engine do.
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 25;
    so.nFiber = 50;
    const Simulation sim = simulate(realPsf, so);
    const ExtractionRequest req = request(realPsf, sim.image, so.wave, 25, 50);
    CudaEngineOptions o;
    o.sharedEighVectors = !CudaEngineOptions().sharedEighVectors;
    CudaEngine other(o);
    const ExtractionResult r = runCuda(req, &other);
    requireAgreement(compare(runCpu(req), r));
    requireAgreement(compare(runCuda(req), r));
  }

  void libraryCholeskyMatchesCpu() {
    // The cuSOLVER potrfBatched path (SPEXLAB_CUDA_CHOLESKY=potrf), kept for A/B runs;
    // the default blocked Cholesky runs in every other test here.
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6400, 0.8);
    so.fiberMin = 25;
    so.nFiber = 50;
    const Simulation sim = simulate(realPsf, so);
    const ExtractionRequest req = request(realPsf, sim.image, so.wave, 25, 50);
    CudaEngineOptions o;
    o.blockedCholesky = false;
    CudaEngine lib(o);
    requireAgreement(compare(runCpu(req), runCuda(req, &lib)));
  }

  void bandedSolveMatchesDense() {
    // CudaEngineOptions::bandedSolve: the blocked Cholesky and L^-1 on each batch's
    // block band (every other test here runs it) against the dense ones, on the real
    // PSF across a bundle edge (patches of 6 and 7 solved fibers), in signal and noise
    // mode: the same arithmetic on the non-zero blocks, so agreement to rounding.
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 15;
    so.nFiber = 20;
    const Simulation sim = simulate(realPsf, so);
    CudaEngineOptions o;
    o.bandedSolve = false;
    CudaEngine dense(o);
    CudaEngine banded;
    for (auto mode : {Decorrelation::Signal, Decorrelation::Noise}) {
      PatchParams pp;
      pp.mode = mode;
      const ExtractionRequest req = request(realPsf, sim.image, so.wave, 15, 20, pp);
      const ExtractionResult d = runCuda(req, &dense), b = runCuda(req, &banded);
      const CudaMemoryPlan pd = dense.memoryPlans().at(0), pb = banded.memoryPlans().at(0);
      qInfo("%s: banded batches %d of %d, widest coupling %d; dense: %d, %d",
            mode == Decorrelation::Signal ? "signal" : "noise", pb.bandedBatches, pb.batches,
            pb.maxCoupling, pd.bandedBatches, pd.maxCoupling);
      QCOMPARE(pd.bandedBatches, 0);
      QCOMPARE(pd.maxCoupling, -1);
      QVERIFY(pb.bandedBatches > 0 && pb.bandedBatches == pb.batches); // r0: fibers couple 2 apart
      QVERIFY(pb.maxCoupling >= 1 && pb.maxCoupling <= 5); // 7-fiber patches: a narrower band
      const Diff diff = compare(d, b);
      qInfo("banded vs dense: %s", qPrintable(diff.text()));
      requireAgreement(diff);
      QVERIFY2(diff.flux < 1e-10 && diff.ivar < 1e-10 && diff.res < 1e-12 && diff.deconv < 1e-10,
               qPrintable(diff.text()));
    }
  }

  void normalEquationKernelsAgree() {
    // CudaEngineOptions::normalKernel: the tree kernel (the lean kernel with its warp sums
    // done by one thread a sum in the butterfly's order), the lean pair-list kernel (a
    // block per unknown), the pair-list kernel it was cut from, and the tile kernel (a block per 8 unknowns) fill only
    // the lower triangle's block band the factor reads, with no memsets, so A's upper
    // triangle and the blocks outside the band keep whatever the workspace held (an
    // earlier batch's factor, the eigensolver's scratch); the older scan kernel clears A
    // and writes both triangles. All five sum each entry over the same pixels in the
    // same order, so flux, ivar, resolution, f and pixmask_fraction must agree to the
    // bit (chi2pix and the model to rounding), on the band and dense, with cuSOLVER's
    // potrf, in signal and noise mode, over several batches a workspace (small batches:
    // every batch after the first starts on a used A; 7 patches of 20 fibers: groups of
    // 8 unknowns straddle fiber blocks and reach the identity padding).
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 15;
    so.nFiber = 20;
    const Simulation sim = simulate(realPsf, so);
    struct Variant { const char* name; bool banded, blocked; };
    using NK = CudaEngineOptions::NormalKernel;
    for (auto mode : {Decorrelation::Signal, Decorrelation::Noise}) {
      PatchParams pp;
      pp.mode = mode;
      const ExtractionRequest req = request(realPsf, sim.image, so.wave, 15, 20, pp);
      for (const Variant var : {Variant{"band", true, true}, Variant{"dense", false, true},
                                Variant{"potrf", true, false}}) {
        CudaEngineOptions o;
        o.bandedSolve = var.banded;
        o.blockedCholesky = var.blocked;
        o.maxBatch = 7;
        o.normalKernel = NK::Scan;
        CudaEngine scan(o);
        o.normalKernel = NK::Pairs;
        CudaEngine pairs(o);
        o.normalKernel = NK::Tile;
        CudaEngine tile(o);
        o.normalKernel = NK::Lean;
        CudaEngine lean(o);
        o.normalKernel = NK::Tree;
        CudaEngine tree(o);
        const ExtractionResult r0 = runCuda(req, &scan), r2 = runCuda(req, &scan);
        const long again = binsNotIdentical(r0, r2, false);
        for (CudaEngine* e : {&tree, &lean, &pairs, &tile}) {
          const ExtractionResult r1 = runCuda(req, e);
          const Diff diff = compare(r0, r1);
          const long differ = binsNotIdentical(r0, r1, false);
          qInfo("%s, %s: %s vs scan kernel: %s; bins not identical: %ld (scan twice: %ld; batches %d)",
                mode == Decorrelation::Signal ? "signal" : "noise", var.name, e == &tile ? "tile" : e == &lean ? "lean" : e == &tree ? "tree" : "pairs",
                qPrintable(diff.text()), differ, again, e->memoryPlans().at(0).batches);
          QVERIFY(e->memoryPlans().at(0).batches > 2);
          requireAgreement(diff);
          QVERIFY2(diff.flux < 1e-12 && diff.ivar < 1e-12 && diff.res < 1e-14 && diff.deconv < 1e-12,
                   qPrintable(diff.text()));
          // To the bit wherever the engine itself repeats to the bit.
          if (again == 0) QCOMPARE(differ, 0L);
          for (std::size_t i = 0; i < r0.patches.size(); ++i) {
            QCOMPARE(r1.patches[i].regularized, r0.patches[i].regularized);
            QCOMPARE(r1.patches[i].failed, r0.patches[i].failed);
          }
        }
      }
    }
  }

  void overlappedEndsMatchToTheBit() {
    // CudaEngineOptions::overlapEnds (every other whole-frame test here runs it): the
    // image by row blocks beside the batches, the patches in wavelength order, each wave
    // step's bins back and finalized while later batches run. A full r frame through
    // the real r0 PSF, without and with the model image, two engines warm: flux, ivar,
    // resolution, deconvolved flux, pixmask_fraction, mask and coverage must be the
    // same to the bit wherever the old path repeats itself to the bit (chi2pix and the
    // model are summed with atomics: to rounding), and so must the counts and flags.
    SimulationOptions so; // the r grid, 500 fibers
    const Simulation sim = simulate(realPsf, so);
    CudaEngineOptions o;
    o.overlapEnds = false;
    CudaEngine before(o);
    o.overlapEnds = true;
    CudaEngine after(o);
    for (bool model : {false, true}) {
      const ExtractionRequest req = request(realPsf, sim.image, so.wave, 0, 500, {}, model);
      const ExtractionResult a0 = runCuda(req, &before), b0 = runCuda(req, &after);
      const ExtractionResult a1 = runCuda(req, &before), b1 = runCuda(req, &after);
      const Diff diff = compare(a1, b1);
      const CudaMemoryPlan pa = before.memoryPlans().at(0), pb = after.memoryPlans().at(0);
      QCOMPARE(pb.batches, pa.batches);
      const BitCounts n = requireSameFrame(a0, a1, b0, b1, diff);
      qInfo("model %d: overlapped vs not: %s; bins not identical: %ld (old path twice: %ld, new twice: %ld); "
            "batches %d / %d, banded %d / %d, widest coupling %d / %d; wall %.4f / %.4f s",
            int(model), qPrintable(diff.text()), n.differ, n.again, n.warm, pa.batches, pb.batches, pa.bandedBatches,
            pb.bandedBatches, pa.maxCoupling, pb.maxCoupling, a1.profile.wallNs * 1e-9, b1.profile.wallNs * 1e-9);
      if (QTest::currentTestFailed()) return;
      // The new lanes carry the image's H2D and the wave steps' D2H; where the first
      // batch began against the upload's end, and the tail after the last kernel phase.
      const Profile& p = b1.profile;
      int64_t upEnd = -1, firstBatch = INT64_MAX, lastPhase = 0, d2h = 0;
      for (const ProfileRange& r : p.ranges) {
        if (r.lane < 0) continue;
        const std::string& lane = p.lanes[std::size_t(r.lane)];
        if (lane == "cuda:0 upload" && r.name == "H2D") upEnd = std::max(upEnd, r.endNs);
        if (lane == "cuda:0 download" && r.name == "D2H") ++d2h;
        if (r.name == "normal equations") firstBatch = std::min(firstBatch, r.startNs);
        if (r.name == "chi2pix") lastPhase = std::max(lastPhase, r.endNs);
      }
      qInfo("  image upload ends %.2f ms, first batch %.2f ms, last chi2pix ends %.2f ms of %.2f ms; %ld wave-step D2H",
            upEnd * 1e-6, firstBatch * 1e-6, lastPhase * 1e-6, p.wallNs * 1e-6, long(d2h));
      QVERIFY(upEnd > 0);
      QVERIFY(d2h > 0);
    }
  }

  void keptResultMatchesToTheBit() {
    // CudaEngineOptions::keepResult: extractInto of a whole frame into a result of its
    // shape writes the kept arrays in place. A full r frame through the real r0 PSF,
    // without and with the model, on two warm engines (keepResult off, on): before the
    // kept result's second frame every element of it is set to a sentinel (NaN, all mask
    // bits, coverage 2); none may survive, the arrays must be the same memory, and the
    // frame must equal the old path's to the bit. Then a patch list (not accumulated)
    // into the same kept result, sentinels again: equal to extract() of the list, zero
    // elsewhere; and a request of another shape: new arrays, equal to extract().
    SimulationOptions so; // the r grid, 500 fibers
    const Simulation sim = simulate(realPsf, so);
    CudaEngineOptions o;
    o.keepResult = false;
    CudaEngine before(o);
    o.keepResult = true;
    CudaEngine after(o);
    NullProgress np;
    CancelToken ct;
    for (bool model : {false, true}) {
      const ExtractionRequest req = request(realPsf, sim.image, so.wave, 0, 500, {}, model);
      ExtractionResult a, b;
      before.extractInto(req, a, np, ct);
      const ExtractionResult a0 = a;
      before.extractInto(req, a, np, ct);
      after.extractInto(req, b, np, ct);
      const ExtractionResult b0 = b;
      const double* flux0 = b.flux.data.data();
      const double* res0 = b.resolution.data.data();
      fillSentinels(b);
      QCOMPARE(sentinelsLeft(b), long(b.flux.size()) * (7 + 2 * b.ndiag + 1) + (model ? long(b.model->size()) : 0L));
      after.extractInto(req, b, np, ct);
      QCOMPARE(b.flux.data.data(), flux0);
      QCOMPARE(b.resolution.data.data(), res0);
      QCOMPARE(sentinelsLeft(b), 0L);
      const Diff diff = compare(a, b);
      const BitCounts n = requireSameFrame(a0, a, b0, b, diff);
      QCOMPARE(b.model.has_value(), model);
      QVERIFY(b.modelTiles.empty() && b.lastPatches.empty());
      QCOMPARE(b.engine, a.engine);
      qInfo("model %d: kept vs new arrays: %s; bins not identical: %ld (old path twice: %ld, new twice: %ld); "
            "wall %.4f / %.4f s",
            int(model), qPrintable(diff.text()), n.differ, n.again, n.warm, a.profile.wallNs * 1e-9,
            b.profile.wallNs * 1e-9);
      if (QTest::currentTestFailed()) return;

      // A patch list, not accumulated, into the kept frame: the rest is zero again.
      ExtractionRequest some = req;
      attachPlan(some);
      std::vector<int> pick = some.plan->patchesInRegion(30, 60, 400, 700);
      const std::vector<int> more = some.plan->patchesInRegion(300, 320, 1500, 1600);
      pick.insert(pick.end(), more.begin(), more.end());
      QVERIFY(pick.size() > 4);
      some.patches = pick;
      fillSentinels(b);
      after.extractInto(some, b, np, ct);
      QCOMPARE(b.flux.data.data(), flux0);
      QCOMPARE(sentinelsLeft(b), 0L);
      QVERIFY(b.lastPatches == pick);
      ExtractionResult c;
      before.extractInto(some, c, np, ct);
      const ExtractionResult fresh = runCuda(some, &before);
      QCOMPARE(binsNotIdentical(b, fresh, true), 0L);
      QCOMPARE(binsNotIdentical(b, c, true), 0L);
      QCOMPARE(b.patches.size(), pick.size());
      QCOMPARE(b.noDataBins, fresh.noDataBins);
      long coveredBins = 0;
      for (uint8_t v : b.covered.data) coveredBins += v;
      QVERIFY(coveredBins > 0 && coveredBins < long(b.covered.size()));
      requireAgreement(compare(fresh, b));
      if (QTest::currentTestFailed()) return;

      // Another shape: new arrays, the same as extract() of it.
      const ExtractionRequest narrow = request(realPsf, sim.image, so.wave, 100, 25, {}, model);
      after.extractInto(narrow, b, np, ct);
      QCOMPARE(b.nfiber, 25);
      QCOMPARE(long(b.flux.size()), 25L * so.wave.n);
      const ExtractionResult narrowFresh = runCuda(narrow, &before);
      QCOMPARE(binsNotIdentical(b, narrowFresh, true), 0L);
      requireAgreement(compare(narrowFresh, b));
      if (QTest::currentTestFailed()) return;
    }
    // Switched off, extractInto makes new arrays each time (the old path).
    ExtractionResult d;
    const ExtractionRequest req = request(realPsf, sim.image, so.wave, 100, 25, {}, false);
    before.extractInto(req, d, np, ct);
    fillSentinels(d);
    before.extractInto(req, d, np, ct);
    QCOMPARE(sentinelsLeft(d), 0L);
  }

  void plannedAheadMatchesToTheBit() {
    // CudaEngineOptions::planAhead (every other whole-frame test here runs it): device 0
    // takes the plan's corners and each patch's extents and starts the spot table before
    // the host sets the boxes. A full r frame through the real r0 PSF, without and with
    // the model image, two engines warm: the same bins to the bit wherever the old path
    // repeats itself to the bit (chi2pix and the model are summed with atomics), the
    // same batches, counts, flags and per-patch chi2.
    SimulationOptions so; // the r grid, 500 fibers
    const Simulation sim = simulate(realPsf, so);
    CudaEngineOptions o;
    o.planAhead = false;
    CudaEngine before(o);
    o.planAhead = true;
    CudaEngine after(o);
    for (bool model : {false, true}) {
      const ExtractionRequest req = request(realPsf, sim.image, so.wave, 0, 500, {}, model);
      const ExtractionResult a0 = runCuda(req, &before), b0 = runCuda(req, &after);
      const ExtractionResult a1 = runCuda(req, &before), b1 = runCuda(req, &after);
      const Diff diff = compare(a1, b1);
      const CudaMemoryPlan pa = before.memoryPlans().at(0), pb = after.memoryPlans().at(0);
      auto firstBatch = [](const Profile& p) {
        int64_t t = INT64_MAX, plan = 0;
        for (const ProfileRange& r : p.ranges) {
          if (r.name == "normal equations") t = std::min(t, r.startNs);
          if (r.name == "plan" && r.lane >= 0 && p.lanes[std::size_t(r.lane)] == "main") plan = r.endNs - r.startNs;
        }
        return std::pair{t * 1e-6, plan * 1e-6};
      };
      const auto [fa, pla] = firstBatch(a1.profile);
      const auto [fb, plb] = firstBatch(b1.profile);
      QCOMPARE(pb.batches, pa.batches);
      QCOMPARE(pb.bandedBatches, pa.bandedBatches);
      QCOMPARE(pb.maxCoupling, pa.maxCoupling);
      const BitCounts n = requireSameFrame(a0, a1, b0, b1, diff);
      qInfo("model %d: planned ahead vs not: %s; bins not identical: %ld (old path twice: %ld, new twice: %ld); "
            "batches %d / %d; plan %.2f / %.2f ms, first batch %.2f / %.2f ms; wall %.4f / %.4f s",
            int(model), qPrintable(diff.text()), n.differ, n.again, n.warm, pa.batches, pb.batches, pla, plb, fa, fb,
            a1.profile.wallNs * 1e-9, b1.profile.wallNs * 1e-9);
      if (QTest::currentTestFailed()) return;
    }
  }

  void selectedInverseMatchesFull() {
    // CudaEngineOptions::selectedInverse (every other test here runs it): the flux by
    // block substitution through the factor's band and the fiber blocks by the selected
    // inversion, against L^-1 formed whole (f = X^T X y, C_s = X_s^T X_s), on the real
    // PSF across a bundle edge, signal and noise mode, on the band and dense, with the
    // blocked Cholesky and cuSOLVER's potrf. Different sums of the same products: agreement
    // to rounding (relative 1e-16 times the patches' condition, ~1e6 at most), far
    // below any misplaced block (O(1)).
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 15;
    so.nFiber = 20;
    const Simulation sim = simulate(realPsf, so);
    CudaEngineOptions fo;
    fo.selectedInverse = false;
    CudaEngine full(fo);
    for (auto mode : {Decorrelation::Signal, Decorrelation::Noise}) {
      PatchParams pp;
      pp.mode = mode;
      const ExtractionRequest req = request(realPsf, sim.image, so.wave, 15, 20, pp);
      const ExtractionResult f = runCuda(req, &full);
      struct Variant { const char* name; bool banded, blocked; };
      for (const Variant var : {Variant{"band", true, true}, Variant{"dense", false, true},
                                Variant{"potrf", true, false}}) {
        CudaEngineOptions o;
        o.bandedSolve = var.banded;
        o.blockedCholesky = var.blocked;
        CudaEngine sel(o);
        const ExtractionResult g = runCuda(req, &sel);
        const Diff diff = compare(f, g);
        qInfo("%s, %s: selected vs full inverse: %s", mode == Decorrelation::Signal ? "signal" : "noise",
              var.name, qPrintable(diff.text()));
        requireAgreement(diff);
        QVERIFY2(diff.flux < 1e-9 && diff.ivar < 1e-9 && diff.res < 1e-11 && diff.deconv < 1e-9,
                 qPrintable(diff.text()));
        for (std::size_t i = 0; i < f.patches.size(); ++i) {
          QCOMPARE(g.patches[i].regularized, f.patches[i].regularized);
          QCOMPARE(g.patches[i].failed, f.patches[i].failed);
        }
        // No L^-1: a patch's batch workspace is an n x n matrix smaller (n = F nb, at
        // least 6 fibers of 74 bins here).
        const CudaMemoryPlan pf = full.memoryPlans().at(0), pg = sel.memoryPlans().at(0);
        const std::size_t nn = std::size_t(6 * 74) * (6 * 74) * sizeof(double);
        QVERIFY2(pf.perPatchBytes >= pg.perPatchBytes + nn,
                 qPrintable(QString("per patch %1 vs %2").arg(pg.perPatchBytes).arg(pf.perPatchBytes)));
      }
    }
  }

  void fusedSelectedInverseMatchesSteps() {
    // CudaEngineOptions::fusedSelectedInverse (default, every other test here runs it):
    // the selected inversion by one kernel a patch against the GEMMs and mirror kernel by
    // block column, on the real PSF across a bundle edge, on the band (w <= 2: the fused
    // kernel) and dense (w = F - 1: both run the steps, so identical to the bit). The same
    // products summed in another order (L_jj^-T L_jj^-1 first): agreement to rounding
    // (relative 1e-16 times the patches' condition, ~1e6 at most), far below a misplaced
    // block (O(1)).
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 15;
    so.nFiber = 20;
    const Simulation sim = simulate(realPsf, so);
    PatchParams pp;
    const ExtractionRequest req = request(realPsf, sim.image, so.wave, 15, 20, pp);
    for (const bool banded : {true, false}) {
      CudaEngineOptions so1, fo;
      so1.fusedSelectedInverse = false;
      so1.bandedSolve = fo.bandedSolve = banded;
      CudaEngine steps(so1), fused(fo);
      const ExtractionResult a = runCuda(req, &steps), b = runCuda(req, &fused);
      const Diff diff = compare(a, b);
      qInfo("%s: fused vs steps selected inversion: %s", banded ? "band" : "dense", qPrintable(diff.text()));
      requireAgreement(diff);
      QVERIFY2(diff.flux < 1e-9 && diff.ivar < 1e-9 && diff.res < 1e-11 && diff.deconv < 1e-9,
               qPrintable(diff.text()));
      if (!banded) QVERIFY2(diff.flux == 0 && diff.ivar == 0 && diff.res == 0, qPrintable(diff.text()));
      for (std::size_t i = 0; i < a.patches.size(); ++i) {
        QCOMPARE(b.patches[i].regularized, a.patches[i].regularized);
        QCOMPARE(b.patches[i].failed, a.patches[i].failed);
      }
    }
  }

  void noiseDecorrelationMatchesCpu() {
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6200, 6500, 0.8);
    so.fiberMin = 25;
    so.nFiber = 25;
    const Simulation sim = simulate(realPsf, so);
    PatchParams pp;
    pp.mode = Decorrelation::Noise;
    const ExtractionRequest req = request(realPsf, sim.image, so.wave, 25, 25, pp, false);
    requireAgreement(compare(runCpu(req), runCuda(req)));
  }

  // A whole request that carries its plan (spexlab-cli extract makes it while the
  // engine starts; the workbench always does): the spot table is prefetched over the
  // plan's range instead of the device's corner table. Same result as without the plan,
  // and as the CPU engine; then, on the same warm engine, a PSF whose traces moved by
  // 0.5 pixel (the PSF upload must not be kept from the first request) gives the CPU
  // engine's result for that PSF, not the first one.
  void wholeRequestWithItsPlan() {
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 25;
    so.nFiber = 25;
    const Simulation sim = simulate(realPsf, so);
    ExtractionRequest plain = request(realPsf, sim.image, so.wave, 25, 25);
    ExtractionRequest planned = plain;
    attachPlan(planned);
    CudaEngine engine;
    const ExtractionResult a = runCuda(plain, &engine), b = runCuda(planned, &engine);
    const Diff same = compare(a, b);
    qInfo("with the plan vs without: %s", qPrintable(same.text()));
    requireAgreement(same);
    QVERIFY2(same.flux < 1e-12 && same.ivar < 1e-12 && same.res < 1e-12, qPrintable(same.text()));
    requireAgreement(compare(runCpu(planned), b));

    GaussHermitePsf moved = realPsf;
    for (int f = 0; f < moved.nfiber; ++f) moved.xTrace.coeff(f, 0) += 0.5; // c0: a shift in x
    ExtractionRequest other = request(moved, sim.image, so.wave, 25, 25);
    attachPlan(other);
    const ExtractionResult c = runCuda(other, &engine);
    requireAgreement(compare(runCpu(other), c));
    const Diff differs = compare(b, c);
    QVERIFY2(differs.flux > 1e-3, qPrintable(differs.text()));
  }

  void subsetAndSmallBatchesMatch() {
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 100;
    so.nFiber = 25;
    const Simulation sim = simulate(realPsf, so);
    ExtractionRequest req = request(realPsf, sim.image, so.wave, 100, 25);
    req.patches = std::vector<int>{0, 3, 17, 40, 41, 42, 60};
    // Three workspaces of 2 patches each: several batches per stream, a partial one.
    CudaEngineOptions o;
    o.streams = 3;
    o.maxBatch = 2;
    CudaEngine small(o);
    const ExtractionResult c = runCpu(req), g = runCuda(req, &small), g2 = runCuda(req);
    QCOMPARE(int(g.patches.size()), 7);
    requireAgreement(compare(c, g));
    requireAgreement(compare(c, g2));
  }

  // extractInto with `accumulate` (the workbench's patch selections): the CUDA engine
  // writes the caller's result in place and fills per-patch model tiles like the CPU
  // engine, over two overlapping selections; the model image is their sum.
  void accumulateFillsModelTilesLikeCpu() {
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 100;
    so.nFiber = 25;
    const Simulation sim = simulate(realPsf, so);
    ExtractionRequest req = request(realPsf, sim.image, so.wave, 100, 25);
    attachPlan(req);
    req.accumulate = true;
    NullProgress np;
    CancelToken ct;
    CpuEngine cpu;
    ExtractionResult c, g;
    for (const std::vector<int>& sel : {std::vector<int>{3, 17, 40, 41, 42, 60}, std::vector<int>{4, 17, 18, 61}}) {
      req.patches = sel;
      cpu.extractInto(req, c, np, ct);
      cuda->extractInto(req, g, np, ct);
      QCOMPARE(g.lastPatches, sel);
      QCOMPARE(g.modelTiles.size(), req.plan->patches.size());
      requireAgreement(compare(c, g));
    }
    QCOMPARE(int(g.patches.size()), 9); // the union of both selections
    QCOMPARE(int(c.patches.size()), 9);
    long tiles = 0;
    for (std::size_t i = 0; i < c.modelTiles.size(); ++i) {
      const Array2D<double>& a = c.modelTiles[i];
      const Array2D<double>& b = g.modelTiles[i];
      QCOMPARE(b.empty(), a.empty());
      if (a.empty()) continue;
      ++tiles;
      QCOMPARE(b.rows, a.rows);
      QCOMPARE(b.cols, a.cols);
      double mx = 0, md = 0;
      for (std::size_t k = 0; k < a.data.size(); ++k) {
        mx = std::max(mx, std::abs(a.data[k]));
        md = std::max(md, std::abs(a.data[k] - b.data[k]));
      }
      QVERIFY(mx > 0);
      QVERIFY2(md / mx < 1e-9, qPrintable(QString("tile %1: %2").arg(i).arg(md / mx)));
    }
    QCOMPARE(tiles, 9L);
  }

  // Two small requests in a row on a warm engine equal a fresh engine's, also when the
  // image changed in place between them (same object, same arrays): nothing of the
  // earlier image may be reused on the device.
  void warmSmallRequestsSeeImageChanges() {
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 100;
    so.nFiber = 25;
    const Simulation sim = simulate(realPsf, so);
    Image img = sim.image;
    ExtractionRequest req = request(realPsf, img, so.wave, 100, 25);
    attachPlan(req);
    req.accumulate = true;
    NullProgress np;
    CancelToken ct;
    const std::vector<int> sel{5, 6, 30};
    req.patches = sel;
    ExtractionResult warm;
    cuda->extractInto(req, warm, np, ct);
    {
      CudaEngine fresh;
      ExtractionResult f;
      fresh.extractInto(req, f, np, ct);
      requireAgreement(compare(f, warm));
    }
    // The same image object, its pixels changed where the patches look.
    for (double& v : img.pix.data) v = 1.5 * v + 3.0;
    cuda->extractInto(req, warm, np, ct);
    CudaEngine fresh;
    ExtractionResult f;
    fresh.extractInto(req, f, np, ct);
    requireAgreement(compare(f, warm));
    const ExtractionResult cpu = runCpu(req);
    requireAgreement(compare(cpu, warm));
    // And back through extract() with a patch list (rows-only upload, no tiles).
    req.accumulate = false;
    requireAgreement(compare(runCuda(req, &fresh), runCuda(req)));
  }

  void memoryBudgetIsKept() {
    // CudaEngineOptions::memoryBudgetBytes: a budget below the frame arrays (the CCD
    // image and its ivar alone are 2 x 130 MiB) is an error that names it; a 1 GiB
    // budget leaves room for a few dozen patches per batch: several batches per
    // stream, the engine's peak within the budget, the result that of the CPU engine.
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6800, 0.8);
    so.fiberMin = 0;
    so.nFiber = 50;
    so.seed = 5;
    const Simulation sim = simulate(realPsf, so);
    const ExtractionRequest req = request(realPsf, sim.image, so.wave, 0, 50);
    {
      CudaEngineOptions o;
      o.memoryBudgetBytes = std::size_t(64) << 20;
      CudaEngine tiny(o);
      try {
        runCuda(req, &tiny);
        QFAIL("a 64 MiB budget was accepted");
      } catch (const GpuError& e) {
        qInfo("%s", e.what());
        QVERIFY2(QString(e.what()).contains("budget 64 MiB"), e.what());
      }
    }
    CudaEngineOptions o;
    o.memoryBudgetBytes = std::size_t(1) << 30;
    CudaEngine budgeted(o);
    const ExtractionResult g = runCuda(req, &budgeted);
    const CudaMemoryPlan plan = budgeted.memoryPlans().at(0);
    qInfo("1 GiB: frame arrays %.0f MiB, %d streams x %d patches (%.1f MiB each), %.0f MiB, %d "
          "batches; peak %.0f MiB", plan.fixedBytes / 1048576.0, plan.streams, plan.batch,
          plan.perPatchBytes / 1048576.0, plan.batchBytes / 1048576.0, plan.batches,
          budgeted.peakDeviceBytes().at(0) / 1048576.0);
    QVERIFY(budgeted.peakDeviceBytes().at(0) <= o.memoryBudgetBytes);
    QVERIFY(plan.batch >= 1 && plan.batch < kCudaTargetBatch);
    QVERIFY(plan.batches >= 2 * plan.streams);
    QCOMPARE(plan.budgetBytes, o.memoryBudgetBytes);
    requireAgreement(compare(runCpu(req), g));
  }

  void severalDevicesSplitBundles() {
    // The multi-GPU path (bundles split across devices, each device's rows copied back
    // into one frame, the model images summed) on every visible GPU, and — so that
    // it runs on a one-GPU machine too — on GPU 0 listed twice (two device states,
    // two host threads, one card). Three bundles so the cut lands between bundles.
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6400, 6900, 0.8);
    so.fiberMin = 20;
    so.nFiber = 60;
    const Simulation sim = simulate(realPsf, so);
    const ExtractionRequest req = request(realPsf, sim.image, so.wave, 20, 60);
    const ExtractionResult c = runCpu(req);
    std::vector<int> all;
    for (const GpuInfo& g : listGpus()) all.push_back(g.device);
    for (const std::vector<int>& gpus : {std::vector<int>{0, 0}, all}) {
      CudaEngineOptions o;
      o.gpus = gpus;
      CudaEngine multi(o);
      const ExtractionResult g = runCuda(req, &multi);
      qInfo("%s: %zu patches", multi.name().c_str(), g.patches.size());
      QCOMPARE(g.patches.size(), c.patches.size());
      requireAgreement(compare(c, g));
    }
  }

  void nonSpdPatchesBehaveLikeCpu() {
    // An infinite weight on one pixel makes the normal equations of every patch whose
    // box holds it non-finite: Cholesky (or f) fails, the retry fails too, and both
    // engines flag the patches regularized and failed and leave their bins at zero.
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6200, 6500, 0.8);
    so.fiberMin = 0;
    so.nFiber = 25;
    Simulation sim = simulate(realPsf, so);
    const int yc = int(std::lround(realPsf.y(12, 6300))), xc = int(std::lround(realPsf.x(12, 6300)));
    sim.image.ivar(yc, xc) = std::numeric_limits<double>::infinity();
    const ExtractionRequest req = request(realPsf, sim.image, so.wave, 0, 25);
    const ExtractionResult c = runCpu(req), g = runCuda(req);
    int failed = 0;
    QCOMPARE(g.patches.size(), c.patches.size());
    for (std::size_t i = 0; i < c.patches.size(); ++i) {
      QCOMPARE(g.patches[i].regularized, c.patches[i].regularized);
      QCOMPARE(g.patches[i].failed, c.patches[i].failed);
      failed += c.patches[i].failed;
    }
    qInfo("%d failed patches", failed);
    QVERIFY(failed > 0);
    requireAgreement(compare(c, g));
  }

  // The kernel profile (ExtractionRequest::profileKernels, CUPTI) on a full r frame:
  // the frame is the same with it as without, kernels nest under their phases, and the
  // kernels and copies of each device phase add up to that phase's device time (from
  // CUDA events) within a few %: one stream, so no phase waits for another stream's
  // kernels, and what is left over is launch gaps and host work inside a phase.
  void kernelProfileMatchesPhases() {
    if (!gpu::KernelTracer::compiledIn()) QSKIP("this build has no CUPTI");
    SimulationOptions so; // the r grid, 500 fibers
    const Simulation sim = simulate(realPsf, so);
    ExtractionRequest req = request(realPsf, sim.image, so.wave, 0, 500, {}, false);
    for (int streams : {1, 2}) {
      CudaEngineOptions o;
      o.streams = streams;
      CudaEngine e(o);
      req.profileKernels = false;
      runCuda(req, &e); // warm
      std::vector<double> plain, traced;
      ExtractionResult a, b;
      for (int i = 0; i < 3; ++i) {
        req.profileKernels = false;
        a = runCuda(req, &e);
        plain.push_back(a.profile.wallNs * 1e-9);
        req.profileKernels = true;
        b = runCuda(req, &e);
        traced.push_back(b.profile.wallNs * 1e-9);
      }
      std::sort(plain.begin(), plain.end());
      std::sort(traced.begin(), traced.end());
      const Profile& p = b.profile;
      qInfo("%d stream(s): warm wall median of 3: %.4f s plain, %.4f s with the kernel profile (+%.1f%%); "
            "%zu device activities, clock shift %.1f us, largest trim %.1f us, %d outside every phase, "
            "%llu dropped", streams, plain[1], traced[1], 100 * (traced[1] / plain[1] - 1), p.kernels.size(),
            p.kernelTrace.clockShiftNs * 1e-3, p.kernelTrace.maxClampNs * 1e-3, p.kernelTrace.unattributed,
            (unsigned long long)p.kernelTrace.dropped);
      // The frame does not change.
      QVERIFY(a.profile.kernels.empty());
      double dmax = 0;
      for (std::size_t i = 0; i < a.flux.data.size(); ++i)
        dmax = std::max(dmax, std::abs(a.flux.data[i] - b.flux.data[i]) * std::sqrt(std::max(a.ivar.data[i], 0.0)));
      QVERIFY2(dmax < 1e-9, qPrintable(QString::number(dmax)));
      QVERIFY(p.kernelTrace.on);
      QCOMPARE(p.kernelTrace.dropped, uint64_t(0));
      QVERIFY(p.kernels.size() > 100);
      const std::string nest = checkNesting(p);
      QVERIFY2(nest.empty(), nest.c_str());
      // Every kernel ran inside a phase; record sanity.
      int kernelsOutside = 0;
      for (const ProfileRange& r : p.ranges) {
        if (r.kernel < 0) continue;
        const KernelRecord& k = p.kernels[r.kernel];
        QVERIFY(r.endNs >= r.startNs);
        if (k.kind == "kernel") {
          kernelsOutside += k.phase.empty();
          QVERIFY2(k.launch.grid[0] > 0 && k.launch.block[0] > 0 && k.launch.registers > 0, r.name.c_str());
        } else {
          QVERIFY2(k.bytes > 0, r.name.c_str());
        }
      }
      QCOMPARE(kernelsOutside, 0);
      // Per top-level device phase: its device time (depth-0 ranges on the stream lanes)
      // and the time of the activities under it.
      std::map<std::string, std::pair<double, double>> sums; // phase -> (phase s, activities s)
      for (const ProfileRange& r : p.ranges) {
        if (r.lane < 0 || p.lanes[r.lane].rfind("cuda:", 0) != 0) continue;
        if (r.kernel < 0 && r.depth == 0) sums[r.name].first += r.durationNs() * 1e-9;
        if (r.kernel >= 0 && !p.kernels[r.kernel].rootPhase.empty())
          sums[p.kernels[r.kernel].rootPhase].second += r.durationNs() * 1e-9;
      }
      // The copy phases move large host arrays through the pinned ring (gpu/staging.h):
      // their span is paced by the host's copies into and out of it, and the DMAs
      // under them cover only part of it, so they count apart (activities never more
      // than their phase); the whole-frame ratio is over the compute phases. So does
      // "spots" where the prefetch made the spot table: it is two phases of that name,
      // the prefetch lane's (the table's kernel; engine_prefetch.cpp) and the main
      // lane's, which waits for the table's event (engine_run_device.cpp), so its span
      // overlaps the other's kernel by however long the host took to get there (on an
      // H100 with the ninth round's code: 7.0 ms of phases for 5.2 ms of kernels, where
      // the eighth round's had 5.3 / 5.2).
      double phaseTotal = 0, actTotal = 0;
      qInfo("  %-18s %12s %14s %8s", "phase", "device ms", "activities ms", "ratio");
      for (const auto& [name, v] : sums) {
        qInfo("  %-18s %12.3f %14.3f %8.4f", name.c_str(), 1e3 * v.first, 1e3 * v.second,
              v.first > 0 ? v.second / v.first : 0.0);
        if (name == "H2D" || name == "D2H" || name == "plan corners" || name == "spots") {
          QVERIFY2(v.second <= 1.05 * v.first, name.c_str());
          continue;
        }
        phaseTotal += v.first;
        actTotal += v.second;
      }
      qInfo("  %-18s %12.3f %14.3f %8.4f", "all compute", 1e3 * phaseTotal, 1e3 * actTotal, actTotal / phaseTotal);
      int shown = 0;
      for (const KernelStats& k : p.kernelStats())
        if (shown++ < 25)
          qInfo("    %-16s %-48.48s %5d %9.3f ms %6.1f%%", k.phase.c_str(), k.name.c_str(), k.count,
                1e3 * k.totalS, 100 * k.share);
      if (streams != 1) continue; // two streams share the card: a phase waits for the other's kernels
      QVERIFY2(std::abs(actTotal / phaseTotal - 1) < 0.05,
               qPrintable(QString("activities %1 s vs phases %2 s").arg(actTotal).arg(phaseTotal)));
      for (const char* name : {"normal equations", "solve", "decorrelate", "chi2pix"}) {
        const auto it = sums.find(name);
        QVERIFY2(it != sums.end(), name);
        const double ratio = it->second.second / it->second.first;
        // A phase of many short launches loses the gaps between them: the solve on the
        // block band has ~38 launches a batch ~4 us apart in ~2.6 ms, up to ~6 %
        // (0.946 measured on an H100, docs/benchmarks.md version 14).
        const double tol = std::string(name) == "solve" ? 0.08 : 0.05;
        QVERIFY2(std::abs(ratio - 1) < tol, qPrintable(QString("%1: ratio %2").arg(name).arg(ratio)));
      }
    }
  }

  void fullFramePulls() {
    SimulationOptions so; // the r grid, 500 fibers
    const auto t0 = std::chrono::steady_clock::now();
    const Simulation sim = simulate(realPsf, so);
    const double simS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const ExtractionRequest req = request(realPsf, sim.image, so.wave, 0, 500, {}, false);
    const ExtractionResult g = runCuda(req);
    gpu::jacobiStats(true);
    const ExtractionResult g2 = runCuda(req); // warm
    const gpu::JacobiStats js = gpu::jacobiStats(true);
    qInfo("Jacobi: %llu blocks, %.2f sweeps on average, %llu at most", js.blocks,
          double(js.sweeps) / double(std::max(1ull, js.blocks)), js.maxSweeps);
    for (const PhaseStats& ps : g2.profile.phaseStats())
      qInfo("  %-18s %3d  %8.4f s", ps.name.c_str(), ps.count, ps.totalS);
    double s = 0, s2 = 0;
    long n = 0, nan = 0;
    for (int f = 0; f < g.nfiber; ++f)
      for (int i = 0; i < g.nwave; ++i) {
        for (double v : {g.flux(f, i), g.ivar(f, i), g.chi2pix(f, i)})
          if (!std::isfinite(v)) ++nan;
        for (int k = 0; k <= 2 * g.ndiag; ++k)
          if (!std::isfinite(g.resolution(f, k, i))) ++nan;
        if (i < 6 || i >= g.nwave - 6 || g.ivar(f, i) <= 0 || g.mask(f, i)) continue;
        const double p = (g.flux(f, i) - convolved(g, sim.truth.phot, f, i) / g.wave.dw) *
                         std::sqrt(g.ivar(f, i));
        s += p;
        s2 += p * p;
        ++n;
      }
    const double mean = s / n, sd = std::sqrt(s2 / n - mean * mean);
    qInfo("full frame (simulated in %.1f s): %ld bins, pulls mean %.5f std %.5f; CUDA wall %.3f s "
          "cold, %.3f s warm",
          simS, n, mean, sd, g.profile.wallNs * 1e-9, g2.profile.wallNs * 1e-9);
    QCOMPARE(nan, 0L);
    QVERIFY(n > 500L * 2000);
    QVERIFY2(std::abs(mean) < 0.01, qPrintable(QString::number(mean)));
    QVERIFY2(std::abs(sd - 1) < 0.02, qPrintable(QString::number(sd)));
    QCOMPARE(int(g.patches.size()), 100 * 47);
    // The default budget holds a full frame (CudaEngineOptions::memoryBudgetBytes).
    const CudaMemoryPlan mp = cuda->memoryPlans().at(0);
    qInfo("default budget: frame arrays %.0f MiB, %d streams x %d patches (%.1f MiB each), %.0f "
          "MiB, %d batches; peak %.2f GiB", mp.fixedBytes / 1048576.0, mp.streams, mp.batch,
          mp.perPatchBytes / 1048576.0, mp.batchBytes / 1048576.0, mp.batches,
          cuda->peakDeviceBytes().at(0) / 1073741824.0);
    QVERIFY(cuda->peakDeviceBytes().at(0) <= kCudaDefaultMemoryBudget);
    // One stream, so phases do not overlap: the per-phase device times of each
    // fiber-block eigensolver (docs/benchmarks.md).
    using E = CudaEngineOptions::Eigh;
    for (E eigh : {E::Tridiagonal, E::Cusolver, E::Jacobi, E::Bisect}) {
      const bool lib = eigh == E::Cusolver;
      CudaEngineOptions o;
      o.streams = 1;
      o.eigh = eigh;
      CudaEngine e(o);
      runCuda(req, &e);
      const ExtractionResult r = runCuda(req, &e);
      qInfo("one stream, %s: wall %.3f s",
            lib ? "cusolverDnXsyevBatched" : eigh == E::Jacobi ? "Jacobi kernel"
                  : eigh == E::Bisect ? "syevBatched (bisect)" : "syevBatched",
            r.profile.wallNs * 1e-9);
      for (const PhaseStats& ps : r.profile.phaseStats())
        qInfo("  %-18s %3d  %8.4f s", ps.name.c_str(), ps.count, ps.totalS);
      QVERIFY(e.peakDeviceBytes().at(0) > 0);
      qInfo("  peak device memory held by the engine: %.2f GiB", e.peakDeviceBytes()[0] / 1073741824.0);
    }
  }
};

QTEST_GUILESS_MAIN(TestCudaEngine)
#include "test_cuda_engine.moc"
