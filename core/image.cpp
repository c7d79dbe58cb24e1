#include "image.h"

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
  int bad = 0;
  const bool haveMask = mask.size() == pix.size();
  for (std::size_t i = 0; i < pix.size(); ++i) {
    const double p = pix.data[i];
    const double w = ivar.data[i];
    if (!std::isfinite(p) || !std::isfinite(w) || w < 0) {
      ++bad;
      pix.data[i] = 0.0;
      ivar.data[i] = 0.0;
      continue;
    }
    if (haveMask && (mask.data[i] & kExtractionMaskBits)) ivar.data[i] = 0.0;
  }
  nonFinitePixels = bad;
}

} // namespace spex
