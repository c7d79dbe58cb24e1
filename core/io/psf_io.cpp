// Reading and writing Gauss-Hermite PSF files, layout of EXTRACTION.md §1:
// XTRACE (primary image [nfiber, ntrace] + WAVEMIN/WAVEMAX/FIBERMIN/FIBERMAX),
// YTRACE (same), PSF (binary table, one row per parameter: PARAM, COEFF
// [nfiber, ncoeff] with TDIM). Nothing here assumes a degree, size or domain.
#include "psf_io.h"

#include "../errors.h"
#include "fits_file.h"

#include <algorithm>
#include <cmath>
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
  if (psf.ghdegX > 40 || psf.ghdegY > 40) f.fail("GHDEGX", "Gauss-Hermite degree above 40");
  if (psf.hsizeX > 1000 || psf.hsizeY > 1000) f.fail("HSIZEX", "spot half-size above 1000");

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
  return psf;
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
