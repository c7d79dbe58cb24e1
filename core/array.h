// Small dense row-major arrays: the plain containers every core type is made of.
// Array2D<T>(rows, cols) is indexed (row, col); Array3D<T>(n0, n1, n2) is (i, j, k).
#pragma once

#include <cstddef>
#include <vector>

namespace spex {

template <class T>
struct Array2D {
  int rows = 0;
  int cols = 0;
  std::vector<T> data;

  Array2D() = default;
  Array2D(int r, int c, T fill = T{}) : rows(r), cols(c), data(std::size_t(r) * c, fill) {}

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
      : n0(a), n1(b), n2(c), data(std::size_t(a) * b * c, fill) {}

  T& operator()(int i, int j, int k) { return data[(std::size_t(i) * n1 + j) * n2 + k]; }
  const T& operator()(int i, int j, int k) const {
    return data[(std::size_t(i) * n1 + j) * n2 + k];
  }
  bool empty() const { return data.empty(); }
  std::size_t size() const { return data.size(); }
};

} // namespace spex
