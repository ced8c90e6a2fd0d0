#!/usr/bin/env bash
# The main job on the built-in default: `autopackage` the quickstart trainer: infer what it
# needs, build it with BuildKit, push it to the registry on loopback, and run it locally with the
# environment Vertex AI sets (CLUSTER_SPEC, AIP_* dirs, the hypertune metric file). No cloud account.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e . 2>&1 | grep -v -e '^WARNING: Running pip as' -e 'is ignored: it is neither' >&2 || true
eval "$(scripts/testenv.sh up)"
export BUILDKIT_PY_DOCKER="$BUILDKIT_DOCKER"
python3 -m buildkit_py autopackage examples/quickstart --target local --image "$BUILDKIT_TEST_REGISTRY/quickstart" \
    --network host --progress plain
