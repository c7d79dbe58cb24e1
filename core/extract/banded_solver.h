// Block-banded Cholesky factorisation, solve and selected inversion for the normal
// matrix of one patch (EXTRACTION.md §4.3-4.4; GPU.md, "The structure of the normal
// matrix"). Ordered fiber-major, A^T W A is block-banded: nblk diagonal blocks of nb
// bins (one per fiber), and fiber s couples only with fibers at most w away, where w
// follows from the spot boxes (2 for the DESI r PSFs). The Cholesky factor keeps that
// band, and the blocks of the covariance C = (A^T W A)^-1 inside the band, among them
// the diagonal blocks C_ss the per-fiber decorrelation needs, follow from the factor
// alone (selected inversion, Takahashi, Fagan & Chin 1973; Erisman & Tinney 1975)
// without forming L^-1 or C. Same arithmetic as the dense path on the non-zeros, so the
// same result up to rounding.
#pragma once

#include <vector>

namespace spex {

struct BlockBand {
  int nblk = 0; // diagonal blocks (fibers)
  int nb = 0;   // block size (bins per fiber)
  int w = 0;    // block bandwidth: blocks (i, j) with |i - j| > w are zero
  int n() const { return nblk * nb; }

  // Multiply-adds of the dense path (potrf, trtri of the whole factor, one syrk per
  // fiber block kept0 <= s < kept1) and of the banded one (block potrf/trsm/syrk, then
  // the selected inversion down to block kept0), for the choice between them and the notes.
  double denseFma(int kept0, int kept1) const;
  double bandedFma(int kept0) const;
};

// The inverse of one nb x nb lower-triangular diagonal block for the selected inversion
// (OpenBLAS's dtrtri spends 5 instructions per multiply-add at nb = 74; docs/benchmarks.md,
// "fourth pass"). Column-major; x (ldx) holds L on entry and L^-1 on return, what is
// above the diagonal is neither read nor written. Up to n = 32 in dtrti2's order (from
// the last column, each new column the product of the inverse already formed with L's
// column), above that by halves with two triangular products (as dtrtri).
void invertLower(int n, double* x, int ldx);

class BandedCholesky {
public:
  // Factors the blocks (i, j), j <= i <= j + w, of the lower triangle of a (n x n,
  // column-major, leading dimension lda) in place; nothing outside the band is read or
  // written. Returns 0, or like LAPACK's potrf the 1-based order of the leading minor
  // that is not positive definite.
  static int factor(const BlockBand& b, double* a, int lda);
  // Solves L L^T x = y in place with the factor from factor().
  static void solve(const BlockBand& b, const double* l, int lda, double* y);
  // Selected inversion: writes the blocks (i, j) of C = (L L^T)^-1 with j <= i <= j + w
  // and j >= jmin into c (n x n, column-major, ldc). Diagonal blocks hold their lower
  // triangle (what is above it is unspecified); blocks left of jmin are not formed.
  void selectedInverse(const BlockBand& b, const double* l, int lda, double* c, int ldc, int jmin);

private:
  std::vector<double> m_linv; // nb x nb: L_jj^-1, then L_jj^-T L_jj^-1
  std::vector<double> m_g;    // (w nb) x nb: L_(j+1..j+w, j) L_jj^-1
};

} // namespace spex
