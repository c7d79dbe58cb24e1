#include "fits_file.h"

#include "../errors.h"
#include "fits_scan.h"

#include <fitsio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <limits>
#include <type_traits>
#include <unistd.h>

namespace spex {

namespace fs = std::filesystem;

namespace {

fitsfile* F(void* p) {
  return static_cast<fitsfile*>(p);
}

// CFITSIO keeps a stack of detailed messages beside the status code; both go into
// the error so the user sees e.g. "tried to move past end of file" and why.
std::string cfitsioMessage(int status) {
  char text[FLEN_STATUS] = {};
  fits_get_errstatus(status, text);
  std::string msg = "CFITSIO status " + std::to_string(status) + " (" + text + ")";
  char line[FLEN_ERRMSG] = {};
  std::string detail;
  int n = 0;
  while (fits_read_errmsg(line)) {
    if (++n > 4) continue; // drain the rest, keep the first few
    std::string s = line;
    while (!s.empty() && (s.back() == ' ' || s.back() == '\n')) s.pop_back();
    if (s.empty()) continue;
    detail += detail.empty() ? s : "; " + s;
  }
  if (!detail.empty()) msg += ": " + detail;
  return msg;
}

template <class T>
constexpr int fitsType() {
  if constexpr (std::is_same_v<T, double>)
    return TDOUBLE;
  else if constexpr (std::is_same_v<T, float>)
    return TFLOAT;
  else if constexpr (std::is_same_v<T, int32_t>)
    return TINT;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return TUINT;
  else if constexpr (std::is_same_v<T, int64_t>)
    return TLONGLONG;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return TBYTE;
  else
    static_assert(sizeof(T) == 0, "unsupported pixel type");
}

int bitpixOf(FitsPixel p) {
  switch (p) {
  case FitsPixel::UInt8:
    return BYTE_IMG;
  case FitsPixel::Int32:
    return LONG_IMG;
  case FitsPixel::UInt32:
    return ULONG_IMG;
  case FitsPixel::Int64:
    return LONGLONG_IMG;
  case FitsPixel::Float32:
    return FLOAT_IMG;
  case FitsPixel::Float64:
    return DOUBLE_IMG;
  }
  return DOUBLE_IMG;
}

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool startsWithDigitsAfter(const std::string& key, const char* prefix) {
  const std::size_t n = std::strlen(prefix);
  if (key.size() <= n || key.compare(0, n, prefix) != 0) return false;
  return std::all_of(key.begin() + long(n), key.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string shapeText(const std::vector<long>& shape) {
  if (shape.empty()) return "no data (NAXIS = 0)";
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? " x " : "") + std::to_string(shape[i]);
  return s;
}

// A FITS string value with its quotes, quotes inside doubled (FITS standard 4.2.1).
std::string quoteFits(const std::string& v) {
  std::string q = "'";
  for (char c : v) q += (c == '\'') ? std::string("''") : std::string(1, c);
  return q + "'";
}

std::string unquoteFits(const std::string& v) {
  if (v.size() < 2 || v.front() != '\'' || v.back() != '\'') return v;
  std::string out;
  for (std::size_t i = 1; i + 1 < v.size(); ++i) {
    out += v[i];
    if (v[i] == '\'' && i + 2 < v.size() && v[i + 1] == '\'') ++i;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// The FITS data checksum (DATASUM: the 32-bit ones'-complement sum of the data unit's
// big-endian 32-bit words; the zero padding adds nothing) of n values of T as CFITSIO
// stores them as `pixel`, for the conversions whose stored bits are known here; nullopt
// for the others (CFITSIO then sums the written bytes). Any order of folding the
// carries gives the same sum.
template <class T>
std::optional<uint32_t> dataSumAs(FitsPixel pixel, const T* data, long long n) {
  FitsDataSum sum;
  auto add = [&](uint32_t w) { sum.add(w); };
  if (pixel == FitsPixel::Float32 && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
    for (long long i = 0; i < n; ++i) {
      const float v = static_cast<float>(data[i]); // CFITSIO's (float) conversion
      uint32_t w;
      std::memcpy(&w, &v, 4);
      add(w);
    }
  } else if (pixel == FitsPixel::Float64 && std::is_same_v<T, double>) {
    for (long long i = 0; i < n; ++i) {
      uint64_t w;
      std::memcpy(&w, &data[i], 8);
      add(uint32_t(w >> 32));
      add(uint32_t(w));
    }
  } else if (pixel == FitsPixel::Int32 && std::is_same_v<T, int32_t>) {
    for (long long i = 0; i < n; ++i) add(uint32_t(data[i]));
  } else if (pixel == FitsPixel::UInt32 && std::is_same_v<T, uint32_t>) {
    for (long long i = 0; i < n; ++i) add(uint32_t(data[i]) ^ 0x80000000u); // stored v - 2^31
  } else {
    return std::nullopt;
  }
  return sum.value();
}

} // namespace

std::optional<double> parseFitsDouble(const std::string& text) {
  // FITS reals: Fortran-style exponents 'D' as well as 'E' (standard 4.2.4).
  if (text.empty() || text.size() > 70) return std::nullopt;
  std::string s = text;
  for (char& c : s)
    if (c == 'D' || c == 'd') c = 'E';
  const char* b = s.data() + (s.front() == '+' ? 1 : 0);
  double x = 0;
  auto [p, ec] = std::from_chars(b, s.data() + s.size(), x);
  if (p != s.data() + s.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) return std::numeric_limits<double>::infinity();
  if (ec != std::errc()) return std::nullopt;
  return x;
}

// ---- lifetime ----------------------------------------------------------------------

// A file in memory: CFITSIO keeps the addresses of ptr and size while it is open.
struct FitsMemory {
  std::shared_ptr<const FitsBytes> bytes;
  void* ptr = nullptr;
  std::size_t size = 0;
};

FitsFile::FitsFile(void* f, std::string path, std::string display)
    : m_fptr(f), m_path(std::move(path)), m_display(std::move(display)) {}

FitsFile::FitsFile(FitsFile&& o) noexcept
    : m_fptr(o.m_fptr), m_layout(std::move(o.m_layout)), m_mem(std::move(o.m_mem)),
      m_dataSums(std::move(o.m_dataSums)), m_path(std::move(o.m_path)),
      m_display(std::move(o.m_display)), m_hdu(std::move(o.m_hdu)) {
  o.m_fptr = nullptr;
}

FitsFile& FitsFile::operator=(FitsFile&& o) noexcept {
  if (this != &o) {
    if (m_fptr) {
      int status = 0;
      fits_close_file(F(m_fptr), &status);
    }
    m_fptr = o.m_fptr;
    o.m_fptr = nullptr;
    m_layout = std::move(o.m_layout);
    m_mem = std::move(o.m_mem); // after the close: CFITSIO no longer points into it
    m_dataSums = std::move(o.m_dataSums);
    m_path = std::move(o.m_path);
    m_display = std::move(o.m_display);
    m_hdu = std::move(o.m_hdu);
  }
  return *this;
}

FitsFile::~FitsFile() {
  if (m_fptr) {
    int status = 0;
    fits_close_file(F(m_fptr), &status);
    if (status) fits_clear_errmsg();
  }
}

FitsFile FitsFile::openRead(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!fs::exists(st)) throw FitsError(path, "", "", "file does not exist");
  if (fs::is_directory(st)) throw FitsError(path, "", "", "is a directory, not a FITS file");
  if (!fs::is_regular_file(st)) throw FitsError(path, "", "", "is not a regular file");
  if (fs::file_size(path, ec) == 0) throw FitsError(path, "", "", "file is empty (0 bytes)");
  if (::access(path.c_str(), R_OK) != 0)
    throw FitsError(path, "", "", std::string("file is not readable: ") + std::strerror(errno));

  // Our own walk over the header blocks first: CFITSIO 4.2 aborts the process on some
  // malformed structural keywords, and trusts size claims (fits_scan.h). A gzip file is
  // inflated once; the scan and CFITSIO then read the same bytes in memory.
  if (isGzipFile(path)) {
    std::shared_ptr<const FitsBytes> bytes = inflateGzipFile(path);
    auto layout = std::make_shared<const FitsLayout>(scanFitsLayout(*bytes));
    return openScanned(std::move(bytes), std::move(layout), path, path);
  }
  FitsLayout layout = scanFitsLayout(path);

  // fits_open_diskfile: no extended-filename parsing (a '[' in a path is a
  // character, not a filter).
  fitsfile* f = nullptr;
  int status = 0;
  if (fits_open_diskfile(&f, path.c_str(), READONLY, &status)) {
    if (f) {
      int s2 = 0;
      fits_close_file(f, &s2);
    }
    throw FitsError(path, "", "", "cannot open as FITS: " + cfitsioMessage(status));
  }
  FitsFile ff(f, path, path);
  ff.m_layout = std::make_shared<const FitsLayout>(std::move(layout));
  ff.refreshHduName();
  return ff;
}

FitsFile FitsFile::openMemory(std::shared_ptr<const FitsBytes> bytes, const std::string& display) {
  if (!bytes) throw InputError("FitsFile::openMemory: no bytes");
  const std::string name = display.empty() ? bytes->name() : display;
  auto layout = std::make_shared<const FitsLayout>(scanFitsLayout(*bytes));
  return openScanned(std::move(bytes), std::move(layout), name, name);
}

FitsFile FitsFile::openScanned(std::shared_ptr<const FitsBytes> bytes,
                               std::shared_ptr<const FitsLayout> layout, const std::string& path,
                               const std::string& display) {
  auto mem = std::make_shared<FitsMemory>();
  mem->ptr = const_cast<char*>(bytes->data()); // READONLY: CFITSIO never writes through it
  mem->size = bytes->size();
  mem->bytes = std::move(bytes);
  // The name is only CFITSIO's label for the handle (ffomem parses it as a URL; the
  // real path, which may hold '[', is kept out of it).
  fitsfile* f = nullptr;
  int status = 0;
  if (fits_open_memfile(&f, "spexlab-memory", READONLY, &mem->ptr, &mem->size, 0, nullptr, &status)) {
    if (f) {
      int s2 = 0;
      fits_close_file(f, &s2);
    }
    throw FitsError(display, "", "", "cannot open as FITS: " + cfitsioMessage(status));
  }
  FitsFile ff(f, path, display);
  ff.m_layout = std::move(layout);
  ff.m_mem = std::move(mem);
  ff.refreshHduName();
  return ff;
}

FitsFile FitsFile::openHduCopy(const std::string& hdu, const std::string& display) {
  // An empty primary HDU, then the extension as its file held it.
  std::string primary;
  auto card = [&](const std::string& text) {
    std::string c = text;
    c.resize(80, ' ');
    primary += c;
  };
  card("SIMPLE  =                    T");
  card("BITPIX  =                    8");
  card("NAXIS   =                    0");
  card("EXTEND  =                    T");
  card("END");
  primary.resize(2880, ' ');
  auto bytes = std::make_shared<FitsBytes>(display, primary.size() + hdu.size(), false);
  bytes->append(primary.data(), primary.size());
  bytes->append(hdu.data(), hdu.size());
  FitsFile f = openMemory(std::move(bytes), display);
  f.moveToIndex(1);
  return f;
}

FitsFile FitsFile::reopen() {
  if (m_mem) return openScanned(m_mem->bytes, m_layout, m_path, m_display);
  return openRead(m_path);
}

FitsFile FitsFile::create(const std::string& path, const std::string& displayName) {
  const std::string display = displayName.empty() ? path : displayName;
  fitsfile* f = nullptr;
  int status = 0;
  // A name ending in .gz makes CFITSIO build the file in memory and gzip it on
  // close; everything else goes straight to disk without filename parsing.
  if (endsWith(path, ".gz"))
    fits_create_file(&f, path.c_str(), &status);
  else
    fits_create_diskfile(&f, path.c_str(), &status);
  if (status)
    throw FitsError(display, "", "", "cannot create '" + path + "': " + cfitsioMessage(status));
  FitsFile ff(f, path, display);
  ff.m_hdu = "primary";
  return ff;
}

void FitsFile::close() {
  if (!m_fptr) return;
  int status = 0;
  fits_close_file(F(m_fptr), &status);
  m_fptr = nullptr;
  m_mem.reset();
  if (status)
    throw FitsError(m_display, "", "", "cannot write/close the file: " + cfitsioMessage(status));
}

// ---- errors --------------------------------------------------------------------------

void FitsFile::fail(const std::string& key, const std::string& what, int status) {
  std::string msg = what;
  if (status) msg += ": " + cfitsioMessage(status);
  throw FitsError(m_display, m_hdu, key, msg);
}

void FitsFile::check(int status, const std::string& key, const std::string& what) {
  if (status) fail(key, what, status);
}

// ---- HDUs ----------------------------------------------------------------------------

void FitsFile::refreshHduName() {
  int num = 0;
  fits_get_hdu_num(F(m_fptr), &num);
  char value[FLEN_VALUE] = {};
  int status = 0;
  if (fits_read_key(F(m_fptr), TSTRING, "EXTNAME", value, nullptr, &status) == 0 && value[0]) {
    m_hdu = value;
    while (!m_hdu.empty() && m_hdu.back() == ' ') m_hdu.pop_back();
    return;
  }
  fits_clear_errmsg();
  m_hdu = num <= 1 ? "primary" : "HDU " + std::to_string(num - 1);
}

int FitsFile::hduCount() {
  int n = 0, status = 0;
  fits_get_num_hdus(F(m_fptr), &n, &status);
  check(status, "", "cannot count HDUs");
  return n;
}

bool FitsFile::tryMoveTo(const std::string& extname) {
  int status = 0;
  std::vector<char> name(extname.begin(), extname.end());
  name.push_back('\0');
  if (fits_movnam_hdu(F(m_fptr), ANY_HDU, name.data(), 0, &status)) {
    if (status == BAD_HDU_NUM) {
      fits_clear_errmsg();
      // CFITSIO may have stopped on another HDU while searching.
      refreshHduName();
      return false;
    }
    const std::string msg = cfitsioMessage(status);
    throw FitsError(m_display, extname, "", "cannot reach HDU: " + msg);
  }
  refreshHduName();
  return true;
}

void FitsFile::moveTo(const std::string& extname) {
  if (tryMoveTo(extname)) return;
  // An HDU whose size claim swallows the next header hides it from CFITSIO: name the
  // claim, not the HDU that seems missing.
  if (m_layout) {
    const std::string inside = m_mem ? findHeaderInsideData(*m_mem->bytes, *m_layout)
                                     : findHeaderInsideData(m_path, *m_layout);
    for (const auto& h : m_layout->hdus)
      if (!inside.empty() && inside.rfind("HDU '" + h.name + "'", 0) == 0)
        throw FitsError(m_display, h.name, "NAXIS" + std::to_string(std::max<std::size_t>(h.naxes.size(), 1)),
                        inside + " (so no HDU named '" + extname + "' is found)");
  }
  throw FitsError(m_display, extname, "", "no HDU named '" + extname + "' in the file");
}

void FitsFile::moveToIndex(int index) {
  int status = 0, type = 0;
  if (fits_movabs_hdu(F(m_fptr), index + 1, &type, &status)) {
    const std::string msg = cfitsioMessage(status);
    throw FitsError(m_display, "HDU " + std::to_string(index), "", "cannot reach HDU: " + msg);
  }
  refreshHduName();
}

int FitsFile::currentIndex() {
  int num = 0;
  fits_get_hdu_num(F(m_fptr), &num);
  return num - 1;
}

bool FitsFile::currentIsImage() {
  int type = 0, status = 0;
  fits_get_hdu_type(F(m_fptr), &type, &status);
  check(status, "", "cannot read the HDU type");
  return type == IMAGE_HDU;
}

bool FitsFile::currentIsTable() {
  int type = 0, status = 0;
  fits_get_hdu_type(F(m_fptr), &type, &status);
  check(status, "", "cannot read the HDU type");
  return type == BINARY_TBL || type == ASCII_TBL;
}

void FitsFile::requireImage(const char* what) {
  if (!currentIsImage()) fail("", std::string("is a table, expected an image (") + what + ")");
}

void FitsFile::requireTable(const char* what) {
  if (!currentIsTable()) fail("", std::string("is an image, expected a table (") + what + ")");
}

// ---- keys ----------------------------------------------------------------------------

bool FitsFile::hasKey(const std::string& key) {
  char card[FLEN_CARD] = {};
  int status = 0;
  if (fits_read_card(F(m_fptr), key.c_str(), card, &status) == 0) return true;
  if (status == KEY_NO_EXIST) {
    fits_clear_errmsg();
    return false;
  }
  fail(key, "cannot read key", status);
}

std::optional<std::string> FitsFile::readStringOpt(const std::string& key) {
  char* value = nullptr;
  int status = 0;
  // Handles the CONTINUE long-string convention as well as plain values.
  fits_read_key_longstr(F(m_fptr), key.c_str(), &value, nullptr, &status);
  if (status == KEY_NO_EXIST) {
    fits_clear_errmsg();
    return std::nullopt;
  }
  if (status) {
    if (value) fits_free_memory(value, &status);
    fail(key, "cannot read key", status);
  }
  std::string s = value ? value : "";
  int s2 = 0;
  if (value) fits_free_memory(value, &s2);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string FitsFile::readString(const std::string& key) {
  auto v = readStringOpt(key);
  if (!v) fail(key, "required key is missing");
  return *v;
}

std::optional<std::string> FitsFile::readValueText(const std::string& key) {
  // The card's value as written, with no conversion by CFITSIO: its number parsers
  // (ffc2j, ffc2d) overflow a message buffer on long values in CFITSIO 4.2.
  char value[FLEN_VALUE] = {};
  int status = 0;
  fits_read_keyword(F(m_fptr), key.c_str(), value, nullptr, &status);
  if (status == KEY_NO_EXIST) {
    fits_clear_errmsg();
    return std::nullopt;
  }
  check(status, key, "cannot read key");
  std::string v = value;
  while (!v.empty() && v.back() == ' ') v.pop_back();
  std::size_t b = 0;
  while (b < v.size() && v[b] == ' ') ++b;
  v.erase(0, b);
  if (v.empty()) fail(key, "key has no value");
  return v;
}

namespace {
std::string shortValue(const std::string& v) {
  return v.size() > 24 ? v.substr(0, 24) + "..." : v;
}
} // namespace

std::optional<long long> FitsFile::readLongOpt(const std::string& key) {
  const auto text = readValueText(key);
  if (!text) return std::nullopt;
  const std::string& v = *text;
  if (v.front() == '\'') fail(key, "value " + shortValue(v) + " is a string, expected an integer");
  long long x = 0;
  const char* b = v.data() + (v.front() == '+' ? 1 : 0);
  auto [p, ec] = std::from_chars(b, v.data() + v.size(), x);
  if (ec == std::errc() && p == v.data() + v.size()) return x;
  if (ec == std::errc::result_out_of_range)
    fail(key, "value " + shortValue(v) + " does not fit a 64-bit integer");
  // A real number that is a whole one ("5.0", "1E3") is accepted, as CFITSIO does.
  if (auto d = parseFitsDouble(v); d && std::trunc(*d) == *d && std::abs(*d) < 9.2e18)
    return static_cast<long long>(*d);
  fail(key, "value " + shortValue(v) + " is not an integer");
}

long long FitsFile::readLong(const std::string& key) {
  auto v = readLongOpt(key);
  if (!v) fail(key, "required key is missing");
  return *v;
}

std::optional<int> FitsFile::readIntOpt(const std::string& key, int minValue) {
  auto v = readLongOpt(key);
  if (!v) return std::nullopt;
  if (*v < minValue || *v > std::numeric_limits<int>::max())
    fail(key, "value " + std::to_string(*v) +
                  " is out of range (must be >= " + std::to_string(minValue) + ")");
  return int(*v);
}

int FitsFile::readInt(const std::string& key, int minValue) {
  auto v = readIntOpt(key, minValue);
  if (!v) fail(key, "required key is missing");
  return *v;
}

std::optional<double> FitsFile::readDoubleOpt(const std::string& key) {
  const auto text = readValueText(key);
  if (!text) return std::nullopt;
  if (text->front() == '\'')
    fail(key, "value " + shortValue(*text) + " is a string, expected a number");
  const auto v = parseFitsDouble(*text);
  if (!v) fail(key, "value " + shortValue(*text) + " is not a number");
  if (!std::isfinite(*v)) fail(key, "value is not finite");
  return *v;
}

double FitsFile::readDouble(const std::string& key) {
  auto v = readDoubleOpt(key);
  if (!v) fail(key, "required key is missing");
  return *v;
}

std::optional<bool> FitsFile::readBoolOpt(const std::string& key) {
  const auto text = readValueText(key);
  if (!text) return std::nullopt;
  if (*text == "T") return true;
  if (*text == "F") return false;
  fail(key, "value " + shortValue(*text) + " is not a logical (T/F)");
}

bool FitsFile::readBool(const std::string& key) {
  auto v = readBoolOpt(key);
  if (!v) fail(key, "required key is missing");
  return *v;
}

void FitsFile::writeCard(const std::string& key, const std::string& value,
                         const std::string& comment) {
  char card[FLEN_CARD] = {};
  std::vector<char> val(value.begin(), value.end());
  val.push_back('\0');
  int status = 0;
  fits_make_key(key.c_str(), val.data(), comment.c_str(), card, &status);
  fits_update_card(F(m_fptr), key.c_str(), card, &status);
  check(status, key, "cannot write key");
}

void FitsFile::writeString(const std::string& key, const std::string& value,
                           const std::string& comment) {
  int status = 0;
  // Longer than one card can hold: the CONTINUE convention (LONGSTRN).
  if (value.size() > 68)
    fits_update_key_longstr(F(m_fptr), key.c_str(), value.c_str(), comment.c_str(), &status);
  else
    fits_update_key_str(F(m_fptr), key.c_str(), value.c_str(), comment.c_str(), &status);
  check(status, key, "cannot write key");
}

void FitsFile::writeLong(const std::string& key, long long value, const std::string& comment) {
  LONGLONG v = value;
  int status = 0;
  fits_update_key(F(m_fptr), TLONGLONG, key.c_str(), &v, comment.c_str(), &status);
  check(status, key, "cannot write key");
}

void FitsFile::writeDouble(const std::string& key, double value, const std::string& comment) {
  if (!std::isfinite(value)) fail(key, "cannot write a non-finite value to a header key");
  // Shortest representation that reads back to the same double (CFITSIO's own
  // formatting keeps 15 digits, which is not exact).
  char buf[64] = {};
  auto res = std::to_chars(buf, buf + sizeof(buf) - 3, value);
  std::string s(buf, res.ptr);
  for (char& c : s)
    if (c == 'e') c = 'E';
  if (s.find_first_of(".E") == std::string::npos) s += ".0";
  writeCard(key, s, comment);
}

void FitsFile::writeBool(const std::string& key, bool value, const std::string& comment) {
  int v = value ? 1 : 0;
  int status = 0;
  fits_update_key(F(m_fptr), TLOGICAL, key.c_str(), &v, comment.c_str(), &status);
  check(status, key, "cannot write key");
}

void FitsFile::deleteKey(const std::string& key) {
  int status = 0;
  fits_delete_key(F(m_fptr), key.c_str(), &status);
  if (status == KEY_NO_EXIST) {
    fits_clear_errmsg();
    return;
  }
  check(status, key, "cannot delete key");
}

bool FitsFile::isStructuralKey(const std::string& key) {
  static const char* fixed[] = {
      "SIMPLE", "BITPIX", "NAXIS", "EXTEND", "XTENSION", "PCOUNT", "GCOUNT", "TFIELDS", "THEAP",
      "BSCALE", "BZERO", "BLANK", "EXTNAME", "EXTVER", "EXTLEVEL", "HDUNAME", "CHECKSUM", "DATASUM",
      "END", "GROUPS", "CONTINUE",
      // tile-compressed images (CFITSIO shows them as images, but the header holds these)
      "ZIMAGE", "ZBITPIX", "ZNAXIS", "ZCMPTYPE", "ZQUANTIZ", "ZDITHER0", "ZSIMPLE", "ZEXTEND",
      "ZTENSION", "ZPCOUNT", "ZGCOUNT", "ZBLOCKED", "ZHECKSUM", "ZDATASUM", "ZBLANK", "ZSCALE",
      "ZZERO", "ZMASKCMP", "ZTHEAP"};
  for (const char* k : fixed)
    if (key == k) return true;
  static const char* indexed[] = {"NAXIS",  "TTYPE", "TFORM", "TUNIT", "TDIM",  "TNULL", "TSCAL",
                                  "TZERO",  "TDISP", "TBCOL", "TDMIN", "TDMAX", "TLMIN", "TLMAX",
                                  "ZNAXIS", "ZTILE", "ZNAME", "ZVAL",  "ZFORM", "ZCTYP"};
  for (const char* p : indexed)
    if (startsWithDigitsAfter(key, p)) return true;
  return false;
}

FitsHeader FitsFile::readHeader() {
  FitsHeader h;
  int nkeys = 0, status = 0;
  fits_get_hdrspace(F(m_fptr), &nkeys, nullptr, &status);
  check(status, "", "cannot read the header");
  for (int k = 1; k <= nkeys; ++k) {
    char name[FLEN_KEYWORD] = {}, value[FLEN_VALUE] = {}, comment[FLEN_COMMENT] = {};
    fits_read_keyn(F(m_fptr), k, name, value, comment, &status);
    check(status, "", "cannot read header card " + std::to_string(k));
    const std::string key = name;
    if (key.empty() || isStructuralKey(key)) continue;
    std::string v = value;
    if (key != "COMMENT" && key != "HISTORY" && v.size() >= 3 && v.front() == '\'' &&
        endsWith(v, "&'")) {
      // A long string continued on CONTINUE cards: keep it whole.
      if (auto whole = readStringOpt(key)) v = quoteFits(*whole);
    }
    h.cards.push_back({key, v, comment});
  }
  return h;
}

void FitsFile::writeHeader(const FitsHeader& header) {
  for (const FitsCard& c : header.cards) {
    if (c.key.empty() || isStructuralKey(c.key)) continue;
    int status = 0;
    if (c.key == "COMMENT") {
      fits_write_comment(F(m_fptr), c.comment.c_str(), &status);
      check(status, c.key, "cannot write card");
    } else if (c.key == "HISTORY") {
      fits_write_history(F(m_fptr), c.comment.c_str(), &status);
      check(status, c.key, "cannot write card");
    } else if (c.value.size() > 70 && c.value.front() == '\'') {
      writeString(c.key, unquoteFits(c.value), c.comment);
    } else {
      writeCard(c.key, c.value, c.comment);
    }
  }
}

// ---- images --------------------------------------------------------------------------

std::vector<long> FitsFile::imageShape() {
  requireImage("reading its shape");
  int naxis = 0, status = 0;
  fits_get_img_dim(F(m_fptr), &naxis, &status);
  check(status, "NAXIS", "cannot read the image dimensions");
  std::vector<LONGLONG> naxes(std::max(naxis, 1), 0);
  if (naxis > 0) fits_get_img_sizell(F(m_fptr), naxis, naxes.data(), &status);
  check(status, "NAXIS", "cannot read the image size");
  std::vector<long> shape;
  for (int i = naxis - 1; i >= 0; --i) shape.push_back(long(naxes[i]));
  return shape;
}

template <class T>
void FitsFile::readPixels(long long n, T* out) {
  if (n == 0) return;
  int status = 0, anynul = 0;
  fits_read_img(F(m_fptr), fitsType<T>(), 1, n, nullptr, out, &anynul, &status);
  if (status == NUM_OVERFLOW) fail("", "pixel values do not fit the type they are read as", status);
  check(status, "", "cannot read the image data (file truncated or corrupt?)");
}

namespace {
// An image's array with its pages mapped in 4 MiB steps (Array2D's constructor maps a
// large one in a single madvise, core/array.h). One MADV_POPULATE_WRITE call holds the
// address space's lock (mmap_lock) while it faults pages in, ~50 ms for a 4k x 4k double
// plane, and the threads that map memory meanwhile wait: a cold `extract` reads the
// preproc beside the CUDA driver's start and the opening of cuBLAS/cuSOLVER
// (docs/benchmarks.md, "Cold process").
template <class T>
Array2D<T> imageArray(int rows, int cols) {
  Array2D<T> a;
  a.rows = rows;
  a.cols = cols;
  const std::size_t n = std::size_t(rows) * std::size_t(cols);
  a.data.reserve(n);
  const std::size_t step = std::size_t(4) << 20;
  auto* p = reinterpret_cast<unsigned char*>(a.data.data());
  for (std::size_t at = 0; at < n * sizeof(T); at += step)
    populatePages(p + at, std::min(step, n * sizeof(T) - at)); // pieces < 4 MiB are left to faults
  a.data.assign(n, T{});
  return a;
}
} // namespace

template <class T>
Array2D<T> FitsFile::readImage2D(int rows, int cols) {
  const std::vector<long> shape = imageShape();
  if (shape.size() != 2) fail("NAXIS", "expected a 2D image, found " + shapeText(shape));
  if ((rows >= 0 && shape[0] != rows) || (cols >= 0 && shape[1] != cols))
    fail("", "image is " + shapeText(shape) + " (rows x columns), expected " +
                 (rows >= 0 ? std::to_string(rows) : "any") + " x " +
                 (cols >= 0 ? std::to_string(cols) : "any"));
  Array2D<T> a = imageArray<T>(static_cast<int>(shape[0]), static_cast<int>(shape[1]));
  readPixels(static_cast<long long>(a.size()), a.data.data());
  return a;
}

template <class T>
Array3D<T> FitsFile::readImage3D(int n0, int n1, int n2) {
  const std::vector<long> shape = imageShape();
  if (shape.size() != 3) fail("NAXIS", "expected a 3D image, found " + shapeText(shape));
  if ((n0 >= 0 && shape[0] != n0) || (n1 >= 0 && shape[1] != n1) || (n2 >= 0 && shape[2] != n2))
    fail("", "image is " + shapeText(shape) + " (NAXIS3 x NAXIS2 x NAXIS1), expected " +
                 std::to_string(n0) + " x " + std::to_string(n1) + " x " + std::to_string(n2) +
                 " (-1: any)");
  Array3D<T> a(static_cast<int>(shape[0]), static_cast<int>(shape[1]), static_cast<int>(shape[2]));
  readPixels(static_cast<long long>(a.size()), a.data.data());
  return a;
}

std::vector<double> FitsFile::readImage1D(long n) {
  const std::vector<long> shape = imageShape();
  const bool ok = shape.size() == 1 || (shape.size() == 2 && shape[0] == 1);
  if (!ok) fail("NAXIS", "expected a 1D image, found " + shapeText(shape));
  const long len = shape.back();
  if (n >= 0 && len != n)
    fail("NAXIS1", "image has " + std::to_string(len) + " values, expected " + std::to_string(n));
  std::vector<double> v(std::size_t(len), 0.0);
  readPixels(len, v.data());
  return v;
}

long long FitsFile::createImage(const std::string& extname, int bitpix, const std::vector<long>& shape) {
  std::vector<LONGLONG> naxes(shape.rbegin(), shape.rend()); // FITS order: fastest first
  LONGLONG n = 1;
  for (LONGLONG a : naxes) n *= a;
  int status = 0;
  const std::string where = extname.empty() ? std::string("new image") : extname;
  fits_create_imgll(F(m_fptr), bitpix, int(naxes.size()), naxes.data(), &status);
  if (status)
    throw FitsError(m_display, where, "", "cannot create image: " + cfitsioMessage(status));
  refreshHduName();
  if (!extname.empty()) {
    writeString("EXTNAME", extname);
    m_hdu = extname;
  }
  return n;
}

template <class T>
void FitsFile::writeImage(const std::string& extname, FitsPixel pixel,
                          const std::vector<long>& shape, const T* data) {
  const LONGLONG n = createImage(extname, bitpixOf(pixel), shape);
  int status = 0;
  if (n > 0) fits_write_img(F(m_fptr), fitsType<T>(), 1, n, const_cast<T*>(data), &status);
  if (status == NUM_OVERFLOW)
    fail("",
         "values do not fit the image's pixel type (BITPIX " + std::to_string(bitpixOf(pixel)) +
             ")",
         status);
  check(status, "", "cannot write image data");
  // Summed from memory now, so writeChecksums need not read the data back.
  if (const auto sum = dataSumAs(pixel, data, n)) m_dataSums[currentIndex()] = *sum;
}

void FitsDataSum::addFloats(const float* v, long long n) {
  for (long long i = 0; i < n; ++i) {
    uint32_t w;
    std::memcpy(&w, &v[i], 4);
    add(w);
  }
}

uint32_t FitsDataSum::value() const {
  uint64_t h = hi, l = lo;
  while ((h >> 16) || (l >> 16)) { // end-around carries, as the checksum's 1's complement sum
    const uint64_t hc = h >> 16, lc = l >> 16;
    h = (h & 0xFFFFu) + lc;
    l = (l & 0xFFFFu) + hc;
  }
  return uint32_t((h << 16) | l);
}

void FitsFile::beginFloatImage(const std::string& extname, const std::vector<long>& shape) {
  const LONGLONG n = createImage(extname, FLOAT_IMG, shape);
  m_partDone = 0;
  m_partTotal = n;
  m_partHi = m_partLo = 0;
}

void FitsFile::writeImagePart(const float* data, long long n, const FitsDataSum& sum) {
  if (m_partTotal < 0) fail("", "writeImagePart without beginFloatImage");
  if (n < 0 || m_partDone + n > m_partTotal)
    fail("", "image part of " + std::to_string(n) + " values past the image's " + std::to_string(m_partTotal));
  int status = 0;
  if (n > 0)
    fits_write_img(F(m_fptr), TFLOAT, LONGLONG(m_partDone) + 1, LONGLONG(n), const_cast<float*>(data), &status);
  check(status, "", "cannot write image data");
  m_partDone += n;
  m_partHi += sum.hi;
  m_partLo += sum.lo;
}

void FitsFile::endImage() {
  if (m_partTotal < 0) fail("", "endImage without beginFloatImage");
  if (m_partDone != m_partTotal)
    fail("", "image written in parts has " + std::to_string(m_partDone) + " of its " +
                 std::to_string(m_partTotal) + " values");
  m_dataSums[currentIndex()] = FitsDataSum{m_partHi, m_partLo}.value();
  m_partTotal = -1;
}

// ---- tables --------------------------------------------------------------------------

long FitsFile::numRows() {
  requireTable("counting rows");
  LONGLONG n = 0;
  int status = 0;
  fits_get_num_rowsll(F(m_fptr), &n, &status);
  check(status, "NAXIS2", "cannot read the number of rows");
  return long(n);
}

bool FitsFile::hasColumn(const std::string& name) {
  requireTable("looking up a column");
  std::vector<char> templ(name.begin(), name.end());
  templ.push_back('\0');
  int col = 0, status = 0;
  fits_get_colnum(F(m_fptr), CASEINSEN, templ.data(), &col, &status);
  if (status == 0) return true;
  fits_clear_errmsg();
  return false;
}

int FitsFile::columnNumber(const std::string& name) {
  requireTable("looking up a column");
  std::vector<char> templ(name.begin(), name.end());
  templ.push_back('\0');
  int col = 0, status = 0;
  fits_get_colnum(F(m_fptr), CASEINSEN, templ.data(), &col, &status);
  if (status == COL_NOT_FOUND) {
    fits_clear_errmsg();
    fail(name, "no column named '" + name + "'");
  }
  if (status == COL_NOT_UNIQUE) {
    fits_clear_errmsg();
    fail(name, "more than one column matches '" + name + "'");
  }
  check(status, name, "cannot look up column");
  return col;
}

std::vector<long> FitsFile::columnCellShape(const std::string& name) {
  const int col = columnNumber(name);
  int naxis = 0, status = 0;
  LONGLONG naxes[9] = {};
  fits_read_tdimll(F(m_fptr), col, 9, &naxis, naxes, &status);
  check(status, "TDIM" + std::to_string(col), "cannot read the cell shape of column " + name);
  std::vector<long> shape;
  for (int i = std::min(naxis, 9) - 1; i >= 0; --i) shape.push_back(long(naxes[i]));
  return shape;
}

namespace {
template <class T>
std::vector<T> readScalarColumn(FitsFile& ff, void* fptr, const std::string& name, int col) {
  int typecode = 0, status = 0;
  LONGLONG repeat = 0, width = 0;
  fits_get_eqcoltypell(F(fptr), col, &typecode, &repeat, &width, &status);
  if (status) ff.fail(name, "cannot read the column type", status);
  if (typecode == TSTRING) ff.fail(name, "is a string column, expected numbers");
  if (typecode < 0) ff.fail(name, "is a variable-length column, expected one value per row");
  if (repeat != 1) ff.fail(name, "has " + std::to_string(repeat) + " values per row, expected one");
  const long n = ff.numRows();
  std::vector<T> v(std::size_t(n), T{});
  if (n == 0) return v;
  int anynul = 0;
  fits_read_col(F(fptr), fitsType<T>(), col, 1, 1, n, nullptr, v.data(), &anynul, &status);
  if (status == NUM_OVERFLOW) ff.fail(name, "values do not fit the type they are read as", status);
  if (status) ff.fail(name, "cannot read column data (file truncated or corrupt?)", status);
  return v;
}
} // namespace

std::vector<int32_t> FitsFile::readColumnInt(const std::string& name) {
  return readScalarColumn<int32_t>(*this, m_fptr, name, columnNumber(name));
}

std::vector<int64_t> FitsFile::readColumnLong(const std::string& name) {
  return readScalarColumn<int64_t>(*this, m_fptr, name, columnNumber(name));
}

std::vector<double> FitsFile::readColumnDouble(const std::string& name) {
  return readScalarColumn<double>(*this, m_fptr, name, columnNumber(name));
}

std::vector<std::string> FitsFile::readColumnString(const std::string& name) {
  const int col = columnNumber(name);
  int typecode = 0, status = 0;
  LONGLONG repeat = 0, width = 0;
  fits_get_eqcoltypell(F(m_fptr), col, &typecode, &repeat, &width, &status);
  check(status, name, "cannot read the column type");
  if (typecode != TSTRING) fail(name, "is not a fixed-length string column");
  const long n = numRows();
  const std::size_t w = std::size_t(std::max<LONGLONG>(repeat, 1)) + 1;
  std::vector<char> buf(std::size_t(n) * w, '\0');
  std::vector<char*> ptrs(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) ptrs[std::size_t(i)] = buf.data() + std::size_t(i) * w;
  std::vector<std::string> out;
  if (n == 0) return out;
  int anynul = 0;
  char nul[] = "";
  fits_read_col_str(F(m_fptr), col, 1, 1, n, nul, ptrs.data(), &anynul, &status);
  check(status, name, "cannot read column data (file truncated or corrupt?)");
  out.reserve(std::size_t(n));
  for (char* p : ptrs) {
    std::string s = p;
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out.push_back(std::move(s));
  }
  return out;
}

Array2D<double> FitsFile::readCellDouble(const std::string& name, long row, int rows, int cols) {
  const int col = columnNumber(name);
  int typecode = 0, status = 0;
  LONGLONG repeat = 0, width = 0;
  fits_get_eqcoltypell(F(m_fptr), col, &typecode, &repeat, &width, &status);
  check(status, name, "cannot read the column type");
  if (typecode == TSTRING || typecode < 0) fail(name, "is not a fixed-size numeric column");
  std::vector<long> shape = columnCellShape(name);
  if (shape.size() == 1) shape.insert(shape.begin(), 1L);
  if (shape.size() != 2) fail(name, "cells are " + shapeText(shape) + ", expected 2D (TDIM)");
  if (shape[0] * shape[1] != repeat)
    fail(name, "TDIM " + shapeText(shape) + " does not match the " + std::to_string(repeat) +
                   " values per cell");
  if ((rows >= 0 && shape[0] != rows) || (cols >= 0 && shape[1] != cols))
    fail(name, "cells are " + shapeText(shape) + ", expected " +
                   (rows >= 0 ? std::to_string(rows) : "any") + " x " +
                   (cols >= 0 ? std::to_string(cols) : "any"));
  const long n = numRows();
  if (row < 0 || row >= n)
    fail(name,
         "row " + std::to_string(row) + " is outside the table's " + std::to_string(n) + " rows");
  Array2D<double> a(static_cast<int>(shape[0]), static_cast<int>(shape[1]));
  int anynul = 0;
  fits_read_col(F(m_fptr), TDOUBLE, col, row + 1, 1, LONGLONG(a.size()), nullptr, a.data.data(),
                &anynul, &status);
  check(status, name, "cannot read row " + std::to_string(row) + " (file truncated or corrupt?)");
  return a;
}

void FitsFile::createTable(const std::string& extname, const std::vector<FitsColumn>& columns,
                           long nrows) {
  std::vector<std::vector<char>> store;
  auto cstr = [&](const std::string& s) {
    store.emplace_back(s.begin(), s.end());
    store.back().push_back('\0');
  };
  store.reserve(columns.size() * 3 + 1);
  for (const auto& c : columns) {
    cstr(c.name);
    cstr(c.form);
    cstr(c.unit);
  }
  std::vector<char*> ttype, tform, tunit;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    ttype.push_back(store[3 * i].data());
    tform.push_back(store[3 * i + 1].data());
    tunit.push_back(store[3 * i + 2].data());
  }
  int status = 0;
  fits_create_tbl(F(m_fptr), BINARY_TBL, nrows, int(columns.size()), ttype.data(), tform.data(),
                  tunit.data(), extname.c_str(), &status);
  if (status)
    throw FitsError(m_display, extname, "", "cannot create table: " + cfitsioMessage(status));
  m_hdu = extname;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const auto& d = columns[i].dims;
    if (d.empty()) continue;
    std::vector<LONGLONG> naxes(d.rbegin(), d.rend());
    fits_write_tdimll(F(m_fptr), int(i) + 1, int(naxes.size()), naxes.data(), &status);
    check(status, columns[i].name, "cannot write TDIM");
  }
}

namespace {
template <class T>
void writeNumericColumn(FitsFile& ff, void* fptr, int col, const std::string& name,
                        const std::vector<T>& v, long firstRow) {
  if (v.empty()) return;
  int status = 0;
  fits_write_col(F(fptr), fitsType<T>(), col, firstRow + 1, 1, LONGLONG(v.size()),
                 const_cast<T*>(v.data()), &status);
  if (status) ff.fail(name, "cannot write column data", status);
}
} // namespace

void FitsFile::writeColumn(const std::string& name, const std::vector<int32_t>& v, long firstRow) {
  writeNumericColumn(*this, m_fptr, columnNumber(name), name, v, firstRow);
}

void FitsFile::writeColumn(const std::string& name, const std::vector<int64_t>& v, long firstRow) {
  writeNumericColumn(*this, m_fptr, columnNumber(name), name, v, firstRow);
}

void FitsFile::writeColumn(const std::string& name, const std::vector<double>& v, long firstRow) {
  writeNumericColumn(*this, m_fptr, columnNumber(name), name, v, firstRow);
}

void FitsFile::writeColumn(const std::string& name, const std::vector<std::string>& v,
                           long firstRow) {
  const int col = columnNumber(name);
  if (v.empty()) return;
  std::vector<char*> ptrs;
  for (const auto& s : v) ptrs.push_back(const_cast<char*>(s.c_str()));
  int status = 0;
  fits_write_col_str(F(m_fptr), col, firstRow + 1, 1, LONGLONG(v.size()), ptrs.data(), &status);
  check(status, name, "cannot write column data");
}

void FitsFile::writeCell(const std::string& name, long row, const double* values, long n) {
  const int col = columnNumber(name);
  int status = 0;
  fits_write_col(F(m_fptr), TDOUBLE, col, row + 1, 1, n, const_cast<double*>(values), &status);
  check(status, name, "cannot write row " + std::to_string(row));
}

void FitsFile::deleteRows(std::vector<long> rows) {
  requireTable("deleting rows");
  if (rows.empty()) return;
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  for (long& r : rows) r += 1; // CFITSIO rows are 1-based
  int status = 0;
  fits_delete_rowlist(F(m_fptr), rows.data(), long(rows.size()), &status);
  check(status, "", "cannot delete table rows");
}

void FitsFile::permuteRows(const std::vector<long>& order) {
  const long n = numRows();
  if (long(order.size()) != n)
    fail("", "row order has " + std::to_string(order.size()) + " entries for " + std::to_string(n) +
                 " rows");
  bool identity = true;
  for (long i = 0; i < n; ++i) identity = identity && order[std::size_t(i)] == i;
  if (identity) return;
  const long long width = readLong("NAXIS1");
  // Raw row bytes move as a whole; variable-length descriptors keep pointing at the
  // same heap data, so every column type survives.
  std::vector<unsigned char> in(std::size_t(n * width)), out(in.size());
  int status = 0;
  fits_read_tblbytes(F(m_fptr), 1, 1, LONGLONG(in.size()), in.data(), &status);
  check(status, "", "cannot read table rows");
  for (long i = 0; i < n; ++i) {
    const long src = order[std::size_t(i)];
    if (src < 0 || src >= n) fail("", "row order names row " + std::to_string(src));
    std::memcpy(out.data() + std::size_t(i * width), in.data() + std::size_t(src * width),
                std::size_t(width));
  }
  fits_write_tblbytes(F(m_fptr), 1, 1, LONGLONG(out.size()), out.data(), &status);
  check(status, "", "cannot write table rows");
}

void FitsFile::copyHduFrom(FitsFile& src) {
  int status = 0;
  fits_copy_hdu(F(src.m_fptr), F(m_fptr), 0, &status);
  if (status)
    throw FitsError(m_display, src.m_hdu, "",
                    "cannot copy HDU '" + src.m_hdu + "' from '" + src.m_display +
                        "': " + cfitsioMessage(status));
  refreshHduName();
}

std::string FitsFile::rawHdu() {
  const int index = currentIndex();
  if (!m_layout || index < 0 || std::size_t(index) >= m_layout->hdus.size())
    fail("", "the raw bytes of this HDU are not known (not a file opened for reading)");
  const FitsHduLayout& h = m_layout->hdus[std::size_t(index)];
  const int64_t end = h.dataStart + (h.dataBytes + 2879) / 2880 * 2880;
  std::string out(std::size_t(end - h.headerStart), '\0');
  if (m_mem) {
    const int64_t have = std::min<int64_t>(end, int64_t(m_mem->bytes->size())) - h.headerStart;
    if (have > 0) std::memcpy(out.data(), m_mem->bytes->data() + h.headerStart, std::size_t(have));
    return out;
  }
  const int fd = ::open(m_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("", std::string("cannot open the file again: ") + std::strerror(errno));
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t r = ::pread(fd, out.data() + got, out.size() - got, off_t(h.headerStart) + off_t(got));
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      fail("", std::string("read error: ") + std::strerror(err));
    }
    if (r == 0) break; // the file's last block is short: zeros, as padding
    got += std::size_t(r);
  }
  ::close(fd);
  return out;
}

void FitsFile::writeChecksums() {
  const int n = hduCount();
  for (int i = 0; i < n; ++i) {
    moveToIndex(i);
    int status = 0;
    const auto known = m_dataSums.find(i);
    if (known == m_dataSums.end()) {
      fits_write_chksum(F(m_fptr), &status); // sums the data as written
    } else {
      // The data sum is known (writeImage): the keys fits_write_chksum would write,
      // then only the header is summed (fits_update_chksum). Same cards, same values.
      char date[32] = {};
      fits_get_system_time(date, nullptr, &status);
      const std::string chk = std::string("HDU checksum updated ") + date;
      const std::string dat = std::string("data unit checksum updated ") + date;
      const std::string sum = std::to_string(known->second);
      fits_update_key_str(F(m_fptr), "CHECKSUM", "0000000000000000", chk.c_str(), &status);
      fits_update_key_str(F(m_fptr), "DATASUM", sum.c_str(), dat.c_str(), &status);
      fits_update_chksum(F(m_fptr), &status);
    }
    check(status, "CHECKSUM", "cannot write CHECKSUM/DATASUM");
  }
}

bool FitsFile::verifyChecksum() {
  int status = 0, dataOk = 0, hduOk = 0;
  fits_verify_chksum(F(m_fptr), &dataOk, &hduOk, &status);
  check(status, "CHECKSUM", "cannot verify CHECKSUM/DATASUM");
  return dataOk == 1 && hduOk == 1; // 1: present and right, 0: absent, -1: wrong
}

std::string FitsFile::cfitsioVersion() {
  float v = 0;
  fits_get_version(&v);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", double(v));
  return buf;
}

// ---- explicit instantiations -----------------------------------------------------------

template Array2D<double> FitsFile::readImage2D<double>(int, int);
template Array2D<float> FitsFile::readImage2D<float>(int, int);
template Array2D<int32_t> FitsFile::readImage2D<int32_t>(int, int);
template Array2D<uint32_t> FitsFile::readImage2D<uint32_t>(int, int);
template Array2D<int64_t> FitsFile::readImage2D<int64_t>(int, int);
template Array2D<uint8_t> FitsFile::readImage2D<uint8_t>(int, int);
template Array3D<double> FitsFile::readImage3D<double>(int, int, int);
template Array3D<float> FitsFile::readImage3D<float>(int, int, int);
template void FitsFile::writeImage<double>(const std::string&, FitsPixel, const std::vector<long>&,
                                           const double*);
template void FitsFile::writeImage<float>(const std::string&, FitsPixel, const std::vector<long>&,
                                          const float*);
template void FitsFile::writeImage<int32_t>(const std::string&, FitsPixel, const std::vector<long>&,
                                            const int32_t*);
template void FitsFile::writeImage<uint32_t>(const std::string&, FitsPixel,
                                             const std::vector<long>&, const uint32_t*);
template void FitsFile::writeImage<int64_t>(const std::string&, FitsPixel, const std::vector<long>&,
                                            const int64_t*);
template void FitsFile::writeImage<uint8_t>(const std::string&, FitsPixel, const std::vector<long>&,
                                            const uint8_t*);

// ---- live temporaries -----------------------------------------------------------------

namespace {

// A fixed table, so a signal handler can walk it without locks or allocation.
constexpr int kSlots = 64;
struct TempSlot {
  std::atomic<int> state{0}; // 0 free, 1 being written, 2 holds a path
  char path[4096];
};
TempSlot g_slots[kSlots];

int registerTemporary(const std::string& path) {
  if (path.size() >= sizeof(g_slots[0].path)) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].state.store(2);
      return i;
    }
  }
  return -1; // more than 64 at once: not cleaned on a signal, still cleaned normally
}

void releaseTemporary(int slot) {
  if (slot >= 0) g_slots[slot].state.store(0);
}

thread_local OutputTransaction* t_transaction = nullptr;

std::string tempStem(const std::string& finalPath) {
  return endsWith(finalPath, ".gz") ? finalPath.substr(0, finalPath.size() - 3) : finalPath;
}

} // namespace

int registerLiveTemporary(const std::string& path) { return registerTemporary(path); }
void releaseLiveTemporary(int slot) { releaseTemporary(slot); }

void removeLiveTemporaries() noexcept {
  for (auto& s : g_slots)
    if (s.state.load() == 2) ::unlink(s.path);
}

int removeStaleTemporaries(const std::string& finalPath) {
  const fs::path stem = tempStem(finalPath);
  fs::path dir = stem.parent_path();
  if (dir.empty()) dir = ".";
  const std::string prefix = stem.filename().string() + ".tmp-";
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    // "<pid>-<n>" or "<pid>-<n>.gz"
    const char* p = name.c_str() + prefix.size();
    const char* e = name.c_str() + name.size();
    long pid = 0, n = 0;
    auto r1 = std::from_chars(p, e, pid);
    if (r1.ec != std::errc() || r1.ptr == e || *r1.ptr != '-' || pid <= 0) continue;
    auto r2 = std::from_chars(r1.ptr + 1, e, n);
    if (r2.ec != std::errc() || (r2.ptr != e && std::string(r2.ptr) != ".gz")) continue;
    if (pid == long(::getpid())) continue;
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue; // alive (or not ours to judge)
    std::error_code rm;
    if (fs::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

// ---- AtomicOutput ----------------------------------------------------------------------

AtomicOutput::AtomicOutput(const std::string& finalPath) : m_final(finalPath) {
  if (finalPath.empty()) throw FitsError(finalPath, "", "", "no output path given");
  fs::path dir = fs::path(finalPath).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (!fs::exists(st))
    throw FitsError(finalPath, "", "", "output directory '" + dir.string() + "' does not exist");
  if (!fs::is_directory(st))
    throw FitsError(finalPath, "", "",
                    "output directory '" + dir.string() + "' is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw FitsError(finalPath, "", "",
                    "output directory '" + dir.string() +
                        "' is not writable: " + std::strerror(errno));
  if (fs::is_directory(fs::status(finalPath, ec)))
    throw FitsError(finalPath, "", "", "output path is a directory");
  removeStaleTemporaries(finalPath);

  static std::atomic<int> counter{0};
  const bool gz = endsWith(finalPath, ".gz");
  for (int attempt = 0; attempt < 1000; ++attempt) {
    // CFITSIO gzips on close only when the name's one ".gz" is at its end, so a
    // compressed output's temporary name is "x.fits.tmp-<pid>-<n>.gz".
    std::string t = tempStem(finalPath) + ".tmp-" + std::to_string(::getpid()) + "-" +
                    std::to_string(counter.fetch_add(1) + 1);
    if (gz) t += ".gz";
    if (!fs::exists(t, ec)) {
      m_temp = t;
      break;
    }
  }
  if (m_temp.empty()) throw FitsError(finalPath, "", "", "cannot choose a temporary file name");
  m_slot = registerTemporary(m_temp);
  try {
    m_file = FitsFile::create(m_temp, finalPath);
  } catch (...) {
    releaseTemporary(m_slot);
    throw;
  }
}

AtomicOutput::~AtomicOutput() {
  if (m_committed) return;
  m_file = FitsFile(); // closes, ignoring errors
  std::error_code ec;
  fs::remove(m_temp, ec);
  releaseTemporary(m_slot);
}

namespace {
void syncFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}
} // namespace

void AtomicOutput::startWriteback() {
  if (m_committed || endsWith(m_temp, ".gz") || !m_file.isOpen()) return;
  int status = 0;
  fits_flush_buffer(F(m_file.m_fptr), 0, &status); // CFITSIO's buffers to the file
  if (status) return; // the error comes back from the next write or from commit()
  const int fd = ::open(m_temp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
#ifdef SYNC_FILE_RANGE_WRITE
  ::sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
  ::close(fd);
}

void AtomicOutput::commit() {
  if (m_committed) return;
  m_file.close(); // throws if CFITSIO cannot flush; the destructor then cleans up
  // Data on disk before the name points at it, so a crash cannot leave a short file
  // under the final name.
  syncFile(m_temp);
  if (OutputTransaction* t = t_transaction) {
    // The transaction renames it (or deletes it) from now on.
    std::lock_guard lock(t->m_mutex);
    t->m_pending.push_back({m_temp, m_final, m_slot});
    m_committed = true;
    return;
  }
  if (std::rename(m_temp.c_str(), m_final.c_str()) != 0)
    throw FitsError(m_final, "", "",
                    "cannot rename temporary file '" + m_temp + "': " + std::strerror(errno));
  m_committed = true;
  releaseTemporary(m_slot);
}

// ---- OutputTransaction -----------------------------------------------------------------

OutputTransaction::OutputTransaction() : m_outer(t_transaction) {
  t_transaction = this;
}

OutputTransaction::Join::Join(OutputTransaction& t) : m_previous(t_transaction) {
  t_transaction = &t;
}

OutputTransaction::Join::~Join() { t_transaction = m_previous; }

OutputTransaction::~OutputTransaction() {
  if (t_transaction == this) t_transaction = m_outer;
  if (m_done) return;
  for (const Pending& p : m_pending) {
    std::error_code ec;
    fs::remove(p.temp, ec);
    releaseTemporary(p.slot);
  }
}

void OutputTransaction::commit() {
  if (m_done) return;
  if (t_transaction == this) t_transaction = m_outer;
  // Every temporary is complete and synced; the renames are all that is left, in the
  // order the outputs were committed, renameLast()'s at the end.
  std::lock_guard lock(m_mutex);
  if (!m_last.empty())
    std::stable_partition(m_pending.begin(), m_pending.end(),
                          [this](const Pending& p) { return p.final != m_last; });
  for (std::size_t i = 0; i < m_pending.size(); ++i) {
    const Pending& p = m_pending[i];
    if (std::rename(p.temp.c_str(), p.final.c_str()) != 0) {
      const std::string why = std::strerror(errno);
      // Those not renamed yet are removed by the destructor; the ones before stay.
      m_pending.erase(m_pending.begin(), m_pending.begin() + long(i));
      throw FitsError(p.final, "", "", "cannot rename temporary file '" + p.temp + "': " + why);
    }
    releaseTemporary(p.slot);
  }
  m_done = true;
}

} // namespace spex
