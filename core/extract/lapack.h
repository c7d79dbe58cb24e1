// The few BLAS/LAPACK routines the CPU engine uses, declared against the Fortran
// symbols OpenBLAS exports (column-major). Character arguments carry their hidden
// lengths, as gfortran-built libraries expect.
#pragma once

#include "../threads.h"

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
// The engine parallelises over patches, so BLAS itself runs one thread (core/threads.h).
inline void singleThreadedBlas() { spex::singleThreadedBlas(); }

} // namespace spex::lapack
