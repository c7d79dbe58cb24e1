#pragma once
// The lean normal-equations kernel with a candidate window (SPEXLAB_CUDA_NORMAL=window;
// gpu/normal_equations.cu normalEquationsLeanKernel<true>): beside kernels.h so that
// adding it rebuilt one CUDA file, not every one that includes kernels.h.
#include "kernels.h"

namespace spex::gpu {

// launchNormalEquationsLean's values to the bit, written as it writes them, with only
// the bins of each coupled fiber whose stamps can reach stamp a in y tested (a binary
// search a fiber on the corners' y). Assumes the corners' y does not decrease along a
// fiber (a trace's y grows with wavelength); needs normalEquationsLeanFit, throws
// GpuError otherwise.
void launchNormalEquationsWindow(const BatchView& b, cudaStream_t stream);

} // namespace spex::gpu
