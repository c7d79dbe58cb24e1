// Batched fp64 GEMM on the FP64 tensor cores (batched_gemm.h says what and why).
//
// A thread block: one 80 x 80 tile of one C_b. Its five warps own 16 rows each, all 80
// columns: 10 fragments of the m16n8k8 DMMA (sm_90; on sm_80, which has only m8n8k4,
// each is four m8n8k4 on the same registers). Why that shape: on an H100 m8n8k4 issues
// at half the FP64 tensor rate of the m16n8 shapes (~32 against ~64 TFLOP/s), and the
// first version of this kernel (5 x 5 m8n8k4 fragments a warp, four warps) ran the
// engine's products at ~9 TFLOP/s, slower than cuBLAS (docs/benchmarks.md, "Issue 12,
// sixth round"). op(A) and op(B) go through shared memory in chunks of 16 along k, both
// stored k-major with the tile's 80 rows (resp. columns) contiguous at a leading
// dimension of 88 doubles: a fragment load (lane l reads row l / 4 of k-row l % 4)
// then falls into two wavefronts without bank conflicts (88 = 8 mod 16). A chunk's
// loads are 8-byte `cp.async`s (zero-filled outside the matrix) in two stages; each
// thread stages 8 elements of each matrix at fixed offsets from one pointer: where the
// matrix is contiguous along the tile's rows a thread keeps its row and steps along k,
// where it is contiguous along k each group of 4 lanes reads 4 consecutive k (a 32-byte
// sector) of one of 8 rows.
#include "batched_gemm.h"

#include "device_memory.h"
#include "dmma.cuh"
#include "kernels.h"

#include <algorithm>
#include <climits>
#include <string>

namespace spex::gpu {

namespace {

constexpr int kTile = 80;    // rows and columns of C per thread block
constexpr int kChunk = 16;   // k per shared-memory stage
constexpr int kLd = 88;      // leading dimension of a staged chunk (kTile + 8)
constexpr int kWarps = kTile / 16;
constexpr int kThreads = 32 * kWarps;
constexpr int kFrags = kTile / 8; // m16n8 fragments per warp (along n)
constexpr int kPerThread = kTile * kChunk / kThreads; // staged elements per matrix
static_assert(kPerThread == 8 && kWarps == 5, "the staging maps below assume 8 elements a thread, 5 warps");

__device__ __forceinline__ void copyAsync8(double* dst, const double* src, bool valid) {
#if __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 8 : 0));
#else
  *dst = valid ? *src : 0.0;
#endif
}

__device__ __forceinline__ void commitCopies() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int N>
__device__ __forceinline__ void waitCopies() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Where one thread stages its 8 elements of a matrix (rows [r0, r0 + 80) by k
// [k0, k0 + 16) of a matrix whose element (r, kk) lies at src[r + kk * ld] where
// rowsContiguous, else at src[kk + r * ld]) into dst[kk * kLd + r].
//   rows contiguous: row r = t % 80, k = t / 80 + 2 i (i = 0..7): 32 lanes, 32 rows.
//   k contiguous: lane l, warp w: k = l % 4 + 4 (i % 4), row = 16 w + 8 (i / 4) + l / 4.
struct StageMap {
  long long first; // offset of element i = 0 at k0 = 0
  long long step;  // offset from element i to i + 1 (rows contiguous), or between the
                   // two row groups (k contiguous)
  int r, kk;       // tile row and chunk k of element 0
  bool rowsContiguous;

  __device__ StageMap(long long ld, bool rowsContig, int r0) : rowsContiguous(rowsContig) {
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    if (rowsContig) {
      r = t % kTile;
      kk = t / kTile;
      first = (r0 + r) + kk * ld;
      step = 2 * ld;
    } else {
      r = 16 * w + (lane >> 2);
      kk = lane & 3;
      first = kk + (long long)(r0 + r) * ld;
      step = 8 * ld;
    }
  }
};

__device__ __forceinline__ void stageChunk(double* dst, const double* src, const StageMap& m, long long kStride,
                                           int rowsLeft, int kLeft) {
  // rowsLeft = rows - r0, kLeft = kAll - k0; src already offset by k0 * kStride.
  const double* p = src + m.first;
  if (m.rowsContiguous) {
    const bool rowOk = m.r < rowsLeft;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int kk = m.kk + 2 * i;
      const bool valid = rowOk && kk < kLeft;
      copyAsync8(dst + kk * kLd + m.r, valid ? p + i * m.step : src, valid);
    }
  } else {
    (void)kStride;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int kk = m.kk + 4 * (i & 3), r = m.r + 8 * (i >> 2);
      const bool valid = r < rowsLeft && kk < kLeft;
      copyAsync8(dst + kk * kLd + r, valid ? p + 4 * (i & 3) + (i >> 2) * m.step : src, valid);
    }
  }
}

__device__ __forceinline__ double loadOrdered(const double* p) {
  double v;
  asm volatile("ld.global.f64 %0, [%1];\n" : "=d"(v) : "l"(p));
  return v;
}

__device__ __forceinline__ void storeOrdered(double* p, double v) {
  asm volatile("st.global.f64 [%0], %1;\n" ::"l"(p), "d"(v) : "memory");
}

// acc += A B for one m16n8k8 fragment (dmma.cuh's layout) on the tensor cores (sm_80+);
// as, bs: the fragment's first row (column) at k-row 0 of the staged chunk (for the
// fallback without tensor cores).
__device__ __forceinline__ void mma1688(double (&acc)[4], const double (&a)[4], const double (&b)[2],
                                        const double* as, const double* bs) {
#if __CUDA_ARCH__ >= 800
  (void)as;
  (void)bs;
  dmma1688(acc, a, b);
#else
  // No tensor cores: the product on the FP64 units from shared memory.
  (void)a;
  (void)b;
  const int lane = threadIdx.x & 31, g = lane >> 2, c = (lane & 3) * 2;
  for (int q = 0; q < 8; ++q) {
    const double x0 = as[q * kLd + g], x1 = as[q * kLd + g + 8];
    const double y0 = bs[q * kLd + c], y1 = bs[q * kLd + c + 1];
    acc[0] += x0 * y0;
    acc[1] += x0 * y1;
    acc[2] += x1 * y0;
    acc[3] += x1 * y1;
  }
#endif
}

// ReadC: beta is neither 0 nor +-alpha (a separate build: its epilogue needs
// registers the others do not).
template <bool ReadC>
__global__ void __launch_bounds__(kThreads, ReadC ? 1 : 2)
    gemmTileKernel(bool transA, bool transB, int m, int n, int k, double alpha, const double* __restrict__ A,
                   long long lda, long long strideA, const double* __restrict__ B, long long ldb,
                   long long strideB, double beta, double* __restrict__ C, long long ldc, long long strideC,
                   int batch) {
  __shared__ __align__(16) double As[2][kChunk * kLd];
  __shared__ __align__(16) double Bs[2][kChunk * kLd];
  const int tilesM = (m + kTile - 1) / kTile;
  const int m0 = (blockIdx.x % tilesM) * kTile, n0 = (blockIdx.x / tilesM) * kTile;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3, wm = warp * 16;
  const int chunks = alpha == 0.0 ? 0 : (k + kChunk - 1) / kChunk;
  // op(A) is m x k: rows contiguous unless transposed; op(B) is k x n, its columns are
  // the staged "rows": contiguous only when transposed.
  const StageMap mapA(lda, !transA, m0), mapB(ldb, transB, n0);
  const long long kStrideA = transA ? 1 : lda, kStrideB = transB ? ldb : 1;
  const bool cInAcc = beta != 0.0 && (beta == alpha || beta == -alpha);
  const double cSign = beta == alpha ? 1.0 : -1.0;
  for (int b = blockIdx.y; b < batch; b += gridDim.y) {
    const double* Ab = A + b * strideA;
    const double* Bb = B + b * strideB;
    double* Cb = C + b * strideC;
    // Where beta = +-alpha (the engine's updates C - A B and C + A B) the accumulators
    // start from (beta / alpha) C, read here while the first chunk loads, and C is
    // alpha acc at the end: the same sum of k + 1 terms, no registers beside them.
    double acc[kFrags][4];
    const int row0 = m0 + wm + g, row1 = row0 + 8;
#pragma unroll
    for (int j = 0; j < kFrags; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = e < 2 ? row0 : row1, col = n0 + j * 8 + 2 * t + (e & 1);
        acc[j][e] = cInAcc && row < m && col < n ? cSign * Cb[row + col * ldc] : 0.0;
      }
    auto stage = [&](int s, int k0) {
      stageChunk(As[s], Ab + k0 * kStrideA, mapA, kStrideA, m - m0, k - k0);
      stageChunk(Bs[s], Bb + k0 * kStrideB, mapB, kStrideB, n - n0, k - k0);
      commitCopies();
    };
    if (chunks > 0) stage(0, 0);
    for (int c = 0; c < chunks; ++c) {
      if (c + 1 < chunks) {
        stage((c + 1) & 1, (c + 1) * kChunk);
        waitCopies<1>();
      } else {
        waitCopies<0>();
      }
      __syncthreads();
      const double* as = As[c & 1] + wm;
      const double* bs = Bs[c & 1];
#pragma unroll
      for (int q = 0; q < kChunk; q += 8) {
        double a[4];
        a[0] = as[(q + t) * kLd + g];
        a[1] = as[(q + t) * kLd + g + 8];
        a[2] = as[(q + t + 4) * kLd + g];
        a[3] = as[(q + t + 4) * kLd + g + 8];
#pragma unroll
        for (int j = 0; j < kFrags; ++j) {
          double bf[2];
          bf[0] = bs[(q + t) * kLd + j * 8 + g];
          bf[1] = bs[(q + t + 4) * kLd + j * 8 + g];
          mma1688(acc[j], a, bf, as + q * kLd, bs + q * kLd + j * 8);
        }
      }
      __syncthreads();
    }
    // Other beta (not 0): each fragment's 4 entries of C read, then written. The ordered
    // loads and stores keep the compiler from reading all 40 ahead beside the
    // accumulators (it spills then); slow, and no product of the engine takes it.
    constexpr bool readC = ReadC;
#pragma unroll
    for (int j = 0; j < kFrags; ++j) {
      double old[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = e < 2 ? row0 : row1, col = n0 + j * 8 + 2 * t + (e & 1);
        old[e] = readC && row < m && col < n ? loadOrdered(Cb + row + col * ldc) : 0.0;
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = e < 2 ? row0 : row1, col = n0 + j * 8 + 2 * t + (e & 1);
        const double v = alpha * acc[j][e];
        if (row < m && col < n) storeOrdered(Cb + row + col * ldc, readC ? v + beta * old[e] : v);
      }
    }
  }
}

const char* name(Trans t) { return t == Trans::N ? "N" : "T"; }

} // namespace

void gemmStridedBatched(Trans ta, Trans tb, int m, int n, int k, double alpha, const double* A, int lda,
                        long long strideA, const double* B, int ldb, long long strideB, double beta, double* C,
                        int ldc, long long strideC, int batch, cudaStream_t stream) {
  const int rowsA = ta == Trans::N ? m : k, rowsB = tb == Trans::N ? k : n;
  const bool readsAB = alpha != 0.0 && k > 0;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < std::max(1, rowsA) || ldb < std::max(1, rowsB) ||
      ldc < std::max(1, m) || strideA < 0 || strideB < 0 || strideC < 0 ||
      (m > 0 && n > 0 && batch > 0 && (!C || (readsAB && (!A || !B)))))
    throw GpuError("gemmStridedBatched: bad arguments (" + std::string(name(ta)) + name(tb) + ", m " +
                   std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) + ", lda " +
                   std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " + std::to_string(ldc) +
                   ", strides " + std::to_string(strideA) + ", " + std::to_string(strideB) + ", " +
                   std::to_string(strideC) + ", batch " + std::to_string(batch) + ")");
  if (m == 0 || n == 0 || batch == 0) return;
  const long long tiles = (long long)((m + kTile - 1) / kTile) * ((n + kTile - 1) / kTile);
  if (tiles > INT_MAX) throw GpuError("gemmStridedBatched: " + std::to_string(tiles) + " tiles per matrix");
  const dim3 grid(unsigned(tiles), unsigned(std::min(batch, 65535)));
  const bool readC = beta != 0.0 && beta != alpha && beta != -alpha;
  (readC ? gemmTileKernel<true> : gemmTileKernel<false>)<<<grid, kThreads, 0, stream>>>(
      ta == Trans::T, tb == Trans::T, m, n, readsAB ? k : 0, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc,
      strideC, batch);
  SPEX_CUDA_LAUNCH("gemmTileKernel");
}

void gemmStridedBatched(cublasHandle_t cublas, Trans ta, Trans tb, int m, int n, int k, double alpha,
                        const double* A, int lda, long long strideA, const double* B, int ldb, long long strideB,
                        double beta, double* C, int ldc, long long strideC, int batch, cudaStream_t stream,
                        const char* what) {
  if (!cublas) {
    gemmStridedBatched(ta, tb, m, n, k, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch,
                       stream);
    return;
  }
  checkCublas(cublasSetStream(cublas, stream), "cublasSetStream");
  const auto op = [](Trans t) { return t == Trans::N ? CUBLAS_OP_N : CUBLAS_OP_T; };
  checkCublas(cublasDgemmStridedBatched(cublas, op(ta), op(tb), m, n, k, &alpha, A, lda, strideA, B, ldb, strideB,
                                        &beta, C, ldc, strideC, batch),
              what);
}

} // namespace spex::gpu
