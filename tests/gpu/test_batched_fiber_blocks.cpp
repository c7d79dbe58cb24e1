// gpu::fiberBlocksBatched (gpu/batched_fiber_blocks.h) alone against a plain host
// product on random lower-triangular batches: the blocks asked for equal
// X(s nb :, s)^T X(s nb :, s), the others are left as they were, X's blocks above the
// diagonal blocks are never read (poisoned with NaN), and bad arguments are errors.
#include "gpu/batched_fiber_blocks.h"
#include "gpu/cuda_engine.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace spex;

namespace {

// The routines' GEMMs through cuBLAS (a handle) instead of the engine's own (null, the
// default path); the *ThroughCublas slot sets it.
bool g_cublas = false;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) qFatal("%s: %s", what, cudaGetErrorString(e));
}

struct Result {
  double rel = 0;           // max |C_gpu - C_host| / max |C_host| over the blocks asked for
  long long untouched = 0;  // entries of the other blocks still holding the poison
  long long others = 0;     // entries of the other blocks
  long long nonFinite = 0;  // NaN/Inf in the blocks asked for
};

Result run(int nblk, int nb, int lo, int hi, int batch, unsigned seed) {
  const int n = nblk * nb;
  const std::size_t nn = std::size_t(n) * n;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> X(nn * batch);
  for (int b = 0; b < batch; ++b) {
    const double scale = std::pow(10.0, 3.0 * u(rng));
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i)
        X[b * nn + i + std::size_t(j) * n] =
            i >= j ? scale * (u(rng) + (i == j ? 2.0 : 0.0))
            : i / nb == j / nb ? 0.0 // inside a diagonal block: read, must be zero
                               : std::numeric_limits<double>::quiet_NaN(); // above: never read
  }
  const long long strideC = (long long)nblk * nb * nb + 7; // a stride wider than the blocks
  const double poison = -12345.678;
  std::vector<double> C(std::size_t(strideC) * batch, poison);
  double *dX = nullptr, *dC = nullptr;
  check(cudaMalloc(&dX, X.size() * sizeof(double)), "cudaMalloc X");
  check(cudaMalloc(&dC, C.size() * sizeof(double)), "cudaMalloc C");
  check(cudaMemcpy(dX, X.data(), X.size() * sizeof(double), cudaMemcpyHostToDevice), "H2D X");
  check(cudaMemcpy(dC, C.data(), C.size() * sizeof(double), cudaMemcpyHostToDevice), "H2D C");
  cublasHandle_t h = nullptr; // null: the engine's own GEMMs (gpu/batched_gemm.h)
  if (g_cublas && cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) qFatal("cublasCreate");
  gpu::fiberBlocksBatched(h, nblk, nb, lo, hi, dX, dC, strideC, batch, nullptr);
  check(cudaDeviceSynchronize(), "fiberBlocksBatched");
  if (h) cublasDestroy(h);
  check(cudaMemcpy(C.data(), dC, C.size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H C");
  cudaFree(dX);
  cudaFree(dC);

  Result r;
  double cmax = 0, dmax = 0;
  for (int b = 0; b < batch; ++b) {
    const double* Xb = X.data() + b * nn;
    const double* Cb = C.data() + std::size_t(strideC) * b;
    for (int s = 0; s < nblk; ++s)
      for (int q = 0; q < nb; ++q)
        for (int p = 0; p < nb; ++p) {
          const double g = Cb[std::size_t(s) * nb * nb + p + std::size_t(q) * nb];
          if (s < lo || s >= hi) {
            ++r.others;
            r.untouched += g == poison;
            continue;
          }
          // C_s(p, q) = sum over rows i >= s nb of X(i, s nb + p) X(i, s nb + q), X lower.
          const int cp = s * nb + p, cq = s * nb + q;
          double ref = 0;
          for (int i = std::max(cp, cq); i < n; ++i) ref += Xb[i + std::size_t(cp) * n] * Xb[i + std::size_t(cq) * n];
          if (!std::isfinite(g)) ++r.nonFinite;
          cmax = std::max(cmax, std::abs(ref));
          dmax = std::max(dmax, std::abs(g - ref));
        }
    for (int k = 0; k < 7; ++k) r.untouched += Cb[std::size_t(nblk) * nb * nb + k] == poison, ++r.others;
  }
  r.rel = cmax > 0 ? dmax / cmax : 0;
  qInfo("nblk %d, nb %d, blocks [%d, %d), batch %d: max relative difference %.2e", nblk, nb, lo, hi,
        batch, r.rel);
  return r;
}

} // namespace

class TestBatchedFiberBlocks : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() {
    std::string why;
    if (!cudaAvailable(&why)) QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(why)));
  }

  void matchesHostProduct_data() {
    QTest::addColumn<int>("nblk");
    QTest::addColumn<int>("nb");
    QTest::addColumn<int>("lo");
    QTest::addColumn<int>("hi");
    QTest::addColumn<int>("batch");
    QTest::newRow("engine, kept blocks 1..5") << 7 << 74 << 1 << 6 << 6;
    QTest::newRow("engine, all blocks") << 7 << 74 << 0 << 7 << 3;
    QTest::newRow("bundle edge, blocks 0..4") << 7 << 74 << 0 << 5 << 2;
    QTest::newRow("one block") << 1 << 20 << 0 << 1 << 5;
    QTest::newRow("odd sizes, last block") << 4 << 31 << 3 << 4 << 9;
  }
  void matchesHostProduct() {
    QFETCH(int, nblk);
    QFETCH(int, nb);
    QFETCH(int, lo);
    QFETCH(int, hi);
    QFETCH(int, batch);
    const Result r = run(nblk, nb, lo, hi, batch, unsigned(nblk * 1000 + nb * 10 + lo));
    // fp64 sums of up to n products of O(1) values: rounding ~ n eps of the largest entry.
    QVERIFY2(r.rel < 1e-13, qPrintable(QString::number(r.rel)));
    QCOMPARE(r.nonFinite, 0LL);
    QCOMPARE(r.untouched, r.others);
  }

  void engineShapeThroughCublas() {
    // The A side of SPEXLAB_CUDA_GEMM=cublas: the same routine with cuBLAS's GEMMs.
    g_cublas = true;
    const Result r = run(7, 74, 0, 7, 3, 7074);
    g_cublas = false;
    QVERIFY2(r.rel < 1e-13, qPrintable(QString::number(r.rel)));
    QCOMPARE(r.untouched, r.others);
  }

  void emptyRangeWritesNothing() {
    const Result r = run(3, 8, 2, 2, 4, 3);
    QCOMPARE(r.untouched, r.others);
  }

  void badArgumentsAreErrors() {
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) qFatal("cublasCreate");
    double* p = nullptr;
    check(cudaMalloc(&p, 1024 * sizeof(double)), "cudaMalloc");
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::fiberBlocksBatched(h, 0, 4, 0, 0, p, p, 16, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::fiberBlocksBatched(h, 2, 4, 0, 3, p, p, 32, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::fiberBlocksBatched(h, 2, 4, -1, 1, p, p, 32, 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::fiberBlocksBatched(h, 2, 4, 0, 2, p, p, 31, 1, nullptr));
    cudaFree(p);
    cublasDestroy(h);
  }
};

QTEST_GUILESS_MAIN(TestBatchedFiberBlocks)
#include "test_batched_fiber_blocks.moc"
