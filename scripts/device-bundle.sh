#!/usr/bin/env bash
# Gather what a run on the GPU machine needs (docs/benchmarks.md, "How the GPU runs
# were made") into .device/ (git-ignored): the CLI and the GPU test binaries of a
# build, the shared libraries they load that are not glibc or CUDA (CFITSIO pulls in
# libcurl and friends; OpenBLAS and Qt come along too), and the real DESI PSF for the
# benchmark. Usage: scripts/device-bundle.sh [BUILD_DIR] [extra binaries...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
DATA=${SPEXLAB_TEST_DATA:-../shared/data}
STAGE=$(mktemp -d)
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/data" .device
bins=("$BUILD/app/spexlab-cli" "$BUILD"/tests/gpu/test_cuda_engine "$BUILD"/tests/gpu/test_device_psf "$BUILD"/tests/gpu/test_batched_eigh "$BUILD"/tests/gpu/test_batched_cholesky "$BUILD"/tests/gpu/test_batched_selected_inverse "$BUILD"/tests/gpu/test_batched_fiber_blocks "$BUILD"/tests/gpu/test_batched_gemm "$BUILD"/tests/gpu/test_staging "$@")
# The workbench, when the build has it, runs there offscreen (device-run.sh step gui):
# it needs Qt's offscreen platform plugin and a font (fontconfig finds it through the
# fonts.conf written here).
QTPLUG=$(dirname "$(dirname "$(find /usr/lib -path '*qt6/plugins/platforms/libqoffscreen.so' | head -1)")" 2>/dev/null || true)
if [ -x "$BUILD/app/gui/spexlab" ] && [ -n "$QTPLUG" ]; then
  bins+=("$BUILD/app/gui/spexlab")
  mkdir -p "$STAGE/plugins/platforms" "$STAGE/fonts"
  cp "$QTPLUG/platforms/libqoffscreen.so" "$STAGE/plugins/platforms/"
  cp /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf /usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf \
     /usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf "$STAGE/fonts/"
  printf '<?xml version="1.0"?>\n<fontconfig><dir prefix="relative">fonts</dir><cachedir>/tmp/fc-cache</cachedir></fontconfig>\n' \
     > "$STAGE/fonts.conf"
fi
libs_of() {
  # Everything ldd resolves outside glibc and the CUDA toolkit; and CUPTI (4 MB, the
  # kernel profile), in case the GPU machine's toolkit lacks it.
  ldd "$1" | awk '/libcupti/ && /=> \// {print $3}' | while read -r lib; do cp -nL "$lib" "$STAGE/lib/"; done
  ldd "$1" | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' \
    | grep -v -E '/usr/local/cuda|libcuda\.so|libcu(blas|solver|sparse|blasLt|dart)|libnvJitLink' \
    | while read -r lib; do cp -nL "$lib" "$STAGE/lib/"; done
}
[ -f "$STAGE/plugins/platforms/libqoffscreen.so" ] && libs_of "$STAGE/plugins/platforms/libqoffscreen.so"
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "device-bundle: missing $b (build first)" >&2; exit 1; }
  cp "$b" "$STAGE/bin/"
  libs_of "$b"
done
cp "$DATA/psf-r0-00067784.fits" "$STAGE/data/"
tar -C "$STAGE" -cJf .device/stage.tar.xz $(cd "$STAGE" && ls)
cp scripts/device-run.sh .device/run.sh
cp scripts/bench-batch.sh .device/bench-batch.sh
cp scripts/trace-summary.py .device/trace-summary.py
rm -rf "$STAGE"
ls -la .device
