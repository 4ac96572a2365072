#!/usr/bin/env bash
# Runs tests/serve/test_real_clients.py (the openai and huggingface_hub
# clients, unchanged, against `stoke serve`) with the stoke of a build folder.
# Python: $STOKE_CLIENTS_PYTHON when set (one with openai, huggingface_hub,
# numpy and pytest), else a venv made once in the build folder from pinned
# PyPI versions. Exit status 77 (ctest: skipped) with the reason when there is
# neither (no PyPI here).
#   tests/serve/real_clients.sh BUILD_DIR [FIXTURES_DIR]   ($STOKE_FIXTURES wins)
set -euo pipefail
build="$(cd "$1" && pwd)"
here="$(cd "$(dirname "$0")" && pwd)"
py="${STOKE_CLIENTS_PYTHON:-}"
if [ -z "$py" ]; then
  venv="$build/serve-clients-venv"
  if [ ! -x "$venv/bin/pytest" ]; then
    rm -rf "$venv"
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
      echo "SKIP: python3 -m venv failed (install python3-venv)"
      exit 77
    fi
    if ! timeout 300 "$venv/bin/pip" install -q --disable-pip-version-check \
        openai==3.57.0 huggingface_hub==2.4.0 numpy==2.4.6 pytest==9.2.0 >"$build/serve-clients-venv.log" 2>&1; then
      echo "SKIP: could not install the pinned clients from PyPI (unreachable?): see $build/serve-clients-venv.log"
      rm -rf "$venv"
      exit 77
    fi
  fi
  py="$venv/bin/python"
fi
export STOKE_BINARY="$build/apps/stoke/stoke"
export STOKE_FIXTURES="${STOKE_FIXTURES:-${2:-$(cd "$here/../../.." && pwd)/shared/fixtures}}"
exec "$py" -m pytest -q -p no:cacheprovider "$here/test_real_clients.py"
