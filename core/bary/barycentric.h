// Barycentric wavelength correction, as desispec's `desi_extract_spectra
// --barycentric-correction` computes it (desispec.scripts.extract and
// desispec.heliocentric): the factor 1 + v/c of astropy's
// SkyCoord.radial_velocity_correction('barycentric') for the pointing at mid-exposure
// from Kitt Peak, and the grid the extraction then runs on. Ephemeris, time scales and
// Earth rotation come from ERFA (the library astropy itself calls). docs/desi.md,
// "Barycentric correction", says what enters and how well it agrees.
#pragma once

#include "../image.h"
#include "../plan/patch_plan.h"

#include <string>

namespace spex {

// Kitt Peak as desispec places it (desispec.heliocentric: EarthLocation.from_geodetic,
// WGS84 ellipsoid).
constexpr double kKittPeakLatitudeDeg = 31.96403;
constexpr double kKittPeakLongitudeDeg = -111.59989; // east positive
constexpr double kKittPeakHeightM = 2097.0;

// 1 + v/c, v = astropy's SkyCoord(ra, dec, ICRS).radial_velocity_correction(
// 'barycentric', obstime=Time(mjdUtc, format='mjd', scale='utc'), location=Kitt Peak):
// Wright & Eastman (2014) eq. 28 without Shapiro delay, i.e.
//   gamma (1 + beta.n) / (1 + Phi/c^2),
// beta = (Earth's barycentric velocity + the site's GCRS velocity)/c, gamma its Lorentz
// factor, n the ICRS unit vector to (ra, dec), Phi the Newtonian potential of the Sun,
// Jupiter, the Moon (at the geocentre) and the Earth (at the site). Throws InputError
// for non-finite input or |dec| > 90.
double barycentricFactor(double raDeg, double decDeg, double mjdUtc);

// What the factor was computed from, and which header keys gave it.
struct BaryInputs {
  double raDeg, decDeg, mjdMid;
  std::string raKey, decKey, mjdKey;
};

// desispec's choice of header and keys: the preproc IMAGE header if it holds TARGTRA or
// RA, else the FIBERMAP header if it does (early commissioning); then, where desispec
// would give up, a header holding only SKYRA or TELRA (image first). In the chosen
// header RA is the first of TARGTRA, SKYRA, TELRA, RA; Dec the first of TARGTDEC,
// SKYDEC, TELDEC, DEC; MJD = MJD-OBS (else MJD) + EXPTIME/2/86400 (EXPTIME absent: 0,
// as desispec). Missing or non-numeric values throw InputError naming every key looked
// for and the header. `fibermap` may be null (no FIBERMAP HDU).
BaryInputs baryInputsFromHeaders(const FitsHeader& image, const FitsHeader* fibermap);

// The grid to extract on: wmin/f, wmax/f, dw/f with the same number of bins as
// `requested` (desispec extracts there and writes `requested` as WAVELENGTH).
// Throws InputError unless factor is finite and positive.
WaveGrid barycentricExtractionGrid(const WaveGrid& requested, double factor);

} // namespace spex
