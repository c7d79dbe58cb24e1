// Engine selection shared by spexlab-cli and the workbench: "cpu", "cuda" or "auto".
// Without a CUDA build, GPU or driver, "auto" falls back to the CPU engine and says
// why in one line; "cuda" fails with that reason.
#pragma once

#include "core/extract/engine.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace spex {

struct EngineChoice {
  std::unique_ptr<Engine> engine;
  std::string note; // one line for the user when auto fell back, else empty
  // What making it took, for a trace's "engine start" lane (times since makeEngine was
  // called; empty for the CPU engine): "load cuBLAS/cuSOLVER" (on its own thread),
  // "CUDA driver and contexts", "CUDA engine (streams, handles)".
  struct Step {
    std::string name;
    int64_t startNs = 0, endNs = 0;
    bool ownLane = false; // ran beside the others (on another thread)
  };
  std::vector<Step> steps;
};

// What the CLI and the workbench can set on an engine. The CUDA engine's other
// switches come from the environment, read here once (never inside the engine):
//   SPEXLAB_CUDA_MEMORY=4G      device-memory budget per GPU (when gpuMemoryBytes is 0)
//   SPEXLAB_CUDA_STREAMS=N      workspaces (streams) per GPU
//   SPEXLAB_CUDA_BATCH=P        patches per batch (within the budget)
//   SPEXLAB_CUDA_EIGH=tridiagonal|cusolver|jacobi|bisect  fiber-block eigensolver
//   SPEXLAB_CUDA_EIGH_REDUCE=block|warp   its tridiagonalisation by a 192-thread block or by
//                                          one warp a fiber block (A/B timing; the same to rounding)
//   SPEXLAB_CUDA_EIGH_ORTHO=ns|cholqr      bisect's pass 3: Newton-Schulz steps (default) or CholQR
//   SPEXLAB_CUDA_EIGH_VALUES=divfree|newton|ratio  bisect's eigenvalues in a kernel of their
//                                          own on the division-free Sturm count, bisecting to the
//                                          end (default) or with Newton's steps once isolated, or
//                                          by the ratio count inside the vector kernel
//   SPEXLAB_CUDA_EIGH_VECTORS=new|old      bisect's vector kernel: D+/D- in shared memory (default), or in the
//                                          workspace (old)
//   SPEXLAB_CUDA_CHOLESKY=tiled|fused|blocked|potrf  batched Cholesky: block columns by one
//                                          kernel, diagonal block by tiles (default) or in one
//                                          sweep, by four launches, or cuSOLVER
//   SPEXLAB_CUDA_SOLVER=auto|dense         blocked Cholesky and L^-1 on the block band, or dense
//   SPEXLAB_CUDA_INVERSE=selected|full     fiber blocks of C by selected inversion on the band (no L^-1), or from L^-1
//   SPEXLAB_CUDA_SELINV=fused|steps        that selected inversion by one kernel a patch (G and the C
//                                          panel in shared memory) or by GEMMs and a mirror kernel
//                                          per block column (A/B timing; the same to rounding)
//   SPEXLAB_CUDA_GEMM=tensor|cublas        batched GEMMs by the engine's own fp64 tensor-core kernel
//                                          (default: no cuBLAS handle, no warm-up) or by cuBLAS
//   SPEXLAB_CUDA_NORMAL=tree|lean|pairs|tile|scan  normal equations on the factor's band by a block
//                                          per unknown, its sums by one thread each from shared
//                                          memory (default), or by warp shuffles with fewer
//                                          instructions a pair, or as before, or per 8 unknowns (no
//                                          memsets either), or the older kernel (A/B timing; all
//                                          the same to the bit)
//   SPEXLAB_CUDA_SPOTS=warp|block          the frame's spot table by a warp per spot (default) or a
//                                          block per spot (A/B timing; the same stamps)
//   SPEXLAB_CUDA_LOAD=parallel|serial      cuBLAS/cuSOLVER opened beside the driver's start
//                                          (default) or before it (A/B timing)
struct EngineOptions {
  std::vector<int> gpus;          // CUDA device ordinals (empty: all visible)
  // CUDA device-memory budget per GPU in bytes (0: SPEXLAB_CUDA_MEMORY, else the
  // engine's default, 4 GiB for a full frame). `--gpu-memory 2G` maps here through
  // parseByteSize().
  std::size_t gpuMemoryBytes = 0;
};

// Throws InputError for an unknown kind or a bad SPEXLAB_CUDA_* value, and GpuError
// when "cuda" cannot be had (no driver or GPU, or cuBLAS/cuSOLVER cannot be loaded: the
// message names the library and the places tried). Making a CUDA engine opens cuBLAS
// and cuSOLVER on a second thread while the driver and the GPUs' contexts start; no
// other path loads them (gpu/cuda_libraries.h).
EngineChoice makeEngine(const std::string& kind, const EngineOptions& options);
// gpus: device ordinals to use (empty: all visible).
EngineChoice makeEngine(const std::string& kind, const std::vector<int>& gpus = {});

// The one "auto" rule: "cuda" when this build has the CUDA engine and a usable GPU is
// found, else "cpu" with the reason in *note (one line for the user). Other kinds are
// returned as they are ("both" is the workbench's cpu + cuda, see engineKindsFor).
std::string resolveEngineKind(const std::string& kind, std::string* note = nullptr);
// The engines a run with this kind uses, in order: "both" -> cpu, cuda; "auto" as
// resolveEngineKind; "" -> cpu.
std::vector<std::string> engineKindsFor(const std::string& kind, std::string* note = nullptr);

// Engines kept alive between requests, one per name ("cpu", "cuda"): the CPU engine
// keeps its plan and per-thread workspaces, the CUDA engine its context, handles and
// device memory (within its budget). Made on first use. One request at a time per
// engine: lease() holds the engine's lock until the Lease goes.
class EngineRegistry {
public:
  struct Lease {
    Engine* engine = nullptr;
    std::unique_lock<std::mutex> lock;
    Engine* operator->() const { return engine; }
    Engine& operator*() const { return *engine; }
  };
  // kind: "cpu", "cuda" or "auto" (resolved first). Throws as makeEngine does.
  Lease lease(const std::string& kind);
  // Drops every engine not in use (frees device memory).
  void clear();
  // How many engines this registry has made so far (a warm engine is made once; tests
  // check that a second request reuses it).
  int enginesMade() const { return m_made.load(); }

private:
  struct Slot {
    std::mutex use;
    std::unique_ptr<Engine> engine;
  };
  std::mutex m_mutex;
  std::map<std::string, std::unique_ptr<Slot>> m_slots;
  std::atomic<int> m_made{0};
};

// "4G", "4GiB", "512M", "1.5G", "4294967296" -> bytes (K/M/G/T are powers of 1024).
// Throws InputError naming `what` (e.g. "--gpu-memory") for anything else or zero.
std::size_t parseByteSize(const std::string& text, const std::string& what);

// --gpu-memory: a size parseByteSize() reads ("6G"), or a fraction in (0, 1) of the
// smallest total memory among `gpus` (all visible when empty), e.g. "0.2". Throws
// InputError naming the option for anything else, and for a fraction without a GPU.
std::size_t gpuMemoryBudget(const std::string& text, const std::vector<int>& gpus,
                            const std::string& what = "--gpu-memory");

// GPUs the CUDA engine can use (0 without CUDA, driver or device).
int visibleGpuCount();

// "none: <reason>" or the GPUs found, for Help -> About and `spexlab-cli --version`.
std::string describeGpus();
bool cudaBuilt();

// Releases the CUDA engine's device state ahead of the process's end: destroys
// `engine` (streams, handles, device memory) and then every GPU's primary context, so
// that an exiting `spexlab-cli` can do it while it writes its outputs instead of after.
// Only for a process that makes no further CUDA calls. The CPU engine is just deleted.
void releaseEngineForExit(std::unique_ptr<Engine> engine);

// Peak device memory (bytes) a CUDA engine has held on each of its GPUs; empty for
// other engines.
std::vector<std::size_t> enginePeakDeviceBytes(const Engine& engine);

// One line per GPU on how the CUDA engine split its memory budget in its last
// extraction ("GPU 0: budget 4.00 GiB = frame arrays 1.52 + 2 streams x 256 patches
// 2.31 GiB"); empty for other engines.
std::vector<std::string> engineMemoryNotes(const Engine& engine);

// The GPU's measured ceilings (cuBLAS DGEMM FLOP/s, device copy bytes/s); throws
// GpuError without CUDA.
struct GpuCeilings {
  double dgemmFlops = 0, copyBytesPerS = 0;
};
GpuCeilings measureGpuCeilings(int device);

} // namespace spex
