// cuBLAS, cuSOLVER and CUPTI opened on first use (cuda_libraries.h says why). Each
// function below has the signature of the toolkit header's declaration and forwards to
// the library's own, found with dlsym once; until its library is open it opens it.
#include "cuda_libraries.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#ifdef SPEXLAB_HAVE_CUPTI
#include <cupti.h>
#endif

#include <dlfcn.h>

#include <atomic>
#include <mutex>

#define SPEX_STR2(x) #x
#define SPEX_STR(x) SPEX_STR2(x)

namespace spex::gpu {
namespace {

struct Library {
  const char* soname;
  std::once_flag once;
  void* handle = nullptr;
  std::string error; // why it could not be opened
};

Library g_cublas{"libcublas.so." SPEX_STR(CUBLAS_VER_MAJOR), {}, nullptr, {}};
Library g_cusolver{"libcusolver.so." SPEX_STR(CUSOLVER_VER_MAJOR), {}, nullptr, {}};
#ifdef SPEXLAB_HAVE_CUPTI
Library g_cupti{SPEXLAB_CUPTI_SONAME, {}, nullptr, {}};
#endif

std::string dirOf(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

void* openByName(const std::string& soname, std::string* why) {
  std::string tried;
  for (const std::string& name : cudaLibraryCandidates(soname)) {
    // RTLD_LOCAL: nothing else in the process resolves against them; RTLD_NOW: a
    // library that lacks a symbol it needs fails here, not in the middle of a run.
    if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = dlerror();
    tried += (tried.empty() ? "" : "; ") + name + ": " + (e ? e : "not found");
  }
  if (why) *why = "cannot load " + soname + " (tried " + tried + ")";
  return nullptr;
}

void open(Library& lib) {
  std::call_once(lib.once, [&lib] { lib.handle = openByName(lib.soname, &lib.error); });
}

bool load(Library& lib, std::string* why) {
  open(lib);
  if (!lib.handle && why) *why = lib.error;
  return lib.handle != nullptr;
}

void* symbol(Library& lib, const char* name) {
  open(lib);
  return lib.handle ? dlsym(lib.handle, name) : nullptr;
}

} // namespace

std::vector<std::string> cudaLibraryCandidates(const std::string& soname) {
  std::vector<std::string> out{soname};
  // Beside the CUDA runtime this process uses (the toolkit's lib directory, or the
  // folder a bundle put it in).
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaGetDeviceCount), &info) && info.dli_fname) {
    const std::string dir = dirOf(info.dli_fname);
    if (!dir.empty()) out.push_back(dir + "/" + soname);
  }
#ifdef SPEXLAB_CUDA_LIBRARY_DIR
  out.push_back(std::string(SPEXLAB_CUDA_LIBRARY_DIR) + "/" + soname);
#endif
  for (std::size_t i = 1; i < out.size(); ++i) // drop repeats, keep the order
    for (std::size_t j = 0; j < i; ++j)
      if (out[j] == out[i]) {
        out.erase(out.begin() + long(i--));
        break;
      }
  return out;
}

bool openCudaLibrary(const std::string& soname, std::string* why) {
  return openByName(soname, why) != nullptr;
}

bool loadCudaMathLibraries(std::string* why) {
  return load(g_cublas, why) && load(g_cusolver, why);
}

bool loadCupti(std::string* why) {
#ifdef SPEXLAB_HAVE_CUPTI
  return load(g_cupti, why);
#else
  if (why) *why = "this build has no CUPTI";
  return false;
#endif
}

} // namespace spex::gpu

// One forwarding function per entry point: (library, return type, value returned when
// the library cannot be opened, name, parameters, arguments).
#define SPEX_FORWARD(lib, Ret, fail, name, params, args)                                    \
  extern "C" Ret name params {                                                               \
    using Fn = Ret(*) params;                                                                \
    static std::atomic<Fn> cached{nullptr};                                                  \
    Fn fn = cached.load(std::memory_order_acquire);                                          \
    if (!fn) {                                                                               \
      fn = reinterpret_cast<Fn>(spex::gpu::symbol(spex::gpu::lib, #name));                    \
      if (!fn) return fail;                                                                  \
      cached.store(fn, std::memory_order_release);                                           \
    }                                                                                        \
    return fn args;                                                                          \
  }

SPEX_FORWARD(g_cublas, cublasStatus_t, CUBLAS_STATUS_NOT_INITIALIZED, cublasCreate_v2,
             (cublasHandle_t* handle),
             (handle))
SPEX_FORWARD(g_cublas, cublasStatus_t, CUBLAS_STATUS_NOT_INITIALIZED, cublasDestroy_v2,
             (cublasHandle_t handle),
             (handle))
SPEX_FORWARD(g_cublas, cublasStatus_t, CUBLAS_STATUS_NOT_INITIALIZED, cublasDgemmStridedBatched,
             (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const double* alpha, const double* A, int lda, long long int strideA, const double* B, int ldb, long long int strideB, const double* beta, double* C, int ldc, long long int strideC, int batchCount),
             (handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batchCount))
SPEX_FORWARD(g_cublas, cublasStatus_t, CUBLAS_STATUS_NOT_INITIALIZED, cublasDgemm_v2,
             (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const double* alpha, const double* A, int lda, const double* B, int ldb, const double* beta, double* C, int ldc),
             (handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc))
SPEX_FORWARD(g_cublas, cublasStatus_t, CUBLAS_STATUS_NOT_INITIALIZED, cublasSetStream_v2,
             (cublasHandle_t handle, cudaStream_t streamId),
             (handle, streamId))
SPEX_FORWARD(g_cusolver, cusolverStatus_t, CUSOLVER_STATUS_NOT_INITIALIZED, cusolverDnCreate,
             (cusolverDnHandle_t *handle),
             (handle))
SPEX_FORWARD(g_cusolver, cusolverStatus_t, CUSOLVER_STATUS_NOT_INITIALIZED, cusolverDnCreateParams,
             (cusolverDnParams_t *params),
             (params))
SPEX_FORWARD(g_cusolver, cusolverStatus_t, CUSOLVER_STATUS_NOT_INITIALIZED, cusolverDnDestroy,
             (cusolverDnHandle_t handle),
             (handle))
SPEX_FORWARD(g_cusolver, cusolverStatus_t, CUSOLVER_STATUS_NOT_INITIALIZED, cusolverDnDestroyParams,
             (cusolverDnParams_t params),
             (params))
SPEX_FORWARD(g_cusolver, cusolverStatus_t, CUSOLVER_STATUS_NOT_INITIALIZED, cusolverDnDpotrfBatched,
             (cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, double * Aarray[], int lda, int * infoArray, int batchSize),
             (handle, uplo, n, Aarray, lda, infoArray, batchSize))
SPEX_FORWARD(g_cusolver, cusolverStatus_t, CUSOLVER_STATUS_NOT_INITIALIZED, cusolverDnDsyevd,
             (cusolverDnHandle_t handle, cusolverEigMode_t jobz, cublasFillMode_t uplo, int n, double * A, int lda, double * W, double * work, int lwork, int * info),
             (handle, jobz, uplo, n, A, lda, W, work, lwork, info))
SPEX_FORWARD(g_cusolver, cusolverStatus_t, CUSOLVER_STATUS_NOT_INITIALIZED, cusolverDnDsyevd_bufferSize,
             (cusolverDnHandle_t handle, cusolverEigMode_t jobz, cublasFillMode_t uplo, int n, const double * A, int lda, const double * W, int * lwork),
             (handle, jobz, uplo, n, A, lda, W, lwork))
SPEX_FORWARD(g_cusolver, cusolverStatus_t, CUSOLVER_STATUS_NOT_INITIALIZED, cusolverDnSetStream,
             (cusolverDnHandle_t handle, cudaStream_t streamId),
             (handle, streamId))
SPEX_FORWARD(g_cusolver, cusolverStatus_t, CUSOLVER_STATUS_NOT_INITIALIZED, cusolverDnXsyevBatched,
             (cusolverDnHandle_t handle, cusolverDnParams_t params, cusolverEigMode_t jobz, cublasFillMode_t uplo, int64_t n, cudaDataType dataTypeA, void * A, int64_t lda, cudaDataType dataTypeW, void * W, cudaDataType computeType, void * bufferOnDevice, size_t workspaceInBytesOnDevice, void * bufferOnHost, size_t workspaceInBytesOnHost, int * info, int64_t batchSize),
             (handle, params, jobz, uplo, n, dataTypeA, A, lda, dataTypeW, W, computeType, bufferOnDevice, workspaceInBytesOnDevice, bufferOnHost, workspaceInBytesOnHost, info, batchSize))
SPEX_FORWARD(g_cusolver, cusolverStatus_t, CUSOLVER_STATUS_NOT_INITIALIZED, cusolverDnXsyevBatched_bufferSize,
             (cusolverDnHandle_t handle, cusolverDnParams_t params, cusolverEigMode_t jobz, cublasFillMode_t uplo, int64_t n, cudaDataType dataTypeA, const void * A, int64_t lda, cudaDataType dataTypeW, const void * W, cudaDataType computeType, size_t * workspaceInBytesOnDevice, size_t * workspaceInBytesOnHost, int64_t batchSize),
             (handle, params, jobz, uplo, n, dataTypeA, A, lda, dataTypeW, W, computeType, workspaceInBytesOnDevice, workspaceInBytesOnHost, batchSize))
#ifdef SPEXLAB_HAVE_CUPTI
SPEX_FORWARD(g_cupti, CUptiResult, CUPTI_ERROR_NOT_INITIALIZED, cuptiActivityDisable,
             (CUpti_ActivityKind kind),
             (kind))
SPEX_FORWARD(g_cupti, CUptiResult, CUPTI_ERROR_NOT_INITIALIZED, cuptiActivityEnable,
             (CUpti_ActivityKind kind),
             (kind))
SPEX_FORWARD(g_cupti, CUptiResult, CUPTI_ERROR_NOT_INITIALIZED, cuptiActivityFlushAll,
             (uint32_t flag),
             (flag))
SPEX_FORWARD(g_cupti, CUptiResult, CUPTI_ERROR_NOT_INITIALIZED, cuptiActivityGetNextRecord,
             (uint8_t* buffer, size_t validBufferSizeBytes, CUpti_Activity **record),
             (buffer, validBufferSizeBytes, record))
SPEX_FORWARD(g_cupti, CUptiResult, CUPTI_ERROR_NOT_INITIALIZED, cuptiActivityGetNumDroppedRecords,
             (CUcontext context, uint32_t streamId, size_t *dropped),
             (context, streamId, dropped))
SPEX_FORWARD(g_cupti, CUptiResult, CUPTI_ERROR_NOT_INITIALIZED, cuptiActivityPopExternalCorrelationId,
             (CUpti_ExternalCorrelationKind kind, uint64_t *lastId),
             (kind, lastId))
SPEX_FORWARD(g_cupti, CUptiResult, CUPTI_ERROR_NOT_INITIALIZED, cuptiActivityPushExternalCorrelationId,
             (CUpti_ExternalCorrelationKind kind, uint64_t id),
             (kind, id))
SPEX_FORWARD(g_cupti, CUptiResult, CUPTI_ERROR_NOT_INITIALIZED, cuptiActivityRegisterCallbacks,
             (CUpti_BuffersCallbackRequestFunc funcBufferRequested, CUpti_BuffersCallbackCompleteFunc funcBufferCompleted),
             (funcBufferRequested, funcBufferCompleted))
// By hand: without CUPTI, the message names the library that could not be opened.
extern "C" CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  using Fn = CUptiResult (*)(CUptiResult, const char**);
  if (auto fn = reinterpret_cast<Fn>(spex::gpu::symbol(spex::gpu::g_cupti, "cuptiGetResultString")))
    return fn(result, str);
  if (str) *str = spex::gpu::g_cupti.error.c_str();
  return CUPTI_ERROR_NOT_INITIALIZED;
}
SPEX_FORWARD(g_cupti, CUptiResult, CUPTI_ERROR_NOT_INITIALIZED, cuptiGetStreamIdEx,
             (CUcontext context, CUstream stream, uint8_t perThreadStream, uint32_t *streamId),
             (context, stream, perThreadStream, streamId))
SPEX_FORWARD(g_cupti, CUptiResult, CUPTI_ERROR_NOT_INITIALIZED, cuptiGetTimestamp,
             (uint64_t *timestamp),
             (timestamp))
#endif
