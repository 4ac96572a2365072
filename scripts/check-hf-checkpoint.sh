#!/usr/bin/env bash
# Trains a few steps with stoke (both fixture models and every architecture
# of tests/golden/models, a new 7-way language head), then loads the checkpoint and the final model with
# Hugging Face transformers (PyPI) and checks the logits against `stoke
# classify` on the same texts. Not part of CI (it needs PyPI's torch +
# transformers: the .venv-bench-st that bench/embed_cpu/run.sh makes, ~6 GB).
#   scripts/check-hf-checkpoint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
bin=build/release/apps/stoke/stoke
py=.venv-bench-st/bin/python
work=build/hf-check
[ -x "$bin" ] || { scripts/setup.sh && scripts/build.sh release; }
if ! "$py" -c "import transformers, torch, sentencepiece, google.protobuf" 2>/dev/null; then
  echo "check-hf-checkpoint: installing torch + transformers (+ sentencepiece for XLM-R) from PyPI into .venv-bench-st" >&2
  [ -x "$py" ] || /usr/bin/python3 -m venv .venv-bench-st
  # The versions tests/golden was made with (tests/golden/README.md).
  "$py" -m pip install -q torch==2.15.0 transformers==5.24.0 tokenizers==0.23.3 sentence-transformers==6.2.0 \
    safetensors sentencepiece protobuf
fi
rm -rf "$work" && mkdir -p "$work"
head -n 40 "$fixtures/golden/texts.jsonl" > "$work/texts.jsonl"
# Language-labelled records spread over the corpus (it is grouped by language).
awk 'NR % 700 == 1' "$fixtures/corpus/fortunes-multilingual.jsonl" |
  sed -E 's/"lang": ("[a-z]+")/"label": \1/' > "$work/train.jsonl"
run_case() {  # name model extra-flags... (max_length: the caller's, else 128)
  local name=$1 model=$2 max_length=${max_length:-128}; shift 2
  echo "== $name" >&2
  "$bin" train --model "$model" --train "$work/train.jsonl" --output "$work/$name" --max-steps 4 --batch-size 8 \
    --save-every 2 --quiet "$@"
  for dir in "$work/$name/checkpoint-2" "$work/$name"; do
    "$bin" classify --model "$dir" --input "$work/texts.jsonl" --output "$work/logits.jsonl" --quiet \
      --max-length "$max_length"
    "$py" scripts/check_hf_checkpoint.py "$dir" "$work/texts.jsonl" "$work/logits.jsonl" "$max_length"
  done
}
run_case bert "$fixtures/models/tiny-bert"
run_case xlmr "$fixtures/models/tiny-xlmr"
run_case bert-bf16 "$fixtures/models/tiny-bert" --precision bf16
# Every added architecture: the checkpoint's tensor names are exactly the
# state_dict keys transformers has for it (tests/golden/check_checkpoint.py).
for model in tests/golden/models/tiny-*; do
  name=$(basename "$model")
  [ -f "tests/golden/$name.json" ] && grep -q '"state_dict_keys"' "tests/golden/$name.json" || continue
  # The golden models have fewer positions than 128 (their own max length).
  max_length=64 run_case "$name" "$model" --max-length 64
  "$py" tests/golden/check_checkpoint.py "$work/$name" "$name"
done
echo "check-hf-checkpoint: all loaded in transformers with stoke's logits"
