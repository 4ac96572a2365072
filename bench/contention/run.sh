#!/usr/bin/env bash
# Contention benchmark (RELIABILITY 17): a short `stoke train` (tiny-bert, 40
# steps of 32) and a short `stoke embed` (~700 tiny batches) under several OpenMP
# wait policies, on an idle machine and with 2 competing busy processes, in
# one run; prints a table and ratios. It picks nothing by itself: the default
# in apps/stoke/openmp_defaults.cc is chosen from its table (docs/performance.md).
#   flock /tmp/stoke-build.lock bench/contention/run.sh   (on a shared machine: hold the build lock, it needs quiet cores)
# Environment knobs (defaults in brackets):
#   BENCH_POLICIES  ["spin0 spin1000 spin10000 libgomp passive"]
#                   spinN: GOMP_SPINCOUNT=N; libgomp: neither OMP_WAIT_POLICY nor
#                   GOMP_SPINCOUNT set and stoke's default off (STOKE_OPENMP_DEFAULTS=off),
#                   i.e. libgomp's own throttled spin; passive: OMP_WAIT_POLICY=passive;
#                   stoke: no variable at all (what the binary picks: apps/stoke/openmp_defaults.cc)
#   BENCH_REPS      [5]   idle repetitions per cell (the median is shown); loaded cells run once
#   BENCH_HOGS      [2]   busy processes while loaded
#   BENCH_TIMEOUT   [120] seconds before a loaded run is stopped (shown as ">N")
#   STOKE_BIN       [build/release/apps/stoke/stoke]
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
bin="${STOKE_BIN:-build/release/apps/stoke/stoke}"
policies="${BENCH_POLICIES:-spin0 spin1000 spin10000 libgomp passive stoke}"
reps="${BENCH_REPS:-5}"
hogs="${BENCH_HOGS:-2}"
limit="${BENCH_TIMEOUT:-120}"
work=build/bench-models/contention
say() { echo "contention: $*" >&2; }
# cpu_load_start/cpu_load_others: what other processes used meanwhile (the report says it)
source bench/common/cpu_peer.sh
cpu_load_start
[ -x "$bin" ] || { say "error: no $bin (scripts/build.sh release)"; exit 1; }
rm -rf "$work"
mkdir -p "$work"

# ---- data: training records (label = language) and short texts to embed ------------
awk 'NR % 25 == 0' "$fixtures/corpus/fortunes-multilingual.jsonl" |
  python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l); print(json.dumps({"text": r["text"], "label": r["lang"]}))' >"$work/train.jsonl"
head -n 4000 "$fixtures/corpus/fortunes-multilingual.jsonl" >"$work/embed.jsonl"
model="$fixtures/models/tiny-bert"

# ---- the busy processes: started here, stopped by their pids ----------------------
hog_pids=()
stop_hogs() {
  local p
  for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  hog_pids=()
}
trap stop_hogs EXIT
start_hogs() {
  local i
  for ((i = 0; i < hogs; i++)); do
    (while :; do :; done) &
    hog_pids+=($!)
  done
  sleep 0.5
}

policy_env() {
  case "$1" in
    spin*) echo "GOMP_SPINCOUNT=${1#spin}" ;;
    libgomp) echo "STOKE_OPENMP_DEFAULTS=off" ;;
    passive) echo "OMP_WAIT_POLICY=passive" ;;
    stoke) echo "" ;;
    *) say "error: unknown policy $1"; exit 1 ;;
  esac
}

# Seconds one command takes (wall), or ">limit" when stopped.
run_timed() {
  local envs="$1"; shift
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u STOKE_OPENMP_DEFAULTS $envs timeout "$limit" "$@" >/dev/null 2>"$work/err" || rc=$?
  t1=$(date +%s.%N)
  if [ $rc -eq 124 ]; then echo ">$limit"; return; fi
  [ $rc -eq 0 ] || { say "error: $* failed: $(tail -n 3 "$work/err")"; exit 1; }
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'
}
n=0
train_once() {
  n=$((n + 1))
  run_timed "$1" "$bin" train --model "$model" --train "$work/train.jsonl" --output "$work/run-$n" \
    --batch-size 32 --max-steps 40 --log-every 40 --save-every 0 --quiet
  rm -rf "$work/run-$n"
}
embed_once() {
  n=$((n + 1))
  # --batch-tokens 128 at --max-length 32: tiny batches, where the waits between OpenMP regions dominate
  run_timed "$1" "$bin" embed --model "$model" --input "$work/embed.jsonl" --output "$work/run-$n" \
    --max-length 32 --batch-tokens 128 --workers 1 --quiet
  rm -rf "$work/run-$n"
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

results="$work/results.tsv"
echo -e "policy\tload\ttrain_s\tembed_s" >"$results"
t_start=$(date +%s)
for load in idle loaded; do
  [ "$load" = loaded ] && start_hogs
  for p in $policies; do
    envs=$(policy_env "$p")
    r=$([ "$load" = idle ] && echo "$reps" || echo 1)
    tr_s="" em_s=""
    for ((i = 0; i < r; i++)); do
      tr_s+=" $(train_once "$envs")"
      em_s+=" $(embed_once "$envs")"
    done
    tr_m=$(echo "$tr_s" | median)
    em_m=$(echo "$em_s" | median)
    say "$load $p: train${tr_s} s, embed${em_s} s"
    echo -e "$p\t$load\t$tr_m\t$em_m" >>"$results"
  done
  [ "$load" = loaded ] && stop_hogs
done
cpu_load_others
python3 bench/contention/report.py "$results" "$(nproc)" "$hogs" "$(( $(date +%s) - t_start ))" "$others"
