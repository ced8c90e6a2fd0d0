#!/usr/bin/env bash
# Build the documentation site and take screenshots of its main pages with headless Chromium, to look at them as a
# reader does (apt-get install chromium). Usage: scripts/docs_screenshots.sh [OUTDIR] [PAGE ...]
# PAGE is a site path such as recipes/gpus/ (default: the home page, the autopackage guide and the GPUs recipe).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$here/site-screenshots}"
shift || true
pages=("$@")
[ ${#pages[@]} -gt 0 ] || pages=("" "autopackage/" "recipes/gpus/")
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)"
[ -n "$browser" ] || { echo "docs_screenshots: no Chromium on PATH (apt-get install chromium)" >&2; exit 2; }
site="$(mktemp -d)"
trap 'rm -rf "$site"' EXIT
(cd "$here" && NO_MKDOCS_2_WARNING=1 python3 -m mkdocs build --strict --quiet --site-dir "$site")
mkdir -p "$out"
for page in "${pages[@]}"; do
  name="${page%/}"; name="${name//\//-}"; name="${name:-home}"
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1600 \
    --screenshot="$out/$name.png" "file://$site/${page}index.html" >/dev/null 2>&1
  echo "$out/$name.png"
done
