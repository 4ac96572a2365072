#!/usr/bin/env bash
# The peer benchmark (not CI): `stoke serve` and infinity-emb (PyPI) on the
# same model folder, the same texts and the same wrk load — OpenAI-shaped
# embedding requests ({"input": [...]}) on keep-alive connections at 1, 8, 64
# and 256 clients x 1 and 8 texts per request — one server at a time. Prints
# one markdown table: texts/s and p50/p99 of each, and stoke's throughput
# ratio.
#   INFINITY_PYTHON=VENV/bin/python bench/serve/peer.sh [MODEL_DIR] [SECONDS_PER_POINT]
#   env: INFINITY_PYTHON (required: a Python with infinity-emb[server,torch]; see docs/performance.md),
#        INFINITY_ENGINE (torch), INFINITY_BATCH (infinity's --batch-size, 32),
#        STOKE (default build/release/apps/stoke/stoke), SERVE_FLAGS, TEXTS (4000),
#        CLIENTS ("1 8 64 256"), PER_REQUEST ("1 8")
set -euo pipefail
cd "$(dirname "$0")/../.."
model="$(realpath "${1:-../shared/fixtures/models/tiny-bert}")"
seconds="${2:-10}"
stoke="${STOKE:-build/release/apps/stoke/stoke}"
python="${INFINITY_PYTHON:?set INFINITY_PYTHON to a Python that has infinity-emb installed}"
texts_n="${TEXTS:-4000}"
fortunes="${FORTUNES:-../shared/fixtures/corpus/fortunes-multilingual.jsonl}"
work="$(mktemp -d /tmp/stoke-bench-peer.XXXXXX)"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT

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
with open(f"{work}/texts.lit", "w") as a:
    for t in texts:
        a.write(json.dumps(t) + "\n")
PY

# One folder both servers load. infinity-emb reads a config whose
# architectures name a *ForSequenceClassification as a classifier and refuses
# to embed with it (stoke goes by the sentence-transformers files): such a
# config gets a copy of the folder whose config names the base model instead.
if grep -q 'ForSequenceClassification' "$model/config.json"; then
  cp -r "$model" "$work/model"
  python3 - "$work/model/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["architectures"] = [a.replace("ForSequenceClassification", "Model") for a in c["architectures"]]
json.dump(c, open(sys.argv[1], "w"), indent=2)
PY
  model="$work/model"
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# wait_ready URL: /health answers 200 (both servers have it), at most 10 minutes.
wait_ready() {
  for _ in $(seq 3000); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health" || true)" = 200 ] && return 0
    kill -0 "$server" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}

# measure NAME URL PATH: one line per point into $work/NAME.tsv (clients per texts/s p50 p99 non-200).
measure() {
  local name="$1" url="$2" path="$3"
  # One short warm-up (infinity compiles and caches on its first batches).
  wrk -t2 -c8 -d3s --timeout 30s -s bench/serve/embed_requests.lua "$url" -- "$work/texts.lit" 8 openai "$path" \
    >/dev/null 2>&1 || true
  for per in ${PER_REQUEST:-1 8}; do
    for c in ${CLIENTS:-1 8 64 256}; do
      local threads=$(( c < 2 ? 1 : 2 ))
      local line
      line="$(wrk -t"$threads" -c"$c" -d"${seconds}s" --timeout 30s -s bench/serve/embed_requests.lua "$url" \
              -- "$work/texts.lit" "$per" openai "$path" 2>&1 | grep RESULT)"
      awk -v c="$c" -v per="$per" -v line="$line" 'BEGIN {
        n = split(line, kv, /[ =]/); for (i = 2; i < n; i += 2) v[kv[i]] = kv[i + 1];
        printf "%d\t%d\t%.0f\t%.2f\t%.2f\t%d\n", c, per, v["requests"] * per / v["seconds"], v["p50_ms"], v["p99_ms"], v["errors_non2xx"] }' \
        >>"$work/$name.tsv"
    done
  done
}

# stoke serve
port="$(free_port)"
"$stoke" serve --model "$model" --port "$port" --auto-truncate ${SERVE_FLAGS:-} 2>"$work/stoke.err" &
server=$!
wait_ready "http://127.0.0.1:$port" || { cat "$work/stoke.err" >&2; exit 1; }
measure stoke "http://127.0.0.1:$port" /v1/embeddings
kill -TERM "$server"; wait "$server" || true; server=""

# infinity-emb (offline: the model is the local folder; no telemetry)
port="$(free_port)"
HF_HUB_OFFLINE=1 INFINITY_ANONYMOUS_USAGE_STATS=0 DO_NOT_TRACK=1 \
  "$python" -c 'from infinity_emb.cli import cli; cli()' v2 --model-id "$model" --port "$port" \
  --engine "${INFINITY_ENGINE:-torch}" --device cpu --batch-size "${INFINITY_BATCH:-32}" --log-level warning \
  >"$work/infinity.log" 2>&1 &
server=$!
wait_ready "http://127.0.0.1:$port" || { tail -30 "$work/infinity.log" >&2; exit 1; }
"$python" -c 'import infinity_emb, torch; print(f"infinity-emb {infinity_emb.__version__}, torch {torch.__version__}, {torch.get_num_threads()} torch threads")' 2>/dev/null || true
measure infinity "http://127.0.0.1:$port" /embeddings
kill -TERM "$server"; wait "$server" || true; server=""

echo "| clients | texts/request | stoke texts/s | p50 ms | p99 ms | infinity texts/s | p50 ms | p99 ms | stoke / infinity | non-200 (stoke, infinity) |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
paste "$work/stoke.tsv" "$work/infinity.tsv" | awk -F'\t' '{
  ratio = $9 > 0 ? $3 / $9 : 0
  printf "| %d | %d | %d | %.2f | %.2f | %d | %.2f | %.2f | %.2fx | %d, %d |\n", $1, $2, $3, $4, $5, $9, $10, $11, ratio, $6, $12 }'
