// Spots on the device (EXTRACTION.md §2): one thread block per spot. The table kernel
// fills every spot a device's patches use once per frame, so patches that share a
// (fiber, bin) through their padding read the same stamp.
#include "device_psf.cuh"
#include "kernels.h"

#include "core/errors.h"

#include <climits>
#include <string>

namespace spex::gpu {

namespace {

constexpr int kSpotThreads = 128;

// Shared-memory layout of one spot's evaluation (doubles).
struct SpotShared {
  int nx, ny, degX, degY, ncoef;
  int oCoef, oEdgeX, oEdgeY, oBx, oBy, oCol, oV, oRed, total;
  __host__ __device__ SpotShared(int hx, int hy, int dX, int dY) {
    nx = 2 * hx + 1;
    ny = 2 * hy + 1;
    degX = dX;
    degY = dY;
    ncoef = (dX + 1) * (dY + 1);
    oCoef = 0;                                   // GH-i-j values, then x, y, sx, sy
    oEdgeX = oCoef + ncoef + 4;                  // (nx+1) * (2 + degX)
    oEdgeY = oEdgeX + (nx + 1) * (2 + dX);       // (ny+1) * (2 + degY)
    oBx = oEdgeY + (ny + 1) * (2 + dY);          // (degX+1) * nx
    oBy = oBx + (dX + 1) * nx;                   // (degY+1) * ny
    oCol = oBy + (dY + 1) * ny;                  // (degY+1) * nx
    oV = oCol + (dY + 1) * nx;                   // ny * nx
    oRed = oV + nx * ny;                         // 32
    total = oRed + 32;
  }
};

__device__ double blockSum(double v, double* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (int w = 0; w < int(blockDim.x + 31) / 32; ++w) s += red[w];
    red[0] = s;
  }
  __syncthreads();
  return red[0];
}

// A spot's first two stages, the same in spotBlock and spotWarp: the PSF's Legendre
// sums at (fiber, w) into sh + L.oCoef (GH-i-j (sets 4..), then x, y, sigx, sigy; a GH
// set with the same domain as GHSIGX uses its u, exactly as GaussHermitePsf::spotInto
// does), then every pixel edge's basisEdge values into L.oEdgeX / L.oEdgeY. The caller's
// thread `tid` of `nt`; `sync` is its barrier, after each stage.
template <class Layout, class Sync>
__device__ void spotSumsAndEdges(const DevPsf& psf, int fiber, double w, const Layout& L, double* sh, int tid,
                                 int nt, Sync sync) {
  const int nx = L.nx, ny = L.ny;
  double* coef = sh + L.oCoef;
  for (int t = tid; t < L.ncoef + 4; t += nt) {
    double v;
    if (t < L.ncoef) {
      const DevLegendre d = psf.sets[kSetGH + t];
      const DevLegendre s = psf.sets[kSetSigX];
      const double u = (d.wmin == s.wmin && d.wmax == s.wmax) ? legendreUDev(w, s.wmin, s.wmax)
                                                             : legendreUDev(w, d.wmin, d.wmax);
      v = legendreSumDev(psf.pool + d.offset + (long long)fiber * d.ncoeff, d.ncoeff, u);
    } else {
      v = evalSet(psf, t - L.ncoef, fiber, w); // kSetX .. kSetSigY
    }
    coef[t] = v;
  }
  sync();
  const double xx = coef[L.ncoef + kSetX], yy = coef[L.ncoef + kSetY];
  const double sx = coef[L.ncoef + kSetSigX], sy = coef[L.ncoef + kSetSigY];
  // Sub-pixel offsets in [-0.5, 0.5): ((x + 0.5) mod 1) - 0.5 with a floor modulo.
  const double dx = (xx + 0.5) - floor(xx + 0.5) - 0.5;
  const double dy = (yy + 0.5) - floor(yy + 0.5) - 0.5;
  const int sX = 2 + L.degX, sY = 2 + L.degY;
  for (int e = tid; e < (nx + 1) + (ny + 1); e += nt) {
    if (e <= nx) {
      double* r = sh + L.oEdgeX + e * sX;
      basisEdge(e, L.degX, psf.hsizeX, dx, sx, r, r + 1, r + 2);
    } else {
      const int ey = e - (nx + 1);
      double* r = sh + L.oEdgeY + ey * sY;
      basisEdge(ey, L.degY, psf.hsizeY, dy, sy, r, r + 1, r + 2);
    }
  }
  sync();
}

// The block evaluates the spot of (fiber, w) into outV ([ny][nx]) and its corner.
__device__ void spotBlock(const DevPsf& psf, int fiber, double w, double* outV, int2* outCorner,
                          double* sh) {
  const SpotShared L(psf.hsizeX, psf.hsizeY, psf.degX, psf.degY);
  const int nx = L.nx, ny = L.ny, tid = threadIdx.x, nt = blockDim.x;
  const double* coef = sh + L.oCoef;
  spotSumsAndEdges(psf, fiber, w, L, sh, tid, nt, [] { __syncthreads(); });
  const double xx = coef[L.ncoef + kSetX], yy = coef[L.ncoef + kSetY];
  const int sX = 2 + L.degX, sY = 2 + L.degY;
  // Pixel-integrated basis: degree 0 the Gaussian over the pixel, degree k >= 1
  // He_{k-1}(t_lo) g(t_lo) - He_{k-1}(t_hi) g(t_hi).
  const int nbx = (L.degX + 1) * nx, nby = (L.degY + 1) * ny;
  for (int t = tid; t < nbx + nby; t += nt) {
    const bool isX = t < nbx;
    const int tt = isX ? t : t - nbx, n = isX ? nx : ny, s = isX ? sX : sY;
    const int k = tt / n, c = tt % n;
    const double* lo = sh + (isX ? L.oEdgeX : L.oEdgeY) + c * s;
    const double* hi = lo + s;
    const double v = k == 0 ? 0.5 * (hi[0] - lo[0]) : lo[2 + k - 1] * lo[1] - hi[2 + k - 1] * hi[1];
    sh[(isX ? L.oBx : L.oBy) + tt] = v;
  }
  __syncthreads();
  // colSum[j][ix] = sum_i GH_ij Bx_i[ix]
  for (int t = tid; t < (L.degY + 1) * nx; t += nt) {
    const int j = t / nx, ix = t % nx;
    double cs = 0.0;
    for (int i = 0; i <= L.degX; ++i) {
      const double a = coef[i * (L.degY + 1) + j];
      if (a == 0.0) continue;
      cs += a * sh[L.oBx + i * nx + ix];
    }
    sh[L.oCol + t] = cs;
  }
  __syncthreads();
  // spot[iy][ix] = sum_j By_j[iy] colSum[j][ix]; clip negatives; normalise.
  double part = 0.0;
  for (int t = tid; t < nx * ny; t += nt) {
    const int iy = t / nx, ix = t % nx;
    double v = 0.0;
    for (int j = 0; j <= L.degY; ++j) v += sh[L.oBy + j * ny + iy] * sh[L.oCol + j * nx + ix];
    if (v < 0.0) v = 0.0;
    sh[L.oV + t] = v;
    part += v;
  }
  const double sum = blockSum(part, sh + L.oRed);
  for (int t = tid; t < nx * ny; t += nt) {
    const double v = sh[L.oV + t];
    outV[t] = sum > 0.0 ? v / sum : v;
  }
  if (tid == 0) {
    outCorner->x = int(floor(xx - psf.hsizeX + 0.5));
    outCorner->y = int(floor(yy - psf.hsizeY + 0.5));
  }
}

__global__ void spotTableKernel(DevPsf psf, SpotTable table, double wmin, double dw) {
  extern __shared__ double sh[];
  const long long idx = blockIdx.x;
  const int fiber = table.f0 + int(idx / table.nk);
  const int k = table.k0 + int(idx % table.nk);
  const double w = wmin + k * dw; // WaveGrid::at
  spotBlock(psf, fiber, w, table.v + idx * (table.nx * table.ny), table.corner + idx, sh);
}

__global__ void spotListKernel(DevPsf psf, const int* fibers, const double* waves, double* v,
                               int2* corner) {
  extern __shared__ double sh[];
  const int idx = blockIdx.x;
  const int npix = (2 * psf.hsizeX + 1) * (2 * psf.hsizeY + 1);
  spotBlock(psf, fibers[idx], waves[idx], v + (long long)idx * npix, corner + idx, sh);
}

__global__ void legendreKernel(const double* c, int n, const double* u, int count, double* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = legendreSumDev(c, n, u[i]);
}

__global__ void basisKernel(int deg, int hsize, const double* d, const double* sigma, int count,
                            double* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const int n = 2 * hsize + 1;
  double e0[3 + 16], e1[3 + 16];
  double* o = out + (long long)i * (deg + 1) * n;
  for (int c = 0; c < n; ++c) {
    basisEdge(c, deg, hsize, d[i], sigma[i], e0, e0 + 1, e0 + 2);
    basisEdge(c + 1, deg, hsize, d[i], sigma[i], e1, e1 + 1, e1 + 2);
    o[c] = 0.5 * (e1[0] - e0[0]);
    for (int k = 1; k <= deg; ++k) o[k * n + c] = e0[2 + k - 1] * e0[1] - e1[2 + k - 1] * e1[1];
  }
}

std::size_t spotSharedBytes(const DevPsf& psf) {
  return sizeof(double) * SpotShared(psf.hsizeX, psf.hsizeY, psf.degX, psf.degY).total;
}


// A warp per spot (kSpotThreads / 32 spots a block): spotBlock's values to the bit, each
// computed by one lane with the same expression, and the normalising sum by the same
// partition (lane l holds the partials of spotBlock's threads l, l + 32, l + 64, l + 96,
// each reduced over the warp as blockSum does and added in warp order). No block-wide
// barriers: the warps of a block run their spots' stages independently, so an SM
// interleaves ~40 spots' latency chains (Legendre loads, erf/exp) where spotBlock had
// 16 blocks with most of their 128 threads idle in the narrow stages. The edge
// quantities are dead once the basis is made: the spot's values reuse their space.
struct SpotWarpShared {
  int nx, ny, degX, degY, ncoef;
  int oCoef, oEdgeX, oEdgeY, oV, oBx, oBy, oCol, total;
  __host__ __device__ SpotWarpShared(int hx, int hy, int dX, int dY) {
    nx = 2 * hx + 1;
    ny = 2 * hy + 1;
    degX = dX;
    degY = dY;
    ncoef = (dX + 1) * (dY + 1);
    oCoef = 0;
    oEdgeX = oCoef + ncoef + 4;
    oEdgeY = oEdgeX + (nx + 1) * (2 + dX);
    const int edgeEnd = oEdgeY + (ny + 1) * (2 + dY);
    oV = oEdgeX;
    oBx = edgeEnd > oV + nx * ny ? edgeEnd : oV + nx * ny;
    oBy = oBx + (dX + 1) * nx;
    oCol = oBy + (dY + 1) * ny;
    total = oCol + (dY + 1) * nx;
  }
};

// t / n and t % n of t = lane, lane + 32, .. by increments (one division a walk).
struct Div32 {
  int q, r, n, dq, dr;
  __device__ Div32(int t, int n_) : n(n_) {
    q = t / n;
    r = t - q * n;
    dq = 32 / n;
    dr = 32 - dq * n;
  }
  __device__ void step() {
    r += dr;
    q += dq;
    if (r >= n) {
      r -= n;
      ++q;
    }
  }
};

__device__ void spotWarp(const DevPsf& psf, int fiber, double w, double* outV, int2* outCorner, double* sh) {
  const SpotWarpShared L(psf.hsizeX, psf.hsizeY, psf.degX, psf.degY);
  const int nx = L.nx, ny = L.ny, lane = threadIdx.x & 31;
  const double* coef = sh + L.oCoef;
  spotSumsAndEdges(psf, fiber, w, L, sh, lane, 32, [] { __syncwarp(); });
  const double xx = coef[L.ncoef + kSetX], yy = coef[L.ncoef + kSetY];
  const int sX = 2 + L.degX, sY = 2 + L.degY;
  // X then Y: degree k = tt / n, column c = tt % n by increments.
  for (int axis = 0; axis < 2; ++axis) {
    const int n = axis == 0 ? nx : ny, s = axis == 0 ? sX : sY, deg = axis == 0 ? L.degX : L.degY;
    const double* edge = sh + (axis == 0 ? L.oEdgeX : L.oEdgeY);
    double* out = sh + (axis == 0 ? L.oBx : L.oBy);
    Div32 kc(lane, n);
    for (int tt = lane; tt < (deg + 1) * n; tt += 32, kc.step()) {
      const int k = kc.q;
      const double* lo = edge + kc.r * s;
      const double* hi = lo + s;
      const double v = k == 0 ? 0.5 * (hi[0] - lo[0]) : lo[2 + k - 1] * lo[1] - hi[2 + k - 1] * hi[1];
      out[tt] = v;
    }
  }
  __syncwarp();
  Div32 jx(lane, nx);
  for (int t = lane; t < (L.degY + 1) * nx; t += 32, jx.step()) {
    const int j = jx.q, ix = jx.r;
    double cs = 0.0;
    for (int i = 0; i <= L.degX; ++i) {
      const double a = coef[i * (L.degY + 1) + j];
      if (a == 0.0) continue;
      cs += a * sh[L.oBx + i * nx + ix];
    }
    sh[L.oCol + t] = cs;
  }
  __syncwarp(); // the edges are no longer read: V takes their place
  constexpr int kParts = kSpotThreads / 32;
  double part[kParts];
#pragma unroll
  for (int u = 0; u < kParts; ++u) part[u] = 0.0;
  Div32 yx(lane, nx); // t = lane, lane + 32, .. in the order of the loops below
  for (int t0 = lane; t0 < nx * ny; t0 += kSpotThreads) {
#pragma unroll
    for (int u = 0; u < kParts; ++u) {
      const int t = t0 + 32 * u;
      if (t < nx * ny) {
        const int iy = yx.q, ix = yx.r;
        yx.step();
        double v = 0.0;
        for (int j = 0; j <= L.degY; ++j) v += sh[L.oBy + j * ny + iy] * sh[L.oCol + j * nx + ix];
        if (v < 0.0) v = 0.0;
        sh[L.oV + t] = v;
        part[u] += v;
      }
    }
  }
  double sum = 0.0;
#pragma unroll
  for (int u = 0; u < kParts; ++u) {
    double v = part[u];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    sum += v; // lane 0's is blockSum's
  }
  sum = __shfl_sync(0xffffffffu, sum, 0);
  __syncwarp();
  for (int t = lane; t < nx * ny; t += 32) {
    const double v = sh[L.oV + t];
    outV[t] = sum > 0.0 ? v / sum : v;
  }
  if (lane == 0) {
    outCorner->x = int(floor(xx - psf.hsizeX + 0.5));
    outCorner->y = int(floor(yy - psf.hsizeY + 0.5));
  }
}

__global__ void spotTableWarpKernel(DevPsf psf, SpotTable table, double wmin,
                                                                    double dw) {
  extern __shared__ double sh[];
  const long long count = (long long)table.nf * table.nk;
  const int warp = threadIdx.x >> 5;
  const long long idx = (long long)blockIdx.x * (kSpotThreads / 32) + warp;
  if (idx >= count) return;
  const int fiber = table.f0 + int(idx / table.nk);
  const int k = table.k0 + int(idx % table.nk);
  const double w = wmin + k * dw; // WaveGrid::at
  const int stride = SpotWarpShared(psf.hsizeX, psf.hsizeY, psf.degX, psf.degY).total;
  spotWarp(psf, fiber, w, table.v + idx * (table.nx * table.ny), table.corner + idx, sh + warp * stride);
}

__global__ void spotListWarpKernel(DevPsf psf, const int* fibers,
                                                                   const double* waves, int count, double* v,
                                                                   int2* corner) {
  extern __shared__ double sh[];
  const int warp = threadIdx.x >> 5;
  const int idx = blockIdx.x * (kSpotThreads / 32) + warp;
  if (idx >= count) return;
  const int npix = (2 * psf.hsizeX + 1) * (2 * psf.hsizeY + 1);
  const int stride = SpotWarpShared(psf.hsizeX, psf.hsizeY, psf.degX, psf.degY).total;
  spotWarp(psf, fibers[idx], waves[idx], v + (long long)idx * npix, corner + idx, sh + warp * stride);
}

std::size_t spotWarpSharedBytes(const DevPsf& psf) {
  return sizeof(double) * (kSpotThreads / 32) * SpotWarpShared(psf.hsizeX, psf.hsizeY, psf.degX, psf.degY).total;
}

} // namespace

void throwIfCuda(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return;
  cudaGetLastError(); // clear a sticky launch error so later calls report their own
  throw GpuError(std::string("CUDA error in ") + what + " (" + file + ":" + std::to_string(line) +
                 "): " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

void launchSpotTable(const DevPsf& psf, const SpotTable& table, double wmin, double dw,
                     cudaStream_t stream, SpotKernel kind) {
  const long long count = (long long)table.nf * table.nk;
  if (count <= 0) return;
  if (kind == SpotKernel::Warp) {
    const std::size_t shm = spotWarpSharedBytes(psf);
    if (shm > 48 * 1024)
      SPEX_CUDA(cudaFuncSetAttribute(spotTableWarpKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(shm)));
    constexpr int per = kSpotThreads / 32;
    spotTableWarpKernel<<<unsigned((count + per - 1) / per), kSpotThreads, shm, stream>>>(psf, table, wmin, dw);
    SPEX_CUDA_LAUNCH("spotTableWarpKernel");
    return;
  }
  const std::size_t shm = spotSharedBytes(psf);
  if (shm > 48 * 1024)
    SPEX_CUDA(cudaFuncSetAttribute(spotTableKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(shm)));
  spotTableKernel<<<unsigned(count), kSpotThreads, shm, stream>>>(psf, table, wmin, dw);
  SPEX_CUDA_LAUNCH("spotTableKernel");
}

namespace {

// The host's legendreU and legendreSum (core/psf/legendre.h) operation for operation,
// rounded as the host rounds them (no contraction into FMAs), so the corners below are
// the host's to the bit.
__device__ double legendreSumStrict(const double* c, int n, double w, double wmin, double wmax) {
  const double u = __dadd_rn(__ddiv_rn(__dmul_rn(2.0, __dadd_rn(w, -wmin)), __dadd_rn(wmax, -wmin)), -1.0);
  if (n <= 0) return 0.0;
  double p0 = 1.0, p1 = u;
  double s = c[0];
  if (n > 1) s = __dadd_rn(s, __dmul_rn(c[1], u));
  for (int k = 1; k + 1 < n; ++k) {
    const double a = __dmul_rn(__dmul_rn(double(2 * k + 1), u), p1);
    const double p2 = __ddiv_rn(__dadd_rn(a, -__dmul_rn(double(k), p0)), double(k + 1));
    s = __dadd_rn(s, __dmul_rn(c[k + 1], p2));
    p0 = p1;
    p1 = p2;
  }
  return s;
}

// core/psf/gauss_hermite_psf.cpp floorToInt.
__device__ int floorToIntDev(double v) {
  if (!(v > -1e9)) return -1000000000;
  if (v > 1e9) return 1000000000;
  return int(floor(v));
}

__global__ void cornerTableKernel(DevPsf psf, int f0, int nf, int k0, int nk, double wmin, double dw,
                                  int* x, int* y) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)nf * nk) return;
  const int f = f0 + int(i / nk), k = k0 + int(i % nk);
  const double w = __dadd_rn(wmin, __dmul_rn(double(k), dw)); // WaveGrid::at
  const DevLegendre dx = psf.sets[kSetX], dy = psf.sets[kSetY];
  const double xx = legendreSumStrict(psf.pool + dx.offset + (long long)f * dx.ncoeff, dx.ncoeff, w, dx.wmin, dx.wmax);
  const double yy = legendreSumStrict(psf.pool + dy.offset + (long long)f * dy.ncoeff, dy.ncoeff, w, dy.wmin, dy.wmax);
  x[i] = floorToIntDev(__dadd_rn(__dadd_rn(xx, -double(psf.hsizeX)), 0.5));
  y[i] = floorToIntDev(__dadd_rn(__dadd_rn(yy, -double(psf.hsizeY)), 0.5));
}

} // namespace

void launchCornerTable(const DevPsf& psf, int f0, int nf, int k0, int nk, double wmin, double dw, int* x,
                       int* y, cudaStream_t stream) {
  const long long count = (long long)nf * nk;
  if (count <= 0) return;
  cornerTableKernel<<<unsigned((count + 255) / 256), 256, 0, stream>>>(psf, f0, nf, k0, nk, wmin, dw, x, y);
  SPEX_CUDA_LAUNCH("cornerTableKernel");
}

namespace {

// min and max of x and y over fibers [a, a + nf) x bins [k, k + n) of the table, by
// the warp's lanes, then across the warp (integers: the order does not matter).
__device__ void warpExtent(const int* x, const int* y, int f0, int k0, int nk, int a, int nf, int k, int n,
                           int lane, int* out) {
  int e[4] = {INT_MAX, INT_MIN, INT_MAX, INT_MIN};
  const int total = nf * n;
  for (int t = lane; t < total; t += 32) {
    const long long i = (long long)(a + t / n - f0) * nk + (k + t % n - k0);
    e[0] = min(e[0], x[i]);
    e[1] = max(e[1], x[i]);
    e[2] = min(e[2], y[i]);
    e[3] = max(e[3], y[i]);
  }
  for (int o = 16; o > 0; o >>= 1) {
    e[0] = min(e[0], __shfl_xor_sync(0xffffffffu, e[0], o));
    e[1] = max(e[1], __shfl_xor_sync(0xffffffffu, e[1], o));
    e[2] = min(e[2], __shfl_xor_sync(0xffffffffu, e[2], o));
    e[3] = max(e[3], __shfl_xor_sync(0xffffffffu, e[3], o));
  }
  if (lane < 4) out[lane] = e[lane];
}

__global__ void patchExtentsKernel(const int* x, const int* y, int f0, int k0, int nk, const int* win, int count,
                                   int step, int* out) {
  const int p = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (p >= count) return; // a whole warp leaves together
  const int* w = win + 5LL * p;
  warpExtent(x, y, f0, k0, nk, w[0], w[1], w[2], w[3], lane, out + 8LL * p);
  warpExtent(x, y, f0, k0, nk, w[0], w[1], w[4], step, lane, out + 8LL * p + 4);
}

} // namespace

void launchPatchExtents(const int* x, const int* y, int f0, int k0, int nk, const int* win, int count, int step,
                        int* out, cudaStream_t stream) {
  if (count <= 0) return;
  constexpr int warps = 4;
  patchExtentsKernel<<<unsigned((count + warps - 1) / warps), 32 * warps, 0, stream>>>(x, y, f0, k0, nk, win,
                                                                                       count, step, out);
  SPEX_CUDA_LAUNCH("patchExtentsKernel");
}

void launchSpotList(const DevPsf& psf, const int* fibers, const double* waves, int count,
                    double* v, int2* corner, cudaStream_t stream, SpotKernel kind) {
  if (count <= 0) return;
  if (kind == SpotKernel::Warp) {
    const std::size_t shm = spotWarpSharedBytes(psf);
    if (shm > 48 * 1024)
      SPEX_CUDA(cudaFuncSetAttribute(spotListWarpKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(shm)));
    constexpr int per = kSpotThreads / 32;
    spotListWarpKernel<<<(count + per - 1) / per, kSpotThreads, shm, stream>>>(psf, fibers, waves, count, v,
                                                                               corner);
    SPEX_CUDA_LAUNCH("spotListWarpKernel");
    return;
  }
  const std::size_t shm = spotSharedBytes(psf);
  if (shm > 48 * 1024)
    SPEX_CUDA(cudaFuncSetAttribute(spotListKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(shm)));
  spotListKernel<<<count, kSpotThreads, shm, stream>>>(psf, fibers, waves, v, corner);
  SPEX_CUDA_LAUNCH("spotListKernel");
}

void launchLegendreSums(const double* coeff, int ncoeff, const double* u, int count, double* out,
                        cudaStream_t stream) {
  if (count <= 0) return;
  legendreKernel<<<(count + 127) / 128, 128, 0, stream>>>(coeff, ncoeff, u, count, out);
  SPEX_CUDA_LAUNCH("legendreKernel");
}

void launchGaussHermiteBasis(int deg, int hsize, const double* d, const double* sigma, int count,
                             double* out, cudaStream_t stream) {
  if (count <= 0) return;
  if (deg > 16) throw GpuError("launchGaussHermiteBasis: degree > 16");
  basisKernel<<<(count + 63) / 64, 64, 0, stream>>>(deg, hsize, d, sigma, count, out);
  SPEX_CUDA_LAUNCH("basisKernel");
}

} // namespace spex::gpu
