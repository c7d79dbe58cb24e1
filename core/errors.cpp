#include "errors.h"

namespace spex {

namespace {
std::string composeFitsMessage(const std::string& file, const std::string& hdu,
                               const std::string& key, const std::string& what) {
  std::string msg = "file '" + file + "'";
  if (!hdu.empty()) msg += ", HDU '" + hdu + "'";
  if (!key.empty()) msg += ", key '" + key + "'";
  return msg + ": " + what;
}
} // namespace

FitsError::FitsError(std::string file, std::string hdu, std::string key, const std::string& what)
    : SpexError(composeFitsMessage(file, hdu, key, what)), m_file(std::move(file)),
      m_hdu(std::move(hdu)), m_key(std::move(key)) {}

} // namespace spex
