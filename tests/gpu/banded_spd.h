// Test inputs shared by the GPU suites of the block-banded routines
// (test_batched_cholesky, test_batched_selected_inverse).
#pragma once

#include <QtGlobal>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

namespace spextest {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) qFatal("%s: %s", what, cudaGetErrorString(e));
}

// batch SPD matrices of order nblk * nb, column-major, whose blocks (i, j) with
// |i - j| > w are zero: random symmetric entries in the band, each diagonal entry the
// sum of its row's magnitudes times U(1, 2) (positive definite by Gershgorin), the
// whole matrix scaled by 10^U(-3, 3). The upper triangle is poisoned (NaN): only the
// lower one may be read.
inline std::vector<double> randomBanded(int nblk, int nb, int w, int batch, unsigned seed) {
  const int n = nblk * nb;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> out(std::size_t(n) * n * batch, 0.0);
  for (int b = 0; b < batch; ++b) {
    double* A = out.data() + std::size_t(n) * n * b;
    const double scale = std::pow(10.0, 6.0 * u(rng) - 3.0);
    for (int j = 0; j < n; ++j)
      for (int i = j + 1; i < n; ++i)
        if (i / nb - j / nb <= w) A[i + std::size_t(j) * n] = A[j + std::size_t(i) * n] = u(rng) - 0.5;
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int j = 0; j < n; ++j) s += std::abs(A[i + std::size_t(j) * n]);
      A[i + std::size_t(i) * n] = s * (1.0 + u(rng));
    }
    for (std::size_t k = 0; k < std::size_t(n) * n; ++k) A[k] *= scale;
    for (int j = 1; j < n; ++j)
      for (int i = 0; i < j; ++i) A[i + std::size_t(j) * n] = std::numeric_limits<double>::quiet_NaN();
  }
  return out;
}

} // namespace spextest
