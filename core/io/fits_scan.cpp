#include "fits_scan.h"

#include "../array.h"
#include "../errors.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <fcntl.h>
#include <memory>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace spex {

namespace {

constexpr int64_t kBlock = 2880;
constexpr int kCard = 80;

// Sequential bytes of a plain file (read with pread, data skipped by seeking) or of a
// file held in memory (an inflated .gz).
class ByteSource {
public:
  explicit ByteSource(const std::string& path) : m_path(path) {
    m_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (m_fd < 0) throw FitsError(path, "", "", std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    ::fstat(m_fd, &st);
    m_size = int64_t(st.st_size);
  }
  explicit ByteSource(const FitsBytes& bytes)
      : m_path(bytes.name()), m_mem(bytes.data()), m_size(int64_t(bytes.size())),
        m_inflated(bytes.inflated()) {}
  ~ByteSource() {
    if (m_fd >= 0) ::close(m_fd);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // The bytes were decompressed (for messages: sizes are of the decompressed stream).
  bool inflated() const { return m_inflated; }
  int64_t pos() const { return m_pos; }

  // Reads up to n bytes at the current position; returns how many were there.
  int64_t read(char* out, int64_t n) {
    int64_t got = 0;
    if (m_mem) {
      got = std::max<int64_t>(0, std::min(n, m_size - m_pos));
      if (got > 0) std::memcpy(out, m_mem + m_pos, std::size_t(got));
    } else {
      while (got < n) {
        const ssize_t r = ::pread(m_fd, out + got, size_t(n - got), off_t(m_pos + got));
        if (r < 0) throw FitsError(m_path, "", "", std::string("read error: ") + std::strerror(errno));
        if (r == 0) break;
        got += r;
      }
    }
    m_pos += got;
    return got;
  }

  // Moves n bytes on; returns how many bytes there were (less than n at the end).
  int64_t skip(int64_t n) {
    const int64_t avail = std::max<int64_t>(0, std::min(n, m_size - m_pos));
    m_pos += avail;
    return avail;
  }

  int64_t totalSize() const { return m_size; }

private:
  std::string m_path;
  int m_fd = -1;
  const char* m_mem = nullptr;
  int64_t m_size = 0;
  int64_t m_pos = 0;
  bool m_inflated = false;
};

std::string trimRight(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

struct Card {
  std::string key;
  bool hasValue = false;
  bool isString = false;
  std::string value; // the token: a string's text without quotes, else up to '/' trimmed
};

Card parseCard(const char* c) {
  Card card;
  card.key = trimRight(std::string(c, 8));
  if (c[8] != '=' || c[9] != ' ') return card;
  card.hasValue = true;
  int i = 10;
  while (i < kCard && c[i] == ' ') ++i;
  if (i < kCard && c[i] == '\'') {
    card.isString = true;
    ++i;
    std::string s;
    while (i < kCard) {
      if (c[i] == '\'') {
        if (i + 1 < kCard && c[i + 1] == '\'') {
          s += '\'';
          i += 2;
          continue;
        }
        break;
      }
      s += c[i++];
    }
    card.value = trimRight(s);
    return card;
  }
  int j = i;
  while (j < kCard && c[j] != '/') ++j;
  card.value = trimRight(std::string(c + i, std::size_t(j - i)));
  return card;
}

bool digitsAfter(const std::string& key, const char* prefix) {
  const std::size_t n = std::strlen(prefix);
  if (key.size() <= n || key.compare(0, n, prefix) != 0) return false;
  return std::all_of(key.begin() + long(n), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// Keys CFITSIO converts to integers by itself while opening a file, moving between
// HDUs or setting up table columns (ffgphd, ffgttb, ffainit, ffbinit, ffmnhd, the
// tile-compression setup). TNULLn only in binary tables (a string in ASCII tables).
bool cfitsioIntegerKey(const std::string& k, bool bintable) {
  static const char* fixed[] = {"BITPIX", "NAXIS",   "PCOUNT",  "GCOUNT", "TFIELDS",
                                "THEAP",  "EXTVER",  "EXTLEVEL", "BLANK", "ZBITPIX",
                                "ZNAXIS", "ZPCOUNT", "ZGCOUNT", "ZBLANK", "ZTHEAP"};
  for (const char* f : fixed)
    if (k == f) return true;
  if (digitsAfter(k, "NAXIS") || digitsAfter(k, "TBCOL") || digitsAfter(k, "ZNAXIS") ||
      digitsAfter(k, "ZTILE"))
    return true;
  return bintable && digitsAfter(k, "TNULL");
}

bool cfitsioDoubleKey(const std::string& k) {
  return k == "BSCALE" || k == "BZERO" || k == "ZSCALE" || k == "ZZERO" || digitsAfter(k, "TSCAL") ||
         digitsAfter(k, "TZERO");
}

std::optional<int64_t> parseInteger(const std::string& v) {
  // An optional sign and at most 19 digits: the only integers CFITSIO can hold.
  if (v.empty() || v.size() > 20) return std::nullopt;
  const char* b = v.data();
  const char* e = b + v.size();
  if (*b == '+') ++b;
  int64_t x = 0;
  auto [p, ec] = std::from_chars(b, e, x);
  if (ec != std::errc() || p != e) return std::nullopt;
  return x;
}

bool parsesAsDouble(const std::string& v) {
  if (v.empty() || v.size() > 30) return false;
  std::string s = v;
  for (char& ch : s)
    if (ch == 'D' || ch == 'd') ch = 'E';
  const char* b = s.data();
  if (*b == '+') ++b;
  double x = 0;
  auto [p, ec] = std::from_chars(b, s.data() + s.size(), x);
  return ec == std::errc() && p == s.data() + s.size();
}

// Width in bytes of one binary-table TFORM ("1000D", "8A", "1PE(20)", "X"), or
// nullopt when it is not one CFITSIO can parse safely.
std::optional<int64_t> binaryFormWidth(const std::string& form) {
  std::size_t i = 0;
  while (i < form.size() && form[i] == ' ') ++i;
  std::size_t d = i;
  while (d < form.size() && form[d] >= '0' && form[d] <= '9') ++d;
  if (d - i > 12) return std::nullopt; // a repeat count beyond any file we can hold
  int64_t repeat = 1;
  if (d > i) std::from_chars(form.data() + i, form.data() + d, repeat);
  if (d >= form.size()) return std::nullopt;
  const char t = char(std::toupper(static_cast<unsigned char>(form[d])));
  int64_t size = 0;
  switch (t) {
  case 'L': case 'B': case 'A': size = 1; break;
  case 'I': size = 2; break;
  case 'J': case 'E': size = 4; break;
  case 'K': case 'D': case 'C': case 'P': size = 8; break;
  case 'M': case 'Q': size = 16; break;
  case 'X': return (repeat + 7) / 8;
  default: return std::nullopt;
  }
  if (t == 'P' || t == 'Q') {
    // P/Q descriptor: the element type follows, then an optional (max length).
    if (d + 1 >= form.size()) return std::nullopt;
    const char e = char(std::toupper(static_cast<unsigned char>(form[d + 1])));
    if (!std::strchr("LXBIJKAEDCM", e)) return std::nullopt;
    std::size_t k = d + 2;
    if (k < form.size() && form[k] == '(') {
      std::size_t close = form.find(')', k);
      if (close == std::string::npos || close - k - 1 > 12 || close == k + 1) return std::nullopt;
      for (std::size_t q = k + 1; q < close; ++q)
        if (form[q] < '0' || form[q] > '9') return std::nullopt;
    }
  } else if (t == 'A') {
    // "rAw" (substring width) is allowed; anything but digits after A is not.
    for (std::size_t q = d + 1; q < form.size(); ++q)
      if ((form[q] < '0' || form[q] > '9') && form[q] != ' ') return std::nullopt;
    if (form.size() - d - 1 > 12) return std::nullopt;
  } else {
    for (std::size_t q = d + 1; q < form.size(); ++q)
      if (form[q] != ' ') return std::nullopt;
  }
  return repeat * size;
}

std::string bytesText(int64_t n) {
  return std::to_string(n) + " byte" + (n == 1 ? "" : "s");
}

class Scanner {
public:
  explicit Scanner(const std::string& path) : m_path(path), m_src(path) {}
  explicit Scanner(const FitsBytes& bytes) : m_path(bytes.name()), m_src(bytes) {}

  FitsLayout run() {
    FitsLayout layout;
    for (int index = 0;; ++index) {
      const int64_t start = m_src.pos();
      char first[kCard];
      const int64_t got = m_src.read(first, kCard);
      if (index > 0 && got == 0) break; // clean end after the last HDU
      if (index > 0 && (got < 8 || std::memcmp(first, "XTENSION", 8) != 0)) {
        // Not a header where the chain says the next HDU starts: trailing bytes, or
        // an earlier HDU's size claim is wrong (checked by the caller).
        m_trailing = true;
        break;
      }
      FitsHduLayout h = readHeader(index, start, first, got);
      // Data: what is claimed must be there.
      const int64_t avail = m_src.skip(h.dataBytes);
      if (avail < h.dataBytes) {
        const int64_t total = m_src.totalSize();
        const std::string axis = "NAXIS" + std::to_string(std::max<std::size_t>(h.naxes.size(), 1));
        throw FitsError(m_path, h.name, h.naxes.empty() ? "" : axis,
                        "header claims " + claimText(h) + " (" + bytesText(h.dataBytes) +
                            " of data) but only " + bytesText(std::max<int64_t>(0, total - h.dataStart)) +
                            " follow the header" + (m_src.inflated() ? " (decompressed)" : "") +
                            ": the file is truncated or " + axis + " is wrong");
      }
      const int64_t pad = (kBlock - h.dataBytes % kBlock) % kBlock;
      m_src.skip(pad);
      layout.hdus.push_back(std::move(h));
    }
    layout.fileBytes = m_src.totalSize();
    return layout;
  }
  bool trailing() const { return m_trailing; }

  static std::string claimText(const FitsHduLayout& h) {
    std::string s;
    for (std::size_t i = h.naxes.size(); i-- > 0;)
      s += (s.empty() ? "" : " x ") + std::to_string(h.naxes[i]);
    if (s.empty()) s = "no axes";
    if (h.image) return s + " values of BITPIX " + std::to_string(h.bitpix);
    return s + " (NAXIS2 rows x NAXIS1 bytes" +
           (h.pcount ? ", heap " + std::to_string(h.pcount) : std::string()) + ")";
  }

private:
  [[noreturn]] void fail(const FitsHduLayout& h, const std::string& key, const std::string& what) {
    throw FitsError(m_path, h.name, key, what);
  }

  FitsHduLayout readHeader(int index, int64_t start, const char* first, int64_t got) {
    FitsHduLayout h;
    h.index = index;
    h.headerStart = start;
    h.name = index == 0 ? "primary" : "HDU " + std::to_string(index);
    if (got < kCard) {
      if (index == 0) fail(h, "", "not a FITS file: shorter than one header card");
      fail(h, "", "header cut short (file truncated)");
    }
    if (index == 0 && std::memcmp(first, "SIMPLE  =", 9) != 0)
      fail(h, "", "not a FITS file: it does not start with SIMPLE = T");

    // Cards in order; the first 80 bytes are already read.
    std::vector<Card> cards;
    char card[kCard];
    std::memcpy(card, first, kCard);
    int64_t ncards = 0;
    bool end = false;
    while (true) {
      ++ncards;
      for (int i = 0; i < kCard; ++i)
        if (static_cast<unsigned char>(card[i]) < 32 || static_cast<unsigned char>(card[i]) > 126)
          fail(h, "", "header card " + std::to_string(ncards) +
                          " holds a byte that is not printable ASCII (not a FITS header?)");
      Card c = parseCard(card);
      if (c.key == "END") {
        end = true;
        break;
      }
      if (c.key == "EXTNAME" && c.hasValue && c.isString && !c.value.empty()) h.name = c.value;
      cards.push_back(std::move(c));
      if (m_src.read(card, kCard) < kCard) break;
    }
    if (!end) fail(h, "", "header has no END card (file truncated?)");
    // Rest of the header's last block.
    const int64_t used = ncards * kCard;
    m_src.skip((kBlock - used % kBlock) % kBlock);
    h.dataStart = m_src.pos();

    // Mandatory keywords in their places (FITS standard 4.4.1, 7.2.1, 7.3.1).
    std::size_t at = 0;
    auto need = [&](const std::string& key) -> const Card& {
      if (at >= cards.size() || cards[at].key != key || !cards[at].hasValue)
        fail(h, key, "mandatory keyword " + key + " missing or out of place (card " +
                         std::to_string(at + 1) + ")");
      return cards[at++];
    };
    auto needInt = [&](const std::string& key, int64_t lo, int64_t hi) {
      const Card& c = need(key);
      const auto v = c.isString ? std::nullopt : parseInteger(c.value);
      if (!v || *v < lo || *v > hi)
        fail(h, key, "value '" + c.value.substr(0, 30) + "' is not an integer in " +
                         std::to_string(lo) + ".." + std::to_string(hi));
      return *v;
    };
    std::string xtension;
    if (index == 0) {
      const Card& s = need("SIMPLE");
      if (s.isString || s.value != "T") fail(h, "SIMPLE", "SIMPLE is not T");
    } else {
      const Card& x = need("XTENSION");
      if (!x.isString) fail(h, "XTENSION", "XTENSION is not a string");
      xtension = x.value;
      if (xtension != "IMAGE" && xtension != "BINTABLE" && xtension != "TABLE")
        fail(h, "XTENSION", "extension type '" + xtension.substr(0, 20) + "' is not supported");
    }
    h.image = index == 0 || xtension == "IMAGE";
    const bool bintable = xtension == "BINTABLE";
    h.bitpix = int(needInt("BITPIX", -64, 64));
    if (h.bitpix != 8 && h.bitpix != 16 && h.bitpix != 32 && h.bitpix != 64 && h.bitpix != -32 &&
        h.bitpix != -64)
      fail(h, "BITPIX", "BITPIX " + std::to_string(h.bitpix) + " is not one of 8 16 32 64 -32 -64");
    if (!h.image && h.bitpix != 8) fail(h, "BITPIX", "a table must have BITPIX 8");
    const int64_t naxis = needInt("NAXIS", 0, 999);
    if (!h.image && naxis != 2) fail(h, "NAXIS", "a table must have NAXIS 2");
    for (int64_t i = 1; i <= naxis; ++i)
      h.naxes.push_back(needInt("NAXIS" + std::to_string(i), 0, INT_MAX));
    if (index > 0) {
      h.pcount = needInt("PCOUNT", 0, INT64_MAX / 2);
      h.gcount = needInt("GCOUNT", 0, INT_MAX);
      if (!h.image && h.gcount != 1) fail(h, "GCOUNT", "a table must have GCOUNT 1");
      if (xtension == "IMAGE" && (h.pcount != 0 || h.gcount != 1))
        fail(h, "PCOUNT", "an IMAGE extension must have PCOUNT 0 and GCOUNT 1");
    }
    int64_t tfields = -1;
    if (!h.image) tfields = needInt("TFIELDS", 0, 999);

    // Every other keyword CFITSIO converts on its own: a plain number, sane length.
    std::vector<std::string> tform(std::size_t(std::max<int64_t>(tfields, 0)));
    for (std::size_t i = at; i < cards.size(); ++i) {
      const Card& c = cards[i];
      if (!c.hasValue) continue;
      if (cfitsioIntegerKey(c.key, bintable)) {
        if (c.isString || !parseInteger(c.value))
          fail(h, c.key, "value '" + c.value.substr(0, 30) + "' is not an integer");
        if (c.key == "BITPIX" || c.key == "NAXIS" || digitsAfter(c.key, "NAXIS") ||
            c.key == "PCOUNT" || c.key == "GCOUNT" || c.key == "TFIELDS")
          fail(h, c.key, "mandatory keyword " + c.key + " appears twice");
        if (digitsAfter(c.key, "TBCOL") || c.key == "THEAP")
          if (*parseInteger(c.value) < 0) fail(h, c.key, c.key + " is negative");
      } else if (cfitsioDoubleKey(c.key)) {
        if (c.isString || !parsesAsDouble(c.value))
          fail(h, c.key, "value '" + c.value.substr(0, 30) + "' is not a number");
      } else if (digitsAfter(c.key, "TFORM") && tfields >= 0) {
        if (!c.isString) fail(h, c.key, c.key + " is not a string");
        int n = 0;
        std::from_chars(c.key.data() + 5, c.key.data() + c.key.size(), n);
        if (n >= 1 && n <= tfields) tform[std::size_t(n - 1)] = c.value.empty() ? " " : c.value;
      }
    }
    if (bintable) {
      int64_t width = 0;
      for (int64_t n = 1; n <= tfields; ++n) {
        const std::string& f = tform[std::size_t(n - 1)];
        const std::string key = "TFORM" + std::to_string(n);
        if (f.empty()) fail(h, key, "column " + std::to_string(n) + " of TFIELDS " +
                                         std::to_string(tfields) + " has no " + key);
        const auto w = binaryFormWidth(f);
        if (!w) fail(h, key, "'" + f.substr(0, 30) + "' is not a binary-table format");
        width += *w;
        if (width > INT_MAX) fail(h, key, "columns are wider than a row can be");
      }
      if (width != h.naxes[0])
        fail(h, "NAXIS1", "NAXIS1 " + std::to_string(h.naxes[0]) + " differs from the " +
                              std::to_string(width) + " bytes the TFORMn columns take");
    } else if (!h.image) {
      for (int64_t n = 1; n <= tfields; ++n)
        if (tform[std::size_t(n - 1)].empty())
          fail(h, "TFORM" + std::to_string(n), "ASCII table column has no TFORM");
    }

    // Size of the data, overflow-checked.
    int64_t elems = h.naxes.empty() ? 0 : 1;
    const bool groups = index == 0 && !h.naxes.empty() && h.naxes[0] == 0 && h.naxes.size() > 1;
    for (std::size_t i = groups ? 1 : 0; i < h.naxes.size(); ++i)
      if (__builtin_mul_overflow(elems, h.naxes[i], &elems))
        fail(h, "NAXIS" + std::to_string(h.naxes.size()), "size claim overflows: " + claimText(h));
    int64_t bytes = 0;
    const int64_t each = h.image ? std::abs(h.bitpix) / 8 : 1;
    if (__builtin_add_overflow(elems, h.pcount, &bytes) ||
        __builtin_mul_overflow(bytes, h.gcount, &bytes) || __builtin_mul_overflow(bytes, each, &bytes) ||
        bytes > INT64_MAX / 4)
      fail(h, "NAXIS" + std::to_string(h.naxes.size()), "size claim overflows: " + claimText(h));
    if (naxis == 0 && h.pcount == 0) bytes = 0;
    h.dataBytes = bytes;
    return h;
  }

  std::string m_path;
  ByteSource m_src;
  bool m_trailing = false;
};

} // namespace

namespace {

FitsLayout checkedLayout(Scanner& s, const std::function<std::string(const FitsLayout&)>& inside,
                         const std::string& path) {
  FitsLayout layout = s.run();
  if (s.trailing()) {
    const std::string sentence = inside(layout);
    if (!sentence.empty()) {
      // The HDU named in the sentence is the one whose claim is wrong.
      for (const auto& h : layout.hdus)
        if (sentence.rfind("HDU '" + h.name + "'", 0) == 0)
          throw FitsError(path, h.name, "NAXIS" + std::to_string(std::max<std::size_t>(h.naxes.size(), 1)),
                          sentence);
    }
  }
  return layout;
}

std::string headerInsideData(ByteSource& src, const FitsLayout& layout) {
  for (const FitsHduLayout& h : layout.hdus) {
    if (h.dataBytes <= kBlock) continue; // a header inside needs a second data block
    if (src.pos() > h.dataStart) return {};
    src.skip(h.dataStart - src.pos());
    const int64_t blocks = (h.dataBytes + kBlock - 1) / kBlock;
    char block[kCard];
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t at = src.pos();
      if (src.read(block, kCard) < kCard) return {};
      if (b > 0 && std::memcmp(block, "XTENSION= ", 10) == 0) {
        // Name the HDU found there, when its header says.
        std::string found = "an extension";
        char c[kCard];
        for (int k = 0; k < 200 && src.read(c, kCard) == kCard; ++k) {
          const Card card = parseCard(c);
          if (card.key == "END") break;
          if (card.key == "EXTNAME" && card.isString) {
            found = "'" + card.value + "'";
            break;
          }
        }
        return "HDU '" + h.name + "' claims " + Scanner::claimText(h) + " (" +
               bytesText(h.dataBytes) + " of data), but the header of " + found +
               " starts at byte " + std::to_string(at) + ", inside that data: the size claim is wrong";
      }
      src.skip(at + kBlock - src.pos());
    }
  }
  return {};
}

} // namespace

FitsLayout scanFitsLayout(const std::string& path) {
  if (isGzipFile(path)) return scanFitsLayout(*inflateGzipFile(path));
  Scanner s(path);
  return checkedLayout(s, [&](const FitsLayout& l) { return findHeaderInsideData(path, l); }, path);
}

FitsLayout scanFitsLayout(const FitsBytes& bytes) {
  Scanner s(bytes);
  return checkedLayout(s, [&](const FitsLayout& l) { return findHeaderInsideData(bytes, l); },
                       bytes.name());
}

std::string findHeaderInsideData(const std::string& path, const FitsLayout& layout) {
  if (isGzipFile(path)) return findHeaderInsideData(*inflateGzipFile(path), layout);
  ByteSource src(path);
  return headerInsideData(src, layout);
}

std::string findHeaderInsideData(const FitsBytes& bytes, const FitsLayout& layout) {
  ByteSource src(bytes);
  return headerInsideData(src, layout);
}

// ---- FitsBytes and gzip ----------------------------------------------------------------

FitsBytes::FitsBytes(std::string name, std::size_t capacity, bool inflated)
    : m_name(std::move(name)), m_inflated(inflated) {
  if (capacity) {
    m_data = static_cast<char*>(std::malloc(capacity));
    if (!m_data) throw FitsError(m_name, "", "", "out of memory for " + bytesText(int64_t(capacity)));
    m_capacity = capacity;
  }
}

FitsBytes::~FitsBytes() {
  std::free(m_data);
}

void FitsBytes::append(const char* p, std::size_t n) {
  if (room() < n) {
    const std::size_t want = std::max(m_capacity + m_capacity / 2, m_size + n);
    char* q = static_cast<char*>(std::realloc(m_data, want));
    if (!q) throw FitsError(m_name, "", "", "out of memory for " + bytesText(int64_t(want)));
    m_data = q;
    m_capacity = want;
  }
  if (n) std::memcpy(m_data + m_size, p, n);
  m_size += n;
}

bool isGzipFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char magic[2] = {0, 0};
  const ssize_t n = ::pread(fd, magic, 2, 0);
  ::close(fd);
  return n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

std::shared_ptr<const FitsBytes> inflateGzipFile(const std::string& path) {
  // The compressed file, whole.
  std::vector<unsigned char> in;
  {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw FitsError(path, "", "", std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    ::fstat(fd, &st);
    in.resize(std::size_t(std::max<off_t>(st.st_size, 0)));
    std::size_t got = 0;
    while (got < in.size()) {
      const ssize_t r = ::pread(fd, in.data() + got, in.size() - got, off_t(got));
      if (r < 0) {
        const int err = errno;
        ::close(fd);
        throw FitsError(path, "", "", std::string("read error: ") + std::strerror(err));
      }
      if (r == 0) break;
      got += std::size_t(r);
    }
    ::close(fd);
    in.resize(got);
  }
  // The trailer's claim (ISIZE of the last member: the size mod 2^32) sizes the output
  // only when deflate could expand the file that far (at most 1032:1); otherwise the
  // buffer grows with what the stream holds. Pages are mapped as they are filled.
  const uint32_t claim = in.size() >= 18 ? uint32_t(in[in.size() - 4]) | uint32_t(in[in.size() - 3]) << 8 |
                                               uint32_t(in[in.size() - 2]) << 16 |
                                               uint32_t(in[in.size() - 1]) << 24
                                         : 0;
  const uint64_t most = uint64_t(in.size()) * 1032 + 65536;
  auto out = std::make_shared<FitsBytes>(path, claim > 0 && claim <= most ? std::size_t(claim) : 1 << 20,
                                         true);
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw FitsError(path, "", "", "cannot start zlib");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  auto corrupt = [&](const char* why) {
    throw FitsError(path, "", "", std::string("gzip stream is corrupt: ") + why);
  };
  std::size_t at = 0;          // input consumed
  std::size_t memberStart = 0; // output of the members before the last
  int members = 1;
  constexpr std::size_t kChunk = std::size_t(16) << 20;
  // Once the claimed size is filled, output goes through a scratch buffer first: a
  // right claim then ends the stream without growing (and copying) the buffer.
  static thread_local std::array<char, 1 << 16> scratch;
  while (true) {
    if (z.avail_in == 0) {
      const std::size_t n = std::min<std::size_t>(in.size() - at, 1u << 30);
      z.next_in = in.data() + at;
      z.avail_in = uInt(n);
      at += n;
    }
    const bool full = out->room() == 0;
    const std::size_t n = full ? scratch.size() : std::min(out->room(), kChunk);
    char* dst = full ? scratch.data() : out->tail();
    if (!full) populatePages(dst, n);
    z.next_out = reinterpret_cast<Bytef*>(dst);
    z.avail_out = uInt(n);
    const int rc = inflate(&z, Z_NO_FLUSH);
    const std::size_t made = n - z.avail_out;
    if (full)
      out->append(dst, made);
    else
      out->commit(made);
    if (rc == Z_STREAM_END) {
      // Another member follows (gzip's concatenation), or the rest is ignored.
      const std::size_t rest = z.avail_in + (in.size() - at);
      const unsigned char* p = z.avail_in ? z.next_in : in.data() + at;
      if (rest >= 2 && p[0] == 0x1f && p[1] == 0x8b) {
        inflateReset(&z);
        memberStart = out->size();
        ++members;
        continue;
      }
      break;
    }
    if (rc == Z_DATA_ERROR) corrupt(z.msg ? z.msg : "invalid data");
    if (rc == Z_MEM_ERROR) throw FitsError(path, "", "", "out of memory while decompressing");
    if (rc == Z_BUF_ERROR && z.avail_in == 0 && at == in.size()) corrupt("unexpected end of file");
    if (rc != Z_OK && rc != Z_BUF_ERROR) corrupt(z.msg ? z.msg : "zlib error");
    if (out->size() > most) corrupt("it expands beyond what deflate can produce");
  }
  // zlib checked each member's own length and CRC; the file's last four bytes are the
  // last member's length unless something follows the compressed data.
  const std::size_t last = out->size() - memberStart;
  if (claim != uint32_t(last))
    throw FitsError(path, "", "",
                    "gzip trailer claims " + bytesText(claim) + " decompressed, " +
                        (members == 1 ? "the stream holds "
                                      : "the last of " + std::to_string(members) + " gzip members holds ") +
                        bytesText(int64_t(last)) + " (corrupt, or bytes after the compressed data)");
  return out;
}

} // namespace spex
