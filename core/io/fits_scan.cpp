#include "fits_scan.h"

#include "../errors.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace spex {

namespace {

constexpr int64_t kBlock = 2880;
constexpr int kCard = 80;

// Sequential bytes of a file, decompressed when it is gzip. Plain files skip data by
// seeking; gzip streams skip by decompressing (into a small scratch buffer), so the
// decompressed size is learnt without holding it.
class ByteSource {
public:
  explicit ByteSource(const std::string& path) : m_path(path) {
    m_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (m_fd < 0) throw FitsError(path, "", "", std::string("cannot open: ") + std::strerror(errno));
    unsigned char magic[2] = {0, 0};
    const ssize_t n = ::pread(m_fd, magic, 2, 0);
    struct stat st {};
    ::fstat(m_fd, &st);
    m_size = int64_t(st.st_size);
    if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
      const int fd2 = ::dup(m_fd);
      m_gz = gzdopen(fd2, "rb");
      if (!m_gz) {
        ::close(fd2);
        throw FitsError(path, "", "", "cannot open the gzip stream");
      }
      gzbuffer(m_gz, 1 << 16);
    }
  }
  ~ByteSource() {
    if (m_gz) gzclose(m_gz);
    if (m_fd >= 0) ::close(m_fd);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  bool gzip() const { return m_gz != nullptr; }
  // The gzip trailer's ISIZE: the decompressed size mod 2^32 as the file claims it.
  // CFITSIO allocates its in-memory copy of a .gz file from this claim.
  uint32_t gzipClaimedSize() const {
    unsigned char t[4] = {0, 0, 0, 0};
    if (m_size < 18 || ::pread(m_fd, t, 4, off_t(m_size - 4)) != 4) return 0;
    return uint32_t(t[0]) | uint32_t(t[1]) << 8 | uint32_t(t[2]) << 16 | uint32_t(t[3]) << 24;
  }
  int64_t pos() const { return m_pos; }

  // Reads up to n bytes at the current position; returns how many were there.
  int64_t read(char* out, int64_t n) {
    int64_t got = 0;
    if (m_gz) {
      while (got < n) {
        const unsigned chunk = unsigned(std::min<int64_t>(n - got, 1 << 30));
        const int r = gzread(m_gz, out + got, chunk);
        if (r < 0) gzFail();
        if (r == 0) break;
        got += r;
      }
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
    if (!m_gz) {
      const int64_t avail = std::max<int64_t>(0, std::min(n, m_size - m_pos));
      m_pos += avail;
      return avail;
    }
    static thread_local std::array<char, 1 << 16> scratch;
    int64_t done = 0;
    while (done < n) {
      const int64_t r = read(scratch.data(), std::min<int64_t>(n - done, int64_t(scratch.size())));
      if (r == 0) break;
      done += r;
    }
    return done;
  }

  // Total (decompressed) size: for gzip, reads to the end.
  int64_t totalSize() {
    if (!m_gz) return m_size;
    skip(INT64_MAX / 2);
    return m_pos;
  }

private:
  [[noreturn]] void gzFail() {
    int err = 0;
    const char* msg = gzerror(m_gz, &err);
    throw FitsError(m_path, "", "",
                    std::string("gzip stream is corrupt: ") + (msg ? msg : "unknown zlib error"));
  }

  std::string m_path;
  int m_fd = -1;
  gzFile m_gz = nullptr;
  int64_t m_size = 0;
  int64_t m_pos = 0;
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
        const int64_t total = m_src.gzip() ? m_src.pos() : m_src.totalSize();
        const std::string axis = "NAXIS" + std::to_string(std::max<std::size_t>(h.naxes.size(), 1));
        throw FitsError(m_path, h.name, h.naxes.empty() ? "" : axis,
                        "header claims " + claimText(h) + " (" + bytesText(h.dataBytes) +
                            " of data) but only " + bytesText(std::max<int64_t>(0, total - h.dataStart)) +
                            " follow the header" + (m_src.gzip() ? " (decompressed)" : "") +
                            ": the file is truncated or " + axis + " is wrong");
      }
      const int64_t pad = (kBlock - h.dataBytes % kBlock) % kBlock;
      m_src.skip(pad);
      layout.hdus.push_back(std::move(h));
    }
    layout.fileBytes = m_src.totalSize();
    if (m_src.gzip() && m_src.gzipClaimedSize() != uint32_t(layout.fileBytes))
      throw FitsError(m_path, "", "",
                      "gzip trailer claims " + bytesText(m_src.gzipClaimedSize()) +
                          " decompressed, the stream holds " + bytesText(layout.fileBytes) +
                          " (corrupt, or bytes after the compressed data)");
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

FitsLayout scanFitsLayout(const std::string& path) {
  Scanner s(path);
  FitsLayout layout = s.run();
  if (s.trailing()) {
    const std::string inside = findHeaderInsideData(path, layout);
    if (!inside.empty()) {
      // The HDU named in the sentence is the one whose claim is wrong.
      for (const auto& h : layout.hdus)
        if (inside.rfind("HDU '" + h.name + "'", 0) == 0)
          throw FitsError(path, h.name, "NAXIS" + std::to_string(std::max<std::size_t>(h.naxes.size(), 1)),
                          inside);
    }
  }
  return layout;
}

std::string findHeaderInsideData(const std::string& path, const FitsLayout& layout) {
  ByteSource src(path);
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

} // namespace spex
