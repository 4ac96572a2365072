# Sourced by the bench/embed_cpu model runs (decoder_run.sh,
# modernbert_run.sh): stoke embed next to SentenceTransformer on n texts of
# the corpus, f32 and bf16, with stoke's peak RSS, and the table. Expects
# model, res, n, py, bin, fixtures, threads and say() from the caller.
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
