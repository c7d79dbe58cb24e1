// DESI frame files (EXTRACTION.md §5), model images and simulation truth files.
#pragma once

#include "../array.h"
#include "../extract/engine.h"
#include "../image.h"

#include <string>

namespace spex {

// Provenance written into the frame header.
struct FrameMeta {
  std::string inputImage; // IN_IMG
  std::string inputPsf;   // IN_PSF
  std::string camera;     // CAMERA, else from the image header
};

// Writes FLUX (primary, BUNIT electron/Angstrom, the image header plus WAVEMIN,
// WAVEMAX, WAVESTEP, SPECMIN, SPECMAX, NSPEC and the extraction parameters), IVAR,
// MASK (uint32), WAVELENGTH (float64), RESOLUTION, FIBERMAP (rows of the extracted
// fibers, copied from image.fibermap.sourceFile when there is one), CHI2PIX.
// Atomic: writes path + ".tmp-XXXX" and renames; on any error nothing is left.
void writeFrame(const std::string& path, const ExtractionResult& result, const Image& image,
                const FrameMeta& meta);

// Reads a frame written by SpexLab or by desispec/gpu_specter into a result.
// fiberMin comes from SPECMIN, else the smallest FIBERMAP FIBER, else 0; the wave grid
// from WAVELENGTH (must be uniform; WAVESTEP/WAVEMAX refine it when consistent);
// ndiag from RESOLUTION; MASK of any integer type; CHI2PIX zeros when absent;
// params/psferr/engine from SpexLab's keys when present. `covered` is all 1;
// pixmaskFraction and deconvolved are not stored in frames and stay empty.
ExtractionResult readFrame(const std::string& path);

// One CCD-sized image HDU with the image header. Atomic.
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
