#!/usr/bin/env bash
# The serve benchmark (not CI): `stoke serve` under wrk at 1, 8, 64 and 256
# concurrent keep-alive clients x 1 and 8 texts per request (fortunes texts),
# throughput (texts/s) and p50/p99 latency; then `stoke embed` offline on the
# same texts and model for the ceiling. Prints one table (markdown).
#   bench/serve/run.sh [MODEL_DIR] [SECONDS_PER_POINT]
#   env: STOKE (the binary; default build/release/apps/stoke/stoke), TEXTS (how many fortunes, default 4000),
#        SERVE_FLAGS (extra serve flags), CLIENTS ("1 8 64 256"), PER_REQUEST ("1 8")
set -euo pipefail
cd "$(dirname "$0")/../.."
model="${1:-../shared/fixtures/models/tiny-bert}"
seconds="${2:-10}"
stoke="${STOKE:-build/release/apps/stoke/stoke}"
texts_n="${TEXTS:-4000}"
fortunes="${FORTUNES:-../shared/fixtures/corpus/fortunes-multilingual.jsonl}"
work="$(mktemp -d /tmp/stoke-bench-serve.XXXXXX)"
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT

# The texts: JSON string literals (for the Lua script) and JSONL (for embed).
python3 - "$fortunes" "$texts_n" "$work" <<'PY'
import json, sys
src, n, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
texts = []
with open(src, encoding="utf-8") as f:
    for line in f:
        t = json.loads(line)["text"]
        if t:
            texts.append(t)
        if len(texts) == n:
            break
with open(f"{work}/texts.lit", "w") as a, open(f"{work}/texts.jsonl", "w") as b:
    for t in texts:
        a.write(json.dumps(t) + "\n")
        b.write(json.dumps({"text": t}) + "\n")
PY

"$stoke" serve --model "$model" --port 0 --auto-truncate ${SERVE_FLAGS:-} 2>"$work/serve.err" &
server=$!
for _ in $(seq 600); do grep -q "ready" "$work/serve.err" 2>/dev/null && break; sleep 0.1; done
port="$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.err" | sed 's/.*://')"
url="http://127.0.0.1:$port"

echo "| clients | texts/request | texts/s | requests/s | p50 ms | p99 ms | non-200 |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for per in ${PER_REQUEST:-1 8}; do
  for c in ${CLIENTS:-1 8 64 256}; do
    threads=$(( c < 2 ? 1 : 2 ))
    out="$(wrk -t"$threads" -c"$c" -d"${seconds}s" --timeout 30s -s bench/serve/embed_requests.lua "$url" \
           -- "$work/texts.lit" "$per" 2>&1)"
    line="$(grep RESULT <<<"$out")"
    req=$(sed 's/.*requests=\([0-9]*\).*/\1/' <<<"$line")
    secs=$(sed 's/.*seconds=\([0-9.]*\).*/\1/' <<<"$line")
    p50=$(sed 's/.*p50_ms=\([0-9.]*\).*/\1/' <<<"$line")
    p99=$(sed 's/.*p99_ms=\([0-9.]*\).*/\1/' <<<"$line")
    bad=$(sed 's/.*errors_non2xx=\([0-9]*\).*/\1/' <<<"$line")
    awk -v c="$c" -v per="$per" -v r="$req" -v s="$secs" -v p50="$p50" -v p99="$p99" -v bad="$bad" \
      'BEGIN { printf "| %d | %d | %.0f | %.0f | %.2f | %.2f | %d |\n", c, per, r * per / s, r / s, p50, p99, bad }'
  done
done
kill -TERM "$server"
wait "$server" || true
tail -1 "$work/serve.err"

# The ceiling: the same texts through `stoke embed` offline (same model, defaults);
# its manifest's texts/s (the pipeline's time, model loading excluded).
"$stoke" embed --quiet --model "$model" --input "$work/texts.jsonl" --output "$work/offline" >/dev/null
python3 - "$work/offline/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
def find(d):
    if isinstance(d, dict):
        if "texts_per_second" in d:
            return d["texts_per_second"]
        for v in d.values():
            r = find(v)
            if r is not None:
                return r
    return None
print(f"offline stoke embed: {find(m):.0f} texts/s")
PY
