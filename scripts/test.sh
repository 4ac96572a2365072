#!/usr/bin/env bash
# Sets up, builds and runs every test: the README's test command and what CI runs.
#   scripts/test.sh           release build (CUDA backend compiled when nvcc is found)
#                             + all tests, ASan+UBSan build + unit tests, fuzz targets
#   scripts/test.sh --quick   release build + all tests only
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1

scripts/setup.sh
export STOKE_FIXTURES="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
if [ ! -d "$STOKE_FIXTURES/models/tiny-bert" ]; then
  echo "test: fixtures not found at $STOKE_FIXTURES (set STOKE_FIXTURES)" >&2
  exit 1
fi

echo "== release build"
scripts/build.sh release
echo "== release tests"
ctest --test-dir build/release --output-on-failure -j "$(nproc)"
echo "== Python package tests (the extension built in build/release)"
scripts/python-tests.sh build/release
[ $quick -eq 1 ] && exit 0

echo "== ASan+UBSan build"
scripts/build.sh asan
echo "== ASan+UBSan tests"
# The doctor/tune profiles and the learning test are throughput runs (a
# bert-base-size forward, timed trials, 600 training steps) over code the
# other tests cover; instrumented they take minutes and check nothing more.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/asan --output-on-failure -j "$(nproc)" -E '^(Doctor|Tune|TrainLearning)\.'

echo "== fuzz targets"
scripts/build.sh fuzz fuzz_targets
scripts/fuzz.sh build/fuzz "${STOKE_FUZZ_SECONDS:-10}"
echo "all tests passed"
