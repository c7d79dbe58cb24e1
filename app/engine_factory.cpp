#include "engine_factory.h"

#include "core/errors.h"
#include "core/extract/cpu_engine.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <chrono>
#include <future>

#ifdef SPEXLAB_HAVE_CUDA
#include "gpu/cuda_engine.h"
#include "gpu/cuda_libraries.h"

#include <cuda_runtime_api.h>
#endif

namespace spex {

bool cudaBuilt() {
#ifdef SPEXLAB_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::string describeGpus() {
#ifdef SPEXLAB_HAVE_CUDA
  std::string why;
  if (!cudaAvailable(&why)) return "none (" + why + ")";
  std::string out;
  for (const GpuInfo& g : listGpus()) {
    if (!out.empty()) out += "; ";
    out += "cuda:" + std::to_string(g.device) + " " + g.name;
  }
  return out;
#else
  return "none (built without CUDA)";
#endif
}

std::size_t parseByteSize(const std::string& text, const std::string& what) {
  const auto bad = [&] {
    return InputError(what + " '" + text + "': expected a size like 4G, 512M or 4294967296 bytes");
  };
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    throw bad();
  }
  std::string unit = text.substr(pos);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();
  double scale = 1;
  if (unit.size() > 1) throw bad();
  if (!unit.empty()) {
    switch (unit[0]) {
    case 'k': case 'K': scale = 1024.0; break;
    case 'm': case 'M': scale = 1024.0 * 1024; break;
    case 'g': case 'G': scale = 1024.0 * 1024 * 1024; break;
    case 't': case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
    default: throw bad();
    }
  }
  const double bytes = v * scale;
  if (!std::isfinite(bytes) || bytes < 1 || bytes > 1e18) throw bad();
  return std::size_t(bytes);
}

#ifdef SPEXLAB_HAVE_CUDA
namespace {

// SPEXLAB_CUDA_* switches, read once per engine made (EngineOptions comment).
CudaEngineOptions cudaOptions(const EngineOptions& eo) {
  CudaEngineOptions o;
  o.gpus = eo.gpus;
  auto env = [](const char* name) -> std::string {
    const char* e = std::getenv(name);
    return e ? std::string(e) : std::string();
  };
  auto count = [&](const char* name, int lo, int hi) {
    const std::string v = env(name);
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || n < lo || n > hi)
      throw InputError(std::string(name) + "='" + v + "': expected a whole number from " +
                       std::to_string(lo) + " to " + std::to_string(hi));
    return int(n);
  };
  o.memoryBudgetBytes = eo.gpuMemoryBytes;
  if (!o.memoryBudgetBytes && !env("SPEXLAB_CUDA_MEMORY").empty())
    o.memoryBudgetBytes = parseByteSize(env("SPEXLAB_CUDA_MEMORY"), "SPEXLAB_CUDA_MEMORY");
  if (!env("SPEXLAB_CUDA_STREAMS").empty()) o.streams = count("SPEXLAB_CUDA_STREAMS", 1, 16);
  if (!env("SPEXLAB_CUDA_BATCH").empty()) o.maxBatch = count("SPEXLAB_CUDA_BATCH", 1, 65535);
  // The index of the variable's value in `values`; -1 when it is unset or empty. Any
  // other value is an InputError naming the variable and the values it may take.
  auto pick = [&](const char* name, std::initializer_list<const char*> values) {
    const std::string e = env(name);
    if (e.empty()) return -1;
    std::string expected;
    int i = 0;
    for (const char* v : values) {
      if (e == v) return i;
      expected += std::string(i == 0 ? "" : i + 1 == int(values.size()) ? " or " : ", ") + v;
      ++i;
    }
    throw InputError(std::string(name) + "='" + e + "': expected " + expected);
  };
  using O = CudaEngineOptions;
  if (const int k = pick("SPEXLAB_CUDA_EIGH", {"tridiagonal", "cusolver", "jacobi", "bisect"}); k >= 0)
    o.eigh = std::array{O::Eigh::Tridiagonal, O::Eigh::Cusolver, O::Eigh::Jacobi, O::Eigh::Bisect}[k];
  if (const int k = pick("SPEXLAB_CUDA_EIGH_REDUCE", {"block", "warp"}); k >= 0)
    o.eighReduce = k == 1 ? O::EighReduce::Warp : O::EighReduce::Block;
  if (const int k = pick("SPEXLAB_CUDA_EIGH_ORTHO", {"ns", "cholqr"}); k >= 0) o.newtonSchulzEigh = k == 0;
  if (const int k = pick("SPEXLAB_CUDA_EIGH_VALUES", {"divfree", "newton", "ratio"}); k >= 0)
    o.eighValues = std::array{O::EighValues::DivisionFree, O::EighValues::Newton, O::EighValues::Ratio}[k];
  if (const int k = pick("SPEXLAB_CUDA_EIGH_VECTORS", {"new", "old"}); k >= 0) o.sharedEighVectors = k == 0;
  if (const int k = pick("SPEXLAB_CUDA_CHOLESKY", {"tiled", "fused", "blocked", "potrf"}); k >= 0) {
    o.blockedCholesky = k != 3;
    o.choleskyColumns = std::array{O::CholeskyColumns::Tiled, O::CholeskyColumns::Fused,
                                   O::CholeskyColumns::Steps, O::CholeskyColumns::Tiled}[k];
  }
  if (const int k = pick("SPEXLAB_CUDA_SOLVER", {"auto", "dense"}); k >= 0) o.bandedSolve = k == 0;
  if (const int k = pick("SPEXLAB_CUDA_INVERSE", {"selected", "full"}); k >= 0) o.selectedInverse = k == 0;
  if (const int k = pick("SPEXLAB_CUDA_SELINV", {"fused", "steps"}); k >= 0) o.fusedSelectedInverse = k == 0;
  if (const int k = pick("SPEXLAB_CUDA_NORMAL", {"tree", "lean", "pairs", "tile", "scan"}); k >= 0)
    o.normalKernel = std::array{O::NormalKernel::Tree, O::NormalKernel::Lean, O::NormalKernel::Pairs,
                                O::NormalKernel::Tile, O::NormalKernel::Scan}[k];
  if (const int k = pick("SPEXLAB_CUDA_SPOTS", {"warp", "block"}); k >= 0) o.spotWarps = k == 0;
  if (const int k = pick("SPEXLAB_CUDA_GEMM", {"tensor", "cublas"}); k >= 0)
    o.gemm = k == 1 ? O::Gemm::Cublas : O::Gemm::Tensor;
  if (const int k = pick("SPEXLAB_CUDA_WARMUP", {"0", "1"}); k >= 0) o.warmUp = k == 1;
  if (const int k = pick("SPEXLAB_CUDA_RESERVE", {"0", "1"}); k >= 0) o.reserveAhead = k == 1;
  if (const int k = pick("SPEXLAB_CUDA_OVERLAP", {"0", "1"}); k >= 0) o.overlapEnds = k == 1;
  if (const int k = pick("SPEXLAB_CUDA_PLANAHEAD", {"0", "1"}); k >= 0) o.planAhead = k == 1;
  if (const int k = pick("SPEXLAB_CUDA_KEEPRESULT", {"0", "1"}); k >= 0) o.keepResult = k == 1;
  return o;
}

} // namespace
#endif
namespace {
// SPEXLAB_CPU_SOLVER (auto|dense|banded), read once here: how the CPU engine factors
// the normal equations (core/extract/banded_solver.h). Unset or empty: auto. And
// SPEXLAB_CPU_SPOT_CACHE (0|1, core/extract/spot_cache.h).
CpuEngineOptions cpuOptionsFromEnvironment() {
  CpuEngineOptions o;
  const char* v = std::getenv("SPEXLAB_CPU_SOLVER");
  const std::string s = v ? v : "";
  if (s.empty() || s == "auto")
    o.solver = NormalSolver::Auto;
  else if (s == "dense")
    o.solver = NormalSolver::Dense;
  else if (s == "banded")
    o.solver = NormalSolver::Banded;
  else
    throw InputError("SPEXLAB_CPU_SOLVER='" + s + "' (expected auto, dense or banded)");
  // SPEXLAB_CPU_SPOT_CACHE=0 evaluates every patch's spots itself (for A/B timing; the
  // results are the same bit for bit). Unset, empty or 1: the per-request spot cache.
  const char* c = std::getenv("SPEXLAB_CPU_SPOT_CACHE");
  const std::string cs = c ? c : "";
  if (cs == "0")
    o.spotCache = false;
  else if (!cs.empty() && cs != "1")
    throw InputError("SPEXLAB_CPU_SPOT_CACHE='" + cs + "' (expected 0 or 1)");
  // SPEXLAB_CPU_EIGH (twisted|ql): the fiber blocks' eigenvectors by twisted
  // factorizations and CholQR, or by QL's rotations (core/extract/sym_eigen.h). Unset or
  // empty: twisted.
  const char* eh = std::getenv("SPEXLAB_CPU_EIGH");
  const std::string es = eh ? eh : "";
  if (es.empty() || es == "twisted")
    o.eigenVectors = EigenVectors::Twisted;
  else if (es == "ql")
    o.eigenVectors = EigenVectors::QL;
  else
    throw InputError("SPEXLAB_CPU_EIGH='" + es + "' (expected ql or twisted)");
  return o;
}
} // namespace

int visibleGpuCount() {
#ifdef SPEXLAB_HAVE_CUDA
  std::string why;
  return cudaAvailable(&why) ? int(listGpus().size()) : 0;
#else
  return 0;
#endif
}

std::size_t gpuMemoryBudget(const std::string& text, const std::vector<int>& gpus,
                            const std::string& what) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const bool plain = end != text.c_str() && *end == '\0';
  if (!plain || v >= 1) return parseByteSize(text, what);
  if (!(v > 0)) throw InputError(what + " '" + text + "': a fraction must lie in (0, 1)");
#ifdef SPEXLAB_HAVE_CUDA
  std::string why;
  if (!cudaAvailable(&why))
    throw InputError(what + " '" + text + "' is a fraction of GPU memory, but there is no usable GPU (" + why + ")");
  std::size_t total = 0;
  for (const GpuInfo& g : listGpus())
    if (gpus.empty() || std::find(gpus.begin(), gpus.end(), g.device) != gpus.end())
      total = total ? std::min(total, g.totalBytes) : g.totalBytes;
  if (!total) throw InputError(what + " '" + text + "': none of the chosen GPUs is visible");
  return std::size_t(v * double(total));
#else
  (void)gpus;
  throw InputError(what + " '" + text + "' is a fraction of GPU memory, but this build has no CUDA engine");
#endif
}

EngineChoice makeEngine(const std::string& kind, const std::vector<int>& gpus) {
  EngineOptions o;
  o.gpus = gpus;
  return makeEngine(kind, o);
}

std::string resolveEngineKind(const std::string& kind, std::string* note) {
  if (note) note->clear();
  if (kind != "auto") return kind;
#ifdef SPEXLAB_HAVE_CUDA
  std::string why;
  if (cudaAvailable(&why) && gpu::loadCudaMathLibraries(&why)) return "cuda";
#else
  const std::string why = "this build has no CUDA engine";
#endif
  if (note) *note = "no usable GPU (" + why + "); using the CPU engine";
  return "cpu";
}

std::vector<std::string> engineKindsFor(const std::string& kind, std::string* note) {
  if (note) note->clear();
  if (kind == "both") return {"cpu", "cuda"};
  if (kind.empty()) return {"cpu"};
  return {resolveEngineKind(kind, note)};
}

EngineRegistry::Lease EngineRegistry::lease(const std::string& kind) {
  const std::string name = resolveEngineKind(kind);
  Slot* slot = nullptr;
  {
    std::lock_guard lock(m_mutex);
    auto& s = m_slots[name];
    if (!s) s = std::make_unique<Slot>();
    slot = s.get();
  }
  Lease l;
  l.lock = std::unique_lock(slot->use);
  if (!slot->engine) {
    slot->engine = makeEngine(name).engine; // throws: nothing kept
    ++m_made;
  }
  l.engine = slot->engine.get();
  return l;
}

void EngineRegistry::clear() {
  std::lock_guard lock(m_mutex);
  for (auto it = m_slots.begin(); it != m_slots.end();) {
    std::unique_lock use(it->second->use, std::try_to_lock);
    if (use.owns_lock()) {
      use.unlock();
      it = m_slots.erase(it);
    } else {
      ++it;
    }
  }
}

EngineChoice makeEngine(const std::string& kind, const EngineOptions& options) {
  EngineChoice c;
  if (kind == "cpu") {
    c.engine = std::make_unique<CpuEngine>(cpuOptionsFromEnvironment());
    return c;
  }
  if (kind != "cuda" && kind != "auto")
    throw InputError("unknown engine '" + kind + "' (expected cpu, cuda or auto)");
#ifdef SPEXLAB_HAVE_CUDA
  const CudaEngineOptions co = cudaOptions(options); // bad switches fail on any machine
  // cuBLAS and cuSOLVER are opened on a thread of their own (~0.1 s of page faults)
  // while this one starts the driver and the GPUs' primary contexts; the engine's
  // handles need both. For "cuda" from the start; for "auto" once a GPU is found (a
  // machine without one does not load them at all).
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const auto since = [t0] {
    return int64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  };
  struct Loaded {
    bool ok = false;
    std::string why;
    int64_t startNs = 0, endNs = 0;
  };
  std::future<Loaded> libs;
  const auto startLoading = [&] {
    libs = std::async(std::launch::async, [since] {
      Loaded l;
      l.startNs = since();
      l.ok = gpu::loadCudaMathLibraries(&l.why);
      l.endNs = since();
      return l;
    });
  };
  // SPEXLAB_CUDA_LOAD=serial opens them first and then starts the driver, on this
  // thread (for A/B timing of the overlap; docs/benchmarks.md, "Cold process").
  const char* loadEnv = std::getenv("SPEXLAB_CUDA_LOAD");
  const std::string loadMode = loadEnv ? loadEnv : "";
  if (!loadMode.empty() && loadMode != "parallel" && loadMode != "serial")
    throw InputError("SPEXLAB_CUDA_LOAD='" + loadMode + "': expected parallel or serial");
  if (kind == "cuda") {
    startLoading();
    if (loadMode == "serial") libs.wait();
  }
  std::string why;
  const bool gpuFound = cudaAvailable(&why);
  if (gpuFound && !libs.valid()) startLoading();
  if (gpuFound) {
    std::vector<int> gpus = co.gpus;
    int count = 0;
    if (gpus.empty() && cudaGetDeviceCount(&count) == cudaSuccess)
      for (int d = 0; d < count; ++d) gpus.push_back(d);
    for (int d : gpus) // the primary contexts; the engine checks the ordinals
      if (cudaSetDevice(d) == cudaSuccess) cudaFree(nullptr);
  }
  cudaGetLastError();
  const int64_t contextNs = since();
  Loaded loaded;
  if (libs.valid()) {
    loaded = libs.get();
    c.steps.push_back({"load cuBLAS/cuSOLVER", loaded.startNs, loaded.endNs, true});
  }
  c.steps.push_back({"CUDA driver and contexts", 0, contextNs, false});
  if (gpuFound && !loaded.ok) {
    if (kind == "cuda")
      throw GpuError("--engine cuda: the CUDA engine needs cuBLAS and cuSOLVER: " + loaded.why +
                     " (install the CUDA toolkit's math libraries or put their folder on LD_LIBRARY_PATH)");
    c.engine = std::make_unique<CpuEngine>(cpuOptionsFromEnvironment());
    c.note = "the CUDA engine cannot start (" + loaded.why + "); using the CPU engine";
    c.steps.clear();
    return c;
  }
  if (gpuFound) {
    const int64_t s = since();
    c.engine = makeCudaEngine(co);
    c.steps.push_back({"CUDA engine (streams, handles)", s, since(), false});
    return c;
  }
  if (kind == "cuda") throw GpuError("--engine cuda: no usable GPU: " + why);
  c.engine = std::make_unique<CpuEngine>(cpuOptionsFromEnvironment());
  c.note = "no usable GPU (" + why + "); using the CPU engine";
  c.steps.clear();
  return c;
#else
  (void)options;
  if (kind == "cuda") throw GpuError("--engine cuda: no usable GPU: this build has no CUDA engine");
  std::string note;
  resolveEngineKind(kind, &note);
  c.engine = std::make_unique<CpuEngine>(cpuOptionsFromEnvironment());
  c.note = note;
  return c;
#endif
}

std::vector<std::size_t> enginePeakDeviceBytes(const Engine& engine) {
#ifdef SPEXLAB_HAVE_CUDA
  if (const auto* c = dynamic_cast<const CudaEngine*>(&engine)) return c->peakDeviceBytes();
#else
  (void)engine;
#endif
  return {};
}

std::vector<std::string> engineMemoryNotes(const Engine& engine) {
  std::vector<std::string> out;
#ifdef SPEXLAB_HAVE_CUDA
  if (const auto* c = dynamic_cast<const CudaEngine*>(&engine))
    for (const CudaMemoryPlan& p : c->memoryPlans()) {
      if (!p.budgetBytes) continue;
      const double GiB = double(1ull << 30);
      char buf[320];
      std::snprintf(buf, sizeof buf,
                    "GPU %d: budget %.2f GiB; frame arrays %.2f GiB + %d stream%s x %d patches "
                    "(%.1f MiB each, estimated) %.2f GiB; %d batches, %d on the block band (widest "
                    "fiber coupling %d)",
                    p.device, double(p.budgetBytes) / GiB, double(p.fixedBytes) / GiB, p.streams,
                    p.streams == 1 ? "" : "s", p.batch, double(p.perPatchBytes) / double(1 << 20),
                    double(p.batchBytes) / GiB, p.batches, p.bandedBatches, p.maxCoupling);
      out.push_back(buf);
    }
#else
  (void)engine;
#endif
  return out;
}

GpuCeilings measureGpuCeilings(int device) {
#ifdef SPEXLAB_HAVE_CUDA
  const DeviceCeilings d = measureDeviceCeilings(device);
  return {d.dgemmFlops, d.copyBytesPerS};
#else
  (void)device;
  throw GpuError("this build has no CUDA engine");
#endif
}

void releaseEngineForExit(std::unique_ptr<Engine> engine) {
#ifdef SPEXLAB_HAVE_CUDA
  const bool cuda = dynamic_cast<const CudaEngine*>(engine.get()) != nullptr;
  engine.reset();
  if (!cuda) return;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  for (int d = 0; d < n; ++d)
    if (cudaSetDevice(d) == cudaSuccess) cudaDeviceReset();
  cudaGetLastError();
#else
  engine.reset();
#endif
}

} // namespace spex
