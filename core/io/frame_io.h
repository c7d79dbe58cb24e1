// DESI frame files (EXTRACTION.md §5), model images and simulation truth files.
#pragma once

#include "../array.h"
#include "../extract/engine.h"
#include "../image.h"

#include <string>


namespace spex {

class FitsFile;

// What the frame header says about where the frame came from (docs/desi.md).
class ProfileRecorder;

struct FrameMeta {
  std::string inputImage; // IN_IMG, shortened as desispec does (shortenFilename)
  std::string inputPsf;   // IN_PSF, shortened; its PSF HDU's IN_PSF becomes ORIG_PSF
  std::string camera;     // CAMERA, else from the image header
  std::string origPsf;    // ORIG_PSF; empty: read from inputPsf's PSF HDU when it has one
  // Barycentric factor 1 + v/c the extraction grid was divided by. When != 1: HELIOCOR
  // is written and WAVELENGTH, WAVEMIN, WAVEMAX, WAVESTEP give the requested grid,
  // extraction grid x heliocor (as desispec's --barycentric-correction).
  double heliocor = 1.0;
  bool scores = true;     // SCORES HDU (desispec's RAW scores); false: --no-scores
  // Where writeFrame records its steps (converting and writing the HDUs, the checksums,
  // the sync), on the calling thread's lane; none when null.
  ProfileRecorder* profile = nullptr;
};

// Writes FLUX (primary, BUNIT electron/Angstrom, the image header plus desispec's
// keywords: HELIOCOR, NSPEC, WAVEMIN, WAVEMAX, WAVESTEP, SPEXLAB, IN_PSF, IN_IMG,
// DEPNAMnn/DEPVERnn, ORIG_PSF, FIBERMIN; then SpexLab's SPECMIN, SPECMAX, NWAVE, ENGINE
// and the extraction parameters), IVAR, MASK (uint32), WAVELENGTH (float64),
// RESOLUTION, FIBERMAP (rows fiberMin .. fiberMin + nfiber - 1 of the input FIBERMAP,
// copied column for column, as desispec's fibermap[specmin:specmin+nspec]), CHI2PIX,
// SCORES (unless meta.scores is false); CHECKSUM/DATASUM on every HDU.
// Throws InputError when the FIBERMAP has too few rows. Atomic: writes
// path + ".tmp-XXXX" and renames; on any error nothing is left.
void writeFrame(const std::string& path, const ExtractionResult& result, const Image& image,
                const FrameMeta& meta);

// The primary-header keywords of a frame (everything writeFrame adds to the image
// header, see above) written into the current HDU; writeModel uses it too.
void writeFrameKeywords(FitsFile& f, const ExtractionResult& result, const Image& image,
                        const FrameMeta& meta);

// Reads a frame written by SpexLab or by desispec/gpu_specter into a result.
// fibers are the FIBERMAP's FIBER column (when it has one row per spectrum); fiberMin,
// the first spectrum's index within its petal's PSF, comes from SPECMIN, else from
// FIBERMIN (else the smallest FIBER) less 500 x the petal (CAMERA digit, SPECGRPH,
// PETAL; without any, FIBER mod 500), else 0; heliocor from HELIOCOR (1 if absent;
// wave is then the requested grid as written, not the extraction grid); the wave grid
// from WAVELENGTH (must be uniform; WAVESTEP/WAVEMAX refine it when consistent);
// ndiag from RESOLUTION; MASK of any integer type; CHI2PIX zeros when absent;
// params/psferr/engine from SpexLab's keys when present. `covered` is all 1;
// pixmaskFraction and deconvolved are not stored in frames and stay empty.
ExtractionResult readFrame(const std::string& path);

// The model image as desispec writes it beside a frame (-m): one CCD-sized float32
// image, primary HDU named IMAGE, BUNIT electron, the image header plus the frame's
// keywords (writeFrameKeywords), CHECKSUM/DATASUM. Its content is SpexLab's own (A f
// over each patch's core bins, EXTRACTION.md §4.9), not desispec's. Atomic.
void writeModel(const std::string& path, const Array2D<double>& model, const Image& image,
                const ExtractionResult& result, const FrameMeta& meta);
// Image header only (no frame keywords): for callers without a result.
void writeModel(const std::string& path, const Array2D<double>& model, const Image& image);
Array2D<double> readModel(const std::string& path);

// Truth of a simulation: PHOT [nfiber, nwave] photons per bin (primary or HDU "PHOT"),
// WAVELENGTH (HDU 2, float64), header FIBERMIN. Atomic.
struct Truth {
  int fiberMin = 0;
  std::vector<double> wave;
  Array2D<double> phot;
};
void writeTruth(const std::string& path, const Truth& truth);
Truth readTruth(const std::string& path);

} // namespace spex
