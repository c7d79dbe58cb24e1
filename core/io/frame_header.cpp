// Frame header provenance as desispec writes it (frame_header.h).
#include "frame_header.h"

#include "fits_file.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace spex {

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

bool startsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// os.path.join(a, b) for two components.
std::string joinPath(const std::string& a, const std::string& b) {
  if (!b.empty() && b.front() == '/') return b;
  if (a.empty() || a.back() == '/') return a + b;
  return a + "/" + b;
}

double snapDecimal(double x) {
  const double r = std::round(x * 1e6) / 1e6;
  return std::abs(r - x) <= 8 * std::numeric_limits<double>::epsilon() * std::abs(x) ? r : x;
}

} // namespace

std::string shortenFilename(const std::string& path, const std::optional<std::string>& calib,
                            const std::optional<std::string>& redux,
                            const std::optional<std::string>& specprod) {
  // desispec replaces the first occurrence of the prefix, which startswith puts at 0.
  if (calib && startsWith(path, *calib)) return "SPCALIB" + path.substr(calib->size());
  if (redux && specprod) {
    const std::string root = joinPath(*redux, *specprod);
    if (startsWith(path, root)) return "SPECPROD" + path.substr(root.size());
  }
  return path;
}

std::string shortenFilename(const std::string& path) {
  return shortenFilename(path, env("DESI_SPECTRO_CALIB"), env("DESI_SPECTRO_REDUX"),
                         env("SPECPROD"));
}

std::vector<std::pair<std::string, std::string>> spexlabDependencies() {
  std::vector<std::pair<std::string, std::string>> deps = {
      {"spexlab", SPEXLAB_VERSION}, {"cfitsio", FitsFile::cfitsioVersion()}};
  for (const char* name : {"DESI_ROOT", "DESI_SPECTRO_DATA", "DESI_SPECTRO_REDUX", "SPECPROD",
                           "DESI_SPECTRO_CALIB", "DESI_BASIS_TEMPLATES", "DESI_TARGET",
                           "DESIMODEL"})
    deps.emplace_back(name, env(name).value_or("NOT_SET"));
  return deps;
}

void writeDependencies(FitsFile& f, const std::vector<std::pair<std::string, std::string>>& deps) {
  auto key = [](const char* stem, int i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%s%02d", stem, i);
    return std::string(buf);
  };
  for (const auto& [name, version] : deps) {
    int slot = -1, next = 0;
    for (int i = 0; i < 100; ++i) {
      const auto have = f.readStringOpt(key("DEPNAM", i));
      if (!have) break;
      next = i + 1;
      if (*have == name) {
        slot = i;
        break;
      }
    }
    if (slot < 0) slot = next;
    if (slot > 99) return; // desiutil stops at 100 pairs as well
    f.writeString(key("DEPNAM", slot), name);
    f.writeString(key("DEPVER", slot), version);
  }
}

WaveGrid requestedGrid(const WaveGrid& g, double factor) {
  if (factor == 1.0) return g;
  WaveGrid r = g;
  r.wmin = snapDecimal(g.wmin * factor);
  r.wmax = snapDecimal(g.wmax * factor);
  r.dw = snapDecimal(g.dw * factor);
  return r;
}

std::vector<double> arangeValues(const WaveGrid& g) {
  std::vector<double> w(static_cast<std::size_t>(std::max(g.n, 0)));
  if (w.empty()) return w;
  w[0] = g.wmin;
  if (w.size() < 2) return w;
  w[1] = g.wmin + g.dw;
  const double delta = w[1] - w[0];
  for (std::size_t i = 2; i < w.size(); ++i) w[i] = g.wmin + double(i) * delta;
  return w;
}

} // namespace spex
