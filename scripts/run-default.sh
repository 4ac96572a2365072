#!/usr/bin/env bash
# Sets up, builds, and runs the main job on a bundled default: `stoke embed`
# of the multilingual fortunes corpus (24,400 texts) with the tiny BERT model
# from ../shared/fixtures, into out/embeddings/ (shards + manifest), then
# `stoke verify` of the result. Pass another model folder as the first argument.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Only the CLI (with the CUDA backend when nvcc is found): the tests, fuzzers
# and benchmarks are scripts/test.sh's to build, so the first embedding comes
# in minutes.
scripts/build.sh release stoke
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
model="${1:-$fixtures/models/tiny-bert}"
input="${2:-$fixtures/corpus/fortunes-multilingual.jsonl}"
stoke=build/release/apps/stoke/stoke
mkdir -p out
echo "== stoke embed --model $model --input $input --output out/embeddings"
# --resume: a second run (or a run after a kill) continues where this one stopped.
"$stoke" embed --model "$model" --input "$input" --output out/embeddings --resume --shard-size 10000 \
  --trace out/embed-trace.json
echo "== stoke verify out/embeddings"
"$stoke" verify out/embeddings
ls -l out/embeddings
