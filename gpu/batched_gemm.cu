// Batched fp64 GEMM on the FP64 tensor cores (batched_gemm.h says what and why).
//
// A thread block: one 80 x 80 tile of one C_b. Its four warps (2 x 2) own 40 x 40 each,
// 5 x 5 fragments of the m8n8k4 DMMA (8 x 8 accumulators, k = 4 a step). op(A) and op(B)
// go through shared memory in chunks of 16 along k, both stored k-major with the tile's
// 80 rows (resp. columns) contiguous at a leading dimension of 88 doubles: a fragment
// load (lane l reads row l / 4 of k-row l % 4) then falls into two wavefronts without
// bank conflicts (88 = 8 mod 16). The loads of a chunk are 8-byte `cp.async`s (zero-filled
// outside the matrix), in two stages; where the matrix is contiguous along the tile's
// rows 32 lanes read 32 consecutive rows, where it is contiguous along k each lane
// group of 4 reads 4 consecutive k (a 32-byte sector) of one of 8 rows.
#include "batched_gemm.h"

#include "device_memory.h"
#include "kernels.h"

#include <algorithm>
#include <climits>
#include <string>

namespace spex::gpu {

namespace {

constexpr int kTile = 80;    // rows and columns of C per thread block
constexpr int kChunk = 16;   // k per shared-memory stage
constexpr int kLd = 88;      // leading dimension of a staged chunk (kTile + 8)
constexpr int kWarpTile = 40;
constexpr int kFrags = kWarpTile / 8; // 8 x 8 fragments per warp along each side
constexpr int kThreads = 128;

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

// Rows [r0, r0 + kTile) by k [k0, k0 + kChunk) of a matrix with `rows` rows and `kAll`
// columns of k, into dst[kk * kLd + r]. Element (r, kk) lies at src[r + kk * ld] where
// rowsContiguous, else at src[kk + r * ld].
__device__ __forceinline__ void stageChunk(double* dst, const double* src, long long ld, bool rowsContiguous,
                                           int rows, int r0, int kAll, int k0) {
  constexpr int kPerThread = kTile * kChunk / kThreads;
  // Not unrolled: unrolled, the compiler keeps every element's address live across the
  // k loop, beside the 100 accumulator registers, and spills.
#pragma unroll 1
  for (int it = 0; it < kPerThread; ++it) {
    const int e = threadIdx.x + kThreads * it;
    int r, kk;
    if (rowsContiguous) {
      r = e % kTile;
      kk = e / kTile;
    } else { // groups of 32: 4 consecutive k of 8 consecutive rows
      const int lane = e & 31, g = e >> 5;
      kk = (g & 3) * 4 + (lane & 3);
      r = (g >> 2) * 8 + (lane >> 2);
    }
    const int row = r0 + r, col = k0 + kk;
    const bool valid = row < rows && col < kAll;
    const double* p = valid ? src + (rowsContiguous ? row + (long long)col * ld : col + (long long)row * ld) : src;
    copyAsync8(dst + kk * kLd + r, p, valid);
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

// acc += a b for one m8n8k4 fragment: lane l holds a = A(l / 4, l % 4), b = B(l % 4, l / 4)
// and acc = C(l / 4, 2 (l % 4) + {0, 1}) (PTX ISA, "Matrix fragments for mma.m8n8k4 with
// .f64"). as, bs: the k-row l % 4 of the staged chunk, at the fragment's first row.
__device__ __forceinline__ void mma884(double (&acc)[2], double a, double b, const double* as, const double* bs) {
#if __CUDA_ARCH__ >= 800
  (void)as;
  (void)bs;
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+d"(acc[0]), "+d"(acc[1])
               : "d"(a), "d"(b));
#else
  // The same product on the FP64 units, from shared memory.
  (void)a;
  (void)b;
  const int lane = threadIdx.x & 31, row = lane >> 2, col = (lane & 3) * 2;
  for (int q = 0; q < 4; ++q) {
    const double x = as[(q - (lane & 3)) * kLd + row];
    acc[0] += x * bs[(q - (lane & 3)) * kLd + col];
    acc[1] += x * bs[(q - (lane & 3)) * kLd + col + 1];
  }
#endif
}

__global__ void __launch_bounds__(kThreads, 3)
    gemmTileKernel(bool transA, bool transB, int m, int n, int k, double alpha, const double* __restrict__ A,
                   long long lda, long long strideA, const double* __restrict__ B, long long ldb,
                   long long strideB, double beta, double* __restrict__ C, long long ldc, long long strideC,
                   int batch) {
  __shared__ __align__(16) double As[2][kChunk * kLd];
  __shared__ __align__(16) double Bs[2][kChunk * kLd];
  const int tilesM = (m + kTile - 1) / kTile;
  const int m0 = (blockIdx.x % tilesM) * kTile, n0 = (blockIdx.x / tilesM) * kTile;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = (warp & 1) * kWarpTile, wn = (warp >> 1) * kWarpTile;
  const int chunks = alpha == 0.0 ? 0 : (k + kChunk - 1) / kChunk;
  for (int b = blockIdx.y; b < batch; b += gridDim.y) {
    const double* Ab = A + b * strideA;
    const double* Bb = B + b * strideB;
    double* Cb = C + b * strideC;
    double acc[kFrags][kFrags][2];
#pragma unroll
    for (int i = 0; i < kFrags; ++i)
#pragma unroll
      for (int j = 0; j < kFrags; ++j) acc[i][j][0] = acc[i][j][1] = 0.0;
    // op(A) is m x k: rows contiguous unless transposed; op(B) is k x n, its columns
    // are the staged "rows": contiguous only when transposed.
    auto stage = [&](int s, int k0) {
      stageChunk(As[s], Ab, lda, !transA, m, m0, k, k0);
      stageChunk(Bs[s], Bb, ldb, transB, n, n0, k, k0);
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
      const double* as = As[c & 1] + (lane & 3) * kLd + wm + (lane >> 2);
      const double* bs = Bs[c & 1] + (lane & 3) * kLd + wn + (lane >> 2);
#pragma unroll
      for (int q = 0; q < kChunk; q += 4) {
        double a[kFrags], bf[kFrags];
#pragma unroll
        for (int i = 0; i < kFrags; ++i) a[i] = as[q * kLd + i * 8];
#pragma unroll
        for (int j = 0; j < kFrags; ++j) bf[j] = bs[q * kLd + j * 8];
#pragma unroll
        for (int i = 0; i < kFrags; ++i)
#pragma unroll
          for (int j = 0; j < kFrags; ++j)
            mma884(acc[i][j], a[i], bf[j], as + q * kLd + i * 8 - (lane >> 2),
                   bs + q * kLd + j * 8 - (lane >> 2));
      }
      __syncthreads();
    }
    // C by fragment rows: where beta is not 0, the row's 10 entries of C are read (all
    // in flight at once), then written. The ordered loads and stores keep the compiler
    // from reading all 50 entries ahead beside the accumulators (it spills then).
#pragma unroll
    for (int i = 0; i < kFrags; ++i) {
      const int row = m0 + wm + i * 8 + (lane >> 2);
      double old[kFrags][2];
      if (beta != 0.0) {
#pragma unroll
        for (int j = 0; j < kFrags; ++j)
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            const int col = n0 + wn + j * 8 + (lane & 3) * 2 + t;
            old[j][t] = row < m && col < n ? loadOrdered(Cb + row + col * ldc) : 0.0;
          }
      }
#pragma unroll
      for (int j = 0; j < kFrags; ++j)
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const int col = n0 + wn + j * 8 + (lane & 3) * 2 + t;
          if (row < m && col < n)
            storeOrdered(Cb + row + col * ldc,
                         beta == 0.0 ? alpha * acc[i][j][t] : alpha * acc[i][j][t] + beta * old[j][t]);
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
  gemmTileKernel<<<grid, kThreads, 0, stream>>>(ta == Trans::T, tb == Trans::T, m, n, readsAB ? k : 0, alpha, A,
                                                lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch);
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
