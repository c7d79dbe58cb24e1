// The PSF's Legendre sets packed for the device (kernels.h DevLegendre/DevPsf): one
// coefficient pool and a table of sets in the order the kernels index them (kSetX,
// kSetY, kSetSigX, kSetSigY, then GH-i-j). One host function for the engine's upload
// (engine_transfers.cpp) and the device checks (device_check.cpp).
#pragma once

#include "kernels.h"

#include <vector>

namespace spex {
struct GaussHermitePsf;
}

namespace spex::gpu {

struct PackedPsf {
  std::vector<double> pool;
  std::vector<DevLegendre> sets;
};

enum class PsfPart { TracesOnly, Whole };

// Sets 0-1 (traces) or all of them. Throws nothing: the PSF was validated when read.
PackedPsf packPsf(const GaussHermitePsf& psf, PsfPart part = PsfPart::Whole);

// Whether packPsf(psf, part) would give exactly these tables (same sets, same
// coefficients bit for bit), without building them: a warm engine asked again with the
// same PSF keeps what it uploaded (engine_transfers.cpp).
bool samePacked(const GaussHermitePsf& psf, const std::vector<double>& pool, const std::vector<DevLegendre>& sets,
                PsfPart part = PsfPart::Whole);

// The DevPsf for pool/sets already on the device (sizes and degrees from the PSF).
DevPsf describePsf(const GaussHermitePsf& psf, const double* pool, const DevLegendre* sets);

} // namespace spex::gpu
