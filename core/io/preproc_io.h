// Reading and writing DESI preproc files: IMAGE, IVAR, MASK, FIBERMAP.
#pragma once

#include "../image.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spex {

// Reads a preproc file, applies the extraction mask bits to IVAR, and treats NaN/Inf
// pixels and negative or NaN ivar as masked (counted in Image::nonFinitePixels).
// Throws FitsError on missing HDUs, keys, wrong shapes or types.
Image readPreproc(const std::string& path);

// Throws FitsError (the FIBERMAP's file, HDU FIBERMAP, key NAXIS2) when the image has
// a FIBERMAP with fewer rows than fibers fiberMin..fiberMin+nFiber-1 need: rows are
// selected by index, as desispec does (fibermap[specmin:specmin+nspec]). No FIBERMAP:
// nothing to check.
void checkFibermapCovers(const FiberMap& fibermap, int fiberMin, int nFiber);

// A FIBERMAP to write (the simulator's); real ones are copied, never rebuilt.
struct FiberMapTable {
  std::vector<int32_t> fiber;
  std::vector<int64_t> targetid;
  std::vector<std::string> objtype;   // "TGT", "SKY"
  std::vector<int32_t> fiberstatus;
  std::vector<double> targetRa, targetDec;
  std::size_t rows() const { return fiber.size(); }
};

// Writes IMAGE (float32), IVAR (float32), MASK (int32), FIBERMAP; image.header cards
// go into the IMAGE header. Atomic.
void writePreproc(const std::string& path, const Image& image, const FiberMapTable& fibermap);

} // namespace spex
