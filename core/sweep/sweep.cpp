#include "sweep.h"

#include "../errors.h"
#include "../extract/compare.h"
#include "../image.h"
#include "../psf/gauss_hermite_psf.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace spex {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// compareFrames' threshold the sweep reports as "fraction below": 0.01 sigma is where
// patch-size effects show while float round-off does not.
constexpr std::size_t kRefThresholdIndex = 3;
static_assert(FrameComparison::kThresholds[kRefThresholdIndex] == 1e-2);

// Shortest text that reads back to the same double (CSV/JSON must round-trip).
std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

// JSON has no NaN or infinity: non-finite values are written as null (read back as NaN).
nlohmann::ordered_json jsonNum(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json();
}

double parseNum(const std::string& s, const char* what) {
  if (s == "nan" || s == "null" || s.empty()) return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return kInf;
  if (s == "-inf") return -kInf;
  double v = 0;
  const auto res = std::from_chars(s.data(), s.data() + s.size(), v);
  if (res.ec != std::errc() || res.ptr != s.data() + s.size())
    throw SpexError(std::string("sweep CSV: bad number '") + s + "' in column " + what);
  return v;
}

std::string csvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Splits one CSV record (RFC 4180 quoting) starting at pos; advances pos past it.
std::vector<std::string> csvRecord(const std::string& text, std::size_t& pos) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  while (pos < text.size()) {
    const char c = text[pos++];
    if (quoted) {
      if (c == '"') {
        if (pos < text.size() && text[pos] == '"') {
          fields.back() += '"';
          ++pos;
        } else {
          quoted = false;
        }
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c == '\n') {
      break;
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  return fields;
}

const char* const kCsvColumns[] = {
    "engine",  "nwavestep",  "nsubbundles", "wavepad_frac", "wavepad",  "patches",
    "bins",    "wall_s",     "throughput_bins_per_s", "pull_n", "pull_mean", "pull_std",
    "ref_n",   "ref_max_pull", "ref_frac_below_0.01", "error"};

SweepMode modeFromName(const std::string& s) {
  if (s == "truth") return SweepMode::Truth;
  if (s == "reference") return SweepMode::Reference;
  if (s == "timing") return SweepMode::TimingOnly;
  throw SpexError("sweep: unknown mode '" + s + "'");
}

// Forwards an engine's per-patch progress to the sweep's callback.
class RowProgress : public ProgressSink {
public:
  RowProgress(const SweepProgressFn& fn, int row, int rows) : m_fn(fn), m_row(row), m_rows(rows) {}
  void patchDone(const PatchOutput&, int done, int total) override {
    if (!m_fn) return;
    SweepProgress p;
    p.row = m_row;
    p.rows = m_rows;
    p.patchesDone = done;
    p.patchesTotal = total;
    m_fn(p);
  }

private:
  const SweepProgressFn& m_fn;
  int m_row, m_rows;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

} // namespace

const char* sweepModeName(SweepMode m) {
  switch (m) {
  case SweepMode::Truth: return "truth";
  case SweepMode::Reference: return "reference";
  case SweepMode::TimingOnly: break;
  }
  return "timing";
}

double SweepRow::score(SweepMode mode) const {
  if (!ok()) return kInf;
  switch (mode) {
  case SweepMode::Truth:
    return pullN > 0 && std::isfinite(pullMean) && std::isfinite(pullStd)
               ? std::abs(pullMean) + std::abs(pullStd - 1.0)
               : kInf;
  case SweepMode::Reference:
    return refN > 0 && std::isfinite(refMaxPull) ? refMaxPull : kInf;
  case SweepMode::TimingOnly: break;
  }
  return 0.0;
}

std::vector<SweepRow> SweepResult::bestSettings(double tolerance) const {
  std::vector<std::string> engines;
  for (const SweepRow& r : rows)
    if (std::find(engines.begin(), engines.end(), r.engine) == engines.end())
      engines.push_back(r.engine);
  std::vector<SweepRow> out;
  for (const std::string& e : engines) {
    double best = kInf;
    for (const SweepRow& r : rows)
      if (r.engine == e && r.ok()) best = std::min(best, r.score(mode));
    if (!std::isfinite(best)) continue; // no row with a usable accuracy
    const SweepRow* pick = nullptr;
    for (const SweepRow& r : rows)
      if (r.engine == e && r.ok() && r.score(mode) <= best + tolerance &&
          (!pick || r.throughput > pick->throughput))
        pick = &r;
    if (pick) out.push_back(*pick);
  }
  return out;
}

std::string SweepResult::toCsv() const {
  std::ostringstream os;
  // A comment line keeps what is not per row; pandas reads it with comment='#'.
  os << "# spexlab sweep mode=" << sweepModeName(mode) << " fibers=" << region.fiber0 << ".."
     << region.fiber1 << " wave=" << num(region.waveMin) << ".." << num(region.waveMax)
     << " region_bins=" << regionBins << " cancelled=" << (cancelled ? 1 : 0) << "\n";
  bool first = true;
  for (const char* c : kCsvColumns) {
    os << (first ? "" : ",") << c;
    first = false;
  }
  os << "\n";
  for (const SweepRow& r : rows) {
    os << csvField(r.engine) << ',' << r.nwavestep << ',' << r.nsubbundles << ','
       << num(r.wavepadFrac) << ',' << r.wavepad << ',' << r.patches << ',' << r.bins << ','
       << num(r.wallS) << ',' << num(r.throughput) << ',' << r.pullN << ',' << num(r.pullMean)
       << ',' << num(r.pullStd) << ',' << r.refN << ',' << num(r.refMaxPull) << ','
       << num(r.refFracBelow) << ',' << csvField(r.error) << "\n";
  }
  return os.str();
}

SweepResult SweepResult::fromCsv(const std::string& text) {
  SweepResult out;
  std::size_t pos = 0;
  std::vector<std::string> header;
  while (pos < text.size()) {
    if (text[pos] == '#') {
      const std::size_t eol = std::min(text.find('\n', pos), text.size());
      std::istringstream line(text.substr(pos, eol - pos));
      std::string tok;
      while (line >> tok) {
        const auto eq = tok.find('=');
        if (eq == std::string::npos) continue;
        const std::string key = tok.substr(0, eq), val = tok.substr(eq + 1);
        const auto dots = val.find("..");
        if (key == "mode") out.mode = modeFromName(val);
        else if (key == "region_bins") out.regionBins = int(parseNum(val, "region_bins"));
        else if (key == "cancelled") out.cancelled = val == "1";
        else if (key == "fibers" && dots != std::string::npos) {
          out.region.fiber0 = int(parseNum(val.substr(0, dots), "fibers"));
          out.region.fiber1 = int(parseNum(val.substr(dots + 2), "fibers"));
        } else if (key == "wave" && dots != std::string::npos) {
          out.region.waveMin = parseNum(val.substr(0, dots), "wave");
          out.region.waveMax = parseNum(val.substr(dots + 2), "wave");
        }
      }
      pos = eol + 1;
      continue;
    }
    std::vector<std::string> f = csvRecord(text, pos);
    if (f.size() == 1 && f[0].empty()) continue; // blank line
    if (header.empty()) {
      header = f;
      continue;
    }
    if (f.size() != header.size())
      throw SpexError("sweep CSV: a row has " + std::to_string(f.size()) + " fields, the header " +
                      std::to_string(header.size()));
    std::map<std::string, std::string> m;
    for (std::size_t i = 0; i < f.size(); ++i) m[header[i]] = f[i];
    auto col = [&](const char* name) -> const std::string& {
      auto it = m.find(name);
      if (it == m.end()) throw SpexError(std::string("sweep CSV: no column '") + name + "'");
      return it->second;
    };
    auto n = [&](const char* name) { return parseNum(col(name), name); };
    SweepRow r;
    r.engine = col("engine");
    r.nwavestep = int(n("nwavestep"));
    r.nsubbundles = int(n("nsubbundles"));
    r.wavepadFrac = n("wavepad_frac");
    r.wavepad = int(n("wavepad"));
    r.patches = int(n("patches"));
    r.bins = long(n("bins"));
    r.wallS = n("wall_s");
    r.throughput = n("throughput_bins_per_s");
    r.pullN = long(n("pull_n"));
    r.pullMean = n("pull_mean");
    r.pullStd = n("pull_std");
    r.refN = long(n("ref_n"));
    r.refMaxPull = n("ref_max_pull");
    r.refFracBelow = n("ref_frac_below_0.01");
    r.error = col("error");
    out.rows.push_back(std::move(r));
  }
  if (header.empty()) throw SpexError("sweep CSV: no header line");
  return out;
}

std::string SweepResult::toJson() const {
  using json = nlohmann::ordered_json;
  json rowsJson = json::array();
  for (const SweepRow& r : rows)
    rowsJson.push_back({{"engine", r.engine},
                        {"nwavestep", r.nwavestep},
                        {"nsubbundles", r.nsubbundles},
                        {"wavepadFrac", jsonNum(r.wavepadFrac)},
                        {"wavepad", r.wavepad},
                        {"patches", r.patches},
                        {"bins", r.bins},
                        {"wallS", jsonNum(r.wallS)},
                        {"throughput", jsonNum(r.throughput)},
                        {"pullN", r.pullN},
                        {"pullMean", jsonNum(r.pullMean)},
                        {"pullStd", jsonNum(r.pullStd)},
                        {"refN", r.refN},
                        {"refMaxPull", jsonNum(r.refMaxPull)},
                        {"refFracBelow", jsonNum(r.refFracBelow)},
                        {"error", r.error}});
  const json root = {{"mode", sweepModeName(mode)},
                     {"region",
                      {{"fiber0", region.fiber0},
                       {"fiber1", region.fiber1},
                       {"waveMin", jsonNum(region.waveMin)},
                       {"waveMax", jsonNum(region.waveMax)}}},
                     {"regionBins", regionBins},
                     {"cancelled", cancelled},
                     {"rows", std::move(rowsJson)}};
  return root.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

SweepResult SweepResult::fromJson(const std::string& text) {
  using nlohmann::json;
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    throw SpexError(std::string("sweep JSON: ") + e.what());
  }
  if (!root.is_object()) throw SpexError("sweep JSON: not an object");
  auto member = [](const json& obj, const char* key) -> const json* {
    if (!obj.is_object()) return nullptr;
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  };
  auto numOf = [&](const json* obj, const char* key) {
    const json* v = obj ? member(*obj, key) : nullptr;
    return v && v->is_number() ? v->get<double>() : std::numeric_limits<double>::quiet_NaN();
  };
  auto strOf = [&](const json* obj, const char* key) {
    const json* v = obj ? member(*obj, key) : nullptr;
    return v && v->is_string() ? v->get<std::string>() : std::string();
  };
  SweepResult out;
  out.mode = modeFromName(strOf(&root, "mode"));
  const json* reg = member(root, "region");
  out.region.fiber0 = int(numOf(reg, "fiber0"));
  out.region.fiber1 = int(numOf(reg, "fiber1"));
  out.region.waveMin = numOf(reg, "waveMin");
  out.region.waveMax = numOf(reg, "waveMax");
  out.regionBins = int(numOf(&root, "regionBins"));
  if (const json* c = member(root, "cancelled"); c && c->is_boolean()) out.cancelled = c->get<bool>();
  const json* rowsJson = member(root, "rows");
  if (!rowsJson || !rowsJson->is_array()) throw SpexError("sweep JSON: no rows array");
  for (const json& v : *rowsJson) {
    SweepRow r;
    r.engine = strOf(&v, "engine");
    r.nwavestep = int(numOf(&v, "nwavestep"));
    r.nsubbundles = int(numOf(&v, "nsubbundles"));
    r.wavepadFrac = numOf(&v, "wavepadFrac");
    r.wavepad = int(numOf(&v, "wavepad"));
    r.patches = int(numOf(&v, "patches"));
    r.bins = long(numOf(&v, "bins"));
    r.wallS = numOf(&v, "wallS");
    r.throughput = numOf(&v, "throughput");
    r.pullN = long(numOf(&v, "pullN"));
    r.pullMean = numOf(&v, "pullMean");
    r.pullStd = numOf(&v, "pullStd");
    r.refN = long(numOf(&v, "refN"));
    r.refMaxPull = numOf(&v, "refMaxPull");
    r.refFracBelow = numOf(&v, "refFracBelow");
    r.error = strOf(&v, "error");
    out.rows.push_back(std::move(r));
  }
  return out;
}

void regionBins(const WaveGrid& g, double waveMin, double waveMax, int& w0, int& w1) {
  // Bins whose centre lies in [waveMin, waveMax], with a little slack for round-off.
  const double eps = 1e-6;
  w0 = std::max(0, int(std::ceil((waveMin - g.wmin) / g.dw - eps)));
  w1 = std::min(g.n, int(std::floor((waveMax - g.wmin) / g.dw + eps)) + 1);
  if (w1 < w0) w1 = w0;
}

PullStats truthPulls(const ExtractionResult& r, const Truth& truth, int f0, int f1, int w0, int w1,
                     int edge) {
  PullStats st;
  if (r.resolution.empty() || r.flux.empty()) return st;
  const int nd = r.ndiag;
  const bool haveCover = !r.covered.empty();
  auto covered = [&](int s, int j) { return !haveCover || r.covered(s, j) != 0; };
  double sum = 0, sum2 = 0;
  for (int fiber = std::max(f0, r.fiberMin); fiber < std::min(f1, r.fiberMin + r.nfiber); ++fiber) {
    const int s = fiber - r.fiberMin;
    const int t = fiber - truth.fiberMin;
    if (t < 0 || t >= truth.phot.rows) continue;
    for (int i = std::max({w0, edge, 0}); i < std::min({w1, r.nwave - edge, r.nwave}); ++i) {
      if (!covered(s, i) || r.ivar(s, i) <= 0 || (!r.mask.empty() && r.mask(s, i))) continue;
      // (R t)_i = sum_j R[i, j] t_j with R[i, j] stored at RESOLUTION[k, j], j = i + nd - k.
      double conv = 0;
      bool whole = true;
      for (int k = 0; k <= 2 * nd; ++k) {
        const int j = i + nd - k;
        if (j < 0 || j >= r.nwave) continue;
        if (!covered(s, j) || j >= truth.phot.cols) {
          whole = false;
          break;
        }
        conv += r.resolution(s, k, j) * truth.phot(t, j);
      }
      if (!whole) continue;
      const double p = (r.flux(s, i) - conv / r.wave.dw) * std::sqrt(r.ivar(s, i));
      if (!std::isfinite(p)) continue;
      sum += p;
      sum2 += p * p;
      ++st.n;
    }
  }
  if (st.n > 0) {
    st.mean = sum / double(st.n);
    st.std = std::sqrt(std::max(0.0, sum2 / double(st.n) - st.mean * st.mean));
  }
  return st;
}

SweepResult runSweep(const std::vector<Engine*>& engines, const SweepInputs& in,
                     const SweepSpec& spec, const SweepProgressFn& progress,
                     const CancelToken& cancel) {
  if (!in.image || !in.psf) throw InputError("sweep needs an image and a PSF");
  if (engines.empty()) throw InputError("sweep needs at least one engine");
  if (spec.nwavestep.empty() || spec.nsubbundles.empty() || spec.wavepadFrac.empty())
    throw InputError("sweep needs at least one value of nwavestep, nsubbundles and wavepad-frac");
  // The base plan validates the frame (fibers, grid against the PSF) once, up front.
  const PatchPlan basePlan = makePatchPlan(*in.psf, spec.wave, spec.fiberMin, spec.nFiber, spec.base);
  (void)basePlan;

  SweepResult out;
  out.region = spec.region;
  const int f0 = std::max(spec.region.fiber0, spec.fiberMin);
  const int f1 = std::min(spec.region.fiber1, spec.fiberMin + spec.nFiber);
  int w0 = 0, w1 = 0;
  regionBins(spec.wave, spec.region.waveMin, spec.region.waveMax, w0, w1);
  if (f1 <= f0 || w1 <= w0) {
    std::ostringstream os;
    os << "sweep region (fibers " << spec.region.fiber0 << ".." << spec.region.fiber1 - 1 << ", "
       << spec.region.waveMin << ".." << spec.region.waveMax
       << " A) does not intersect the extracted frame";
    throw InputError(os.str());
  }
  out.regionBins = (f1 - f0) * (w1 - w0);

  if (in.truth) {
    out.mode = SweepMode::Truth;
    if (in.truth->phot.cols != spec.wave.n)
      throw InputError("sweep truth has " + std::to_string(in.truth->phot.cols) +
                       " wavelengths, the grid " + std::to_string(spec.wave.n));
  } else if (in.reference) {
    out.mode = SweepMode::Reference;
    const ExtractionResult& ref = *in.reference;
    if (ref.fiberMin != spec.fiberMin || ref.nfiber != spec.nFiber || ref.nwave != spec.wave.n)
      throw InputError("sweep reference covers fibers " + std::to_string(ref.fiberMin) + "+" +
                       std::to_string(ref.nfiber) + " x " + std::to_string(ref.nwave) +
                       " bins, the sweep " + std::to_string(spec.fiberMin) + "+" +
                       std::to_string(spec.nFiber) + " x " + std::to_string(spec.wave.n));
  }

  struct Setting {
    int nwavestep, nsubbundles;
    double wavepadFrac;
  };
  std::vector<Setting> settings;
  for (int nw : spec.nwavestep)
    for (int ns : spec.nsubbundles)
      for (double wp : spec.wavepadFrac) settings.push_back({nw, ns, wp});
  const int nrows = int(settings.size() * engines.size());

  int rowIndex = 0;
  for (const Setting& st : settings) {
    for (Engine* engine : engines) {
      if (cancel.cancelled()) {
        out.cancelled = true;
        return out;
      }
      SweepRow row;
      row.engine = engine->name();
      row.nwavestep = st.nwavestep;
      row.nsubbundles = st.nsubbundles;
      row.wavepadFrac = st.wavepadFrac;
      ExtractionRequest req;
      req.image = in.image;
      req.psf = in.psf;
      req.wave = spec.wave;
      req.fiberMin = spec.fiberMin;
      req.nFiber = spec.nFiber;
      req.params = spec.base;
      req.params.nwavestep = st.nwavestep;
      req.params.nsubbundles = st.nsubbundles;
      req.params.wavepadFrac = st.wavepadFrac;
      req.threads = spec.threads;
      row.wavepad = req.params.wavepad();
      try {
        const PatchPlan plan =
            makePatchPlan(*in.psf, spec.wave, spec.fiberMin, spec.nFiber, req.params);
        req.patches = plan.patchesInRegion(f0, f1, w0, w1);
        row.patches = int(req.patches->size());
        RowProgress rp(progress, rowIndex, nrows);
        std::vector<double> walls;
        ExtractionResult r;
        for (int rep = 0; rep < std::max(1, spec.repeat); ++rep) {
          const auto t0 = std::chrono::steady_clock::now();
          r = engine->extract(req, rp, cancel);
          walls.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          if (r.cancelled) break;
        }
        if (r.cancelled) {
          // A half-done setting would report a wrong speed; drop it.
          out.cancelled = true;
          return out;
        }
        row.wallS = median(walls);
        row.patchDiagnostics = r.patches;
        row.profile = r.profile;
        row.bins = 0;
        if (r.covered.empty())
          row.bins = long(r.nfiber) * r.nwave;
        else
          for (uint8_t c : r.covered.data) row.bins += c != 0;
        row.throughput = row.wallS > 0 ? double(row.bins) / row.wallS : 0.0;

        if (out.mode == SweepMode::Truth) {
          const int edge = spec.edgeBins >= 0 ? spec.edgeBins : r.ndiag;
          const PullStats ps = truthPulls(r, *in.truth, f0, f1, w0, w1, edge);
          row.pullN = ps.n;
          row.pullMean = ps.mean;
          row.pullStd = ps.std;
        } else if (out.mode == SweepMode::Reference) {
          // Compare on the region only, so every setting is judged on the same bins.
          if (r.covered.empty()) r.covered = Array2D<uint8_t>(r.nfiber, r.nwave, 1);
          for (int s = 0; s < r.nfiber; ++s) {
            const int fiber = r.fiberMin + s;
            for (int j = 0; j < r.nwave; ++j)
              if (fiber < f0 || fiber >= f1 || j < w0 || j >= w1) r.covered(s, j) = 0;
          }
          const FrameComparison c = compareFrames(r, *in.reference);
          row.refN = c.nbins;
          row.refMaxPull = c.maxPull;
          row.refFracBelow = c.fractionBelow[kRefThresholdIndex];
        }
      } catch (const CancelledError&) {
        out.cancelled = true;
        return out;
      } catch (const std::exception& e) {
        row.error = e.what();
      }
      out.rows.push_back(row);
      if (progress) {
        SweepProgress p;
        p.row = rowIndex;
        p.rows = nrows;
        p.patchesDone = p.patchesTotal = row.patches;
        p.rowDone = &out.rows.back();
        progress(p);
      }
      ++rowIndex;
    }
  }
  return out;
}

} // namespace spex
