// Small dense row-major arrays: the plain containers every core type is made of.
// Array2D<T>(rows, cols) is indexed (row, col); Array3D<T>(n0, n1, n2) is (i, j, k).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace spex {

// A vector of n copies of fill. Large buffers (>= 4 MiB) have their pages mapped in
// one madvise(MADV_POPULATE_WRITE) call before they are filled: faulting a 4k x 4k
// double image in page by page costs 0.37 s on the (virtualised) development machine
// and 0.09 s this way; on bare metal it is a small gain. Without kernel support the
// call fails and nothing changes.
inline void populatePages(void* p, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  if (!p || bytes < (std::size_t(4) << 20)) return;
  const std::uintptr_t page = 4096;
  const std::uintptr_t a = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
  const std::uintptr_t e = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(page - 1);
  if (e > a) (void)madvise(reinterpret_cast<void*>(a), e - a, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)bytes;
#endif
}

template <class T>
std::vector<T> makeFilled(std::size_t n, const T& fill) {
  std::vector<T> v;
  if (n * sizeof(T) >= (std::size_t(4) << 20)) {
    v.reserve(n);
    populatePages(v.data(), n * sizeof(T));
  }
  v.assign(n, fill);
  return v;
}

template <class T>
struct Array2D {
  int rows = 0;
  int cols = 0;
  std::vector<T> data;

  Array2D() = default;
  Array2D(int r, int c, T fill = T{}) : rows(r), cols(c), data(makeFilled(std::size_t(r) * c, fill)) {}

  T& operator()(int r, int c) { return data[std::size_t(r) * cols + c]; }
  const T& operator()(int r, int c) const { return data[std::size_t(r) * cols + c]; }
  T* row(int r) { return data.data() + std::size_t(r) * cols; }
  const T* row(int r) const { return data.data() + std::size_t(r) * cols; }
  bool empty() const { return data.empty(); }
  std::size_t size() const { return data.size(); }
};

template <class T>
struct Array3D {
  int n0 = 0;
  int n1 = 0;
  int n2 = 0;
  std::vector<T> data;

  Array3D() = default;
  Array3D(int a, int b, int c, T fill = T{})
      : n0(a), n1(b), n2(c), data(makeFilled(std::size_t(a) * b * c, fill)) {}

  T& operator()(int i, int j, int k) { return data[(std::size_t(i) * n1 + j) * n2 + k]; }
  const T& operator()(int i, int j, int k) const {
    return data[(std::size_t(i) * n1 + j) * n2 + k];
  }
  bool empty() const { return data.empty(); }
  std::size_t size() const { return data.size(); }
};

} // namespace spex
