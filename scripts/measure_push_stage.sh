#!/usr/bin/env bash
# The quickstart's autopackage push stage (`push N.NNs`), N times, each against a fresh loopback registry with
# empty storage (so every layer is uploaded), with the engine's requests counted in the registry's access log.
# Usage: scripts/measure_push_stage.sh [N] [PORT]   (needs the test env: BUILDKIT_TESTENV=... scripts/testenv.sh up)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}; port=${2:-5077}
eval "$(scripts/testenv.sh env)"
export BUILDKIT_PY_DOCKER="$BUILDKIT_DOCKER"
for _ in $(seq "$n"); do
  dir=$(mktemp -d)
  printf 'version: 0.1\nstorage: {filesystem: {rootdirectory: %s/storage}}\nhttp: {addr: 127.0.0.1:%s, secret: x}\n' \
      "$dir" "$port" > "$dir/config.yml"
  docker-registry serve "$dir/config.yml" > "$dir/registry.log" 2>&1 & pid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/v2/" > /dev/null && break; sleep 0.1; done
  PYTHONPATH=. python3 -m buildkit_py autopackage examples/quickstart --target local --image "127.0.0.1:$port/quickstart" \
      --network host --progress plain 2> "$dir/err" | grep -E '^push ' | cut -c1-18 || cat "$dir/err" >&2
  echo "  engine manifest PUTs: $(grep -c '"PUT /v2/quickstart/manifests/.*"docker/' "$dir/registry.log" || true)"
  kill "$pid"; wait "$pid" 2> /dev/null || true
  rm -rf "$dir"
done
