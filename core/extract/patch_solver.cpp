#include "patch_solver.h"

#include "../clones.h"
#include "../image.h"
#include "lapack.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace spex {

void PatchSolver::spots(const Patch& p, const PatchPlan& plan, const GaussHermitePsf& psf,
                        SpotCache* cache) {
  const int nfib = p.nfiberPad, nw = p.nwavePad;
  m_nx = psf.spotNx();
  m_ny = psf.spotNy();
  m_spots.resize(std::size_t(nfib) * nw);
  m_sv.resize(std::size_t(nfib) * nw);
  for (int s = 0; s < nfib; ++s)
    for (int k = 0; k < nw; ++k) {
      const std::size_t a = std::size_t(s) * nw + k;
      Spot& own = m_spots[a];
      if (cache) {
        m_sv[a] = cache->get(p.fiberPad0 + s, p.wavePad0 + k, own);
      } else {
        psf.spotInto(p.fiberPad0 + s, plan.waveAt(p.wavePad0 + k), own);
        m_sv[a] = SpotView{own.xc, own.yc, own.v.data()};
      }
    }
}

namespace {

// 4 doubles as one value (two SSE2 or one AVX2 register), loaded from any address.
typedef double Lanes4 __attribute__((vector_size(32), aligned(8), may_alias));

typedef long long LanesI4 __attribute__((vector_size(32), aligned(8), may_alias));

inline __attribute__((always_inline)) const Lanes4& load4(const double* p) { return *reinterpret_cast<const Lanes4*>(p); }
inline __attribute__((always_inline)) double hsum(const Lanes4& v) { return (v[0] + v[1]) + (v[2] + v[3]); }

// sum of w[i] b[i], i < len (one contiguous run): four accumulators of four lanes, so
// the multiply-adds of consecutive steps do not wait on each other (one accumulator
// made the loop latency-bound: one fused multiply-add's latency per four pixels), then
// one of four lanes and a scalar tail, added at the end in a fixed order.
inline __attribute__((always_inline)) double runDot(const double* w, const double* b, int len) {
  Lanes4 v0 = {0, 0, 0, 0}, v1 = v0, v2 = v0, v3 = v0;
  int i = 0;
  for (; i + 16 <= len; i += 16) {
    v0 += load4(w + i) * load4(b + i);
    v1 += load4(w + i + 4) * load4(b + i + 4);
    v2 += load4(w + i + 8) * load4(b + i + 8);
    v3 += load4(w + i + 12) * load4(b + i + 12);
  }
  for (; i + 4 <= len; i += 4) v0 += load4(w + i) * load4(b + i);
  double t = 0;
  for (; i < len; ++i) t += w[i] * b[i];
  return hsum((v0 + v1) + (v2 + v3)) + t;
}

// sum over rows r < nrow and i < len of w[r stride + i] b[r stride + i]: even and odd
// rows in separate accumulators of four lanes (plus a scalar one each for the rows'
// last len % 4), added at the end in a fixed order, the same in both clones of the
// caller (the x86-64-v3 one fuses the multiply-adds).
inline __attribute__((always_inline)) double overlapDot(const double* w, const double* b, int nrow, int len,
                                                        int stride) {
  Lanes4 v0 = {0, 0, 0, 0}, v1 = v0;
  double t0 = 0, t1 = 0;
  const int len4 = len & ~3;
  int r = 0;
  for (; r + 2 <= nrow; r += 2, w += 2 * stride, b += 2 * stride) {
    const double *w1 = w + stride, *b1 = b + stride;
    for (int i = 0; i < len4; i += 4) {
      v0 += load4(w + i) * load4(b + i);
      v1 += load4(w1 + i) * load4(b1 + i);
    }
    for (int i = len4; i < len; ++i) {
      t0 += w[i] * b[i];
      t1 += w1[i] * b1[i];
    }
  }
  if (r < nrow) {
    for (int i = 0; i < len4; i += 4) v0 += load4(w + i) * load4(b + i);
    for (int i = len4; i < len; ++i) t0 += w[i] * b[i];
  }
  return hsum(v0 + v1) + (t0 + t1);
}

} // namespace

SPEX_CLONES void PatchSolver::normalEquations(const Patch& p, const Image& image, const PatchSolveOptions& opt,
                                  PatchSolution& out) {
  const int n = p.nunknown();
  const int nx = m_nx, ny = m_ny, ns = nx * ny;
  const PixelBox& box = p.box;
  m_ws.resize(ns); // one spot's W*S, written whole before its column is formed
  m_y.assign(n, 0.0);
  m_fw.assign(n, 0.0);
  out.pixmask.assign(n, 0.0);

  // Fiber x-extents: a fiber whose stamps all lie left or right of a stamp shares no
  // pixel with it, so both loops below skip it whole.
  const int nw = p.nwavePad, nfib = p.nfiberPad;
  m_fx0.assign(nfib, std::numeric_limits<int>::max());
  m_fx1.assign(nfib, std::numeric_limits<int>::min());
  for (int a = 0; a < n; ++a) {
    m_fx0[a / nw] = std::min(m_fx0[a / nw], m_sv[a].xc);
    m_fx1[a / nw] = std::max(m_fx1[a / nw], m_sv[a].xc + nx);
  }
  auto overlap = [&](const SpotView& sa, const SpotView& sb) {
    const int dx = sb.xc - sa.xc, dy = sb.yc - sa.yc;
    return dx < nx && -dx < nx && dy < ny && -dy < ny;
  };
  // The fiber coupling width: the largest fiber distance between two spots whose
  // stamps overlap (banded_solver.h); entries of A^T W A further out are exactly zero.
  int coupling = 0;
  for (int a = 0; a < n; ++a) {
    const SpotView& sa = m_sv[a];
    const int fa = a / nw;
    for (int t = nfib - 1; t > fa + coupling; --t) {
      if (sa.xc + nx <= m_fx0[t] || m_fx1[t] <= sa.xc) continue;
      bool hit = false;
      for (int b = t * nw; b < (t + 1) * nw && !hit; ++b) hit = overlap(sa, m_sv[b]);
      if (hit) {
        coupling = t - fa;
        break;
      }
    }
  }
  out.coupling = m_coupling = coupling;
  chooseSolver(p, opt);

  // Within a fiber the stamps' rows move monotonically with the bin on DESI traces:
  // then the stamps a spot overlaps are a contiguous run of bins, found by bisection,
  // and the scan stops at the first stamp past it. A fiber whose rows are not monotonic
  // is scanned whole.
  m_fmono.assign(nfib, 1);
  for (int t = 0; t < nfib; ++t)
    for (int b = t * nw + 1; b < (t + 1) * nw; ++b)
      if (m_sv[b].yc < m_sv[b - 1].yc) {
        m_fmono[t] = 0;
        break;
      }

  // C^-1 = A^T W A from stamp overlaps only (A is never formed): lower triangle,
  // column-major, entry (b, a) for b >= a. On the banded path only the band is
  // cleared and written (a fifth of the matrix's memory traffic for DESI patches).
  // Written where it is factored (m_icov): no copy per patch; a retry recomputes it.
  m_icov.resize(std::size_t(n) * n);
  const Lanes4 zero4 = {0, 0, 0, 0};
  for (int a = 0; a < n; ++a) {
    // Per spot: W*S over its stamp (zero off the box), y = A^T W p, fluxweight =
    // column sums of W A, and pixmask_fraction = sum of S over masked or lost pixels.
    // The stamp's columns inside the box are found once per spot, not tested per pixel;
    // the three sums run in four lanes each (three serial chains of additions made this
    // loop latency-bound), lanes added at the end in a fixed order.
    // Formed just before spot a's column (the only place it is read), so it stays in
    // L1 instead of a whole patch's W*S (~0.8 MB) going out to L2/L3 and back.
    {
      const SpotView& sp = m_sv[a];
      double* ws = m_ws.data();
      const int in0 = std::clamp(box.x0 - sp.xc, 0, nx), in1 = std::clamp(box.x1 - sp.xc, in0, nx);
      Lanes4 yv = zero4, fwv = zero4, pmv = zero4;
      double y = 0, fw = 0, pm = 0;
      // Pixels off the box: W*S = 0, S counts as lost. (Written out at each use, not as a
      // lambda: a lambda capturing the sums by reference took their addresses, and every
      // may_alias store of W*S then forced them through memory, ~4 stalls per vector.)
#define SPEX_LOST(srow, wrow, x0, x1)                                                     \
  do {                                                                                    \
    int ix_ = (x0);                                                                       \
    for (; ix_ + 4 <= (x1); ix_ += 4) {                                                   \
      pmv += load4((srow) + ix_);                                                         \
      *reinterpret_cast<Lanes4*>((wrow) + ix_) = zero4;                                   \
    }                                                                                     \
    for (; ix_ < (x1); ++ix_) {                                                           \
      pm += (srow)[ix_];                                                                  \
      (wrow)[ix_] = 0.0;                                                                  \
    }                                                                                     \
  } while (0)
      for (int iy = 0; iy < ny; ++iy) {
        const int Y = sp.yc + iy;
        const double* srow = sp.v + iy * nx;
        double* wrow = ws + iy * nx;
        if (Y < box.y0 || Y >= box.y1) {
          SPEX_LOST(srow, wrow, 0, nx);
          continue;
        }
        const double* ivarRow = image.ivar.row(Y) + sp.xc;
        const double* pixRow = image.pix.row(Y) + sp.xc;
        SPEX_LOST(srow, wrow, 0, in0);
        int ix = in0;
        for (; ix + 4 <= in1; ix += 4) {
          const Lanes4 w = load4(ivarRow + ix), sv = load4(srow + ix);
          const Lanes4 v = w * sv;
          *reinterpret_cast<Lanes4*>(wrow + ix) = v;
          fwv += v;
          // A pixel of weight 0 adds +0 to fw and y (its value, maybe not finite, is
          // masked out of the sum) and its S to pm.
          const LanesI4 used = (LanesI4)(w != zero4); // all ones where w != 0
          const Lanes4 vp = v * load4(pixRow + ix);
          yv += (Lanes4)(used & (LanesI4)vp);
          pmv += (Lanes4)(~used & (LanesI4)sv);
        }
        for (; ix < in1; ++ix) {
          const double w = ivarRow[ix], sv = srow[ix];
          const double v = w * sv;
          wrow[ix] = v;
          fw += v;
          y += w != 0.0 ? v * pixRow[ix] : 0.0;
          pm += w == 0.0 ? sv : 0.0;
        }
        SPEX_LOST(srow, wrow, in1, nx);
      }
#undef SPEX_LOST
      m_y[a] = hsum(yv) + y;
      m_fw[a] = hsum(fwv) + fw;
      out.pixmask[a] = hsum(pmv) + pm;
    }
    const SpotView& sa = m_sv[a];
    const int fa = a / nw, end = bandEnd(a);
    const double* wsa = m_ws.data();
    double* col = m_icov.data() + std::size_t(a) * n;
    // The dense path keeps whole zeroed columns: its fiber-block SYRK reads the upper
    // triangles of L^-1's diagonal blocks, which must be zero, not a previous patch's.
    std::fill(col + (m_fullLower ? 0 : a), col + end, 0.0);
    for (int t = fa; t * nw < end; ++t) {
      if (sa.xc + nx <= m_fx0[t] || m_fx1[t] <= sa.xc) continue;
      int b = std::max(a, t * nw);
      const int bEnd = (t + 1) * nw;
      if (m_fmono[t]) // first stamp of fiber t not entirely above sa's
        b = int(std::partition_point(m_sv.begin() + b, m_sv.begin() + bEnd,
                                     [&](const SpotView& sb) { return sb.yc + ny <= sa.yc; }) -
                m_sv.begin());
      for (; b < bEnd; ++b) {
        const SpotView& sb = m_sv[b];
        const int dx = sb.xc - sa.xc, dy = sb.yc - sa.yc;
        if (dy >= ny) {
          if (m_fmono[t]) break; // every later stamp of this fiber is below sa's
          continue;
        }
        if (!overlap(sa, sb)) continue;
        const int ix0 = std::max(0, dx), ix1 = std::min(nx, nx + dx);
        const int iy0 = std::max(0, dy), iy1 = std::min(ny, ny + dy);
        // Four independent lanes through the overlap (no serial chain of additions):
        // row by row, or, when the stamps share their columns (dx = 0, most pairs of
        // one fiber), as one contiguous run of (iy1 - iy0) nx pixels.
        const double* wr = wsa + iy0 * nx + ix0;
        const double* br = sb.v + (iy0 - dy) * nx + ix0 - dx;
        col[b] = dx == 0 ? runDot(wr, br, (iy1 - iy0) * nx) : overlapDot(wr, br, iy1 - iy0, ix1 - ix0, nx);
      }
    }
  }
}

int PatchSolver::bandEnd(int a) const {
  if (m_fullLower) return m_bb.n();
  return std::min(m_bb.n(), (a / m_bb.nb + m_bb.w + 1) * m_bb.nb);
}

void PatchSolver::chooseSolver(const Patch& p, const PatchSolveOptions& opt) {
  m_bb.nblk = p.nfiberPad;
  m_bb.nb = p.nwavePad;
  m_bb.w = std::min(m_coupling, p.nfiberPad - 1);
  const int kept0 = p.keptFiberOffset(), kept1 = kept0 + p.nfiber;
  switch (opt.solver) {
  case NormalSolver::Dense: m_banded = false; break;
  case NormalSolver::Banded: m_banded = true; break;
  case NormalSolver::Auto:
    // A PSF that couples fibers as widely as the patch gains nothing from the band.
    m_banded = m_bb.bandedFma(kept0) < m_bb.denseFma(kept0, kept1);
    break;
  }
  // The dense factorisation and the noise mode's eigen-decomposition read the whole
  // lower triangle.
  m_fullLower = !m_banded || opt.mode == Decorrelation::Noise;
}

bool PatchSolver::factorAndSolve(int n, double regularize, bool keepPrior, PatchSolution& out) {
  // Weak prior (EXTRACTION.md §4.2): unconstrained bins are pulled to 0.
  double maxfw = 0;
  for (double v : m_fw) maxfw = std::max(maxfw, v);
  const double minweight = 1e-4 * maxfw;
  // m_icov holds C^-1 as normalEquations wrote it; the factorisation overwrites it.
  for (int a = 0; a < n; ++a) {
    const double fw = m_fw[a];
    const double add = fw <= minweight ? (minweight - fw) * (minweight - fw) : regularize * regularize;
    m_icov[std::size_t(a) * n + a] += add + 1e-15;
  }
  if (keepPrior) m_q = m_icov; // keep C^-1 with its prior for the noise mode
  out.f = m_y;
  if (m_banded) {
    if (BandedCholesky::factor(m_bb, m_icov.data(), n) != 0) return false;
    BandedCholesky::solve(m_bb, m_icov.data(), n, out.f.data());
  } else {
    if (lapack::potrf(n, m_icov.data(), n) != 0) return false;
    if (lapack::potrs(n, 1, m_icov.data(), n, out.f.data(), n) != 0) return false;
  }
  for (double v : out.f)
    if (!std::isfinite(v)) return false;
  return true;
}

SPEX_CLONES void PatchSolver::applyT(const double* t, int fiber, int nw, PatchSolution& out) {
  // B&S eqs 17-19 for one fiber block, with Q = T T^T never formed: s = Q 1 = T (T^T 1),
  // R = Q / s row-wise, ivar = s^2, flux = R f = T (T^T f) / s, and of R only the
  // diagonals RESOLUTION keeps: RESOLUTION[k, j] = R[j - ndiag + k, j] = (T_i . T_j) / s_i.
  // About 2.4 nw^2 + (2 ndiag + 1) nw^2 multiply-adds instead of nw^3 / 2 for T T^T.
  const int c0 = fiber * nw, nd = out.ndiag, nk = 2 * nd + 1;
  const std::size_t ld = std::size_t(nw);
  double* res = out.resolution.data() + std::size_t(fiber) * nk * nw;
  m_work.resize(std::max<std::size_t>(m_work.size(), 4 * ld));
  double* u = m_work.data();        // T^T 1
  double* v = u + ld;               // T^T f
  double* s = v + ld;               // T u
  double* tf = s + ld;              // T v
  const double* f = out.f.data() + c0;
  for (int m = 0; m < nw; ++m) {
    const double* col = t + m * ld;
    double su = 0, sv = 0;
    for (int r = 0; r < nw; ++r) {
      su += col[r];
      sv += col[r] * f[r];
    }
    u[m] = su;
    v[m] = sv;
  }
  std::fill(s, s + nw, 0.0);
  std::fill(tf, tf + nw, 0.0);
  for (int m = 0; m < nw; ++m) {
    const double* col = t + m * ld;
    const double um = u[m], vm = v[m];
    for (int r = 0; r < nw; ++r) {
      s[r] += col[r] * um;
      tf[r] += col[r] * vm;
    }
  }
  for (int i = 0; i < nw; ++i) {
    out.flux[c0 + i] = s[i] != 0 ? tf[i] / s[i] : 0.0;
    out.ivar[c0 + i] = s[i] * s[i];
  }
  // Band of Q: diagonal k (offset d = k - nd) is Q[j + d, j] = sum_m T[j + d, m] T[j, m],
  // accumulated over m column by column (contiguous, vectorisable, no reduction).
  // For ndiag = 5 (11 diagonals) the interior bins go four at a time with the eleven
  // sums in registers (one load of T[j.., m] and eleven shifted ones per column, no
  // stores; the column-by-column form loaded and stored every sum once per column).
  int jb0 = 0, jb1 = 0; // bins [jb0, jb1) done in registers
  if (nk == 11 && nw >= 2 * nd + 4) {
    jb0 = nd;
    jb1 = jb0 + (nw - 2 * nd) / 4 * 4;
    for (int j = jb0; j < jb1; j += 4) {
      Lanes4 acc[11] = {};
      for (int m = 0; m < nw; ++m) {
        const double* cj = t + m * ld + j;
        const Lanes4 x = load4(cj);
#pragma GCC unroll 11
        for (int k = 0; k < 11; ++k) acc[k] += load4(cj + k - 5) * x;
      }
#pragma GCC unroll 11
      for (int k = 0; k < 11; ++k) *reinterpret_cast<Lanes4*>(res + std::size_t(k) * nw + j) = acc[k];
    }
  }
  for (int k = 0; k < nk; ++k) {
    double* rk = res + std::size_t(k) * nw;
    std::fill(rk, rk + jb0, 0.0);
    std::fill(rk + jb1, rk + nw, 0.0);
  }
  for (int m = 0; m < nw; ++m) {
    const double* col = t + m * ld;
    for (int k = 0; k < nk; ++k) {
      const int d = k - nd;
      double* rk = res + std::size_t(k) * nw;
      const int j0 = std::max(0, -d), j1 = std::min(nw, nw - d);
      for (int j = j0; j < std::min(j1, jb0); ++j) rk[j] += col[j + d] * col[j];
      for (int j = std::max(j0, jb1); j < j1; ++j) rk[j] += col[j + d] * col[j];
    }
  }
  for (int k = 0; k < nk; ++k) {
    const int d = k - nd;
    double* rk = res + std::size_t(k) * nw;
    for (int j = 0; j < nw; ++j) {
      const int i = j + d;
      rk[j] = (i >= 0 && i < nw && s[i] != 0) ? rk[j] / s[i] : 0.0;
    }
  }
}

void PatchSolver::decorrelateSignal(int nfib, int nw, int kept0, int kept1, PatchSolution& out) {
  const int n = nfib * nw;
  // The fiber blocks C_s of C = (L L^T)^-1, from the factor instead of the peers' full
  // eigen-decomposition of C^-1. Banded: selected inversion of the band (m_q holds the
  // band blocks of C). Dense: C = X^T X with X = L^-1 lower triangular, so block s
  // needs rows c0.. of X's block columns only.
  if (m_banded) {
    m_q.resize(std::size_t(n) * n);
    m_band.selectedInverse(m_bb, m_icov.data(), n, m_q.data(), n, kept0);
  } else {
    lapack::trtri(n, m_icov.data(), n);
  }
  // Each kept block's C_s (lower triangle) joins the queue that finish() solves four at
  // a time (SymEigen::compute4), across the patches begun since the last finish().
  const std::size_t nn = std::size_t(nw) * nw;
  std::size_t offset = m_pending.empty() ? 0 : m_pending.back().offset + std::size_t(m_pending.back().nw) * m_pending.back().nw;
  m_cs.resize(offset + std::size_t(kept1 - kept0) * nn);
  for (int s = kept0; s < kept1; ++s, offset += nn) {
    const int c0 = s * nw;
    double* csj = m_cs.data() + offset;
    if (m_banded) {
      const double* cs = m_q.data() + c0 + std::size_t(c0) * n;
      for (int col = 0; col < nw; ++col)
        std::copy(cs + std::size_t(col) * n + col, cs + std::size_t(col) * n + nw, csj + std::size_t(col) * nw + col);
    } else {
      const double* xs = m_icov.data() + c0 + std::size_t(c0) * n;
      lapack::syrkT(nw, n - c0, 1.0, xs, n, 0.0, csj, nw);
    }
    m_pending.push_back(Pending{&out, s, nw, offset});
  }
}

void PatchSolver::finish(ProfileRecorder* rec, int patchIndex) {
  if (m_pending.empty()) return;
  ScopedRange r(rec, "decorrelate", patchIndex);
  // Groups of up to four queued blocks of one order, their eigenproblems solved together
  // (SymEigen::compute4: Householder reduction and back-transformation in cache-resident
  // loops, the tridiagonal step four blocks at a time in vector lanes; docs/benchmarks.md,
  // "CPU engine, third", "fifth", "seventh" and "eighth pass"). A block's lane computes
  // the same bits whatever shares its group, so a patch's result does not depend on which
  // patches were queued with it; a group of fewer than four costs as much as four, hence
  // the queue across patches (five kept fibers per patch).
  const std::size_t np = m_pending.size();
  int maxNw = 0;
  for (const Pending& q : m_pending) maxNw = std::max(maxNw, q.nw);
  const std::size_t nnMax = std::size_t(maxNw) * maxNw;
  m_eig.resize(4 * std::size_t(maxNw));
  m_z.resize(4 * nnMax);
  std::vector<double>& t = m_modelBox; // scratch nw x nw
  t.resize(nnMax);
  for (std::size_t g0 = 0; g0 < np;) {
    const int nw = m_pending[g0].nw;
    const std::size_t nn = std::size_t(nw) * nw;
    int count = 1;
    while (count < 4 && g0 + count < np && m_pending[g0 + count].nw == nw) ++count;
    const double* a4[4];
    double *w4[4], *z4[4];
    for (int j = 0; j < count; ++j) {
      a4[j] = m_cs.data() + m_pending[g0 + j].offset;
      w4[j] = m_eig.data() + std::size_t(j) * nw;
      z4[j] = m_z.data() + j * nn;
    }
    m_symEigen.compute4(count, nw, a4, nw, w4, z4, nw);
    for (int j = 0; j < count; ++j) {
      const Pending& q = m_pending[g0 + j];
      const double* eig = w4[j];
      const double* z = z4[j];
      // Q_s = C_s^-1/2 = V diag(w^-1/2) V^T = T T^T with T = V diag(w^-1/4), eigenvalues
      // clipped at 1e-14 of the largest; applyT forms only what is kept of Q_s.
      const double floor = 1e-14 * eig[nw - 1];
      for (int i = 0; i < nw; ++i) {
        const double w = std::max(eig[i], floor);
        const double sc = w > 0 ? 1.0 / std::sqrt(std::sqrt(w)) : 0.0;
        for (int rr = 0; rr < nw; ++rr) t[rr + std::size_t(i) * nw] = z[rr + std::size_t(i) * nw] * sc;
      }
      applyT(t.data(), q.fiber, nw, *q.out);
    }
    g0 += std::size_t(count);
  }
  m_pending.clear();
}

void PatchSolver::decorrelateNoise(int nfib, int nw, PatchSolution& out) {
  // Q = (C^-1)^1/2 over the whole patch; s sums whole rows (across fibers), flux = R f
  // over all fibers, and RESOLUTION takes each fiber's diagonal block of R.
  const int n = nfib * nw;
  std::vector<double>& a = m_q; // C^-1 with prior, saved by factorAndSolve
  m_eig.resize(n);
  lapack::syevd(n, a.data(), n, m_eig.data(), m_work, m_iwork);
  const double floor = 1e-14 * m_eig[n - 1];
  std::vector<double> t(std::size_t(n) * n), q(std::size_t(n) * n);
  for (int i = 0; i < n; ++i) {
    const double sc = std::sqrt(std::max(m_eig[i], floor));
    for (int r = 0; r < n; ++r) t[r + std::size_t(i) * n] = a[r + std::size_t(i) * n] * sc;
  }
  lapack::gemmNT(n, n, n, t.data(), n, a.data(), n, q.data(), n);
  std::vector<double> s(n, 0.0);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) s[i] += q[i + std::size_t(j) * n];
  for (int i = 0; i < n; ++i) {
    const double inv = s[i] != 0 ? 1.0 / s[i] : 0.0;
    double fl = 0;
    for (int j = 0; j < n; ++j) fl += q[i + std::size_t(j) * n] * out.f[j];
    out.flux[i] = fl * inv;
    out.ivar[i] = s[i] * s[i];
  }
  const int nd = out.ndiag, nk = 2 * nd + 1;
  for (int f = 0; f < nfib; ++f) {
    const int c0 = f * nw;
    double* res = out.resolution.data() + std::size_t(f) * nk * nw;
    for (int k = 0; k < nk; ++k)
      for (int j = 0; j < nw; ++j) {
        const int i = j - nd + k;
        res[std::size_t(k) * nw + j] =
            (i >= 0 && i < nw && s[c0 + i] != 0)
                ? q[(c0 + i) + std::size_t(c0 + j) * n] / s[c0 + i]
                : 0.0;
      }
  }
}

SPEX_CLONES void PatchSolver::chi2pix(const Patch& p, const Image& image, const PatchSolveOptions& opt,
                          PatchSolution& out) {
  const int n = p.nunknown();
  const int nx = m_nx, ny = m_ny;
  const PixelBox& box = p.box;
  const int bw = box.width(), bh = box.height();
  // Model m = A f over the box from every padded spot (EXTRACTION.md §4.8).
  // Scratch kept across patches (no allocation and no clearing of chi2 and used, which
  // are written everywhere below).
  std::vector<double>& m = m_chiModel;
  m.assign(std::size_t(bw) * bh, 0.0);
  // Rows and columns of a stamp inside the box, found once per spot.
  struct Span {
    int y0, y1, x0, x1;
  };
  auto span = [&](const SpotView& sp) {
    return Span{std::clamp(box.y0 - sp.yc, 0, ny), std::clamp(box.y1 - sp.yc, 0, ny),
                std::clamp(box.x0 - sp.xc, 0, nx), std::clamp(box.x1 - sp.xc, 0, nx)};
  };
  auto addSpot = [&](std::vector<double>& img, int a, double scale) {
    const SpotView& sp = m_sv[a];
    const Span q = span(sp);
    for (int iy = q.y0; iy < q.y1; ++iy) {
      double* dst = img.data() + std::size_t(sp.yc + iy - box.y0) * bw + (sp.xc - box.x0);
      const double* src = sp.v + iy * nx;
      for (int ix = q.x0; ix < q.x1; ++ix) dst[ix] += scale * src[ix];
    }
  };
  for (int a = 0; a < n; ++a)
    if (out.f[a] != 0.0) addSpot(m, a, out.f[a]);

  // chi^2 per pixel with the PSF error added to the variance, as desispec/gpu_specter:
  // 1/ivar_tot = 1/ivar + (psferr m)^2 for ANY m (zero and negative models included;
  // they write (m psferr + 1e-32)^2, the same to 1e-32); only ivar = 0 pixels are out.
  // In four lanes with masks instead of a branch per pixel (the branch and the serial
  // sums made these loops latency-bound); used holds 1.0 or 0.0 per pixel so the
  // per-spot sums below are plain multiply-adds.
  std::vector<double>& chi2 = m_chi2;
  std::vector<double>& used = m_chiUsed;
  if (chi2.size() < std::size_t(bw) * bh) {
    chi2.resize(std::size_t(bw) * bh);
    used.resize(std::size_t(bw) * bh);
  }
  const Lanes4 zero4 = {0, 0, 0, 0}, one4 = {1, 1, 1, 1};
  const Lanes4 psf4 = {opt.psferr, opt.psferr, opt.psferr, opt.psferr};
  Lanes4 total4 = zero4, count4 = zero4;
  double total = 0;
  int count = 0;
  for (int y = 0; y < bh; ++y) {
    const double* iv = image.ivar.row(box.y0 + y) + box.x0;
    const double* px = image.pix.row(box.y0 + y) + box.x0;
    const std::size_t i0 = std::size_t(y) * bw;
    int x = 0;
    for (; x + 4 <= bw; x += 4) {
      const Lanes4 ivx = load4(iv + x), mv = load4(m.data() + i0 + x);
      const LanesI4 use = (LanesI4)(ivx > zero4);
      const Lanes4 pe = psf4 * mv;
      const Lanes4 ivt = one4 / (one4 / ivx + pe * pe);
      const Lanes4 d = load4(px + x) - mv;
      const Lanes4 c = (Lanes4)(use & (LanesI4)(d * d * ivt)); // 0 where ivar <= 0 (maybe NaN there)
      *reinterpret_cast<Lanes4*>(chi2.data() + i0 + x) = c;
      const Lanes4 u = (Lanes4)(use & (LanesI4)one4);
      *reinterpret_cast<Lanes4*>(used.data() + i0 + x) = u;
      total4 += c;
      count4 += u;
    }
    for (; x < bw; ++x) {
      const std::size_t i = i0 + x;
      const double mv = m[i];
      chi2[i] = 0.0;
      used[i] = 0.0;
      if (iv[x] > 0) {
        const double pe = opt.psferr * mv;
        const double ivt = 1.0 / (1.0 / iv[x] + pe * pe);
        const double d = px[x] - mv;
        chi2[i] = d * d * ivt;
        used[i] = 1.0;
        total += chi2[i];
        ++count;
      }
    }
  }
  total += hsum(total4);
  count += int(hsum(count4));
  out.chi2 = count ? total / count : 0.0;
  out.npixUsed = count;
  out.chi2pix.assign(n, 0.0);
  for (int a = 0; a < n; ++a) {
    const SpotView& sp = m_sv[a];
    const Span q = span(sp);
    Lanes4 num4 = zero4, den4 = zero4;
    double num = 0, den = 0;
    for (int iy = q.y0; iy < q.y1; ++iy) {
      const std::size_t row = std::size_t(sp.yc + iy - box.y0) * bw + (sp.xc - box.x0);
      const double* c = chi2.data() + row;
      const double* u = used.data() + row;
      const double* src = sp.v + iy * nx;
      // Unused pixels have chi2 0 and used 0: they add +0 to both sums.
      int ix = q.x0;
      for (; ix + 4 <= q.x1; ix += 4) {
        num4 += load4(src + ix) * load4(c + ix);
        den4 += load4(src + ix) * load4(u + ix);
      }
      for (; ix < q.x1; ++ix) {
        num += src[ix] * c[ix];
        den += src[ix] * u[ix];
      }
    }
    num += hsum(num4);
    den += hsum(den4);
    out.chi2pix[a] = den > 0 ? num / den : 0.0;
  }

  // Model tile of the kept fibers and bins only, f not R f (EXTRACTION.md §4.9):
  // every (fiber, bin) is the core of exactly one patch, so tiles add seamlessly.
  if (opt.model) {
    out.model.assign(std::size_t(bw) * bh, 0.0);
    const int nw = p.nwavePad;
    for (int s = p.keptFiberOffset(); s < p.keptFiberOffset() + p.nfiber; ++s)
      for (int k = p.keptWaveOffset(); k < p.keptWaveOffset() + p.nwave; ++k) {
        const int a = s * nw + k;
        if (out.f[a] != 0.0) addSpot(out.model, a, out.f[a]);
      }
  } else {
    out.model.clear();
  }
}

void PatchSolver::solve(const Patch& p, const PatchPlan& plan, const Image& image,
                        const GaussHermitePsf& psf, const PatchSolveOptions& opt,
                        PatchSolution& out, ProfileRecorder* rec, SpotCache* cache) {
  begin(p, plan, image, psf, opt, out, rec, cache);
  finish(rec, p.index);
}

void PatchSolver::begin(const Patch& p, const PatchPlan& plan, const Image& image,
                        const GaussHermitePsf& psf, const PatchSolveOptions& opt,
                        PatchSolution& out, ProfileRecorder* rec, SpotCache* cache) {
  const int nfib = p.nfiberPad, nw = p.nwavePad, n = nfib * nw;
  out.nfib = nfib;
  out.nwave = nw;
  out.ndiag = opt.ndiag;
  m_symEigen.setVectors(opt.eigenVectors); // the same for every patch of a batch
  out.regularized = false;
  out.failed = false;
  out.flux.assign(n, 0.0);
  out.ivar.assign(n, 0.0);
  out.resolution.assign(std::size_t(nfib) * (2 * opt.ndiag + 1) * nw, 0.0);
  {
    ScopedRange r(rec, "spots", p.index);
    spots(p, plan, psf, cache);
  }
  {
    ScopedRange r(rec, "normal equations", p.index);
    normalEquations(p, image, opt, out);
  }
  out.banded = m_banded;
  const bool keepPrior = opt.mode == Decorrelation::Noise;
  bool ok;
  {
    ScopedRange r(rec, "solve", p.index);
    ok = factorAndSolve(n, opt.regularize, keepPrior, out);
    if (!ok) {
      // EXTRACTION.md §4.3: retry once with regularize = 1e-4, and flag the patch.
      // The failed factorisation overwrote C^-1: form it again (the same bits).
      out.regularized = true;
      normalEquations(p, image, opt, out);
      ok = factorAndSolve(n, 1e-4, keepPrior, out);
    }
  }
  if (!ok) {
    out.failed = true;
    out.f.assign(n, 0.0);
    out.chi2pix.assign(n, 0.0);
    out.model.clear();
    return;
  }
  {
    // Signal mode: the covariance blocks, queued for finish() (which solves their
    // eigenproblems and forms flux, ivar and resolution).
    ScopedRange r(rec, "decorrelate", p.index);
    if (opt.mode == Decorrelation::Signal)
      decorrelateSignal(nfib, nw, p.keptFiberOffset(), p.keptFiberOffset() + p.nfiber, out);
    else
      decorrelateNoise(nfib, nw, out);
  }
  {
    // From f alone: the same bits before or after the decorrelation.
    ScopedRange r(rec, "chi2pix", p.index);
    chi2pix(p, image, opt, out);
  }
}

} // namespace spex
