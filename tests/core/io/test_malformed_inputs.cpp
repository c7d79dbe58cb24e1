// Malformed inputs, table-driven: each case makes a broken file in a temporary folder
// from the real shared files (edited with raw CFITSIO) and asserts that the reader
// throws a FitsError whose file, HDU and key name the fault (DESIGN.md "Errors").
#include "core/errors.h"
#include "core/io/fits_file.h"
#include "core/io/frame_io.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "io_test_util.h"
#include "test_data.h"

#include <QTemporaryDir>
#include <QTest>

#include <fstream>
#include <iterator>
#include <zlib.h>
#include <array>
#include <functional>

using namespace spex;
using iotest::Raw;

namespace {

enum class Reader { Psf, Preproc, Frame, Truth };

struct Case {
  std::string name;
  Reader reader;
  std::function<std::string()> make; // returns the path to read
  std::string hdu;                   // expected FitsError::hdu(); "" = none/any
  std::string key;                   // expected FitsError::key(); "" = not checked
  std::string says;                  // text the message must contain; "" = not checked
};

} // namespace

class TestMalformedInputs : public QObject {
  Q_OBJECT

private:
  QTemporaryDir m_tmp;
  std::string m_psf, m_preproc, m_preprocGz, m_frame, m_truth; // pristine inputs
  std::vector<Case> m_cases;
  int m_serial = 0;

  std::string fresh(const std::string& stem) {
    return m_tmp.path().toStdString() + "/" + std::to_string(++m_serial) + "-" + stem;
  }
  // A copy of `src` edited by `edit` (with the file open read-write).
  std::string edited(const std::string& src, const std::function<void(Raw&)>& edit) {
    const std::string p = fresh("case.fits");
    iotest::copyFits(src, p);
    Raw raw(p, READWRITE);
    edit(raw);
    return p;
  }
  std::string truncated(const std::string& src, std::uintmax_t size) {
    const std::string p = fresh("truncated.fits");
    std::filesystem::copy_file(src, p);
    std::filesystem::resize_file(p, size);
    return p;
  }

  // Overwrites, byte for byte, the `occurrence`-th header card of `key` in the file
  // with "KEY     = value": what CFITSIO's own writers refuse to make (over-long
  // structural values, claims the data do not back).
  static void patchCard(const std::string& path, const std::string& key, const std::string& value,
                        int occurrence = 0, std::string newKey = {}) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::string name = key;
    name.resize(8, ' ');
    for (std::size_t at = 0; at + 80 <= bytes.size(); at += 80) {
      if (bytes.compare(at, 10, name + "= ") != 0 || occurrence-- > 0) continue;
      if (!newKey.empty()) newKey.resize(8, ' ');
      std::string card = (newKey.empty() ? name : newKey) + "= " + value;
      card.resize(80, ' ');
      f.seekp(std::streamoff(at));
      f.write(card.data(), 80);
      return;
    }
    throw std::runtime_error("no card " + key + " in " + path);
  }
  std::string patched(const std::string& src, const std::string& key, const std::string& value,
                      int occurrence = 0) {
    const std::string p = fresh("patched.fits");
    std::filesystem::copy_file(src, p);
    patchCard(p, key, value, occurrence);
    return p;
  }
  // Sets the COEFF cell of PSF parameter `param` for one fiber (LEGDEG + 1 values).
  static void setCoeff(Raw& r, const std::string& param, int fiber, std::vector<double> c) {
    r.hdu("PSF");
    int status = 0, col = r.colnum("PARAM"), ccol = r.colnum("COEFF");
    long nrows = 0;
    fits_get_num_rows(r.f(), &nrows, &status);
    for (long row = 1; row <= nrows; ++row) {
      char buf[32] = {};
      char* ptr = buf;
      int anynul = 0;
      fits_read_col_str(r.f(), col, row, 1, 1, nullptr, &ptr, &anynul, &status);
      std::string name = buf;
      while (!name.empty() && name.back() == ' ') name.pop_back();
      if (name != param) continue;
      fits_write_col(r.f(), TDOUBLE, ccol, row, 1 + LONGLONG(fiber) * LONGLONG(c.size()),
                     LONGLONG(c.size()), c.data(), &status);
      if (status) throw std::runtime_error("cannot write COEFF of " + param);
      return;
    }
    throw std::runtime_error("no parameter " + param);
  }
  std::string gzipped(const std::string& src) {
    const std::string p = fresh("case.fits.gz");
    std::ifstream in(src, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    gzFile g = gzopen(p.c_str(), "wb");
    gzwrite(g, bytes.data(), unsigned(bytes.size()));
    gzclose(g);
    return p;
  }

  void add(std::string name, Reader r, std::function<std::string()> make, std::string hdu,
           std::string key = {}, std::string says = {}) {
    m_cases.push_back(
        {std::move(name), r, std::move(make), std::move(hdu), std::move(key), std::move(says)});
  }

  void buildCases() {
    using R = Reader;
    // ---- any file ----
    add(
        "missing file", R::Psf, [this] { return fresh("nope.fits"); }, "", "", "does not exist");
    add(
        "empty file", R::Psf,
        [this] {
          auto p = fresh("empty.fits");
          std::ofstream{p};
          return p;
        },
        "", "", "empty");
    add(
        "not FITS", R::Psf,
        [this] {
          auto p = fresh("text.fits");
          std::ofstream(p) << std::string(5000, 'x');
          return p;
        },
        "", "", "not a FITS file");
    add(
        "directory instead of file", R::Psf,
        [this] {
          auto p = fresh("dir.fits");
          std::filesystem::create_directory(p);
          return p;
        },
        "", "", "directory");

    // ---- PSF ----
    add(
        "PSF truncated in the table", R::Psf, [this] { return truncated(m_psf, 200000); }, "PSF");
    add(
        "PSF truncated in XTRACE", R::Psf, [this] { return truncated(m_psf, 20000); }, "XTRACE");
    add(
        "missing PSF HDU", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            r.deleteHdu();
          });
        },
        "PSF", "", "no HDU named");
    add(
        "missing YTRACE", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("YTRACE");
            r.deleteHdu();
          });
        },
        "YTRACE", "", "no HDU named");
    for (const char* key : {"LEGDEG", "HSIZEX", "HSIZEY", "NPIX_X", "NPIX_Y", "GHDEGX", "WAVEMIN"})
      add(
          std::string("PSF table without ") + key, R::Psf,
          [this, key] {
            return edited(m_psf, [key](Raw& r) {
              r.hdu("PSF");
              r.deleteKey(key);
            });
          },
          "PSF", key, "missing");
    add(
        "XTRACE without WAVEMIN", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hduIndex(0);
            r.deleteKey("WAVEMIN");
          });
        },
        "XTRACE", "WAVEMIN", "missing");
    add(
        "PSF WAVEMIN above WAVEMAX", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            r.setDouble("WAVEMIN", 8000);
          });
        },
        "PSF", "WAVEMAX", "below");
    add(
        "YTRACE WAVEMIN equal to WAVEMAX", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("YTRACE");
            r.setDouble("WAVEMIN", 7826);
          });
        },
        "YTRACE", "WAVEMAX");
    add(
        "COEFF shape disagrees with LEGDEG", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            r.setLong("LEGDEG", 3);
          });
        },
        "PSF", "COEFF", "LEGDEG");
    add(
        "COEFF TDIM wrong", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            r.setString("TDIM2", "(4,250)");
          });
        },
        "PSF", "COEFF");
    add(
        "nfiber of traces differs from PSF table", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            for (const char* h : {"XTRACE", "YTRACE"}) {
              r.hdu(h);
              r.resize({7, 499});
              r.setLong("FIBERMAX", 498);
            }
          });
        },
        "PSF", "COEFF", "499");
    add(
        "nfiber of YTRACE differs from XTRACE", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("YTRACE");
            r.resize({7, 499});
            r.setLong("FIBERMAX", 498);
          });
        },
        "YTRACE", "NAXIS2", "499");
    add(
        "FIBERMAX disagrees with XTRACE rows", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hduIndex(0);
            r.setLong("FIBERMAX", 600);
          });
        },
        "XTRACE", "FIBERMAX");
    add(
        "missing GH-3-2", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            r.writeString("PARAM", 19, "XX-3-2");
          });
        },
        "PSF", "PARAM", "GH-3-2");
    add(
        "duplicate parameter", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            r.writeString("PARAM", 19, "GH-0-0");
          });
        },
        "PSF", "PARAM", "twice");
    add(
        "missing GHSIGY", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            r.writeString("PARAM", 1, "GHSIGZ");
          });
        },
        "PSF", "PARAM", "GHSIGY");
    add(
        "GH terms beyond GHDEGX", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            r.setLong("GHDEGX", 5);
          });
        },
        "PSF", "PARAM", "beyond");
    add(
        "HSIZEX zero", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            r.setLong("HSIZEX", 0);
          });
        },
        "PSF", "HSIZEX");
    add(
        "NPIX_Y negative", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            r.setLong("NPIX_Y", -4128);
          });
        },
        "PSF", "NPIX_Y");
    add(
        "LEGDEG not a number", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            r.setString("LEGDEG", "one");
          });
        },
        "PSF", "LEGDEG");
    add(
        "PSFTYPE not Gauss-Hermite", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hduIndex(0);
            r.setString("PSFTYPE", "SPOTGRID");
          });
        },
        "XTRACE", "PSFTYPE", "GAUSS-HERMITE");
    add(
        "PSF table without PARAM column", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            int s = 0;
            fits_delete_col(r.f(), r.colnum("PARAM"), &s);
            QCOMPARE(s, 0);
          });
        },
        "PSF", "PARAM", "no column");
    add(
        "PSF table without COEFF column", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            int s = 0;
            fits_delete_col(r.f(), r.colnum("COEFF"), &s);
            QCOMPARE(s, 0);
          });
        },
        "PSF", "COEFF", "no column");

    // ---- preproc ----
    add(
        "preproc missing IVAR", R::Preproc,
        [this] {
          return edited(m_preproc, [](Raw& r) {
            r.hdu("IVAR");
            r.deleteHdu();
          });
        },
        "IVAR", "", "no HDU named");
    add(
        "preproc IVAR shape differs from IMAGE", R::Preproc,
        [this] {
          return edited(m_preproc, [](Raw& r) {
            r.hdu("IVAR");
            r.resize({6, 5});
          });
        },
        "IVAR", "", "7 x 9");
    add(
        "preproc missing MASK", R::Preproc,
        [this] {
          return edited(m_preproc, [](Raw& r) {
            r.hdu("MASK");
            r.deleteHdu();
          });
        },
        "MASK", "", "no HDU named");
    add(
        "preproc MASK shape differs", R::Preproc,
        [this] {
          return edited(m_preproc, [](Raw& r) {
            r.hdu("MASK");
            r.resize({9, 8});
          });
        },
        "MASK");
    add(
        "preproc IMAGE is 3D", R::Preproc,
        [this] {
          return edited(m_preproc, [](Raw& r) {
            r.hdu("IMAGE");
            r.resize({9, 7, 2});
          });
        },
        "IMAGE", "NAXIS", "2D");
    add(
        "preproc truncated in MASK", R::Preproc, [this] { return truncated(m_preproc, 5 * 2880); },
        "MASK");
    add(
        "preproc FIBERMAP without FIBER", R::Preproc,
        [this] {
          return edited(m_preproc, [](Raw& r) {
            r.hdu("FIBERMAP");
            int s = 0;
            fits_delete_col(r.f(), r.colnum("FIBER"), &s);
            QCOMPARE(s, 0);
          });
        },
        "FIBERMAP", "FIBER", "no column");
    add(
        "gzip preproc cut short", R::Preproc, [this] { return truncated(m_preprocGz, 400000); },
        "");

    // ---- frames ----
    add(
        "frame IVAR wrong shape", R::Frame,
        [this] {
          return edited(m_frame, [](Raw& r) {
            r.hdu("IVAR");
            r.resize({626, 24});
          });
        },
        "IVAR", "", "25 x 626");
    add(
        "frame MASK missing", R::Frame,
        [this] {
          return edited(m_frame, [](Raw& r) {
            r.hdu("MASK");
            r.deleteHdu();
          });
        },
        "MASK");
    add(
        "frame RESOLUTION even diagonal count", R::Frame,
        [this] {
          return edited(m_frame, [](Raw& r) {
            r.hdu("RESOLUTION");
            r.resize({626, 10, 25});
          });
        },
        "RESOLUTION", "NAXIS2", "odd");
    add(
        "frame RESOLUTION is 2D", R::Frame,
        [this] {
          return edited(m_frame, [](Raw& r) {
            r.hdu("RESOLUTION");
            r.resize({626, 275});
          });
        },
        "RESOLUTION", "NAXIS", "3D");
    add(
        "frame WAVELENGTH too short", R::Frame,
        [this] {
          return edited(m_frame, [](Raw& r) {
            r.hdu("WAVELENGTH");
            r.resize({625});
          });
        },
        "WAVELENGTH", "NAXIS1", "626");
    add(
        "frame WAVELENGTH not uniform", R::Frame,
        [this] {
          return edited(m_frame, [](Raw& r) {
            r.hdu("WAVELENGTH");
            r.writePixel(300, 6240.5);
          });
        },
        "WAVELENGTH", "", "not uniform");
    add(
        "frame without WAVELENGTH", R::Frame,
        [this] {
          return edited(m_frame, [](Raw& r) {
            r.hdu("WAVELENGTH");
            r.deleteHdu();
          });
        },
        "WAVELENGTH", "", "no HDU named");
    add(
        "PSF file given as a frame", R::Frame, [this] { return m_psf; }, "IVAR", "",
        "no HDU named");

    // ---- issue 11: keys CFITSIO 4.2 cannot convert without aborting (ffc2j) ----
    const std::string longDigits = "123456789012345678901234567890"; // 30 characters
    const std::string longString = "'" + std::string(40, 'z') + "'";
    for (const char* key : {"LEGDEG", "HSIZEX", "NPIX_X", "GHDEGY"}) {
      add(std::string("PSF ") + key + " holds a 40-character string", R::Psf,
          [this, key, longString] { return patched(m_psf, key, longString); }, "PSF", key,
          "is a string, expected an integer");
      add(std::string("PSF ") + key + " holds 30 digits", R::Psf,
          [this, key, longDigits] { return patched(m_psf, key, longDigits); }, "PSF", key,
          "does not fit a 64-bit integer");
    }
    add("XTRACE FIBERMIN holds a 40-character string", R::Psf,
        [this, longString] { return patched(m_psf, "FIBERMIN", longString); }, "XTRACE",
        "FIBERMIN", "is a string");
    add("frame SPECMIN holds a 40-character string", R::Frame,
        [this, longString] {
          return edited(m_frame, [longString](Raw& r) {
            r.hduIndex(0);
            int s = 0;
            fits_update_card(r.f(), "SPECMIN", ("SPECMIN = " + longString).c_str(), &s);
            QCOMPARE(s, 0);
          });
        },
        "FLUX", "SPECMIN", "is a string");
    // Structural keys: CFITSIO converts them itself while opening and moving between
    // HDUs (fits_movnam_hdu), so they are checked before CFITSIO sees the file.
    add("PSF table NAXIS2 holds 30 digits", R::Psf,
        [this, longDigits] { return patched(m_psf, "NAXIS2", longDigits, 2); }, "PSF", "NAXIS2",
        "not an integer");
    add("YTRACE BITPIX holds a 40-character string", R::Psf,
        [this, longString] { return patched(m_psf, "BITPIX", longString, 1); }, "YTRACE", "BITPIX",
        "not an integer");
    add("PSF table TFIELDS holds 30 digits", R::Psf,
        [this, longDigits] { return patched(m_psf, "TFIELDS", longDigits); }, "PSF", "TFIELDS");
    add("EXTVER of XTRACE holds 30 digits (read by fits_movnam_hdu)", R::Psf,
        [this, longDigits] {
          return edited(m_psf, [longDigits](Raw& r) {
            r.hduIndex(0);
            int s = 0;
            fits_update_card(r.f(), "EXTVER", ("EXTVER  = " + longDigits).c_str(), &s);
            QCOMPARE(s, 0);
          });
        },
        "XTRACE", "EXTVER", "not an integer");
    add("frame BSCALE of FLUX is not a number", R::Frame,
        [this] {
          // FLUX's BUNIT card becomes an over-long BSCALE.
          const std::string p = fresh("patched.fits");
          std::filesystem::copy_file(m_frame, p);
          patchCard(p, "BUNIT", "1.0E+999999999999999999999999999", 0, "BSCALE");
          return p;
        },
        "FLUX", "BSCALE", "not a number");
    // Binary-table column formats CFITSIO parses while opening the HDU.
    add("PSF table TFORM2 with a 20-digit repeat count", R::Psf,
        [this] { return patched(m_psf, "TFORM2", "'99999999999999999999D'"); }, "PSF", "TFORM2",
        "not a binary-table format");
    add("PSF table NAXIS1 disagrees with its columns", R::Psf,
        [this] { return patched(m_psf, "NAXIS1", "8017", 2); }, "PSF", "NAXIS1", "TFORMn");
    add("PSF table TFIELDS above its TFORMs", R::Psf,
        [this] { return patched(m_psf, "TFIELDS", "9"); }, "PSF", "TFORM5", "has no TFORM5");

    // ---- issue 11: size claims checked against the file before allocating ----
    add("PSF table claims NAXIS2 = 2^31 rows", R::Psf,
        [this] { return patched(m_psf, "NAXIS2", "2147483648", 2); }, "PSF", "NAXIS2",
        "not an integer in 0..2147483647");
    add("PSF table claims NAXIS2 = 2e9 rows", R::Psf,
        [this] { return patched(m_psf, "NAXIS2", "2000000000", 2); }, "PSF", "NAXIS2",
        "follow the header");
    add("preproc IMAGE claims 30000 x 30000", R::Preproc,
        [this] {
          const std::string p = patched(m_preproc, "NAXIS1", "30000", 0);
          patchCard(p, "NAXIS2", "30000", 0);
          return p;
        },
        "IMAGE", "NAXIS2", "30000 x 30000");
    add("preproc IMAGE axis beyond an int", R::Preproc,
        [this] { return patched(m_preproc, "NAXIS1", "3000000000", 0); }, "IMAGE", "NAXIS1",
        "not an integer in 0..2147483647");
    add("gzip preproc IMAGE claims 30000 x 30000", R::Preproc,
        [this] {
          const std::string p = patched(m_preproc, "NAXIS1", "30000", 0);
          patchCard(p, "NAXIS2", "30000", 0);
          return gzipped(p);
        },
        "IMAGE", "NAXIS2", "(decompressed)");
    // Fuzzer finding (fuzz_psf, 20 s): a gzip file whose trailer claims 2.5 GB made
    // CFITSIO allocate that much for a 7 KB file; now the claim is checked against the
    // stream.
    add("gzip trailer claims 2.5 GB", R::Preproc,
        [this] {
          // Bytes after the gzip member (zlib ignores them; CFITSIO reads the file's
          // last four as the decompressed size).
          const std::string p = gzipped(m_preproc);
          std::ofstream f(p, std::ios::binary | std::ios::app);
          const unsigned char tail[6] = {0x00, 0x00, 0x00, 0x00, 0x00, 0x97};
          f.write(reinterpret_cast<const char*>(tail), 6);
          return p;
        },
        "", "", "gzip trailer claims 2533359616 bytes");
    add("gzip member with a wrong length", R::Preproc,
        [this] {
          const std::string p = gzipped(m_preproc);
          std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
          f.seekp(-4, std::ios::end);
          const unsigned char isize[4] = {0x00, 0x00, 0x00, 0x97};
          f.write(reinterpret_cast<const char*>(isize), 4);
          return p;
        },
        "", "", "gzip stream is corrupt");
    // 100 rows: the chain then lands inside IVAR's data; 200 rows: exactly on MASK's
    // header, so CFITSIO sees a consistent file without IVAR. Both name IMAGE's claim.
    for (const char* rows : {"100", "200"})
      add(std::string("preproc IMAGE claims ") + rows + " rows (runs into IVAR)", R::Preproc,
          [this, rows] { return patched(m_preproc, "NAXIS2", rows, 0); }, "IMAGE", "NAXIS2",
          "the header of 'IVAR' starts at byte");
    add("frame RESOLUTION product overflows", R::Frame,
        [this] {
          const std::string p = patched(m_frame, "NAXIS1", "2000000000", 4);
          patchCard(p, "NAXIS2", "2000000000", 3);
          patchCard(p, "NAXIS3", "2000000000", 0);
          return p;
        },
        "RESOLUTION", "NAXIS3", "overflows");
    add("header without END", R::Preproc,
        [this] {
          const std::string p = fresh("noend.fits");
          std::string h;
          for (const char* c : {"SIMPLE  =                    T", "BITPIX  =                    8",
                                "NAXIS   =                    0"}) {
            std::string card = c;
            card.resize(80, ' ');
            h += card;
          }
          h.resize(2880, ' ');
          std::ofstream(p, std::ios::binary) << h;
          return p;
        },
        "primary", "", "no END card");

    add("frame FIBERMAP with 2 rows for 25 spectra", R::Frame,
        [this] {
          return edited(m_frame, [](Raw& r) {
            r.hdu("FIBERMAP");
            std::vector<long> rows;
            for (long i = 3; i <= 500; ++i) rows.push_back(i);
            int s = 0;
            fits_delete_rowlist(r.f(), rows.data(), long(rows.size()), &s);
            QCOMPARE(s, 0);
          });
        },
        "FIBERMAP", "NAXIS2", "2 rows for the 25 spectra");

    // ---- issue 11: PSF physical ranges ----
    auto psfEdit = [this](std::function<void(Raw&)> e) { return edited(m_psf, std::move(e)); };
    add("GHSIGX zero for fiber 3", R::Psf,
        [psfEdit] { return psfEdit([](Raw& r) { setCoeff(r, "GHSIGX", 3, {0.0, 0.0}); }); }, "PSF",
        "GHSIGX", "fiber 3");
    add("GHSIGY negative for fiber 0", R::Psf,
        [psfEdit] { return psfEdit([](Raw& r) { setCoeff(r, "GHSIGY", 0, {-1.0, 0.0}); }); },
        "PSF", "GHSIGY", "-1");
    add("GHSIGX 1e-6", R::Psf,
        [psfEdit] { return psfEdit([](Raw& r) { setCoeff(r, "GHSIGX", 7, {1e-6, 0.0}); }); },
        "PSF", "GHSIGX", "0.1..8");
    add("GHSIGX 1e6", R::Psf,
        [psfEdit] { return psfEdit([](Raw& r) { setCoeff(r, "GHSIGX", 7, {1e6, 0.0}); }); }, "PSF",
        "GHSIGX", "1e+06");
    add("all-zero Gauss-Hermite row", R::Psf,
        [psfEdit] {
          return psfEdit([](Raw& r) {
            for (int i = 0; i <= 6; ++i)
              for (int j = 0; j <= 6; ++j)
                setCoeff(r, "GH-" + std::to_string(i) + "-" + std::to_string(j), 4, {0.0, 0.0});
          });
        },
        "PSF", "GH-0-0", "fiber 4");
    add("XTRACE coefficient 1e98", R::Psf,
        [psfEdit] {
          return psfEdit([](Raw& r) {
            r.hduIndex(0);
            double v = 1e98;
            int s = 0;
            fits_write_pix(r.f(), TDOUBLE, std::array<long, 2>{2, 11}.data(), 1, &v, &s);
            QCOMPARE(s, 0);
          });
        },
        "XTRACE", "", "three CCD sizes");
    add("HSIZEY out of range is named HSIZEY", R::Psf,
        [this] {
          return edited(m_psf, [](Raw& r) {
            r.hdu("PSF");
            r.setLong("HSIZEY", 31);
          });
        },
        "PSF", "HSIZEY", "above 30");

    // ---- truth ----
    add(
        "truth WAVELENGTH length differs from PHOT", R::Truth,
        [this] {
          return edited(m_truth, [](Raw& r) {
            r.hdu("WAVELENGTH");
            r.resize({600});
          });
        },
        "WAVELENGTH", "NAXIS1", "626");
  }

private slots:
  void initTestCase() {
    QVERIFY(m_tmp.isValid());
    SPEX_REQUIRE_DATA(psf, "psf-r0-00067784.fits");
    SPEX_REQUIRE_DATA(frame, "sim-r0-bundle0-6000-6500/frame-gpu_specter.fits");
    SPEX_REQUIRE_DATA(truth, "sim-r0-bundle0-6000-6500/truth.fits");
    SPEX_REQUIRE_DATA(preprocGz, "sim-r0-bundle0-6000-6500/preproc.fits.gz");
    m_psf = psf;
    m_frame = frame;
    m_truth = truth;
    m_preprocGz = preprocGz;
    // Preproc variants start from a small file with the real one's layout (the real
    // one is 4128 x 4114; dozens of edited copies of it would be slow).
    m_preproc = m_tmp.path().toStdString() + "/preproc-small.fits";
    writePreproc(m_preproc, iotest::smallImage(7, 9), iotest::smallFibermap({0, 1, 2, 3}));
    // The pristine files read without error (so each case fails for its own reason).
    readPsf(m_psf);
    readPreproc(m_preproc);
    readFrame(m_frame);
    readTruth(m_truth);
    buildCases();
    QVERIFY(m_cases.size() >= 20);
  }

  void malformed_data() {
    QTest::addColumn<int>("index");
    // Runs after initTestCase, which built the cases.
    for (std::size_t i = 0; i < m_cases.size(); ++i)
      QTest::newRow(m_cases[i].name.c_str()) << int(i);
  }

  void malformed() {
    QFETCH(int, index);
    const Case& c = m_cases[std::size_t(index)];
    const std::string path = c.make();
    try {
      switch (c.reader) {
      case Reader::Psf:
        readPsf(path);
        break;
      case Reader::Preproc:
        readPreproc(path);
        break;
      case Reader::Frame:
        readFrame(path);
        break;
      case Reader::Truth:
        readTruth(path);
        break;
      }
      QFAIL(("no error for: " + c.name).c_str());
    } catch (const FitsError& e) {
      const std::string msg = e.what();
      QVERIFY2(e.file() == path, msg.c_str());
      QVERIFY2(msg.find(path) != std::string::npos, msg.c_str());
      if (!c.hdu.empty()) {
        QVERIFY2(e.hdu() == c.hdu, ("expected HDU " + c.hdu + ": " + msg).c_str());
        QVERIFY2(msg.find("HDU '" + c.hdu + "'") != std::string::npos, msg.c_str());
      }
      if (!c.key.empty()) {
        QVERIFY2(e.key() == c.key, ("expected key " + c.key + ": " + msg).c_str());
        QVERIFY2(msg.find("key '" + c.key + "'") != std::string::npos, msg.c_str());
      }
      if (!c.says.empty())
        QVERIFY2(msg.find(c.says) != std::string::npos,
                 ("expected '" + c.says + "' in: " + msg).c_str());
      qInfo("%s", msg.c_str());
    }
  }
};

QTEST_APPLESS_MAIN(TestMalformedInputs)
#include "test_malformed_inputs.moc"
