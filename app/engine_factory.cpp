#include "engine_factory.h"

#include "core/errors.h"
#include "core/extract/cpu_engine.h"

#include <cstdlib>

#ifdef SPEXLAB_HAVE_CUDA
#include "gpu/cuda_engine.h"
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

namespace {
// SPEXLAB_CPU_SOLVER (auto|dense|banded), read once here: how the CPU engine factors
// the normal equations (core/extract/banded_solver.h). Unset or empty: auto.
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
  return o;
}
} // namespace

EngineChoice makeEngine(const std::string& kind, const std::vector<int>& gpus) {
  EngineChoice c;
  if (kind == "cpu") {
    c.engine = std::make_unique<CpuEngine>(cpuOptionsFromEnvironment());
    return c;
  }
  if (kind != "cuda" && kind != "auto")
    throw InputError("unknown engine '" + kind + "' (expected cpu, cuda or auto)");
#ifdef SPEXLAB_HAVE_CUDA
  std::string why;
  if (cudaAvailable(&why)) {
    c.engine = makeCudaEngine(gpus);
    return c;
  }
#else
  (void)gpus;
  const std::string why = "this build has no CUDA engine";
#endif
  if (kind == "cuda") throw GpuError("--engine cuda: no usable GPU: " + why);
  c.engine = std::make_unique<CpuEngine>(cpuOptionsFromEnvironment());
  c.note = "no usable GPU (" + why + "); using the CPU engine";
  return c;
}

std::vector<std::size_t> enginePeakDeviceBytes(const Engine& engine) {
#ifdef SPEXLAB_HAVE_CUDA
  if (const auto* c = dynamic_cast<const CudaEngine*>(&engine)) return c->peakDeviceBytes();
#else
  (void)engine;
#endif
  return {};
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

} // namespace spex
