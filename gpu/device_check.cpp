#include "device_check.h"

#include "core/plan/patch_plan.h"

#include "kernels.h"
#include "psf_pack.h"

#include "core/errors.h"
#include "cuda_engine.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace spex::gpu {

namespace {

// A device copy of a host vector, freed on scope exit.
template <class T>
struct DevVec {
  T* p = nullptr;
  std::size_t n = 0;
  explicit DevVec(std::size_t count) : n(count) {
    SPEX_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), std::max<std::size_t>(n, 1) * sizeof(T)));
  }
  explicit DevVec(const std::vector<T>& v) : DevVec(v.size()) {
    SPEX_CUDA(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DevVec() { cudaFree(p); }
  std::vector<T> host() const {
    std::vector<T> v(n);
    SPEX_CUDA(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

} // namespace

std::vector<double> deviceLegendreSums(const std::vector<double>& coeff,
                                       const std::vector<double>& u) {
  DevVec<double> c(coeff), du(u), out(u.size());
  launchLegendreSums(c.p, int(coeff.size()), du.p, int(u.size()), out.p, nullptr);
  SPEX_CUDA(cudaDeviceSynchronize());
  return out.host();
}

std::vector<double> deviceGaussHermiteBasis(int deg, int hsize, const std::vector<double>& d,
                                            const std::vector<double>& sigma) {
  DevVec<double> dd(d), ds(sigma), out(d.size() * (deg + 1) * (2 * hsize + 1));
  launchGaussHermiteBasis(deg, hsize, dd.p, ds.p, int(d.size()), out.p, nullptr);
  SPEX_CUDA(cudaDeviceSynchronize());
  return out.host();
}

std::vector<Spot> deviceSpots(const GaussHermitePsf& psf, const std::vector<int>& fibers,
                              const std::vector<double>& waves, bool warpPerSpot) {
  const PackedPsf packed = packPsf(psf);
  DevVec<double> dpool(packed.pool);
  DevVec<DevLegendre> dsets(packed.sets);
  const DevPsf dp = describePsf(psf, dpool.p, dsets.p);
  const int npix = psf.spotNx() * psf.spotNy();
  DevVec<int> df(fibers);
  DevVec<double> dw(waves), dv(fibers.size() * npix);
  DevVec<int2> dc(fibers.size());
  launchSpotList(dp, df.p, dw.p, int(fibers.size()), dv.p, dc.p, nullptr,
                 warpPerSpot ? SpotKernel::Warp : SpotKernel::Block);
  SPEX_CUDA(cudaDeviceSynchronize());
  const std::vector<double> v = dv.host();
  const std::vector<int2> c = dc.host();
  std::vector<Spot> out(fibers.size());
  for (std::size_t i = 0; i < fibers.size(); ++i) {
    Spot& s = out[i];
    s.nx = psf.spotNx();
    s.ny = psf.spotNy();
    s.xc = c[i].x;
    s.yc = c[i].y;
    s.v.assign(v.begin() + i * npix, v.begin() + (i + 1) * npix);
  }
  return out;
}

void devicePlanCorners(const GaussHermitePsf& psf, double wmin, double dw, PlanCorners& c) {
  const PackedPsf packed = packPsf(psf, PsfPart::TracesOnly);
  DevVec<double> dpool(packed.pool);
  DevVec<DevLegendre> dsets(packed.sets);
  const DevPsf dp = describePsf(psf, dpool.p, dsets.p);
  const int nf = c.f1 - c.f0, nk = c.k1 - c.k0;
  const std::size_t N = std::size_t(std::max(nf, 0)) * std::max(nk, 0);
  DevVec<int> dx(std::max<std::size_t>(N, 1)), dy(std::max<std::size_t>(N, 1));
  launchCornerTable(dp, c.f0, nf, c.k0, nk, wmin, dw, dx.p, dy.p, nullptr);
  SPEX_CUDA(cudaDeviceSynchronize());
  c.x = dx.host();
  c.y = dy.host();
  c.x.resize(N);
  c.y.resize(N);
}

std::vector<PatchExtents> devicePatchExtents(const PatchPlan& skeleton, const PlanCorners& c) {
  const int count = int(skeleton.patches.size());
  std::vector<int> win(5 * std::size_t(count));
  for (int i = 0; i < count; ++i) {
    const Patch& p = skeleton.patches[std::size_t(i)];
    int* w = win.data() + 5 * std::size_t(i);
    w[0] = p.fiberPad0, w[1] = p.nfiberPad, w[2] = p.wavePad0, w[3] = p.nwavePad, w[4] = p.wave0;
  }
  DevVec<int> dx(c.x), dy(c.y), dwin(win), dout(8 * std::size_t(std::max(count, 1)));
  launchPatchExtents(dx.p, dy.p, c.f0, c.k0, c.k1 - c.k0, dwin.p, count, skeleton.params.nwavestep, dout.p, nullptr);
  SPEX_CUDA(cudaDeviceSynchronize());
  const std::vector<int> e = dout.host();
  std::vector<PatchExtents> out(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < out.size(); ++i)
    for (int j = 0; j < 4; ++j) {
      out[i].pad[j] = e[8 * i + std::size_t(j)];
      out[i].core[j] = e[8 * i + 4 + std::size_t(j)];
    }
  return out;
}

} // namespace spex::gpu

#include <cusolverDn.h>

#include <cmath>
#include <random>

namespace spex::gpu {

BlockEighComparison compareBlockEigh(int nb, int count, int repeat, unsigned seed) {
  BlockEighComparison r;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  std::vector<double> C(std::size_t(count) * nb * nb), B(std::size_t(nb) * nb);
  for (int m = 0; m < count; ++m) {
    for (double& v : B) v = g(rng);
    double* c = C.data() + std::size_t(m) * nb * nb;
    for (int i = 0; i < nb; ++i)
      for (int j = 0; j <= i; ++j) {
        double s = i == j ? 1e-6 : 0.0;
        for (int k = 0; k < nb; ++k) s += B[k + i * nb] * B[k + j * nb];
        c[i + j * nb] = c[j + i * nb] = s;
      }
  }
  DevVec<double> dC(C), dA(C.size()), wJ(std::size_t(count) * nb), wS(std::size_t(count) * nb);
  cudaEvent_t e0, e1;
  SPEX_CUDA(cudaEventCreate(&e0));
  SPEX_CUDA(cudaEventCreate(&e1));
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> tj, ts;
  for (int it = 0; it <= repeat; ++it) {
    SPEX_CUDA(cudaEventRecord(e0));
    launchJacobiEigenvalues(dC.p, nb, count, wJ.p, nullptr);
    SPEX_CUDA(cudaEventRecord(e1));
    SPEX_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    SPEX_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (it) tj.push_back(ms * 1e-3);
  }
  r.jacobiSeconds = median(tj);

  cusolverDnHandle_t h = nullptr;
  cusolverDnParams_t prm = nullptr;
  if (cusolverDnCreate(&h) != CUSOLVER_STATUS_SUCCESS) throw GpuError("cusolverDnCreate failed");
  cusolverDnCreateParams(&prm);
  std::size_t dBytes = 0, hBytes = 0;
  DevVec<int> info(count);
  if (cusolverDnXsyevBatched_bufferSize(h, prm, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER,
                                        nb, CUDA_R_64F, dA.p, nb, CUDA_R_64F, wS.p, CUDA_R_64F,
                                        &dBytes, &hBytes, count) != CUSOLVER_STATUS_SUCCESS) {
    r.cusolverAvailable = false;
  } else {
    DevVec<char> dWork(dBytes);
    std::vector<char> hWork(std::max<std::size_t>(hBytes, 1));
    for (int it = 0; it <= repeat; ++it) {
      SPEX_CUDA(cudaMemcpy(dA.p, dC.p, C.size() * sizeof(double), cudaMemcpyDeviceToDevice));
      SPEX_CUDA(cudaEventRecord(e0));
      const cusolverStatus_t st = cusolverDnXsyevBatched(
          h, prm, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_LOWER, nb, CUDA_R_64F, dA.p, nb,
          CUDA_R_64F, wS.p, CUDA_R_64F, dWork.p, dBytes, hWork.data(), hBytes, info.p, count);
      SPEX_CUDA(cudaEventRecord(e1));
      SPEX_CUDA(cudaEventSynchronize(e1));
      if (st != CUSOLVER_STATUS_SUCCESS) {
        r.cusolverAvailable = false;
        break;
      }
      float ms = 0;
      SPEX_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      if (it) ts.push_back(ms * 1e-3);
    }
    if (r.cusolverAvailable) {
      r.cusolverSeconds = median(ts);
      const std::vector<double> a = wJ.host(), b = wS.host();
      for (int m = 0; m < count; ++m) {
        double mx = 0, d = 0;
        for (int k = 0; k < nb; ++k) {
          mx = std::max(mx, std::abs(b[std::size_t(m) * nb + k]));
          d = std::max(d, std::abs(a[std::size_t(m) * nb + k] - b[std::size_t(m) * nb + k]));
        }
        r.maxRelDiff = std::max(r.maxRelDiff, d / mx);
      }
    }
  }
  cusolverDnDestroyParams(prm);
  cusolverDnDestroy(h);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return r;
}

} // namespace spex::gpu

// ---------------------------------------------------------------------------------
// The card's two ceilings (METHOD.md): fp64 matrix-product rate through cuBLAS and
// device-to-device copy bandwidth, each the median of 5 timed runs after a warm-up.

#include <cublas_v2.h>

namespace spex {

DeviceCeilings measureDeviceCeilings(int device) {
  SPEX_CUDA(cudaSetDevice(device));
  DeviceCeilings c;
  cudaEvent_t e0, e1;
  SPEX_CUDA(cudaEventCreate(&e0));
  SPEX_CUDA(cudaEventCreate(&e1));
  auto timed = [&](auto&& work) {
    work(); // warm-up
    std::vector<double> t;
    for (int r = 0; r < 5; ++r) {
      SPEX_CUDA(cudaEventRecord(e0));
      work();
      SPEX_CUDA(cudaEventRecord(e1));
      SPEX_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      SPEX_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms * 1e-3);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  {
    const int n = 8192;
    gpu::DevVec<double> a(std::size_t(n) * n), b(std::size_t(n) * n), d(std::size_t(n) * n);
    // Non-zero operands (METHOD.md: never time on zeros): a ramp the GEMM cannot skip.
    std::vector<double> h(std::size_t(n) * n);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = 1.0 + double(i % 1013) * 1e-3;
    SPEX_CUDA(cudaMemcpy(a.p, h.data(), h.size() * sizeof(double), cudaMemcpyHostToDevice));
    SPEX_CUDA(cudaMemcpy(b.p, h.data(), h.size() * sizeof(double), cudaMemcpyHostToDevice));
    cublasHandle_t handle = nullptr;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) throw GpuError("cublasCreate failed");
    const double one = 1.0, zero = 0.0;
    const double s = timed([&] {
      if (cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.p, n, b.p, n, &zero, d.p,
                      n) != CUBLAS_STATUS_SUCCESS)
        throw GpuError("cublasDgemm failed");
    });
    cublasDestroy(handle);
    c.dgemmFlops = 2.0 * n * double(n) * n / s;
  }
  {
    const std::size_t bytes = std::size_t(2) << 30;
    gpu::DevVec<char> src(bytes), dst(bytes);
    SPEX_CUDA(cudaMemset(src.p, 1, bytes));
    const double s = timed([&] { SPEX_CUDA(cudaMemcpy(dst.p, src.p, bytes, cudaMemcpyDeviceToDevice)); });
    c.copyBytesPerS = 2.0 * double(bytes) / s; // read + write
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return c;
}

} // namespace spex
