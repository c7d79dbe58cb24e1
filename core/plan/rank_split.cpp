#include "rank_split.h"

#include "../errors.h"

#include <algorithm>
#include <string>

namespace spex {

FiberRange rankFiberRange(int fiberMin, int nFiber, int bundlesize, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw InputError("rank " + std::to_string(rank) + " of " + std::to_string(size) +
                     ": not a valid MPI rank");
  if (nFiber < 1) throw InputError("nspec must be >= 1, got " + std::to_string(nFiber));
  if (bundlesize < 1) throw InputError("bundlesize must be >= 1, got " + std::to_string(bundlesize));
  const int nbundle = (nFiber + bundlesize - 1) / bundlesize;
  // Rank r takes bundles [r nb / size, (r + 1) nb / size): sizes differ by one at most.
  const long b0 = long(rank) * nbundle / size, b1 = long(rank + 1) * nbundle / size;
  FiberRange r;
  r.fiberMin = fiberMin + int(b0) * bundlesize;
  const int end = std::min(fiberMin + nFiber, fiberMin + int(b1) * bundlesize);
  r.nFiber = std::max(0, end - r.fiberMin);
  if (r.nFiber == 0) r.fiberMin = fiberMin;
  return r;
}

} // namespace spex
