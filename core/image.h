// A CCD exposure as extraction sees it: pixels in electrons, inverse variance with
// the extraction mask bits already applied (ivar = 0 where a bad bit is set), the
// raw mask, the IMAGE header to pass on, and the FIBERMAP to pass through.
#pragma once

#include "array.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spex {

// One header card, kept verbatim so it can be copied into the frame header.
struct FitsCard {
  std::string key;
  std::string value;   // as written in the card (strings keep their quotes)
  std::string comment;
};

struct FitsHeader {
  std::vector<FitsCard> cards;
  const FitsCard* find(const std::string& key) const;
  std::string getString(const std::string& key, const std::string& fallback = {}) const;
  void set(const std::string& key, const std::string& value, const std::string& comment = {});
};

// FIBERMAP rows are passed through untouched: we keep the HDU as its file held it
// and which FIBER each row holds, and the frame writer copies the rows it needs.
struct FiberMap {
  std::string sourceFile;      // file whose FIBERMAP HDU holds the rows; empty: none
  std::vector<int32_t> fiber;  // FIBER column, one entry per row
  FitsHeader header;           // FIBERMAP HDU header (pointing of early data: bary/)
  // The FIBERMAP HDU's bytes as in sourceFile (header and data blocks, FitsFile::rawHdu),
  // kept at read time so the frame writer copies the rows without reopening (and, for
  // .gz, decompressing) the file. Empty: the writer reads them from sourceFile.
  std::string hduBytes;
};

// DESI has 500 fibers per petal: petal p holds FIBER 500 p + 0..499.
constexpr int kFibersPerPetal = 500;

// Preproc MASK bits that make a pixel unusable for extraction (EXTRACTION.md §1):
// BAD|HOT|DEAD|SATURATED|COSMIC|PIXFLATZERO|PIXFLATLOW|HIGHVAR|BADAMP.
constexpr int32_t kExtractionMaskBits = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) |
                                        (1 << 5) | (1 << 6) | (1 << 7) | (1 << 9);

struct Image {
  int ny = 0;  // rows (NAXIS2)
  int nx = 0;  // columns (NAXIS1)
  Array2D<double> pix;   // [ny, nx] electrons
  Array2D<double> ivar;  // [ny, nx] masked: 0 where MASK has an extraction bit
  Array2D<int32_t> mask; // [ny, nx] raw MASK
  FitsHeader header;     // IMAGE HDU header (non-structural cards)
  FiberMap fibermap;
  std::string path;      // where it was read from, if anywhere
  int nonFinitePixels = 0; // NaN/Inf pixels or bad ivar found on read, now masked

  // Sets ivar to 0 wherever pix or ivar is not finite or ivar < 0, or mask has an
  // extraction bit; counts the non-finite/negative cases in nonFinitePixels.
  void sanitize();
};

// A DESI camera: arm b, r or z and petal (spectrograph) 0..9, named "z7".
struct Camera {
  char arm = 'r';
  int petal = 0;
  std::string name() const {
    std::string s(2, arm);
    s[1] = char('0' + petal % 10);
    return s;
  }
};
// Parses "b0".."z9" (case-insensitive); InputError naming the text otherwise.
Camera parseCamera(const std::string& name);

// The petal (spectrograph) of an exposure from its header: the digit of CAMERA
// ("r7" -> 7), else SPECGRPH, else PETAL; -1 when none says.
int petalOf(const FitsHeader& header);

// The FIBER numbers of spectra specmin .. specmin + nspec - 1: rows specmin.. of the
// image's FIBERMAP (desispec keeps fibermap[specmin:specmin+nspec]; on petal p a row
// holds FIBER 500 p + i). Without a FIBERMAP: 500 petalOf(header) + specmin + i (petal
// 0 when the header names none). Throws InputError naming the file when the FIBERMAP
// has fewer rows than requested.
std::vector<int32_t> fibersOf(const Image& image, int specmin, int nspec);

} // namespace spex
