#include "random.h"

#include <cmath>
#include <numbers>

namespace spex {

namespace {

uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

} // namespace

uint64_t mixSeed(uint64_t seed, uint64_t purpose, uint64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ purpose) ^ index);
}

double SimRng::logUniform(double lo, double hi) {
  return lo * std::exp(std::log(hi / lo) * uniform());
}

int SimRng::uniformInt(int n) {
  if (n <= 1) return 0;
  // Lemire's multiply-shift on the top 32 bits would bias by n / 2^32; using 64 bits
  // through a 128-bit product makes the bias negligible and stays portable.
  const unsigned __int128 p = (unsigned __int128)m_engine() * (unsigned __int128)uint64_t(n);
  return int(uint64_t(p >> 64));
}

double SimRng::normal() {
  if (m_haveSpare) {
    m_haveSpare = false;
    return m_spare;
  }
  // u1 in (0, 1] so the log is finite.
  const double r = std::sqrt(-2.0 * std::log(uniformPositive()));
  const double phi = 2.0 * std::numbers::pi * uniform();
  m_spare = r * std::sin(phi);
  m_haveSpare = true;
  return r * std::cos(phi);
}

int64_t SimRng::poisson(double mu) {
  if (!(mu > 0.0)) return 0; // also NaN: a model is never negative, keep it harmless
  // PTRS is valid for mu >= 10; below that the inversion search is short (mu + 1
  // steps on average) and exp(-mu) is far from underflow.
  return mu < 10.0 ? poissonInversion(mu) : poissonPtrs(mu);
}

int64_t SimRng::poissonInversion(double mu) {
  const double u = uniform();
  double p = std::exp(-mu);
  double cdf = p;
  int64_t k = 0;
  // The cdf can stop short of 1 by rounding; the tail beyond k = 200 has probability
  // far below 2^-53 for mu < 10, so stopping there changes nothing measurable.
  while (u >= cdf && k < 200) {
    ++k;
    p *= mu / double(k);
    cdf += p;
  }
  return k;
}

int64_t SimRng::poissonPtrs(double mu) {
  // W. Hoermann, "The transformed rejection method for generating Poisson random
  // variables", Insurance: Mathematics and Economics 12 (1993) 39-45, algorithm PTRS.
  const double smu = std::sqrt(mu);
  const double logMu = std::log(mu);
  const double b = 0.931 + 2.53 * smu;
  const double a = -0.059 + 0.02483 * b;
  const double invAlpha = 1.1239 + 1.1328 / (b - 3.4);
  const double vr = 0.9277 - 3.6224 / (b - 2.0);
  for (;;) {
    const double u = uniform() - 0.5;
    const double v = uniform();
    const double us = 0.5 - std::fabs(u);
    if (us <= 0.0) continue; // u = -0.5 exactly: the transform is singular there
    const double kd = std::floor((2.0 * a / us + b) * u + mu + 0.43);
    if (us >= 0.07 && v <= vr) return int64_t(kd); // squeeze: accept at once
    if (kd < 0.0 || (us < 0.013 && v > us)) continue;
    // Full acceptance test against the Poisson pmf, in logs.
    const double lhs = std::log(v * invAlpha / (a / (us * us) + b));
    const double rhs = -mu + kd * logMu - std::lgamma(kd + 1.0);
    if (lhs <= rhs) return int64_t(kd);
  }
}

} // namespace spex
