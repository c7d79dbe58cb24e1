// The bisection method's per-thread code (gpu/eigh_bisect.cuh) run on the host, phase
// by phase (each phase between two barriers run for every thread in turn, as the
// kernels do), against LAPACK's dsyevd: tridiagonals of n = 1 ... kSyevMaxN (random,
// split, clustered, graded, Wilkinson, diagonal) and random SPD 74 x 74 blocks
// (condition 10 ... 1e12, repeated and clustered eigenvalues) reduced by LAPACK's
// dsytrd, the vectors back-transformed by dorgtr's Q. Needs no GPU.
#include "core/extract/lapack.h"
#include "gpu/eigh_bisect.cuh"

#include <QTest>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

extern "C" {
void dsytrd_(const char* uplo, const int* n, double* a, const int* lda, double* d, double* e, double* tau,
             double* work, const int* lwork, int* info, std::size_t);
void dsyev_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
            const int* lwork, int* info, std::size_t, std::size_t);
void dorgtr_(const char* uplo, const int* n, double* a, const int* lda, const double* tau, double* work,
             const int* lwork, int* info, std::size_t);
}

using namespace spex;
namespace bi = spex::gpu::bisect;

namespace {

// Pass 3 by Newton-Schulz (true, the default) or by CholQR (the eighth round's kernel);
// n > 80 always CholQR (the device runs the chain there).
bool g_ns = true;

// How the eigenvalues are found (gpu::SyevValues): DivisionFree, syevSturmValuesKernel's
// bisection on the division-free count before pass 2 (the default); Newton, the same with
// Newton's steps once an eigenvalue is isolated; Ratio, pass 2's own quadsection.
enum class Values { DivisionFree, Newton, Ratio };
Values g_values = Values::DivisionFree;

// Pass 2's vectors (gpu::SyevVectors): false, twistedVector with D+ and D- in their own
// arrays (the workspace: Global); true, twistedVectorSlots with one column of scratch a
// thread (syevBisectSharedKernel's shared memory: Shared).
bool g_shared = false;

struct Result {
  std::vector<double> w; // ascending
  std::vector<double> V; // n x n column-major, eigenvectors of T
  int fail = 0, clustered = 0, borrowed = 0; // borrowed: cluster vectors in shared columns
  bool secondPass = false; // CholQR: a second pass; Newton-Schulz: any CholQR pass
  double steps = 0;
  int nsPasses = 0;       // Newton-Schulz passes before the last step
  std::vector<double> X;  // pass 2's vectors of T (element i of vector c at X[i n + c])
  std::vector<double> zt; // Newton-Schulz: the lanes' registers z (group, lane, row, column)
  int nc = 0;             // their columns a lane (the kernel's NC)
};

// syevOrthoNsKernel's phases on X (element i of vector c at X[i n + c]), every thread of
// a phase in turn: Gram, Newton-Schulz steps or CholQR passes, the last step into z.
template <int NC>
void emulateNs(int n, const std::vector<double>& X, Result& out) {
  constexpr int kZPerLane = 2 * NC;
  out.nc = NC;
  const int nt = bi::kNsThreads;
  std::vector<double> Xs(80 * bi::kNsLdx, 0.0), G(80 * bi::kNsLdx, 0.0);
  for (int c = 0; c < n; ++c)
    for (int i = 0; i < n; ++i) Xs[c * bi::kNsLdx + i] = X[std::size_t(i) * n + c];
  auto gram = [&] {
    double off = 0;
    for (int tid = 0; tid < nt; ++tid) off = std::max(off, bi::nsGram<NC>(n, Xs.data(), G.data(), tid >> 2, tid & 3));
    return off;
  };
  out.zt.assign(std::size_t(nt) * kZPerLane, 0.0);
  auto zOf = [&](int tid) -> double(&)[2][NC] {
    return *reinterpret_cast<double(*)[2][NC]>(out.zt.data() + std::size_t(tid) * kZPerLane);
  };
  double off = gram();
  int pass = 0;
  for (; off > bi::kNsTol && pass < bi::kNsMaxPasses; ++pass) {
    if (off > bi::kNsMax || pass >= bi::kNsCholAfter) {
      out.secondPass = true;
      for (int j = 0; j < n; ++j)
        for (int tid = 0; tid < nt; ++tid) bi::cholQrStepAny(n, G.data(), Xs.data(), j, tid, nt, &out.fail);
      for (int c = 0; c < n; ++c) {
        const double p = G[c * bi::kNsLdx + c];
        const double sc = p > 1e-20 ? 1.0 / std::sqrt(p) : 1.0;
        for (int r = 0; r < n; ++r) Xs[c * bi::kNsLdx + r] *= sc;
      }
    } else {
      for (int tid = 0; tid < nt; ++tid) bi::nsProduct<NC>(n, Xs.data(), G.data(), tid >> 2, tid & 3, zOf(tid));
      for (int tid = 0; tid < nt; ++tid) bi::nsStore<NC>(n, Xs.data(), tid >> 2, tid & 3, zOf(tid));
    }
    off = gram();
  }
  out.nsPasses = pass;
  for (int tid = 0; tid < nt; ++tid) bi::nsProduct<NC>(n, Xs.data(), G.data(), tid >> 2, tid & 3, zOf(tid));
  out.V.assign(std::size_t(n) * n, 0.0);
  for (int tid = 0; tid < nt; ++tid)
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < NC; ++j) {
        const int R = (tid >> 2) + bi::kNsGroups * r, c = (tid & 3) + 4 * j;
        if (R < n && c < n) out.V[std::size_t(R) * n + c] = zOf(tid)[r][j];
      }
}

// The kernel's last phase on the host: the reflectors of dsytrd ('L', as pass 1 leaves
// them: v_i(i + 1) = 1, v_i(c) = a(c, i) below) applied to the lanes' rows z, a group's
// 4 lanes at once with their partial sums added as the two shuffles add them. Returns
// Z = Q V (n x n column-major).
template <int NC>
std::vector<double> applyReflectorsEmulated(int n, const std::vector<double>& a, const std::vector<double>& tau,
                                            std::vector<double> zt) {
  constexpr int kZPerLane = 2 * NC;
  std::vector<double> V(std::size_t(std::max(n - 2, 1)) * bi::kNsLdv, 0.0);
  for (int i = 0; i + 2 < n; ++i)
    for (int c = 0; c < bi::kNsLdv; ++c)
      V[std::size_t(i) * bi::kNsLdv + c] = c == i + 1 ? 1.0 : (c > i + 1 && c < n ? a[c + std::size_t(i) * n] : 0.0);
  auto sum4 = [](double (&p)[4][2]) {
    for (int r = 0; r < 2; ++r) {
      const double s = (p[0][r] + p[1][r]) + (p[2][r] + p[3][r]);
      for (int x = 0; x < 4; ++x) p[x][r] = s;
    }
  };
  for (int g = 0; g < bi::kNsGroups; ++g) {
    auto& z = *reinterpret_cast<double(*)[4][2][NC]>(zt.data() + std::size_t(4 * g) * kZPerLane);
    bi::nsApplyReflectors<4>(n, V.data(), tau.data(), 0, z, sum4);
  }
  std::vector<double> Z(std::size_t(n) * n);
  for (int tid = 0; tid < bi::kNsThreads; ++tid)
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < NC; ++j) {
        const int R = (tid >> 2) + bi::kNsGroups * r, c = (tid & 3) + 4 * j;
        if (R < n && c < n) Z[c + std::size_t(R) * n] = zt[std::size_t(tid) * kZPerLane + r * NC + j];
      }
  return Z;
}

// syevSturmValuesKernel emulated, phase by phase for one matrix: thread 0's setup (the
// split), every thread's scaling of its row, every thread's bisection; lam[j] is
// eigenvalue j - s of row j's block [s, t], unscaled.
std::vector<double> sturmValues(int n, std::vector<double> d, std::vector<double> e, int* counts = nullptr,
                                bool newton = false) {
  e.resize(n, 0.0);
  std::vector<double> e2(n), lam(n);
  std::vector<bi::DiagE2> de(n);
  bi::Scalars sc;
  bi::setup(n, d.data(), e.data(), e2.data(), sc);
  const double scale = bi::unitScale(sc.tnorm);
  for (int j = 0; j < n; ++j) bi::scaleRowDE(d.data(), e.data(), j, scale, de.data());
  for (int j = 0; j < n; ++j) bi::scaleRowE(e.data(), j, scale);
  for (int j = 0; j < n; ++j) {
    int s, t;
    bi::blockOf(n, e.data(), j, s, t);
    lam[j] = (newton ? bi::newtonEigenvalueDivisionFree(de.data(), e.data(), s, t, j - s, sc.tnorm * scale, counts)
                     : bi::bisectEigenvalueDivisionFree(de.data(), e.data(), s, t, j - s, sc.tnorm * scale, counts)) *
             (1.0 / scale);
  }
  return lam;
}

// The kernels of the method, emulated: pass 2 (a thread per eigenvalue) and pass 3
// (Newton-Schulz, or 256 threads by CholQR twice).
Result emulate(int n, std::vector<double> d, std::vector<double> e) {
  Result out;
  e.resize(n, 0.0);
  std::vector<double> e2(n), lam(n), X(std::size_t(n) * n, 0.0), P(std::size_t(n) * n), M(std::size_t(n) * n);
  int counts = 0;
  if (g_values != Values::Ratio) lam = sturmValues(n, d, e, &counts, g_values == Values::Newton);
  bi::Scalars sc;
  bi::setup(n, d.data(), e.data(), e2.data(), sc);
  if (g_values == Values::Ratio)
    for (int j = 0; j < n; ++j) { // phase: eigenvalues
      int s, t;
      bi::blockOf(n, e.data(), j, s, t);
      lam[j] = bi::bisectEigenvalue(d.data(), e.data(), e2.data(), s, t, j - s, sc, &counts);
    }
  out.steps = double(counts) / std::max(n, 1);
  out.w.resize(n);
  std::vector<int> rank(n), member(n);
  std::vector<double> shift(n);
  int maxMember = -1;
  for (int j = 0; j < n; ++j) { // phase: ranks, cluster members, the vectors of members 0 / none
    int s, t;
    bi::blockOf(n, e.data(), j, s, t);
    rank[j] = bi::rankOf(n, lam.data(), j);
    out.w[rank[j]] = lam[j];
    member[j] = bi::clusterMember(lam.data(), s, t, j, sc, shift[j]);
    maxMember = std::max(maxMember, member[j]);
  }
  // Shared: the kernel's scratch Sh in P's place (element i of thread j's column at
  // P[i n + j]); cluster members' x in borrowed columns of it (col) where they fit.
  std::vector<int> bc(n, -1), col(rank);
  if (g_shared && maxMember >= 0)
    for (int j = 0; j < n; ++j) {
      bc[j] = bi::borrowedColumn(n, member.data(), j);
      if (bc[j] >= 0) col[j] = bc[j];
      out.borrowed += bc[j] >= 0;
    }
  for (int m = -1; m <= maxMember; ++m) // one phase a member index
    for (int j = 0; j < n; ++j) {
      if (member[j] != m) continue;
      int s, t;
      bi::blockOf(n, e.data(), j, s, t);
      out.clustered += m >= 0;
      // X as the device holds it: element i of vector rank(j) at X[i * n + rank(j)].
      if (g_shared && m >= 0 && bc[j] >= 0)
        bi::twistedVectorSlots(n, d.data(), e.data(), e2.data(), s, t, shift[j], sc, true, j,
                               bi::Col{P.data(), n, bc[j]}, bi::Col{P.data(), n, j}, col.data(), m);
      else if (g_shared)
        bi::twistedVectorSlots(n, d.data(), e.data(), e2.data(), s, t, shift[j], sc, m >= 0, j,
                               bi::Col{X.data(), n, rank[j]}, bi::Col{P.data(), n, j}, col.data(), std::max(m, 0));
      else
        bi::twistedVector(d.data(), e.data(), e2.data(), s, t, shift[j], sc, m >= 0, j,
                          bi::Col{X.data(), n, rank[j]}, bi::Col{P.data(), n, j}, bi::Col{M.data(), n, j},
                          rank.data(), std::max(m, 0));
    }
  for (int j = 0; j < n; ++j) // phase: the borrowed columns out to X
    if (bc[j] >= 0)
      for (int i = 0; i < n; ++i) X[std::size_t(i) * n + rank[j]] = P[std::size_t(i) * n + bc[j]];
  out.X = X;
  if (g_ns && n <= bi::kOrthoMaxN) {
    // The kernel's choice: 19 columns a lane where they cover n.
    if (n <= 4 * 19)
      emulateNs<19>(n, X, out);
    else
      emulateNs<20>(n, X, out);
    return out;
  }
  // Pass 3 by CholQR: X column-major in "shared memory" (ldx = n | 1), CholQR twice.
  const int ldx = n | 1, ldg = n | 1, nt = bi::kOrthoThreads;
  std::vector<double> Xs(std::size_t(n) * ldx), G(std::size_t(n) * ldg);
  for (int c = 0; c < n; ++c)
    for (int r = 0; r < n; ++r) Xs[c * ldx + r] = X[std::size_t(r) * n + c];
  for (int pass = 0; pass < 2; ++pass) {
    double off = 0;
    if (n <= bi::kOrthoMaxN)
      for (int tid = 0; tid < nt; ++tid) off = std::max(off, bi::gramTile(n, Xs.data(), ldx, G.data(), ldg, tid));
    else
      for (int i = 0; i < n; ++i)
        for (int l = 0; l < n; ++l) {
          double s = 0;
          for (int r = 0; r < n; ++r) s += Xs[i * ldx + r] * Xs[l * ldx + r];
          G[i * ldg + l] = s;
          off = std::max(off, std::abs(s - (i == l ? 1.0 : 0.0)));
        }
    if (pass == 0) out.secondPass = off > bi::kSecondPass; // as the kernel: judged on pass 0's Gram
    for (int j = 0; j < n; ++j)
      for (int tid = 0; tid < nt; ++tid) bi::cholQrStep(n, G.data(), ldg, Xs.data(), ldx, j, tid, &out.fail);
    for (int tid = 0; tid < nt; ++tid) bi::cholScale(n, G.data(), ldg, Xs.data(), ldx, tid, nt);
    if (!out.secondPass) break;
  }
  out.V.resize(std::size_t(n) * n);
  for (int c = 0; c < n; ++c)
    for (int r = 0; r < n; ++r) out.V[std::size_t(c) * n + r] = Xs[c * ldx + r];
  return out;
}

struct Errors {
  double eig = 0, residual = 0, orth = 0, invSqrt = 0;
  void max(const Errors& o) {
    eig = std::max(eig, o.eig);
    residual = std::max(residual, o.residual);
    orth = std::max(orth, o.orth);
    invSqrt = std::max(invSqrt, o.invSqrt);
  }
};

// Symmetric S (n x n column-major, full) against the decomposition (w, V): eigenvalues
// against dsyevd's, residual |S v - w v| and orthogonality (relative to max |w|), and
// with spd, C^-1/2 against dsyevd's (relative Frobenius).
Errors compare(int n, const std::vector<double>& S, const std::vector<double>& w, const std::vector<double>& V,
               bool spd) {
  Errors err;
  std::vector<double> L = S, wl(n), work;
  std::vector<int> iwork;
  if (lapack::syevd(n, L.data(), n, wl.data(), work, iwork) != 0) qFatal("dsyevd failed");
  double wmax = 0;
  for (double x : wl) wmax = std::max(wmax, std::abs(x));
  if (wmax == 0) wmax = 1;
  for (int k = 0; k < n; ++k) {
    if (k && w[k] < w[k - 1]) qFatal("eigenvalues not ascending");
    err.eig = std::max(err.eig, std::abs(w[k] - wl[k]) / wmax);
    double r2 = 0;
    for (int i = 0; i < n; ++i) {
      double s = -w[k] * V[i + std::size_t(k) * n];
      for (int j = 0; j < n; ++j) s += S[i + std::size_t(j) * n] * V[j + std::size_t(k) * n];
      r2 += s * s;
    }
    err.residual = std::max(err.residual, std::sqrt(r2) / wmax);
    for (int j = 0; j <= k; ++j) {
      double s = 0;
      for (int i = 0; i < n; ++i) s += V[i + std::size_t(k) * n] * V[i + std::size_t(j) * n];
      err.orth = std::max(err.orth, std::abs(s - (j == k ? 1.0 : 0.0)));
    }
  }
  if (spd) {
    double num = 0, den = 0;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < n; ++i) {
        double g = 0, l = 0;
        for (int k = 0; k < n; ++k) {
          g += V[i + std::size_t(k) * n] * V[j + std::size_t(k) * n] / std::sqrt(w[k]);
          l += L[i + std::size_t(k) * n] * L[j + std::size_t(k) * n] / std::sqrt(wl[k]);
        }
        num += (g - l) * (g - l);
        den += l * l;
      }
    err.invSqrt = std::sqrt(num / den);
  }
  return err;
}

Errors tridiagonalCase(int n, const std::vector<double>& d, const std::vector<double>& e, Result* res = nullptr) {
  std::vector<double> S(std::size_t(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    S[i + std::size_t(i) * n] = d[i];
    if (i + 1 < n) S[i + 1 + std::size_t(i) * n] = S[i + std::size_t(i + 1) * n] = e[i];
  }
  Result r = emulate(n, d, e);
  if (r.fail) qFatal("n %d: CholQR breakdown at %d", n, r.fail);
  const Errors err = compare(n, S, r.w, r.V, false);
  if (res) *res = std::move(r);
  return err;
}

// The eigenvalues of the tridiagonal (d, e) by LAPACK's dsyevd on it as a dense
// matrix, ascending.
std::vector<double> lapackTridiagonalEigenvalues(const std::vector<double>& d, const std::vector<double>& e) {
  const int n = int(d.size());
  std::vector<double> S(std::size_t(n) * n, 0.0), w(n), work;
  std::vector<int> iwork;
  for (int i = 0; i < n; ++i) {
    S[i + std::size_t(i) * n] = d[i];
    if (i + 1 < n) S[i + 1 + std::size_t(i) * n] = S[i + std::size_t(i + 1) * n] = e[i];
  }
  if (lapack::syevd(n, S.data(), n, w.data(), work, iwork) != 0) qFatal("dsyevd failed");
  return w;
}

// V diag(lambda) V^T with V from a random symmetric matrix and lambda log-uniform over
// `decades` below 10^U(-3, 3); kind 1: 3-fold and 2-fold repeated eigenvalues; kind 2:
// half the eigenvalues within rel of one value; kind 3: eigenvalues in pairs within rel.
std::vector<double> randomSpd(int n, double decades, int kind, double rel, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> S(std::size_t(n) * n), w(n), lam(n), work, A(std::size_t(n) * n);
  std::vector<int> iwork;
  for (int j = 0; j < n; ++j)
    for (int i = j; i < n; ++i) S[i + std::size_t(j) * n] = S[j + std::size_t(i) * n] = u(rng) - 0.5;
  if (lapack::syevd(n, S.data(), n, w.data(), work, iwork) != 0) qFatal("dsyevd failed");
  const double scale = std::pow(10.0, 6.0 * u(rng) - 3.0);
  for (int k = 0; k < n; ++k) lam[k] = scale * std::pow(10.0, -decades * u(rng));
  if (kind == 1 && n >= 6) {
    lam[1] = lam[2] = lam[0];
    lam[4] = lam[3];
  } else if (kind == 2) {
    for (int k = 0; k < n / 2; ++k) lam[k] = lam[0] * (1 + rel * u(rng));
  } else if (kind == 3) {
    for (int k = 0; k + 1 < n; k += 2) lam[k + 1] = lam[k] * (1 + rel * u(rng));
  }
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int k = 0; k < n; ++k) s += S[i + std::size_t(k) * n] * lam[k] * S[j + std::size_t(k) * n];
      A[i + std::size_t(j) * n] = s;
    }
  for (int j = 0; j < n; ++j) // exactly symmetric
    for (int i = j + 1; i < n; ++i) A[j + std::size_t(i) * n] = A[i + std::size_t(j) * n];
  return A;
}

// dsytrd + the emulated method + Q from dorgtr (Newton-Schulz: the reflectors applied by
// the kernel's code, checked against Q V by dgemm).
Errors spdCase(int n, const std::vector<double>& A, Result* res = nullptr) {
  std::vector<double> Q = A, d(n), e(std::max(n - 1, 1)), tau(std::max(n - 1, 1)), work(64 * n + 64);
  const int lwork = int(work.size());
  int info = 0;
  dsytrd_("L", &n, Q.data(), &n, d.data(), e.data(), tau.data(), work.data(), &lwork, &info, 1);
  if (info) qFatal("dsytrd %d", info);
  const std::vector<double> reflectors = Q;
  dorgtr_("L", &n, Q.data(), &n, tau.data(), work.data(), &lwork, &info, 1);
  if (info) qFatal("dorgtr %d", info);
  e.resize(n, 0.0);
  Result r = emulate(n, d, e);
  if (r.fail) qFatal("n %d: CholQR breakdown at %d", n, r.fail);
  std::vector<double> Z(std::size_t(n) * n);
  const double one = 1, zero = 0;
  dgemm_("N", "N", &n, &n, &n, &one, Q.data(), &n, r.V.data(), &n, &zero, Z.data(), &n, 1, 1);
  if (!r.zt.empty()) {
    // Both are Q V to rounding: ~n eps with unit columns (bound 1e-13, 20x that).
    std::vector<double> Zr = r.nc == 19 ? applyReflectorsEmulated<19>(n, reflectors, tau, r.zt)
                                        : applyReflectorsEmulated<20>(n, reflectors, tau, r.zt);
    double diff = 0;
    for (std::size_t k = 0; k < Z.size(); ++k) diff = std::max(diff, std::abs(Zr[k] - Z[k]));
    if (!(diff < 1e-13)) qFatal("n %d: reflectors applied in registers differ from Q V by %.2e", n, diff);
    Z = std::move(Zr);
  }
  const Errors err = compare(n, A, r.w, Z, true);
  if (res) *res = std::move(r);
  return err;
}

void report(const char* what, const Errors& e) {
  const char* values = g_values == Values::Ratio ? "ratio" : g_values == Values::Newton ? "newton" : "divfree";
  qInfo("%s%s%s: %-40s eigenvalues %.2e, residual %.2e, orthogonality %.2e, C^-1/2 %.2e", g_ns ? "NS, " : "CholQR, ",
        values, g_shared ? ", shared vectors" : "", what, e.eig, e.residual, e.orth, e.invSqrt);
}

// The criteria of test_batched_eigh (eigenvalues, residuals within 1e-12 of the largest)
// and the brief's orthogonality: ~ eps n is what QL and dsyevd reach.
void verify(const Errors& e, double orth = 1e-14) {
  QVERIFY2(e.eig < 1e-12, qPrintable(QString::number(e.eig)));
  QVERIFY2(e.residual < 1e-12, qPrintable(QString::number(e.residual)));
  QVERIFY2(e.orth < orth, qPrintable(QString::number(e.orth)));
}

} // namespace

// Every slot runs both pass-3 methods
// and each way to the eigenvalues (with CholQR: the default's and the eighth round's).
// useRowsMethod() in the slot sets the emulation to its row's method.
void orthoData() {
  QTest::addColumn<bool>("ns");
  QTest::addColumn<int>("values");
  QTest::addColumn<bool>("shared");
  QTest::newRow("newton-schulz, divfree") << true << int(Values::DivisionFree) << false;
  QTest::newRow("newton-schulz, newton") << true << int(Values::Newton) << false;
  QTest::newRow("newton-schulz, ratio") << true << int(Values::Ratio) << false;
  QTest::newRow("cholqr, divfree") << false << int(Values::DivisionFree) << false;
  QTest::newRow("cholqr, ratio") << false << int(Values::Ratio) << false;
  QTest::newRow("newton-schulz, divfree, shared vectors") << true << int(Values::DivisionFree) << true;
}

// The current data row's method (orthoData's columns) for the emulation.
void useRowsMethod() {
  QFETCH(bool, ns);
  g_ns = ns;
  QFETCH(int, values);
  g_values = Values(values);
  QFETCH(bool, shared);
  g_shared = shared;
}

class TestEighBisect : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() { lapack::singleThreadedBlas(); }

  void randomTridiagonals_data() { orthoData(); }
  void randomTridiagonals() {
    useRowsMethod();
    std::mt19937_64 rng(11);
    std::normal_distribution<double> g;
    Errors all;
    for (int n = 1; n <= 160; n += (n < 12 ? 1 : 7)) {
      std::vector<double> d(n), e(n, 0.0);
      for (int i = 0; i < n; ++i) d[i] = g(rng);
      for (int i = 0; i + 1 < n; ++i) e[i] = g(rng);
      all.max(tridiagonalCase(n, d, e));
    }
    report("random tridiagonals n = 1 ... 160", all);
    verify(all);
  }

  void specialTridiagonals_data() { orthoData(); }
  void specialTridiagonals() {
    useRowsMethod();
    Errors all;
    std::mt19937_64 rng(12);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int n : {2, 3, 8, 21, 41, 74, 80, 81, 160}) {
      const int m = (n - 1) / 2;
      std::vector<double> d(n), e(n, 0.0);
      // Wilkinson W+: pairs of eigenvalues that agree to far below eps.
      for (int i = 0; i < n; ++i) d[i] = std::abs(m - i);
      for (int i = 0; i + 1 < n; ++i) e[i] = 1.0;
      Errors w = tridiagonalCase(n, d, e);
      all.max(w);
      // Already split into blocks with repeated eigenvalues (the same block three times).
      for (int i = 0; i < n; ++i) d[i] = double(i % 5) - 2.0;
      for (int i = 0; i + 1 < n; ++i) e[i] = (i % 5 == 4) ? 0.0 : 0.5;
      all.max(tridiagonalCase(n, d, e));
      // Graded over 10 decades.
      for (int i = 0; i < n; ++i) d[i] = std::pow(10.0, -10.0 * i / std::max(n - 1, 1));
      for (int i = 0; i + 1 < n; ++i) e[i] = 0.3 * std::sqrt(d[i] * d[i + 1]);
      all.max(tridiagonalCase(n, d, e));
      // Diagonal (every e zero), with ties.
      for (int i = 0; i < n; ++i) d[i] = double(i % 3);
      for (int i = 0; i + 1 < n; ++i) e[i] = 0.0;
      all.max(tridiagonalCase(n, d, e));
      // Tiny off-diagonal: nearly split, clustered within ~1e-12.
      for (int i = 0; i < n; ++i) d[i] = 1.0 + 1e-12 * u(rng);
      for (int i = 0; i + 1 < n; ++i) e[i] = 1e-13 * u(rng);
      all.max(tridiagonalCase(n, d, e));
      // The zero matrix.
      std::fill(d.begin(), d.end(), 0.0);
      all.max(tridiagonalCase(n, d, e));
    }
    report("Wilkinson, split, graded, diagonal, clustered", all);
    verify(all);
  }

  void divisionFreeCounts() {
    // The division-free Sturm count (eigh_bisect.cuh) against the true count #(lambda < x)
    // from LAPACK's eigenvalues, wherever x is further than 1e-12 ||T|| from every
    // eigenvalue (the count's backward error is a few eps ||T||): random unreduced
    // tridiagonals, graded ones (the determinants shrink by ~1e-10 a row: the rescaling's
    // work), and off-diagonals of ~2 eps ||T|| (just above the split) with d constant, the
    // steepest decay the rescaling has to catch (p(i) = -e^2 p(i - 2) at x = d).
    std::mt19937_64 rng(16);
    std::normal_distribution<double> g;
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const int n = 74;
    int checked = 0;
    for (int kind = 0; kind < 3; ++kind)
      for (int rep = 0; rep < 8; ++rep) {
        std::vector<double> d(n), e(n, 0.0), e2(n, 0.0);
        for (int i = 0; i < n; ++i)
          d[i] = kind == 0 ? g(rng) : kind == 1 ? std::pow(10.0, -10.0 * i / (n - 1)) : 1.0;
        for (int i = 0; i + 1 < n; ++i)
          e[i] = kind == 0   ? g(rng)
                 : kind == 1 ? 0.3 * std::sqrt(d[i] * d[i + 1]) * (u(rng) < 0.5 ? -1 : 1)
                             : 2.0 * bi::kEpsB * (1 + u(rng)) * (u(rng) < 0.5 ? -1 : 1);
        const std::vector<double> w = lapackTridiagonalEigenvalues(d, e);
        bi::Scalars sc;
        bi::setup(n, d.data(), e.data(), e2.data(), sc);
        int s0, t0;
        bi::blockOf(n, e.data(), 0, s0, t0);
        QCOMPARE(t0, n - 1); // unreduced
        const double scale = bi::unitScale(sc.tnorm);
        QVERIFY(sc.tnorm * scale >= 1.0 && sc.tnorm * scale < 2.0);
        std::vector<bi::DiagE2> de(n);
        for (int i = 0; i < n; ++i) bi::scaleRowDE(d.data(), e.data(), i, scale, de.data());
        std::vector<double> xs;
        for (int k = 0; k < 200; ++k) xs.push_back((w[0] - 0.1 * sc.tnorm) + (w[n - 1] - w[0] + 0.2 * sc.tnorm) * u(rng));
        for (int k = 0; k < n; ++k)
          for (double off : {-1e-9, 1e-9, -1e-11, 1e-11}) xs.push_back(w[k] + off * sc.tnorm);
        for (double x : xs) {
          double gap = 1e300;
          int truth = 0;
          for (double l : w) {
            gap = std::min(gap, std::abs(l - x));
            truth += l < x;
          }
          if (gap <= 1e-12 * sc.tnorm) continue;
          const int c = bi::sturmCountDivisionFree(de.data(), 0, n - 1, x * scale);
          if (c != truth) qFatal("kind %d: count %d at x = %.17g, LAPACK %d (gap %.2e)", kind, c, x, truth, gap);
          ++checked;
        }
        if (kind == 2) {
          // At x = d (closer to every eigenvalue than 1e-12 ||T||, so not checked above)
          // every other determinant is zero: T - d has eigenvalues in +- pairs and n is
          // even, so exactly n / 2 are negative.
          QCOMPARE(bi::sturmCountDivisionFree(de.data(), 0, n - 1, 1.0 * scale), n / 2);
        }
      }
    qInfo("division-free counts: %d points checked against LAPACK's eigenvalues", checked);
    QVERIFY(checked > 10000);
  }

  void divisionFreeValuesAtExtremeScales() {
    // The power-of-two scalings: the same tridiagonals times 1e-300 ... 1e300 (where e^2
    // alone under- or overflows) give eigenvalues within 2e-15 ||T|| of LAPACK's on the
    // unscaled matrix, times the scale (LAPACK's own scaling at 1e300 costs it accuracy).
    std::mt19937_64 rng(17);
    std::normal_distribution<double> g;
    const int n = 74;
    double worst = 0;
    for (double scale : {1e-300, 1e-200, 1e-100, 1.0, 1e100, 1e200, 1e300}) {
      double atScale = 0;
      for (int rep = 0; rep < 4; ++rep) {
        std::vector<double> d0(n), e0(n, 0.0), d(n), e(n, 0.0);
        for (int i = 0; i < n; ++i) d0[i] = g(rng);
        for (int i = 0; i + 1 < n; ++i) e0[i] = g(rng);
        for (int i = 0; i < n; ++i) {
          d[i] = d0[i] * scale;
          e[i] = e0[i] * scale;
        }
        for (bool newton : {false, true}) {
        std::vector<double> lam = sturmValues(n, d, e, nullptr, newton);
        std::sort(lam.begin(), lam.end());
        const std::vector<double> w = lapackTridiagonalEigenvalues(d0, e0);
        const double wmax = std::max(std::abs(w[0]), std::abs(w[n - 1]));
        for (int k = 0; k < n; ++k) {
          QVERIFY2(std::isfinite(lam[k]), qPrintable(QString("scale %1").arg(scale)));
          atScale = std::max(atScale, std::abs(lam[k] / scale - w[k]) / wmax);
        }
        }
      }
      qInfo("division-free values at scale %g: eigenvalues within %.2e of the largest", scale, atScale);
      worst = std::max(worst, atScale);
    }
    // The scaled entries' roundings (eps each), the bisection width and the count's
    // backward error (a few eps ||T|| each, ||T|| <= ~2.5 max |lambda| here): ~4e-15.
    QVERIFY2(worst < 4e-15, qPrintable(QString::number(worst)));
  }

  void spdBlocks_data() { orthoData(); }
  void spdBlocks() {
    useRowsMethod();
    // The engine's blocks: 74 x 74 SPD, condition 1e1 ... 1e12.
    std::mt19937_64 rng(13);
    for (double decades : {1.0, 4.0, 8.0, 12.0}) {
      Errors all;
      double steps = 0;
      int clustered = 0, second = 0, nsPasses = 0;
      for (int b = 0; b < 24; ++b) {
        Result r;
        all.max(spdCase(74, randomSpd(74, decades, b % 2, 0, rng), &r));
        steps += r.steps / 24;
        clustered += r.clustered;
        second += r.secondPass;
        nsPasses += r.nsPasses;
      }
      qInfo("%2.0f decades: %.1f quadsection steps an eigenvalue, %d vectors by the cluster path, %d of 24 "
            "matrices with %s CholQR pass, %d Newton-Schulz passes before the last", decades, steps, clustered,
            second, g_ns ? "a" : "a second", nsPasses);
      report(qPrintable(QString("SPD 74, %1 decades").arg(decades)), all);
      verify(all);
      // C^-1/2 carries ~eps cond / 2 relative error in either solver (test_batched_eigh
      // asks 1e-10 over 4 decades).
      if (decades <= 4) QVERIFY2(all.invSqrt < 1e-10, qPrintable(QString::number(all.invSqrt)));
    }
  }

  void clusteredBlocks_data() { orthoData(); }
  void clusteredBlocks() {
    useRowsMethod();
    std::mt19937_64 rng(14);
    for (double rel : {1e-9, 1e-12, 1e-15}) {
      Errors all;
      int clustered = 0, second = 0, nsPasses = 0;
      for (int b = 0; b < 16; ++b) {
        Result r;
        all.max(spdCase(74, randomSpd(74, 4.0, 2 + b % 2, rel, rng), &r));
        clustered += r.clustered;
        second += r.secondPass;
        nsPasses += r.nsPasses;
      }
      report(qPrintable(QString("SPD 74, clusters within %1 (%2 cluster vectors, %3 of 16 %4 CholQR, %5 NS passes)")
                            .arg(rel).arg(clustered).arg(second).arg(g_ns ? "with" : "second").arg(nsPasses)), all);
      verify(all);
      QVERIFY2(all.invSqrt < 1e-10, qPrintable(QString::number(all.invSqrt)));
    }
  }


  void deviceTestClusters_data() { orthoData(); }
  void deviceTestClusters() {
    useRowsMethod();
    // test_batched_eigh's construction (bisectMatchesLapack, seed 3, clusters within 1e-9
    // relative on odd matrices, a 3- and a 2-fold eigenvalue on every fourth), here on
    // the host: the same matrices the device test decomposes.
    const int n = 74, batch = 64;
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<double> S(std::size_t(n) * n), w(n), lam(n), work, A(std::size_t(n) * n);
    std::vector<int> iwork;
    Errors all, ql;
    for (int b = 0; b < batch; ++b) {
      for (int j = 0; j < n; ++j)
        for (int i = j; i < n; ++i) S[i + std::size_t(j) * n] = S[j + std::size_t(i) * n] = u(rng) - 0.5;
      if (lapack::syevd(n, S.data(), n, w.data(), work, iwork) != 0) qFatal("dsyevd failed");
      const double scale = std::pow(10.0, 6.0 * u(rng) - 3.0);
      for (int k = 0; k < n; ++k) lam[k] = scale * std::pow(10.0, -4.0 * u(rng));
      if (b % 4 == 0) {
        lam[1] = lam[2] = lam[0];
        lam[4] = lam[3];
      }
      if (b % 2 == 1)
        for (int k = 1; k < n / 2; ++k) lam[k] = lam[0] * (1 + 1e-9 * u(rng));
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
          double s = 0;
          for (int k = 0; k < n; ++k) s += S[i + std::size_t(k) * n] * lam[k] * S[j + std::size_t(k) * n];
          A[i + std::size_t(j) * n] = s;
        }
      for (int j = 0; j < n; ++j)
        for (int i = j + 1; i < n; ++i) A[j + std::size_t(i) * n] = A[i + std::size_t(j) * n];
      const Errors e = spdCase(n, A);
      // LAPACK's QL (dsyev, the chain's algorithm) against dsyevd on the same matrix: the
      // scale of C^-1/2 differences any backward-stable solver shows here.
      std::vector<double> Vq = A, wq(n), wk(64 * n);
      int lw = int(wk.size()), info = 0;
      dsyev_("V", "L", &n, Vq.data(), &n, wq.data(), wk.data(), &lw, &info, 1, 1);
      const Errors q = compare(n, A, wq, Vq, true);
      ql.max(q);
      if (getenv("BI_DEBUG"))
        fprintf(stderr, "b %d residual %.2e C^-1/2 %.2e (dsyev %.2e)\n", b, e.residual, e.invSqrt, q.invSqrt);
      all.max(e);
    }
    report("test_batched_eigh's clusters within 1e-9", all);
    report("  the same by LAPACK's QL (dsyev)", ql);
    verify(all);
    QVERIFY2(all.invSqrt < 1e-10, qPrintable(QString::number(all.invSqrt)));
  }

  // twistedVectorSlots (one scratch column a thread, D- over D+ below the twist, D+
  // recomputed above it) does twistedVector's arithmetic in the same order: pass 2's
  // vectors must be the same to the bit, cluster members included (their solves read
  // the same D+ and D-), on tridiagonals with isolated, split, tied, clustered and
  // graded spectra and on SPD blocks with clusters within 1e-9 ... 1e-15.
  void sharedVectorsMatchToTheBit() {
    g_ns = true;
    g_values = Values::DivisionFree;
    int cases = 0, clustered = 0, borrowed = 0;
    auto same = [&](auto run) {
      Result a, b;
      g_shared = false;
      run(&a);
      g_shared = true;
      run(&b);
      g_shared = false;
      QCOMPARE(a.X.size(), b.X.size());
      QVERIFY(std::memcmp(a.X.data(), b.X.data(), a.X.size() * sizeof(double)) == 0);
      QVERIFY(std::memcmp(a.w.data(), b.w.data(), a.w.size() * sizeof(double)) == 0);
      ++cases;
      clustered += a.clustered;
      borrowed += b.borrowed;
    };
    std::mt19937_64 rng(16);
    std::normal_distribution<double> g;
    for (int n = 1; n <= 160; n += (n < 12 ? 1 : 7)) {
      std::vector<double> d(n), e(n, 0.0);
      for (int i = 0; i < n; ++i) d[i] = g(rng);
      for (int i = 0; i + 1 < n; ++i) e[i] = g(rng);
      same([&](Result* r) { tridiagonalCase(n, d, e, r); });
      // Wilkinson W+ (pairs closer than eps), split blocks repeated, diagonal with ties,
      // graded over 10 decades.
      const int m = (n - 1) / 2;
      for (int i = 0; i < n; ++i) d[i] = std::abs(m - i);
      for (int i = 0; i + 1 < n; ++i) e[i] = 1.0;
      same([&](Result* r) { tridiagonalCase(n, d, e, r); });
      for (int i = 0; i < n; ++i) d[i] = double(i % 5) - 2.0;
      for (int i = 0; i + 1 < n; ++i) e[i] = (i % 5 == 4) ? 0.0 : 0.5;
      same([&](Result* r) { tridiagonalCase(n, d, e, r); });
      for (int i = 0; i < n; ++i) d[i] = double(i % 3);
      for (int i = 0; i + 1 < n; ++i) e[i] = 0.0;
      same([&](Result* r) { tridiagonalCase(n, d, e, r); });
      for (int i = 0; i < n; ++i) d[i] = std::pow(10.0, -10.0 * i / std::max(n - 1, 1));
      for (int i = 0; i + 1 < n; ++i) e[i] = 0.3 * std::sqrt(d[i] * d[i + 1]);
      same([&](Result* r) { tridiagonalCase(n, d, e, r); });
    }
    for (double rel : {0.0, 1e-9, 1e-12, 1e-15})
      for (int b = 0; b < 6; ++b) {
        const std::vector<double> A = randomSpd(74, 4.0, rel > 0 ? 2 + b % 2 : b % 2, rel, rng);
        same([&](Result* r) { spdCase(74, A, r); });
      }
    qInfo("shared vs global scratch: %d cases, %d cluster vectors (%d in borrowed shared columns), pass 2's "
          "vectors the same to the bit", cases, clustered, borrowed);
    // Both cluster paths were exercised: borrowed columns and x in the workspace.
    QVERIFY(borrowed > 0 && borrowed < clustered);
  }

  void everyOrder_data() { orthoData(); }
  void everyOrder() {
    useRowsMethod();
    std::mt19937_64 rng(15);
    Errors all;
    for (int n = 1; n <= 160; ++n) all.max(spdCase(n, randomSpd(n, 4.0, n % 2, 0, rng)));
    report("SPD n = 1 ... 160, 4 decades", all);
    verify(all);
    QVERIFY2(all.invSqrt < 1e-10, qPrintable(QString::number(all.invSqrt)));
  }
};

QTEST_GUILESS_MAIN(TestEighBisect)
#include "test_eigh_bisect.moc"
