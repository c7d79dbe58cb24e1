// Preproc files (EXTRACTION.md §1): IMAGE, IVAR, MASK of one shape, FIBERMAP passed
// through. Plain or gzip-compressed (FitsFile::openRead inflates a .gz once, in memory).
#include "preproc_io.h"

#include "../errors.h"
#include "fits_file.h"

#include <exception>
#include <thread>

namespace spex {

Image readPreproc(const std::string& path) {
  FitsFile f = FitsFile::openRead(path);
  Image img;
  img.path = path;

  // IMAGE is named in real files; a nameless primary image is accepted too, as
  // some tools write one.
  if (!f.tryMoveTo("IMAGE")) {
    f.moveToIndex(0);
    if (!f.currentIsImage() || f.imageShape().size() != 2)
      throw FitsError(path, "IMAGE", "", "no HDU named 'IMAGE' and no 2D primary image");
  }
  const std::vector<long> shape = f.imageShape();
  if (shape.size() != 2) (void)f.readImage2D<double>(); // throws, naming the shape
  const int ny = int(shape[0]), nx = int(shape[1]);
  if (ny < 1 || nx < 1) f.fail("NAXIS", "IMAGE is empty");

  // IVAR and MASK are read on their own threads, each through its own handle
  // (CFITSIO is built reentrant; read-only handles share nothing), while this one reads
  // IMAGE: half the wall time of a 4k x 4k open on two cores. A gzip file was inflated
  // once by openRead; the other handles read the same bytes in memory. Errors are
  // reported in HDU order, as a serial read would.
  auto readImage = [&](FitsFile& g) {
    img.pix = g.readImage2D<double>(ny, nx);
    img.header = g.readHeader();
  };
  auto readIvar = [&](FitsFile& g) {
    g.moveTo("IVAR");
    img.ivar = g.readImage2D<double>(ny, nx);
  };
  // MASK may be stored as any BITPIX (some tools write float masks); values are
  // converted to int32.
  auto readMask = [&](FitsFile& g) {
    g.moveTo("MASK");
    img.mask = g.readImage2D<int32_t>(ny, nx);
  };
  {
    FitsFile handles[2] = {f.reopen(), f.reopen()};
    std::exception_ptr errors[3];
    auto onOwnHandle = [&errors](auto read, FitsFile& g, int slot) {
      return std::thread([&errors, &g, read, slot] {
        try {
          read(g);
        } catch (...) {
          errors[slot] = std::current_exception();
        }
      });
    };
    std::thread tIvar = onOwnHandle(readIvar, handles[0], 1), tMask = onOwnHandle(readMask, handles[1], 2);
    try {
      readImage(f);
    } catch (...) {
      errors[0] = std::current_exception();
    }
    tIvar.join();
    tMask.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
  }
  img.ny = ny;
  img.nx = nx;

  if (f.tryMoveTo("FIBERMAP")) {
    if (!f.currentIsTable()) f.fail("", "FIBERMAP is an image, expected a table");
    img.fibermap.sourceFile = path;
    img.fibermap.fiber = f.readColumnInt("FIBER");
    img.fibermap.header = f.readHeader();
    img.fibermap.hduBytes = f.rawHdu();
  }

  // EXTRACTION.md §1: IVAR = 0 wherever MASK has an extraction bit; NaN/Inf pixels
  // and negative ivar are masked too (counted, not fatal).
  img.sanitize();
  return img;
}

void checkFibermapCovers(const FiberMap& fm, int fiberMin, int nFiber) {
  if (fm.sourceFile.empty()) return;
  const long need = long(fiberMin) + nFiber;
  if (long(fm.fiber.size()) < need)
    throw FitsError(fm.sourceFile, "FIBERMAP", "NAXIS2",
                    "FIBERMAP has " + std::to_string(fm.fiber.size()) + " rows, but fibers " +
                        std::to_string(fiberMin) + ".." + std::to_string(need - 1) +
                        " are extracted and need rows " + std::to_string(fiberMin) + ".." +
                        std::to_string(need - 1) + " (rows are selected by index, as -s/-n)");
}

void writePreproc(const std::string& path, const Image& image, const FiberMapTable& fm) {
  const auto same = [&](int r, int c) { return r == image.ny && c == image.nx; };
  if (!same(image.pix.rows, image.pix.cols) || !same(image.ivar.rows, image.ivar.cols) ||
      !same(image.mask.rows, image.mask.cols))
    throw InputError("writePreproc: IMAGE, IVAR and MASK must all be " + std::to_string(image.ny) +
                     " x " + std::to_string(image.nx));
  const std::size_t n = fm.rows();
  if (fm.targetid.size() != n || fm.objtype.size() != n || fm.fiberstatus.size() != n ||
      fm.targetRa.size() != n || fm.targetDec.size() != n)
    throw InputError("writePreproc: FIBERMAP columns have different lengths");

  AtomicOutput out(path);
  FitsFile& f = out.file();
  f.writeImage("IMAGE", FitsPixel::Float32, image.pix);
  f.writeHeader(image.header);
  f.writeImage("IVAR", FitsPixel::Float32, image.ivar);
  f.writeImage("MASK", FitsPixel::Int32, image.mask);

  std::size_t width = 3;
  for (const auto& s : fm.objtype) width = std::max(width, s.size());
  f.createTable("FIBERMAP",
                {{"FIBER", "J", "", {}},
                 {"TARGETID", "K", "", {}},
                 {"OBJTYPE", std::to_string(width) + "A", "", {}},
                 {"FIBERSTATUS", "J", "", {}},
                 {"TARGET_RA", "D", "deg", {}},
                 {"TARGET_DEC", "D", "deg", {}}},
                long(n));
  f.writeColumn("FIBER", fm.fiber);
  f.writeColumn("TARGETID", fm.targetid);
  f.writeColumn("OBJTYPE", fm.objtype);
  f.writeColumn("FIBERSTATUS", fm.fiberstatus);
  f.writeColumn("TARGET_RA", fm.targetRa);
  f.writeColumn("TARGET_DEC", fm.targetDec);
  out.commit();
}

} // namespace spex
