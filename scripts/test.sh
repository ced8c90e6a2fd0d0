#!/usr/bin/env bash
# Sets up everything the tests need on a fresh machine (Python packages; a Docker engine,
# loopback registries and the stand-in base image through scripts/testenv.sh), then runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e '.[test]' 2>&1 | grep -v -e '^WARNING: Running pip as' -e 'is ignored: it is neither' >&2 || true
export BUILDKIT_TESTENV_ARM64=1  # the multi-platform tests' arm64 stand-in (qemu), which the main job does not need
eval "$(scripts/testenv.sh up)"
python3 -m pytest "$@"
