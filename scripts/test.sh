#!/usr/bin/env bash
# Configure, build and run the whole test suite (CTest). CUDA code is compiled when
# nvcc is found; tests labelled `gpu` skip with a message where no GPU exists.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j "$(nproc)"
export QT_QPA_PLATFORM=offscreen
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" "$@"
