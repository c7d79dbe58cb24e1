// SymEigen: eigenvalues and eigenvectors of one small dense symmetric matrix (the
// 74 x 74 fiber blocks of the covariance, EXTRACTION.md §4.5), as LAPACK's dsyevd
// (numpy's eigh, desispec's) computes them, without its per-call overhead at this size:
//   1. Householder tridiagonalisation Q^T A Q = T (as dsytrd, lower), in one fused,
//      cache-resident pass per column over the lower triangle of a copy: the rank-2
//      update of step k and the matrix-vector product of step k + 1 read each column
//      once (an axpy down the column and a dot with its strictly lower part);
//   2. the eigenpairs of T by LAPACK's divide and conquer (dstedc), the routine dsyevd
//      calls (faster than MRRR, dstemr, at n = 74: docs/benchmarks.md, fifth pass);
//   3. the back-transformation V = Q Z (as dormtr) on Z^T, two reflectors per pass
//      (both dots in one read of Z, both updates in one read and write), so every
//      inner loop is a contiguous axpy (no reductions, vectorised).
// Eigenvalues ascending; eigenvectors as the columns of z, each of unit length (signs
// as they come). Where dstedc reports a failure the matrix goes to dsyevr instead.
#pragma once

#include <vector>

namespace spex {

class SymEigen {
public:
  // a: n x n column-major (lda), lower triangle read, not modified. w: n eigenvalues,
  // z: n x n eigenvectors (ldz). Returns 0, or LAPACK's info where dsyevr failed too.
  int compute(int n, const double* a, int lda, double* w, double* z, int ldz);

  // Multiply-adds of one compute(n) outside dstedc (tridiagonalisation and back-
  // transformation; for the notes): about n^3 + n^3.
  static double fma(int n);

private:
  std::vector<double> m_a;    // n x n working copy, column-major, lower triangle used
  std::vector<double> m_v;    // reflectors: column k holds v_k (rows k+1..n-1, v_k[k+1] = 1)
  std::vector<double> m_tau, m_d, m_e, m_p;
  std::vector<double> m_zt;   // Z^T of the tridiagonal eigenvectors, then V^T
  std::vector<double> m_work; // dstedc / dsyevr workspace
  std::vector<int> m_iwork;
  std::vector<double> m_copy; // the fallback's copy of a
};

} // namespace spex
