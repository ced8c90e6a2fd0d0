#!/usr/bin/env bash
# The main job on the built-in default: build the quickstart trainer with BuildKit, push it to
# the registry on loopback, and run it from its pushed digest. No cloud account needed.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e . 2>&1 | grep -v -e '^WARNING: Running pip as' -e 'is ignored: it is neither' >&2 || true
eval "$(scripts/testenv.sh up)"
export BUILDKIT_PY_DOCKER="$BUILDKIT_DOCKER"
result=$(buildkit-py build --config examples/quickstart/buildkit.yaml --network host \
    --tag "$BUILDKIT_TEST_REGISTRY/quickstart:latest" --push --json)
image=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["pushed"][-1]["image"])' <<<"$result")
echo "pushed $image" >&2
"$BUILDKIT_DOCKER" run --rm --network host "$image"
