// gpu::gemmStridedBatched (gpu/batched_gemm.h, the engine's fp64 tensor-core GEMM)
// alone against a host product in long double on random batches: every shape and
// transpose the engine calls (the Cholesky's panel and trailing update, the selected
// inversion's four products, the fiber blocks, L^-1's block rows, noise mode's Q), odd
// sizes around the 80 x 80 tile and the 16-deep k chunk, leading dimensions and batch
// strides wider than the matrices (the gaps hold NaN: never read) and a shared B
// (stride 0), alpha = 0 (A and B not read), beta = 0 (C not read: NaN there must not
// spread), k = 0, and a batch past the grid's 65 535. Each entry must lie within the
// fp64 rounding bound of a k-term dot product, |C - C_ref| <= (k + 4) u (|alpha| sum
// |a||b| + |beta c|), u = 2^-53, and every entry of C outside the m x n matrices must
// keep its poison.
#include "core/errors.h"
#include "gpu/batched_gemm.h"
#include "gpu/cuda_engine.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace spex;
using gpu::Trans;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) qFatal("%s: %s", what, cudaGetErrorString(e));
}

struct Case {
  const char* name;
  Trans ta, tb;
  int m, n, k;
  double alpha, beta;
  int batch;
  int padA = 0, padB = 0, padC = 0;   // leading dimension beyond the rows stored
  long long gapA = 0, gapB = 0, gapC = 0; // batch stride beyond the matrix
  bool sharedB = false;                // strideB = 0
};

struct Outcome {
  double worst = 0;          // max |C - C_ref| / bound over the m x n entries
  long long outside = 0;     // entries of C outside the matrices
  long long outsideKept = 0; // of them still holding the poison
  long long nonFinite = 0;
};

Outcome run(const Case& c, unsigned seed) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double poison = -7777.25;
  const int rowsA = c.ta == Trans::N ? c.m : c.k, colsA = c.ta == Trans::N ? c.k : c.m;
  const int rowsB = c.tb == Trans::N ? c.k : c.n, colsB = c.tb == Trans::N ? c.n : c.k;
  const int lda = std::max(1, rowsA + c.padA), ldb = std::max(1, rowsB + c.padB), ldc = std::max(1, c.m + c.padC);
  const long long sA = (long long)lda * colsA + c.gapA, sB = c.sharedB ? 0 : (long long)ldb * colsB + c.gapB,
                  sC = (long long)ldc * c.n + c.gapC;
  const std::size_t nA = std::size_t(std::max<long long>(sA * c.batch, 1));
  const std::size_t nB = std::size_t(std::max<long long>(c.sharedB ? (long long)ldb * colsB : sB * c.batch, 1));
  const std::size_t nC = std::size_t(std::max<long long>(sC * c.batch, 1));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  // Entries of A and B inside their matrices random (each matrix scaled by 10^[-3, 3]),
  // the ld padding and the batch gaps NaN; alpha = 0 makes all of A and B NaN.
  auto fill = [&](std::vector<double>& v, long long stride, int ld, int rows, int cols, int count) {
    v.assign(v.size(), nan);
    for (int b = 0; b < count; ++b) {
      const double scale = std::pow(10.0, 3.0 * u(rng));
      for (int j = 0; j < cols; ++j)
        for (int i = 0; i < rows; ++i)
          v[std::size_t(b * stride + i + (long long)j * ld)] = c.alpha == 0.0 ? nan : scale * u(rng);
    }
  };
  std::vector<double> A(nA), B(nB), C(nC, poison);
  fill(A, sA, lda, rowsA, colsA, c.batch);
  fill(B, sB, ldb, rowsB, colsB, c.sharedB ? 1 : c.batch);
  for (int b = 0; b < c.batch; ++b)
    for (int j = 0; j < c.n; ++j)
      for (int i = 0; i < c.m; ++i) C[std::size_t(b * sC + i + (long long)j * ldc)] = c.beta == 0.0 ? nan : u(rng);
  double *dA = nullptr, *dB = nullptr, *dC = nullptr;
  check(cudaMalloc(&dA, nA * sizeof(double)), "cudaMalloc A");
  check(cudaMalloc(&dB, nB * sizeof(double)), "cudaMalloc B");
  check(cudaMalloc(&dC, nC * sizeof(double)), "cudaMalloc C");
  check(cudaMemcpy(dA, A.data(), nA * sizeof(double), cudaMemcpyHostToDevice), "H2D A");
  check(cudaMemcpy(dB, B.data(), nB * sizeof(double), cudaMemcpyHostToDevice), "H2D B");
  check(cudaMemcpy(dC, C.data(), nC * sizeof(double), cudaMemcpyHostToDevice), "H2D C");
  gpu::gemmStridedBatched(c.ta, c.tb, c.m, c.n, c.k, c.alpha, dA, lda, sA, dB, ldb, sB, c.beta, dC, ldc, sC, c.batch,
                          nullptr);
  check(cudaDeviceSynchronize(), "gemmStridedBatched");
  std::vector<double> G(nC);
  check(cudaMemcpy(G.data(), dC, nC * sizeof(double), cudaMemcpyDeviceToHost), "D2H C");
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);

  Outcome o;
  const long double unit = std::ldexp(1.0L, -53);
  std::vector<char> inside(nC, 0);
  for (int b = 0; b < c.batch; ++b) {
    const double* Ab = A.data() + b * sA;
    const double* Bb = B.data() + b * sB;
    for (int j = 0; j < c.n; ++j)
      for (int i = 0; i < c.m; ++i) {
        const std::size_t at = std::size_t(b * sC + i + (long long)j * ldc);
        inside[at] = 1;
        long double s = 0, mag = 0;
        if (c.alpha != 0.0)
          for (int q = 0; q < c.k; ++q) {
            const long double a = c.ta == Trans::N ? Ab[i + (long long)q * lda] : Ab[q + (long long)i * lda];
            const long double x = c.tb == Trans::N ? Bb[q + (long long)j * ldb] : Bb[j + (long long)q * ldb];
            s += a * x;
            mag += std::fabs(a * x);
          }
        const long double c0 = c.beta == 0.0 ? 0.0L : (long double)C[at];
        const long double ref = (long double)c.alpha * s + (long double)c.beta * c0;
        const long double bound =
            (c.k + 4) * unit * (std::fabs((long double)c.alpha) * mag + std::fabs((long double)c.beta * c0)) +
            std::numeric_limits<double>::denorm_min();
        const double g = G[at];
        if (!std::isfinite(g)) {
          ++o.nonFinite;
          continue;
        }
        o.worst = std::max(o.worst, double(std::fabs((long double)g - ref) / bound));
      }
  }
  for (std::size_t q = 0; q < nC; ++q)
    if (!inside[q]) {
      ++o.outside;
      o.outsideKept += G[q] == poison;
    }
  qInfo("%s: %s%s m %d n %d k %d, batch %d: worst error %.3f of the bound, %lld of %lld outside kept", c.name,
        c.ta == Trans::N ? "N" : "T", c.tb == Trans::N ? "N" : "T", c.m, c.n, c.k, c.batch, o.worst, o.outsideKept,
        o.outside);
  return o;
}

void verify(const Case& c, unsigned seed) {
  const Outcome o = run(c, seed);
  QVERIFY2(o.nonFinite == 0, qPrintable(QString("%1: %2 entries not finite").arg(c.name).arg(o.nonFinite)));
  QVERIFY2(o.worst <= 1.0, qPrintable(QString("%1: error %2 of the rounding bound").arg(c.name).arg(o.worst)));
  QVERIFY2(o.outsideKept == o.outside,
           qPrintable(QString("%1: %2 entries outside C written").arg(c.name).arg(o.outside - o.outsideKept)));
}

} // namespace

class TestBatchedGemm : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() {
    std::string why;
    if (!cudaAvailable(&why)) QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(why)));
  }

  void engineShapes() {
    // nb = 74, coupling w = 2 (M = 148), n = 518: as the engine calls them, with the
    // leading dimension of a patch's matrix (518) where it passes one.
    const int nb = 74, n = 518;
    const Case cases[] = {
        {"selected inversion G", Trans::N, Trans::N, 2 * nb, nb, nb, 1.0, 0.0, 24, n - 2 * nb, 0, 0},
        {"selected inversion C panel", Trans::N, Trans::N, 2 * nb, nb, 2 * nb, -1.0, 0.0, 24, n - 2 * nb, 0,
         n - 2 * nb},
        {"selected inversion C_jj", Trans::T, Trans::N, nb, nb, 2 * nb, -1.0, 0.0, 24, n - 2 * nb, 0, n - nb},
        {"L_jj^-T L_jj^-1", Trans::T, Trans::N, nb, nb, nb, 1.0, 1.0, 24, 0, 0, n - nb},
        {"Cholesky trailing update", Trans::N, Trans::T, 2 * nb, 2 * nb, nb, -1.0, 1.0, 24, n - 2 * nb,
         n - 2 * nb, n - 2 * nb},
        {"Cholesky panel (steps)", Trans::N, Trans::T, 2 * nb, nb, nb, 1.0, 0.0, 24, n - 2 * nb, 0, 0},
        {"fiber block s = 0", Trans::T, Trans::N, nb, nb, n, 1.0, 0.0, 8, 0, 0, 0},
        {"fiber block s = 5", Trans::T, Trans::N, nb, nb, n - 5 * nb, 1.0, 0.0, 8, 5 * nb, 5 * nb, 0},
        {"L^-1 block row (L X)", Trans::N, Trans::N, nb, 6 * nb, 2 * nb, 1.0, 0.0, 8, n - nb, n - 2 * nb, 0},
        {"L^-1 block row (X_ii T)", Trans::N, Trans::N, nb, 6 * nb, nb, -1.0, 0.0, 8, n - nb, 0, n - nb},
        {"noise Q", Trans::N, Trans::T, n, n, n, 1.0, 0.0, 2},
    };
    unsigned seed = 1;
    for (const Case& c : cases) verify(c, seed++);
  }

  void oddSizesStridesAndTransposes() {
    // Every transpose pair on sizes around the tile (80) and the k chunk (16), with
    // padded leading dimensions, gaps between the matrices and a shared B.
    struct Size { int m, n, k; };
    unsigned seed = 100;
    for (const Size s : {Size{1, 1, 1}, Size{7, 13, 5}, Size{80, 80, 16}, Size{81, 79, 17}, Size{161, 3, 200},
                         Size{3, 170, 33}, Size{40, 41, 64}})
      for (Trans ta : {Trans::N, Trans::T})
        for (Trans tb : {Trans::N, Trans::T}) {
          // beta 0 (C not read), 0.75 = -alpha (C in the accumulators), 0.5 (C read after)
          Case c{"odd", ta, tb, s.m, s.n, s.k, -0.75, seed % 3 == 0 ? 0.0 : seed % 3 == 1 ? 0.75 : 0.5, 5, 3, 1, 2,
                 11, 5, 7};
          c.sharedB = seed % 4 == 0;
          verify(c, seed++);
        }
  }

  void scalarsAndEdges() {
    // alpha = 0: A and B are all NaN and must not be read (C = beta C); k = 0 likewise;
    // beta = 0 over a NaN C is covered by every case above with beta = 0.
    verify({"alpha = 0", Trans::N, Trans::T, 37, 90, 25, 0.0, 2.0, 3, 1, 1, 1, 3, 3, 3}, 7);
    verify({"alpha = 0, beta = 0", Trans::T, Trans::N, 37, 90, 25, 0.0, 0.0, 3}, 8);
    verify({"k = 0", Trans::N, Trans::N, 20, 9, 0, 1.0, -3.0, 4}, 9);
    // More matrices than the grid's second dimension holds (65 535).
    verify({"batch 70 000", Trans::T, Trans::T, 3, 2, 5, 1.0, 1.0, 70000}, 10);
  }

  void badArgumentsAreErrors() {
    double* p = nullptr;
    check(cudaMalloc(&p, 1024 * sizeof(double)), "cudaMalloc");
    auto call = [p](Trans ta, int m, int n, int k, int lda, int ldb, int ldc, int batch) {
      gpu::gemmStridedBatched(ta, Trans::N, m, n, k, 1.0, p, lda, 0, p + 256, ldb, 0, 0.0, p + 512, ldc, 0, batch,
                              nullptr);
    };
    QVERIFY_THROWS_EXCEPTION(GpuError, call(Trans::N, -1, 4, 4, 4, 4, 4, 1));
    QVERIFY_THROWS_EXCEPTION(GpuError, call(Trans::N, 8, 4, 4, 7, 4, 8, 1));  // lda < m
    QVERIFY_THROWS_EXCEPTION(GpuError, call(Trans::T, 8, 4, 6, 5, 6, 8, 1));  // lda < k (A^T)
    QVERIFY_THROWS_EXCEPTION(GpuError, call(Trans::N, 8, 4, 6, 8, 5, 8, 1));  // ldb < k
    QVERIFY_THROWS_EXCEPTION(GpuError, call(Trans::N, 8, 4, 6, 8, 6, 7, 1));  // ldc < m
    QVERIFY_THROWS_EXCEPTION(GpuError, call(Trans::N, 8, 4, 6, 8, 6, 8, -1)); // batch < 0
    QVERIFY_THROWS_EXCEPTION(GpuError, gpu::gemmStridedBatched(Trans::N, Trans::N, 4, 4, 4, 1.0, nullptr, 4, 0, p, 4,
                                                               0, 0.0, p, 4, 0, 1, nullptr));
    call(Trans::N, 0, 4, 4, 1, 4, 1, 1); // empty: nothing to do, no error
    check(cudaDeviceSynchronize(), "empty call");
    cudaFree(p);
  }
};

QTEST_GUILESS_MAIN(TestBatchedGemm)
#include "test_batched_gemm.moc"
