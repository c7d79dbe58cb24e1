// Frame files in desispec's layout (EXTRACTION.md §5, desispec.io.read_frame):
// FLUX (primary), IVAR, MASK, WAVELENGTH, RESOLUTION, FIBERMAP, CHI2PIX; plus model
// images and simulation truth files.
#include "frame_io.h"

#include "../errors.h"
#include "../extract/scores.h"
#include "../profile/profile.h"
#include "fits_file.h"
#include "frame_header.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>
#include <limits>
#include <numeric>
#include <optional>

namespace spex {

namespace {

std::string dims(int a, int b) {
  return std::to_string(a) + " x " + std::to_string(b);
}

void checkShape(const char* what, int rows, int cols, int nfiber, int nwave) {
  if (rows != nfiber || cols != nwave)
    throw InputError(std::string("writeFrame: ") + what + " is " + dims(rows, cols) +
                     ", expected " + dims(nfiber, nwave));
}

// The extraction parameters in the frame header, 8-character keys.
void writeParams(FitsFile& f, const ExtractionResult& r) {
  const PatchParams& p = r.params;
  f.writeLong("BUNDLSIZ", p.bundlesize, "fibers per bundle");
  f.writeLong("NSUBBUND", p.nsubbundles, "sub-bundles per bundle");
  f.writeLong("NWAVSTEP", p.nwavestep, "wavelength bins per patch");
  f.writeLong("WAVEPAD", p.wavepad(), "bins of wavelength padding per side");
  f.writeDouble("WAVEPADF", p.wavepadFrac, "wavepad = 10 + int(10 * WAVEPADF)");
  f.writeDouble("PIXPADFR", p.pixpadFrac, "fraction of pixel padding kept");
  f.writeDouble("REGULARZ", p.regularize, "regularization");
  if (std::isfinite(r.psferr)) f.writeDouble("PSFERR", r.psferr, "fractional PSF error in chi2pix");
  f.writeString("DECORR", p.mode == Decorrelation::Noise ? "NOISE" : "SIGNAL",
                "decorrelation (SIGNAL: per fiber, NOISE: whole patch)");
}

void readParams(FitsFile& f, ExtractionResult& r) {
  PatchParams& p = r.params;
  p.bundlesize = f.readIntOpt("BUNDLSIZ", 1).value_or(p.bundlesize);
  p.nsubbundles = f.readIntOpt("NSUBBUND", 1).value_or(p.nsubbundles);
  p.nwavestep = f.readIntOpt("NWAVSTEP", 1).value_or(p.nwavestep);
  p.wavepadFrac = f.readDoubleOpt("WAVEPADF").value_or(p.wavepadFrac);
  p.pixpadFrac = f.readDoubleOpt("PIXPADFR").value_or(p.pixpadFrac);
  p.regularize = f.readDoubleOpt("REGULARZ").value_or(p.regularize);
  if (auto e = f.readDoubleOpt("PSFERR")) {
    r.psferr = *e;
    p.psferr = *e;
  }
  if (auto d = f.readStringOpt("DECORR")) {
    if (*d == "NOISE")
      p.mode = Decorrelation::Noise;
    else if (*d == "SIGNAL")
      p.mode = Decorrelation::Signal;
    else
      f.fail("DECORR", "unknown decorrelation '" + *d + "' (SIGNAL or NOISE)");
  }
}

// Keeps rows [r0, r1) of the current table, in their order (desispec's
// fibermap[specmin:specmin+nspec]).
void keepRows(FitsFile& f, long r0, long r1) {
  const long n = f.numRows();
  std::vector<long> drop;
  for (long i = 0; i < n; ++i)
    if (i < r0 || i >= r1) drop.push_back(i);
  if (!drop.empty()) f.deleteRows(drop);
}

// ORIG_PSF: desispec copies the IN_PSF of the input PSF's PSF HDU, when there is one.
std::string origPsfOf(const FrameMeta& meta) {
  if (!meta.origPsf.empty() || meta.inputPsf.empty()) return meta.origPsf;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(meta.inputPsf, ec)) return {};
  try {
    FitsFile psf = FitsFile::openRead(meta.inputPsf);
    if (!psf.tryMoveTo("PSF")) return {};
    return psf.readStringOpt("IN_PSF").value_or("");
  } catch (const SpexError&) {
    return {}; // a PSF we could extract with but cannot reopen: no ORIG_PSF, as desispec
  }
}

// A float32 image HDU of shape (slowest first) from doubles, written in pieces of
// whole rows of the slowest axis (~1.6 MB of float32 each, at least one row): the next
// piece is converted, and its data sum taken, on another thread while CFITSIO writes
// this one; no image-sized float copy (RESOLUTION: 51 MB for 500 fibers, ~1/3 of the
// write when made whole first). Same bytes and DATASUM as writeImage of the whole.
void writeFloatInPieces(FitsFile& f, const std::string& extname, const std::vector<long>& shape,
                        const double* data, std::size_t perRow) {
  std::size_t total = 1;
  for (long a : shape) total *= std::size_t(a);
  const std::size_t target = std::size_t(400) << 10; // values per piece, ~1.6 MB of float32
  const std::size_t rowsPerPiece = std::max<std::size_t>(1, target / std::max<std::size_t>(perRow, 1));
  const std::size_t perPiece = rowsPerPiece * perRow;
  const std::size_t pieces = (total + perPiece - 1) / perPiece;
  struct Piece {
    std::vector<float> v;
    FitsDataSum sum;
  };
  Piece buf[2];
  auto convert = [&](std::size_t k) {
    Piece& p = buf[k % 2];
    const std::size_t b = k * perPiece, e = std::min(total, b + perPiece);
    p.v.resize(e - b);
    for (std::size_t i = b; i < e; ++i) p.v[i - b] = static_cast<float>(data[i]);
    p.sum = FitsDataSum{};
    p.sum.addFloats(p.v.data(), static_cast<long long>(p.v.size()));
  };
  f.beginFloatImage(extname, shape);
  if (pieces > 0) convert(0);
  for (std::size_t k = 0; k < pieces; ++k) {
    std::future<void> next;
    if (k + 1 < pieces) next = std::async(std::launch::async, convert, k + 1);
    try {
      const Piece& p = buf[k % 2];
      f.writeImagePart(p.v.data(), static_cast<long long>(p.v.size()), p.sum);
    } catch (...) {
      if (next.valid()) next.wait(); // it uses buf
      throw;
    }
    if (next.valid()) next.get();
  }
  f.endImage();
}

} // namespace

void writeFrame(const std::string& path, const ExtractionResult& r, const Image& image,
                const FrameMeta& meta) {
  const int nf = r.nfiber, nw = r.nwave;
  if (nf < 1 || nw < 1) throw InputError("writeFrame: empty result (" + dims(nf, nw) + ")");
  if (r.wave.size() != nw)
    throw InputError("writeFrame: wavelength grid has " + std::to_string(r.wave.size()) +
                     " bins, result has " + std::to_string(nw));
  checkShape("FLUX", r.flux.rows, r.flux.cols, nf, nw);
  checkShape("IVAR", r.ivar.rows, r.ivar.cols, nf, nw);
  checkShape("MASK", r.mask.rows, r.mask.cols, nf, nw);
  if (!r.chi2pix.empty()) checkShape("CHI2PIX", r.chi2pix.rows, r.chi2pix.cols, nf, nw);
  const int nd = 2 * r.ndiag + 1;
  if (r.ndiag < 0 || r.resolution.n0 != nf || r.resolution.n1 != nd || r.resolution.n2 != nw)
    throw InputError("writeFrame: RESOLUTION is " + std::to_string(r.resolution.n0) + " x " +
                     std::to_string(r.resolution.n1) + " x " + std::to_string(r.resolution.n2) +
                     ", expected " + std::to_string(nf) + " x " + std::to_string(nd) + " x " +
                     std::to_string(nw));

  const std::vector<int32_t> fibers = fibersOf(image, r.fiberMin, nf); // throws on short FIBERMAP
  const WaveGrid requested = requestedGrid(r.wave, meta.heliocor);

  AtomicOutput out(path);
  FitsFile& f = out.file();
  // The SCORES (medians over each fiber's flux, ~20 % of a frame's write) are worked out
  // beside the image HDUs' conversion and writing.
  std::future<FrameScores> scores;
  if (meta.scores)
    scores = std::async(std::launch::async, [&r, requested] {
      // desispec's compute_and_append_frame_scores(frame, suffix="RAW") on the frame's
      // flux and ivar (per Angstrom, float64 as in memory) and the written grid.
      return computeRawScores(r.flux, r.ivar, arangeValues(requested), &r.mask);
    });

  std::optional<ScopedRange> step(std::in_place, meta.profile, "FLUX, IVAR, MASK");
  // FLUX: the input IMAGE header, then what this extraction adds (§5, docs/desi.md).
  writeFloatInPieces(f, "FLUX", {long(nf), long(nw)}, r.flux.data.data(), std::size_t(nw));
  f.writeHeader(image.header);
  f.writeString("BUNIT", "electron/Angstrom");
  writeFrameKeywords(f, r, image, meta);

  writeFloatInPieces(f, "IVAR", {long(nf), long(nw)}, r.ivar.data.data(), std::size_t(nw));
  f.writeString("BUNIT", "Angstrom2/electron2");
  f.writeImage("MASK", FitsPixel::UInt32, r.mask);
  out.startWriteback(); // the disk works on these while RESOLUTION is converted

  step.emplace(meta.profile, "WAVELENGTH, RESOLUTION");
  // The requested grid, as numpy's arange makes it (desispec writes that array).
  f.writeImage("WAVELENGTH", FitsPixel::Float64, arangeValues(requested));
  f.writeString("BUNIT", "Angstrom");

  // [nfiber, 2 ndiag + 1, nwave]: NAXIS1 = nwave, NAXIS2 = 2 ndiag + 1, NAXIS3 = nfiber.
  writeFloatInPieces(f, "RESOLUTION", {long(nf), long(nd), long(nw)}, r.resolution.data.data(),
                     std::size_t(nd) * nw);
  out.startWriteback();

  step.emplace(meta.profile, "FIBERMAP, CHI2PIX");
  // FIBERMAP: rows fiberMin .. fiberMin + nfiber - 1 of the input's, copied column for
  // column (on petal p they hold FIBER 500 p + fiberMin ..).
  if (!image.fibermap.hduBytes.empty()) {
    // Kept in memory at read time: the same bytes CFITSIO would copy from the file.
    FitsFile src = FitsFile::openHduCopy(image.fibermap.hduBytes, image.fibermap.sourceFile);
    f.copyHduFrom(src);
    keepRows(f, r.fiberMin, r.fiberMin + nf);
  } else if (!image.fibermap.sourceFile.empty()) {
    FitsFile src = FitsFile::openRead(image.fibermap.sourceFile);
    src.moveTo("FIBERMAP");
    f.copyHduFrom(src);
    keepRows(f, r.fiberMin, r.fiberMin + nf);
  } else {
    f.createTable("FIBERMAP", {{"FIBER", "J", "", {}}}, nf);
    f.writeColumn("FIBER", fibers);
  }

  if (r.chi2pix.empty())
    f.writeImage("CHI2PIX", FitsPixel::Float32, Array2D<float>(nf, nw, 0.0f));
  else
    writeFloatInPieces(f, "CHI2PIX", {long(nf), long(nw)}, r.chi2pix.data.data(), std::size_t(nw));

  step.emplace(meta.profile, "SCORES");
  if (meta.scores) {
    const FrameScores sc = scores.get();
    std::vector<FitsColumn> cols;
    for (const std::string& name : sc.names) cols.push_back({name, "D", "", {}});
    f.createTable("SCORES", cols, nf);
    for (std::size_t k = 0; k < sc.names.size(); ++k) {
      f.writeColumn(sc.names[k], sc.columns[k]);
      if (k < sc.comments.size() && !sc.comments[k].empty())
        f.writeString("TTYPE" + std::to_string(k + 1), sc.names[k], sc.comments[k]);
    }
  }

  step.emplace(meta.profile, "checksums");
  f.writeChecksums();
  step.emplace(meta.profile, "close and sync");
  out.commit();
}

void writeFrameKeywords(FitsFile& f, const ExtractionResult& r, const Image& image,
                        const FrameMeta& meta) {
  const int nf = r.nfiber;
  const std::vector<int32_t> fibers = fibersOf(image, r.fiberMin, nf);
  const WaveGrid requested = requestedGrid(r.wave, meta.heliocor);
  // desispec.scripts.extract, in its order: HELIOCOR (only when corrected), NSPEC,
  // WAVEMIN/WAVEMAX/WAVESTEP of the requested grid, the extraction code's version
  // (desispec: SPECTER), IN_PSF, IN_IMG, dependencies, ORIG_PSF; desispec.frame adds
  // FIBERMIN = min(FIBER).
  if (meta.heliocor != 1.0)
    f.writeDouble("HELIOCOR", meta.heliocor, "barycentric correction factor 1 + v/c");
  else
    f.deleteKey("HELIOCOR"); // an input header must not claim a correction not made
  f.writeLong("NSPEC", nf, "Number of spectra");
  f.writeDouble("WAVEMIN", requested.wmin, "First wavelength [Angstroms]");
  f.writeDouble("WAVEMAX", requested.wmax, "Last wavelength [Angstroms]");
  f.writeDouble("WAVESTEP", requested.dw, "Wavelength step size [Angstroms]");
  f.writeString("SPEXLAB", SPEXLAB_VERSION, "SpexLab extraction code version");
  if (!meta.inputPsf.empty())
    f.writeString("IN_PSF", shortenFilename(meta.inputPsf), "Input spectral PSF");
  if (!meta.inputImage.empty())
    f.writeString("IN_IMG", shortenFilename(meta.inputImage), "Input image");
  writeDependencies(f, spexlabDependencies());
  if (const std::string orig = origPsfOf(meta); !orig.empty()) f.writeString("ORIG_PSF", orig);
  f.writeLong("FIBERMIN", *std::min_element(fibers.begin(), fibers.end()), "first FIBER");
  // SpexLab's own: the spectrum range within the petal, the extraction grid's size, the
  // engine and the patch parameters (readFrame reads them back).
  f.writeLong("SPECMIN", r.fiberMin, "first spectrum (row of the petal's FIBERMAP)");
  f.writeLong("SPECMAX", r.fiberMin + nf - 1, "last spectrum (included)");
  f.writeLong("NWAVE", r.nwave, "number of wavelengths");
  if (!meta.camera.empty()) f.writeString("CAMERA", meta.camera, "camera");
  if (!r.engine.empty()) f.writeString("ENGINE", r.engine, "SpexLab extraction engine");
  writeParams(f, r);
}

ExtractionResult readFrame(const std::string& path) {
  FitsFile f = FitsFile::openRead(path);
  ExtractionResult r;
  r.engine = "file";

  if (!f.tryMoveTo("FLUX")) f.moveToIndex(0);
  r.flux = f.readImage2D<double>();
  r.nfiber = r.flux.rows;
  r.nwave = r.flux.cols;
  if (r.nfiber < 1 || r.nwave < 1) f.fail("NAXIS", "FLUX is empty");
  const std::optional<int> specmin = f.readIntOpt("SPECMIN", 0);
  if (auto n = f.readIntOpt("NSPEC"); n && *n != r.nfiber)
    f.fail("NSPEC",
           "NSPEC " + std::to_string(*n) + " but FLUX has " + std::to_string(r.nfiber) + " rows");
  const std::optional<double> waveStep = f.readDoubleOpt("WAVESTEP");
  const std::optional<double> waveMax = f.readDoubleOpt("WAVEMAX");
  const std::optional<int> fiberMinKey = f.readIntOpt("FIBERMIN", 0);
  const int petal = petalOf(f.readHeader());
  if (auto h = f.readDoubleOpt("HELIOCOR")) {
    if (!(*h > 0)) f.fail("HELIOCOR", "HELIOCOR must be positive, got " + std::to_string(*h));
    r.heliocor = *h;
  }
  if (auto e = f.readStringOpt("ENGINE")) r.engine = *e;
  readParams(f, r);

  f.moveTo("IVAR");
  r.ivar = f.readImage2D<double>(r.nfiber, r.nwave);
  // desispec writes uint32 (BZERO 2^31), gpu_specter int64: both read as uint32.
  f.moveTo("MASK");
  r.mask = f.readImage2D<uint32_t>(r.nfiber, r.nwave);

  if (!f.tryMoveTo("WAVELENGTH") && !f.tryMoveTo("WAVE"))
    throw FitsError(path, "WAVELENGTH", "", "no HDU named 'WAVELENGTH' (or 'WAVE') in the file");
  const std::vector<double> w = f.readImage1D(r.nwave);
  for (double x : w)
    if (!std::isfinite(x)) f.fail("", "wavelengths contain NaN or Inf");
  double dw = waveStep.value_or(0.8);
  if (r.nwave > 1) {
    const double fit = (w.back() - w.front()) / (r.nwave - 1);
    if (!(fit > 0)) f.fail("", "wavelengths are not increasing");
    // A step from WAVESTEP is exact; the fit from the end points can be 1 ulp off.
    if (!waveStep || std::abs(*waveStep - fit) > 1e-9 * fit) dw = fit;
    for (int i = 0; i < r.nwave; ++i)
      if (std::abs(w[std::size_t(i)] - (w.front() + i * dw)) > 1e-3 * dw)
        f.fail("", "wavelength grid is not uniform: bin " + std::to_string(i) + " is at " +
                       std::to_string(w[std::size_t(i)]) + ", expected " +
                       std::to_string(w.front() + i * dw) + " (step " + std::to_string(dw) + ")");
  }
  r.wave.wmin = w.front();
  r.wave.dw = dw;
  r.wave.n = r.nwave;
  r.wave.wmax = w.back();
  if (waveMax && *waveMax >= w.back() - 1e-6 * dw && *waveMax < w.back() + dw)
    r.wave.wmax = *waveMax;

  f.moveTo("RESOLUTION");
  r.resolution = f.readImage3D<double>(r.nfiber, -1, r.nwave);
  if (r.resolution.n1 % 2 != 1)
    f.fail("NAXIS2", "RESOLUTION has " + std::to_string(r.resolution.n1) +
                         " diagonals, expected an odd number (2 ndiag + 1)");
  r.ndiag = (r.resolution.n1 - 1) / 2;

  if (f.tryMoveTo("CHI2PIX"))
    r.chi2pix = f.readImage2D<double>(r.nfiber, r.nwave);
  else
    r.chi2pix = Array2D<double>(r.nfiber, r.nwave, 0.0);

  // FIBER numbers are 500 petal + spectrum index; fiberMin is the index (the PSF's
  // fiber), so desispec frames, which carry FIBERMIN but not SPECMIN, map back to it.
  std::optional<int> firstFiber = fiberMinKey;
  if (f.tryMoveTo("FIBERMAP")) {
    // Fewer rows than spectra cannot describe them (gpu_specter writes more: all 500).
    if (const long rows = f.numRows(); rows < r.nfiber)
      f.fail("NAXIS2", "FIBERMAP has " + std::to_string(rows) + " rows for the " +
                           std::to_string(r.nfiber) + " spectra of FLUX");
    const std::vector<int32_t> fiber = f.readColumnInt("FIBER");
    if (fiber.size() == std::size_t(r.nfiber)) r.fibers = fiber;
    if (!firstFiber && !fiber.empty()) firstFiber = *std::min_element(fiber.begin(), fiber.end());
  }
  if (specmin)
    r.fiberMin = *specmin;
  else if (firstFiber)
    r.fiberMin = petal >= 0 && *firstFiber >= kFibersPerPetal * petal
                     ? *firstFiber - kFibersPerPetal * petal
                     : *firstFiber % kFibersPerPetal;

  r.covered = Array2D<uint8_t>(r.nfiber, r.nwave, 1);
  return r;
}

namespace {

void writeModelHdu(AtomicOutput& out, const Array2D<double>& model, const Image& image) {
  FitsFile& f = out.file();
  // desispec: fits.writeto(model, header=frame.meta): one primary image whose header
  // is the preproc IMAGE header (EXTNAME IMAGE) plus the frame's keywords.
  writeFloatInPieces(f, "IMAGE", {long(model.rows), long(model.cols)}, model.data.data(), std::size_t(model.cols));
  out.startWriteback();
  f.writeHeader(image.header);
  f.writeString("BUNIT", "electron", "model of the CCD image, electrons per pixel");
}

} // namespace

void writeModel(const std::string& path, const Array2D<double>& model, const Image& image,
                const ExtractionResult& result, const FrameMeta& meta) {
  AtomicOutput out(path);
  writeModelHdu(out, model, image);
  writeFrameKeywords(out.file(), result, image, meta);
  out.file().writeChecksums();
  out.commit();
}

void writeModel(const std::string& path, const Array2D<double>& model, const Image& image) {
  AtomicOutput out(path);
  writeModelHdu(out, model, image);
  out.file().writeChecksums();
  out.commit();
}

Array2D<double> readModel(const std::string& path) {
  FitsFile f = FitsFile::openRead(path);
  if (!f.tryMoveTo("IMAGE") && !f.tryMoveTo("MODEL")) f.moveToIndex(0);
  return f.readImage2D<double>();
}

void writeTruth(const std::string& path, const Truth& truth) {
  if (truth.wave.size() != std::size_t(truth.phot.cols))
    throw InputError("writeTruth: " + std::to_string(truth.wave.size()) + " wavelengths for " +
                     std::to_string(truth.phot.cols) + " PHOT columns");
  AtomicOutput out(path);
  FitsFile& f = out.file();
  f.writeImage("PHOT", FitsPixel::Float64, truth.phot);
  f.writeString("BUNIT", "electron", "photons per wavelength bin");
  f.writeLong("FIBERMIN", truth.fiberMin, "fiber of the first row");
  f.writeImage("WAVELENGTH", FitsPixel::Float64, truth.wave);
  f.writeString("BUNIT", "Angstrom");
  out.commit();
}

Truth readTruth(const std::string& path) {
  FitsFile f = FitsFile::openRead(path);
  Truth t;
  if (!f.tryMoveTo("PHOT")) f.moveToIndex(0);
  t.phot = f.readImage2D<double>();
  t.fiberMin = f.readIntOpt("FIBERMIN", 0).value_or(0);
  if (!f.tryMoveTo("WAVELENGTH")) f.moveToIndex(1);
  t.wave = f.readImage1D(t.phot.cols);
  return t;
}

} // namespace spex
