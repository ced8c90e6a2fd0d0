#!/usr/bin/env bash
# Sets up everything the tests need on a fresh machine, then runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e '.[test]' 2>&1 | grep -v -e '^WARNING: Running pip as' -e 'is ignored: it is neither' >&2 || true
python3 -m pytest "$@"
