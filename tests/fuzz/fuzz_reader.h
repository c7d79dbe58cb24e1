// Shared body of the libFuzzer targets (docs/reliability.md "Fuzzing"): the input
// bytes become a file (the readers take paths, as CFITSIO does), the reader runs, and
// only SpexLab's typed errors are an acceptable way to fail. Anything else (an abort,
// an ASan/UBSan report, std::bad_alloc, std::length_error, RSS over -rss_limit_mb)
// is a finding.
#pragma once

#include "core/errors.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace fuzz {

template <class Read>
int runOnBytes(const uint8_t* data, size_t size, Read read) {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/spexlab-fuzz-" + std::to_string(::getpid()) +
           ".fits";
  }();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    read(path);
  } catch (const spex::SpexError&) {
    // a clean, typed error: what hostile input must get
  }
  return 0;
}

} // namespace fuzz
