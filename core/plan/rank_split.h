// How bundles are shared among the ranks of an MPI job (DESIGN.md "Scale-out"): the
// bundles of [fiberMin, fiberMin + nFiber) in steps of bundlesize, as gpu_specter
// counts them (range(specmin, specmin + nspec, bundlesize)), cut into contiguous
// blocks, one per rank. Contiguous blocks keep each rank's request one plan (one GPU
// batch stream) and make the gather a concatenation in rank order. Patches never
// span bundles, so every rank's spectra are bit-for-bit those of one process.
#pragma once

namespace spex {

struct FiberRange {
  int fiberMin = 0;
  int nFiber = 0; // 0: this rank has no bundle (more ranks than bundles)
};

// Rank `rank` of `size`: its fibers. Throws InputError for size < 1, rank outside
// [0, size), nFiber < 1 or bundlesize < 1.
FiberRange rankFiberRange(int fiberMin, int nFiber, int bundlesize, int rank, int size);

} // namespace spex
