#include "banded_solver.h"

#include "../clones.h"
#include "lapack.h"

#include <algorithm>
#include <cstddef>

namespace spex {

namespace {
double cube(double x) { return x * x * x; }

// 4 doubles as one value (two SSE2 or one AVX2 register), any alignment.
typedef double Lanes4 __attribute__((vector_size(32), aligned(8), may_alias));

// y[0..len) += a x[0..len): four at a time, then one at a time; each element gets one
// multiply-add (fused in the caller's x86-64-v3 clone, core/clones.h).
inline __attribute__((always_inline)) void axpy(int len, double a, const double* __restrict x,
                                                double* __restrict y) {
  const Lanes4 av = {a, a, a, a};
  int i = 0;
  for (; i + 4 <= len; i += 4)
    *reinterpret_cast<Lanes4*>(y + i) += *reinterpret_cast<const Lanes4*>(x + i) * av;
  for (; i < len; ++i) y[i] += x[i] * a;
}
} // namespace

double BlockBand::denseFma(int kept0, int kept1) const {
  const double nn = n();
  double f = 2 * cube(nn) / 6; // potrf + trtri
  for (int s = kept0; s < kept1; ++s) f += 0.5 * nb * (nb + 1.0) * (nn - double(s) * nb);
  return f;
}

double BlockBand::bandedFma(int kept0) const {
  const double b3 = cube(nb);
  double f = 0;
  for (int j = 0; j < nblk; ++j) {
    const double m = double(std::min(w, nblk - 1 - j)) * nb;
    f += b3 / 6 + m * nb * nb / 2 + m * (m + 1) / 2 * nb; // potrf, trsm, syrk
    if (j >= kept0) f += b3 / 3 + m * nb * nb / 2 + m * m * nb + m * nb * nb; // trtri+lauum, trmm, symm, gemm
  }
  return f;
}

namespace {
// dtrti2's order: from the last column, each new column the triangular product of the
// inverse already formed with L's column (short axpys: fine for small n only).
SPEX_CLONES void invertLowerColumns(int n, double* x, int ldx) {
  const std::size_t ld = std::size_t(ldx);
  for (int j = n - 1; j >= 0; --j) {
    double* xj = x + std::size_t(j) * ld; // column j
    xj[j] = 1.0 / xj[j];
    const double ajj = -xj[j];
    // x[j+1.., j] = X22 x[j+1.., j] (X22 = the inverse of the trailing block, lower),
    // in place from the last column of X22 (each x_c is still the old one when read).
    for (int c = n - 1; c > j; --c) {
      const double* xc = x + std::size_t(c) * ld;
      const double t = xj[c];
      xj[c] = xc[c] * t;
      axpy(n - c - 1, t, xc + c + 1, xj + c + 1);
    }
    for (int r = j + 1; r < n; ++r) xj[r] *= ajj;
  }
}
} // namespace

void invertLower(int n, double* x, int ldx) {
  // Above 32 by halves (as dtrtri's blocked form): [L11 0; L21 L22]^-1 =
  // [X11 0; -X22 L21 X11  X22], the two diagonal inverses by recursion and X21 by two
  // triangular products (OpenBLAS dtrmm). At n = 74 the column form spent ~1.4 cycles
  // per multiply-add in loop overhead (docs/benchmarks.md, "sixth pass").
  if (n <= 32) {
    invertLowerColumns(n, x, ldx);
    return;
  }
  const std::size_t ld = std::size_t(ldx);
  const int n1 = n / 2, n2 = n - n1;
  double* x22 = x + std::size_t(n1) * (ld + 1);
  double* x21 = x + n1;
  invertLower(n2, x22, ldx);
  invertLower(n1, x, ldx);
  lapack::trmmL('L', 'N', n2, n1, -1.0, x22, ldx, x21, ldx);
  lapack::trmmL('R', 'N', n2, n1, 1.0, x, ldx, x21, ldx);
}

int BandedCholesky::factor(const BlockBand& b, double* a, int lda) {
  const int nb = b.nb;
  const std::size_t ld = std::size_t(lda);
  // Right-looking block Cholesky on the band: L_jj, the panel below it (at most w blocks,
  // contiguous in a column-major matrix), and its rank-nb update of the trailing band,
  // which stays inside the band because |i - k| < w for the blocks it touches.
  for (int j = 0; j < b.nblk; ++j) {
    double* ajj = a + std::size_t(j) * nb * (ld + 1);
    const int info = lapack::potrf(nb, ajj, lda);
    if (info != 0) return j * nb + info;
    const int m = std::min(b.w, b.nblk - 1 - j) * nb;
    if (m == 0) continue;
    double* panel = ajj + nb;
    lapack::trsmL('R', 'T', m, nb, 1.0, ajj, lda, panel, lda);
    lapack::syrkN(m, nb, -1.0, panel, lda, 1.0, ajj + nb * (ld + 1), lda);
  }
  return 0;
}

void BandedCholesky::solve(const BlockBand& b, const double* l, int lda, double* y) {
  const int nb = b.nb;
  const std::size_t ld = std::size_t(lda);
  for (int j = 0; j < b.nblk; ++j) { // L z = y
    const double* ljj = l + std::size_t(j) * nb * (ld + 1);
    double* yj = y + std::size_t(j) * nb;
    lapack::trsvL('N', nb, ljj, lda, yj);
    const int m = std::min(b.w, b.nblk - 1 - j) * nb;
    if (m) lapack::gemv('N', m, nb, -1.0, ljj + nb, lda, yj, 1.0, yj + nb);
  }
  for (int j = b.nblk - 1; j >= 0; --j) { // L^T x = z
    const double* ljj = l + std::size_t(j) * nb * (ld + 1);
    double* yj = y + std::size_t(j) * nb;
    const int m = std::min(b.w, b.nblk - 1 - j) * nb;
    if (m) lapack::gemv('T', m, nb, -1.0, ljj + nb, lda, yj + nb, 1.0, yj);
    lapack::trsvL('T', nb, ljj, lda, yj);
  }
}

void BandedCholesky::selectedInverse(const BlockBand& b, const double* l, int lda, double* c,
                                     int ldc, int jmin) {
  const int nb = b.nb;
  const std::size_t ld = std::size_t(lda), ldcs = std::size_t(ldc);
  m_linv.resize(std::size_t(nb) * nb);
  m_g.resize(std::size_t(std::max(1, b.w)) * nb * nb);
  // From C L = L^-T, block column j (L_ij = 0 for i > j + w):
  //   C_kj = -sum_i C_ki G_i  (k = j+1..j+w),  G_i = L_ij L_jj^-1,
  //   C_jj = L_jj^-T L_jj^-1 - sum_i C_ij^T G_i,
  // and every C_ki on the right lies in the band of columns > j, formed before.
  for (int j = b.nblk - 1; j >= std::max(0, jmin); --j) {
    const double* ljj = l + std::size_t(j) * nb * (ld + 1);
    double* cjj = c + std::size_t(j) * nb * (ldcs + 1);
    double* li = m_linv.data();
    for (int col = 0; col < nb; ++col)
      std::copy(ljj + col * ld + col, ljj + col * ld + nb, li + std::size_t(col) * nb + col);
    invertLower(nb, li, nb);
    const int m = std::min(b.w, b.nblk - 1 - j) * nb;
    if (m) {
      double* g = m_g.data();
      for (int col = 0; col < nb; ++col)
        std::copy(ljj + nb + col * ld, ljj + nb + col * ld + m, g + std::size_t(col) * m);
      lapack::trmmL('R', 'N', m, nb, 1.0, li, nb, g, m);
      // C_(j+1..j+w, j) = -C_sub G, C_sub the symmetric band block below-right of C_jj.
      lapack::symmLL(m, nb, -1.0, cjj + nb * (ldcs + 1), ldc, g, m, 0.0, cjj + nb, ldc);
    }
    lapack::lauum(nb, li, nb);
    for (int col = 0; col < nb; ++col)
      std::copy(li + std::size_t(col) * nb + col, li + std::size_t(col + 1) * nb,
                cjj + col * ldcs + col);
    if (m) {
      // C_jj -= C_(j+1..j+w, j)^T G, lower triangle only, in three products: the two
      // diagonal squares (h x h, (nb - h) x (nb - h)) and the square below the first;
      // 3/4 of the full product's multiply-adds (the strict upper triangle of the
      // first square is written too: above the diagonal is unspecified).
      const int h = nb / 2, h2 = nb - h;
      const double* cs = cjj + nb; // C_(j+1..j+w, j), m x nb, ldc
      const double* g = m_g.data();
      const std::size_t gh = std::size_t(h) * m;
      lapack::gemm('T', 'N', h, h, m, -1.0, cs, ldc, g, m, 1.0, cjj, ldc);
      lapack::gemm('T', 'N', h2, h, m, -1.0, cs + h * ldcs, ldc, g, m, 1.0, cjj + h, ldc);
      lapack::gemm('T', 'N', h2, h2, m, -1.0, cs + h * ldcs, ldc, g + gh, m, 1.0, cjj + h * (ldcs + 1), ldc);
    }
  }
}

} // namespace spex
