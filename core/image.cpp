#include "image.h"

#include "parallel.h"

#include <atomic>
#include <cmath>

namespace spex {

const FitsCard* FitsHeader::find(const std::string& key) const {
  for (const auto& c : cards)
    if (c.key == key) return &c;
  return nullptr;
}

std::string FitsHeader::getString(const std::string& key, const std::string& fallback) const {
  const FitsCard* c = find(key);
  if (!c) return fallback;
  std::string v = c->value;
  if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') {
    v = v.substr(1, v.size() - 2);
    while (!v.empty() && v.back() == ' ') v.pop_back();
  }
  return v;
}

void FitsHeader::set(const std::string& key, const std::string& value, const std::string& comment) {
  for (auto& c : cards)
    if (c.key == key) {
      c.value = value;
      c.comment = comment;
      return;
    }
  cards.push_back({key, value, comment});
}

void Image::sanitize() {
  std::atomic<long> bad{0};
  const bool haveMask = mask.size() == pix.size();
  const int rows = int(pix.rows), cols = int(pix.cols);
  if (ivar.size() != pix.size()) return; // readers check shapes before this
  parallelFor(rows, [&](int r0, int r1) {
    long n = 0;
    for (std::size_t i = std::size_t(r0) * cols; i < std::size_t(r1) * cols; ++i) {
      const double p = pix.data[i];
      const double w = ivar.data[i];
      if (!std::isfinite(p) || !std::isfinite(w) || w < 0) {
        ++n;
        pix.data[i] = 0.0;
        ivar.data[i] = 0.0;
        continue;
      }
      if (haveMask && (mask.data[i] & kExtractionMaskBits)) ivar.data[i] = 0.0;
    }
    bad += n;
  });
  nonFinitePixels = int(bad.load());
}

} // namespace spex
