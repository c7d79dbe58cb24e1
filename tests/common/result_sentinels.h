// Sentinel values for the kept-result tests (tests/core/extract/test_cpu_engine,
// tests/gpu/test_cuda_engine): a result's frame arrays set to values no extraction
// writes, and a count of the elements still holding them after an extraction into it.
#pragma once

#include "core/extract/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace spextest {

// NaN in the doubles, all bits in the mask, 2 in the coverage; the model is left to the
// caller (the engines write it in different places).
inline void fillFrameSentinels(spex::ExtractionResult& r) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (auto* a : {&r.flux, &r.ivar, &r.chi2pix, &r.pixmaskFraction, &r.deconvolved})
    std::fill(a->data.begin(), a->data.end(), nan);
  std::fill(r.resolution.data.begin(), r.resolution.data.end(), nan);
  std::fill(r.mask.data.begin(), r.mask.data.end(), 0xffffffffu);
  std::fill(r.covered.data.begin(), r.covered.data.end(), uint8_t(2));
}

// Elements still holding the sentinels (the model's NaN included, when it has one).
inline long sentinelsLeft(const spex::ExtractionResult& r) {
  long n = 0;
  for (const auto* a : {&r.flux, &r.ivar, &r.chi2pix, &r.pixmaskFraction, &r.deconvolved})
    for (double v : a->data) n += std::isnan(v);
  for (double v : r.resolution.data) n += std::isnan(v);
  for (uint32_t m : r.mask.data) n += m == 0xffffffffu;
  for (uint8_t c : r.covered.data) n += c == 2;
  if (r.model)
    for (double v : r.model->data) n += std::isnan(v);
  return n;
}

} // namespace spextest
