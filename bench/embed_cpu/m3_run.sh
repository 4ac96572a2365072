#!/usr/bin/env bash
# bge-m3's three outputs on the CPU: a random model of bge-m3's shape (make_m3_model.py), stoke embed
# dense-only and dense+sparse+colbert next to FlagEmbedding's BGEM3FlagModel.encode with all three, on
# the same texts, same max length, 2 threads each, in interleaved rounds; whole processes timed as the
# user waits (wall clock, model load included) and each one's peak RSS.
#   bench/embed_cpu/m3_run.sh
# Knobs: BENCH_M3_TEXTS [256] texts (evenly spread over the corpus: all languages and lengths),
# BENCH_M3_MAX_LENGTH [256] for both sides, BENCH_M3_BATCH [16] FlagEmbedding's batch_size (its default
# 256 pads every text of a batch to the longest; 16 is its fastest here, so the comparison is with the
# peer at its best), BENCH_M3_ROUNDS [2] rounds of (stoke dense, stoke 3-out, FlagEmbedding), medians
# reported. Makes .venv-flagemb (tests/golden/requirements-bge-m3.txt) when missing. Everything generated
# goes to build/bench-models/ (git-ignored). About 14 minutes at the defaults on 2 busy cores (2026-12-07).
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
work=build/bench-models
res="$work/results-m3"
bin=build/release/apps/stoke/stoke
py=.venv-flagemb/bin/python
n="${BENCH_M3_TEXTS:-256}"
max_length="${BENCH_M3_MAX_LENGTH:-256}"
batch="${BENCH_M3_BATCH:-16}"
rounds="${BENCH_M3_ROUNDS:-2}"
threads=2
say() { echo "m3_run: $*" >&2; }
# cpu_load_start / cpu_load_others: CPU seconds other processes used during the run
source bench/common/cpu_peer.sh
cpu_load_start
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

if ! "$bin" embed --help >/dev/null 2>&1; then
  say "building stoke (scripts/setup.sh, scripts/build.sh release)"
  scripts/setup.sh
  scripts/build.sh release
fi
if [ ! -x "$py" ] || ! "$py" -c 'import FlagEmbedding' 2>/dev/null; then
  say "making .venv-flagemb (tests/golden/requirements-bge-m3.txt, then FlagEmbedding 1.3.5 --no-deps)"
  python3 -m venv .venv-flagemb
  "$py" -m pip install -q -r tests/golden/requirements-bge-m3.txt >&2
  "$py" -m pip install -q --no-deps FlagEmbedding==1.3.5 >&2
fi

mkdir -p "$work"
rm -rf "$res"
mkdir -p "$res"
"$py" bench/embed_cpu/make_m3_model.py "$fixtures/models/tiny-xlmr" "$work" >&2
model="$work/bge-m3-size"
total=$(wc -l <"$fixtures/corpus/fortunes-multilingual.jsonl")
awk -v n="$n" -v t="$total" 'c < n && NR - 1 == int(c * t / n) { print; c++ }' \
  "$fixtures/corpus/fortunes-multilingual.jsonl" >"$res/texts.jsonl"

# stoke's token ids for the same texts (the report compares them with FlagEmbedding's tokenizer's).
"$bin" tokenize --model "$model" --input "$res/texts.jsonl" --max-length "$max_length" 2>/dev/null >"$res/stoke-ids.jsonl"

# One JSON line per process into runs.jsonl: kind, round, wall (whole process), peak RSS.
record() {  # kind round time-file [extra JSON fields]
  local rss_kb wall
  read -r rss_kb wall <"$3"
  echo "{\"kind\": \"$1\", \"round\": $2, \"wall\": $wall, \"peak_rss_mib\": $((rss_kb / 1024))${4:+, $4}}" >>"$res/runs.jsonl"
}
stoke_run() {  # kind round outputs
  local out="$res/$1-$2"
  say "round $2: stoke embed --outputs $3"
  /usr/bin/time -f '%M %e' -o "$res/time.txt" "$bin" embed --model "$model" --input "$res/texts.jsonl" \
    --output "$out" --overwrite --quiet --workers $threads --max-length "$max_length" --outputs "$3"
  record "$1" "$2" "$res/time.txt" "\"manifest\": \"$out/manifest.json\""
}
: >"$res/runs.jsonl"
for r in $(seq 1 "$rounds"); do
  stoke_run stoke-dense "$r" dense
  stoke_run stoke-3out "$r" dense,sparse,colbert
  say "round $r: FlagEmbedding BGEM3FlagModel.encode (dense, sparse, colbert), batch_size $batch"
  /usr/bin/time -f '%M %e' -o "$res/time.txt" env OMP_NUM_THREADS=$threads "$py" bench/embed_cpu/m3_flagemb.py \
    "$model" "$res/texts.jsonl" "$max_length" "$batch" $threads "$res/flagemb-$r" >"$res/flagemb-$r.json"
  record flagemb "$r" "$res/time.txt" "\"detail\": $(cat "$res/flagemb-$r.json")"
done

cpu_load_others
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
"$py" bench/embed_cpu/m3_report.py "$res" "$n" "$max_length" "$batch" "$load_start" "$load_end" "$others" |
  tee "$res/report.md"
