// FitsFile: the one place SpexLab touches FITS. An RAII wrapper around CFITSIO's
// fitsfile* that moves between HDUs, reads and writes keys, images and table
// columns, and turns every CFITSIO failure into a FitsError naming the file, the HDU,
// the key and CFITSIO's own message. AtomicOutput writes a new file under a temporary
// name beside the target and renames it on commit (DESIGN.md "Errors"), so a failed
// write never leaves half a file and never touches an existing output.
#pragma once

#include "../array.h"
#include "../image.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace spex {

// Pixel type of an image HDU on disk.
enum class FitsPixel {
  UInt8,   // BITPIX 8
  Int32,   // BITPIX 32
  UInt32,  // BITPIX 32, BZERO 2^31 (CFITSIO ULONG_IMG)
  Int64,   // BITPIX 64
  Float32, // BITPIX -32
  Float64, // BITPIX -64
};

// One binary-table column to create: TTYPE, TFORM ("J", "K", "D", "8A", "1000D"),
// optional TUNIT and cell shape in C order (slowest first, e.g. {nfiber, ncoeff}),
// written as TDIM in FITS order ("(ncoeff,nfiber)").
struct FitsColumn {
  std::string name;
  std::string form;
  std::string unit;
  std::vector<long> dims;
};

// A FITS real ("1.5", "-2E3", "1.0D-5") parsed with std::from_chars; nullopt when the
// text is not one; +-inf when it overflows a double.
std::optional<double> parseFitsDouble(const std::string& text);

class FitsBytes;

// The FITS data checksum (DATASUM) of float32 values, summed in pieces: the 32-bit
// ones'-complement sum of the stored big-endian words, kept as the sums of their 16-bit
// halves (folded only in value(), so pieces add exactly in any order).
struct FitsDataSum {
  uint64_t hi = 0, lo = 0;
  void add(uint32_t w) {
    hi += w >> 16;
    lo += w & 0xFFFFu;
  }
  void addFloats(const float* v, long long n);
  uint32_t value() const;
};

class FitsFile {
public:
  // Opens an existing file (plain or gzip-compressed) read-only. Checks first that it
  // exists, is a regular file and is not empty, so the error says which; then its
  // headers (fits_scan.h) before CFITSIO reads any. A gzip file is inflated once into
  // memory, scanned there, and CFITSIO reads those bytes as a memory file.
  static FitsFile openRead(const std::string& path);
  // Opens a FITS file held in memory read-only, after the same header scan; errors
  // name `display` (default: bytes->name()). The bytes are shared, not copied.
  static FitsFile openMemory(std::shared_ptr<const FitsBytes> bytes, const std::string& display = {});
  // Opens, read-only and positioned on it, a file in memory made of an empty primary
  // HDU and the extension `hdu` (header and data blocks as rawHdu() returns them):
  // the HDU can then be copied (copyHduFrom) without its file. Errors name `display`.
  static FitsFile openHduCopy(const std::string& hdu, const std::string& display);
  // Another read-only handle on the same file (for reading HDUs on other threads):
  // for a file in memory, the same bytes, with no second scan or inflate.
  FitsFile reopen();
  // Creates a new file at path (it must not exist). displayName is the name used in
  // error messages (AtomicOutput passes the final path, not the temporary one).
  static FitsFile create(const std::string& path, const std::string& displayName = {});

  FitsFile() = default;
  FitsFile(FitsFile&& other) noexcept;
  FitsFile& operator=(FitsFile&& other) noexcept;
  FitsFile(const FitsFile&) = delete;
  FitsFile& operator=(const FitsFile&) = delete;
  ~FitsFile(); // closes, ignoring errors (use close() to see them)

  // Flushes and closes; throws FitsError if CFITSIO fails to write the file.
  void close();
  bool isOpen() const { return m_fptr != nullptr; }
  const std::string& path() const { return m_display; }

  // ---- HDUs ------------------------------------------------------------------------
  int hduCount();
  // Moves to the HDU whose EXTNAME (or HDUNAME) is extname; throws if there is none.
  void moveTo(const std::string& extname);
  // Same, returning false instead of throwing when there is no such HDU.
  bool tryMoveTo(const std::string& extname);
  // Moves to HDU `index`, 0 = primary.
  void moveToIndex(int index);
  int currentIndex();                                  // 0 = primary
  const std::string& hduName() const { return m_hdu; } // for messages
  bool currentIsImage();
  bool currentIsTable();

  // ---- keys of the current HDU -------------------------------------------------------
  bool hasKey(const std::string& key);
  std::string readString(const std::string& key);
  std::optional<std::string> readStringOpt(const std::string& key);
  long long readLong(const std::string& key);
  std::optional<long long> readLongOpt(const std::string& key);
  // Reads an integer key that must fit in int (and be >= minValue).
  int readInt(const std::string& key, int minValue = INT32_MIN);
  std::optional<int> readIntOpt(const std::string& key, int minValue = INT32_MIN);
  double readDouble(const std::string& key); // finite
  std::optional<double> readDoubleOpt(const std::string& key);
  bool readBool(const std::string& key);
  // The value of a key as written in its card (strings keep their quotes), trimmed;
  // nullopt when absent. Every number above is parsed from it by SpexLab, not CFITSIO.
  std::optional<std::string> readValueText(const std::string& key);
  std::optional<bool> readBoolOpt(const std::string& key);

  // Adds or replaces a key. Doubles are written in their shortest exact form.
  void writeString(const std::string& key, const std::string& value,
                   const std::string& comment = {});
  void writeLong(const std::string& key, long long value, const std::string& comment = {});
  void writeDouble(const std::string& key, double value, const std::string& comment = {});
  void writeBool(const std::string& key, bool value, const std::string& comment = {});
  void deleteKey(const std::string& key); // no error when absent

  // Non-structural cards of the current HDU (no SIMPLE/BITPIX/NAXISn/EXTEND/XTENSION/
  // PCOUNT/GCOUNT/table column/scaling/EXTNAME/checksum/compression keys), in order;
  // COMMENT and HISTORY kept with their text in `comment`; long strings joined.
  FitsHeader readHeader();
  // Writes cards into the current HDU, replacing keys that exist; structural keys in
  // the header are skipped, so a header read from any HDU can be copied anywhere.
  void writeHeader(const FitsHeader& header);
  static bool isStructuralKey(const std::string& key);

  // ---- images ----------------------------------------------------------------------
  // Shape of the current image HDU in C order (slowest axis first): {NAXIS2, NAXIS1}.
  std::vector<long> imageShape();
  // Reads a 2D image of any BITPIX (scaled by BSCALE/BZERO) converted to T. Throws if
  // the HDU is not a 2D image or, when given (>= 0), the shape is not rows x cols.
  template <class T>
  Array2D<T> readImage2D(int rows = -1, int cols = -1);
  template <class T>
  Array3D<T> readImage3D(int n0 = -1, int n1 = -1, int n2 = -1);
  // A 1D image (NAXIS 1), or a 2D image with one row.
  std::vector<double> readImage1D(long n = -1);

  // Appends an image HDU (the primary one if the file is empty) of shape `shape`
  // (C order) and writes data converted to `pixel`; sets EXTNAME when given.
  template <class T>
  void writeImage(const std::string& extname, FitsPixel pixel, const std::vector<long>& shape,
                  const T* data);
  template <class T>
  void writeImage(const std::string& extname, FitsPixel pixel, const Array2D<T>& a) {
    writeImage(extname, pixel, {long(a.rows), long(a.cols)}, a.data.data());
  }
  template <class T>
  void writeImage(const std::string& extname, FitsPixel pixel, const Array3D<T>& a) {
    writeImage(extname, pixel, {long(a.n0), long(a.n1), long(a.n2)}, a.data.data());
  }
  template <class T>
  void writeImage(const std::string& extname, FitsPixel pixel, const std::vector<T>& v) {
    writeImage(extname, pixel, {long(v.size())}, v.data());
  }
  // A float32 image written in pieces, in order (writeFrame's RESOLUTION: each piece
  // converted on another thread while the one before is written, no image-sized copy):
  // beginFloatImage appends the HDU as writeImage does, writeImagePart writes the next
  // n values with `sum`, their FitsDataSum (summed where they were made), and
  // endImage checks that every value was written and keeps the sum for writeChecksums.
  void beginFloatImage(const std::string& extname, const std::vector<long>& shape);
  void writeImagePart(const float* data, long long n, const struct FitsDataSum& sum);
  void endImage();

  // ---- binary tables ---------------------------------------------------------------
  long numRows();
  bool hasColumn(const std::string& name);
  int columnNumber(const std::string& name); // 1-based; throws when absent
  // Cell shape of a column in C order ({nfiber, ncoeff} for COEFF with TDIM (2,500));
  // {repeat} without TDIM.
  std::vector<long> columnCellShape(const std::string& name);
  // Scalar columns (repeat 1) of any numeric type, converted; throws on overflow.
  std::vector<int32_t> readColumnInt(const std::string& name);
  std::vector<int64_t> readColumnLong(const std::string& name);
  std::vector<double> readColumnDouble(const std::string& name);
  std::vector<std::string> readColumnString(const std::string& name); // trailing blanks cut
  // One vector cell (row 0-based) as [shape[0], shape[1]] following TDIM; throws if
  // its shape is not rows x cols (when given) or the cell is not 1D/2D.
  Array2D<double> readCellDouble(const std::string& name, long row, int rows = -1, int cols = -1);

  // Appends a binary table HDU with nrows rows.
  void createTable(const std::string& extname, const std::vector<FitsColumn>& columns,
                   long nrows = 0);
  void writeColumn(const std::string& name, const std::vector<int32_t>& v, long firstRow = 0);
  void writeColumn(const std::string& name, const std::vector<int64_t>& v, long firstRow = 0);
  void writeColumn(const std::string& name, const std::vector<double>& v, long firstRow = 0);
  void writeColumn(const std::string& name, const std::vector<std::string>& v, long firstRow = 0);
  void writeCell(const std::string& name, long row, const double* values, long n);
  // Deletes rows (0-based, any order) of the current table.
  void deleteRows(std::vector<long> rows);
  // Reorders the rows of the current table: new row i is old row order[i].
  void permuteRows(const std::vector<long>& order);

  // Appends a copy of src's current HDU (header and data) to this file and moves there.
  void copyHduFrom(FitsFile& src);
  // The current HDU of a file opened for reading as its file holds it: header and data
  // blocks, 2880-byte padding included (zeros where the file's last block is short).
  std::string rawHdu();

  // ---- checksums (FITS checksum convention, CFITSIO fits_write_chksum) ---------------
  // Writes CHECKSUM and DATASUM into every HDU of the file; call last, after every
  // other change (any later edit makes them wrong). Leaves the file at its last HDU.
  void writeChecksums();
  // True when the current HDU has CHECKSUM and DATASUM and both match its content.
  bool verifyChecksum();
  // CFITSIO's version, "4.020".
  static std::string cfitsioVersion();

  // Throws FitsError(path, current HDU, key, what [+ CFITSIO's message for status]).
  [[noreturn]] void fail(const std::string& key, const std::string& what, int status = 0);

private:
  FitsFile(void* f, std::string path, std::string display);
  void check(int status, const std::string& key, const std::string& what);
  void refreshHduName();
  void requireImage(const char* what);
  void requireTable(const char* what);
  void writeCard(const std::string& key, const std::string& value, const std::string& comment);
  template <class T>
  void readPixels(long long n, T* out);

  static FitsFile openScanned(std::shared_ptr<const FitsBytes> bytes,
                              std::shared_ptr<const struct FitsLayout> layout, const std::string& path,
                              const std::string& display);

  friend class AtomicOutput; // startWriteback flushes CFITSIO's buffers
  void* m_fptr = nullptr; // CFITSIO's fitsfile*; its header stays in fits_file.cpp
  std::shared_ptr<const struct FitsLayout> m_layout; // from openRead's header scan
  // A file in memory: the bytes, and the pointer and size CFITSIO keeps the addresses
  // of while the file is open (so they live on the heap, beside the bytes).
  std::shared_ptr<struct FitsMemory> m_mem;
  std::map<int, uint32_t> m_dataSums; // DATASUM of images written here, by HDU index
  // Appends an image HDU of this type and shape (EXTNAME when given) and makes it
  // current; the number of values it holds.
  long long createImage(const std::string& extname, int bitpix, const std::vector<long>& shape);
  // The image being written in pieces (beginFloatImage): values written, values in
  // all, and the sums of the written ones (hi and lo 16-bit halves, folded at the end).
  long long m_partDone = 0, m_partTotal = -1;
  uint64_t m_partHi = 0, m_partLo = 0;
  std::string m_path;     // as opened by CFITSIO
  std::string m_display;  // as named in messages
  std::string m_hdu;      // current HDU's EXTNAME, or "primary" / "HDU n"
};

// Writes `finalPath` atomically: file() is a new FITS file at
// finalPath + ".tmp-<pid>-<n>" in the same directory (so the rename cannot cross
// file systems; for "x.fits.gz" it is "x.fits.tmp-<pid>-<n>.gz", which CFITSIO gzips); commit()
// closes it and renames it over finalPath. If commit() is never reached (an exception), the
// destructor deletes the temporary file and any existing finalPath is left as it was. The
// constructor checks up front that the directory exists and is writable and throws FitsError saying
// so otherwise.
//
// Inside an OutputTransaction (on the same thread), commit() only closes and syncs the
// temporary; the transaction renames every such temporary in its own commit(), or
// deletes them all if it is destroyed first. Stale temporaries of the same target left
// by dead processes (".tmp-<pid>-<n>" whose pid no longer runs) are removed by the
// constructor. Live temporaries are listed where removeLiveTemporaries() (safe in a
// signal handler) can delete them.
class AtomicOutput {
public:
  explicit AtomicOutput(const std::string& finalPath);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  FitsFile& file() { return m_file; }
  const std::string& tempPath() const { return m_temp; }
  const std::string& finalPath() const { return m_final; }
  // Hands what is written so far to the kernel and starts its write-out to disk
  // (sync_file_range, no waiting), so that commit()'s fsync waits only for the rest.
  // Writers call it after their large HDUs. No-op for a .gz output (compressed on close).
  void startWriteback();
  void commit();

private:
  std::string m_final;
  std::string m_temp;
  FitsFile m_file;
  bool m_committed = false;
  int m_slot = -1; // in the live-temporary list
};

// Several outputs committed together (a frame and its model): each AtomicOutput
// committed while the transaction is open is written and synced under its temporary
// name; commit() then renames them all, in the order they were committed (write the
// model before the frame, so the frame appears last). A transaction destroyed without
// commit() deletes them, so a failure in any output leaves every target as it was.
//
// Outputs may be written on several threads at once (the model beside the frame): a
// Join on another thread makes the AtomicOutputs committed there belong to the
// transaction too, and renameLast() says which target is renamed after all the others
// whatever the order their writers finished in. Join every writer thread before
// commit() or the destructor.
class OutputTransaction {
public:
  OutputTransaction();
  ~OutputTransaction();
  OutputTransaction(const OutputTransaction&) = delete;
  OutputTransaction& operator=(const OutputTransaction&) = delete;
  void commit();
  // commit() renames the output whose final path is `finalPath` last.
  void renameLast(const std::string& finalPath) { m_last = finalPath; }

  // While alive, AtomicOutputs committed on this thread belong to `t`.
  class Join {
  public:
    explicit Join(OutputTransaction& t);
    ~Join();
    Join(const Join&) = delete;
    Join& operator=(const Join&) = delete;

  private:
    OutputTransaction* m_previous;
  };

private:
  friend class AtomicOutput;
  struct Pending {
    std::string temp, final;
    int slot;
  };
  std::mutex m_mutex; // guards m_pending against writers on other threads (Join)
  std::vector<Pending> m_pending;
  std::string m_last;
  OutputTransaction* m_outer = nullptr;
  bool m_done = false;
};

// Deletes every temporary an AtomicOutput or OutputTransaction of this process holds.
// Async-signal-safe (unlink only): for SIGINT/SIGTERM handlers that then _exit.
void removeLiveTemporaries() noexcept;
// Lists a temporary that is not an AtomicOutput (e.g. a JSON profile written beside its
// target) for removeLiveTemporaries(); returns a slot for releaseLiveTemporary, or -1
// when the table is full (the file is then still removed on normal failures).
int registerLiveTemporary(const std::string& path);
void releaseLiveTemporary(int slot);

// Removes files "<stem>.tmp-<pid>-<n>[.gz]" beside `finalPath` whose pid is not a
// running process; returns how many. AtomicOutput calls it; exposed for tests.
int removeStaleTemporaries(const std::string& finalPath);

} // namespace spex
