// Barycentric correction (barycentric.h). The chain follows astropy's
// SkyCoord.radial_velocity_correction step by step, with the same ERFA calls astropy
// makes for its default ('builtin') ephemeris:
//   time:      UTC -> TAI -> TT (eraUtctai, eraTaitt); TDB = TT + eraDtdb (geocentric);
//              UT1 = UTC (DUT1 = 0, see below)
//   Earth:     eraEpv00(TDB), barycentric position and velocity
//   site:      WGS84 geodetic -> ITRS (eraGd2gc); ITRS -> GCRS through CIRS
//              (eraC2i06a(TT), eraEra00(UT1), eraPom00/eraSp00 with zero polar motion),
//              velocity = (Earth's rotation axis in GCRS * Omega) x position
//   bodies:    Sun = Earth(bary) - Earth(helio) from eraEpv00; Jupiter = Sun +
//              eraPlan94(TDB, 5); Moon = Earth + eraMoon98(TDB)
// Accepted approximations (docs/desi.md, "Barycentric correction"): DUT1 = 0 and no
// polar motion, where astropy reads IERS tables. |DUT1| < 0.9 s rotates the site's
// 0.39 km/s rotation velocity by < 6.6e-5 rad, < 2.6 cm/s (< 9e-11 in the factor);
// polar motion (< 1 arcsec) moves it by < 1 mm/s.
#include "barycentric.h"

#include "../errors.h"

#include <erfa.h>
#include <erfam.h>

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace spex {
namespace {

// astropy.constants (IAU 2015 nominal values, CODATA 2018 G) as astropy's
// EarthLocation.gravitational_redshift uses them.
constexpr double kC = 299792458.0;          // m/s
constexpr double kGMSun = 1.3271244e20;     // m^3/s^2
constexpr double kGMJupiter = 1.2668653e17; // m^3/s^2
constexpr double kGMEarth = 3.986004e14;    // m^3/s^2
constexpr double kG = 6.67430e-11;          // m^3/(kg s^2)
constexpr double kMassMoon = 7.34767309e22; // kg (astropy's value)
// astropy.coordinates.earth.OMEGA_EARTH: 1.00273781191135448 cycles per (UT1) day.
constexpr double kOmegaEarth = 1.00273781191135448 * 2.0 * M_PI / 86400.0; // rad/s
constexpr double kAuPerDayToMps = ERFA_DAU / ERFA_DAYSEC;

double norm3(const double v[3]) {
  return std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
}

double distance3(const double a[3], const double b[3]) {
  const double d[3] = {a[0] - b[0], a[1] - b[1], a[2] - b[2]};
  return norm3(d);
}

void checkErfa(int status, const char* what, double mjd) {
  // Status +1 is ERFA's "dubious year" (a date past its leap-second table's horizon):
  // the result is still the best available, as in astropy (which only warns).
  if (status < 0) {
    std::ostringstream s;
    s.precision(12);
    s << "barycentric correction: ERFA " << what << " failed (status " << status << ") for MJD "
      << mjd;
    throw InputError(s.str());
  }
}

} // namespace

double barycentricFactor(double raDeg, double decDeg, double mjdUtc) {
  if (!std::isfinite(raDeg) || !std::isfinite(decDeg) || !std::isfinite(mjdUtc)) {
    std::ostringstream s;
    s << "barycentric correction: RA, Dec and MJD must be finite numbers, got RA " << raDeg
      << ", Dec " << decDeg << ", MJD " << mjdUtc;
    throw InputError(s.str());
  }
  if (std::fabs(decDeg) > 90.0) {
    std::ostringstream s;
    s << "barycentric correction: Dec " << decDeg << " deg is outside [-90, 90]";
    throw InputError(s.str());
  }

  // ---- time scales (astropy Time(mjd, format='mjd'), scale utc) ----
  const double utc1 = ERFA_DJM0, utc2 = mjdUtc;
  double tai1, tai2, tt1, tt2, tdb1, tdb2, ut11, ut12;
  checkErfa(eraUtctai(utc1, utc2, &tai1, &tai2), "eraUtctai", mjdUtc);
  checkErfa(eraTaitt(tai1, tai2, &tt1, &tt2), "eraTaitt", mjdUtc);
  // astropy without a Time location: TDB-TT at the geocentre, with UT the fraction of
  // the (UTC) day.
  const double dayFraction = mjdUtc - std::floor(mjdUtc);
  const double dtr = eraDtdb(tt1, tt2, dayFraction, 0.0, 0.0, 0.0);
  checkErfa(eraTttdb(tt1, tt2, dtr, &tdb1, &tdb2), "eraTttdb", mjdUtc);
  checkErfa(eraUtcut1(utc1, utc2, 0.0, &ut11, &ut12), "eraUtcut1", mjdUtc);

  // ---- Earth, barycentric (au, au/day) ----
  double pvHelio[2][3], pvBary[2][3];
  checkErfa(eraEpv00(tdb1, tdb2, pvHelio, pvBary), "eraEpv00", mjdUtc);

  // ---- the site in GCRS (astropy EarthLocation.get_gcrs_posvel, via CIRS) ----
  double itrs[3];
  checkErfa(eraGd2gc(ERFA_WGS84, kKittPeakLongitudeDeg * ERFA_DD2R,
                     kKittPeakLatitudeDeg * ERFA_DD2R, kKittPeakHeightM, itrs),
            "eraGd2gc", mjdUtc);
  double c2i[3][3], pom[3][3], identity[3][3], cirsToItrs[3][3];
  eraC2i06a(tt1, tt2, c2i);
  eraPom00(0.0, 0.0, eraSp00(tt1, tt2), pom);
  eraIr(identity);
  eraC2tcio(identity, eraEra00(ut11, ut12), pom, cirsToItrs);
  double cirs[3], sitePos[3]; // metres
  eraTrxp(cirsToItrs, itrs, cirs);
  eraTrxp(c2i, cirs, sitePos);
  // Earth's rotation vector: the CIRS pole (third row of c2i) in GCRS, times Omega.
  double axis[3] = {c2i[2][0] * kOmegaEarth, c2i[2][1] * kOmegaEarth, c2i[2][2] * kOmegaEarth};
  double siteVel[3]; // m/s
  eraPxp(axis, sitePos, siteVel);

  // ---- observer velocity and its Lorentz factor ----
  double beta[3];
  for (int k = 0; k < 3; ++k) beta[k] = (pvBary[1][k] * kAuPerDayToMps + siteVel[k]) / kC;
  const double beta2 = beta[0] * beta[0] + beta[1] * beta[1] + beta[2] * beta[2];
  const double gamma = 1.0 / std::sqrt(1.0 - beta2);

  // ---- target direction (ICRS unit vector; no distance, so no parallax) ----
  double n[3];
  eraS2c(raDeg * ERFA_DD2R, decDeg * ERFA_DD2R, n);
  const double betaDotN = beta[0] * n[0] + beta[1] * n[1] + beta[2] * n[2];

  // ---- gravitational redshift at the site (astropy gravitational_redshift) ----
  // Sun, Jupiter, Moon: distances from the Earth's centre; Earth: from the site.
  double sun[3], jupiter[3], moon[3];
  for (int k = 0; k < 3; ++k) sun[k] = pvBary[0][k] - pvHelio[0][k];
  double pvJupiterHelio[2][3], pvMoonGeo[2][3];
  checkErfa(eraPlan94(tdb1, tdb2, 5, pvJupiterHelio), "eraPlan94", mjdUtc);
  eraMoon98(tdb1, tdb2, pvMoonGeo);
  for (int k = 0; k < 3; ++k) {
    jupiter[k] = sun[k] + pvJupiterHelio[0][k];
    moon[k] = pvBary[0][k] + pvMoonGeo[0][k];
  }
  const double* earth = pvBary[0];
  // Summed small to large, as astropy does (Earth, Moon, Jupiter, Sun).
  double potential = -kGMEarth / norm3(itrs); // m^2/s^2
  potential += -(kG * kMassMoon) / (distance3(moon, earth) * ERFA_DAU);
  potential += -kGMJupiter / (distance3(jupiter, earth) * ERFA_DAU);
  potential += -kGMSun / (distance3(sun, earth) * ERFA_DAU);
  const double gravity = potential / (kC * kC);

  // Wright & Eastman (2014) eq. 28 without Shapiro delay; v = c (zb - 1) and desispec's
  // factor 1 + v/c is zb itself.
  return gamma * (1.0 + betaDotN) / (1.0 + gravity);
}

namespace {

const char* const kRaKeys[] = {"TARGTRA", "SKYRA", "TELRA", "RA"};
const char* const kDecKeys[] = {"TARGTDEC", "SKYDEC", "TELDEC", "DEC"};
const char* const kMjdKeys[] = {"MJD-OBS", "MJD"};

std::string keyList(const char* const* keys, std::size_t n, const char* sep = ", ") {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += (i ? sep : "") + std::string(keys[i]);
  return s;
}

// A numeric card value (FITS allows a D exponent); throws naming header, key and value.
double numericValue(const FitsCard& card, const char* headerName) {
  std::string v = card.value;
  for (char& ch : v)
    if (ch == 'D' || ch == 'd') ch = 'E';
  const char* begin = v.c_str();
  char* end = nullptr;
  const double x = std::strtod(begin, &end);
  while (end && *end == ' ') ++end;
  if (end == begin || !end || *end != '\0' || !std::isfinite(x))
    throw InputError(std::string("barycentric correction: ") + headerName + " header key " +
                     card.key + " = " + card.value + " is not a finite number");
  return x;
}

const FitsCard* firstOf(const FitsHeader& h, const char* const* keys, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (const FitsCard* c = h.find(keys[i])) return c;
  return nullptr;
}

bool hasAny(const FitsHeader* h, std::initializer_list<const char*> keys) {
  if (!h) return false;
  for (const char* k : keys)
    if (h->find(k)) return true;
  return false;
}

} // namespace

BaryInputs baryInputsFromHeaders(const FitsHeader& image, const FitsHeader* fibermap) {
  // desispec (scripts/extract.py): the IMAGE header if it has RA or TARGTRA, else the
  // FIBERMAP header if it has them; beyond desispec, a header with SKYRA or TELRA only.
  const FitsHeader* h = nullptr;
  const char* name = nullptr;
  if (hasAny(&image, {"RA", "TARGTRA"})) {
    h = &image, name = "preproc IMAGE";
  } else if (hasAny(fibermap, {"RA", "TARGTRA"})) {
    h = fibermap, name = "FIBERMAP";
  } else if (hasAny(&image, {"SKYRA", "TELRA"})) {
    h = &image, name = "preproc IMAGE";
  } else if (hasAny(fibermap, {"SKYRA", "TELRA"})) {
    h = fibermap, name = "FIBERMAP";
  }
  if (!h)
    throw InputError(std::string("barycentric correction needs the pointing: none of ") +
                     keyList(kRaKeys, 4) + " is in the preproc IMAGE header" +
                     (fibermap ? " nor the FIBERMAP header" : " (and there is no FIBERMAP HDU)") +
                     " (looked for the pairs TARGTRA/TARGTDEC, SKYRA/SKYDEC, TELRA/TELDEC, "
                     "RA/DEC, and MJD-OBS or MJD)");

  const FitsCard* ra = firstOf(*h, kRaKeys, 4);
  const FitsCard* dec = firstOf(*h, kDecKeys, 4);
  const FitsCard* mjd = firstOf(*h, kMjdKeys, 2);
  std::string missing;
  if (!dec) missing += "none of " + keyList(kDecKeys, 4);
  if (!mjd) missing += std::string(missing.empty() ? "" : "; ") + "none of " + keyList(kMjdKeys, 2);
  if (!missing.empty())
    throw InputError(std::string("barycentric correction: the ") + name +
                     " header holds the pointing key " + ra->key + " but " + missing +
                     " (looked for the pairs TARGTRA/TARGTDEC, SKYRA/SKYDEC, TELRA/TELDEC, "
                     "RA/DEC, and MJD-OBS or MJD, in that order)");

  BaryInputs in;
  in.raKey = ra->key;
  in.decKey = dec->key;
  in.mjdKey = mjd->key;
  in.raDeg = numericValue(*ra, name);
  in.decDeg = numericValue(*dec, name);
  double exptime = 0.0; // desispec: EXPTIME absent counts as 0
  if (const FitsCard* e = h->find("EXPTIME")) exptime = numericValue(*e, name);
  in.mjdMid = numericValue(*mjd, name) + exptime / 2.0 / 86400.0;
  if (std::fabs(in.decDeg) > 90.0)
    throw InputError(std::string("barycentric correction: ") + name + " header key " + in.decKey +
                     " = " + dec->value + " is outside [-90, 90] deg");
  return in;
}

WaveGrid barycentricExtractionGrid(const WaveGrid& requested, double factor) {
  if (!std::isfinite(factor) || factor <= 0) {
    std::ostringstream s;
    s << "barycentric correction factor must be finite and positive, got " << factor;
    throw InputError(s.str());
  }
  WaveGrid g = requested;
  g.wmin = requested.wmin / factor;
  g.wmax = requested.wmax / factor;
  g.dw = requested.dw / factor;
  g.n = requested.n;
  return g;
}

} // namespace spex
