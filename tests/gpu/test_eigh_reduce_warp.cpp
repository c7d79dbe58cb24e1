// syevBatched's one-warp tridiagonalisation (gpu/eigh_reduce_warp.cuh, SyevReduce::Warp)
// run on the host: 32 std::threads, one a lane, the warp's shuffles, sums and
// __syncwarp emulated with a std::barrier (the sums in the device's butterfly order).
// Checked against LAPACK: the eigenvalues of T against dsyevd's of A; the reflectors
// left in A through Q = H_0 ... H_{n-3}: Q^T A Q = T and Q^T Q = I to rounding (the
// backward error); the first step against dsytrd's. (T's later entries are not compared
// with dsytrd's: T is the Lanczos matrix of A from e_0, whose entries move by far more
// than eps ||A|| under rounding of that size once the Krylov basis is ill-conditioned,
// here by up to 1e-11 at 4 decades, in dsytrd as much as here.) Needs no GPU.
#include "core/extract/lapack.h"
#include "gpu/eigh_reduce_warp.cuh"

#include <QTest>
#include <algorithm>
#include <barrier>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

extern "C" {
void dsytrd_(const char* uplo, const int* n, double* a, const int* lda, double* d, double* e, double* tau,
             double* work, const int* lwork, int* info, std::size_t);
}

using namespace spex;
namespace rw = spex::gpu::reducewarp;

namespace {

struct WarpState {
  std::barrier<> bar{32};
  double val[32] = {};
};

// The device's warp interface (batched_eigh.cu DeviceWarp) for one lane on the host.
struct HostWarp {
  int l;
  WarpState* s;
  int lane() const { return l; }
  double sum(double x) {
    s->val[l] = x;
    s->bar.arrive_and_wait();
    double v[32];
    std::copy(s->val, s->val + 32, v);
    for (int o = 16; o > 0; o >>= 1) { // x += shfl_xor(x, o), every lane at once
      double nv[32];
      for (int a = 0; a < 32; ++a) nv[a] = v[a] + v[a ^ o];
      std::copy(nv, nv + 32, v);
    }
    s->bar.arrive_and_wait();
    return v[l];
  }
  double bcast(double x, int src) {
    s->val[l] = x;
    s->bar.arrive_and_wait();
    const double y = s->val[src];
    s->bar.arrive_and_wait();
    return y;
  }
  void sync() { s->bar.arrive_and_wait(); }
  void copy8(double* dst, const double* src) { *dst = *src; }
  void copyWait() {}
};

// Runs the kernel's code for one matrix: A (lda) in place, the workspace's d, e, tau.
void emulate(int n, std::vector<double>& A, int lda, std::vector<double>& d, std::vector<double>& e,
             std::vector<double>& tau) {
  std::vector<double> wk(2 + 3 * std::size_t(n), std::nan("")), sh(std::size_t(rw::sharedDoubles(n)), std::nan(""));
  WarpState st;
  std::vector<std::thread> lanes;
  for (int l = 0; l < 32; ++l)
    lanes.emplace_back([&, l] {
      HostWarp w{l, &st};
      rw::tridiagonalize(w, n, A.data(), lda, wk.data(), sh.data());
    });
  for (auto& t : lanes) t.join();
  d.assign(wk.begin() + 2, wk.begin() + 2 + n);
  e.assign(wk.begin() + 2 + n, wk.begin() + 2 + 2 * n);
  tau.assign(wk.begin() + 2 + 2 * n, wk.begin() + 2 + 3 * n);
}

// A random symmetric positive definite matrix (lower triangle; the upper one holds
// NaN, which the kernel must not read) with eigenvalues 10^(-decades * u), u uniform.
std::vector<double> randomSpd(int n, int lda, double decades, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  std::uniform_real_distribution<double> u;
  std::vector<double> Q(std::size_t(n) * n, 0.0), A(std::size_t(lda) * n, std::nan(""));
  for (int i = 0; i < n; ++i) Q[i + std::size_t(i) * n] = 1.0;
  for (int h = 0; h < 3; ++h) { // Q <- Q (I - 2 x x^T / x^T x), three random reflections
    std::vector<double> x(n);
    double xx = 0;
    for (double& xi : x) xx += (xi = g(rng)) * xi;
    for (int r = 0; r < n; ++r) {
      double s = 0;
      for (int c = 0; c < n; ++c) s += Q[r + std::size_t(c) * n] * x[c];
      for (int c = 0; c < n; ++c) Q[r + std::size_t(c) * n] -= 2 * s * x[c] / xx;
    }
  }
  std::vector<double> lam(n);
  for (double& l : lam) l = std::pow(10.0, -decades * u(rng));
  for (int c = 0; c < n; ++c)
    for (int r = c; r < n; ++r) {
      double s = 0;
      for (int k = 0; k < n; ++k) s += Q[r + std::size_t(k) * n] * lam[k] * Q[c + std::size_t(k) * n];
      A[r + std::size_t(c) * lda] = s;
    }
  return A;
}

struct Check {
  double first = 0, eig = 0, similarity = 0, orth = 0;
};

Check run(int n, int lda, double decades, unsigned seed) {
  const std::vector<double> A0 = randomSpd(n, lda, decades, seed);
  std::vector<double> A = A0, d, e, tau;
  emulate(n, A, lda, d, e, tau);
  auto a = [&](int r, int c) { return r >= c ? A0[r + std::size_t(c) * lda] : A0[c + std::size_t(r) * lda]; };
  double anorm = 0;
  for (int c = 0; c < n; ++c)
    for (int r = 0; r < n; ++r) anorm = std::max(anorm, std::abs(a(r, c)));
  // LAPACK's reduction of the same matrix.
  std::vector<double> L(std::size_t(n) * n), dl(n), el(std::max(n - 1, 1)), tl(std::max(n - 1, 1)), work(64 * n);
  for (int c = 0; c < n; ++c)
    for (int r = 0; r < n; ++r) L[r + std::size_t(c) * n] = a(r, c);
  int info = 0, lwork = int(work.size());
  dsytrd_("L", &n, L.data(), &n, dl.data(), el.data(), tl.data(), work.data(), &lwork, &info, 1);
  if (info) qFatal("dsytrd: %d", info);
  Check ck;
  ck.first = std::abs(d[0] - dl[0]) / anorm;
  if (n >= 2) ck.first = std::max(ck.first, std::abs(e[0] - el[0]) / anorm);
  if (n >= 3) ck.first = std::max(ck.first, std::abs(tau[0] - tl[0]));
  // Eigenvalues of T and of A (dsyevd on each).
  {
    std::vector<double> T(std::size_t(n) * n, 0.0), Ad(std::size_t(n) * n), wt(n), wa(n), work2;
    std::vector<int> iwork;
    for (int i = 0; i < n; ++i) {
      T[i + std::size_t(i) * n] = d[i];
      if (i + 1 < n) T[i + 1 + std::size_t(i) * n] = e[i];
      for (int r = 0; r < n; ++r) Ad[r + std::size_t(i) * n] = a(r, i);
    }
    if (lapack::syevd(n, T.data(), n, wt.data(), work2, iwork) || lapack::syevd(n, Ad.data(), n, wa.data(), work2, iwork))
      qFatal("dsyevd failed");
    for (int i = 0; i < n; ++i) ck.eig = std::max(ck.eig, std::abs(wt[i] - wa[i]) / anorm);
  }
  // Q = H_0 ... H_{n-3} from the reflectors left in A (v_i(i + 1) = 1, v_i(r) = A(r, i)).
  std::vector<double> Q(std::size_t(n) * n, 0.0);
  for (int i = 0; i < n; ++i) Q[i + std::size_t(i) * n] = 1.0;
  for (int i = n - 3; i >= 0; --i) { // Q <- H_i Q
    std::vector<double> v(n, 0.0);
    v[i + 1] = 1.0;
    for (int r = i + 2; r < n; ++r) v[r] = A[r + std::size_t(i) * lda];
    for (int c = 0; c < n; ++c) {
      double s = 0;
      for (int r = i + 1; r < n; ++r) s += v[r] * Q[r + std::size_t(c) * n];
      for (int r = i + 1; r < n; ++r) Q[r + std::size_t(c) * n] -= tau[i] * s * v[r];
    }
  }
  std::vector<double> AQ(std::size_t(n) * n, 0.0);
  for (int c = 0; c < n; ++c)
    for (int k = 0; k < n; ++k)
      for (int r = 0; r < n; ++r) AQ[r + std::size_t(c) * n] += a(r, k) * Q[k + std::size_t(c) * n];
  for (int c = 0; c < n; ++c)
    for (int r = 0; r < n; ++r) {
      double s = 0, o = 0;
      for (int k = 0; k < n; ++k) {
        s += Q[k + std::size_t(r) * n] * AQ[k + std::size_t(c) * n];
        o += Q[k + std::size_t(r) * n] * Q[k + std::size_t(c) * n];
      }
      const double t = r == c ? d[r] : r == c + 1 ? e[c] : c == r + 1 ? e[r] : 0.0;
      ck.similarity = std::max(ck.similarity, std::abs(s - t) / anorm);
      ck.orth = std::max(ck.orth, std::abs(o - (r == c ? 1.0 : 0.0)));
    }
  return ck;
}

} // namespace

class TestEighReduceWarp : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() { lapack::singleThreadedBlas(); }

  void matchesLapack() {
    // Every order the kernel takes (the slot boundaries of a lane's rows at n - 1 = 32
    // and 64 included), 4 decades; and the engine's 74 over 1 to 12 decades, lda > n.
    // Tolerances: Householder tridiagonalisation is backward stable with an error of a
    // few n eps ||A|| at worst (~1e-14 at n = 80; typically ~sqrt(n) eps): Q^T A Q - T,
    // Q^T Q - I and the eigenvalues (Weyl: |d lambda| <= ||E||) within 1e-13 relative to
    // max |A|; the first step is the same arithmetic as dsytd2's, to ~eps.
    Check worst;
    auto take = [&](const Check& c, const QString& what) {
      worst.first = std::max(worst.first, c.first);
      worst.eig = std::max(worst.eig, c.eig);
      worst.similarity = std::max(worst.similarity, c.similarity);
      worst.orth = std::max(worst.orth, c.orth);
      QVERIFY2(c.first < 1e-14 && c.eig < 1e-13 && c.similarity < 1e-13 && c.orth < 1e-13,
               qPrintable(QString("%1: first step %2, eigenvalues %3, Q^T A Q - T %4, Q^T Q - I %5")
                              .arg(what).arg(c.first).arg(c.eig).arg(c.similarity).arg(c.orth)));
    };
    for (int n = 1; n <= rw::kMaxN; ++n) take(run(n, n, 4.0, 100 + n), QString("n %1").arg(n));
    for (double decades : {1.0, 8.0, 12.0})
      for (unsigned seed = 0; seed < 3; ++seed)
        take(run(74, 77, decades, 7 * seed + unsigned(decades)), QString("74, %1 decades").arg(decades));
    qInfo("worst over n = 1 ... %d and 74 over 1 ... 12 decades, relative to max |A|: first step vs dsytrd "
          "%.2e, eigenvalues of T vs A's %.2e, Q^T A Q - T %.2e, Q^T Q - I %.2e", rw::kMaxN, worst.first,
          worst.eig, worst.similarity, worst.orth);
  }
};

QTEST_GUILESS_MAIN(TestEighReduceWarp)
#include "test_eigh_reduce_warp.moc"
