// The few BLAS/LAPACK routines the CPU engine uses, declared against the Fortran
// symbols OpenBLAS exports (column-major). Character arguments carry their hidden
// lengths, as gfortran-built libraries expect.
#pragma once

#include "../threads.h"

#include <algorithm>
#include <cstddef>

extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, std::size_t);
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda,
             double* b, const int* ldb, int* info, std::size_t);
void dtrtri_(const char* uplo, const char* diag, const int* n, double* a, const int* lda, int* info,
             std::size_t, std::size_t);
void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* beta, double* c, const int* ldc,
            std::size_t, std::size_t);
void dgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc, std::size_t, std::size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info, std::size_t,
             std::size_t);
void dsyevr_(const char* jobz, const char* range, const char* uplo, const int* n, double* a,
             const int* lda, const double* vl, const double* vu, const int* il, const int* iu,
             const double* abstol, int* m, double* w, double* z, const int* ldz, int* isuppz,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info, std::size_t,
             std::size_t, std::size_t);
void dtrsm_(const char* side, const char* uplo, const char* ta, const char* diag, const int* m,
            const int* n, const double* alpha, const double* a, const int* lda, double* b,
            const int* ldb, std::size_t, std::size_t, std::size_t, std::size_t);
void dtrmm_(const char* side, const char* uplo, const char* ta, const char* diag, const int* m,
            const int* n, const double* alpha, const double* a, const int* lda, double* b,
            const int* ldb, std::size_t, std::size_t, std::size_t, std::size_t);
void dsymm_(const char* side, const char* uplo, const int* m, const int* n, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta,
            double* c, const int* ldc, std::size_t, std::size_t);
void dtrsv_(const char* uplo, const char* ta, const char* diag, const int* n, const double* a,
            const int* lda, double* x, const int* incx, std::size_t, std::size_t, std::size_t);
void dgemv_(const char* ta, const int* m, const int* n, const double* alpha, const double* a,
            const int* lda, const double* x, const int* incx, const double* beta, double* y,
            const int* incy, std::size_t);
void dlauum_(const char* uplo, const int* n, double* a, const int* lda, int* info, std::size_t);
}

namespace spex::lapack {

inline int potrf(int n, double* a, int lda) {
  int info = 0;
  dpotrf_("L", &n, a, &lda, &info, 1);
  return info;
}
inline int potrs(int n, int nrhs, const double* a, int lda, double* b, int ldb) {
  int info = 0;
  dpotrs_("L", &n, &nrhs, a, &lda, b, &ldb, &info, 1);
  return info;
}
inline int trtri(int n, double* a, int lda) {
  int info = 0;
  dtrtri_("L", "N", &n, a, &lda, &info, 1, 1);
  return info;
}
// C (n x n, lower) = alpha A^T A + beta C with A k x n.
inline void syrkT(int n, int k, double alpha, const double* a, int lda, double beta, double* c,
                  int ldc) {
  dsyrk_("L", "T", &n, &k, &alpha, a, &lda, &beta, c, &ldc, 1, 1);
}
// C = A * B^T, A m x k, B n x k.
inline void gemmNT(int m, int n, int k, const double* a, int lda, const double* b, int ldb,
                   double* c, int ldc) {
  const double one = 1.0, zero = 0.0;
  dgemm_("N", "T", &m, &n, &k, &one, a, &lda, b, &ldb, &zero, c, &ldc, 1, 1);
}
// Eigen-decomposition of a symmetric matrix (lower triangle): eigenvalues ascending
// into w, eigenvectors into the columns of a. work/iwork are resized as needed.
template <class DV, class IV>
int syevd(int n, double* a, int lda, double* w, DV& work, IV& iwork) {
  int info = 0;
  int lwork = -1, liwork = -1;
  double wq = 0;
  int iwq = 0;
  dsyevd_("V", "L", &n, a, &lda, w, &wq, &lwork, &iwq, &liwork, &info, 1, 1);
  lwork = int(wq) + 1;
  liwork = iwq + 1;
  if (work.size() < std::size_t(lwork)) work.resize(lwork);
  if (iwork.size() < std::size_t(liwork)) iwork.resize(liwork);
  dsyevd_("V", "L", &n, a, &lda, w, work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1);
  return info;
}
// Eigen-decomposition by relatively robust representations (MRRR): same contract as
// syevd, eigenvectors into z (ldz), a is destroyed.
template <class DV, class IV>
int syevr(int n, double* a, int lda, double* w, double* z, int ldz, DV& work, IV& iwork) {
  int info = 0, m = 0, il = 0, iu = 0;
  const double vl = 0, vu = 0, abstol = 0;
  if (iwork.size() < std::size_t(12 * n)) iwork.resize(12 * n); // isuppz (2n) + iwork (10n)
  int lwork = -1, liwork = -1, iwq = 0;
  double wq = 0;
  dsyevr_("V", "A", "L", &n, a, &lda, &vl, &vu, &il, &iu, &abstol, &m, w, z, &ldz, iwork.data(),
          &wq, &lwork, &iwq, &liwork, &info, 1, 1, 1);
  // The query's answer, (nb + 1) n, is too small for the blocked back-transformation:
  // dsyevr hands dormtr lwork - 2n, and dormqr needs n nb + 65 * 64 (its T matrix) or it
  // falls back to one reflector at a time (dorm2r, level 2; a third of dsyevr's
  // instructions at n = 74). Give it that much.
  lwork = std::max(int(wq) + 1, 2 * n + 64 * n + 65 * 64);
  liwork = iwq + 1;
  if (work.size() < std::size_t(lwork)) work.resize(lwork);
  if (iwork.size() < std::size_t(2 * n + liwork)) iwork.resize(2 * n + liwork);
  dsyevr_("V", "A", "L", &n, a, &lda, &vl, &vu, &il, &iu, &abstol, &m, w, z, &ldz, iwork.data(),
          work.data(), &lwork, iwork.data() + 2 * n, &liwork, &info, 1, 1, 1);
  return info;
}
// B = alpha op(A)^-1 B (side L) or alpha B op(A)^-1 (side R), A lower triangular.
inline void trsmL(char side, char trans, int m, int n, double alpha, const double* a, int lda,
                  double* b, int ldb) {
  dtrsm_(&side, "L", &trans, "N", &m, &n, &alpha, a, &lda, b, &ldb, 1, 1, 1, 1);
}
// B = alpha B op(A) (side R) or alpha op(A) B (side L), A lower triangular.
inline void trmmL(char side, char trans, int m, int n, double alpha, const double* a, int lda,
                  double* b, int ldb) {
  dtrmm_(&side, "L", &trans, "N", &m, &n, &alpha, a, &lda, b, &ldb, 1, 1, 1, 1);
}
// C = alpha A B + beta C, A m x m symmetric (lower triangle read), B m x n.
inline void symmLL(int m, int n, double alpha, const double* a, int lda, const double* b, int ldb,
                   double beta, double* c, int ldc) {
  dsymm_("L", "L", &m, &n, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);
}
// C (n x n, lower) = alpha A A^T + beta C with A n x k.
inline void syrkN(int n, int k, double alpha, const double* a, int lda, double beta, double* c,
                  int ldc) {
  dsyrk_("L", "N", &n, &k, &alpha, a, &lda, &beta, c, &ldc, 1, 1);
}
// C = alpha op(A) op(B) + beta C.
inline void gemm(char ta, char tb, int m, int n, int k, double alpha, const double* a, int lda,
                 const double* b, int ldb, double beta, double* c, int ldc) {
  dgemm_(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc, 1, 1);
}
// y = alpha op(A) x + beta y, A m x n.
inline void gemv(char ta, int m, int n, double alpha, const double* a, int lda, const double* x,
                 double beta, double* y) {
  const int one = 1;
  dgemv_(&ta, &m, &n, &alpha, a, &lda, x, &one, &beta, y, &one, 1);
}
// x = op(L)^-1 x, L lower triangular.
inline void trsvL(char trans, int n, const double* a, int lda, double* x) {
  const int one = 1;
  dtrsv_("L", &trans, "N", &n, a, &lda, x, &one, 1, 1, 1);
}
// Lower triangle of a = L^T L for L lower triangular in a.
inline int lauum(int n, double* a, int lda) {
  int info = 0;
  dlauum_("L", &n, a, &lda, &info, 1);
  return info;
}
// The engine parallelises over patches, so BLAS itself runs one thread (core/threads.h).
inline void singleThreadedBlas() { spex::singleThreadedBlas(); }

} // namespace spex::lapack
