#!/usr/bin/env bash
# The Python package's tests (tests/python) against the extension built inside
# an existing build tree, reusing its objects (STOKE_PYTHON=ON adds only the
# module): what scripts/test.sh runs after the C++ tests.
#   scripts/python-tests.sh [build/release] [pytest args...]
# The venv (build/python-venv) holds the pinned nanobind, numpy and pytest of
# python/requirements-test.txt from PyPI; without PyPI the tests are skipped,
# saying why. STOKE_ORACLE_PYTHON names a Python with sentence-transformers for
# the oracle comparisons (skipped without it).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/release}"
shift || true
venv=build/python-venv
pins=python/requirements-test.txt
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$pins" "$venv/pins.txt"; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install -q --disable-pip-version-check --timeout 20 --retries 1 -r "$pins"; then
    rm -rf "$venv"
    echo "python tests: skipped: could not install $pins from PyPI (no network?)"
    exit 0
  fi
  cp "$pins" "$venv/pins.txt"
fi
cmake -S . -B "$build" -DSTOKE_PYTHON=ON -DPython_EXECUTABLE="$PWD/$venv/bin/python" \
  -Dnanobind_DIR="$("$venv/bin/python" -m nanobind --cmake_dir)" >/dev/null
ninja -C "$build" -j "${STOKE_JOBS:-$(nproc)}" stoke_python stoke
export STOKE_FIXTURES="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
STOKE_CLI="$PWD/$build/apps/stoke/stoke" PYTHONPATH="$PWD/$build/python" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python "$@"
