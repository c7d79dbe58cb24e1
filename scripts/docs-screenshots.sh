#!/usr/bin/env bash
# Retakes the workbench screenshots of the user guide: runs every ```sh block of
# docs/gui.md, docs/profiling.md and docs/scale.md that writes docs/images/*.png
# (`spexlab --screenshot docs/images/...`), from the repository root, with the build's
# spexlab and spexlab-cli, offscreen, and fresh settings (nothing saved by an earlier
# session changes a picture). Blocks whose picture needs a GPU or files made elsewhere
# (a trace brought back from the GPU machine) are skipped unless their inputs exist.
# Usage: scripts/docs-screenshots.sh [BUILD_DIR] [NAME_FILTER]
#   e.g. scripts/docs-screenshots.sh build timeline   (only pictures whose name has "timeline")
# Look at every picture it writes before committing it.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=$(realpath "${1:-build}")
FILTER=${2:-}
export QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen}
export XDG_CONFIG_HOME=$(mktemp -d) XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/spexlab-cache}
trap 'rm -rf "$XDG_CONFIG_HOME"' EXIT
spexlab() { "$BUILD/app/gui/spexlab" "$@"; }
spexlab-cli() { "$BUILD/app/spexlab-cli" "$@"; }
export -f spexlab spexlab-cli
export BUILD
failed=0
# The real-inputs block writes frame.fits and trace.json here; keep any that were here.
keep=(); for f in frame.fits trace.json; do [ -e "$f" ] && keep+=("$f"); done
blocks=$(mktemp -d)
awk -v dir="$blocks" '
  /^```sh/ { inb = 1; buf = ""; next }
  /^```/ { if (inb && buf ~ /--screenshot docs\/images\//) { n++; f = sprintf("%s/%03d.sh", dir, n); printf "%s", buf > f; close(f) } inb = 0; next }
  inb { buf = buf $0 "\n" }' docs/gui.md docs/profiling.md docs/scale.md
for b in "$blocks"/*.sh; do
  out=$(grep -o 'docs/images/[A-Za-z0-9_.-]*\.png' "$b" | head -1)
  [ -n "$FILTER" ] && [[ "$out" != *"$FILTER"* ]] && continue
  # Inputs the block names that are not here (a GPU machine's trace): skip it.
  missing=$(grep -o -- '--open-trace [^ ]*' "$b" | awk '{print $2}' | while read -r f; do
    [ -e "$f" ] || grep -q "profile $f" "$b" || echo "$f"; done)
  if [ -n "$missing" ]; then echo "skip $out: missing $missing"; continue; fi
  echo "=== $out"
  s=$(date +%s)
  if bash -e "$b"; then echo "    $(( $(date +%s) - s )) s"; else echo "FAILED: $out"; failed=1; fi
done
rm -rf "$blocks"
for f in frame.fits trace.json; do [[ " ${keep[*]:-} " == *" $f "* ]] || rm -f "$f"; done
exit $failed
