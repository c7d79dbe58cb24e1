// SPEX_CLONES: compile a hot loop function twice, for plain x86-64 (SSE2) and for
// x86-64-v3 (AVX2 and FMA: Haswell, Zen and later, every DESI node), and pick at load
// time by the CPU (GCC/Clang target_clones, an ifunc). GCC contracts a * b + c into one
// fused multiply-add in the v3 clone (C++ defaults to -ffp-contract=fast), so the two
// clones agree to rounding, not bit for bit: each fused multiply-add rounds once where
// the default clone rounds twice (docs/design.md, step 2). One process always runs
// one clone, so results are reproducible on a given machine. Empty where the compiler or
// target lacks it.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__) && !defined(__SANITIZE_ADDRESS__)
#define SPEX_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SPEX_CLONES
#endif
