#include "image.h"

#include "errors.h"
#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdlib>

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

Camera parseCamera(const std::string& name) {
  Camera c;
  if (name.size() == 2 && std::isdigit(static_cast<unsigned char>(name[1]))) {
    c.arm = char(std::tolower(static_cast<unsigned char>(name[0])));
    c.petal = name[1] - '0';
    if (c.arm == 'b' || c.arm == 'r' || c.arm == 'z') return c;
  }
  throw InputError("camera '" + name + "': expected b, r or z and a petal 0-9, like r0 or z7");
}

int petalOf(const FitsHeader& header) {
  const std::string camera = header.getString("CAMERA");
  if (camera.size() >= 2 && std::isdigit(static_cast<unsigned char>(camera[1])))
    return camera[1] - '0';
  for (const char* key : {"SPECGRPH", "PETAL"}) {
    const std::string v = header.getString(key);
    if (v.empty()) continue;
    char* end = nullptr;
    const long p = std::strtol(v.c_str(), &end, 10);
    if (end != v.c_str() && p >= 0 && p < 1000) return int(p);
  }
  return -1;
}

std::vector<int32_t> fibersOf(const Image& image, int specmin, int nspec) {
  if (specmin < 0 || nspec < 0)
    throw InputError("spectra " + std::to_string(specmin) + " + " + std::to_string(nspec) +
                     ": specmin and nspec must be >= 0");
  std::vector<int32_t> fibers(static_cast<std::size_t>(nspec));
  const auto& rows = image.fibermap.fiber;
  if (!image.fibermap.sourceFile.empty() || !rows.empty()) {
    if (std::size_t(specmin) + std::size_t(nspec) > rows.size())
      throw InputError("FIBERMAP of '" +
                       (image.fibermap.sourceFile.empty() ? image.path : image.fibermap.sourceFile) +
                       "' has " + std::to_string(rows.size()) + " rows; spectra " +
                       std::to_string(specmin) + ".." + std::to_string(specmin + nspec - 1) +
                       " (-s " + std::to_string(specmin) + " -n " + std::to_string(nspec) +
                       ") need rows up to " + std::to_string(specmin + nspec - 1));
    for (int i = 0; i < nspec; ++i) fibers[std::size_t(i)] = rows[std::size_t(specmin + i)];
    return fibers;
  }
  const int petal = std::max(0, petalOf(image.header));
  for (int i = 0; i < nspec; ++i) fibers[std::size_t(i)] = kFibersPerPetal * petal + specmin + i;
  return fibers;
}

} // namespace spex
