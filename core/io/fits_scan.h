// A check of a FITS file's header blocks done by SpexLab itself, before CFITSIO parses
// any of them (docs/reliability.md "Headers checked before CFITSIO").
//
// Why: CFITSIO 4.2 (Debian 12) formats an over-long keyword value into a fixed message
// buffer when it fails to convert it (ffc2j and friends); glibc's fortify check then
// kills the process. CFITSIO converts the structural keywords (BITPIX, NAXISn, PCOUNT,
// TFIELDS, ...) on its own while opening a file or moving between HDUs, so no care in
// how we read keys can avoid that path: the cards must be checked before CFITSIO sees
// them. The same walk over the HDU chain checks every size claim against the bytes the
// file holds (decompressed, for .gz), so no reader allocates for data that is not there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spex {

// The bytes of a whole FITS file held in memory, read-only once made: a gzip-compressed
// file inflated once (inflateGzipFile), which the scan checks and CFITSIO then reads as
// a memory file (FitsFile::openRead), so the stream is decompressed one time only.
class FitsBytes {
public:
  // Room for `capacity` bytes, none of them used yet; name is the file named in errors.
  FitsBytes(std::string name, std::size_t capacity, bool inflated);
  ~FitsBytes();
  FitsBytes(const FitsBytes&) = delete;
  FitsBytes& operator=(const FitsBytes&) = delete;

  const char* data() const { return m_data; }
  std::size_t size() const { return m_size; }
  const std::string& name() const { return m_name; }
  bool inflated() const { return m_inflated; } // decompressed from a gzip file

  // Filling it (the makers only): tail() has room() bytes, of which commit(n) uses n;
  // append grows the room as needed.
  std::size_t room() const { return m_capacity - m_size; }
  char* tail() { return m_data + m_size; }
  void commit(std::size_t n) { m_size += n; }
  void append(const char* p, std::size_t n);

private:
  std::string m_name;
  char* m_data = nullptr;
  std::size_t m_size = 0, m_capacity = 0;
  bool m_inflated = false;
};

// True when the file starts with the gzip magic (1f 8b), as CFITSIO decides.
bool isGzipFile(const std::string& path);

// The decompressed bytes of the gzip file `path` (concatenated members are joined and
// bytes after the last one ignored, as zlib's gzread does). Throws FitsError naming the
// file when the stream is corrupt or cut short (zlib checks each member's length and
// CRC), or when the file's last four bytes, the trailer's size claim, are not the last
// member's size: something follows the compressed data. Memory grows with the output
// and never beyond what deflate can expand the file to (1032:1), whatever the trailer
// claims.
std::shared_ptr<const FitsBytes> inflateGzipFile(const std::string& path);

// Where one HDU lies and what its header claims.
struct FitsHduLayout {
  int index = 0;             // 0 = primary
  std::string name;          // EXTNAME, or "primary" / "HDU n"
  bool image = true;         // primary or IMAGE extension (else BINTABLE/TABLE)
  int bitpix = 0;
  std::vector<int64_t> naxes; // NAXIS1, NAXIS2, ... (FITS order)
  int64_t pcount = 0, gcount = 1;
  int64_t headerStart = 0;    // byte offsets in the (decompressed) file
  int64_t dataStart = 0;
  int64_t dataBytes = 0;      // as claimed, before padding to 2880
};

struct FitsLayout {
  std::vector<FitsHduLayout> hdus;
  int64_t fileBytes = 0; // decompressed size for .gz
};

// Walks the headers of `path` (plain, or gzip when it starts with the gzip magic) and
// throws FitsError naming the HDU and key when: a header has no END; the mandatory
// keywords are missing, out of order or malformed; a keyword CFITSIO converts by itself
// holds anything but a plain number of sane length; an axis is negative or does not fit
// an int; a size product overflows; or the data an HDU claims runs past the end of the
// file. Trailing bytes after the last HDU that are not a header are ignored, as CFITSIO
// ignores them, unless a header of another HDU lies inside the claimed data (then the
// claim is what is wrong, and the error says so).
// A gzip file is inflated for the scan and the bytes dropped: to scan and then read
// one, inflate it once (inflateGzipFile) and scan the bytes.
FitsLayout scanFitsLayout(const std::string& path);
// The same checks on a file held in memory; errors name bytes.name().
FitsLayout scanFitsLayout(const FitsBytes& bytes);

// Where a hint is wanted after CFITSIO failed to find an HDU by name: the first HDU of
// `layout` whose claimed data contains a block that starts like an extension header,
// described in one sentence; empty when there is none. Reads the file again.
std::string findHeaderInsideData(const std::string& path, const FitsLayout& layout);
std::string findHeaderInsideData(const FitsBytes& bytes, const FitsLayout& layout);

} // namespace spex
