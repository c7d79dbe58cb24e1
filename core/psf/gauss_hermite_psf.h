// GaussHermitePsf: the DESI PSF model (PSFTYPE GAUSS-HERMITE, PSFVER 3) as read from
// a psf-*.fits file. It answers where fiber s puts wavelength w on the CCD (traces
// x(w), y(w)) and what the pixel-integrated spot there looks like (EXTRACTION.md §2).
#pragma once

#include "../array.h"

#include <map>
#include <string>
#include <vector>

namespace spex {

// Legendre coefficients of one quantity for every fiber over one wavelength domain.
struct LegendreSet {
  double wavemin = 0;
  double wavemax = 0;
  Array2D<double> coeff; // [nfiber, ncoeff]

  int ncoeff() const { return coeff.cols; }
  double eval(int fiber, double w) const;
};

// A pixel-integrated spot: (2 hsizeY + 1) x (2 hsizeX + 1) stamp whose pixel (0,0)
// sits at CCD column xc, row yc. Non-negative, sums to 1.
struct Spot {
  int xc = 0;
  int yc = 0;
  int nx = 0;
  int ny = 0;
  std::vector<double> v; // [ny][nx]
  double at(int iy, int ix) const { return v[std::size_t(iy) * nx + ix]; }
};

struct GaussHermitePsf {
  std::string path;        // file it came from (empty for an in-memory PSF)
  int nfiber = 0;
  int fiberMin = 0;        // FIBERMIN of the XTRACE header (first fiber in the file)
  int npixX = 0;           // CCD columns (NPIX_X)
  int npixY = 0;           // CCD rows (NPIX_Y)
  int hsizeX = 0;
  int hsizeY = 0;
  int ghdegX = 0;
  int ghdegY = 0;
  int legdeg = 0;          // LEGDEG of the PSF table (ncoeff - 1)
  double psfErr = 0.01;    // PSFERR, default 0.01
  std::string camera;      // CAMERA of the PSF HDU ("z7"); empty when absent
  std::string inPsf;       // IN_PSF of the PSF HDU (frames copy it as ORIG_PSF)

  LegendreSet xTrace;      // XTRACE HDU, its own domain
  LegendreSet yTrace;      // YTRACE HDU
  LegendreSet ghSigX;      // GHSIGX, PSF HDU domain
  LegendreSet ghSigY;      // GHSIGY
  std::vector<LegendreSet> gh;  // GH-i-j at index i * (ghdegY + 1) + j
  std::map<std::string, LegendreSet> otherParams; // tails, BUNDLE, STATUS, CONT...

  int spotNx() const { return 2 * hsizeX + 1; }
  int spotNy() const { return 2 * hsizeY + 1; }
  const LegendreSet& ghCoeff(int i, int j) const { return gh[std::size_t(i) * (ghdegY + 1) + j]; }

  // Wavelengths over which both the traces and the PSF parameters are defined.
  double waveMin() const;
  double waveMax() const;

  // fiber is the index in the file (0 .. nfiber-1).
  double x(int fiber, double w) const { return xTrace.eval(fiber, w); }
  double y(int fiber, double w) const { return yTrace.eval(fiber, w); }

  // The spot of (fiber, w), EXTRACTION.md §2.
  Spot spot(int fiber, double w) const;
  // Same into caller-provided storage (no allocation when v has capacity).
  void spotInto(int fiber, double w, Spot& out) const;
  // The same values written to v (spotNy() x spotNx(), row-major) and the corner to
  // (xc, yc): for storage the caller owns (SpotCache).
  void spotValues(int fiber, double w, int& xc, int& yc, double* v) const;

  // Stamp corner of (fiber, w) without computing the stamp.
  void corner(int fiber, double w, int& xc, int& yc) const;

  // Wavelength at which fiber's trace crosses CCD row y (Newton on y(w)); used by
  // the views to label iso-wavelength lines and the cursor. NaN if outside.
  double waveAtRow(int fiber, double row) const;

  // Throws InputError naming the inconsistency if the sizes do not fit together.
  void validate() const;
};

// Pixel-integrated 1D Gauss-Hermite basis (EXTRACTION.md §2) for one axis:
// out[k * n + c], k = 0..deg, c = 0..n-1 with n = 2 hsize + 1, offset d in
// [-0.5, 0.5) and width sigma.
void gaussHermiteBasis(int deg, int hsize, double d, double sigma, double* out);

} // namespace spex
