// Helpers shared by the io tests: a raw CFITSIO handle (so tests check files
// independently of FitsFile), file copies and small synthetic inputs.
#pragma once

#include "core/errors.h"
#include "core/image.h"
#include "core/io/preproc_io.h"

#include <fitsio.h>

#include <QTest>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace iotest {

// Raw CFITSIO access for setting up malformed files and checking written ones.
// Failures throw std::runtime_error, which Qt Test reports as a failed test.
class Raw {
public:
  explicit Raw(const std::string& path, int mode = READONLY) : m_path(path) {
    fits_open_diskfile(&m_f, path.c_str(), mode, &m_status);
    ok("open");
  }
  ~Raw() {
    int s = 0;
    if (m_f) fits_close_file(m_f, &s);
  }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  fitsfile* f() { return m_f; }
  void ok(const std::string& what) {
    if (!m_status) return;
    char text[FLEN_STATUS] = {};
    fits_get_errstatus(m_status, text);
    const int s = m_status;
    m_status = 0;
    fits_clear_errmsg();
    throw std::runtime_error(m_path + ": " + what + ": " + text + " (" + std::to_string(s) + ")");
  }
  int hduCount() {
    int n = 0;
    fits_get_num_hdus(m_f, &n, &m_status);
    ok("count HDUs");
    return n;
  }
  void hdu(const std::string& name) {
    std::string n = name;
    fits_movnam_hdu(m_f, ANY_HDU, n.data(), 0, &m_status);
    ok("move to " + name);
  }
  void hduIndex(int i) {
    fits_movabs_hdu(m_f, i + 1, nullptr, &m_status);
    ok("move to HDU " + std::to_string(i));
  }
  void deleteHdu() {
    fits_delete_hdu(m_f, nullptr, &m_status);
    ok("delete HDU");
  }
  void deleteKey(const std::string& key) {
    fits_delete_key(m_f, key.c_str(), &m_status);
    ok("delete " + key);
  }
  void setLong(const std::string& key, long long v) {
    LONGLONG x = v;
    fits_update_key(m_f, TLONGLONG, key.c_str(), &x, nullptr, &m_status);
    ok("set " + key);
  }
  void setDouble(const std::string& key, double v) {
    fits_update_key(m_f, TDOUBLE, key.c_str(), &v, nullptr, &m_status);
    ok("set " + key);
  }
  void setString(const std::string& key, const std::string& v) {
    fits_update_key_str(m_f, key.c_str(), v.c_str(), nullptr, &m_status);
    ok("set " + key);
  }
  std::string str(const std::string& key) {
    char v[FLEN_VALUE] = {};
    fits_read_key(m_f, TSTRING, key.c_str(), v, nullptr, &m_status);
    ok("read " + key);
    std::string s = v;
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
  }
  long long lng(const std::string& key) {
    LONGLONG v = 0;
    fits_read_key(m_f, TLONGLONG, key.c_str(), &v, nullptr, &m_status);
    ok("read " + key);
    return v;
  }
  double dbl(const std::string& key) {
    double v = 0;
    fits_read_key(m_f, TDOUBLE, key.c_str(), &v, nullptr, &m_status);
    ok("read " + key);
    return v;
  }
  bool hasKey(const std::string& key) {
    char card[FLEN_CARD] = {};
    int s = 0;
    fits_read_card(m_f, key.c_str(), card, &s);
    fits_clear_errmsg();
    return s == 0;
  }
  std::string extname() { return str("EXTNAME"); }
  int bitpix() { // the stored BITPIX
    int b = 0;
    fits_get_img_type(m_f, &b, &m_status);
    ok("BITPIX");
    return b;
  }
  int equivBitpix() {
    int b = 0;
    fits_get_img_equivtype(m_f, &b, &m_status);
    ok("BITPIX");
    return b;
  }
  // Shape in FITS order (NAXIS1 first).
  std::vector<long> naxes() {
    int n = 0;
    fits_get_img_dim(m_f, &n, &m_status);
    std::vector<long> a(std::size_t(std::max(n, 1)));
    fits_get_img_size(m_f, n, a.data(), &m_status);
    ok("image size");
    a.resize(std::size_t(n));
    return a;
  }
  void resize(const std::vector<long>& naxesFits) {
    int b = bitpix();
    std::vector<long> a = naxesFits;
    fits_resize_img(m_f, b, int(a.size()), a.data(), &m_status);
    ok("resize image");
  }
  std::vector<double> pixels() {
    LONGLONG n = 1;
    for (long a : naxes()) n *= a;
    std::vector<double> v(static_cast<std::size_t>(n));
    int anynul = 0;
    fits_read_img(m_f, TDOUBLE, 1, n, nullptr, v.data(), &anynul, &m_status);
    ok("read pixels");
    return v;
  }
  void writePixel(long long index, double v) {
    fits_write_img(m_f, TDOUBLE, index + 1, 1, &v, &m_status);
    ok("write pixel");
  }
  int colnum(const std::string& name) {
    std::string n = name;
    int c = 0;
    fits_get_colnum(m_f, CASEINSEN, n.data(), &c, &m_status);
    ok("column " + name);
    return c;
  }
  long rows() {
    long n = 0;
    fits_get_num_rows(m_f, &n, &m_status);
    ok("rows");
    return n;
  }
  std::vector<long long> longColumn(const std::string& name) {
    const int c = colnum(name);
    std::vector<long long> v(static_cast<std::size_t>(rows()));
    int anynul = 0;
    if (!v.empty())
      fits_read_col(m_f, TLONGLONG, c, 1, 1, LONGLONG(v.size()), nullptr, v.data(), &anynul,
                    &m_status);
    ok("read " + name);
    return v;
  }
  std::vector<std::string> stringColumn(const std::string& name, int width) {
    const int c = colnum(name);
    const long n = rows();
    std::vector<std::vector<char>> buf(std::size_t(n), std::vector<char>(std::size_t(width) + 1));
    std::vector<char*> p;
    for (auto& b : buf) p.push_back(b.data());
    int anynul = 0;
    char nul[] = "";
    if (n) fits_read_col_str(m_f, c, 1, 1, n, nul, p.data(), &anynul, &m_status);
    ok("read " + name);
    std::vector<std::string> out;
    for (auto& b : buf) out.emplace_back(b.data());
    return out;
  }
  void writeString(const std::string& col, long row, const std::string& v) {
    const int c = colnum(col);
    char* p = const_cast<char*>(v.c_str());
    fits_write_col_str(m_f, c, row + 1, 1, 1, &p, &m_status);
    ok("write " + col);
  }
  std::vector<double> cell(const std::string& col, long row, long n) {
    const int c = colnum(col);
    std::vector<double> v(static_cast<std::size_t>(n));
    int anynul = 0;
    fits_read_col(m_f, TDOUBLE, c, row + 1, 1, n, nullptr, v.data(), &anynul, &m_status);
    ok("read cell " + col);
    return v;
  }

private:
  std::string m_path;
  fitsfile* m_f = nullptr;
  int m_status = 0;
};

// Copies a FITS file (plain or .gz) to an uncompressed file with CFITSIO.
inline void copyFits(const std::string& src, const std::string& dst) {
  Raw in(src);
  fitsfile* out = nullptr;
  int status = 0;
  std::filesystem::remove(dst);
  fits_create_diskfile(&out, dst.c_str(), &status);
  fits_copy_file(in.f(), out, 1, 1, 1, &status);
  int s2 = 0;
  if (out) fits_close_file(out, &s2);
  if (status || s2) throw std::runtime_error("copyFits " + src + " -> " + dst + " failed");
}

// A small preproc image with a known header and a FIBERMAP of `nrows` rows whose
// FIBER column is `fibers` (any order).
inline spex::Image smallImage(int ny, int nx) {
  spex::Image img;
  img.ny = ny;
  img.nx = nx;
  img.pix = spex::Array2D<double>(ny, nx);
  img.ivar = spex::Array2D<double>(ny, nx);
  img.mask = spex::Array2D<int32_t>(ny, nx);
  for (int y = 0; y < ny; ++y)
    for (int x = 0; x < nx; ++x) {
      img.pix(y, x) = 100.0 + y * 0.5 + x * 0.25;
      img.ivar(y, x) = 0.01 * (1 + (x + y) % 7);
    }
  img.header.set("CAMERA", "'r0      '", "camera");
  img.header.set("FLAVOR", "'science '", "exposure type");
  img.header.set("EXPID", "1234", "exposure number");
  img.header.set("EXPTIME", "900.0", "exposure time [s]");
  img.header.set("BUNIT", "'electron'");
  return img;
}

inline spex::FiberMapTable smallFibermap(const std::vector<int32_t>& fibers) {
  spex::FiberMapTable fm;
  for (std::size_t i = 0; i < fibers.size(); ++i) {
    fm.fiber.push_back(fibers[i]);
    fm.targetid.push_back(1000000000000LL + fibers[i]);
    fm.objtype.push_back(fibers[i] % 4 == 0 ? "SKY" : "TGT");
    fm.fiberstatus.push_back(fibers[i] == 5 ? 4 : 0);
    fm.targetRa.push_back(150.0 + 0.01 * fibers[i]);
    fm.targetDec.push_back(2.0 - 0.01 * fibers[i]);
  }
  return fm;
}

// Files left in a directory (to check that failed writes leave no temporaries).
inline std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace iotest
