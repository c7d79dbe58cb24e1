// A small command-line parser for spexlab-cli: long and short options with values,
// flags, and positionals; unknown options are errors that name the option.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace spex::cli {

class Options {
public:
  // valued: options that take a value ("-i", "--input"); aliases map a short name to
  // its long one. flags: options without a value.
  Options(std::map<std::string, std::string> aliases, std::set<std::string> valued,
          std::set<std::string> flags);
  void parse(const std::vector<std::string>& args); // throws InputError

  bool has(const std::string& name) const;
  std::string str(const std::string& name, const std::string& fallback = {}) const;
  int integer(const std::string& name, int fallback) const;
  double number(const std::string& name, double fallback) const;
  const std::vector<std::string>& positional() const { return m_positional; }

private:
  std::map<std::string, std::string> m_aliases;
  std::set<std::string> m_valued, m_flags;
  std::map<std::string, std::string> m_values;
  std::vector<std::string> m_positional;
};

// "a,b,c" -> numbers; throws InputError naming the option on a bad list.
std::vector<double> numberList(const std::string& text, const std::string& option);

} // namespace spex::cli
