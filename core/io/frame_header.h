// What desispec puts in a frame header besides the numbers (desispec.scripts.extract,
// desiutil.depend, desispec.io.util): file names shortened relative to the production
// roots, DEPNAMnn/DEPVERnn provenance pairs, and the requested wavelength grid of a
// barycentric-corrected extraction. docs/desi.md lists every keyword.
#pragma once

#include "../image.h"
#include "../plan/patch_plan.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spex {

class FitsFile;

// desispec.io.util.shorten_filename: a path under $DESI_SPECTRO_CALIB becomes
// "SPCALIB/..."; else one under $DESI_SPECTRO_REDUX/$SPECPROD (joined like
// os.path.join: an absolute SPECPROD is used as is) becomes "SPECPROD/..."; otherwise
// the path is returned unchanged. Plain prefix tests, as desispec's startswith.
std::string shortenFilename(const std::string& path);
// The same with the roots given (nullopt: variable not set); the one above reads them
// from the environment.
std::string shortenFilename(const std::string& path, const std::optional<std::string>& calib,
                            const std::optional<std::string>& redux,
                            const std::optional<std::string>& specprod);

// The (name, version) pairs SpexLab records, in order: spexlab, cfitsio, then the
// environment variables desiutil.depend records (DESI_ROOT, DESI_SPECTRO_DATA,
// DESI_SPECTRO_REDUX, SPECPROD, DESI_SPECTRO_CALIB, DESI_BASIS_TEMPLATES, DESI_TARGET,
// DESIMODEL) with their values or "NOT_SET".
std::vector<std::pair<std::string, std::string>> spexlabDependencies();

// desiutil.depend.add_dependencies into the current HDU: each pair is written as
// DEPNAMnn / DEPVERnn; a name already recorded (from the input header) keeps its
// index and gets the new version, new names take the next free index.
void writeDependencies(FitsFile& f, const std::vector<std::pair<std::string, std::string>>& deps);

// The grid the user asked for from the grid extracted on: extraction grid x factor
// (desispec extracts on wmin/f, wmax/f, dw/f and writes the requested wmin, wmax, dw).
// Products within 8 ulps of a number with at most 6 decimals snap to it, so a
// requested 6000.0, 6500.0, 0.8 comes back exactly. factor 1 returns the grid as is.
WaveGrid requestedGrid(const WaveGrid& extraction, double factor);

// WAVELENGTH values as numpy.arange(wmin, wmax + dw/2, dw) computes them: value 0 is
// wmin, value 1 is wmin + dw, value i >= 2 is wmin + i * ((wmin + dw) - wmin). This is
// what desispec writes, bit for bit.
std::vector<double> arangeValues(const WaveGrid& grid);

} // namespace spex
