// One FP64 tensor-core product fragment, shared by the batched GEMM (batched_gemm.cu)
// and the fused selected inversion (batched_selected_inverse.cu).
#pragma once

namespace spex::gpu {

// acc += A B for one m16n8k8 fragment, lane l = 4 g + t (PTX ISA, "Matrix fragments for
// mma.m16n8k8 with .f64"): a = A(g, t), A(g + 8, t), A(g, t + 4), A(g + 8, t + 4);
// b = B(t, g), B(t + 4, g); acc = C(g, 2t), C(g, 2t + 1), C(g + 8, 2t), C(g + 8, 2t + 1).
// sm_90: one m16n8k8 DMMA; sm_80: the same product as four m8n8k4 (their A(g, t) B(t, g)
// layouts are those of the halves: rows 0-7 and 8-15, k 0-3 and 4-7). Below sm_80 it
// traps: callers keep their own path there.
__device__ __forceinline__ void dmma1688(double (&acc)[4], const double (&a)[4], const double (&b)[2]) {
#if __CUDA_ARCH__ >= 900
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+d"(acc[0]), "+d"(acc[1]), "+d"(acc[2]), "+d"(acc[3])
               : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
#elif __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+d"(acc[0]), "+d"(acc[1]) : "d"(a[0]), "d"(b[0]));
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+d"(acc[2]), "+d"(acc[3]) : "d"(a[1]), "d"(b[0]));
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+d"(acc[0]), "+d"(acc[1]) : "d"(a[2]), "d"(b[1]));
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+d"(acc[2]), "+d"(acc[3]) : "d"(a[3]), "d"(b[1]));
#else
  (void)acc;
  (void)a;
  (void)b;
  __trap();
#endif
}

} // namespace spex::gpu
