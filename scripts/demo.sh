#!/usr/bin/env bash
# Install the dependencies (Debian 12, as root or with sudo), build, and start the
# workbench on its built-in demo (a frame simulated through the project's own PSF).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $(cat .ci/packages.txt)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
if [ -x build/app/gui/spexlab ] && { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; }; then
  exec build/app/gui/spexlab "$@"
fi
# No display: run the main job on the demo from the command line instead.
mkdir -p demo
build/app/spexlab-cli simulate -o demo -n 50 -w 5760,7620,0.8
exec build/app/spexlab-cli extract -i demo/preproc.fits -p demo/psf.fits -o demo/frame.fits \
  -m demo/model.fits -n 50 -w 5760,7620,0.8 --profile demo/trace.json
