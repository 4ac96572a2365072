#!/usr/bin/env bash
# The longer checks, run before an issue is resolved (not in CI): TSan build of
# the unit and pipeline tests, 50 random kill -9s of an embed job, 40 of a
# training run, training checkpoints loaded by transformers, every corpus text
# against the reference tokenizers, each fuzz target for a minute, and the
# tokenizer, pipeline, training and contention benchmarks; last, both README commands on a
# fresh Debian 12 root (scripts/check-fresh-machine.sh: needs root and Debian's
# mirrors; STOKE_SKIP_FRESH_ROOT=1 leaves it out).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export STOKE_FIXTURES="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"

echo "== TSan build and unit + pipeline tests"
scripts/build.sh tsan
# One OpenMP thread: libgomp is not instrumented, so its fork/join looks like
# races to TSan; what is checked here is stoke's own threads (pipeline stages,
# backend executor, queues). CLI tests run the TSan build of stoke too.
# Left out as in the ASan run: Determinism runs kernels at several OpenMP team
# sizes on purpose (libgomp's fork/join then reads as races), and the doctor,
# tune and learning runs are throughput runs whose verdicts TSan's slowdown
# changes, over code the other tests cover.
OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1 STOKE_BIN="$PWD/build/tsan/apps/stoke/stoke" \
  ctest --test-dir build/tsan --output-on-failure -j "$(nproc)" -E '^(Doctor|Tune|TrainLearning|Determinism)\.'


echo "== embed killed at 50 random moments, resumed each time"
scripts/build.sh release
STOKE_KILL_TEST_KILLS="${STOKE_KILL_TEST_KILLS:-50}" build/release/tests/test_cli_embed_resume \
  --gtest_filter='EmbedKills.*:EmbedResume.CrashAtEveryCommitStep*'

echo "== training killed at 40 random moments, resumed each time (bitwise)"
STOKE_TRAIN_KILL_TEST_KILLS="${STOKE_TRAIN_KILL_TEST_KILLS:-40}" build/release/tests/test_cli_train \
  --gtest_filter='TrainCli.RandomKills*:TrainCli.ResumeAfterKill*'

echo "== training checkpoints load in transformers (PyPI) with stoke's logits"
scripts/check-hf-checkpoint.sh

echo "== corpus against the reference tokenizers"
if [ ! -x .venv-bench/bin/python ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv-bench
  .venv-bench/bin/pip install -q tokenizers
fi
.venv-bench/bin/python tests/peer/compare_corpus.py build/release/apps/stoke/stoke "$STOKE_FIXTURES"

echo "== Python package: pip install ./python into a fresh venv, its tests against the installed package"
# STOKE_ORACLE_PYTHON (a Python with sentence-transformers) adds the oracle comparisons.
rm -rf build/python-pip-venv
python3 -m venv build/python-pip-venv
build/python-pip-venv/bin/pip install -q -r python/requirements-test.txt ./python
STOKE_CLI="$PWD/build/release/apps/stoke/stoke" build/python-pip-venv/bin/python -m pytest -q -p no:cacheprovider tests/python

echo "== fuzz targets, ${STOKE_LONG_FUZZ_SECONDS:-60}s each"
scripts/build.sh fuzz
scripts/fuzz.sh build/fuzz "${STOKE_LONG_FUZZ_SECONDS:-60}"

echo "== tokenizer benchmark"
bench/tokenize/run.sh 5

echo "== pipeline benchmark"
bench/pipeline/run.sh

echo "== a kill -9 at half of one 65,536-text window: what the resume takes and computes"
bench/pipeline/stop_resume.sh

echo "== training benchmark"
bench/train_cpu/run.sh

echo "== contention benchmark (OpenMP wait policies, idle and with 2 busy processes)"
bench/contention/run.sh

if [ "${STOKE_SKIP_FRESH_ROOT:-0}" != 1 ]; then
  echo "== both README commands on a fresh Debian 12 root"
  scripts/check-fresh-machine.sh
fi
