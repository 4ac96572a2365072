#!/usr/bin/env bash
# Embed pipeline benchmark: how close `stoke embed` (the pipelined default)
# comes to the executor alone on the same batches, and how much it gains over
# the serial loop (`stoke embed --serial`), in one run, with ratios.
#   bench/pipeline/run.sh
# Per precision, three measurements with the same flags:
#   (a) stoke embed            wall clock of the whole process
#   (b) bench_pipeline         the same batches, pre-tokenized; only enqueue +
#                              result wait timed (the yardstick)
#   (c) stoke embed --serial   wall clock of the whole process
#   (d) stoke embed --trace    (a) recording every stage and device-op span
#                              (the doctor's trace): its overhead, target <= 2%
# Environment knobs (defaults in brackets):
#   BENCH_TEXTS        [all]     the first N texts of the fortunes corpus (24,400)
#   BENCH_PRECISIONS   [f32 bf16] bf16 is dropped when the CPU has no native bf16
#   BENCH_SORT_WINDOW  [4096]    --sort-window: several windows, so reading and
#                                tokenizing have compute to hide behind
#   BENCH_BATCH_TOKENS [16384]   --batch-tokens (embed's default)
#   BENCH_REPEAT       [1]       rounds of (a, b, c), taken in turns so a load
#                                that comes and goes falls on all three; the
#                                best of each counts
#   BENCH_BUILD        [build/release]  build tree with stoke and bench_pipeline
#                                (built there with ninja when missing)
# Everything generated goes to build/bench-models/ (git-ignored): the
# MiniLM-L6-size model from bench/embed_cpu/make_models.py, and pipeline/.
# On 2 quiet cores, BENCH_TEXTS=6000 BENCH_REPEAT=2 took 471 s (f32 is two thirds
# of it); one round over the whole corpus is ~4x a 6,000-text round, ~16 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
corpus="$fixtures/corpus/fortunes-multilingual.jsonl"
work=build/bench-models
res="$work/pipeline"
build="${BENCH_BUILD:-build/release}"
bin="$build/apps/stoke/stoke"
bench_bin="$build/bench/pipeline/bench_pipeline"
n_texts="${BENCH_TEXTS:-all}"
precisions="${BENCH_PRECISIONS:-f32 bf16}"
sort_window="${BENCH_SORT_WINDOW:-4096}"
batch_tokens="${BENCH_BATCH_TOKENS:-16384}"
repeat="${BENCH_REPEAT:-1}"
max_length=128
t_start=$(date +%s)
say() { echo "pipeline: $*" >&2; }
# cpu_load_start/cpu_load_others: shared with bench/embed_cpu and bench/train_cpu
source bench/common/cpu_peer.sh
cpu_load_start
now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }

# ---- stoke and bench_pipeline ------------------------------------------------
if [ ! -x "$bin" ] || [ ! -x "$bench_bin" ]; then
  if [ -f "$build/build.ninja" ]; then
    say "building stoke and bench_pipeline in $build"
    ninja -C "$build" -j "${STOKE_JOBS:-$(nproc)}" stoke bench_pipeline >&2
  else
    say "building stoke (scripts/setup.sh, scripts/build.sh release)"
    scripts/setup.sh
    scripts/build.sh release
  fi
fi

# ---- model and texts ---------------------------------------------------------
# The MiniLM-L6-size model exactly as bench/embed_cpu makes it (same seed), and
# only that one: a folder already up to date is left alone.
/usr/bin/python3 - "$fixtures" "$work" <<'PY' >&2
import os, sys
sys.path.insert(0, "bench/embed_cpu")
import make_models
fixtures, out = sys.argv[1], sys.argv[2]
name = "minilm-l6"
d, made = make_models.make_model(os.path.join(fixtures, "models", "tiny-bert"), out, name,
                                 list(make_models.SIZES).index(name))
print(f"make_models: {d} {'written' if made else 'up to date'}")
PY
model="$work/minilm-l6"
rm -rf "$res"
mkdir -p "$res"
texts="$corpus"
if [ "$n_texts" != all ]; then
  texts="$res/texts.jsonl"
  awk -v n="$n_texts" 'NF && c < n { print; c++ }' "$corpus" >"$texts"
fi
say "$(grep -c . "$texts") texts from $(basename "$corpus"); --sort-window $sort_window --batch-tokens $batch_tokens --max-length $max_length"

if [ "$("$bench_bin" --cpu-features | sed -n 's/.*"native_bf16":\(true\|false\).*/\1/p')" != true ]; then
  case " $precisions " in *" bf16 "*)
    say "no native bf16 on this CPU: bf16 left out"
    precisions=$(echo "$precisions" | sed 's/\bbf16\b//g') ;;
  esac
fi

flags=(--model "$model" --input "$texts" --max-length $max_length --sort-window "$sort_window"
       --batch-tokens "$batch_tokens")
embed_run() {  # KIND PREC ROUND [--serial]: one timed `stoke embed` process
  local outd="$res/$1-$2-$3" t0 wall
  t0=$(now)
  "$bin" embed "${flags[@]}" --precision "$2" --output "$outd" --overwrite --quiet "${@:4}"
  wall=$(sub "$(now)" "$t0")
  printf '{"kind": "%s", "precision": "%s", "round": %s, "wall": %s, "out": "%s"}\n' "$1" "$2" "$3" "$wall" "$outd" \
    >>"$res/runs.jsonl"
}
for prec in $precisions; do
  for round in $(seq "$repeat"); do
    say "$prec round $round/$repeat: (a) stoke embed"
    embed_run pipelined "$prec" "$round"
    say "$prec round $round/$repeat: (b) bench_pipeline (executor alone)"
    "$bench_bin" "${flags[@]}" --precision "$prec" --output "$res/compute-$prec-$round.f32" |
      sed "s/^{/{\"kind\": \"compute\", \"round\": $round, /" >>"$res/runs.jsonl"
    say "$prec round $round/$repeat: (c) stoke embed --serial"
    embed_run serial "$prec" "$round" --serial
    say "$prec round $round/$repeat: (d) stoke embed --trace (the tracing overhead)"
    embed_run traced "$prec" "$round" --trace "$res/trace-$prec-$round.json"
  done
done

cpu_load_others  # sets $others: CPU seconds other processes used during the run
/usr/bin/python3 bench/pipeline/report.py "$res" $(( $(date +%s) - t_start )) "$others"
