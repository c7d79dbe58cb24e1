// gpu::syevBatched (gpu/batched_eigh.h) alone against LAPACK's dsyevd (OpenBLAS) on
// random symmetric positive definite batches: eigenvalues, residuals, orthogonality,
// and the inverse square root C^-1/2 the signal decorrelation builds from them; with
// a full workspace (rotations recorded by the one-thread-per-matrix QL pass), with
// the least one (every matrix runs the in-block QL) and with one in between.
#include "core/extract/lapack.h"
#include "gpu/batched_eigh.h"
#include "gpu/cuda_engine.h"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

using namespace spex;

namespace {

// n x n SPD matrices, column-major in blocks of stride at leading dimension lda:
// V diag(lambda) V^T with V the eigenvectors of a random symmetric matrix (dsyevd)
// and lambda log-uniform over `decades` below a random scale 10^U(-3, 3); every
// fourth matrix gets a 3-fold and a 2-fold repeated eigenvalue.
// clusterRel > 0: odd matrices instead get half their eigenvalues within clusterRel
// (relative) of one value.
std::vector<double> randomSpd(int n, int lda, long long stride, int batch, double decades, unsigned seed,
                              double clusterRel = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> out(std::size_t(stride) * batch, std::numeric_limits<double>::quiet_NaN());
  std::vector<double> S(std::size_t(n) * n), w(n), lam(n), work;
  std::vector<int> iwork;
  for (int b = 0; b < batch; ++b) {
    for (int j = 0; j < n; ++j)
      for (int i = j; i < n; ++i) S[i + std::size_t(j) * n] = S[j + std::size_t(i) * n] = u(rng) - 0.5;
    if (lapack::syevd(n, S.data(), n, w.data(), work, iwork) != 0) qFatal("dsyevd failed");
    const double scale = std::pow(10.0, 6.0 * u(rng) - 3.0);
    for (int k = 0; k < n; ++k) lam[k] = scale * std::pow(10.0, -decades * u(rng));
    if (b % 4 == 0 && n >= 6) {
      lam[1] = lam[2] = lam[0];
      lam[4] = lam[3];
    }
    if (clusterRel > 0 && b % 2 == 1)
      for (int k = 1; k < n / 2; ++k) lam[k] = lam[0] * (1 + clusterRel * u(rng));
    double* A = out.data() + std::size_t(stride) * b;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) {
        double s = 0;
        for (int k = 0; k < n; ++k) s += S[i + std::size_t(k) * n] * lam[k] * S[j + std::size_t(k) * n];
        A[i + std::size_t(j) * lda] = s;
      }
    // Only the lower triangle is read: poison the upper one.
    for (int j = 1; j < n; ++j)
      for (int i = 0; i < j; ++i) A[i + std::size_t(j) * lda] = std::numeric_limits<double>::quiet_NaN();
  }
  return out;
}

struct Device {
  double* A = nullptr;
  double* W = nullptr;
  double* work = nullptr;
  int* info = nullptr;
  ~Device() {
    cudaFree(A);
    cudaFree(W);
    cudaFree(work);
    cudaFree(info);
  }
};

// Workspace sizes the tests use: the default record, none, and room for n / 2 sweeps
// (a matrix needs ~2 n: most matrices overflow part-way).
enum class Work { Full, Least, Short, Bisect };
std::size_t workDoubles(Work w, int n, int batch) {
  switch (w) {
  case Work::Bisect: return gpu::syevBatchedBisectWorkspace(n, batch);
  case Work::Full: return gpu::syevBatchedWorkspace(n, batch);
  case Work::Least: return gpu::syevBatchedMinWorkspace(n, batch);
  case Work::Short: return gpu::syevBatchedWorkspace(n, batch, std::max(1LL, (long long)n / 2));
  }
  return 0;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) qFatal("%s: %s", what, cudaGetErrorString(e));
}

// Two decompositions of the same n x n blocks (eigenvalues ascending, vectors column-major):
// the largest eigenvalue difference relative to its block's largest eigenvalue (dw), and
// the largest relative Frobenius difference of C^-1/2 = V diag(w^-1/2) V^T (ds).
struct Agreement {
  double dw = 0, ds = 0;
};
Agreement decompositionsAgree(int n, const std::vector<double>& V0, const std::vector<double>& W0,
                              const std::vector<double>& V1, const std::vector<double>& W1) {
  Agreement r;
  for (std::size_t b = 0; b < W0.size() / n; ++b) {
    const double* w0 = W0.data() + b * n;
    const double* w1 = W1.data() + b * n;
    const double* v0 = V0.data() + b * n * n;
    const double* v1 = V1.data() + b * n * n;
    for (int i = 0; i < n; ++i) r.dw = std::max(r.dw, std::abs(w1[i] - w0[i]) / std::abs(w0[n - 1]));
    double num = 0, den = 0;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) {
        double a = 0, c = 0;
        for (int q = 0; q < n; ++q) {
          a += v0[i + q * n] * v0[j + q * n] / std::sqrt(w0[q]);
          c += v1[i + q * n] * v1[j + q * n] / std::sqrt(w1[q]);
        }
        num += (a - c) * (a - c);
        den += a * a;
      }
    r.ds = std::max(r.ds, std::sqrt(num / den));
  }
  return r;
}

// One frame's worth of blocks: `base` random SPD n x n matrices (4 decades), repeated to
// `batch`.
std::vector<double> frameSizedBlocks(int n, int base, int batch) {
  const std::vector<double> A0 = randomSpd(n, n, n * n, base, 4.0, 7);
  std::vector<double> A(std::size_t(n) * n * batch);
  for (int b = 0; b < batch; ++b)
    std::copy(A0.begin() + std::size_t(n) * n * (b % base), A0.begin() + std::size_t(n) * n * (b % base + 1),
              A.begin() + std::size_t(n) * n * b);
  return A;
}

// Device arrays for `batch` blocks of n x n and syevBatched's full workspace for them.
void allocateForFrame(Device& d, int n, int batch) {
  check(cudaMalloc(&d.work, gpu::syevBatchedWorkspace(n, batch) * sizeof(double)), "cudaMalloc work");
  check(cudaMalloc(&d.A, std::size_t(n) * n * batch * sizeof(double)), "cudaMalloc A");
  check(cudaMalloc(&d.W, std::size_t(n) * batch * sizeof(double)), "cudaMalloc W");
  check(cudaMalloc(&d.info, batch * sizeof(int)), "cudaMalloc info");
}

struct Errors {
  double eig = 0;      // max |lambda_gpu - lambda_lapack| / max|lambda|
  double residual = 0; // max ||A v - lambda v|| / max|lambda|
  double orth = 0;     // max |V^T V - I|
  double invSqrt = 0;  // max ||C^-1/2 gpu - lapack||_F / ||lapack||_F
};

// Runs syevBatched and dsyevd on the same batch and measures the differences; the
// eigenvectors and eigenvalues syevBatched gave are left in Vout, Wout when given.
Errors compareWithLapack(int n, int lda, long long stride, int batch, double decades, unsigned seed,
                         Work wk = Work::Full, std::vector<double>* Vout = nullptr,
                         std::vector<double>* Wout = nullptr, int reduce = 0,
                         gpu::SyevMethod method = gpu::SyevMethod::Chain, double clusterRel = 0,
                         gpu::SyevOrtho ortho = gpu::SyevOrtho::NewtonSchulz,
                         gpu::SyevValues values = gpu::SyevValues::DivisionFree,
                         gpu::SyevVectors vectors = gpu::SyevVectors::Global) {
  const std::vector<double> A = randomSpd(n, lda, stride, batch, decades, seed, clusterRel);
  Device d;
  const std::size_t lwork = workDoubles(wk, n, batch);
  check(cudaMalloc(&d.work, lwork * sizeof(double)), "cudaMalloc work");
  check(cudaMemset(d.work, 0xff, lwork * sizeof(double)), "poison work");
  check(cudaMalloc(&d.A, A.size() * sizeof(double)), "cudaMalloc A");
  check(cudaMalloc(&d.W, std::size_t(n) * batch * sizeof(double)), "cudaMalloc W");
  check(cudaMalloc(&d.info, batch * sizeof(int)), "cudaMalloc info");
  check(cudaMemcpy(d.A, A.data(), A.size() * sizeof(double), cudaMemcpyHostToDevice), "H2D");
  check(cudaMemset(d.W, 0xff, std::size_t(n) * batch * sizeof(double)), "poison W"); // NaN
  check(cudaMemset(d.info, 0x7f, batch * sizeof(int)), "poison info");
  // reduce 0: syevBatched as the engine calls it (its default pass 1); else
  // syevBatchedProfile's reduce, 4 standing for its 0 (the block kernel).
  if (reduce == 0)
    gpu::syevBatched(n, d.A, lda, stride, d.W, d.info, batch, d.work, lwork, nullptr, method, ortho, values,
                     gpu::SyevReduce::Warp, vectors);
  else
    gpu::syevBatchedProfile(n, d.A, lda, stride, d.W, d.info, batch, d.work, lwork, 0, 0, reduce == 4 ? 0 : reduce,
                            method, ortho, values, vectors);
  check(cudaDeviceSynchronize(), "syevBatched");
  std::vector<double> V(A.size()), W(std::size_t(n) * batch);
  std::vector<int> info(batch);
  check(cudaMemcpy(V.data(), d.A, V.size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H V");
  check(cudaMemcpy(W.data(), d.W, W.size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H W");
  check(cudaMemcpy(info.data(), d.info, batch * sizeof(int), cudaMemcpyDeviceToHost), "D2H info");

  Errors err;
  std::vector<double> L(std::size_t(n) * n), wl(n), work, Qg(std::size_t(n) * n), Ql(std::size_t(n) * n);
  std::vector<int> iwork;
  for (int b = 0; b < batch; ++b) {
    if (info[b] != 0) qFatal("matrix %d: info %d", b, info[b]);
    const double* Ab = A.data() + std::size_t(stride) * b;
    const double* Vb = V.data() + std::size_t(stride) * b;
    const double* wg = W.data() + std::size_t(n) * b;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) L[i + std::size_t(j) * n] = i >= j ? Ab[i + std::size_t(j) * lda] : 0.0;
    if (lapack::syevd(n, L.data(), n, wl.data(), work, iwork) != 0) qFatal("dsyevd failed");
    const double wmax = std::max(std::abs(wl[0]), std::abs(wl[n - 1]));
    auto a = [&](int i, int j) { return i >= j ? Ab[i + std::size_t(j) * lda] : Ab[j + std::size_t(i) * lda]; };
    for (int k = 0; k < n; ++k) {
      if (!std::isfinite(wg[k])) qFatal("matrix %d: eigenvalue %d not written", b, k);
      if (k && wg[k] < wg[k - 1]) qFatal("matrix %d: eigenvalues not ascending", b);
      err.eig = std::max(err.eig, std::abs(wg[k] - wl[k]) / wmax);
      double r2 = 0;
      for (int i = 0; i < n; ++i) {
        double s = -wg[k] * Vb[i + std::size_t(k) * lda];
        for (int j = 0; j < n; ++j) s += a(i, j) * Vb[j + std::size_t(k) * lda];
        r2 += s * s;
      }
      err.residual = std::max(err.residual, std::sqrt(r2) / wmax);
      for (int j = 0; j <= k; ++j) {
        double s = 0;
        for (int i = 0; i < n; ++i) s += Vb[i + std::size_t(k) * lda] * Vb[i + std::size_t(j) * lda];
        err.orth = std::max(err.orth, std::abs(s - (j == k ? 1.0 : 0.0)));
      }
    }
    // C^-1/2 = V diag(w^-1/2) V^T from each solver.
    double num = 0, den = 0;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) {
        double g = 0, l = 0;
        for (int k = 0; k < n; ++k) {
          g += Vb[i + std::size_t(k) * lda] * Vb[j + std::size_t(k) * lda] / std::sqrt(wg[k]);
          l += L[i + std::size_t(k) * n] * L[j + std::size_t(k) * n] / std::sqrt(wl[k]);
        }
        num += (g - l) * (g - l);
        den += l * l;
      }
    err.invSqrt = std::max(err.invSqrt, std::sqrt(num / den));
  }
  qInfo("%sn %d, lda %d, batch %d, %.0f decades%s, workspace %s, reduce %s: eigenvalues %.2e, residual %.2e, "
        "orthogonality %.2e, C^-1/2 %.2e",
        method != gpu::SyevMethod::Bisect ? ""
        : qPrintable(QString("bisect (%1, %2 values%3): ")
                         .arg(ortho == gpu::SyevOrtho::CholQR ? "CholQR" : "Newton-Schulz")
                         .arg(values == gpu::SyevValues::Ratio    ? "ratio"
                              : values == gpu::SyevValues::Newton ? "division-free, Newton"
                                                                  : "division-free")
                         .arg(vectors == gpu::SyevVectors::Shared ? ", shared vectors" : "")),
        n, lda, batch,
        decades, clusterRel > 0 ? qPrintable(QString(", clusters within %1").arg(clusterRel)) : "",
        wk == Work::Full ? "full" : wk == Work::Least ? "least" : wk == Work::Bisect ? "bisect's least" : "short",
        reduce == 1   ? "three-pass"
        : reduce == 2 ? "fused, Q in it"
        : reduce == 3 ? "one warp"
        : reduce == 4 ? "block"
                      : "default",
        err.eig, err.residual, err.orth, err.invSqrt);
  if (Vout) *Vout = std::move(V);
  if (Wout) *Wout = std::move(W);
  return err;
}

} // namespace

class TestBatchedEigh : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() {
    std::string why;
    if (!cudaAvailable(&why)) QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(why)));
    lapack::singleThreadedBlas();
  }

  void fiberBlocksMatchLapack() {
    // The engine's size: 74 x 74 blocks, a spectrum over 4 decades (C^-1/2 is then
    // accurate to ~eps * cond^1/2 in either solver).
    const Errors e = compareWithLapack(74, 74, 74 * 74, 300, 4.0, 1);
    QVERIFY2(e.eig < 1e-12, qPrintable(QString::number(e.eig)));
    QVERIFY2(e.residual < 1e-12, qPrintable(QString::number(e.residual)));
    QVERIFY2(e.orth < 1e-12, qPrintable(QString::number(e.orth)));
    QVERIFY2(e.invSqrt < 1e-10, qPrintable(QString::number(e.invSqrt)));
  }

  void illConditionedMatchLapack() {
    // 10 decades: eigenvalues and vectors stay normwise accurate.
    const Errors e = compareWithLapack(74, 74, 74 * 74, 100, 10.0, 2);
    QVERIFY2(e.eig < 1e-12, qPrintable(QString::number(e.eig)));
    QVERIFY2(e.residual < 1e-12, qPrintable(QString::number(e.residual)));
    QVERIFY2(e.orth < 1e-12, qPrintable(QString::number(e.orth)));
  }

  void otherSizesAndStrides() {
    // Sizes around the warp width, the smallest ones, the largest, and lda > n with
    // stride > lda n; each with every workspace size.
    for (Work wk : {Work::Full, Work::Least, Work::Short})
      for (int n : {1, 2, 3, 5, 31, 33, 64, 100, gpu::kSyevMaxN}) {
        const int lda = n + 3;
        const Errors e = compareWithLapack(n, lda, (long long)lda * n + 7, n > 100 ? 6 : 20, 4.0, 10 + n, wk);
        QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < 1e-12 && e.invSqrt < 1e-10,
                 qPrintable(QString("n %1").arg(n)));
      }
  }

  void otherReduceKernelsMatchLapack() {
    // The fourth round's three-pass reduction, kept for A/B (syevBatchedProfile's
    // reduce = 1), on the engine's size, around the warp width and the largest; the
    // fused one forming Q itself (2); and the fused one with Q by its own kernel (4:
    // syevBatchedProfile's 0, the default before the ninth round).
    for (int reduce : {1, 2, 4})
      for (int n : {74, 3, 33, 80, 100, gpu::kSyevMaxN}) {
        const Errors e = compareWithLapack(n, n, (long long)n * n, n > 100 ? 6 : 40, 4.0, 30 + n, Work::Full,
                                           nullptr, nullptr, reduce);
        QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < 1e-12 && e.invSqrt < 1e-10,
                 qPrintable(QString("reduce %1, n %2").arg(reduce).arg(n)));
      }
    // The block kernel (4: syevBatchedProfile's 0) under the bisection method.
    const Errors e = compareWithLapack(74, 74, 74 * 74, 64, 4.0, 29, Work::Full, nullptr, nullptr, 4,
                                       gpu::SyevMethod::Bisect);
    QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < 1e-13 && e.invSqrt < 1e-10,
             qPrintable(QString("bisect, block reduce: %1 %2 %3 %4").arg(e.eig).arg(e.residual).arg(e.orth).arg(e.invSqrt)));
  }

  void workspaceSizesAgree() {
    // The recorded rotations (pass 2) and the in-block QL (pass 3's fallback) run the
    // same rotation function: the three workspace sizes give the same eigenvalues and
    // the same C^-1/2 to rounding, on the engine's block size. (The vectors of a
    // repeated eigenvalue, every fourth matrix here, may differ within their space
    // where the compiler contracts the two sites differently.)
    std::vector<double> V[3], W[3];
    const Work ws[3] = {Work::Full, Work::Least, Work::Short};
    for (int k = 0; k < 3; ++k) {
      const Errors e = compareWithLapack(74, 74, 74 * 74, 64, 4.0, 5, ws[k], &V[k], &W[k]);
      QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < 1e-12 && e.invSqrt < 1e-10,
               qPrintable(QString("workspace %1").arg(k)));
    }
    for (int k = 1; k < 3; ++k) {
      double dv = 0;
      for (std::size_t i = 0; i < V[0].size(); ++i) dv = std::max(dv, std::abs(V[k][i] - V[0][i]));
      // C^-1/2 = V diag(w^-1/2) V^T from each workspace size.
      const auto [dw, ds] = decompositionsAgree(74, V[0], W[0], V[k], W[k]);
      qInfo("workspace %d vs full: max |dV| %.2e, max |dW| / max W %.2e, C^-1/2 %.2e", k, dv, dw, ds);
      QVERIFY2(dw < 1e-13 && ds < 1e-10, qPrintable(QString("%1 %2").arg(dw).arg(ds)));
    }
  }

  void frameSizedBatchTimed() {
    // One frame's worth (23 500 blocks of 74 x 74: 300 random ones, repeated), timed
    // and split by stage for docs/benchmarks.md; every copy must give the same result.
    const int n = 74, base = 300, batch = 23500;
    const std::vector<double> A = frameSizedBlocks(n, base, batch);
    Device d;
    allocateForFrame(d, n, batch);
    const std::size_t lwork = gpu::syevBatchedWorkspace(n, batch);
    gpu::SyevProfile p;
    // Last: the full workspace, whose results are checked below. First the least one
    // (every matrix runs the in-block QL, as the one-kernel solver of version 10 did).
    for (int rep = 0; rep < 5; ++rep) {
      const std::size_t lw = rep < 2 ? gpu::syevBatchedMinWorkspace(n, batch) : lwork;
      check(cudaMemcpy(d.A, A.data(), A.size() * sizeof(double), cudaMemcpyHostToDevice), "H2D");
      p = gpu::syevBatchedProfile(n, d.A, n, n * n, d.W, d.info, batch, d.work, lw);
      qInfo("%d blocks of %d, workspace %s: %.2f ms (reduce %.2f, QL %.2f, apply %.2f); per block: "
            "tridiagonal %.0f, form Q %.0f, QL %.0f, apply %.0f cycles; %.1f sweeps, %.0f rotations, "
            "%lld in-block QL", batch, n, rep < 2 ? "least" : "full", p.seconds * 1e3, p.reduceSeconds * 1e3,
            p.qlSeconds * 1e3, p.applySeconds * 1e3, p.tridiagonalCycles, p.formQCycles, p.qlCycles,
            p.applyCycles, p.sweeps, p.rotations, p.fallbacks);
    }
    QCOMPARE(p.fallbacks, 0LL);
    // The engine's batches: 199 patches x 5 kept blocks per stream at the default budget.
    // Matrices per warp in the QL pass (0: the solver's choice), on the engine's batch
    // and on the whole frame: the same eigenvalues to the bit whatever the grouping.
    std::vector<double> Wref, Wl(std::size_t(n) * batch);
    for (int lanes : {0, 1, 2, 4, 8, 16, 32})
      for (int small : {995, 1235, batch}) {
        check(cudaMemcpy(d.A, A.data(), std::size_t(n) * n * small * sizeof(double), cudaMemcpyHostToDevice),
              "H2D");
        const gpu::SyevProfile q = gpu::syevBatchedProfile(n, d.A, n, n * n, d.W, d.info, small, d.work,
                                                           gpu::syevBatchedWorkspace(n, small), lanes);
        qInfo("%d blocks of %d, QL lanes %d: %.3f ms (reduce %.3f, QL %.3f, apply %.3f)", small, n, lanes,
              q.seconds * 1e3, q.reduceSeconds * 1e3, q.qlSeconds * 1e3, q.applySeconds * 1e3);
        check(cudaMemcpy(Wl.data(), d.W, std::size_t(n) * small * sizeof(double), cudaMemcpyDeviceToHost), "D2H W");
        if (Wref.empty() && small == batch) Wref = Wl;
        if (!Wref.empty())
          for (std::size_t k = 0; k < std::size_t(n) * small; ++k) QCOMPARE(Wl[k], Wref[k]);
      }
    // The reduction: the fourth round's three-pass kernel, the fused one forming Q
    // itself, and the fused one with Q by its own kernel (the default before the ninth
    // round; the one-warp kernel's timings: warpReduceFrameTimed).
    for (int small : {batch, 995})
      for (int reduce : {1, 2, 0, 1, 2, 0}) {
        check(cudaMemcpy(d.A, A.data(), std::size_t(n) * n * small * sizeof(double), cudaMemcpyHostToDevice), "H2D");
        const gpu::SyevProfile q = gpu::syevBatchedProfile(n, d.A, n, n * n, d.W, d.info, small, d.work,
                                                           gpu::syevBatchedWorkspace(n, small), 0, 0, reduce);
        qInfo("%d blocks of %d, reduce %s: %.3f ms (reduce %.3f, QL %.3f, apply %.3f); tridiagonal %.0f, form Q %.0f "
              "cycles a block", small, n, reduce == 1 ? "three-pass" : reduce == 2 ? "fused, Q in it" : "fused, Q kernel",
              q.seconds * 1e3,
              q.reduceSeconds * 1e3, q.qlSeconds * 1e3, q.applySeconds * 1e3, q.tridiagonalCycles, q.formQCycles);
      }
    // Sweeps per group in the apply pass: one at a time, and four pipelined in registers
    // (the default), timed on the whole frame; the engine's batch must give the same
    // eigenvectors to the bit either way.
    for (int group : {1, 4}) {
      check(cudaMemcpy(d.A, A.data(), A.size() * sizeof(double), cudaMemcpyHostToDevice), "H2D");
      const gpu::SyevProfile q = gpu::syevBatchedProfile(n, d.A, n, n * n, d.W, d.info, batch, d.work, lwork, 0, group);
      qInfo("%d blocks of %d, %d sweeps a group: %.2f ms (reduce %.2f, QL %.2f, apply %.2f); apply %.0f cycles a block",
            batch, n, group, q.seconds * 1e3, q.reduceSeconds * 1e3, q.qlSeconds * 1e3, q.applySeconds * 1e3,
            q.applyCycles);
    }
    std::vector<double> V[2];
    for (int k = 0; k < 2; ++k) {
      const int small = 1235;
      check(cudaMemcpy(d.A, A.data(), std::size_t(n) * n * small * sizeof(double), cudaMemcpyHostToDevice), "H2D");
      gpu::syevBatchedProfile(n, d.A, n, n * n, d.W, d.info, small, d.work, gpu::syevBatchedWorkspace(n, small), 0,
                              k == 0 ? 1 : 4);
      V[k].resize(std::size_t(n) * n * small);
      check(cudaMemcpy(V[k].data(), d.A, V[k].size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H V");
    }
    std::size_t differ = 0;
    for (std::size_t k = 0; k < V[0].size(); ++k) differ += V[0][k] != V[1][k];
    qInfo("eigenvectors of 1235 blocks, 1 vs 4 sweeps a group: %zu of %zu entries differ", differ, V[0].size());
    QCOMPARE(differ, std::size_t(0));
    check(cudaMemcpy(d.A, A.data(), A.size() * sizeof(double), cudaMemcpyHostToDevice), "H2D");
    p = gpu::syevBatchedProfile(n, d.A, n, n * n, d.W, d.info, batch, d.work, lwork);
    std::vector<double> W(std::size_t(n) * batch);
    std::vector<int> info(batch);
    check(cudaMemcpy(W.data(), d.W, W.size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H W");
    check(cudaMemcpy(info.data(), d.info, batch * sizeof(int), cudaMemcpyDeviceToHost), "D2H info");
    for (int b = 0; b < batch; ++b) {
      QCOMPARE(info[b], 0);
      for (int k = 0; k < n; ++k) QCOMPARE(W[std::size_t(n) * b + k], W[std::size_t(n) * (b % base) + k]);
    }
    QVERIFY(p.sweeps > 0 && p.rotations > 0);
  }

  // The bisection method (SyevMethod::Bisect) against LAPACK, with the chain's criteria
  // and orthogonality to ~eps n (gpu/eigh_bisect.cuh; its per-thread code also runs on
  // the host in test_eigh_bisect).
  // Both ways to the eigenvalues (gpu::SyevValues).
  void bisectMatchesLapack_data() {
    QTest::addColumn<int>("values");
    QTest::addColumn<bool>("shared"); // gpu::SyevVectors::Shared (eighvec)
    QTest::newRow("divfree") << int(gpu::SyevValues::DivisionFree) << false;
    QTest::newRow("newton") << int(gpu::SyevValues::Newton) << false;
    QTest::newRow("ratio") << int(gpu::SyevValues::Ratio) << false;
    QTest::newRow("divfree, shared vectors") << int(gpu::SyevValues::DivisionFree) << true;
    QTest::newRow("ratio, shared vectors") << int(gpu::SyevValues::Ratio) << true;
  }
  void bisectMatchesLapack() {
    QFETCH(int, values);
    QFETCH(bool, shared);
    const auto V = gpu::SyevValues(values);
    const auto SV = shared ? gpu::SyevVectors::Shared : gpu::SyevVectors::Global;
    const auto B = gpu::SyevMethod::Bisect;
    Errors e = compareWithLapack(74, 74, 74 * 74, 300, 4.0, 1, Work::Full, nullptr, nullptr, 0, B, 0,
                                 gpu::SyevOrtho::NewtonSchulz, V, SV);
    QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < 1e-13 && e.invSqrt < 1e-10,
             qPrintable(QString("%1 %2 %3 %4").arg(e.eig).arg(e.residual).arg(e.orth).arg(e.invSqrt)));
    e = compareWithLapack(74, 74, 74 * 74, 100, 10.0, 2, Work::Bisect, nullptr, nullptr, 0, B, 0,
                          gpu::SyevOrtho::NewtonSchulz, V, SV);
    QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < 1e-13,
             qPrintable(QString("%1 %2 %3").arg(e.eig).arg(e.residual).arg(e.orth)));
    for (double rel : {1e-9, 1e-12}) {
      e = compareWithLapack(74, 74, 74 * 74, 64, 4.0, 3, Work::Full, nullptr, nullptr, 0, B, rel,
                            gpu::SyevOrtho::NewtonSchulz, V, SV);
      QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < 1e-13 && e.invSqrt < 1e-10,
               qPrintable(QString("clusters %1: %2 %3 %4 %5").arg(rel).arg(e.eig).arg(e.residual).arg(e.orth).arg(e.invSqrt)));
    }
    // Every order up to the method's largest (80), the next ones (the chain runs), odd
    // leading dimensions and strides; the least workspace the method takes.
    // Both pass-3 methods.
    for (auto ortho : {gpu::SyevOrtho::NewtonSchulz, gpu::SyevOrtho::CholQR})
      for (int n : {1, 2, 3, 4, 5, 8, 17, 31, 32, 33, 47, 64, 73, 74, 75, 79, 80, 81, 100}) {
        const int lda = n + 3;
        e = compareWithLapack(n, lda, (long long)lda * n + 7, 24, 4.0, 50 + n, n <= 80 ? Work::Bisect : Work::Full,
                              nullptr, nullptr, 0, B, 0, ortho, V, SV);
        QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < 1e-13 && e.invSqrt < 1e-10,
                 qPrintable(QString("n %1").arg(n)));
      }
    // Too little workspace for the method is an error naming what it needs.
    double* work = nullptr;
    check(cudaMalloc(&work, 4096 * sizeof(double)), "cudaMalloc work");
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::syevBatched(10, nullptr, 10, 100, nullptr, nullptr, 100, work,
                                                              gpu::syevBatchedBisectWorkspace(10, 100) - 2,
                                                              nullptr, B));
    cudaFree(work);
  }

  // Pass 2's vectors with the scratch in shared memory (SyevVectors::Shared,
  // syevBisectSharedKernel) do the global kernel's arithmetic in the same order
  // (eigh_bisect.cuh twistedVectorSlots): the same eigenvalues and eigenvectors to the
  // bit, on plain blocks, blocks with clusters within 1e-9 and 1e-12 (the cluster rounds)
  // and odd orders, with each way to the eigenvalues that feeds the vector kernel
  // (division-free: given; ratio: found in it). Small: the sanitizer slot of eighvec.
  // SPEXLAB_EIGH_SANITIZE=1: 4 blocks a batch, division-free values only (for
  // compute-sanitizer). Clusters within 1e-15 of the 1e-12 and 1e-15 cases hold more than
  // half of a block's eigenvalues: their vectors stay in the workspace (borrowedColumn).
  void sharedVectorsMatchGlobalToTheBit() {
    const auto B = gpu::SyevMethod::Bisect;
    const bool small = qgetenv("SPEXLAB_EIGH_SANITIZE") == "1";
    int cases = 0;
    for (auto values : {gpu::SyevValues::DivisionFree, gpu::SyevValues::Ratio})
      for (const auto& [n, rel, seed] : {std::tuple{74, 0.0, 5u}, std::tuple{74, 1e-9, 3u}, std::tuple{74, 1e-12, 3u},
                                         std::tuple{74, 1e-15, 4u}, std::tuple{33, 0.0, 7u}, std::tuple{80, 1e-9, 8u},
                                         std::tuple{1, 0.0, 9u}}) {
        if (small && (values != gpu::SyevValues::DivisionFree || n == 80 || rel == 1e-9)) continue;
        std::vector<double> V[2], W[2];
        for (int k = 0; k < 2; ++k)
          compareWithLapack(n, n, (long long)n * n, small ? 4 : 16, 4.0, seed, Work::Bisect, &V[k], &W[k], 0, B, rel,
                            gpu::SyevOrtho::NewtonSchulz, values,
                            k ? gpu::SyevVectors::Shared : gpu::SyevVectors::Global);
        QCOMPARE(V[1].size(), V[0].size());
        QVERIFY2(std::memcmp(V[0].data(), V[1].data(), V[0].size() * sizeof(double)) == 0,
                 qPrintable(QString("vectors differ: n %1, clusters %2").arg(n).arg(rel)));
        QVERIFY2(std::memcmp(W[0].data(), W[1].data(), W[0].size() * sizeof(double)) == 0,
                 qPrintable(QString("eigenvalues differ: n %1, clusters %2").arg(n).arg(rel)));
        ++cases;
      }
    qInfo("shared vs global pass-2 scratch: %d batches, eigenvalues and vectors the same to the bit", cases);
  }

  void bisectAgreesWithChain() {
    // The same 64 blocks by both methods: eigenvalues and C^-1/2 to rounding.
    std::vector<double> V[2], W[2];
    for (int k = 0; k < 2; ++k)
      compareWithLapack(74, 74, 74 * 74, 64, 4.0, 5, Work::Full, &V[k], &W[k], 0,
                        k ? gpu::SyevMethod::Bisect : gpu::SyevMethod::Chain);
    const auto [dw, ds] = decompositionsAgree(74, V[0], W[0], V[1], W[1]);
    qInfo("bisect vs chain, 64 blocks of 74: max |dW| / max W %.2e, C^-1/2 %.2e", dw, ds);
    QVERIFY2(dw < 1e-13 && ds < 1e-10, qPrintable(QString("%1 %2").arg(dw).arg(ds)));
    // The other ways to the eigenvalues against the default (division-free bisection): all
    // end on brackets of width eps ||T|| with backward errors of a few eps ||T||, so they
    // agree to ~1e-15 of the largest.
    for (auto values : {gpu::SyevValues::Newton, gpu::SyevValues::Ratio}) {
      std::vector<double> Vr, Wr;
      compareWithLapack(74, 74, 74 * 74, 64, 4.0, 5, Work::Full, &Vr, &Wr, 0, gpu::SyevMethod::Bisect, 0,
                        gpu::SyevOrtho::NewtonSchulz, values);
      const auto [dwr, dsr] = decompositionsAgree(74, V[1], W[1], Vr, Wr);
      qInfo("bisect, division-free vs %s values: max |dW| / max W %.2e, C^-1/2 %.2e",
            values == gpu::SyevValues::Ratio ? "ratio" : "Newton", dwr, dsr);
      QVERIFY2(dwr < 1e-14 && dsr < 1e-10, qPrintable(QString("%1 %2").arg(dwr).arg(dsr)));
    }
  }

  void bisectOrthoMethodsAgree() {
    // Pass 3 by Newton-Schulz (the default) and by CholQR on the same blocks: plain (4
    // decades), clustered within 1e-9 and 1e-12 (the latter takes CholQR passes in the
    // Newton-Schulz kernel too): each against LAPACK with bisectMatchesLapack's criteria,
    // and against each other, eigenvalues to the bit (pass 3 does not touch them) and
    // C^-1/2 to rounding (the bound of bisectAgreesWithChain).
    for (double rel : {0.0, 1e-9, 1e-12}) {
      std::vector<double> V[2], W[2];
      Errors e[2];
      for (int k = 0; k < 2; ++k) {
        e[k] = compareWithLapack(74, 74, 74 * 74, 64, 4.0, 7, Work::Full, &V[k], &W[k], 0, gpu::SyevMethod::Bisect,
                                 rel, k ? gpu::SyevOrtho::CholQR : gpu::SyevOrtho::NewtonSchulz);
        QVERIFY2(e[k].eig < 1e-12 && e[k].residual < 1e-12 && e[k].orth < 1e-13 && e[k].invSqrt < 1e-10,
                 qPrintable(QString("clusters %1, ortho %2").arg(rel).arg(k)));
      }
      const auto [dw, ds] = decompositionsAgree(74, V[0], W[0], V[1], W[1]);
      qInfo("clusters within %.0e: Newton-Schulz vs CholQR: max |dW| / max W %.2e, C^-1/2 %.2e", rel, dw, ds);
      QCOMPARE(dw, 0.0);
      QVERIFY2(ds < 1e-10, qPrintable(QString::number(ds)));
    }
  }

  void bisectFrameTimed() {
    // 23 500 blocks (a frame) and the engine's batch sizes by the chain and by the
    // bisection method with either way to the eigenvalues, alternating, twice each: for
    // docs/benchmarks.md (Issue 12, eighth and ninth rounds).
    const int n = 74, base = 300, batch = 23500;
    const std::vector<double> A = frameSizedBlocks(n, base, batch);
    Device d;
    allocateForFrame(d, n, batch);
    // Six ways in turn: the chain; bisection with the eighth round's pass 2 and 3
    // (ratio values, CholQR); Newton-Schulz pass 3 with each way to the eigenvalues
    // (ratio, division-free: the default, division-free with Newton's steps), then the
    // default with pass 2's scratch in shared memory (SyevVectors::Shared, eighvec).
    // SPEXLAB_EIGH_TIMED_VECTORS=1: only the last two (the vector kernels' A/B, 5 each).
    const bool onlyVectors = qgetenv("SPEXLAB_EIGH_TIMED_VECTORS") == "1";
    std::vector<double> W[3], Wshared;
    const gpu::SyevValues values[3] = {gpu::SyevValues::Ratio, gpu::SyevValues::DivisionFree,
                                       gpu::SyevValues::Newton};
    const char* names[3] = {"ratio", "division-free", "Newton"};
    for (int small : {batch, 1235, 995})
      for (int rep = 0; rep < (onlyVectors ? 10 : 12); ++rep) {
        // 0 chain, 1 CholQR + ratio, 2.. 4 Newton-Schulz + values[kind - 2], 5 the
        // default with shared vectors
        const int kind = onlyVectors ? 3 + 2 * (rep % 2) : rep % 6;
        const bool ns = kind >= 2;
        const bool shared = kind == 5;
        const int v = !ns ? 0 : shared ? 1 : kind - 2;
        check(cudaMemcpy(d.A, A.data(), std::size_t(n) * n * small * sizeof(double), cudaMemcpyHostToDevice), "H2D");
        const gpu::SyevProfile q = gpu::syevBatchedProfile(
            n, d.A, n, n * n, d.W, d.info, small, d.work, gpu::syevBatchedWorkspace(n, small), 0, 0, 0,
            kind ? gpu::SyevMethod::Bisect : gpu::SyevMethod::Chain,
            ns ? gpu::SyevOrtho::NewtonSchulz : gpu::SyevOrtho::CholQR, values[v],
            shared ? gpu::SyevVectors::Shared : gpu::SyevVectors::Global);
        if (kind) {
          qInfo("%d blocks of %d, bisect, %s values%s, %s: %.3f ms (reduce %.3f, values + vectors %.3f [values %.3f], "
                "pass 3 %.3f); per block %.0f / %.0f cycles (values %.0f a block), %.0f %s a matrix, %lld with "
                "clusters, %.0f with %s CholQR, %.3f Newton-Schulz passes before the last",
                small, n, names[v], shared ? ", shared vectors" : "", ns ? "Newton-Schulz" : "CholQR", q.seconds * 1e3, q.reduceSeconds * 1e3,
                q.qlSeconds * 1e3, q.valuesSeconds * 1e3, q.applySeconds * 1e3, q.qlCycles, q.applyCycles,
                q.valuesCycles, q.sweeps, v == 0 ? "quadsection steps" : "counts", q.fallbacks, q.rotations * small,
                ns ? "a" : "a second", q.orthoPasses);
          if (ns)
            qInfo("  pass 3 by phase (thread 0, cycles a block): X in %.0f, Gram %.0f, passes %.0f, last step %.0f, "
                  "reflectors in %.0f, apply and Z out %.0f", q.orthoPhaseCycles[0], q.orthoPhaseCycles[1],
                  q.orthoPhaseCycles[2], q.orthoPhaseCycles[3], q.orthoPhaseCycles[4], q.orthoPhaseCycles[5]);
        } else {
          qInfo("%d blocks of %d, chain:  %.3f ms (reduce %.3f, QL %.3f, apply %.3f)", small, n, q.seconds * 1e3,
                q.reduceSeconds * 1e3, q.qlSeconds * 1e3, q.applySeconds * 1e3);
        }
        std::vector<int> info(small);
        check(cudaMemcpy(info.data(), d.info, small * sizeof(int), cudaMemcpyDeviceToHost), "D2H info");
        for (int b = 0; b < small; ++b) QCOMPARE(info[b], 0);
        if (ns && small == batch) {
          std::vector<double>& w = shared ? Wshared : W[v];
          w.resize(std::size_t(n) * small);
          check(cudaMemcpy(w.data(), d.W, w.size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H W");
        }
      }
    // The frame's eigenvalues by the three value paths: every copy of a base block the
    // same to the bit, the paths within 1e-14 of the block's largest of the ratio path's.
    QCOMPARE(Wshared.size(), W[1].size());
    QVERIFY(std::memcmp(Wshared.data(), W[1].data(), Wshared.size() * sizeof(double)) == 0);
    if (onlyVectors) return;
    for (int v = 1; v < 3; ++v) {
      double dw = 0;
      for (int b = 0; b < batch; ++b)
        for (int k = 0; k < n; ++k) {
          const std::size_t i = std::size_t(n) * b + k, i0 = std::size_t(n) * (b % base) + k;
          QCOMPARE(W[v][i], W[v][i0]);
          dw = std::max(dw, std::abs(W[v][i] - W[0][i]) / std::abs(W[0][std::size_t(n) * b + n - 1]));
        }
      qInfo("frame, %s vs ratio eigenvalues: max |dW| / max W %.2e", names[v], dw);
      QVERIFY2(dw < 1e-14, qPrintable(QString::number(dw)));
    }
  }

  // Pass 1 by one warp a matrix (SyevReduce::Warp, syevBatchedProfile's reduce = 3;
  // Issue 12, ninth round) under both methods, against LAPACK with the criteria above:
  // the engine's size over 4 and 10 decades and with clusters, every slot boundary of a
  // lane's rows (n - 1 = 32, 64: rows 1 + lane + 32 q) and the largest order it takes
  // (80; 81 and 100 run the block kernel); then against the block kernel on the same
  // blocks: the same Householder steps, so eigenvalues and C^-1/2 agree to rounding.
  void warpReduceMatchesLapack() {
    const auto B = gpu::SyevMethod::Bisect, C = gpu::SyevMethod::Chain;
    for (const auto method : {B, C}) {
      const double orthTol = method == B ? 1e-13 : 1e-12;
      Errors e = compareWithLapack(74, 74, 74 * 74, 300, 4.0, 1, Work::Full, nullptr, nullptr, 3, method);
      QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < orthTol && e.invSqrt < 1e-10,
               qPrintable(QString("%1 %2 %3 %4").arg(e.eig).arg(e.residual).arg(e.orth).arg(e.invSqrt)));
      e = compareWithLapack(74, 74, 74 * 74, 100, 10.0, 2, Work::Full, nullptr, nullptr, 3, method);
      QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < orthTol,
               qPrintable(QString("%1 %2 %3").arg(e.eig).arg(e.residual).arg(e.orth)));
      e = compareWithLapack(74, 74, 74 * 74, 64, 4.0, 3, Work::Full, nullptr, nullptr, 3, method, 1e-12);
      QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < orthTol && e.invSqrt < 1e-10,
               qPrintable(QString("clusters: %1 %2 %3 %4").arg(e.eig).arg(e.residual).arg(e.orth).arg(e.invSqrt)));
      for (int n : {1, 2, 3, 4, 5, 32, 33, 34, 35, 64, 65, 66, 67, 73, 75, 79, 80, 81, 100}) {
        const int lda = n + 3;
        e = compareWithLapack(n, lda, (long long)lda * n + 7, 24, 4.0, 70 + n,
                              method == B && n <= 80 ? Work::Bisect : Work::Full, nullptr, nullptr, 3, method);
        QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < orthTol && e.invSqrt < 1e-10,
                 qPrintable(QString("n %1").arg(n)));
      }
      std::vector<double> V[2], W[2];
      for (int k = 0; k < 2; ++k)
        compareWithLapack(74, 74, 74 * 74, 64, 4.0, 5, Work::Full, &V[k], &W[k], k ? 3 : 4, method);
      const auto [dw, ds] = decompositionsAgree(74, V[0], W[0], V[1], W[1]);
      qInfo("%s: one warp vs block reduce, 64 blocks of 74: max |dW| / max W %.2e, C^-1/2 %.2e",
            method == B ? "bisect" : "chain", dw, ds);
      QVERIFY2(dw < 1e-13 && ds < 1e-10, qPrintable(QString("%1 %2").arg(dw).arg(ds)));
    }
  }

  void warpReduceEveryOrder() {
    // Every order the one-warp kernel takes (each split of a lane's three row slots),
    // a few blocks each, the bisection method's least workspace: small enough for
    // compute-sanitizer's memcheck and racecheck.
    for (int n = 1; n <= 80; ++n) {
      const Errors e = compareWithLapack(n, n + 1, (long long)(n + 1) * n + 3, 3, 4.0, 200 + n, Work::Bisect,
                                         nullptr, nullptr, 3, gpu::SyevMethod::Bisect);
      QVERIFY2(e.eig < 1e-12 && e.residual < 1e-12 && e.orth < 1e-13 && e.invSqrt < 1e-10,
               qPrintable(QString("n %1").arg(n)));
    }
  }

  void warpReduceFrameTimed() {
    // 23 500 blocks (a frame) and the engine's batch sizes, the bisection method three
    // ways in turn, three times each: the block reduce (0) with the workspace vector
    // kernel (the eighth round's passes 1 and 2), the one-warp reduce (3) with it, and the
    // one-warp reduce with the shared-memory vector kernel (eighvec): for
    // docs/benchmarks.md (Issue 12, ninth round). The frame's eigenvalues agree to
    // rounding between the reduce kernels, and to the bit between the vector kernels
    // (they differ only in where the vectors' scratch lives).
    const int n = 74, base = 300, batch = 23500;
    const std::vector<double> A = frameSizedBlocks(n, base, batch);
    Device d;
    allocateForFrame(d, n, batch);
    std::vector<double> Wr[3];
    const char* names[3] = {"block reduce, workspace vectors", "one-warp reduce, workspace vectors",
                            "one-warp reduce, shared vectors"};
    for (int small : {batch, 1235, 995})
      for (int rep = 0; rep < 9; ++rep) {
        const int way = rep % 3, reduce = way ? 3 : 0;
        check(cudaMemcpy(d.A, A.data(), std::size_t(n) * n * small * sizeof(double), cudaMemcpyHostToDevice), "H2D");
        const gpu::SyevProfile q = gpu::syevBatchedProfile(
            n, d.A, n, n * n, d.W, d.info, small, d.work, gpu::syevBatchedWorkspace(n, small), 0, 0, reduce,
            gpu::SyevMethod::Bisect, gpu::SyevOrtho::NewtonSchulz, gpu::SyevValues::DivisionFree,
            way == 2 ? gpu::SyevVectors::Shared : gpu::SyevVectors::Global);
        qInfo("%d blocks of %d, bisect, %s: %.3f ms (reduce %.3f, values + vectors %.3f [values %.3f], pass 3 "
              "%.3f); tridiagonal %.0f cycles a block", small, n, names[way], q.seconds * 1e3,
              q.reduceSeconds * 1e3, q.qlSeconds * 1e3, q.valuesSeconds * 1e3, q.applySeconds * 1e3,
              q.tridiagonalCycles);
        std::vector<int> info(small);
        check(cudaMemcpy(info.data(), d.info, small * sizeof(int), cudaMemcpyDeviceToHost), "D2H info");
        for (int b = 0; b < small; ++b) QCOMPARE(info[b], 0);
        if (small == batch && rep < 3) {
          Wr[way].resize(std::size_t(n) * batch);
          check(cudaMemcpy(Wr[way].data(), d.W, Wr[way].size() * sizeof(double), cudaMemcpyDeviceToHost), "D2H W");
        }
      }
    double dw = 0, wmax = 0;
    for (std::size_t k = 0; k < Wr[0].size(); ++k) {
      dw = std::max(dw, std::abs(Wr[0][k] - Wr[1][k]));
      wmax = std::max(wmax, std::abs(Wr[0][k]));
    }
    qInfo("frame eigenvalues, one warp vs block reduce: max |dW| / max W %.2e", dw / wmax);
    QVERIFY2(dw < 1e-13 * wmax, qPrintable(QString::number(dw / wmax)));
    QVERIFY(Wr[1] == Wr[2]);
  }

  void badArgumentsAreErrors() {
    double* work = nullptr;
    check(cudaMalloc(&work, 4096 * sizeof(double)), "cudaMalloc work");
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::syevBatched(0, nullptr, 1, 1, nullptr, nullptr, 1, work, 4096, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::syevBatched(gpu::kSyevMaxN + 1, nullptr, 200, 40000,
                                                              nullptr, nullptr, 1, work, 4096, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::syevBatched(10, nullptr, 5, 100, nullptr, nullptr, 1, work, 4096, nullptr));
    // Workspace: too small, missing, misaligned.
    const std::size_t least = gpu::syevBatchedMinWorkspace(10, 100);
    QVERIFY(least > 0 && least < 4096);
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::syevBatched(10, nullptr, 10, 100, nullptr, nullptr, 100, work,
                                                              least - 1, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::syevBatched(10, nullptr, 10, 100, nullptr, nullptr, 100, nullptr,
                                                              least, nullptr));
    QVERIFY_THROWS_EXCEPTION(std::exception, gpu::syevBatched(10, nullptr, 10, 100, nullptr, nullptr, 100, work + 1,
                                                              least, nullptr));
    cudaFree(work);
  }
};

QTEST_GUILESS_MAIN(TestBatchedEigh)
#include "test_batched_eigh.moc"
