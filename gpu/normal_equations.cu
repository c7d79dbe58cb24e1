// Normal equations from the sparse spot structure (EXTRACTION.md §4.1) and the weak
// prior (§4.2). A is never formed: iCov[a, b] is the sum over the overlap of stamps a
// and b, inside the patch box, of W S_a S_b.
#include "kernels.h"

#include "core/errors.h"

#include <string>

namespace spex::gpu {

namespace {

constexpr int kNeThreads = 128;
// The tree buffer of normalEquationsLeanKernel<true>: rows of 32 lane partials (a pair's,
// or a warp's y, fw or pm), 34 doubles apart (16-byte aligned rows; one thread a row reads
// its row two doubles at a time with no more than the 4 wavefronts 32 such loads need).
constexpr int kNeTreeRows = 32, kNeTreePitch = 34;

__device__ __forceinline__ double warpSum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// W S_a over stamp a (corner ca, values sa) into wsa, 0 outside the patch box, and each
// warp's partial sums of y, fluxweight and pixmask_fraction (§4.7) into red (3 x warps).
__device__ __forceinline__ void weighStamp(const BatchView& b, const DevPatch& pt, int2 ca, const double* sa,
                                           int nx, int npix, double* wsa, double* red) {
  double yv = 0.0, fwv = 0.0, pmv = 0.0;
  for (int t = threadIdx.x; t < npix; t += blockDim.x) {
    const int X = ca.x + t % nx, Y = ca.y + t / nx;
    const double s = sa[t];
    const bool inBox = X >= pt.x0 && X < pt.x1 && Y >= pt.y0 && Y < pt.y1;
    double w = 0.0, pv = 0.0;
    if (inBox) {
      const long long q = (long long)Y * b.npixX + X;
      w = b.ivar[q];
      pv = b.pix[q];
    }
    const double ws = w * s;
    wsa[t] = ws;
    yv += ws * pv;
    fwv += ws;
    if (!inBox || w == 0.0) pmv += s; // §4.7: masked or outside the box
  }
  yv = warpSum(yv);
  fwv = warpSum(fwv);
  pmv = warpSum(pmv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if (lane == 0) {
    red[warp] = yv;
    red[nw + warp] = fwv;
    red[2 * nw + warp] = pmv;
  }
}

// After a barrier behind weighStamp: thread 0 adds the warps' partials into y, fw and
// pm of unknown o (the batch's flat index).
// writeRowSums: the same, by whichever thread calls it (red: [y][fw][pm] x warps).
__device__ __forceinline__ void writeRowSums(const BatchView& b, const double* red, long long o) {
  const int nw = blockDim.x >> 5;
  double s0 = 0, s1 = 0, s2 = 0;
  for (int w = 0; w < nw; ++w) {
    s0 += red[w];
    s1 += red[nw + w];
    s2 += red[2 * nw + w];
  }
  b.y[o] = s0;
  b.fw[o] = s1;
  b.pm[o] = s2;
}

__device__ __forceinline__ void storeRowSums(const BatchView& b, const double* red, long long o) {
  if (threadIdx.x == 0) writeRowSums(b, red, o);
}

// One block per (unknown a, patch). Row a of iCov for b >= a (mirrored), y[a],
// fluxweight[a], pixmask_fraction[a].
__global__ void normalEquationsKernel(BatchView b) {
  extern __shared__ double sh[];
  const int p = blockIdx.y, a = blockIdx.x;
  const DevPatch pt = b.patches[p];
  const int nReal = pt.nfiberPad * b.nb;
  if (a >= nReal) return; // identity padding: the prior kernel sets its diagonal
  const int i = a / b.nb, ka = a % b.nb;
  const SpotTable& st = b.spots;
  const int nx = st.nx, ny = st.ny, npix = nx * ny;
  const long long ia = st.index(pt.fiberPad0 + i, pt.wavePad0 + ka);
  const int2 ca = st.corner[ia];
  const double* sa = st.v + ia * npix;
  double* wsa = sh;              // W S_a over the stamp, 0 outside the box
  double* red = sh + npix;       // 3 x warps

  weighStamp(b, pt, ca, sa, nx, npix, wsa, red);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();
  storeRowSums(b, red, (long long)p * b.n + a);

  double* A = b.A + (long long)p * b.n * b.n;
  // Candidates bb >= a are tested 32 at a time, one per lane (most of a row's 518
  // candidates do not overlap stamp a); the warp then takes the overlapping ones one
  // by one, splitting each overlap's pixels over its lanes.
  for (int base = a + warp * 32; base < nReal; base += nw * 32) {
    const int bb = base + lane;
    int ox0 = 0, ox1 = 0, oy0 = 0, oy1 = 0;
    long long ib = 0;
    int2 cb = make_int2(0, 0);
    if (bb < nReal) {
      const int j = bb / b.nb, kb = bb % b.nb;
      ib = st.index(pt.fiberPad0 + j, pt.wavePad0 + kb);
      cb = st.corner[ib];
      ox0 = max(max(ca.x, cb.x), pt.x0);
      ox1 = min(min(ca.x, cb.x) + nx, pt.x1);
      oy0 = max(max(ca.y, cb.y), pt.y0);
      oy1 = min(min(ca.y, cb.y) + ny, pt.y1);
    }
    unsigned hits = __ballot_sync(0xffffffffu, bb < nReal && ox0 < ox1 && oy0 < oy1);
    while (hits) {
      const int src = __ffs(hits) - 1;
      hits &= hits - 1;
      const int tb = __shfl_sync(0xffffffffu, bb, src);
      const long long tib = __shfl_sync(0xffffffffu, ib, src);
      const int tcx = __shfl_sync(0xffffffffu, cb.x, src), tcy = __shfl_sync(0xffffffffu, cb.y, src);
      const int tx0 = __shfl_sync(0xffffffffu, ox0, src), tx1 = __shfl_sync(0xffffffffu, ox1, src);
      const int ty0 = __shfl_sync(0xffffffffu, oy0, src), ty1 = __shfl_sync(0xffffffffu, oy1, src);
      const int w = tx1 - tx0, h = ty1 - ty0;
      const double* sb = st.v + tib * npix;
      double acc = 0.0;
      for (int t = lane; t < w * h; t += 32) {
        const int X = tx0 + t % w, Y = ty0 + t / w;
        acc += wsa[(Y - ca.y) * nx + (X - ca.x)] * __ldg(sb + (Y - tcy) * nx + (X - tcx));
      }
      acc = warpSum(acc);
      if (lane == 0) {
        A[a + (long long)tb * b.n] = acc;
        A[tb + (long long)a * b.n] = acc;
      }
    }
  }
}

// The same sums as normalEquationsKernel (each pair's pixels on the same lanes in the
// same order, the same warp reduction: iCov identical to the bit), organised around
// what the later steps read: the lower triangle's block band of b.band fiber blocks
// (batch_pipeline.cpp). One block per (unknown a, patch) fills column a of A from row a
// to the band's last row, zeros included, in one coalesced pass, and y, fw, pm of every
// unknown (identity padding: zeros), so no memset clears A, y, fw or pm first; the upper
// triangle and the lower blocks outside the band are not written (nothing reads them).
// The candidates b (inside the band only) are tested by all 128 threads at once and the
// overlapping ones listed in shared memory; the warps then share the list, a pair's
// pixels split over the lanes by one reciprocal per pair and increments (no div/mod per
// pixel). Shared memory: W S_a, the reductions, the column, the pair list
// (normalEquationsPairsLayout).
struct PairsLayout {
  int cap;          // candidates of a column at most: (band + 1) nb
  int colOff;       // doubles before the column buffer
  int pairOff;      // doubles before the pair list (int4, 16-byte aligned)
  std::size_t bytes;
};
__host__ __device__ inline PairsLayout pairsLayout(int npix, int band, int nb, int n) {
  PairsLayout L;
  L.cap = (band + 1) * nb < n ? (band + 1) * nb : n;
  L.colOff = npix + 3 * (kNeThreads / 32);
  L.pairOff = (L.colOff + L.cap + 1) & ~1;
  L.bytes = sizeof(double) * std::size_t(L.pairOff) + sizeof(int4) * std::size_t(L.cap);
  return L;
}

__global__ void __launch_bounds__(kNeThreads) normalEquationsPairsKernel(BatchView b) {
  extern __shared__ double sh[];
  __shared__ int npairs;
  const int p = blockIdx.y, a = blockIdx.x;
  const DevPatch pt = b.patches[p];
  const int n = b.n, nb = b.nb;
  const int nReal = pt.nfiberPad * nb;
  const int i = a / nb;
  const int rowEnd = min(n, (i + b.band + 1) * nb); // column a: rows a .. rowEnd - 1
  double* colA = b.A + (long long)p * n * n + (long long)a * n;
  const long long o = (long long)p * n + a;
  if (a >= nReal) { // identity padding: zero below the diagonal (the prior sets it)
    for (int r = a + threadIdx.x; r < rowEnd; r += blockDim.x) colA[r] = 0.0;
    if (threadIdx.x == 0) b.y[o] = b.fw[o] = b.pm[o] = 0.0;
    return;
  }
  const int ka = a - i * nb;
  const SpotTable& st = b.spots;
  const int nx = st.nx, ny = st.ny, npix = nx * ny;
  const PairsLayout L = pairsLayout(npix, b.band, nb, n);
  const long long ia = st.index(pt.fiberPad0 + i, pt.wavePad0 + ka);
  const int2 ca = st.corner[ia];
  const double* sa = st.v + ia * npix;
  double* wsa = sh;              // W S_a over the stamp, 0 outside the box
  double* red = sh + npix;       // 3 x warps
  double* col = sh + L.colOff;   // column a, rows a .. rowEnd - 1
  int4* pairs = reinterpret_cast<int4*>(sh + L.pairOff);
  const int ncol = rowEnd - a;

  weighStamp(b, pt, ca, sa, nx, npix, wsa, red);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if (threadIdx.x == 0) npairs = 0;
  for (int r = threadIdx.x; r < ncol; r += blockDim.x) col[r] = 0.0;
  __syncthreads();
  storeRowSums(b, red, o);

  // The candidates b of the band (b >= a), one a thread; the overlapping ones listed
  // with their overlap (offsets into both stamps, width and height).
  const int cEnd = min(rowEnd, nReal);
  for (int bb = a + threadIdx.x; bb < cEnd; bb += blockDim.x) {
    const int j = bb / nb, kb = bb - j * nb;
    const long long ib = st.index(pt.fiberPad0 + j, pt.wavePad0 + kb);
    const int2 cb = st.corner[ib];
    const int ox0 = max(max(ca.x, cb.x), pt.x0), ox1 = min(min(ca.x, cb.x) + nx, pt.x1);
    const int oy0 = max(max(ca.y, cb.y), pt.y0), oy1 = min(min(ca.y, cb.y) + ny, pt.y1);
    if (ox0 < ox1 && oy0 < oy1) {
      const unsigned offA = unsigned((oy0 - ca.y) * nx + (ox0 - ca.x));
      const unsigned offB = unsigned((oy0 - cb.y) * nx + (ox0 - cb.x));
      const int s = atomicAdd(&npairs, 1);
      pairs[s] = make_int4(int(ib), bb - a, int(offA | (offB << 16)),
                           int(unsigned(ox1 - ox0) | (unsigned(oy1 - oy0) << 16)));
    }
  }
  __syncthreads();

  // A warp per listed pair: lane l takes pixels t = l, l + 32, .. of the overlap, row
  // t / w and column t % w, as normalEquationsKernel (the same order, so the same sum).
  const int np = npairs;
  for (int q = warp; q < np; q += nw) {
    const int4 pr = pairs[q];
    const unsigned offs = unsigned(pr.z), wh = unsigned(pr.w);
    const int w = int(wh & 0xffffu), h = int(wh >> 16), area = w * h;
    // floor((l + 0.5) / w) is at least 0.5 / w from an integer: exact in float.
    const float rw = __frcp_rn(float(w));
    const int r0 = int((float(lane) + 0.5f) * rw), dr = int(32.5f * rw);
    const int dc = 32 - dr * w, dq = dr * nx + dc, wrap = nx - w;
    int c = lane - r0 * w, qo = r0 * nx + c;
    const double* pa = wsa + (offs & 0xffffu);
    const double* pb = st.v + (long long)pr.x * npix + (offs >> 16);
    double acc = 0.0;
    for (int t = lane; t < area; t += 32) {
      acc += pa[qo] * __ldg(pb + qo);
      c += dc;
      qo += dq;
      if (c >= w) {
        c -= w;
        qo += wrap;
      }
    }
    acc = warpSum(acc);
    if (lane == 0) col[pr.y] = acc;
  }
  __syncthreads();
  for (int r = threadIdx.x; r < ncol; r += blockDim.x) colA[a + r] = col[r];
}

// floor(x / d) for 0 <= x < 2^22 and d >= 1 by r, the correctly rounded float reciprocal
// of d (__frcp_rn): v = (x + 0.5) / d is at least 0.5 / d from an integer, and the
// computed product's error, below v 2^-23 (x + 0.5 is exact, r and the product each
// rounded once), is smaller than that, so the truncation is exact.
__device__ __forceinline__ int divByRcp(int x, float r) { return int((float(x) + 0.5f) * r); }

// W S_a as weighStamp (the same partition of the pixels over the threads, the same sums
// in the same order: identical to the bit), the pixel's row and column by divByRcp
// instead of an integer division and modulo by the stamp width.
// One pixel t of weighStampLean.
__device__ __forceinline__ void weighPixel(const BatchView& b, const DevPatch& pt, int2 ca, const double* sa, int nx,
                                           float rnx, double* wsa, int t, double& yv, double& fwv, double& pmv) {
  const int ty = divByRcp(t, rnx);
  const int X = ca.x + (t - ty * nx), Y = ca.y + ty;
  const double s = __ldg(sa + t);
  const bool inBox = X >= pt.x0 && X < pt.x1 && Y >= pt.y0 && Y < pt.y1;
  double w = 0.0, pv = 0.0;
  if (inBox) {
    const long long q = (long long)Y * b.npixX + X;
    w = __ldg(b.ivar + q);
    pv = __ldg(b.pix + q);
  }
  const double ws = w * s;
  wsa[t] = ws;
  yv += ws * pv;
  fwv += ws;
  if (!inBox || w == 0.0) pmv += s; // §4.7: masked or outside the box
}

// Tree: each lane's partials of y, fw and pm stored into rows k nw + warp (k = 0, 1, 2) of
// the tree buffer tb instead of summed over the warp into red (normalEquationsTreeKernel),
// the pixel loop not unrolled (a 17 x 11 stamp is two pixels a thread: the unrolled loop
// only took registers there).
template <bool Tree>
__device__ __forceinline__ void weighStampLean(const BatchView& b, const DevPatch& pt, int2 ca, const double* sa,
                                               int nx, int npix, float rnx, double* wsa, double* red, double* tb) {
  double yv = 0.0, fwv = 0.0, pmv = 0.0;
  if (Tree) {
#pragma unroll 1
    for (int t = threadIdx.x; t < npix; t += kNeThreads) weighPixel(b, pt, ca, sa, nx, rnx, wsa, t, yv, fwv, pmv);
  } else {
    for (int t = threadIdx.x; t < npix; t += kNeThreads) weighPixel(b, pt, ca, sa, nx, rnx, wsa, t, yv, fwv, pmv);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = kNeThreads / 32;
  if (Tree) { // the lanes' partials, row k nw + warp of the tree buffer
    tb[(0 * nw + warp) * kNeTreePitch + lane] = yv;
    tb[(1 * nw + warp) * kNeTreePitch + lane] = fwv;
    tb[(2 * nw + warp) * kNeTreePitch + lane] = pmv;
    return;
  }
  yv = warpSum(yv);
  fwv = warpSum(fwv);
  pmv = warpSum(pmv);
  if (lane == 0) {
    red[warp] = yv;
    red[nw + warp] = fwv;
    red[2 * nw + warp] = pmv;
  }
}

// warpSum's value without the shuffles: v_l (l = 0 .. 31, lane l's partial) read from one
// row of shared memory at address row (16-byte aligned), summed by one thread in the
// butterfly's tree. warpSum leaves every lane with s5, where s1_l = v_l + v_{l+16}
// (l < 16), s2_l = s1_l + s1_{l+8} (l < 8), s3_l = s2_l + s2_{l+4}, s4_l = s3_l + s3_{l+2},
// s5 = s4_0 + s4_1 (lane 0's operands; a lane's own value first, its partner's second,
// and a double addition is commutative to the bit): the same additions of the same
// values, so the same sum to the bit. 16 two-double loads and 31 additions for one
// thread, so a warp sums 32 rows for the instructions one butterfly costs 2. The loads
// are volatile only so that ptxas issues them a group at a time (hoisted all at once they
// spilled a register on sm_80); shared memory has no cache, so they cost the same.
__device__ __forceinline__ double treeSum(unsigned row) {
  // s2_l and s2_{l+1} (l even) from the pairs (l + 8m, l + 8m + 1), m = 0 .. 3: four
  // two-double loads; s3_l = s2_l + s2_{l+4}, as soon as both are there (few registers).
  double s3[4];
#pragma unroll
  for (int h = 0; h < 2; ++h) { // s3_{2h}, s3_{2h+1}
    double s2[4];               // s2_{2h}, s2_{2h+1}, s2_{2h+4}, s2_{2h+5}
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      const int l = 2 * h + 4 * g;
      double v[8]; // v[2m + e] = v_{l + 8m + e}
#pragma unroll
      for (int m = 0; m < 4; ++m)
        asm volatile("ld.volatile.shared.v2.f64 {%0, %1}, [%2];" : "=d"(v[2 * m]), "=d"(v[2 * m + 1]) : "r"(row + 8u * (l + 8 * m)));
#pragma unroll
      for (int e = 0; e < 2; ++e) // s1_{l+e} = v_{l+e} + v_{l+e+16}, s1_{l+e+8} = v_{l+e+8} + v_{l+e+24}
        s2[2 * g + e] = (v[e] + v[4 + e]) + (v[2 + e] + v[6 + e]);
    }
    s3[2 * h] = s2[0] + s2[2];
    s3[2 * h + 1] = s2[1] + s2[3];
  }
  return (s3[0] + s3[2]) + (s3[1] + s3[3]); // s4_0 = s3_0 + s3_2, s4_1 = s3_1 + s3_3
}

// p itself, hidden from the optimiser (a pointer it cannot re-associate with an offset).
template <class T> __device__ __forceinline__ T* opaque(T* p) {
  asm("" : "+l"(p));
  return p;
}

// The double at shared-memory address base + 8 q (one add an address).
__device__ __forceinline__ double sharedAt(unsigned base, unsigned q) {
  double v;
  asm volatile("ld.shared.f64 %0, [%1];" : "=d"(v) : "r"(base + 8u * q));
  return v;
}

// One step of a lane's walk over an overlap of width w inside stamps nx wide: dc columns
// and dq stamp offsets further (32 pixels of the overlap), one row more at the wrap.
__device__ __forceinline__ void leanStep(int& c, unsigned& qo, int w, int dc, int dq, int wrap) {
  c += dc;
  qo += dq;
  if (c >= w) {
    c -= w;
    qo += wrap;
  }
}

// A lane's pixels of a pair when the warp's count of them, K = ceil(area / 32), is known
// at compile time: every stamp load of the pair issued before the first product is added
// (one round trip a pair instead of one a pixel or two), then the products added in the
// pixels' order, so the sum is the same to the bit. Every slot but the last is a pixel
// of every lane; the last only where lane + 32 (K - 1) < area. Full: the overlap spans
// whole stamp rows (w = nx), pixel t at offset t of both stamps; otherwise the walk of
// leanStep from the lane's first pixel.
template <int K, bool Full>
__device__ __forceinline__ double leanWalk(unsigned pa, const double* pb, int lane, int area, int c, unsigned qo,
                                           int w, int dc, int dq, int wrap) {
  unsigned q[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (Full) {
      q[k] = unsigned(lane + 32 * k);
    } else {
      q[k] = qo;
      if (k + 1 < K) leanStep(c, qo, w, dc, dq, wrap);
    }
  }
  const bool last = lane + 32 * (K - 1) < area;
  double bv[K];
#pragma unroll
  for (int k = 0; k < K; ++k) bv[k] = (k + 1 < K || last) ? __ldg(pb + q[k]) : 0.0;
  double acc = 0.0;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (k + 1 < K || last) acc += sharedAt(pa, q[k]) * bv[k];
  return acc;
}

// The same, K in 1 .. 6 (stamps of up to 192 px: DESI's 17 x 11 and smaller) by its own
// code; larger overlaps two pixels a step (both loads in flight, added in order).
template <bool Full>
__device__ __forceinline__ double leanPair(unsigned pa, const double* pb, int lane, int area, int c, unsigned qo,
                                           int w, int dc, int dq, int wrap) {
  switch ((area + 31) >> 5) {
  case 1: return leanWalk<1, Full>(pa, pb, lane, area, c, qo, w, dc, dq, wrap);
  case 2: return leanWalk<2, Full>(pa, pb, lane, area, c, qo, w, dc, dq, wrap);
  case 3: return leanWalk<3, Full>(pa, pb, lane, area, c, qo, w, dc, dq, wrap);
  case 4: return leanWalk<4, Full>(pa, pb, lane, area, c, qo, w, dc, dq, wrap);
  case 5: return leanWalk<5, Full>(pa, pb, lane, area, c, qo, w, dc, dq, wrap);
  case 6: return leanWalk<6, Full>(pa, pb, lane, area, c, qo, w, dc, dq, wrap);
  default: break;
  }
  double acc = 0.0;
  int t = lane;
#pragma unroll 1
  for (; t + 32 < area; t += 64) {
    const unsigned q0 = qo;
    leanStep(c, qo, w, dc, dq, wrap);
    const unsigned q1 = qo;
    leanStep(c, qo, w, dc, dq, wrap);
    const double b0 = __ldg(pb + q0), b1 = __ldg(pb + q1);
    const double a0 = sharedAt(pa, q0), a1 = sharedAt(pa, q1);
    acc += a0 * b0;
    acc += a1 * b1;
  }
  if (t < area) acc += sharedAt(pa, qo) * __ldg(pb + qo);
  return acc;
}

// The lean and tree kernels' pair list: the candidates b = a .. cEnd - 1 of column a
// (fiber i, bin ka), one a thread, fiber j and bin kb by increments (no division); each
// whose stamp overlaps S_a inside the patch box is listed with what every lane needs of
// it: the element index of S_b's first overlap pixel, the offset into W S_a and the
// column row (packed), the width's correctly rounded reciprocal (float bits), width and
// area (packed). npairs is the block's shared count; the caller synchronises after.
__device__ __forceinline__ void listOverlappingPairs(const SpotTable& st, const DevPatch& pt, int2 ca, int nx,
                                                     int ny, int npix, int a, int i, int ka, int nb, int cEnd,
                                                     int& npairs, int4* pairs) {
  int j = i, kb = ka + int(threadIdx.x);
  while (kb >= nb) {
    kb -= nb;
    ++j;
  }
  for (int bb = a + threadIdx.x; bb < cEnd; bb += kNeThreads) {
    const long long ib = st.index(pt.fiberPad0 + j, pt.wavePad0 + kb);
    const int2 cb = st.corner[ib];
    const int ox0 = max(max(ca.x, cb.x), pt.x0), ox1 = min(min(ca.x, cb.x) + nx, pt.x1);
    const int oy0 = max(max(ca.y, cb.y), pt.y0), oy1 = min(min(ca.y, cb.y) + ny, pt.y1);
    if (ox0 < ox1 && oy0 < oy1) {
      const unsigned w = unsigned(ox1 - ox0), area = w * unsigned(oy1 - oy0);
      const unsigned offA = unsigned((oy0 - ca.y) * nx + (ox0 - ca.x));
      const unsigned gb = unsigned(ib) * unsigned(npix) + unsigned((oy0 - cb.y) * nx + (ox0 - cb.x));
      const int s = atomicAdd(&npairs, 1);
      pairs[s] = make_int4(int(gb), int(offA | (unsigned(bb - a) << 16)), __float_as_int(__frcp_rn(float(w))),
                           int(w | (area << 8)));
    }
    kb += kNeThreads;
    while (kb >= nb) {
      kb -= nb;
      ++j;
    }
  }
}

// The same sums as normalEquationsPairsKernel (each pair's pixels on the same lanes in
// the same order, the same reductions: iCov, y, fw and pm identical to the bit), with
// fewer instructions a pair, counted from the SASS (sm_90) of the pair kernel: there a
// pair cost 52 instructions of set-up (its fields unpacked, a reciprocal with its
// slow-path test, 64-bit address arithmetic) and 15 a pixel (one DFMA), with one stamp
// load in flight a lane at a time. On an H100: 12.3 ms a frame against 16.7, 531 M warp
// instructions a launch against 703 M (the kernel is issue-bound). Here:
//  - the listing thread does the pair's lane-independent work once: the element index of
//    S_b's first overlap pixel (32 bits: normalEquationsLeanFit), the offset into W S_a,
//    the column row, the width's correctly rounded reciprocal (float bits), width and
//    area packed: a lane unpacks them with a few shifts and masks;
//  - a lane's offsets are unsigned 32-bit (one wide multiply-add an address);
//  - all of a lane's stamp loads of a pair issued before its first product is added
//    (leanWalk, by the pair's own count of pixels a lane; the same products added in
//    the same order), and the overlaps that span whole stamp rows walked with no
//    column bookkeeping;
//  - no integer division or modulo by a runtime width anywhere: the candidates' fiber
//    and bin by increments, weighStamp's rows by divByRcp.
// 40 registers as it stands (48 warps an SM). Measured and not kept (docs/benchmarks.md,
// "seventh round"): the candidates' spot index by increments too (48 registers, or 40
// under __launch_bounds__ with 4 % more instructions) and 32 registers (64 warps an SM,
// spilled): both slower.
__global__ void __launch_bounds__(kNeThreads) normalEquationsLeanKernel(BatchView b) {
  extern __shared__ double sh[];
  __shared__ int npairs;
  const int p = blockIdx.y, a = blockIdx.x;
  const DevPatch pt = b.patches[p];
  const int n = b.n, nb = b.nb;
  const int nReal = pt.nfiberPad * nb;
  const int i = divByRcp(a, __frcp_rn(float(nb)));
  const int rowEnd = min(n, (i + b.band + 1) * nb); // column a: rows a .. rowEnd - 1
  double* colA = b.A + (long long)p * n * n + (long long)a * n;
  const long long o = (long long)p * n + a;
  if (a >= nReal) { // identity padding: zero below the diagonal (the prior sets it)
    for (int r = a + threadIdx.x; r < rowEnd; r += kNeThreads) colA[r] = 0.0;
    if (threadIdx.x == 0) b.y[o] = b.fw[o] = b.pm[o] = 0.0;
    return;
  }
  const int ka = a - i * nb;
  const SpotTable& st = b.spots;
  const int nx = st.nx, ny = st.ny, npix = nx * ny;
  const PairsLayout L = pairsLayout(npix, b.band, nb, n);
  const long long ia = st.index(pt.fiberPad0 + i, pt.wavePad0 + ka);
  const int2 ca = st.corner[ia];
  const double* sa = st.v + ia * npix;
  double* wsa = sh;              // W S_a over the stamp, 0 outside the box
  double* red = sh + npix;       // 3 x warps
  double* col = sh + L.colOff;   // column a, rows a .. rowEnd - 1
  int4* pairs = reinterpret_cast<int4*>(sh + L.pairOff);
  const int ncol = rowEnd - a;

  weighStampLean<false>(b, pt, ca, sa, nx, npix, __frcp_rn(float(nx)), wsa, red, nullptr);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = kNeThreads / 32;
  if (threadIdx.x == 0) npairs = 0;
  for (int r = threadIdx.x; r < ncol; r += kNeThreads) col[r] = 0.0;
  __syncthreads();
  storeRowSums(b, red, o);

  // The candidates b of the band (b >= a), one a thread; the overlapping ones listed.
  listOverlappingPairs(st, pt, ca, nx, ny, npix, a, i, ka, nb, min(rowEnd, nReal), npairs, pairs);
  __syncthreads();

  // A warp per listed pair: lane l takes pixels t = l, l + 32, .. of the overlap, row
  // t / w and column t % w, as normalEquationsKernel (the same order, so the same sum).
  const int np = npairs;
  for (int q = warp; q < np; q += nw) {
    const int4 pr = pairs[q];
    const unsigned wa = unsigned(pr.w);
    const int w = int(wa & 0xffu), area = int(wa >> 8);
    const float rw = __int_as_float(pr.z);
    const int r0 = divByRcp(lane, rw), dr = divByRcp(32, rw);
    const int dc = 32 - dr * w, dq = dr * nx + dc, wrap = nx - w;
    int c = lane - r0 * w;
    unsigned qo = unsigned(r0 * nx + c);
    // Bases the compiler cannot fold the lane's offset into: one multiply-add an address.
    const unsigned pa = unsigned(__cvta_generic_to_shared(wsa)) + 8u * (unsigned(pr.y) & 0xffffu);
    const double* pb = opaque(st.v + unsigned(pr.x));
    double acc = wrap == 0 ? leanPair<true>(pa, pb, lane, area, c, qo, w, dc, dq, wrap)
                           : leanPair<false>(pa, pb, lane, area, c, qo, w, dc, dq, wrap);
    acc = warpSum(acc);
    if (lane == 0) col[unsigned(pr.y) >> 16] = acc;
  }
  __syncthreads();
  for (int r = threadIdx.x; r < ncol; r += kNeThreads) colA[a + r] = col[r];
}

// Shared memory of normalEquationsTreeKernel: W S_a, the pair list, the tree buffer.
struct TreeLayout {
  int cap;     // candidates of a column at most (as PairsLayout)
  int pairOff; // doubles before the pair list (int4, 16-byte aligned)
  int treeOff; // doubles before the tree buffer (kNeTreeRows x kNeTreePitch, 16-byte aligned)
  std::size_t bytes;
};
__host__ __device__ inline TreeLayout treeLayout(int npix, int band, int nb, int n) {
  TreeLayout L;
  L.cap = (band + 1) * nb < n ? (band + 1) * nb : n;
  L.pairOff = (npix + 1) & ~1;
  L.treeOff = L.pairOff + 2 * L.cap;
  L.bytes = sizeof(double) * (std::size_t(L.treeOff) + std::size_t(kNeTreeRows) * kNeTreePitch);
  return L;
}

// The same sums as normalEquationsLeanKernel (the same blocks, lanes, pair list and walks:
// iCov, y, fw and pm identical to the bit) with the warp sums left out. The lean kernel
// spends ~15 instructions a warp on each butterfly (warpSum: 5 steps of two shuffles and
// one addition), one a pair and three a warp for y, fw and pm, ~20 % of a block's ~4.0 k
// warp instructions (docs/benchmarks.md, "eighth round"). Here each lane's partial goes
// into a row of the tree buffer (one store) and, after the block's last barrier, one
// thread a row sums it in the butterfly's order (treeSum): warp 0 sums the 12 rows of
// y, fw and pm (lanes 0 .. 11) and the first kNeTreeRows - 12 pairs (lanes 12 .. 31) in
// one pass of ~50 instructions; further pairs (a block has ~20) by the butterfly as
// before. The column is cleared in A itself before the first barrier and each sum written
// there by the thread that makes it: no column buffer, no copy-out pass.
constexpr int kNeTreeSums = 3 * (kNeThreads / 32); // rows of y, fw and pm partials
__global__ void __launch_bounds__(kNeThreads) normalEquationsTreeKernel(BatchView b) {
  extern __shared__ double sh[];
  __shared__ int npairs;
  const int p = blockIdx.y, a = blockIdx.x;
  const DevPatch pt = b.patches[p];
  const int n = b.n, nb = b.nb;
  const int nReal = pt.nfiberPad * nb;
  const int i = divByRcp(a, __frcp_rn(float(nb)));
  const int rowEnd = min(n, (i + b.band + 1) * nb); // column a: rows a .. rowEnd - 1
  double* colA = b.A + (long long)p * n * n + (long long)a * n;
  const long long o = (long long)p * n + a;
  if (a >= nReal) { // identity padding: zero below the diagonal (the prior sets it)
    for (int r = a + threadIdx.x; r < rowEnd; r += kNeThreads) colA[r] = 0.0;
    if (threadIdx.x == 0) b.y[o] = b.fw[o] = b.pm[o] = 0.0;
    return;
  }
  const int ka = a - i * nb;
  const SpotTable& st = b.spots;
  const int nx = st.nx, ny = st.ny, npix = nx * ny;
  const TreeLayout L = treeLayout(npix, b.band, nb, n);
  const long long ia = st.index(pt.fiberPad0 + i, pt.wavePad0 + ka);
  const int2 ca = st.corner[ia];
  const double* sa = st.v + ia * npix;
  double* wsa = sh; // W S_a over the stamp, 0 outside the box
  int4* pairs = reinterpret_cast<int4*>(sh + L.pairOff);
  double* tb = sh + L.treeOff; // rows 0 .. 11: y, fw, pm partials; then the pairs'

  weighStampLean<true>(b, pt, ca, sa, nx, npix, __frcp_rn(float(nx)), wsa, nullptr, tb);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = kNeThreads / 32;
  if (threadIdx.x == 0) npairs = 0;
  for (int r = a + threadIdx.x; r < rowEnd; r += kNeThreads) colA[r] = 0.0;
  __syncthreads();

  // The candidates b of the band (b >= a), as normalEquationsLeanKernel.
  listOverlappingPairs(st, pt, ca, nx, ny, npix, a, i, ka, nb, min(rowEnd, nReal), npairs, pairs);
  __syncthreads();

  // A warp per listed pair, as normalEquationsLeanKernel; the lanes' partials into row
  // kNeTreeSums + q of the tree buffer (the first kNeTreeRows - kNeTreeSums pairs), or
  // summed by the butterfly and written by lane 0 (the rest).
  const int np = npairs;
  constexpr int kRows = kNeTreeRows - kNeTreeSums;
  for (int q = warp; q < np; q += nw) {
    const int4 pr = pairs[q];
    const unsigned wa = unsigned(pr.w);
    const int w = int(wa & 0xffu), area = int(wa >> 8);
    const float rw = __int_as_float(pr.z);
    const int r0 = divByRcp(lane, rw), dr = divByRcp(32, rw);
    const int dc = 32 - dr * w, dq = dr * nx + dc, wrap = nx - w;
    int c = lane - r0 * w;
    unsigned qo = unsigned(r0 * nx + c);
    const unsigned pa = unsigned(__cvta_generic_to_shared(wsa)) + 8u * (unsigned(pr.y) & 0xffffu);
    const double* pb = opaque(st.v + unsigned(pr.x));
    double acc = wrap == 0 ? leanPair<true>(pa, pb, lane, area, c, qo, w, dc, dq, wrap)
                           : leanPair<false>(pa, pb, lane, area, c, qo, w, dc, dq, wrap);
    if (q < kRows) {
      tb[(kNeTreeSums + q) * kNeTreePitch + lane] = acc;
    } else {
      acc = warpSum(acc);
      if (lane == 0) colA[a + (unsigned(pr.y) >> 16)] = acc;
    }
  }
  __syncthreads(); // the partials are in, the column's zeros written

  // Warp 0, a thread a row: lanes 0 .. 11 y, fw, pm of warps 0 .. 3 (row k nw + w), summed
  // over the warps in writeRowSums' order by lanes 0, 4 and 8; lanes 12 .. 31 the pairs.
  if (warp != 0) return;
  const int q = lane - kNeTreeSums;
  if (lane >= kNeTreeSums && q >= np) return; // (the row sums' shuffles below: lanes 0 .. 11 only)
  const double v = treeSum(unsigned(__cvta_generic_to_shared(tb)) + 8u * kNeTreePitch * unsigned(lane));
  if (lane >= kNeTreeSums) {
    colA[a + (unsigned(pairs[q].y) >> 16)] = v;
    return;
  }
  const unsigned m = (1u << kNeTreeSums) - 1u; // groups of 4 lanes: k = lane / 4, warp w = lane % 4
  const double v1 = __shfl_down_sync(m, v, 1, 4), v2 = __shfl_down_sync(m, v, 2, 4), v3 = __shfl_down_sync(m, v, 3, 4);
  if ((lane & 3) != 0) return;
  double s = 0.0; // writeRowSums' order: ((0 + warp 0) + warp 1) + ..
  s += v;
  s += v1;
  s += v2;
  s += v3;
  (lane == 0 ? b.y : lane == 4 ? b.fw : b.pm)[o] = s;
}

// The same sums as normalEquationsPairsKernel again (each pair's pixels on the same lanes
// in the same order, the same reductions: iCov, y, fw and pm identical to the bit), one
// thread block per group of kNeGroup consecutive unknowns of a patch (a tile of columns
// of A) instead of one per unknown, so the chain of dependent loads a block starts with
// (patch, corners, stamps and pixels, candidates' corners) is paid once for the group.
// Every stage is laid out without integer division by a runtime width:
//  1. the corners and stamp indices of the group's rows and of every candidate of their
//     band, into shared memory in one pass;
//  2. the rows' stamps, ivar and pixels 4 rows at a time (their loads in flight
//     together), a thread on pixels t = tid, tid + 128, .. of each row as weighStamp, so
//     y, fw and pm are summed in registers in weighStamp's order; W S_a kept in shared
//     memory;
//  3. a warp per row: its column of the band cleared in A (zeros included, no memsets)
//     and its candidates tested 32 at a time, the overlapping ones appended to the
//     block's pair list by one atomic a warp (ballot);
//  4. a warp per listed pair, software-pipelined: the next pair's stamp values (up to
//     kNePrefetch a lane, the pair's own count of them) are loaded into registers before
//     the current pair is summed; the sum goes straight into A (its entry was cleared
//     in step 3; a candidate's stamp serves several rows of the group through L1).
// Measured on an H100 (docs/benchmarks.md, "sixth round"): 23.3 ms a frame against the
// pair kernel's 16.7 (a first version, with division per element and a fixed 6-slot
// walk a pair, 31.3): the ~160 pairs a block keep the instruction count of the pair
// kernel while 24 resident warps an SM hide less of their latency than its 48.
constexpr int kNeGroup = 8;    // unknowns (columns of A) a block
constexpr int kNeRows = 4;     // stage-2 rows a thread loads together
constexpr int kNePrefetch = 6; // a pair's pixels a lane holds ahead (overlaps of <= 192 px whole)

struct TileLayout {
  int corCap;  // candidate corners at most
  int pairCap; // listed pairs at most
  int pairOff; // doubles before the pair list (ints)
  int redOff;  // doubles before the reductions [G][3][warps]
  int corOff;  // doubles before the corners (int2)
  int ibOff;   // doubles before the stamp indices (ints)
  std::size_t bytes;
};
__host__ __device__ inline TileLayout tileLayout(int npix, int band, int nb, int n) {
  TileLayout L;
  const int G = kNeGroup;
  const int ccap = (band + 1) * nb < n ? (band + 1) * nb : n;
  L.corCap = (band + 1) * nb + G < n ? (band + 1) * nb + G : n;
  L.pairCap = G * ccap;
  L.pairOff = G * npix;
  L.redOff = L.pairOff + (L.pairCap + 1) / 2;
  L.corOff = L.redOff + 3 * G * (kNeThreads / 32);
  L.ibOff = L.corOff + L.corCap;
  L.bytes = sizeof(double) * (std::size_t(L.ibOff) + std::size_t(L.corCap + 1) / 2);
  return L;
}

// One listed pair as a lane walks it: W S_a in shared memory, S_b in global memory, the
// lane's first pixel and the increments (as in normalEquationsPairsKernel).
struct PairWalk {
  const double* pa;
  const double* pb;
  double* dst;
  int area, w, c, qo, dc, dq, wrap;
};

__device__ __forceinline__ PairWalk pairWalk(int code, int a0, int nx, int ny, int npix, const DevPatch& pt,
                                            const double* sv, const int2* cor, const int* ib,
                                            const double* wsa, double* A, int n, int lane) {
  const int r = code >> 16, cb0 = code & 0xffff;
  const int2 ca = cor[r], cb = cor[cb0];
  const int ox0 = max(max(ca.x, cb.x), pt.x0), ox1 = min(min(ca.x, cb.x) + nx, pt.x1);
  const int oy0 = max(max(ca.y, cb.y), pt.y0), oy1 = min(min(ca.y, cb.y) + ny, pt.y1);
  PairWalk P;
  P.w = ox1 - ox0;
  P.area = P.w * (oy1 - oy0);
  P.pa = wsa + r * npix + (oy0 - ca.y) * nx + (ox0 - ca.x);
  P.pb = sv + (long long)ib[cb0] * npix + (oy0 - cb.y) * nx + (ox0 - cb.x);
  P.dst = A + (long long)(a0 + r) * n + (a0 + cb0);
  const float rw = __frcp_rn(float(P.w));
  const int r0 = int((float(lane) + 0.5f) * rw), dr = int(32.5f * rw);
  P.dc = 32 - dr * P.w;
  P.dq = dr * nx + P.dc;
  P.wrap = nx - P.w;
  P.c = lane - r0 * P.w;
  P.qo = r0 * nx + P.c;
  return P;
}

__device__ __forceinline__ void pairStep(PairWalk& P) {
  P.c += P.dc;
  P.qo += P.dq;
  if (P.c >= P.w) {
    P.c -= P.w;
    P.qo += P.wrap;
  }
}

// The pair's first kNePrefetch values of S_b a lane needs (its own count: uniform over the warp).
__device__ __forceinline__ void pairLoad(PairWalk P, int lane, double (&v)[kNePrefetch]) {
  const int m = (P.area + 31) >> 5;
#pragma unroll
  for (int k = 0; k < kNePrefetch; ++k) {
    if (k < m) {
      v[k] = lane + 32 * k < P.area ? __ldg(P.pb + P.qo) : 0.0;
      pairStep(P);
    }
  }
}

__global__ void __launch_bounds__(kNeThreads, 6) normalEquationsTileKernel(BatchView b) {
  extern __shared__ double sh[];
  __shared__ int npairs;
  constexpr int G = kNeGroup;
  const int p = blockIdx.y, a0 = blockIdx.x * G;
  const int n = b.n, nb = b.nb;
  const DevPatch pt = b.patches[p];
  const int nReal = pt.nfiberPad * nb;
  const int nrow = min(G, n - a0);                  // the group's unknowns
  const int nreal = max(0, min(nrow, nReal - a0));  // of which real (the rest identity padding)
  const SpotTable& st = b.spots;
  const int nx = st.nx, ny = st.ny, npix = nx * ny;
  const TileLayout L = tileLayout(npix, b.band, nb, n);
  double* wsa = sh;                                   // [G][npix] W S_a, 0 outside the box
  int* pairs = reinterpret_cast<int*>(sh + L.pairOff);
  double* red = sh + L.redOff;                        // [G][3][warps]
  int2* cor = reinterpret_cast<int2*>(sh + L.corOff); // unknowns a0 .. cEnd - 1
  int* ib = reinterpret_cast<int*>(sh + L.ibOff);     // their stamps' indices
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = kNeThreads / 32;
  double* A = b.A + (long long)p * n * n;
  auto rowEnd = [&](int a) { return min(n, (a / nb + b.band + 1) * nb); };
  const int cEnd = min(rowEnd(a0 + nrow - 1), nReal);

  // 1. Corners and stamp indices (fiber by fiber: no division a candidate).
  for (int j = a0 / nb; j * nb < cEnd; ++j) {
    const int lo = max(a0, j * nb), hi = min(cEnd, (j + 1) * nb);
    const long long base = st.index(pt.fiberPad0 + j, pt.wavePad0 + (lo - j * nb));
    for (int c = tid; c < hi - lo; c += kNeThreads) {
      cor[lo - a0 + c] = st.corner[base + c];
      ib[lo - a0 + c] = int(base + c);
    }
  }
  if (tid == 0) npairs = 0;
  __syncthreads();

  // 2. W S_a of each real row and its y, fw, pm (weighStamp's partition and order).
  for (int h = 0; h < nreal; h += kNeRows) {
    double yv[kNeRows], fwv[kNeRows], pmv[kNeRows];
#pragma unroll
    for (int u = 0; u < kNeRows; ++u) yv[u] = fwv[u] = pmv[u] = 0.0;
    for (int t = tid; t < npix; t += kNeThreads) {
      const int ty = t / nx, tx = t - ty * nx;
      double s[kNeRows], w[kNeRows], pv[kNeRows];
      bool in[kNeRows];
#pragma unroll
      for (int u = 0; u < kNeRows; ++u) {
        s[u] = w[u] = pv[u] = 0.0;
        in[u] = false;
        if (h + u < nreal) {
          const int2 ca = cor[h + u];
          const int X = ca.x + tx, Y = ca.y + ty;
          s[u] = __ldg(st.v + (long long)ib[h + u] * npix + t);
          in[u] = X >= pt.x0 && X < pt.x1 && Y >= pt.y0 && Y < pt.y1;
          if (in[u]) {
            const long long q = (long long)Y * b.npixX + X;
            w[u] = __ldg(b.ivar + q);
            pv[u] = __ldg(b.pix + q);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kNeRows; ++u) {
        if (h + u < nreal) {
          const double ws = w[u] * s[u];
          wsa[(h + u) * npix + t] = ws;
          yv[u] += ws * pv[u];
          fwv[u] += ws;
          if (!in[u] || w[u] == 0.0) pmv[u] += s[u]; // §4.7: masked or outside the box
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kNeRows; ++u) {
      if (h + u < nreal) { // the same for the whole block
        const double ys = warpSum(yv[u]), fs = warpSum(fwv[u]), ps = warpSum(pmv[u]);
        if (lane == 0) {
          red[(3 * (h + u)) * nw + warp] = ys;
          red[(3 * (h + u) + 1) * nw + warp] = fs;
          red[(3 * (h + u) + 2) * nw + warp] = ps;
        }
      }
    }
  }
  __syncthreads();

  if (tid < nrow) {
    const long long o = (long long)p * n + a0 + tid;
    if (tid < nreal) writeRowSums(b, red + 3 * tid * nw, o);
    else b.y[o] = b.fw[o] = b.pm[o] = 0.0;
  }
  // 3. A warp per row: the column cleared from the diagonal to the band's last row
  // (identity padding too: the prior sets its diagonal), the row's overlapping
  // candidates listed.
  for (int r = warp; r < nrow; r += nw) {
    const int a = a0 + r, end = rowEnd(a);
    double* colA = A + (long long)a * n;
    for (int k = a + lane; k < end; k += 32) colA[k] = 0.0;
    if (r >= nreal) continue;
    const int cEndR = min(end, nReal);
    const int2 ca = cor[r];
    for (int base = a; base < cEndR; base += 32) {
      const int bb = base + lane;
      bool hit = false;
      if (bb < cEndR) {
        const int2 cb = cor[bb - a0];
        const int ox0 = max(max(ca.x, cb.x), pt.x0), ox1 = min(min(ca.x, cb.x) + nx, pt.x1);
        const int oy0 = max(max(ca.y, cb.y), pt.y0), oy1 = min(min(ca.y, cb.y) + ny, pt.y1);
        hit = ox0 < ox1 && oy0 < oy1;
      }
      const unsigned m = __ballot_sync(0xffffffffu, hit);
      if (m) {
        int s0 = 0;
        if (lane == 0) s0 = atomicAdd(&npairs, __popc(m));
        s0 = __shfl_sync(0xffffffffu, s0, 0);
        if (hit) pairs[s0 + __popc(m & ((1u << lane) - 1u))] = (r << 16) | (bb - a0);
      }
    }
  }
  __syncthreads(); // the columns' zeros are written before any pair's sum

  // 4. A warp per listed pair, the next pair's loads issued before this one is summed.
  const int np = npairs;
  int q = warp;
  if (q >= np) return;
  PairWalk cur = pairWalk(pairs[q], a0, nx, ny, npix, pt, st.v, cor, ib, wsa, A, n, lane);
  double vb[kNePrefetch] = {};
  pairLoad(cur, lane, vb);
  for (; q < np; q += nw) {
    PairWalk nxt = cur;
    double vn[kNePrefetch] = {};
    if (q + nw < np) {
      nxt = pairWalk(pairs[q + nw], a0, nx, ny, npix, pt, st.v, cor, ib, wsa, A, n, lane);
      pairLoad(nxt, lane, vn);
    }
    double acc = 0.0;
#pragma unroll
    for (int k = 0; k < kNePrefetch; ++k) {
      if (lane + 32 * k < cur.area) {
        acc += cur.pa[cur.qo] * vb[k];
        pairStep(cur);
      }
    }
    for (int t = lane + 32 * kNePrefetch; t < cur.area; t += 32) { // overlaps larger than the prefetch
      acc += cur.pa[cur.qo] * __ldg(cur.pb + cur.qo);
      pairStep(cur);
    }
    acc = warpSum(acc);
    if (lane == 0) *cur.dst = acc;
    cur = nxt;
#pragma unroll
    for (int k = 0; k < kNePrefetch; ++k) vb[k] = vn[k];
  }
}

// §4.2: minweight = 1e-4 max(fluxweight); (minweight - fw)^2 where fw <= minweight,
// else regularize^2; always + 1e-15. Identity-padding unknowns get diagonal 1.
__global__ void priorKernel(BatchView b) {
  __shared__ double red[32];
  const int p = blockIdx.x;
  const DevPatch pt = b.patches[p];
  const int nReal = pt.nfiberPad * b.nb;
  const double* fw = b.fw + (long long)p * b.n;
  double m = 0.0;
  for (int a = threadIdx.x; a < nReal; a += blockDim.x) m = fmax(m, fw[a]);
  for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    double mm = 0.0;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) mm = fmax(mm, red[w]);
    red[0] = mm;
  }
  __syncthreads();
  const double minweight = 1e-4 * red[0];
  const double reg2 = b.regularize * b.regularize;
  double* A = b.A + (long long)p * b.n * b.n;
  double dmax = 0.0;
  for (int a = threadIdx.x; a < nReal; a += blockDim.x) {
    double& d = A[a + (long long)a * b.n];
    const double w = fw[a];
    const double add = w <= minweight ? (minweight - w) * (minweight - w) : reg2;
    d = d + add + 1e-15;
    dmax = fmax(dmax, d);
  }
  // Identity padding gets the largest real diagonal: decoupled, it changes nothing,
  // and it stays below the largest eigenvalue so noise mode's clipping floor
  // (1e-14 of the largest eigenvalue) is the same as without padding.
  for (int o = 16; o > 0; o >>= 1) dmax = fmax(dmax, __shfl_xor_sync(0xffffffffu, dmax, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = dmax;
  __syncthreads();
  if (threadIdx.x == 0) {
    double mm = 0.0;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) mm = fmax(mm, red[w]);
    red[0] = mm > 0.0 ? mm : 1.0;
  }
  __syncthreads();
  for (int a = nReal + threadIdx.x; a < b.n; a += blockDim.x) A[a + (long long)a * b.n] = red[0];
}

// One block per patch: the patch's fiber coupling width, the largest |j - i| between
// fibers i, j with two stamps whose overlap inside the patch box is not empty (the
// test normalEquationsKernel fills iCov by, so blocks further apart are exactly zero;
// as PatchSolver's coupling in core/extract/patch_solver.cpp).
__global__ void fiberCouplingKernel(const DevPatch* patches, SpotTable st, int nb, int* out) {
  __shared__ int wmax;
  const DevPatch pt = patches[blockIdx.x];
  if (threadIdx.x == 0) wmax = 0;
  __syncthreads();
  const int nx = st.nx, ny = st.ny, nReal = pt.nfiberPad * nb;
  for (int a = threadIdx.x; a < nReal; a += blockDim.x) {
    const int i = a / nb;
    const int2 ca = st.corner[st.index(pt.fiberPad0 + i, pt.wavePad0 + a % nb)];
    // Farthest fiber first; nearer ones than the width found so far cannot widen it.
    for (int j = pt.nfiberPad - 1; j > i + *(volatile int*)&wmax; --j) {
      bool hit = false;
      for (int kb = 0; kb < nb && !hit; ++kb) {
        const int2 cb = st.corner[st.index(pt.fiberPad0 + j, pt.wavePad0 + kb)];
        const int ox0 = max(max(ca.x, cb.x), pt.x0), ox1 = min(min(ca.x, cb.x) + nx, pt.x1);
        const int oy0 = max(max(ca.y, cb.y), pt.y0), oy1 = min(min(ca.y, cb.y) + ny, pt.y1);
        hit = ox0 < ox1 && oy0 < oy1;
      }
      if (hit) {
        atomicMax(&wmax, j - i);
        break;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = wmax;
}

} // namespace

void launchFiberCoupling(const DevPatch* patches, int count, const SpotTable& st, int nb, int* out,
                         cudaStream_t stream) {
  if (count <= 0) return;
  fiberCouplingKernel<<<count, 128, 0, stream>>>(patches, st, nb, out);
  SPEX_CUDA_LAUNCH("fiberCouplingKernel");
}

void launchNormalEquations(const BatchView& b, cudaStream_t stream) {
  const int npix = b.spots.nx * b.spots.ny;
  const std::size_t shm = sizeof(double) * (npix + 3 * (kNeThreads / 32));
  if (shm > 48 * 1024)
    SPEX_CUDA(cudaFuncSetAttribute(normalEquationsKernel,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, int(shm)));
  normalEquationsKernel<<<dim3(b.n, b.count), kNeThreads, shm, stream>>>(b);
  SPEX_CUDA_LAUNCH("normalEquationsKernel");
}

bool normalEquationsPairsFit(const BatchView& b) {
  const int npix = b.spots.nx * b.spots.ny;
  const long long nspot = (long long)b.spots.nf * b.spots.nk;
  return npix <= 0xffff && b.spots.nx <= 0xffff && b.spots.ny <= 0xffff && nspot <= 0x7fffffffLL &&
         b.band >= 0 && b.band < b.F;
}

void launchNormalEquationsPairs(const BatchView& b, cudaStream_t stream) {
  if (!normalEquationsPairsFit(b))
    throw GpuError("launchNormalEquationsPairs: stamps of " + std::to_string(b.spots.nx) + " x " +
                   std::to_string(b.spots.ny) + " px, " + std::to_string((long long)b.spots.nf * b.spots.nk) +
                   " spots, band " + std::to_string(b.band) + " of " + std::to_string(b.F) +
                   " fiber blocks: outside what the pair list holds (normalEquationsPairsFit)");
  const PairsLayout L = pairsLayout(b.spots.nx * b.spots.ny, b.band, b.nb, b.n);
  if (L.bytes > 48 * 1024)
    SPEX_CUDA(cudaFuncSetAttribute(normalEquationsPairsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(L.bytes)));
  normalEquationsPairsKernel<<<dim3(b.n, b.count), kNeThreads, L.bytes, stream>>>(b);
  SPEX_CUDA_LAUNCH("normalEquationsPairsKernel");
}

bool normalEquationsLeanFit(const BatchView& b) {
  const long long npix = (long long)b.spots.nx * b.spots.ny;
  const long long nspot = (long long)b.spots.nf * b.spots.nk;
  return normalEquationsPairsFit(b) && b.spots.nx <= 0xff && npix * nspot <= 0xffffffffLL &&
         pairsLayout(int(npix), b.band, b.nb, b.n).cap <= 0xffff && b.n < (1 << 22);
}

void launchNormalEquationsLean(const BatchView& b, cudaStream_t stream, bool tree) {
  static_assert(kNeThreads == 128 && kNeTreeSums == 12, "normalEquationsTreeKernel: 4 warps (lanes 0 .. 11 of warp 0)");
  if (!normalEquationsLeanFit(b))
    throw GpuError("launchNormalEquationsLean: stamps of " + std::to_string(b.spots.nx) + " x " +
                   std::to_string(b.spots.ny) + " px, " + std::to_string((long long)b.spots.nf * b.spots.nk) +
                   " spots, " + std::to_string(b.n) + " unknowns, band " + std::to_string(b.band) + " of " +
                   std::to_string(b.F) + " fiber blocks: outside what the lean kernel holds (normalEquationsLeanFit)");
  if (tree) {
    const TreeLayout T = treeLayout(b.spots.nx * b.spots.ny, b.band, b.nb, b.n);
    if (T.bytes > 48 * 1024)
      SPEX_CUDA(cudaFuncSetAttribute(normalEquationsTreeKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(T.bytes)));
    normalEquationsTreeKernel<<<dim3(b.n, b.count), kNeThreads, T.bytes, stream>>>(b);
    SPEX_CUDA_LAUNCH("normalEquationsTreeKernel");
    return;
  }
  const PairsLayout L = pairsLayout(b.spots.nx * b.spots.ny, b.band, b.nb, b.n);
  if (L.bytes > 48 * 1024)
    SPEX_CUDA(cudaFuncSetAttribute(normalEquationsLeanKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(L.bytes)));
  normalEquationsLeanKernel<<<dim3(b.n, b.count), kNeThreads, L.bytes, stream>>>(b);
  SPEX_CUDA_LAUNCH("normalEquationsLeanKernel");
}

bool normalEquationsTileFit(const BatchView& b) {
  if (!normalEquationsPairsFit(b) || b.n > 0xffff) return false;
  int dev = 0, optin = 0;
  SPEX_CUDA(cudaGetDevice(&dev));
  SPEX_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return tileLayout(b.spots.nx * b.spots.ny, b.band, b.nb, b.n).bytes <= std::size_t(optin);
}

void launchNormalEquationsTile(const BatchView& b, cudaStream_t stream) {
  if (!normalEquationsTileFit(b))
    throw GpuError("launchNormalEquationsTile: stamps of " + std::to_string(b.spots.nx) + " x " +
                   std::to_string(b.spots.ny) + " px, " + std::to_string(b.n) + " unknowns, band " +
                   std::to_string(b.band) + " of " + std::to_string(b.F) +
                   " fiber blocks: outside what the tile kernel holds (normalEquationsTileFit)");
  const TileLayout L = tileLayout(b.spots.nx * b.spots.ny, b.band, b.nb, b.n);
  if (L.bytes > 48 * 1024)
    SPEX_CUDA(cudaFuncSetAttribute(normalEquationsTileKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(L.bytes)));
  normalEquationsTileKernel<<<dim3((b.n + kNeGroup - 1) / kNeGroup, b.count), kNeThreads, L.bytes, stream>>>(b);
  SPEX_CUDA_LAUNCH("normalEquationsTileKernel");
}

void launchPrior(const BatchView& b, cudaStream_t stream) {
  priorKernel<<<b.count, 256, 0, stream>>>(b);
  SPEX_CUDA_LAUNCH("priorKernel");
}

} // namespace spex::gpu
