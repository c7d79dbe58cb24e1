// Typed errors. Every message names what is wrong and where: the file, the HDU and
// the key when there is one, so a user can fix the input without reading code.
#pragma once

#include <stdexcept>
#include <string>

namespace spex {

// Base of all SpexLab errors; the CLI prints what() and exits non-zero.
class SpexError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// A FITS file is missing, unreadable, malformed or does not hold what we need.
class FitsError : public SpexError {
public:
  FitsError(std::string file, std::string hdu, std::string key, const std::string& what);
  const std::string& file() const { return m_file; }
  const std::string& hdu() const { return m_hdu; }
  const std::string& key() const { return m_key; }

private:
  std::string m_file, m_hdu, m_key;
};

// A request that cannot be satisfied: ranges outside the PSF, empty or reversed
// ranges, bad option values.
class InputError : public SpexError {
public:
  using SpexError::SpexError;
};

// The user cancelled a running extraction.
class CancelledError : public SpexError {
public:
  CancelledError() : SpexError("extraction cancelled") {}
};

// CUDA, cuSOLVER or cuBLAS failure, or no usable GPU.
class GpuError : public SpexError {
public:
  using SpexError::SpexError;
};

} // namespace spex
