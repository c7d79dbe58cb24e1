// gpu::potrfBlockBandedBatched and gpu::trtriBlockBandedBatched (gpu/batched_cholesky.h)
// alone against LAPACK's dpotrf and dtrtri (OpenBLAS) on random symmetric positive
// definite block-banded batches: the factor, its inverse, the zeros outside the band,
// and info for a matrix that is not positive definite.
#include "core/extract/lapack.h"
#include "gpu/batched_cholesky.h"
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

using spextest::check;
using spextest::randomBanded;

struct Result {
  double factor = 0;  // max |L_gpu - L_lapack| / max |L_lapack|
  double inverse = 0; // max |X_gpu - X_lapack| / max |X_lapack|
  long long outsideBand = 0; // non-zero entries of L outside the band
  std::vector<int> info;
};

// Runs both routines on a batch (info of matrix `bad`, when >= 0, forced by a
// negative diagonal entry at column badColumn) and compares with LAPACK.
Result run(int nblk, int nb, int w, int wSolve, int batch, unsigned seed, int bad = -1, int badColumn = 0,
           gpu::CholeskyKernel kernel = gpu::CholeskyKernel::tiled, std::vector<double>* factor = nullptr) {
  const int n = nblk * nb;
  std::vector<double> A = randomBanded(nblk, nb, w, batch, seed);
  if (bad >= 0) A[std::size_t(n) * n * bad + badColumn + std::size_t(badColumn) * n] *= -1.0;
  const long long sT = gpu::blockBandedScratch(nblk, nb);
  double *dA = nullptr, *dX = nullptr, *dT = nullptr;
  int* dInfo = nullptr;
  check(cudaMalloc(&dA, A.size() * sizeof(double)), "cudaMalloc A");
  check(cudaMalloc(&dX, A.size() * sizeof(double)), "cudaMalloc X");
  check(cudaMalloc(&dT, std::size_t(sT) * batch * sizeof(double)), "cudaMalloc T");
  check(cudaMalloc(&dInfo, batch * sizeof(int)), "cudaMalloc info");
  check(cudaMemcpy(dA, A.data(), A.size() * sizeof(double), cudaMemcpyHostToDevice), "H2D");
  check(cudaMemset(dX, 0, A.size() * sizeof(double)), "zero X"); // its upper blocks must be zero
  check(cudaMemset(dT, 0xff, std::size_t(sT) * batch * sizeof(double)), "poison T");
  check(cudaMemset(dInfo, 0x7f, batch * sizeof(int)), "poison info");
  cublasHandle_t h = nullptr; // null: the engine's own GEMMs (gpu/batched_gemm.h)
  if (g_cublas && cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) qFatal("cublasCreate");
  gpu::potrfBlockBandedBatched(h, nblk, nb, wSolve, dA, dX, dT, sT, dInfo, batch, nullptr, {}, kernel);
  gpu::trtriBlockBandedBatched(h, nblk, nb, wSolve, dA, dX, dT, sT, batch, nullptr);
  check(cudaDeviceSynchronize(), "block-banded Cholesky");
  if (h) cublasDestroy(h);
  std::vector<double> L(A.size()), X(A.size());
  Result r;
  r.info.resize(batch);
  check(cudaMemcpy(L.data(), dA, L.size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H L");
  check(cudaMemcpy(X.data(), dX, X.size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H X");
  check(cudaMemcpy(r.info.data(), dInfo, batch * sizeof(int), cudaMemcpyDeviceToHost), "D2H info");
  cudaFree(dA);
  cudaFree(dX);
  cudaFree(dT);
  cudaFree(dInfo);
  if (factor) *factor = L;

  std::vector<double> Ll(std::size_t(n) * n);
  for (int b = 0; b < batch; ++b) {
    const std::size_t o = std::size_t(n) * n * b;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) Ll[i + std::size_t(j) * n] = i >= j ? A[o + i + std::size_t(j) * n] : 0.0;
    const int info = lapack::potrf(n, Ll.data(), n);
    if (b == bad) {
      if (r.info[b] != info) qWarning("matrix %d: info %d, LAPACK %d", b, r.info[b], info);
      r.info[b] = r.info[b] == info ? -info : r.info[b]; // -info: agrees with LAPACK
      continue;
    }
    if (info != 0) qFatal("LAPACK dpotrf failed on matrix %d", b);
    double lmax = 0, ld = 0;
    for (int j = 0; j < n; ++j)
      for (int i = j; i < n; ++i) {
        const double g = L[o + i + std::size_t(j) * n], l = Ll[i + std::size_t(j) * n];
        lmax = std::max(lmax, std::abs(l));
        ld = std::max(ld, std::abs(g - l));
        if (i / nb - j / nb > w && g != 0.0) ++r.outsideBand;
      }
    r.factor = std::max(r.factor, ld / lmax);
    if (lapack::trtri(n, Ll.data(), n) != 0) qFatal("LAPACK dtrtri failed on matrix %d", b);
    double xmax = 0, xd = 0;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) {
        const double g = X[o + i + std::size_t(j) * n], l = i >= j ? Ll[i + std::size_t(j) * n] : 0.0;
        xmax = std::max(xmax, std::abs(l));
        xd = std::max(xd, std::abs(g - l));
      }
    r.inverse = std::max(r.inverse, xd / xmax);
  }
  qInfo("%s: nblk %d, nb %d, band %d solved as %d, batch %d: factor %.2e, inverse %.2e, outside the band %lld",
        kernel == gpu::CholeskyKernel::tiled   ? "tiled"
        : kernel == gpu::CholeskyKernel::fused ? "fused"
                                               : "steps",
        nblk, nb, w, wSolve, batch, r.factor, r.inverse,
        r.outsideBand);
  return r;
}

} // namespace

class TestBatchedCholesky : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() {
    std::string why;
    if (!cudaAvailable(&why)) QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(why)));
    lapack::singleThreadedBlas();
  }

  void engineShapeMatchesLapack() {
    // The engine's patches: 7 fibers of 74 bins, fibers coupled 2 apart, solved on
    // the band and densely.
    for (int wSolve : {2, 6}) {
      const Result r = run(7, 74, 2, wSolve, 40, 1);
      QVERIFY2(r.factor < 1e-12, qPrintable(QString::number(r.factor)));
      QVERIFY2(r.inverse < 1e-12, qPrintable(QString::number(r.inverse)));
      QCOMPARE(r.outsideBand, 0LL);
      for (int i : r.info) QCOMPARE(i, 0);
    }
  }

  void engineShapeThroughCublas() {
    // The A side of SPEXLAB_CUDA_GEMM=cublas: the same routines with cuBLAS's GEMMs.
    g_cublas = true;
    const Result r = run(7, 74, 2, 2, 40, 1);
    g_cublas = false;
    QVERIFY2(r.factor < 1e-12 && r.inverse < 1e-12, qPrintable(QString::number(r.factor)));
    for (int i : r.info) QCOMPARE(i, 0);
  }

  void everyBandwidth() {
    // Bands from block-diagonal to dense, block sizes around the warp width, a single
    // block, and a band wider than the matrix.
    struct Case { int nblk, nb, w; };
    for (const Case c : {Case{5, 16, 0}, Case{5, 16, 1}, Case{6, 33, 3}, Case{4, 31, 3}, Case{1, 20, 0},
                         Case{3, 8, 7}}) {
      const Result r = run(c.nblk, c.nb, c.w, c.w, 12, 100 + c.nblk * 10 + c.w);
      QVERIFY2(r.factor < 1e-12 && r.inverse < 1e-12 && r.outsideBand == 0,
               qPrintable(QString("nblk %1 nb %2 w %3").arg(c.nblk).arg(c.nb).arg(c.w)));
      for (int i : r.info) QCOMPARE(i, 0);
    }
  }

  void fusedAndStepsAgree() {
    // The one-launch block columns (CholeskyKernel::tiled and ::fused) against the
    // four launches and LAPACK: the engine's shape, block sizes at the register tile's
    // edge (80: fused and tiled, five full tiles; 81 and 90 run as steps), tiles cut
    // short (74 = 4 x 16 + 10, 37, 23, 17 = 16 + 1, 15 and 1: one partial tile), a
    // panel shorter than a block (the band cut by the matrix's end), block-diagonal
    // and dense. Each must match LAPACK to 1e-12 of max|L| (backward-stable Cholesky of
    // matrices with condition ~10, scaled by 10^±3), and the others to the same.
    struct Case { int nblk, nb, w, wSolve; };
    for (const Case c : {Case{7, 74, 2, 2}, Case{7, 74, 2, 6}, Case{3, 80, 2, 2}, Case{3, 81, 1, 1},
                         Case{2, 90, 1, 1}, Case{4, 37, 0, 0}, Case{5, 23, 4, 4}, Case{3, 17, 1, 1},
                         Case{4, 15, 2, 2}, Case{2, 1, 1, 1}}) {
      std::vector<double> Lt, Lf, Ls;
      const Result t = run(c.nblk, c.nb, c.w, c.wSolve, 20, 900 + c.nb, -1, 0, gpu::CholeskyKernel::tiled, &Lt);
      const Result f = run(c.nblk, c.nb, c.w, c.wSolve, 20, 900 + c.nb, -1, 0, gpu::CholeskyKernel::fused, &Lf);
      const Result s = run(c.nblk, c.nb, c.w, c.wSolve, 20, 900 + c.nb, -1, 0, gpu::CholeskyKernel::steps, &Ls);
      const QString what = QString("nblk %1 nb %2 w %3 as %4").arg(c.nblk).arg(c.nb).arg(c.w).arg(c.wSolve);
      QVERIFY2(t.factor < 1e-12 && t.inverse < 1e-12 && t.outsideBand == 0, qPrintable("tiled " + what));
      QVERIFY2(f.factor < 1e-12 && f.inverse < 1e-12 && f.outsideBand == 0, qPrintable("fused " + what));
      QVERIFY2(s.factor < 1e-12 && s.inverse < 1e-12 && s.outsideBand == 0, qPrintable("steps " + what));
      for (int i : t.info) QCOMPARE(i, 0);
      for (int i : f.info) QCOMPARE(i, 0);
      const int n = c.nblk * c.nb;
      for (const auto* other : {&Lt, &Lf}) {
        double dmax = 0, lmax = 0;
        for (std::size_t q0 = 0; q0 < Ls.size(); ++q0) {
          const std::size_t q = q0 % (std::size_t(n) * n);
          if (q % n < q / n) continue; // upper triangle: not part of the result
          dmax = std::max(dmax, std::abs((*other)[q0] - Ls[q0]));
          lmax = std::max(lmax, std::abs(Ls[q0]));
        }
        QVERIFY2(dmax <= 1e-12 * lmax, qPrintable(what + QString(": %1 vs steps %2")
                                                             .arg(other == &Lt ? "tiled" : "fused")
                                                             .arg(dmax / lmax)));
      }
    }
  }

  void notPositiveDefiniteFusedAndSteps() {
    // The same non-SPD matrix through every kernel: LAPACK's info from each, at a
    // pivot in the first block (the first tile) and in a later one (its second tile).
    for (auto kernel : {gpu::CholeskyKernel::tiled, gpu::CholeskyKernel::fused, gpu::CholeskyKernel::steps})
      for (int col : {3, 2 * 30 + 17}) {
        const Result r = run(4, 30, 1, 1, 6, 11, 2, col, kernel);
        for (int b = 0; b < 6; ++b) {
          if (b == 2)
            QVERIFY2(r.info[b] < 0, qPrintable(QString("column %1: info %2").arg(col).arg(r.info[b])));
          else
            QCOMPARE(r.info[b], 0);
        }
      }
  }

  void notPositiveDefiniteReportsLapacksInfo() {
    // Matrix 3 of 8 has a negative diagonal entry in block 2: info is LAPACK's (the
    // first non-positive pivot), the others factor as usual.
    const Result r = run(5, 20, 2, 2, 8, 7, 3, 2 * 20 + 5);
    for (int b = 0; b < 8; ++b) {
      if (b == 3)
        QVERIFY2(r.info[b] < 0, qPrintable(QString("info %1").arg(r.info[b]))); // agreed with LAPACK
      else
        QCOMPARE(r.info[b], 0);
    }
    QVERIFY(r.factor < 1e-12 && r.inverse < 1e-12);
  }

  void badArgumentsAreErrors() {
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) qFatal("cublasCreate");
    double* p = nullptr;
    int* info = nullptr;
    check(cudaMalloc(&p, 1024 * sizeof(double)), "cudaMalloc");
    check(cudaMalloc(&info, sizeof(int)), "cudaMalloc");
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::potrfBlockBandedBatched(h, 0, 4, 0, p, p, p, 16, info, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::potrfBlockBandedBatched(h, 2, 4, -1, p, p, p, 16, info, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::potrfBlockBandedBatched(h, 3, 4, 1, p, p, p, 31, info, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::potrfBlockBandedBatched(h, 2, 4, 1, p, p, p, 16, nullptr, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::trtriBlockBandedBatched(h, 2, 4, 1, nullptr, p, p, 16, 1, nullptr));
    cudaFree(p);
    cudaFree(info);
    cublasDestroy(h);
  }
};

QTEST_GUILESS_MAIN(TestBatchedCholesky)
#include "test_batched_cholesky.moc"
