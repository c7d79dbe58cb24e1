// Reading and writing Gauss-Hermite PSF files, layout of EXTRACTION.md §1:
// XTRACE (primary image [nfiber, ntrace] + WAVEMIN/WAVEMAX/FIBERMIN/FIBERMAX),
// YTRACE (same), PSF (binary table, one row per parameter: PARAM, COEFF
// [nfiber, ncoeff] with TDIM). Nothing here assumes a degree, size or domain.
#include "psf_io.h"

#include "../errors.h"
#include "fits_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace spex {

namespace {

const char* kPsfType = "GAUSS-HERMITE";

std::string ghName(int i, int j) {
  return "GH-" + std::to_string(i) + "-" + std::to_string(j);
}

void checkPsfType(FitsFile& f) {
  if (auto t = f.readStringOpt("PSFTYPE"); t && *t != kPsfType)
    f.fail("PSFTYPE", "PSF type is '" + *t + "', only " + kPsfType + " is supported");
}

// Reads one trace HDU (XTRACE or YTRACE): the coefficient image and its domain.
LegendreSet readTrace(FitsFile& f, const std::string& name, int& fiberMin) {
  f.moveTo(name);
  checkPsfType(f);
  LegendreSet t;
  t.coeff = f.readImage2D<double>();
  if (t.coeff.rows < 1 || t.coeff.cols < 1)
    f.fail("NAXIS", "trace coefficient image is empty (" + std::to_string(t.coeff.rows) + " x " +
                        std::to_string(t.coeff.cols) + ")");
  t.wavemin = f.readDouble("WAVEMIN");
  t.wavemax = f.readDouble("WAVEMAX");
  if (!(t.wavemin < t.wavemax))
    f.fail("WAVEMAX", "WAVEMIN (" + std::to_string(t.wavemin) + ") must be below WAVEMAX (" +
                          std::to_string(t.wavemax) + ")");
  fiberMin = f.readIntOpt("FIBERMIN", 0).value_or(0);
  if (auto fmax = f.readIntOpt("FIBERMAX", 0); fmax && *fmax - fiberMin + 1 != t.coeff.rows)
    f.fail("FIBERMAX", "FIBERMIN..FIBERMAX (" + std::to_string(fiberMin) + ".." +
                           std::to_string(*fmax) + ") does not match the " +
                           std::to_string(t.coeff.rows) + " rows of the image");
  for (double c : t.coeff.data)
    if (!std::isfinite(c)) f.fail("", "trace coefficients contain NaN or Inf");
  return t;
}

// Physical ranges, checked at every fiber and at kNodes wavelengths spanning the
// PSF's domain (ends included), so no extraction runs on a PSF that makes zero, huge or
// needle-thin spots or puts traces far off the CCD (docs/reliability.md "PSF ranges").
constexpr int kNodes = 65;

void checkPhysicalRanges(const GaussHermitePsf& psf, const std::string& path) {
  const double w0 = psf.waveMin(), w1 = psf.waveMax();
  auto node = [&](int k) { return w0 + (w1 - w0) * k / (kNodes - 1); };
  auto where = [&](int fiber, double w) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "fiber %d at %.1f A", psf.fiberMin + fiber, w);
    return std::string(buf);
  };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return std::string(buf);
  };
  // Widths: a tenth of a pixel up to the spot half-size (beyond it most of the light
  // falls outside the 2 HSIZE + 1 stamp the PSF was fitted in).
  auto checkSigma = [&](const LegendreSet& s, const char* name, int hsize, const char* hkey) {
    for (int fb = 0; fb < psf.nfiber; ++fb)
      for (int k = 0; k < kNodes; ++k) {
        const double w = node(k), v = s.eval(fb, w);
        if (!(v >= 0.1 && v <= hsize))
          throw FitsError(path, "PSF", name,
                          std::string(name) + " is " + num(v) + " px at " + where(fb, w) +
                              "; widths must lie in 0.1.." + std::to_string(hsize) + " px (" +
                              hkey + ")");
      }
  };
  checkSigma(psf.ghSigX, "GHSIGX", psf.hsizeX, "HSIZEX");
  checkSigma(psf.ghSigY, "GHSIGY", psf.hsizeY, "HSIZEY");
  // The Gaussian core: GH-0-0 > 0 (an all-zero Gauss-Hermite row makes an empty spot).
  const LegendreSet& core = psf.ghCoeff(0, 0);
  for (int fb = 0; fb < psf.nfiber; ++fb)
    for (int k = 0; k < kNodes; ++k) {
      const double w = node(k), v = core.eval(fb, w);
      if (!(v > 0))
        throw FitsError(path, "PSF", "GH-0-0",
                        "GH-0-0 (the Gaussian core) is " + num(v) + " at " + where(fb, w) +
                            ": the spot would be empty or negative");
    }
  // Traces within a few CCD sizes of the CCD (real traces run a few hundred pixels
  // past the edges); beyond that the coefficients are not a trace, and pixel indices
  // computed from them would not fit an int.
  auto checkTrace = [&](const LegendreSet& t, const char* hdu, int npix, const char* axis) {
    const double lo = -3.0 * npix, hi = 4.0 * npix;
    for (int fb = 0; fb < psf.nfiber; ++fb)
      for (int k = 0; k < kNodes; ++k) {
        const double w = t.wavemin + (t.wavemax - t.wavemin) * k / (kNodes - 1);
        const double v = t.eval(fb, w);
        if (!(v >= lo && v <= hi))
          throw FitsError(path, hdu, "",
                          std::string(axis) + " trace is at pixel " + num(v) + " for " +
                              where(fb, w) + ", more than three CCD sizes (" +
                              std::to_string(npix) + " px) off the CCD");
      }
  };
  checkTrace(psf.xTrace, "XTRACE", psf.npixX, "x");
  checkTrace(psf.yTrace, "YTRACE", psf.npixY, "y");
}

} // namespace

GaussHermitePsf readPsf(const std::string& path) {
  FitsFile f = FitsFile::openRead(path);
  GaussHermitePsf psf;
  psf.path = path;

  int fiberMinX = 0, fiberMinY = 0;
  psf.xTrace = readTrace(f, "XTRACE", fiberMinX);
  psf.yTrace = readTrace(f, "YTRACE", fiberMinY);
  psf.nfiber = psf.xTrace.coeff.rows;
  psf.fiberMin = fiberMinX;
  if (psf.yTrace.coeff.rows != psf.nfiber)
    f.fail("NAXIS2", "YTRACE has " + std::to_string(psf.yTrace.coeff.rows) +
                         " fibers but XTRACE has " + std::to_string(psf.nfiber));
  if (fiberMinY != fiberMinX)
    f.fail("FIBERMIN", "YTRACE FIBERMIN " + std::to_string(fiberMinY) + " differs from XTRACE's " +
                           std::to_string(fiberMinX));

  // ---- PSF table: header keys first, then one row per parameter.
  f.moveTo("PSF");
  if (!f.currentIsTable()) f.fail("", "PSF HDU is an image, expected a binary table");
  checkPsfType(f);
  // CAMERA is "'r0      '" in specex files (quotes inside the string): keep the name.
  if (auto cam = f.readStringOpt("CAMERA")) {
    for (char ch : *cam)
      if (ch != '\'' && ch != ' ') psf.camera += ch;
  }
  psf.inPsf = f.readStringOpt("IN_PSF").value_or("");
  const double wmin = f.readDouble("WAVEMIN");
  const double wmax = f.readDouble("WAVEMAX");
  if (!(wmin < wmax))
    f.fail("WAVEMAX", "WAVEMIN (" + std::to_string(wmin) + ") must be below WAVEMAX (" +
                          std::to_string(wmax) + ")");
  psf.legdeg = f.readInt("LEGDEG", 0);
  psf.ghdegX = f.readInt("GHDEGX", 0);
  psf.ghdegY = f.readInt("GHDEGY", 0);
  psf.hsizeX = f.readInt("HSIZEX", 1);
  psf.hsizeY = f.readInt("HSIZEY", 1);
  psf.npixX = f.readInt("NPIX_X", 1);
  psf.npixY = f.readInt("NPIX_Y", 1);
  // PSFERR is optional (EXTRACTION.md §1); the fit's PSFERROR key is not the same
  // thing (it is the error assumed while fitting, often 0) and is not used.
  psf.psfErr = f.readDoubleOpt("PSFERR").value_or(0.01);
  if (psf.psfErr < 0) f.fail("PSFERR", "PSFERR must be >= 0");
  // The limits GaussHermitePsf::validate and the spot code hold to, each key by name.
  if (psf.ghdegX > 14) f.fail("GHDEGX", "Gauss-Hermite degree " + std::to_string(psf.ghdegX) + " above 14");
  if (psf.ghdegY > 14) f.fail("GHDEGY", "Gauss-Hermite degree " + std::to_string(psf.ghdegY) + " above 14");
  if (psf.hsizeX > 30) f.fail("HSIZEX", "spot half-size " + std::to_string(psf.hsizeX) + " above 30");
  if (psf.hsizeY > 30) f.fail("HSIZEY", "spot half-size " + std::to_string(psf.hsizeY) + " above 30");
  if (psf.legdeg > 100) f.fail("LEGDEG", "Legendre degree " + std::to_string(psf.legdeg) + " above 100");

  const int ncoeff = psf.legdeg + 1;
  const long nrows = f.numRows();
  if (nrows < 1) f.fail("NAXIS2", "PSF table has no rows");
  const std::vector<std::string> names = f.readColumnString("PARAM");
  // Check COEFF's declared cell shape once so a wrong TDIM is reported as such.
  {
    std::vector<long> shape = f.columnCellShape("COEFF");
    if (shape.size() == 1) shape.insert(shape.begin(), 1L);
    if (shape.size() != 2 || shape[0] != psf.nfiber || shape[1] != ncoeff) {
      std::string s;
      for (std::size_t i = 0; i < shape.size(); ++i)
        s += (i ? " x " : "") + std::to_string(shape[i]);
      f.fail("COEFF", "cells are " + s + ", expected [nfiber, LEGDEG+1] = " +
                          std::to_string(psf.nfiber) + " x " + std::to_string(ncoeff) +
                          " (nfiber from XTRACE, LEGDEG " + std::to_string(psf.legdeg) + ")");
    }
  }

  std::map<std::string, LegendreSet> params;
  for (long r = 0; r < nrows; ++r) {
    const std::string& name = names[std::size_t(r)];
    if (name.empty()) f.fail("PARAM", "row " + std::to_string(r) + " has an empty PARAM name");
    if (params.count(name)) f.fail("PARAM", "parameter '" + name + "' appears twice");
    LegendreSet s;
    s.wavemin = wmin;
    s.wavemax = wmax;
    s.coeff = f.readCellDouble("COEFF", r, psf.nfiber, ncoeff);
    for (double c : s.coeff.data)
      if (!std::isfinite(c))
        f.fail("COEFF", "parameter '" + name + "' has NaN or Inf coefficients");
    params.emplace(name, std::move(s));
  }

  auto take = [&](const std::string& name) {
    auto it = params.find(name);
    if (it == params.end()) f.fail("PARAM", "required parameter '" + name + "' is missing");
    LegendreSet s = std::move(it->second);
    params.erase(it);
    return s;
  };
  psf.ghSigX = take("GHSIGX");
  psf.ghSigY = take("GHSIGY");
  psf.gh.resize(std::size_t(psf.ghdegX + 1) * (psf.ghdegY + 1));
  for (int i = 0; i <= psf.ghdegX; ++i)
    for (int j = 0; j <= psf.ghdegY; ++j)
      psf.gh[std::size_t(i) * (psf.ghdegY + 1) + j] = take(ghName(i, j));
  for (auto& [name, s] : params) {
    // A GH term beyond the declared degrees means GHDEGX/GHDEGY are wrong.
    if (name.rfind("GH-", 0) == 0)
      f.fail("PARAM", "parameter '" + name + "' lies beyond GHDEGX " + std::to_string(psf.ghdegX) +
                          " / GHDEGY " + std::to_string(psf.ghdegY));
    psf.otherParams.emplace(name, std::move(s));
  }

  try {
    psf.validate();
  } catch (const SpexError& e) {
    throw FitsError(path, "", "", std::string("inconsistent PSF: ") + e.what());
  }
  checkPhysicalRanges(psf, path);
  return psf;
}

void checkPsfPhysicalRanges(const GaussHermitePsf& psf, const std::string& source) {
  checkPhysicalRanges(psf, source);
}

namespace {

void writeTrace(FitsFile& f, const std::string& name, const LegendreSet& t,
                const GaussHermitePsf& psf) {
  f.writeImage(name, FitsPixel::Float64, t.coeff);
  f.writeLong("FIBERMIN", psf.fiberMin);
  f.writeLong("FIBERMAX", psf.fiberMin + psf.nfiber - 1);
  f.writeDouble("WAVEMIN", t.wavemin);
  f.writeDouble("WAVEMAX", t.wavemax);
  f.writeString("PSFTYPE", kPsfType);
  f.writeLong("PSFVER", 3);
}

} // namespace

void writePsf(const std::string& path, const GaussHermitePsf& psf) {
  // The file format has one domain and one LEGDEG for the whole PSF table: check
  // the parameters share them before writing anything.
  std::vector<std::pair<std::string, const LegendreSet*>> rows;
  rows.push_back({"GHSIGX", &psf.ghSigX});
  rows.push_back({"GHSIGY", &psf.ghSigY});
  if (psf.gh.size() != std::size_t(psf.ghdegX + 1) * (psf.ghdegY + 1))
    throw InputError("writePsf: " + std::to_string(psf.gh.size()) + " GH terms for degrees " +
                     std::to_string(psf.ghdegX) + " x " + std::to_string(psf.ghdegY));
  // Row order of the real files: GH-i-j with i fastest.
  for (int j = 0; j <= psf.ghdegY; ++j)
    for (int i = 0; i <= psf.ghdegX; ++i) rows.push_back({ghName(i, j), &psf.ghCoeff(i, j)});
  for (const auto& [name, s] : psf.otherParams) rows.push_back({name, &s});
  const int ncoeff = psf.legdeg + 1;
  for (const auto& [name, s] : rows) {
    if (name.size() > 8)
      throw InputError("writePsf: parameter name '" + name + "' is over 8 characters");
    if (s->coeff.rows != psf.nfiber || s->coeff.cols != ncoeff)
      throw InputError("writePsf: parameter " + name + " has " + std::to_string(s->coeff.rows) +
                       " x " + std::to_string(s->coeff.cols) + " coefficients, expected " +
                       std::to_string(psf.nfiber) + " x " + std::to_string(ncoeff));
    if (s->wavemin != psf.ghSigX.wavemin || s->wavemax != psf.ghSigX.wavemax)
      throw InputError("writePsf: parameter " + name + " has a different wavelength domain");
  }
  if (psf.xTrace.coeff.rows != psf.nfiber || psf.yTrace.coeff.rows != psf.nfiber)
    throw InputError("writePsf: trace coefficient rows differ from nfiber");

  AtomicOutput out(path);
  FitsFile& f = out.file();
  writeTrace(f, "XTRACE", psf.xTrace, psf);
  writeTrace(f, "YTRACE", psf.yTrace, psf);

  f.createTable("PSF",
                {{"PARAM", "8A", "", {}},
                 {"COEFF", std::to_string(psf.nfiber * ncoeff) + "D", "", {psf.nfiber, ncoeff}},
                 {"LEGDEGX", "J", "", {}},
                 {"LEGDEGW", "J", "", {}}},
                long(rows.size()));
  f.writeString("PSFTYPE", kPsfType);
  f.writeLong("PSFVER", 3);
  f.writeLong("NPIX_X", psf.npixX, "number of columns in input CCD image");
  f.writeLong("NPIX_Y", psf.npixY, "number of rows in input CCD image");
  f.writeLong("HSIZEX", psf.hsizeX, "Half size of PSF in fit, NX=2*HSIZEX+1");
  f.writeLong("HSIZEY", psf.hsizeY, "Half size of PSF in fit, NY=2*HSIZEY+1");
  f.writeLong("FIBERMIN", psf.fiberMin, "first fiber (starting at 0)");
  f.writeLong("FIBERMAX", psf.fiberMin + psf.nfiber - 1, "last fiber (included)");
  f.writeLong("NPARAMS", long(rows.size()), "number of PSF parameters");
  f.writeLong("LEGDEG", psf.legdeg, "degree of Legendre pol.(wave) for parameters");
  f.writeLong("GHDEGX", psf.ghdegX, "degree of Hermite polynomial along CCD columns");
  f.writeLong("GHDEGY", psf.ghdegY, "degree of Hermite polynomial along CCD rows");
  f.writeDouble("WAVEMIN", psf.ghSigX.wavemin, "minimum wavelength (A) of the Legendre pol.");
  f.writeDouble("WAVEMAX", psf.ghSigX.wavemax, "maximum wavelength (A) of the Legendre pol.");
  f.writeDouble("PSFERR", psf.psfErr, "fractional PSF error used in chi2pix");
  if (!psf.camera.empty()) f.writeString("CAMERA", psf.camera, "camera ID");
  if (!psf.inPsf.empty()) f.writeString("IN_PSF", psf.inPsf, "input PSF");

  std::vector<std::string> names;
  for (const auto& r : rows) names.push_back(r.first);
  f.writeColumn("PARAM", names);
  for (std::size_t r = 0; r < rows.size(); ++r)
    f.writeCell("COEFF", long(r), rows[r].second->coeff.data.data(),
                long(rows[r].second->coeff.size()));
  f.writeColumn("LEGDEGX", std::vector<int32_t>(rows.size(), psf.legdeg)); // as real files
  f.writeColumn("LEGDEGW", std::vector<int32_t>(rows.size(), psf.legdeg));
  out.commit();
}

} // namespace spex
