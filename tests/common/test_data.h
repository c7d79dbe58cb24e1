// Where the shared test data lives: $SPEXLAB_TEST_DATA, else ../shared/data beside the
// project. Tests that need it fail (never skip) with a message saying what is missing.
#pragma once

#include <QString>
#include <QTest>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace spextest {

inline std::string testDataDir() {
  if (const char* env = std::getenv("SPEXLAB_TEST_DATA"); env && *env) return env;
  return SPEXLAB_DEFAULT_TEST_DATA;
}

// Full path of a shared data file, or empty with a failure message prepared in why.
inline std::string dataFile(const std::string& rel, std::string* why = nullptr) {
  const std::string p = testDataDir() + "/" + rel;
  if (!std::filesystem::exists(p)) {
    if (why)
      *why = "shared test data missing: " + p +
             " (set SPEXLAB_TEST_DATA to the folder holding psf-r0-00067784.fits)";
    return {};
  }
  return p;
}

} // namespace spextest

// Fails the current test when the file is absent; CI must fail, not skip.
#define SPEX_REQUIRE_DATA(var, rel)                                                        \
  std::string var;                                                                         \
  do {                                                                                     \
    std::string why_;                                                                      \
    var = spextest::dataFile(rel, &why_);                                                  \
    if (var.empty()) QFAIL(why_.c_str());                                                  \
  } while (0)
