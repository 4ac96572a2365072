#!/usr/bin/env bash
# The longer checks, run before an issue is resolved (not in CI): TSan build of
# the unit and pipeline tests, 50 random kill -9s of an embed job, every corpus
# text against the reference tokenizers, each fuzz target for a minute, and the
# tokenizer and pipeline benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export STOKE_FIXTURES="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"

echo "== TSan build and unit + pipeline tests"
scripts/build.sh tsan
# One OpenMP thread: libgomp is not instrumented, so its fork/join looks like
# races to TSan; what is checked here is stoke's own threads (pipeline stages,
# backend executor, queues). CLI tests run the TSan build of stoke too.
OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1 STOKE_BIN="$PWD/build/tsan/apps/stoke/stoke" \
  ctest --test-dir build/tsan --output-on-failure -j "$(nproc)"

echo "== embed killed at 50 random moments, resumed each time"
scripts/build.sh release
STOKE_KILL_TEST_KILLS="${STOKE_KILL_TEST_KILLS:-50}" build/release/tests/test_cli_embed_resume \
  --gtest_filter='EmbedKills.*:EmbedResume.CrashAtEveryCommitStep*'

echo "== corpus against the reference tokenizers"
if [ ! -x .venv-bench/bin/python ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv-bench
  .venv-bench/bin/pip install -q tokenizers
fi
.venv-bench/bin/python tests/peer/compare_corpus.py build/release/apps/stoke/stoke "$STOKE_FIXTURES"

echo "== fuzz targets, ${STOKE_LONG_FUZZ_SECONDS:-60}s each"
scripts/build.sh fuzz
scripts/fuzz.sh build/fuzz "${STOKE_LONG_FUZZ_SECONDS:-60}"

echo "== tokenizer benchmark"
bench/tokenize/run.sh 5

echo "== pipeline benchmark"
bench/pipeline/run.sh
