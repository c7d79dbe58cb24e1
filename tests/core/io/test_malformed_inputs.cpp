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
