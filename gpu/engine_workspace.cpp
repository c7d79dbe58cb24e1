// Batch workspaces of the CUDA engine: sizes, allocation within the memory budget,
// release (engine_device.h).
#include "engine_device.h"

#include <algorithm>

namespace spex::gpu {

std::size_t bytesPerPatch(int n, int F, int nb, int maxBoxArea, bool noise, bool selected) {
  std::size_t d = (selected ? 1 : 2) * std::size_t(n) * n // A (, X)
                  + std::size_t(nb) * std::max(F - 1, 1) * nb // T
                  + std::size_t(F) * nb * nb         // C
                  + 4 * std::size_t(n)               // y, fw, pm, f
                  + 2 * std::size_t(maxBoxArea) + 1; // mbuf, cbuf, chi2
  if (noise) d += std::size_t(n) * n + n;            // E, W (syev workspace extra)
  return d * sizeof(double) + sizeof(double*) + 2 * sizeof(int);
}

bool reserveWorkspace(Workspace& w, CudaEngine::Device& dev, int cap, int n, int F, int nb,
                      int maxBoxArea, bool noise) {
  std::size_t* h = &dev.held;
  const std::size_t L = dev.limit;
  const std::size_t P = std::size_t(cap);
  const bool layoutChanged = w.n != n || w.F != F || w.nb != nb;
  if (w.selected) w.X.release(h); // never used: the selected inversion needs no L^-1
  bool ok = w.A.reserve(P * n * n, h, L) && (w.selected || w.X.reserve(P * n * n, h, L)) &&
            w.T.reserve(P * nb * std::max(F - 1, 1) * nb, h, L) && w.C.reserve(P * F * nb * nb, h, L) &&
            w.y.reserve(P * n, h, L) && w.fw.reserve(P * n, h, L) && w.pm.reserve(P * n, h, L) &&
            w.f.reserve(P * n, h, L) && w.mbuf.reserve(P * maxBoxArea, h, L) &&
            w.cbuf.reserve(P * maxBoxArea, h, L) && w.chi2.reserve(P, h, L) && w.Aptr.reserve(P, h, L) &&
            w.info.reserve(P, h, L) && w.info2.reserve(P, h, L);
  if (ok && noise) ok = w.E.reserve(P * n * n, h, L) && w.W.reserve(P * n, h, L);
  if (!ok) return false;
  dev.track();
  if (layoutChanged || cap > w.capacity) {
    // X's blocks above the diagonal are never written: they must stay zero for the
    // GEMMs that build L^-1.
    if (!w.selected) SPEX_CUDA(cudaMemsetAsync(w.X.get(), 0, w.X.capacity() * sizeof(double), w.stream));
    std::vector<double*> ptrs(P);
    for (std::size_t p = 0; p < P; ++p) ptrs[p] = w.A.get() + p * n * n;
    SPEX_CUDA(cudaMemcpyAsync(w.Aptr.get(), ptrs.data(), P * sizeof(double*),
                              cudaMemcpyHostToDevice, w.stream));
    SPEX_CUDA(cudaStreamSynchronize(w.stream));
  }
  if (noise) {
    std::size_t dBytes = 0, hBytes = 0;
    const cusolverStatus_t st = cusolverDnXsyevBatched_bufferSize(
        w.solver, w.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F,
        w.E.get(), n, CUDA_R_64F, w.W.get(), CUDA_R_64F, &dBytes, &hBytes, cap);
    w.syevLoop = st != CUSOLVER_STATUS_SUCCESS;
    if (w.syevLoop) {
      // This cuSOLVER has no batched syev for this size: one syevd per patch.
      int lwork = 0;
      checkCusolver(cusolverDnDsyevd_bufferSize(w.solver, CUSOLVER_EIG_MODE_VECTOR,
                                                CUBLAS_FILL_MODE_LOWER, n, w.E.get(), n,
                                                w.W.get(), &lwork),
                    "cusolverDnDsyevd_bufferSize");
      dBytes = std::size_t(lwork) * sizeof(double);
    }
    if (!w.syevWork.reserve(dBytes / sizeof(double) + 1, h, L)) return false;
    w.syevHostWork.resize(std::max<std::size_t>(hBytes, 1));
    dev.track();
  }
  w.capacity = cap;
  w.n = n;
  w.F = F;
  w.nb = nb;
  w.maxBoxArea = maxBoxArea;
  w.noise = noise;
  return true;
}

void releaseWorkspace(Workspace& w, CudaEngine::Device& dev) {
  std::size_t* h = &dev.held;
  for (DeviceArray<double>* a : {&w.A, &w.X, &w.T, &w.C, &w.y, &w.fw, &w.pm, &w.f, &w.mbuf,
                                 &w.cbuf, &w.chi2, &w.E, &w.W, &w.syevWork, &w.K, &w.KW, &w.kWork, &w.tile})
    a->release(h);
  w.Aptr.release(h);
  w.info.release(h);
  w.info2.release(h);
  w.capacity = 0;
  w.maxKept = 0;
}

void makeRoom(CudaEngine::Device& dev, std::size_t growth, std::size_t budget) {
  if (growth && dev.held + growth > budget)
    for (auto& w : dev.ws) releaseWorkspace(*w, dev);
}

bool reserveKeptEigh(Workspace& w, CudaEngine::Device& dev, int cap, int nb, int maxKept) {
  std::size_t* h = &dev.held;
  const std::size_t L = dev.limit;
  const std::size_t m = std::size_t(cap) * maxKept;
  if (!w.K.reserve(m * nb * nb, h, L) || !w.KW.reserve(m * nb, h, L) || !w.info2.reserve(m, h, L))
    return false;
  w.maxKept = maxKept;
  if (!w.cusolverEigh) {
    dev.track();
    return true;
  }
  std::size_t dBytes = 0, hBytes = 0;
  checkCusolver(cusolverDnXsyevBatched_bufferSize(w.solver, w.params, CUSOLVER_EIG_MODE_VECTOR,
                                                  CUBLAS_FILL_MODE_LOWER, nb, CUDA_R_64F,
                                                  w.K.get(), nb, CUDA_R_64F, w.KW.get(),
                                                  CUDA_R_64F, &dBytes, &hBytes, int64_t(m)),
                "cusolverDnXsyevBatched_bufferSize (fiber blocks)");
  if (!w.kWork.reserve(dBytes / sizeof(double) + 1, h, L)) return false;
  w.kHostWork.resize(std::max<std::size_t>(hBytes, 1));
  w.maxKept = maxKept;
  dev.track();
  return true;
}

} // namespace spex::gpu
