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

#include <cstdint>
#include <string>
#include <vector>

namespace spex {

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
FitsLayout scanFitsLayout(const std::string& path);

// Where a hint is wanted after CFITSIO failed to find an HDU by name: the first HDU of
// `layout` whose claimed data contains a block that starts like an extension header,
// described in one sentence; empty when there is none. Reads the file again.
std::string findHeaderInsideData(const std::string& path, const FitsLayout& layout);

} // namespace spex
