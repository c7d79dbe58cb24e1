// gpu::potriSelectedBlockBandedBatched and gpu::potrsBlockBandedBatched
// (gpu/batched_selected_inverse.h), after gpu::potrfBlockBandedBatched with compact
// diagonal-block inverses, against LAPACK (dpotrf, then dpotrs for the solution and
// for the whole inverse C = (L L^T)^-1) and against the CPU engine's
// BandedCholesky::selectedInverse, on random symmetric positive definite block-banded
// batches: the solution, every block of C inside the band from block column jmin on
// (diagonal blocks in D and in A, the blocks below them in A and their transposes
// above), the blocks left of jmin untouched, info for a matrix that is not positive
// definite and for a solution that is not finite.
#include "core/extract/banded_solver.h"
#include "core/extract/lapack.h"
#include "gpu/batched_cholesky.h"
#include "gpu/batched_selected_inverse.h"
#include "gpu/cuda_engine.h"
#include "banded_spd.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace spex;

namespace {

// The routines' GEMMs through cuBLAS (a handle) instead of the engine's own (null, the
// default path); the *ThroughCublas slot sets it.
bool g_cublas = false;
// Which selected inversion run() calls (gpu::SelectedInverseKernel; the *Steps slots set it).
gpu::SelectedInverseKernel g_kernel = gpu::SelectedInverseKernel::Fused;

using spextest::check;
using spextest::randomBanded;

struct Result {
  double solve = 0;     // max |x_gpu - x_lapack| / max |x_lapack|
  double lapack = 0;    // max over the band's blocks of |C_gpu - C_lapack| / max |C_lapack|
  double cpu = 0;       // the same against BandedCholesky::selectedInverse (lower triangles)
  long long asymmetric = 0; // entries of a diagonal block C_jj (D) that differ from their mirror
  long long copies = 0;     // entries of A's C blocks that differ from D or from their transposes
  long long leftTouched = 0; // entries of D left of jmin that changed
  std::vector<int> info;
};

// The GPU routines on a batch: factor (band wSolve), solve, selected inversion from
// block column jmin; matrix `bad` (when >= 0) made indefinite at column badColumn, and
// matrix `nanRhs` (when >= 0) given a NaN right-hand side.
Result run(int nblk, int nb, int w, int wSolve, int jmin, int batch, unsigned seed, int bad = -1,
           int badColumn = 0, int nanRhs = -1) {
  const int n = nblk * nb;
  const std::size_t nn = std::size_t(n) * n, bb = std::size_t(nb) * nb;
  std::vector<double> A = randomBanded(nblk, nb, w, batch, seed);
  if (bad >= 0) A[nn * bad + badColumn + std::size_t(badColumn) * n] *= -1.0;
  std::vector<double> y(std::size_t(n) * batch);
  std::mt19937_64 rng(seed + 7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (double& v : y) v = u(rng);
  if (nanRhs >= 0) y[std::size_t(nanRhs) * n + n / 2] = std::numeric_limits<double>::quiet_NaN();
  const long long sT = gpu::blockBandedScratch(nblk, nb), sD = (long long)nblk * nb * nb + 3; // padded
  double *dA = nullptr, *dD = nullptr, *dT = nullptr, *dY = nullptr, *dX = nullptr;
  int* dInfo = nullptr;
  check(cudaMalloc(&dA, A.size() * sizeof(double)), "cudaMalloc A");
  check(cudaMalloc(&dD, std::size_t(sD) * batch * sizeof(double)), "cudaMalloc D");
  check(cudaMalloc(&dT, std::size_t(sT) * batch * sizeof(double)), "cudaMalloc T");
  check(cudaMalloc(&dY, y.size() * sizeof(double)), "cudaMalloc y");
  check(cudaMalloc(&dX, y.size() * sizeof(double)), "cudaMalloc x");
  check(cudaMalloc(&dInfo, batch * sizeof(int)), "cudaMalloc info");
  check(cudaMemcpy(dA, A.data(), A.size() * sizeof(double), cudaMemcpyHostToDevice), "H2D A");
  check(cudaMemcpy(dY, y.data(), y.size() * sizeof(double), cudaMemcpyHostToDevice), "H2D y");
  check(cudaMemset(dD, 0xff, std::size_t(sD) * batch * sizeof(double)), "poison D"); // NaN
  check(cudaMemset(dT, 0xff, std::size_t(sT) * batch * sizeof(double)), "poison T");
  check(cudaMemset(dX, 0xff, y.size() * sizeof(double)), "poison x");
  cublasHandle_t h = nullptr; // null: the engine's own GEMMs (gpu/batched_gemm.h)
  if (g_cublas && cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) qFatal("cublasCreate");
  gpu::potrfBlockBandedBatched(h, nblk, nb, wSolve, dA, gpu::DiagInverses::compact(dD, nb, sD), dT, sT, dInfo,
                               batch, nullptr);
  std::vector<double> D0(std::size_t(sD) * batch);
  check(cudaMemcpy(D0.data(), dD, D0.size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H L_kk^-1");
  gpu::potrsBlockBandedBatched(nblk, nb, wSolve, dA, dD, sD, dY, dX, dInfo, batch, nullptr);
  gpu::potriSelectedBlockBandedBatched(h, nblk, nb, wSolve, jmin, dA, dD, sD, dT, sT, batch, nullptr, g_kernel);
  check(cudaDeviceSynchronize(), "selected inversion");
  if (h) cublasDestroy(h);
  std::vector<double> G(A.size()), Dg(D0.size()), x(y.size());
  Result r;
  r.info.resize(batch);
  check(cudaMemcpy(G.data(), dA, G.size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H A");
  check(cudaMemcpy(Dg.data(), dD, Dg.size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H D");
  check(cudaMemcpy(x.data(), dX, x.size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H x");
  check(cudaMemcpy(r.info.data(), dInfo, batch * sizeof(int), cudaMemcpyDeviceToHost), "D2H info");
  for (double* p : {dA, dD, dT, dY, dX}) cudaFree(p);
  cudaFree(dInfo);

  const BlockBand band{nblk, nb, std::min(w, nblk - 1)};
  BandedCholesky cpu;
  const int wS = std::min(wSolve, nblk - 1);
  std::vector<double> Ll(nn), C(nn), Lc(nn), Cc(nn, 0.0);
  for (int b = 0; b < batch; ++b) {
    const double* Ab = A.data() + nn * b;
    const double* Gb = G.data() + nn * b;
    const double* Db = Dg.data() + std::size_t(sD) * b;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) Ll[i + std::size_t(j) * n] = i >= j ? Ab[i + std::size_t(j) * n] : 0.0;
    const int info = lapack::potrf(n, Ll.data(), n);
    if (b == bad) {
      if (r.info[b] != info) qWarning("matrix %d: info %d, LAPACK %d", b, r.info[b], info);
      r.info[b] = r.info[b] == info ? -1000 - info : r.info[b]; // agrees with LAPACK
      continue;
    }
    if (info != 0) qFatal("LAPACK dpotrf failed on matrix %d", b);
    if (b == nanRhs) continue;
    // The solution.
    std::vector<double> xl(y.begin() + std::size_t(b) * n, y.begin() + std::size_t(b + 1) * n);
    lapack::potrs(n, 1, Ll.data(), n, xl.data(), n);
    double xm = 0, xd = 0;
    for (int i = 0; i < n; ++i) {
      xm = std::max(xm, std::abs(xl[i]));
      xd = std::max(xd, std::abs(x[std::size_t(b) * n + i] - xl[i]));
    }
    r.solve = std::max(r.solve, xd / xm);
    // C = (L L^T)^-1 whole by LAPACK, and the CPU engine's selected inversion.
    std::fill(C.begin(), C.end(), 0.0);
    for (int i = 0; i < n; ++i) C[i + std::size_t(i) * n] = 1.0;
    lapack::potrs(n, n, Ll.data(), n, C.data(), n);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) Lc[i + std::size_t(j) * n] = i >= j ? Ab[i + std::size_t(j) * n] : 0.0;
    if (BandedCholesky::factor(band, Lc.data(), n) != 0) qFatal("BandedCholesky::factor failed on matrix %d", b);
    cpu.selectedInverse(band, Lc.data(), n, Cc.data(), n, jmin);
    double cm = 0, dl = 0, dc = 0;
    for (double v : C) cm = std::max(cm, std::abs(v));
    for (int j = 0; j < nblk; ++j) {
      const double* Dj = Db + std::size_t(j) * bb;
      const double* D0j = D0.data() + std::size_t(sD) * b + std::size_t(j) * bb;
      if (j < jmin) {
        for (std::size_t k = 0; k < bb; ++k)
          if (!(Dj[k] == D0j[k])) ++r.leftTouched;
        continue;
      }
      for (int i = j; i <= std::min(nblk - 1, j + wS); ++i)
        for (int c = 0; c < nb; ++c)
          for (int rr = 0; rr < nb; ++rr) {
            const std::size_t gi = std::size_t(i) * nb + rr, gj = std::size_t(j) * nb + c;
            const double ref = C[gi + gj * n];
            const double low = Gb[gi + gj * n], up = Gb[gj + gi * n];
            dl = std::max(dl, std::abs(low - ref));
            if (i == j) {
              const double d = Dj[rr + std::size_t(c) * nb];
              dl = std::max(dl, std::abs(d - ref));
              if (!(d == Dj[c + std::size_t(rr) * nb])) ++r.asymmetric;
              if (!(low == d)) ++r.copies;
              if (rr >= c) dc = std::max(dc, std::abs(d - Cc[gi + gj * n]));
            } else {
              if (!(up == low)) ++r.copies;
              if (i - j <= band.w) dc = std::max(dc, std::abs(low - Cc[gi + gj * n])); // the CPU's band
            }
          }
    }
    r.lapack = std::max(r.lapack, dl / cm);
    r.cpu = std::max(r.cpu, dc / cm);
  }
  qInfo("nblk %d, nb %d, band %d solved as %d, jmin %d, batch %d: solve %.2e, C vs LAPACK %.2e, vs CPU %.2e, "
        "asymmetric %lld, copies %lld, left of jmin touched %lld",
        nblk, nb, w, wSolve, jmin, batch, r.solve, r.lapack, r.cpu, r.asymmetric, r.copies, r.leftTouched);
  return r;
}

// The fused kernel against the steps on the same factors: every entry of A and D after
// both (the blocks formed, and everything else untouched alike), as the largest
// difference over max |C_jj|; `fused` says whether the fused kernel took the shapes.
struct Pair {
  double worst = 0; // max |A_fused - A_steps|, |D_fused - D_steps| over max |C_jj|
  long long untouchedDiffer = 0; // entries neither path writes that differ
  bool fused = false;
};

Pair fusedAgainstSteps(int nblk, int nb, int w, int jmin, int batch, unsigned seed) {
  const int n = nblk * nb;
  const std::size_t nn = std::size_t(n) * n, bb = std::size_t(nb) * nb;
  const std::vector<double> A = randomBanded(nblk, nb, w, batch, seed);
  const long long sT = gpu::blockBandedScratch(nblk, nb), sD = (long long)nblk * nb * nb + 3;
  double *dA = nullptr, *dD = nullptr, *dT = nullptr, *dA2 = nullptr, *dD2 = nullptr;
  int* dInfo = nullptr;
  const std::size_t bytesA = A.size() * sizeof(double), bytesD = std::size_t(sD) * batch * sizeof(double);
  check(cudaMalloc(&dA, bytesA), "cudaMalloc A");
  check(cudaMalloc(&dA2, bytesA), "cudaMalloc A2");
  check(cudaMalloc(&dD, bytesD), "cudaMalloc D");
  check(cudaMalloc(&dD2, bytesD), "cudaMalloc D2");
  check(cudaMalloc(&dT, std::size_t(sT) * batch * sizeof(double)), "cudaMalloc T");
  check(cudaMalloc(&dInfo, batch * sizeof(int)), "cudaMalloc info");
  check(cudaMemcpy(dA, A.data(), bytesA, cudaMemcpyHostToDevice), "H2D A");
  check(cudaMemset(dD, 0xff, bytesD), "poison D");
  gpu::potrfBlockBandedBatched(nullptr, nblk, nb, w, dA, gpu::DiagInverses::compact(dD, nb, sD), dT, sT, dInfo,
                               batch, nullptr);
  check(cudaMemcpy(dA2, dA, bytesA, cudaMemcpyDeviceToDevice), "copy A");
  check(cudaMemcpy(dD2, dD, bytesD, cudaMemcpyDeviceToDevice), "copy D");
  gpu::potriSelectedBlockBandedBatched(nullptr, nblk, nb, w, jmin, dA, dD, sD, dT, sT, batch, nullptr,
                                       gpu::SelectedInverseKernel::Fused);
  gpu::potriSelectedBlockBandedBatched(nullptr, nblk, nb, w, jmin, dA2, dD2, sD, dT, sT, batch, nullptr,
                                       gpu::SelectedInverseKernel::Steps);
  check(cudaDeviceSynchronize(), "selected inversions");
  std::vector<double> Af(A.size()), As(A.size()), Df(std::size_t(sD) * batch), Ds(Df.size());
  check(cudaMemcpy(Af.data(), dA, bytesA, cudaMemcpyDeviceToHost), "D2H A");
  check(cudaMemcpy(As.data(), dA2, bytesA, cudaMemcpyDeviceToHost), "D2H A2");
  check(cudaMemcpy(Df.data(), dD, bytesD, cudaMemcpyDeviceToHost), "D2H D");
  check(cudaMemcpy(Ds.data(), dD2, bytesD, cudaMemcpyDeviceToHost), "D2H D2");
  for (double* p : {dA, dA2, dD, dD2, dT}) cudaFree(p);
  cudaFree(dInfo);
  Pair r;
  r.fused = gpu::fusedSelectedInverseTakes(nblk, nb, w);
  const int wS = std::min(w, nblk - 1);
  double cm = 0;
  for (int b = 0; b < batch; ++b)
    for (int j = jmin; j < nblk; ++j)
      for (std::size_t k = 0; k < bb; ++k)
        cm = std::max(cm, std::abs(Ds[std::size_t(sD) * b + std::size_t(j) * bb + k]));
  const auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  for (int b = 0; b < batch; ++b)
    for (int c = 0; c < n; ++c)
      for (int i = 0; i < n; ++i) {
        const std::size_t k = nn * b + i + std::size_t(c) * n;
        const int bi = i / nb, bc = c / nb;
        const bool formed = std::min(bi, bc) >= jmin && std::abs(bi - bc) <= wS;
        if (formed)
          r.worst = std::max(r.worst, std::abs(Af[k] - As[k]) / cm);
        else if (!same(Af[k], As[k]))
          ++r.untouchedDiffer;
      }
  for (std::size_t k = 0; k < Df.size(); ++k) {
    const long long j = (long long)(k % std::size_t(sD)) / (long long)bb;
    if (j >= jmin && j < nblk)
      r.worst = std::max(r.worst, std::abs(Df[k] - Ds[k]) / cm);
    else if (!same(Df[k], Ds[k]))
      ++r.untouchedDiffer;
  }
  qInfo("nblk %d, nb %d, w %d, jmin %d, batch %d (%s): fused vs steps %.2e of max |C_jj|, untouched entries "
        "differing %lld",
        nblk, nb, w, jmin, batch, r.fused ? "fused kernel" : "steps both", r.worst, r.untouchedDiffer);
  return r;
}

QString fail(const Result& r) {
  return QString("solve %1, lapack %2, cpu %3, asymmetric %4, copies %5, left %6")
      .arg(r.solve)
      .arg(r.lapack)
      .arg(r.cpu)
      .arg(r.asymmetric)
      .arg(r.copies)
      .arg(r.leftTouched);
}

bool good(const Result& r) {
  // Diagonally dominant matrices (condition a few units): rounding of n = 518 sums is
  // ~1e-15; 1e-12 leaves room and still fails a misplaced block by 10 orders.
  return r.solve < 1e-12 && r.lapack < 1e-12 && r.cpu < 1e-12 && r.asymmetric == 0 && r.copies == 0 &&
         r.leftTouched == 0;
}

} // namespace

class TestBatchedSelectedInverse : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() {
    std::string why;
    if (!cudaAvailable(&why)) QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(why)));
    lapack::singleThreadedBlas();
  }

  void engineShapeMatchesLapack() {
    // The engine's patches: 7 fibers of 74 bins coupled 2 apart, on the band and
    // densely, from the first block column and from the first kept one.
    for (int wSolve : {2, 6})
      for (int jmin : {0, 1, 2}) {
        const Result r = run(7, 74, 2, wSolve, jmin, 24, 1 + jmin);
        QVERIFY2(good(r), qPrintable(fail(r)));
        for (int i : r.info) QCOMPARE(i, 0);
      }
  }

  void engineShapeSteps() {
    // The A side of SPEXLAB_CUDA_SELINV=steps: the GEMMs and the mirror kernel by block column.
    g_kernel = gpu::SelectedInverseKernel::Steps;
    for (int jmin : {0, 2}) {
      const Result r = run(7, 74, 2, 2, jmin, 24, 1 + jmin);
      QVERIFY2(good(r), qPrintable(fail(r)));
    }
    g_kernel = gpu::SelectedInverseKernel::Fused;
  }

  void fusedMatchesSteps() {
    // Both paths on the same factors. The engine's shape (and more matrices than an SM
    // count, so blocks run more than one matrix only past 65 535), the largest shapes the
    // fused kernel takes (nb 80, w nb 160), block sizes that are not multiples of 8 or 16,
    // a single block, w = 0; the shapes it does not take (nb 81, w nb > 160) run the steps
    // both times. Same products, C_jj's sum in another order: rounding of k <= 160 terms
    // (~1e-15 of max |C_jj|); 1e-13 still fails a misplaced or missing fragment by orders.
    struct Case { int nblk, nb, w, jmin, batch; bool fused; };
    for (const Case c : {Case{7, 74, 2, 0, 140, true}, Case{7, 74, 2, 3, 40, true}, Case{7, 74, 1, 0, 20, true},
                         Case{5, 80, 2, 0, 12, true}, Case{4, 53, 3, 0, 10, true}, Case{6, 13, 9, 1, 9, true},
                         Case{1, 20, 0, 0, 5, true}, Case{5, 16, 0, 0, 5, true}, Case{3, 74, 2, 0, 6, true},
                         Case{4, 81, 1, 0, 4, false}, Case{7, 74, 3, 0, 4, false}}) {
      const Pair p = fusedAgainstSteps(c.nblk, c.nb, c.w, c.jmin, c.batch, 500 + c.nb + c.w);
      const QString what = QString("nblk %1 nb %2 w %3 jmin %4: worst %5, untouched differing %6")
                               .arg(c.nblk).arg(c.nb).arg(c.w).arg(c.jmin).arg(p.worst).arg(p.untouchedDiffer);
      QCOMPARE(p.fused, c.fused);
      QVERIFY2(p.worst < 1e-13, qPrintable(what));
      QCOMPARE(p.untouchedDiffer, 0LL);
      if (!c.fused) QVERIFY2(p.worst == 0, qPrintable(what)); // the steps both times
    }
  }

  void everyBandwidthSteps() {
    g_kernel = gpu::SelectedInverseKernel::Steps;
    everyBandwidth();
    g_kernel = gpu::SelectedInverseKernel::Fused;
  }

  void engineShapeThroughCublas() {
    // The A side of SPEXLAB_CUDA_GEMM=cublas: the same routines with cuBLAS's GEMMs.
    g_cublas = true;
    const Result r = run(7, 74, 2, 2, 0, 24, 1);
    g_cublas = false;
    QVERIFY2(good(r), qPrintable(fail(r)));
  }

  void everyBandwidth() {
    // Bands from block-diagonal to dense, block sizes around the warp width, a single
    // block, a band wider than the matrix, jmin past the last block (nothing formed).
    struct Case { int nblk, nb, w, jmin; };
    for (const Case c : {Case{5, 16, 0, 0}, Case{5, 16, 1, 1}, Case{6, 33, 3, 0}, Case{4, 31, 3, 2},
                         Case{1, 20, 0, 0}, Case{3, 8, 7, 0}, Case{4, 40, 1, 4}}) {
      const Result r = run(c.nblk, c.nb, c.w, c.w, c.jmin, 9, 100 + c.nblk * 10 + c.w);
      QVERIFY2(good(r), qPrintable(QString("nblk %1 nb %2 w %3 jmin %4: ").arg(c.nblk).arg(c.nb).arg(c.w).arg(c.jmin) +
                                   fail(r)));
      for (int i : r.info) QCOMPARE(i, 0);
    }
  }

  void failuresAreFlagged() {
    // Matrix 3 of 8 is not positive definite (its info stays LAPACK's: the solve and the
    // inversion do not touch it), matrix 5 has a NaN right-hand side (info -1); the
    // others are solved and inverted as usual.
    const Result r = run(5, 20, 2, 2, 0, 8, 7, 3, 2 * 20 + 5, 5);
    for (int b = 0; b < 8; ++b) {
      if (b == 3)
        QVERIFY2(r.info[b] <= -1000, qPrintable(QString("info %1").arg(r.info[b]))); // agreed with LAPACK
      else if (b == 5)
        QCOMPARE(r.info[b], -1);
      else
        QCOMPARE(r.info[b], 0);
    }
    QVERIFY2(good(r), qPrintable(fail(r)));
  }

  void badArgumentsAreErrors() {
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) qFatal("cublasCreate");
    double* p = nullptr;
    check(cudaMalloc(&p, 1024 * sizeof(double)), "cudaMalloc");
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::potriSelectedBlockBandedBatched(h, 0, 4, 0, 0, p, p, 16, p, 16, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::potriSelectedBlockBandedBatched(h, 2, 4, -1, 0, p, p, 32, p, 16, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::potriSelectedBlockBandedBatched(h, 2, 4, 1, -1, p, p, 32, p, 16, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::potriSelectedBlockBandedBatched(h, 2, 4, 1, 0, p, p, 31, p, 16, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::potriSelectedBlockBandedBatched(h, 3, 4, 1, 0, p, p, 48, p, 31, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::potrsBlockBandedBatched(2, 4, 1, p, p, 31, p, p, nullptr, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::potrsBlockBandedBatched(2, 4, 1, nullptr, p, 32, p, p, nullptr, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception,
                             gpu::potrfBlockBandedBatched(h, 2, 4, 1, p, gpu::DiagInverses::compact(p, 4, 31), p, 16,
                                                          reinterpret_cast<int*>(p), 1, nullptr));
    cudaFree(p);
    cublasDestroy(h);
  }
};

QTEST_GUILESS_MAIN(TestBatchedSelectedInverse)
#include "test_batched_selected_inverse.moc"
