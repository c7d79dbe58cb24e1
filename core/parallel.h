// parallelFor: split [0, n) into contiguous chunks, one per thread, and run
// fn(begin, end) on each; the calling thread takes the first chunk. For short,
// evenly loaded host loops (plan, finalize); the CPU engine has its own patch pool.
#pragma once

#include "threads.h"

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace spex {

// threads <= 0: the CPUs this process was given (core/threads.h). Runs serially when n is small (minPerThread).
template <class Fn>
void parallelFor(int n, Fn&& fn, int threads = 0, int minPerThread = 16) {
  if (n <= 0) return;
  if (threads <= 0) threads = defaultThreadCount().threads;
  threads = std::clamp(std::min(threads, n / std::max(1, minPerThread)), 1, 64);
  std::vector<std::thread> pool;
  auto cut = [&](int t) { return int(std::int64_t(n) * t / threads); };
  for (int t = 1; t < threads; ++t) pool.emplace_back([&fn, a = cut(t), b = cut(t + 1)] { fn(a, b); });
  fn(0, cut(1));
  for (std::thread& t : pool) t.join();
}

} // namespace spex
