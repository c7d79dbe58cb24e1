// Writes the seed corpus of the fuzz targets: small valid files of each kind, made by
// the project's own writers (a 5-fiber synthetic PSF, a 12 x 16 preproc, a frame of 3
// fibers x 10 wavelengths), each also gzip-compressed. Usage: make_seeds DIR.
#include "core/extract/engine.h"
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "core/sim/simulator.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <zlib.h>

namespace fs = std::filesystem;
using namespace spex;

namespace {

void gzipCopy(const std::string& src, const std::string& dst) {
  std::ifstream in(src, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  gzFile g = gzopen(dst.c_str(), "wb");
  gzwrite(g, bytes.data(), unsigned(bytes.size()));
  gzclose(g);
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  for (const char* sub : {"psf", "preproc", "frame"}) fs::create_directories(dir / sub);

  SyntheticPsfOptions po;
  po.nfiber = 5;
  po.bundlesize = 5;
  po.npixX = 200;
  po.npixY = 200;
  po.waveMin = 6000;
  po.waveMax = 6100;
  po.legdeg = 1;
  po.ghdeg = 2;
  po.hsizeX = 4;
  po.hsizeY = 3;
  const GaussHermitePsf psf = makeSyntheticPsf(po);
  writePsf((dir / "psf" / "psf.fits").string(), psf);

  Image img;
  img.ny = 12;
  img.nx = 16;
  img.pix = Array2D<double>(12, 16, 10.0);
  img.ivar = Array2D<double>(12, 16, 0.5);
  img.mask = Array2D<int32_t>(12, 16, 0);
  img.mask(3, 4) = 1;
  img.header.set("CAMERA", "'r0      '", "camera");
  FiberMapTable fm;
  for (int i = 0; i < 3; ++i) {
    fm.fiber.push_back(i);
    fm.targetid.push_back(1000 + i);
    fm.objtype.push_back(i ? "TGT" : "SKY");
    fm.fiberstatus.push_back(0);
    fm.targetRa.push_back(150.0 + i);
    fm.targetDec.push_back(2.0);
  }
  writePreproc((dir / "preproc" / "preproc.fits").string(), img, fm);

  ExtractionResult r;
  r.engine = "cpu";
  r.nfiber = 3;
  r.nwave = 10;
  r.ndiag = 1;
  r.wave = WaveGrid::fromRange(6000, 6007.2, 0.8);
  r.flux = Array2D<double>(3, 10, 1.0);
  r.ivar = Array2D<double>(3, 10, 2.0);
  r.mask = Array2D<uint32_t>(3, 10, 0);
  r.chi2pix = Array2D<double>(3, 10, 1.0);
  r.resolution = Array3D<double>(3, 3, 10, 0.0);
  for (int f = 0; f < 3; ++f)
    for (int w = 0; w < 10; ++w) r.resolution(f, 1, w) = 1.0;
  writeFrame((dir / "frame" / "frame.fits").string(), r, img, FrameMeta{});

  for (const char* sub : {"psf", "preproc", "frame"}) {
    const fs::path f = dir / sub / (std::string(sub) + ".fits");
    gzipCopy(f.string(), (dir / sub / (std::string(sub) + ".fits.gz")).string());
  }
  std::printf("seeds written to %s\n", dir.c_str());
  return 0;
}
