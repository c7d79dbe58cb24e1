// Reading and writing DESI Gauss-Hermite PSF files (EXTRACTION.md §1).
#pragma once

#include "../psf/gauss_hermite_psf.h"

#include <string>

namespace spex {

// Reads XTRACE (primary), YTRACE and PSF; validates every key and shape used and
// throws FitsError naming file, HDU and key on any problem.
GaussHermitePsf readPsf(const std::string& path);

// Writes a PSF in the same layout (PSFTYPE GAUSS-HERMITE, PSFVER 3); used by the
// simulator. Atomic: temporary file, then rename.
void writePsf(const std::string& path, const GaussHermitePsf& psf);

} // namespace spex
