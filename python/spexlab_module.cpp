// _spexlab: the C++ half of the `spexlab` Python package (DESIGN.md "python/"). It
// holds what must be fast or must touch engine types: building a GaussHermitePsf
// from a file or from gpu_specter-style tables, one extraction on a warm engine with
// the GIL released, and the readers. Argument handling, gpu_specter's defaults and
// MPI live in spexlab/__init__.py.
//
// Copies: result arrays are moved out of the ExtractionResult into NumPy arrays
// that own them (no copy). The image is copied once into the engine's Image: the
// engine needs its own ivar (NaN/Inf and masked pixels are zeroed there, never in
// the caller's array), and Image stores its pixels in owned vectors.
#include "app/engine_factory.h"
#include "core/errors.h"
#include "core/extract/engine.h"
#include "core/image.h"
#include "core/io/preproc_io.h"
#include "core/io/psf_io.h"
#include "core/plan/patch_plan.h"
#include "core/plan/rank_split.h"
#include "core/psf/gauss_hermite_psf.h"
#include "core/threads.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

namespace py = pybind11;
using namespace spex;

namespace {

// A NumPy array that takes over `v` (moved onto the heap, freed with the array).
template <class T>
py::array_t<T> adopt(std::vector<T>&& v, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<T>(std::move(v));
  py::capsule free(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(shape, owned->data(), free);
}

using F64 = py::array_t<double, py::array::c_style | py::array::forcecast>;

// Legendre set from a [nfiber, ncoeff] array.
LegendreSet legendre(const F64& a, double wmin, double wmax, const std::string& what) {
  if (a.ndim() != 2)
    throw InputError(what + ": expected a 2-D [nfiber, ncoeff] coefficient array, got " +
                     std::to_string(a.ndim()) + "-D");
  LegendreSet s;
  s.wavemin = wmin;
  s.wavemax = wmax;
  s.coeff = Array2D<double>(int(a.shape(0)), int(a.shape(1)));
  std::memcpy(s.coeff.data.data(), a.data(), s.coeff.size() * sizeof(double));
  for (double c : s.coeff.data)
    if (!std::isfinite(c)) throw InputError(what + ": coefficients contain NaN or Inf");
  return s;
}

// gpu_specter.io.read_psf's tables, flattened by __init__.py: XTRACE/YTRACE
// coefficients with their WAVEMIN/WAVEMAX, the PSF table's PARAM names and COEFF
// cube [nparam, nfiber, ncoeff], and the PSF header keys (`meta`).
GaussHermitePsf psfFromTables(const F64& x, double xwmin, double xwmax, const F64& y,
                              double ywmin, double ywmax, const std::vector<std::string>& names,
                              const F64& coeff, const py::dict& meta) {
  auto need = [&](const char* key) -> py::object {
    if (!meta.contains(key)) throw InputError(std::string("psf['PSF'].meta has no ") + key);
    return meta[key];
  };
  auto opt = [&](const char* key, double fallback) {
    return meta.contains(key) ? meta[key].cast<double>() : fallback;
  };
  GaussHermitePsf psf;
  if (meta.contains("PSFTYPE") && meta["PSFTYPE"].cast<std::string>() != "GAUSS-HERMITE")
    throw InputError("psf['PSF'].meta PSFTYPE is '" + meta["PSFTYPE"].cast<std::string>() +
                     "', only GAUSS-HERMITE is supported");
  psf.npixX = need("NPIX_X").cast<int>();
  psf.npixY = need("NPIX_Y").cast<int>();
  psf.hsizeX = need("HSIZEX").cast<int>();
  psf.hsizeY = need("HSIZEY").cast<int>();
  psf.ghdegX = need("GHDEGX").cast<int>();
  psf.ghdegY = need("GHDEGY").cast<int>();
  psf.psfErr = opt("PSFERR", 0.01);
  psf.fiberMin = int(opt("FIBERMIN", 0));
  const double wmin = need("WAVEMIN").cast<double>(), wmax = need("WAVEMAX").cast<double>();
  psf.xTrace = legendre(x, xwmin, xwmax, "psf['XTRACE']['X']");
  psf.yTrace = legendre(y, ywmin, ywmax, "psf['YTRACE']['Y']");
  psf.nfiber = psf.xTrace.coeff.rows;
  if (coeff.ndim() != 3 || py::ssize_t(names.size()) != coeff.shape(0))
    throw InputError("psf['PSF']['COEFF'] must be [nparam, nfiber, ncoeff] with one row per PARAM (" +
                     std::to_string(names.size()) + " names)");
  const int nf = int(coeff.shape(1)), nc = int(coeff.shape(2));
  psf.legdeg = int(opt("LEGDEG", nc - 1));
  std::map<std::string, LegendreSet> params;
  for (std::size_t r = 0; r < names.size(); ++r) {
    LegendreSet s;
    s.wavemin = wmin;
    s.wavemax = wmax;
    s.coeff = Array2D<double>(nf, nc);
    std::memcpy(s.coeff.data.data(), coeff.data() + r * std::size_t(nf) * nc,
                s.coeff.size() * sizeof(double));
    for (double c : s.coeff.data)
      if (!std::isfinite(c))
        throw InputError("psf['PSF'] parameter '" + names[r] + "' has NaN or Inf coefficients");
    params[names[r]] = std::move(s);
  }
  auto take = [&](const std::string& name) {
    auto it = params.find(name);
    if (it == params.end())
      throw InputError("psf['PSF'] has no PARAM row '" + name + "'");
    LegendreSet s = std::move(it->second);
    params.erase(it);
    return s;
  };
  psf.ghSigX = take("GHSIGX");
  psf.ghSigY = take("GHSIGY");
  psf.gh.resize(std::size_t(psf.ghdegX + 1) * (psf.ghdegY + 1));
  for (int i = 0; i <= psf.ghdegX; ++i)
    for (int j = 0; j <= psf.ghdegY; ++j)
      psf.gh[std::size_t(i) * (psf.ghdegY + 1) + j] =
          take("GH-" + std::to_string(i) + "-" + std::to_string(j));
  for (auto& [name, s] : params) psf.otherParams.emplace(name, std::move(s));
  psf.validate();
  checkPsfPhysicalRanges(psf, "psf dict"); // the same ranges readPsf holds files to
  return psf;
}

// Engines stay warm between calls (DESIGN.md: engines are long-lived): one per kind
// and GPU list, each behind its own lock so two Python threads never share one run.
struct WarmEngine {
  std::mutex mutex;
  std::unique_ptr<Engine> engine;
  std::string note;
};
std::mutex g_enginesMutex;
std::map<std::string, std::shared_ptr<WarmEngine>> g_engines;

std::shared_ptr<WarmEngine> warmEngine(const std::string& kind, const std::vector<int>& gpus) {
  std::string key = kind;
  for (int g : gpus) {
    key += ',';
    key += std::to_string(g); // (not "," + ...: GCC 12 -Wrestrict false positive)
  }
  std::lock_guard lock(g_enginesMutex);
  auto& slot = g_engines[key];
  if (!slot) {
    auto w = std::make_shared<WarmEngine>();
    EngineChoice c = makeEngine(kind, gpus);
    w->engine = std::move(c.engine);
    w->note = c.note;
    slot = w;
  }
  return slot;
}

py::dict extract(const F64& image, const F64& ivar, const py::object& mask,
                 const GaussHermitePsf& psf, double wmin, double wmax, double dw, int specmin,
                 int nspec, int bundlesize, int nsubbundles, int nwavestep, double wavepadFrac,
                 double pixpadFrac, double regularize, double psferr, bool model,
                 const std::string& engineKind, const std::vector<int>& gpus, int threads) {
  if (image.ndim() != 2 || ivar.ndim() != 2 || image.shape(0) != ivar.shape(0) ||
      image.shape(1) != ivar.shape(1))
    throw InputError("img['image'] and img['ivar'] must be 2-D arrays of one shape");
  const auto t0 = std::chrono::steady_clock::now();
  Image img;
  img.ny = int(image.shape(0));
  img.nx = int(image.shape(1));
  img.pix = Array2D<double>(img.ny, img.nx);
  img.ivar = Array2D<double>(img.ny, img.nx);
  img.mask = Array2D<int32_t>(img.ny, img.nx);
  std::memcpy(img.pix.data.data(), image.data(), img.pix.size() * sizeof(double));
  std::memcpy(img.ivar.data.data(), ivar.data(), img.ivar.size() * sizeof(double));
  if (!mask.is_none()) {
    // desispec's rule for extraction: ivar * (mask == 0).
    auto m = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(mask);
    if (!m || m.ndim() != 2 || m.shape(0) != img.ny || m.shape(1) != img.nx)
      throw InputError("img['mask'] must be an integer array shaped like img['image']");
    std::memcpy(img.mask.data.data(), m.data(), img.mask.size() * sizeof(int32_t));
    for (std::size_t i = 0; i < img.mask.size(); ++i)
      if (img.mask.data[i] != 0) img.ivar.data[i] = 0;
  }
  img.sanitize();

  ExtractionRequest req;
  req.image = &img;
  req.psf = &psf;
  req.wave = WaveGrid::fromRange(wmin, wmax, dw);
  req.fiberMin = specmin;
  req.nFiber = nspec;
  req.params.bundlesize = bundlesize;
  req.params.nsubbundles = nsubbundles;
  req.params.nwavestep = nwavestep;
  req.params.wavepadFrac = wavepadFrac;
  req.params.pixpadFrac = pixpadFrac;
  req.params.regularize = regularize;
  req.params.psferr = psferr;
  req.params.validate();
  req.model = model;
  req.threads = threads;
  const double copyS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::shared_ptr<WarmEngine> warm = warmEngine(engineKind, gpus);
  ExtractionResult r;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(warm->mutex);
    ProgressSink progress;
    CancelToken cancel;
    r = warm->engine->extract(req, progress, cancel);
  }
  const py::ssize_t nf = r.nfiber, nw = r.nwave, nd = 2 * r.ndiag + 1;
  py::dict out;
  out["specflux"] = adopt(std::move(r.flux.data), {nf, nw});
  out["specivar"] = adopt(std::move(r.ivar.data), {nf, nw});
  out["mask"] = adopt(std::move(r.mask.data), {nf, nw});
  out["Rdiags"] = adopt(std::move(r.resolution.data), {nf, nd, nw});
  out["pixmask_fraction"] = adopt(std::move(r.pixmaskFraction.data), {nf, nw});
  out["chi2pix"] = adopt(std::move(r.chi2pix.data), {nf, nw});
  if (r.model)
    out["modelimage"] = adopt(std::move(r.model->data), {r.model->rows, r.model->cols});
  else
    out["modelimage"] = py::none();
  out["engine"] = r.engine;
  out["note"] = warm->note;
  out["extract_s"] = r.profile.wallNs * 1e-9;
  out["copy_s"] = copyS;
  out["profile_json"] = r.profile.toChromeTrace();
  int regularized = 0, failed = 0;
  for (const PatchDiagnostics& d : r.patches) {
    regularized += d.regularized;
    failed += d.failed;
  }
  out["patches"] = int(r.patches.size());
  out["regularized"] = regularized;
  out["failed"] = failed;
  return out;
}

py::dict readImg(const std::string& path) {
  Image img = readPreproc(path);
  py::dict out;
  const py::ssize_t ny = img.ny, nx = img.nx;
  out["image"] = adopt(std::move(img.pix.data), {ny, nx});
  out["ivar"] = adopt(std::move(img.ivar.data), {ny, nx});
  out["mask"] = adopt(std::move(img.mask.data), {ny, nx});
  py::dict hdr;
  for (const FitsCard& c : img.header.cards) hdr[py::str(c.key)] = c.value;
  out["imagehdr"] = hdr;
  out["path"] = path;
  out["nonfinite_pixels"] = img.nonFinitePixels;
  return out;
}

} // namespace

PYBIND11_MODULE(_spexlab, m) {
  m.doc() = "SpexLab engine bindings (use the spexlab package, not this module)";
  // Engine errors arrive as Python exceptions carrying the engine's message.
  static py::exception<SpexError> spexError(m, "SpexError", PyExc_RuntimeError);
  static py::exception<InputError> inputError(m, "InputError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      PyErr_SetString(inputError.ptr(), e.what());
    } catch (const SpexError& e) {
      PyErr_SetString(spexError.ptr(), e.what());
    }
  });

  py::class_<GaussHermitePsf>(m, "Psf", "A GAUSS-HERMITE PSF as the engine holds it")
      .def_readonly("path", &GaussHermitePsf::path)
      .def_readonly("nfiber", &GaussHermitePsf::nfiber)
      .def_readonly("fibermin", &GaussHermitePsf::fiberMin)
      .def_readonly("npix_x", &GaussHermitePsf::npixX)
      .def_readonly("npix_y", &GaussHermitePsf::npixY)
      .def_readonly("hsizey", &GaussHermitePsf::hsizeY)
      .def_readonly("psferr", &GaussHermitePsf::psfErr)
      .def_property_readonly("wavemin", &GaussHermitePsf::waveMin)
      .def_property_readonly("wavemax", &GaussHermitePsf::waveMax)
      .def_property_readonly("table_wavemin", [](const GaussHermitePsf& p) { return p.ghSigX.wavemin; })
      .def_property_readonly("table_wavemax", [](const GaussHermitePsf& p) { return p.ghSigX.wavemax; })
      .def("x", &GaussHermitePsf::x, py::arg("fiber"), py::arg("wavelength"))
      .def("y", &GaussHermitePsf::y, py::arg("fiber"), py::arg("wavelength"))
      .def("__repr__", [](const GaussHermitePsf& p) {
        return "<spexlab.Psf " + std::to_string(p.nfiber) + " fibers, " + std::to_string(p.npixX) +
               " x " + std::to_string(p.npixY) + " px" + (p.path.empty() ? "" : ", " + p.path) + ">";
      });

  m.def("read_psf_file", [](const std::string& path) { return readPsf(path); }, py::arg("path"),
        py::call_guard<py::gil_scoped_release>());
  m.def("psf_from_tables", &psfFromTables);
  m.def("read_img", &readImg, py::arg("path"));
  m.def("extract", &extract);
  m.def("rank_fiber_range", [](int fiberMin, int nFiber, int bundlesize, int rank, int size) {
    const FiberRange r = rankFiberRange(fiberMin, nFiber, bundlesize, rank, size);
    return py::make_tuple(r.fiberMin, r.nFiber);
  });
  m.def("default_threads", [] {
    const ThreadCount t = defaultThreadCount();
    return py::make_tuple(t.threads, t.source);
  });
  m.def("describe_gpus", &describeGpus);
  m.def("cuda_built", &cudaBuilt);
  m.attr("__version__") = SPEXLAB_VERSION;
}
