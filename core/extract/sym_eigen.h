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
//
// compute4 does up to four matrices of one order at once, one per lane of 4-wide vectors
// (AVX2 in core/clones.h's x86-64-v3 clone, two SSE2 halves in the default one): steps
// 1 and 3 as above with the four matrices in the lanes (no loop tails, no sums across
// lanes, no transposes), and step 2 by implicit QL with Wilkinson shifts on the four
// tridiagonals together: a tridiagonal eigensolver is a chain of dependent square roots
// and divisions, and the lanes pay its latency once for four matrices
// (docs/benchmarks.md, "CPU engine, seventh pass" and "eighth pass"). A lane that does
// not converge (30 sweeps for one eigenvalue) or meets a non-finite value is solved
// again by dstedc, as compute() does.
//
// EigenVectors::Twisted (compute4 only; the CPU engine's default) finds the eigenvalues
// alone, by the root-free QL of Pal, Walker and Kahan (dsterf's step: no square root, no
// rotations of Z, which were ~65 % of the QL's work with vectors) in the same lanes, on
// T split where |e| <= eps ||T||, then each eigenvector of T by a twisted factorization
// of T - lambda in lanes (Fernando; Parlett-Dhillon: D+ from the top, D- from the bottom, the twist at the
// least |gamma|: one inverse-iteration step from the best start; the GPU's bisect method,
// gpu/eigh_bisect.cuh, does the same per thread), the back-transformation as above, and
// CholQR of Z (G = Z^T Z = R^T R, Z <- Z R^-1, in lanes, before the back-transformation:
// Q is orthogonal, so Z's Gram matrix is V's): for two
// computed pairs |v_a . v_b| <= (|r_a| + |r_b|) / |lambda_a - lambda_b|, so CholQR mixes
// vectors only in proportion to how close their eigenvalues are and adds ~eps ||T|| to
// the residuals (docs/benchmarks.md, "eighth round: eigensolver by bisection"). A lane
// with two eigenvalues of one unreduced block within 30 eps ||T|| (twisted vectors of
// such a pair come out nearly the same), or whose vectors or Gram matrix are not sound,
// is solved by dstedc instead. Each lane's result depends on its own matrix only.
#pragma once

#include <vector>

namespace spex {

enum class EigenVectors { QL, Twisted };

class SymEigen {
public:
  // How compute4 finds the tridiagonal's eigenvectors (QL: the rotations accumulated).
  void setVectors(EigenVectors v) { m_vectors = v; }
  EigenVectors vectors() const { return m_vectors; }
  // The lanes (bit j) of the last compute4 that were solved by dstedc (or dsyevr) instead
  // (for the tests and notes).
  unsigned lastFallbacks() const { return m_fallbacks; }

  // a: n x n column-major (lda), lower triangle read, not modified. w: n eigenvalues,
  // z: n x n eigenvectors (ldz). Returns 0, or LAPACK's info where dsyevr failed too.
  int compute(int n, const double* a, int lda, double* w, double* z, int ldz);
  // count (1..4) matrices a[j], all n x n with leading dimension lda, into w[j] and z[j]
  // (ldz), as compute() would (to rounding: another tridiagonal solver). Returns 0, or
  // the first info of a lane where dsyevr failed too.
  int compute4(int count, int n, const double* const* a, int lda, double* const* w, double* const* z, int ldz);

  // Multiply-adds of one compute(n) outside dstedc (tridiagonalisation and back-
  // transformation; for the notes): about n^3 + n^3.
  static double fma(int n);

private:
  // One matrix after its tridiagonalisation Q^T A Q = T.
  struct Reduced {
    std::vector<double> v;  // reflectors: column k holds v_k (rows k+1..n-1, v_k[k+1] = 1)
    std::vector<double> tau, d, e; // T's diagonal d and subdiagonal e
    double sigma = 1.0;     // A was scaled by sigma into the safe range
    bool finite = true;
  };
  void reduce(int n, const double* a, int lda, Reduced& L);
  // reduce() for count (1..4) matrices at once, one per lane of a 4-wide vector (the
  // working copies interleaved), into m_lane[0..count): the same steps, every per-column
  // loop over the four matrices together, no tails and no sums across lanes.
  void reduce4(int count, int n, const double* const* a, int lda);
  // dstedc on L's tridiagonal (dsyevr on a where it fails), then the back-transformation.
  int solveTridiagonal(int n, Reduced& L, const double* a, int lda, double* w, double* z, int ldz);
  // z = Q Z for Z in m_zt (row-major).
  void backTransform(int n, const Reduced& L, double* z, int ldz);

  EigenVectors m_vectors = EigenVectors::QL;
  unsigned m_fallbacks = 0;
  // Twisted: the lanes' split tridiagonals, each row's block ends, pivot guards, scratch.
  std::vector<double> m_dt4, m_et4, m_bs4, m_bt4, m_tw, m_gram, m_lam;
  std::vector<Reduced> m_lane;
  std::vector<double> m_a;    // n x n working copy, column-major, lower triangle used
  std::vector<double> m_p;
  std::vector<double> m_dc, m_ec; // dstedc's copies of d and e
  std::vector<double> m_d4, m_e4, m_z4, m_rot4; // compute4: four tridiagonals and their Z, lane-interleaved
  std::vector<double> m_a4, m_v4;  // reduce4: four working copies and reflectors, lane-interleaved
  std::vector<double> m_vall, m_tau4; // reduce4's reflectors (column i: reflector i) and taus, lane-interleaved
  std::vector<int> m_order;
  std::vector<double> m_zt;   // Z^T of the tridiagonal eigenvectors, then V^T
  std::vector<double> m_work; // dstedc / dsyevr workspace
  std::vector<int> m_iwork;
  std::vector<double> m_copy; // the fallback's copy of a
};

} // namespace spex
