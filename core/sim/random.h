// Portable random numbers for the simulator. std::mt19937_64's output is fixed by the
// C++ standard, but std::uniform_real_distribution, normal_distribution and
// poisson_distribution are not: their output differs between standard libraries. So
// every transform here is our own, and a seed gives the same frame on every platform.
#pragma once

#include <cstdint>
#include <random>

namespace spex {

// Mixes a seed with a purpose and an index (splitmix64 finaliser on each step), so
// that independent streams (fiber 7's spectrum, the read noise, the defects) come from
// one user seed and fiber 7's spectrum does not depend on how many fibers are drawn.
uint64_t mixSeed(uint64_t seed, uint64_t purpose, uint64_t index = 0);

class SimRng {
public:
  explicit SimRng(uint64_t seed) : m_engine(seed) {}

  uint64_t bits() { return m_engine(); }
  // Uniform on [0, 1) with 53 random bits.
  double uniform() { return double(m_engine() >> 11) * 0x1.0p-53; }
  // Uniform on (0, 1]: safe to take the log of.
  double uniformPositive() { return double((m_engine() >> 11) + 1) * 0x1.0p-53; }
  // Uniform on [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Log-uniform on [lo, hi), lo > 0: levels spread evenly over decades.
  double logUniform(double lo, double hi);
  // Integer in [0, n), n > 0 (bias below 2^-40 for any n we use).
  int uniformInt(int n);
  // Standard normal by the Box-Muller transform; the second value of each pair is kept
  // for the next call.
  double normal();
  // Poisson deviate of mean mu >= 0: inversion by sequential search for mu < 10, and
  // Hoermann's transformed rejection with squeeze (PTRS, 1993) above. Both are exact.
  int64_t poisson(double mu);

private:
  int64_t poissonInversion(double mu);
  int64_t poissonPtrs(double mu);

  std::mt19937_64 m_engine;
  double m_spare = 0.0;
  bool m_haveSpare = false;
};

} // namespace spex
