// SPEX_CLONES: compile a hot loop function twice, for plain x86-64 (SSE2) and for AVX2,
// and pick at load time by the CPU (GCC/Clang target_clones, an ifunc). AVX2 only, not
// FMA: each element is computed by the same IEEE operations in the same order, so both
// clones give the same bits; the AVX2 one does four doubles per instruction instead of
// two. Empty where the compiler or target lacks it.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__) && !defined(__SANITIZE_ADDRESS__)
#define SPEX_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SPEX_CLONES
#endif
