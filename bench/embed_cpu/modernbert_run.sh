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
# n texts spread evenly over the corpus (all languages, all lengths).
total=$(wc -l <"$fixtures/corpus/fortunes-multilingual.jsonl")
awk -v n="$n" -v t="$total" 'c < n && NR - 1 == int(c * t / n) { print; c++ }' \
  "$fixtures/corpus/fortunes-multilingual.jsonl" >"$res/texts.jsonl"
: >"$res/runs.jsonl"
for prec in f32 bf16; do
  say "stoke embed $prec"
  /usr/bin/time -f '%M %e' -o "$res/time-$prec.txt" "$bin" embed --model "$model" --input "$res/texts.jsonl" \
    --output "$res/stoke-$prec" --overwrite --quiet --workers $threads --precision "$prec" --max-length 512
  read -r rss_kb wall <"$res/time-$prec.txt"
  "$py" - "$res/stoke-$prec/manifest.json" "$prec" "$rss_kb" "$wall" >>"$res/runs.jsonl" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
run = m.get("run", {})
print(json.dumps({"kind": "stoke", "precision": sys.argv[2], "peak_rss_mib": int(sys.argv[3]) / 1024,
                  "wall": float(sys.argv[4]), "tokens": m.get("tokens", run.get("tokens")),
                  "compute_wait_seconds": run.get("compute_wait_seconds")}))
PY
  say "SentenceTransformer $prec"
  "$py" bench/embed_cpu/st_baseline.py "$model" "$res/texts.jsonl" "$prec" $threads 1 0 "$res/st-$prec.npy" |
    sed 's/^{/{"kind": "st", /' >>"$res/runs.jsonl"
done
cat "$res/runs.jsonl"
"$py" - "$res" <<'PY'
import json, sys
import numpy as np
res = sys.argv[1]
runs = [json.loads(l) for l in open(f"{res}/runs.jsonl")]
print("| precision | stoke tokens/s (end to end) | stoke peak RSS | ST tokens/s (encode only) | stoke / ST | cosine(stoke, ST) |")
print("|---|---|---|---|---|---|")
for prec in ("f32", "bf16"):
    s = next(r for r in runs if r["kind"] == "stoke" and r["precision"] == prec)
    t = next(r for r in runs if r["kind"] == "st" and r["precision"] == prec)
    mine = np.load(f"{res}/stoke-{prec}/embeddings-00000.npy").astype(np.float64)
    theirs = np.load(f"{res}/st-{prec}.npy").astype(np.float64)
    cos = float(np.min(np.sum(mine * theirs, 1) / np.linalg.norm(mine, axis=1) / np.linalg.norm(theirs, axis=1)))
    tps = t["tokens"] / s["wall"]
    print(f"| {prec} | {tps:.0f} | {s['peak_rss_mib']:.0f} MiB | {t['tokens_per_s']:.0f} | "
          f"{tps / t['tokens_per_s']:.2f}x | min {cos:.6f} |")
PY
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
