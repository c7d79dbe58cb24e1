// Pass 1 of syevBatched by one warp a matrix (SyevReduce::Warp, batched_eigh.h;
// docs/benchmarks.md, "Issue 12, ninth round: eigensolver reduce (eighred)"): the
// Householder tridiagonalisation of dsytd2 (lower) with syevReduceFusedKernel's
// expressions, leaving what that kernel leaves with separateQ: the reflectors in A
// (column i below row i + 1), d and e at work[2 ...], tau at work[2 + 2n ...].
//
// Why one warp. The 192-thread kernel is bound by the latency of two barriers and a
// serial reflector a step at 4 blocks an SM. Here lane l owns rows 1 + l + 32 q (q < 3)
// of A: a step's rank-2 update and the next step's matrix-vector product walk the
// lane's own rows (each dot product whole in one lane: no pair shuffle, no barrier),
// and the next column (its entries the first column the update produced, kept in
// registers) gives the next reflector after two warp sums. Shared memory holds only
// rows and columns 1 .. n-1 of A (column 0 is read from global memory), (n-1)^2 + 4n
// doubles: 45 KB at n = 74, five matrices an SM.
//
// Written __host__ __device__ against a small warp interface W (lane, sum, broadcast,
// sync, asynchronous copy) so that tests/gpu/test_eigh_reduce_warp.cpp runs the same
// code on the host with 32 threads, one a lane.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define SPEX_RW_HD __host__ __device__ __forceinline__
#define SPEX_RW_TEMPLATE_HD _Pragma("nv_exec_check_disable")
#else
#define SPEX_RW_HD inline
#define SPEX_RW_TEMPLATE_HD
#endif
#if defined(__CUDA_ARCH__)
#define SPEX_RW_UNROLL _Pragma("unroll")
#else
#define SPEX_RW_UNROLL
#endif

namespace spex::gpu::reducewarp {

constexpr int kMaxN = 80; // rows 1 .. n - 1 in three slots a lane (1 + 31 + 64 >= 79)
constexpr int kSlots = 3;

// Doubles of shared memory for one matrix: rows and columns 1 .. n-1 of A (column-major,
// leading dimension n - 1), then two buffers of n (v, p) pairs, 16-byte aligned.
SPEX_RW_HD constexpr long long sharedDoubles(int n) {
  return ((long long)(n - 1) * (n - 1) + 1) / 2 * 2 + 4LL * n;
}

// (x[2c], x[2c + 1]) by one 16-byte load on the device.
SPEX_RW_HD void loadPair(const double* x, int c, double& a, double& b) {
#if defined(__CUDA_ARCH__)
  const double2 t = reinterpret_cast<const double2*>(x)[c];
  a = t.x;
  b = t.y;
#else
  a = x[2 * c];
  b = x[2 * c + 1];
#endif
}

// dsytd2's reflector (as syevReduceKernel): beta, tau and 1 / (alpha - beta).
SPEX_RW_HD void reflector(double alpha, double ss, double& beta, double& t, double& scal) {
  t = 0.0;
  beta = alpha;
  scal = 0.0;
  if (ss > 0.0) {
    beta = -copysign(sqrt(alpha * alpha + ss), alpha);
    t = (beta - alpha) / beta;
    scal = 1.0 / (alpha - beta);
  }
}

// Four columns' operands: the lane's entries of them, and (v, p, vn) of each.
struct Group {
  double x[4][kSlots], vc[4], pc[4], un[4];
};

// Step i's update of the trailing matrix (rows and columns >= s0 = i + 2) fused with
// step i + 1's matrix-vector product: for each of the lane's rows r (slots Q0 .. Q1-1),
// y(r, c) = a(r, c) - v_r w_c - w_r v_c (two FMAs), acc_r += y(r, c) vn_c; column s0 is
// not stored (its entries, the next column, stay in ncol). Columns four at a time,
// software-pipelined: a group's loads are issued before the stores of the group before
// it (different entries), so a single warp does not wait out the shared-memory latency
// between groups. X: (v, p) of step i, Xn: vn in .x. M: rows / columns 1.. with
// leading dimension L.
SPEX_RW_TEMPLATE_HD
template <int Q0, int Q1>
SPEX_RW_HD void updateAndMultiply(int n, int s0, double* M, int L, const double* X, const double* Xn, double k,
                                  const int (&r)[kSlots], const double (&v)[kSlots], const double (&p)[kSlots],
                                  double (&acc)[kSlots], double (&ncol)[kSlots]) {
  double vr[kSlots], wr[kSlots];
  double* Mq[kSlots];
  bool ok[kSlots];
SPEX_RW_UNROLL
  for (int q = Q0; q < Q1; ++q) {
    vr[q] = v[q];
    wr[q] = fma(-k, v[q], p[q]);
    ok[q] = r[q] >= s0 && r[q] < n;
    // Rows past n read row 1 (their results are dropped, nothing is stored): no step
    // writes row 1 after the mirror, so these reads race with no lane's stores (reading
    // row n - 1, which its lane updates in the same pass, was a harmless hazard that
    // compute-sanitizer's racecheck counted as 1 749 intra-warp warnings).
    Mq[q] = M + (r[q] < n ? r[q] - 1 : 0);
    acc[q] = 0.0;
  }
  auto load = [&](Group& g, int c) {
SPEX_RW_UNROLL
    for (int u = 0; u < 4; ++u) {
      loadPair(X, c + u, g.vc[u], g.pc[u]);
      g.un[u] = Xn[2 * (c + u)];
SPEX_RW_UNROLL
      for (int q = Q0; q < Q1; ++q) g.x[u][q] = Mq[q][(c + u - 1) * L];
    }
  };
  auto compute = [&](const Group& g, int c) {
SPEX_RW_UNROLL
    for (int u = 0; u < 4; ++u) {
      const double wc = fma(-k, g.vc[u], g.pc[u]);
SPEX_RW_UNROLL
      for (int q = Q0; q < Q1; ++q) {
        const double y = fma(-vr[q], wc, fma(-wr[q], g.vc[u], g.x[u][q]));
        if (ok[q]) Mq[q][(c + u - 1) * L] = y;
        acc[q] = fma(y, g.un[u], acc[q]);
      }
    }
  };
  int c = s0 + 1;
  const int groups = (n - c) >> 2;
  Group ga, gb;
  if (groups > 0) load(ga, c);
  {
    double vc, pc;
    loadPair(X, s0, vc, pc);
    const double un = Xn[2 * s0], wc = fma(-k, vc, pc);
SPEX_RW_UNROLL
    for (int q = Q0; q < Q1; ++q) {
      const double y = fma(-vr[q], wc, fma(-wr[q], vc, Mq[q][(s0 - 1) * L]));
      ncol[q] = y;
      acc[q] = fma(y, un, acc[q]);
    }
  }
  int g = 0;
  for (; g + 1 < groups; g += 2) {
    load(gb, c + 4);
    compute(ga, c);
    if (g + 2 < groups) load(ga, c + 8);
    compute(gb, c + 4);
    c += 8;
  }
  if (g < groups) {
    compute(ga, c);
    c += 4;
  }
  for (; c < n; ++c) {
    double vc, pc;
    loadPair(X, c, vc, pc);
    const double un = Xn[2 * c], wc = fma(-k, vc, pc);
SPEX_RW_UNROLL
    for (int q = Q0; q < Q1; ++q) {
      const double y = fma(-vr[q], wc, fma(-wr[q], vc, Mq[q][(c - 1) * L]));
      if (ok[q]) Mq[q][(c - 1) * L] = y;
      acc[q] = fma(y, un, acc[q]);
    }
  }
}

// Slot q's value where q is known only at run time (uniform across the warp).
SPEX_RW_HD double slot(const double (&x)[kSlots], int q) { return q == 0 ? x[0] : q == 1 ? x[1] : x[2]; }

// The state the steps share (tridiagonalize's).
struct Steps {
  int n, lane, L;
  double* M;
  double* A;
  int lda;
  double *dO, *eO, *tauO;
  double *X, *Xn;
  double t;
};

// Steps i while the lowest trailing row, i + 2, lies in slot QLO or below ((i + 1) >> 5
// <= QLO), the column loop over slots QLO .. QHI-1. State on entry to step i: v = v_i,
// p = p_i (rows >= i + 1, zero above), col = column i + 1 of A before step i's update
// (rows >= i + 1), st.t = tau_i; st.X holds (v_i, p_i).
SPEX_RW_TEMPLATE_HD
template <int QLO, int QHI, class W>
SPEX_RW_HD void runSteps(W& w, Steps& st, int& i, const int (&r)[kSlots], double (&v)[kSlots], double (&p)[kSlots],
                         double (&col)[kSlots]) {
  const int n = st.n, lane = st.lane, L = st.L, lda = st.lda;
  double* M = st.M;
  double* A = st.A;
  double* dO = st.dO;
  double* eO = st.eO;
  double* tauO = st.tauO;
  for (; i + 2 < n && ((i + 1) >> 5) <= QLO; ++i) {
    double* X = st.X;
    double* Xn = st.Xn;
    const double t = st.t;
    double k = 0.0;
SPEX_RW_UNROLL
    for (int q = 0; q < kSlots; ++q) k += p[q] * v[q];
    k = 0.5 * t * w.sum(k);
    const int j = i + 1;
    const double wj = X[2 * j + 1] - k; // v_i(j) = 1
    double cl[kSlots]; // column j after step i's update
SPEX_RW_UNROLL
    for (int q = 0; q < kSlots; ++q) {
      const double wr = p[q] - k * v[q];
      cl[q] = col[q] - (v[q] * wj + wr * 1.0);
    }
    const int qj = (j - 1) >> 5, lj = (j - 1) & 31; // the slot and lane of row j
    if (lane == lj) dO[j] = slot(cl, qj);
    if (i + 3 == n) {
      // The last step: rows and columns n - 2, n - 1 only.
      const int q1 = (n - 2) >> 5, l1 = (n - 2) & 31; // row n - 1
      if (lane == l1) {
        const double vr = slot(v, q1), wr = slot(p, q1) - k * vr;
        eO[j] = slot(cl, q1);
        dO[n - 1] = M[(n - 2) * L + n - 2] - (vr * wr + wr * vr);
        A[(long long)i * lda + n - 1] = vr;
      }
      if (lane == 0) {
        eO[n - 1] = 0.0;
        tauO[n - 2] = 0.0;
        tauO[n - 1] = 0.0;
      }
      i = n; // done
      return;
    }
    // Reflector j from column j (rows >= j + 1).
    double ss = 0.0;
SPEX_RW_UNROLL
    for (int q = 0; q < kSlots; ++q)
      if (r[q] >= j + 2 && r[q] < n) ss += cl[q] * cl[q];
    const double alpha = w.bcast(slot(cl, j >> 5), j & 31); // row j + 1
    ss = w.sum(ss);
    double beta, tn, scal;
    reflector(alpha, ss, beta, tn, scal);
    if (lane == 0) {
      eO[j] = beta;
      tauO[j] = tn;
    }
    double vn[kSlots];
SPEX_RW_UNROLL
    for (int q = 0; q < kSlots; ++q) {
      vn[q] = r[q] == j + 1 ? 1.0 : r[q] >= j + 2 && r[q] < n ? cl[q] * scal : 0.0;
      if (r[q] >= j + 1 && r[q] < n) Xn[2 * r[q]] = vn[q];
    }
    w.sync();
    // Rows and columns >= s0 = i + 2: step i's update and pn = tn (updated a) vn.
    const int s0 = i + 2;
    double acc[kSlots] = {0.0, 0.0, 0.0}, ncol[kSlots] = {0.0, 0.0, 0.0};
    updateAndMultiply<QLO, QHI>(n, s0, M, L, X, Xn, k, r, v, p, acc, ncol);
SPEX_RW_UNROLL
    for (int q = 0; q < kSlots; ++q) {
      const bool ok = r[q] >= s0 && r[q] < n;
      if (ok) {
        A[(long long)i * lda + r[q]] = v[q]; // reflector i
        Xn[2 * r[q] + 1] = tn * acc[q];
      }
      p[q] = ok ? tn * acc[q] : 0.0;
      col[q] = ok ? ncol[q] : 0.0;
      v[q] = vn[q];
    }
    st.t = tn;
    st.X = Xn;
    st.Xn = X;
    w.sync();
  }
}

// The tridiagonalisation of one matrix by one warp (w.lane() in 0 .. 31). A: the matrix
// (lower triangle read), its reflectors written below the subdiagonal; wk: the matrix's
// workspace (d at wk[2], e at wk[2 + n], tau at wk[2 + 2n]); sh: sharedDoubles(n)
// doubles, 16-byte aligned. n <= kMaxN.
SPEX_RW_TEMPLATE_HD
template <class W>
SPEX_RW_HD void tridiagonalize(W& w, int n, double* A, int lda, double* wk, double* sh) {
  const int lane = w.lane();
  double* dO = wk + 2;
  double* eO = wk + 2 + n;
  double* tauO = wk + 2 + 2 * n;
  if (n < 3) {
    if (lane == 0) {
      dO[0] = A[0];
      eO[0] = n == 2 ? A[1] : 0.0;
      tauO[0] = 0.0;
      if (n == 2) {
        dO[1] = A[lda + 1];
        eO[1] = 0.0;
        tauO[1] = 0.0;
      }
    }
    return;
  }
  const int L = n - 1;
  double* M = sh;                                 // a(r, c) at M[(c - 1) L + r - 1], r, c >= 1
  double* X = sh + ((long long)L * L + 1) / 2 * 2; // (v_i, p_i) pairs
  double* Xn = X + 2 * n;                         // (v_{i+1}, p_{i+1})
  int r[kSlots];
SPEX_RW_UNROLL
  for (int q = 0; q < kSlots; ++q) r[q] = 1 + lane + 32 * q;

  // Rows and columns >= 1 of the lower triangle into M, column 0 into registers.
  for (int c = 1; c < n; ++c)
    for (int rr = c + lane; rr < n; rr += 32) w.copy8(M + (c - 1) * L + rr - 1, A + (long long)c * lda + rr);
  double x0[kSlots];
SPEX_RW_UNROLL
  for (int q = 0; q < kSlots; ++q) x0[q] = r[q] < n ? A[r[q]] : 0.0;
  const double a00 = A[0], alpha0 = A[1];
  w.copyWait();
  w.sync();
  // The upper triangle mirrored: the lane's row r takes (r, c), c > r, from column r
  // (a(c, r)), eight columns' loads before their stores.
  for (int c0 = 2; c0 < n; c0 += 8) {
    double t[kSlots][8];
SPEX_RW_UNROLL
    for (int q = 0; q < kSlots; ++q)
SPEX_RW_UNROLL
      for (int u = 0; u < 8; ++u) {
        const int c = c0 + u;
        t[q][u] = c < n && c > r[q] ? M[(r[q] - 1) * L + c - 1] : 0.0;
      }
SPEX_RW_UNROLL
    for (int q = 0; q < kSlots; ++q)
SPEX_RW_UNROLL
      for (int u = 0; u < 8; ++u) {
        const int c = c0 + u;
        if (c < n && c > r[q]) M[(c - 1) * L + r[q] - 1] = t[q][u];
      }
  }

  // Reflector 0 from column 0.
  double v[kSlots], p[kSlots], col[kSlots];
  double t;
  {
    double ss = 0.0;
SPEX_RW_UNROLL
    for (int q = 0; q < kSlots; ++q)
      if (r[q] >= 2 && r[q] < n) ss += x0[q] * x0[q];
    ss = w.sum(ss);
    double beta, scal;
    reflector(alpha0, ss, beta, t, scal);
SPEX_RW_UNROLL
    for (int q = 0; q < kSlots; ++q) {
      v[q] = r[q] == 1 ? 1.0 : r[q] < n ? x0[q] * scal : 0.0;
      if (r[q] < n) X[2 * r[q]] = v[q];
      if (r[q] >= 2 && r[q] < n) A[r[q]] = v[q];
    }
    if (lane == 0) {
      dO[0] = a00;
      eO[0] = beta;
      tauO[0] = t;
    }
  }
  w.sync();
  // p_0 = tau_0 A22 v_0 (rows and columns >= 1); column 1 of A into col.
  {
    double acc[kSlots] = {0.0, 0.0, 0.0};
    const double* Mq[kSlots];
SPEX_RW_UNROLL
    for (int q = 0; q < kSlots; ++q) Mq[q] = M + (r[q] < n ? r[q] - 1 : 0);
    for (int c = 1; c < n; ++c) {
      const double vc = X[2 * c];
SPEX_RW_UNROLL
      for (int q = 0; q < kSlots; ++q) acc[q] += Mq[q][(c - 1) * L] * vc;
    }
SPEX_RW_UNROLL
    for (int q = 0; q < kSlots; ++q) {
      p[q] = r[q] < n ? t * acc[q] : 0.0;
      col[q] = r[q] < n ? Mq[q][0] : 0.0;
      if (r[q] < n) X[2 * r[q] + 1] = p[q];
    }
  }
  w.sync();

  // The steps, in three runs by the lowest slot that still holds a trailing row (each
  // run its own instantiation of the column loop: one loop dispatching among six
  // instantiations made ptxas spill).
  int i = 0;
  Steps st{n, lane, L, M, A, lda, dO, eO, tauO, X, Xn, t};
  const int qhi = ((n - 2) >> 5) + 1;
  if (qhi == 3) {
    runSteps<0, 3>(w, st, i, r, v, p, col);
    runSteps<1, 3>(w, st, i, r, v, p, col);
    runSteps<2, 3>(w, st, i, r, v, p, col);
  } else if (qhi == 2) {
    runSteps<0, 2>(w, st, i, r, v, p, col);
    runSteps<1, 2>(w, st, i, r, v, p, col);
  } else {
    runSteps<0, 1>(w, st, i, r, v, p, col);
  }
}

} // namespace spex::gpu::reducewarp
