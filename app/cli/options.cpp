#include "options.h"

#include "core/errors.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace spex::cli {

Options::Options(std::map<std::string, std::string> aliases, std::set<std::string> valued,
                 std::set<std::string> flags)
    : m_aliases(std::move(aliases)), m_valued(std::move(valued)), m_flags(std::move(flags)) {}

void Options::parse(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    if (a.size() < 2 || a[0] != '-' || (a[1] >= '0' && a[1] <= '9')) {
      m_positional.push_back(a);
      continue;
    }
    std::string value;
    bool haveValue = false;
    if (const auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a.resize(eq);
      haveValue = true;
    }
    if (auto it = m_aliases.find(a); it != m_aliases.end()) a = it->second;
    if (m_flags.count(a)) {
      if (haveValue) throw InputError("option " + a + " takes no value");
      m_values[a] = "1";
    } else if (m_valued.count(a)) {
      if (!haveValue) {
        if (i + 1 >= args.size()) throw InputError("option " + a + " needs a value");
        value = args[++i];
      }
      m_values[a] = value;
    } else {
      throw InputError("unknown option " + args[i]);
    }
  }
}

bool Options::has(const std::string& name) const { return m_values.count(name) > 0; }

std::string Options::str(const std::string& name, const std::string& fallback) const {
  auto it = m_values.find(name);
  return it == m_values.end() ? fallback : it->second;
}

int Options::integer(const std::string& name, int fallback) const {
  auto it = m_values.find(name);
  if (it == m_values.end()) return fallback;
  char* end = nullptr;
  const long v = std::strtol(it->second.c_str(), &end, 10);
  if (end == it->second.c_str() || *end != '\0' || v < -2147483647L || v > 2147483647L)
    throw InputError("option " + name + " expects an integer, got '" + it->second + "'");
  return int(v);
}

double Options::number(const std::string& name, double fallback) const {
  auto it = m_values.find(name);
  if (it == m_values.end()) return fallback;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0' || !std::isfinite(v))
    throw InputError("option " + name + " expects a number, got '" + it->second + "'");
  return v;
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
  return out;
}

} // namespace spex::cli
