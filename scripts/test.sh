#!/usr/bin/env bash
# Configure, build and run the whole test suite (CTest). CUDA code is compiled when
# nvcc is found; tests labelled `gpu` skip with a message where no GPU exists.
# Then, where clang 14 and libFuzzer are installed, the fuzz targets (docs/reliability.md)
# are built in build-fuzz and each runs for 60 s; SPEXLAB_SKIP_FUZZ=1 skips that step.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j "$(nproc)"
export QT_QPA_PLATFORM=offscreen
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" "$@"

if [[ "${SPEXLAB_SKIP_FUZZ:-0}" != 1 ]] && command -v clang++-14 >/dev/null &&
   ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$FUZZ_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSPEXLAB_FUZZ=ON -DSPEXLAB_CUDA=OFF
  cmake --build "$FUZZ_BUILD" -j "$(nproc)"
  ctest --test-dir "$FUZZ_BUILD" -L fuzz --output-on-failure -j "$(nproc)"
fi
