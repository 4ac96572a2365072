#!/usr/bin/env bash
# Sets up, builds, and runs the main job on a bundled default: for now,
# tokenize the example texts with the tiny BERT model and inspect it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
model="${1:-$fixtures/models/tiny-bert}"
mkdir -p out
echo "== stoke inspect $model"
build/release/apps/stoke/stoke inspect "$model" | head -12
echo "== stoke tokenize examples/texts.jsonl -> out/tokens.jsonl"
build/release/apps/stoke/stoke tokenize --model "$model" --input examples/texts.jsonl --output out/tokens.jsonl \
  --trace out/tokenize-trace.json
head -3 out/tokens.jsonl
