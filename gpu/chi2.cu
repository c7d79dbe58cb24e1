// chi2pix (EXTRACTION.md §4.8), pixmask_fraction and deconvolved-flux stitching, and
// the model image (§4.9): one block per patch. The patch model m = A f over the box
// is accumulated in a global scratch slot with atomics, then each pixel's chi^2 and
// each kept unknown's spot-weighted mean of it.
#include "kernels.h"

#include <cstddef>

namespace spex::gpu {

namespace {

constexpr int kChi2Ahead = 6; // a spot's values a lane loads before its atomics (stamps of <= 192 px whole)

// kShared: the box model lives in shared memory (the usual case: a box of ~10^4
// pixels), else in the global scratch slot of the patch.
template <bool kShared>
__global__ void __launch_bounds__(512) chi2ModelKernel(BatchView b) {
  extern __shared__ double shm[];
  __shared__ double red[2][32];
  const int p = blockIdx.x;
  const DevPatch pt = b.patches[p];
  if (b.info[p] != 0) {
    if (b.tiles)
      for (int t = threadIdx.x; t < (pt.x1 - pt.x0) * (pt.y1 - pt.y0); t += blockDim.x)
        b.tiles[(std::size_t)p * b.maxBoxArea + t] = 0.0;
    // Failed factorisation: like the CPU engine, keep pixmask_fraction (computed
    // before the solve) and leave everything else zero. The retry pass rewrites it.
    for (int kk = threadIdx.x; kk < pt.nfiber * pt.nwave; kk += blockDim.x) {
      const int fi = kk / pt.nwave, wj = kk % pt.nwave;
      const int a = (pt.keptFiberOff + fi) * b.nb + pt.keptWaveOff + wj;
      b.out.pixmask[(std::size_t)(pt.outFiber + fi) * b.out.nwave + pt.outWave + wj] =
          b.pm[(std::size_t)p * b.n + a];
    }
    return;
  }
  const SpotTable& st = b.spots;
  const int nx = st.nx, ny = st.ny, npix = nx * ny;
  const int bw = pt.x1 - pt.x0, bh = pt.y1 - pt.y0, area = bw * bh;
  double* m = kShared ? shm : b.mbuf + (std::size_t)p * b.maxBoxArea;
  double* cb = m; // chi^2 replaces the model pixel by pixel
  const double* f = b.f + (std::size_t)p * b.n;
  const int nReal = pt.nfiberPad * b.nb;
  const int tid = threadIdx.x, nt = blockDim.x;

  double* tile = b.tiles ? b.tiles + (std::size_t)p * b.maxBoxArea : nullptr;
  for (int t = tid; t < area; t += nt) {
    m[t] = 0.0;
    if (tile) tile[t] = 0.0;
  }
  __syncthreads();
  // m = A f over the box (padded, deconvolved flux): a warp per spot, lanes along it.
  {
    const int lane = tid & 31, warp = tid >> 5, nw = nt >> 5;
    for (int a = warp; a < nReal; a += nw) {
      const double fa = f[a];
      if (fa == 0.0) continue;
      const int i = a / b.nb;
      const long long ia = st.index(pt.fiberPad0 + i, pt.wavePad0 + (a - i * b.nb));
      const int2 c = st.corner[ia];
      const double* sa = st.v + ia * npix;
      // The lane's first kChi2Ahead stamp values loaded together, then added.
      double sv[kChi2Ahead];
#pragma unroll
      for (int k = 0; k < kChi2Ahead; ++k) sv[k] = lane + 32 * k < npix ? __ldg(sa + lane + 32 * k) : 0.0;
#pragma unroll
      for (int k = 0; k < kChi2Ahead; ++k) {
        const int q = lane + 32 * k;
        if (q >= npix) break;
        const int iy = q / nx;
        const int X = c.x + q - iy * nx, Y = c.y + iy;
        if (X < pt.x0 || X >= pt.x1 || Y < pt.y0 || Y >= pt.y1) continue;
        atomicAdd(m + (Y - pt.y0) * bw + (X - pt.x0), sv[k] * fa);
      }
      for (int q = lane + 32 * kChi2Ahead; q < npix; q += 32) {
        const int iy = q / nx;
        const int X = c.x + q - iy * nx, Y = c.y + iy;
        if (X < pt.x0 || X >= pt.x1 || Y < pt.y0 || Y >= pt.y1) continue;
        atomicAdd(m + (Y - pt.y0) * bw + (X - pt.x0), sa[q] * fa);
      }
    }
  }
  __syncthreads();
  // chi^2 per pixel: 1/ivar_tot = 1/ivar + (psferr m)^2 wherever ivar > 0, for any m
  // (zero and negative models too), as desispec/gpu_specter and the CPU engine.
  double sum = 0.0, cnt = 0.0;
#pragma unroll 4
  for (int t = tid; t < area; t += nt) {
    const int X = pt.x0 + t % bw, Y = pt.y0 + t / bw;
    const std::size_t q = (std::size_t)Y * b.npixX + X;
    const double iv = b.ivar[q], mv = m[t]; // cb[t] below overwrites m[t] only
    double c = -1.0;
    if (iv > 0.0) {
      const double e = b.psferr * mv;
      const double itot = 1.0 / (1.0 / iv + e * e);
      const double d = b.pix[q] - mv;
      c = d * d * itot;
      sum += c;
      cnt += 1.0;
    }
    cb[t] = c;
  }
  for (int o = 16; o > 0; o >>= 1) {
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
    cnt += __shfl_xor_sync(0xffffffffu, cnt, o);
  }
  const int lane = tid & 31, warp = tid >> 5, nw = nt >> 5;
  if (lane == 0) {
    red[0][warp] = sum;
    red[1][warp] = cnt;
  }
  __syncthreads();
  if (tid == 0) {
    double s = 0, c = 0;
    for (int w = 0; w < nw; ++w) {
      s += red[0][w];
      c += red[1][w];
    }
    b.chi2[p] = c > 0 ? s / c : 0.0;
  }
  // Kept unknowns: chi2pix = sum S chi^2 / sum S [included]; pixmask_fraction and
  // deconvolved flux stitched; model image = A restricted to kept unknowns times f.
  const DevFrame& o = b.out;
  const int nKept = pt.nfiber * pt.nwave;
  for (int kk = warp; kk < nKept; kk += nw) {
    const int fi = kk / pt.nwave, wj = kk % pt.nwave;
    const int i = pt.keptFiberOff + fi, k = pt.keptWaveOff + wj;
    const int a = i * b.nb + k;
    const long long ia = st.index(pt.fiberPad0 + i, pt.wavePad0 + k);
    const int2 c = st.corner[ia];
    const double* sa = st.v + ia * npix;
    const double fa = f[a];
    double num = 0.0, den = 0.0;
    // Pixel q of the stamp, its value s: chi2pix's sums, the model image and tile.
    const auto pixel = [&](int q, double s) {
      const int X = c.x + q % nx, Y = c.y + q / nx;
      if (X < pt.x0 || X >= pt.x1 || Y < pt.y0 || Y >= pt.y1) return;
      const double cv = cb[(Y - pt.y0) * bw + (X - pt.x0)];
      if (cv >= 0.0) {
        num += s * cv;
        den += s;
      }
      if (o.model) atomicAdd(o.model + (std::size_t)Y * b.npixX + X, s * fa);
      if (tile) atomicAdd(tile + (Y - pt.y0) * bw + (X - pt.x0), s * fa);
    };
    double sv[kChi2Ahead]; // the lane's first stamp values loaded together
#pragma unroll
    for (int k = 0; k < kChi2Ahead; ++k) sv[k] = lane + 32 * k < npix ? __ldg(sa + lane + 32 * k) : 0.0;
#pragma unroll
    for (int k = 0; k < kChi2Ahead; ++k) {
      const int q = lane + 32 * k;
      if (q >= npix) break;
      pixel(q, sv[k]);
    }
    for (int q = lane + 32 * kChi2Ahead; q < npix; q += 32) pixel(q, sa[q]);
    for (int off = 16; off > 0; off >>= 1) {
      num += __shfl_xor_sync(0xffffffffu, num, off);
      den += __shfl_xor_sync(0xffffffffu, den, off);
    }
    if (lane == 0) {
      const std::size_t q = (std::size_t)(pt.outFiber + fi) * o.nwave + pt.outWave + wj;
      o.chi2pix[q] = den > 0.0 ? num / den : 0.0;
      o.pixmask[q] = b.pm[(std::size_t)p * b.n + a];
    }
  }
}

} // namespace

void launchChi2Model(const BatchView& b, cudaStream_t stream) {
  const std::size_t shm = sizeof(double) * std::size_t(b.maxBoxArea);
  if (shm <= 160 * 1024) {
    SPEX_CUDA(cudaFuncSetAttribute(chi2ModelKernel<true>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm)));
    chi2ModelKernel<true><<<b.count, 512, shm, stream>>>(b);
  } else {
    chi2ModelKernel<false><<<b.count, 512, 0, stream>>>(b);
  }
  SPEX_CUDA_LAUNCH("chi2ModelKernel");
}

} // namespace spex::gpu
