// Reading and writing DESI Gauss-Hermite PSF files (EXTRACTION.md §1).
#pragma once

#include "../psf/gauss_hermite_psf.h"

#include <string>

namespace spex {

// Reads XTRACE (primary), YTRACE and PSF; validates every key and shape used and
// throws FitsError naming file, HDU and key on any problem.
GaussHermitePsf readPsf(const std::string& path);

// The physical ranges readPsf checks (widths, GH-0-0, traces near the CCD: docs/
// reliability.md), for PSFs built elsewhere (the Python package's table dicts);
// throws FitsError naming `source`.
void checkPsfPhysicalRanges(const GaussHermitePsf& psf, const std::string& source);

// Writes a PSF in the same layout (PSFTYPE GAUSS-HERMITE, PSFVER 3); used by the
// simulator. Atomic: temporary file, then rename.
void writePsf(const std::string& path, const GaussHermitePsf& psf);

} // namespace spex
