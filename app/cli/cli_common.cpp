#include "cli_common.h"

#include "core/io/fits_file.h"

#include "core/errors.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace spex::cli {

namespace fs = std::filesystem;

namespace {

// Every long name of app's options ("input", "barycentric-correction", "help").
std::vector<std::string> longNames(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app.get_options())
    for (const std::string& n : o->get_lnames()) out.push_back(n);
  return out;
}

// argparse's allow_abbrev: "--bary" -> "--barycentric-correction" when exactly one long
// option starts with it; several -> an error listing them. Exact names, and anything
// after a bare "--", are left alone; unknown names are left for CLI11 to report.
void expandPrefixes(const CLI::App& app, std::vector<std::string>& args) {
  const std::vector<std::string> names = longNames(app);
  for (std::string& a : args) {
    if (a == "--") break;
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) continue;
    const std::size_t eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (name.empty() || std::find(names.begin(), names.end(), name) != names.end()) continue;
    std::vector<std::string> match;
    for (const std::string& n : names)
      if (n.compare(0, name.size(), name) == 0) match.push_back(n);
    if (match.size() == 1) {
      a = "--" + match[0] + (eq == std::string::npos ? std::string() : a.substr(eq));
    } else if (match.size() > 1) {
      std::string list;
      for (const std::string& m : match) list += (list.empty() ? "--" : ", --") + m;
      throw InputError("ambiguous option --" + name + " could match " + list);
    }
  }
}

} // namespace

void setupApp(CLI::App& app) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.get_formatter()->column_width(34);
}

bool parseArgs(CLI::App& app, std::vector<std::string> args) {
  expandPrefixes(app, args);
  std::reverse(args.begin(), args.end()); // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return false;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return false;
  } catch (const CLI::ExtrasError&) {
    // argparse's wording, arguments in the order given.
    std::string list;
    for (const std::string& a : app.remaining()) list += (list.empty() ? "" : " ") + a;
    throw InputError("unrecognized arguments: " + list);
  } catch (const CLI::ParseError& e) {
    throw InputError(e.what());
  }
  return true;
}

int guarded(const std::string& prog, const std::function<int()>& body) {
  try {
    return body();
  } catch (const SpexError& e) {
    std::fprintf(stderr, "%s: error: %s\n", prog.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: unexpected error: %s\n", prog.c_str(), e.what());
    return 1;
  }
}

std::vector<double> numberList(const std::string& text, const std::string& option) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || end == item.c_str() || *end != '\0' || !std::isfinite(v))
      throw InputError("option " + option + ": '" + text + "' is not a comma-separated list of numbers");
    out.push_back(v);
  }
  if (out.empty()) throw InputError("option " + option + ": empty list");
  return out;
}

WaveGrid parseWaveOption(const std::string& text) {
  const auto v = numberList(text, "-w/--wavelength");
  if (v.size() != 3 && v.size() != 2)
    throw InputError("-w/--wavelength expects wmin,wmax[,dw], got '" + text + "'");
  return WaveGrid::fromRange(v[0], v[1], v.size() == 3 ? v[2] : 0.8);
}

std::vector<int> parseGpus(const std::string& text) {
  std::vector<int> out;
  if (text.empty()) return out;
  for (double v : numberList(text, "--gpus")) {
    if (v < 0 || v != std::floor(v) || v > 1024) throw InputError("--gpus expects device numbers like 0,1, got '" + text + "'");
    out.push_back(int(v));
  }
  return out;
}

void checkWritable(const std::string& path, const std::string& what,
                   const std::vector<std::string>& inputs) {
  if (path.empty()) return;
  std::error_code ec;
  for (const auto& in : inputs)
    if (!in.empty() && fs::exists(in, ec) && fs::exists(path, ec) && fs::equivalent(in, path, ec))
      throw InputError(what + " '" + path + "' is one of the inputs; refusing to overwrite it");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec))
    throw InputError(what + " '" + path + "': directory '" + dir.string() + "' does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    throw InputError(what + " '" + path + "': directory '" + dir.string() + "' is not writable");
  if (fs::is_directory(path, ec)) throw InputError(what + " '" + path + "' is a directory");
}

void writeTextAtomic(const std::string& path, const std::string& text) {
  // Named like AtomicOutput's temporaries ("<path>.tmp-<pid>-<n>"), so a stale one left
  // by a killed process is found and removed by the next run, and listed while it
  // exists, so SIGINT/SIGTERM remove it (docs/reliability.md).
  removeStaleTemporaries(path);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-0";
  const int slot = registerLiveTemporary(tmp);
  auto fail = [&](const std::string& why) {
    std::remove(tmp.c_str());
    releaseLiveTemporary(slot);
    return InputError("cannot write '" + path + "'" + why);
  };
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw fail("");
    out << text;
    out.flush();
    if (!out.good()) {
      out.close();
      throw fail("");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw fail(": " + ec.message());
  releaseLiveTemporary(slot);
}

TerminalProgress::TerminalProgress(bool enabled) : m_enabled(enabled && ::isatty(2)) {}

void TerminalProgress::patchDone(int, int done, int total) {
  if (!m_enabled) return;
  std::lock_guard lock(m_mutex);
  const auto now = std::chrono::steady_clock::now();
  if (done != total && now - m_last < std::chrono::milliseconds(100)) return;
  m_last = now;
  const int width = 40, filled = total ? width * done / total : width;
  std::fprintf(stderr, "\r[%.*s%*s] %3d%%  %d/%d patches", filled,
               "########################################", width - filled, "",
               total ? 100 * done / total : 100, done, total);
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

} // namespace spex::cli
