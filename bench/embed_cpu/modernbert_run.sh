#!/usr/bin/env bash
# ModernBERT on the CPU: a random model of ModernBERT-base's
# size (make_modernbert_model.py), stoke embed next to SentenceTransformer (PyPI
# torch) on the same texts, f32 and bf16, 2 threads, in one run; and the
# peak resident memory of each stoke process.
#   bench/embed_cpu/modernbert_run.sh
# Knobs: BENCH_TEXTS_MODERNBERT [600] texts (evenly spread over the corpus sample),
# BENCH_PY [.venv-bench-st/bin/python] a Python with PyPI torch,
# transformers and sentence-transformers (it also makes the model).
# Prints one JSON line per run and the table; everything generated goes to
# build/bench-models/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
work=build/bench-models
res="$work/results-modernbert"
bin=build/release/apps/stoke/stoke
py="${BENCH_PY:-.venv-bench-st/bin/python}"
n="${BENCH_TEXTS_MODERNBERT:-600}"
threads=2
say() { echo "modernbert_run: $*" >&2; }
mkdir -p "$work" "$res"
"$py" bench/embed_cpu/make_modernbert_model.py tests/golden/models/tiny-modernbert "$work" >&2
model="$work/modernbert-base"
source bench/embed_cpu/st_compare.sh
# One long text (~8k tokens: corpus texts joined) through stoke alone, f32: the
# local layers' attention reads O(L w) keys, the global ones' O(L^2) without
# an L x L matrix (tiled); wall time and peak RSS.
"$py" - "$fixtures/corpus/fortunes-multilingual.jsonl" >"$res/long.jsonl" <<'PY'
import json, sys
texts = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
long, n = [], 0
for t in texts:
    long.append(t)
    n += len(t.split()) * 2 + 2
    if n > 7000:
        break
print(json.dumps({"text": " ".join(long)}))
PY
say "stoke embed one long text (max length 8192)"
/usr/bin/time -f '%M %e' -o "$res/time-long.txt" "$bin" embed --model "$model" --input "$res/long.jsonl" \
  --output "$res/stoke-long" --overwrite --quiet --workers $threads --precision f32 --max-length 8192
read -r rss_kb wall <"$res/time-long.txt"
echo "long text (truncated to 8192 tokens): ${wall} s, peak RSS $((rss_kb / 1024)) MiB"
