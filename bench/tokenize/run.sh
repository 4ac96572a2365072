#!/usr/bin/env bash
# Tokenizer benchmark: stoke next to its peers on the same texts, in one run.
#   bench/tokenize/run.sh [SECONDS]
#   BENCH_BIN=/tmp/bench_tokenize.before bench/tokenize/run.sh [SECONDS]
# Needs a release build (scripts/build.sh release). The peers run in a venv
# (.venv-bench) with `tokenizers` from PyPI and Debian's python3-sentencepiece,
# or in the Python named by PEER_PYTHON (e.g. the pinned golden venv, which
# has tokenizers 0.23.3 and sentencepiece).
# The Unigram (XLM-R as transformers 5 saves it: tokenizer.json) and byte-level
# BPE (RoBERTa) rows use the golden folders of tests/golden/tokenizers; their
# peer is HF tokenizers on the same tokenizer.json.
# Each stoke row has a "stoke (offsets)" twin: tokenize_with_offsets, the
# aligned path (HF's encode_batch computes offsets always, so the peer is the same).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-3}"
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
corpus="$fixtures/corpus/fortunes-multilingual.jsonl"
# BENCH_BIN: another bench_tokenize (e.g. a copy of the one before a change).
bin="${BENCH_BIN:-build/release/bench/tokenize/bench_tokenize}"
[ -x "$bin" ] || scripts/build.sh release
py="${PEER_PYTHON:-.venv-bench/bin/python}"
if [ -z "${PEER_PYTHON:-}" ] && [ ! -x .venv-bench/bin/python ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv-bench
  .venv-bench/bin/pip install -q tokenizers
fi
out=$(mktemp)
for t in 1 2; do
  for o in "" --offsets; do
    "$bin" "$fixtures/models/tiny-bert" "$corpus" --threads "$t" --seconds "$secs" $o | sed 's/^/bert /' >>"$out"
  done
  $py bench/tokenize/peers.py hf "$fixtures/models/tiny-bert" "$corpus" "$t" "$secs" | sed 's/^/bert /' >>"$out"
done
for t in 1 2; do
  for o in "" --offsets; do
    "$bin" "$fixtures/models/tiny-xlmr" "$corpus" --threads "$t" --seconds "$secs" $o | sed 's/^/xlmr /' >>"$out"
  done
  $py bench/tokenize/peers.py spm "$fixtures/models/tiny-xlmr" "$corpus" "$t" "$secs" | sed 's/^/xlmr /' >>"$out"
done
golden=tests/golden/tokenizers
for t in 1 2; do
  for m in xlmr-added:unigram roberta:bpe; do
    dir="$golden/${m%%:*}" name="${m##*:}"
    for o in "" --offsets; do
      "$bin" "$dir" "$corpus" --threads "$t" --seconds "$secs" $o | sed "s/^/$name /" >>"$out"
    done
    $py bench/tokenize/peers.py hf "$dir" "$corpus" "$t" "$secs" | sed "s/^/$name /" >>"$out"
  done
done
$py - "$out" <<'PY'
import json, sys
rows = [(l.split(" ", 1)[0], json.loads(l.split(" ", 1)[1])) for l in open(sys.argv[1]) if l.strip()]
print(f"{'model':<7} {'implementation':<34} {'threads':>7} {'tokens/s':>12} {'MB/s':>7} {'tok/s/core':>11} {'vs peer':>8}")
peer = {}
for model, r in rows:
    if not r["impl"].startswith("stoke"):
        peer[(model, r["threads"])] = r["tokens_per_s"]
for model, r in rows:
    ratio = ""
    if r["impl"].startswith("stoke"):
        p = peer.get((model, r["threads"])) or peer.get((model, 1))
        if p:
            ratio = f"{r['tokens_per_s'] / p:.2f}x"
    print(f"{model:<7} {r['impl'][:34]:<34} {r['threads']:>7} {r['tokens_per_s']:>12,.0f} {r['mb_per_s']:>7.1f} "
          f"{r['tokens_per_s'] / r['threads']:>11,.0f} {ratio:>8}")
print(f"corpus: {rows[0][1]['texts']} texts, {rows[0][1]['bytes'] / 1e6:.1f} MB; tokens counted with special tokens, no truncation")
PY
rm -f "$out"
