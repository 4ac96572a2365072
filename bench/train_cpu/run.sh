#!/usr/bin/env bash
# CPU fine-tuning benchmark: samples/s of `stoke train` next to a PyTorch
# eager training step on the same model, batches and step count, in one run,
# with ratios.
#   bench/train_cpu/run.sh
# Environment knobs (defaults in brackets):
#   BENCH_TRAIN_TEXTS  [2048]     records in the training file (a seeded sample
#                                 of the multilingual fortunes, label = language)
#   BENCH_TRAIN_STEPS  [40]       steps timed on each side (batch 32, file order);
#                                 steps x 32 must not exceed BENCH_TRAIN_TEXTS
#   BENCH_PRECISIONS   ["f32 bf16"]
#   BENCH_DROPOUT      [the config's: 0.1]  one dropout rate for every site, on
#                                 both sides (stoke train --dropout; 0 turns it off)
#   STOKE_BIN          [build/release/apps/stoke/stoke]
# Everything generated (model, records, outputs) goes to
# build/bench-models/train/, which git ignores. Needs apt (python3-torch,
# libopenblas0-openmp are installed when missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
work=build/bench-models/train
res="$work/results"
bin="${STOKE_BIN:-build/release/apps/stoke/stoke}"
texts="${BENCH_TRAIN_TEXTS:-2048}"
steps="${BENCH_TRAIN_STEPS:-40}"
precisions="${BENCH_PRECISIONS:-f32 bf16}"
batch=32
threads=2
dropout=()
[ -n "${BENCH_DROPOUT:-}" ] && dropout=(--dropout "$BENCH_DROPOUT")
t_start=$(date +%s)
say() { echo "train_cpu: $*" >&2; }
die() { echo "train_cpu: error: $*" >&2; exit 1; }
# cpu_load_start/cpu_load_others, torch_peer_setup: shared with bench/embed_cpu
source bench/common/cpu_peer.sh
cpu_load_start
now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }

[ $((steps * batch)) -le "$texts" ] ||
  die "BENCH_TRAIN_STEPS=$steps x batch $batch = $((steps * batch)) records, more than BENCH_TRAIN_TEXTS=$texts (one pass, no epoch wrap)"

# ---- stoke --------------------------------------------------------------------
# `stoke train --help` exits 0 even where there is no train command (the
# top-level help answers), so the subcommand list is what tells. (Captured
# first: grep -q in a pipe may close it early, and pipefail reads the
# writer's SIGPIPE as a failure.)
has_train() {
  local help
  help=$("$bin" --help 2>/dev/null) || return 1
  grep -Eq '^[[:space:]]+train([[:space:]]|$)' <<<"$help"
}
if ! has_train; then
  if grep -q '"train"' apps/stoke/main.cc; then
    say "building stoke (scripts/setup.sh, scripts/build.sh release): $bin has no train command yet"
    scripts/setup.sh
    scripts/build.sh release
  fi
  has_train || die "$bin has no 'train' command ($bin --help does not list it$(grep -q '"train"' apps/stoke/main.cc ||
    echo '; nor does apps/stoke/main.cc have one')): this benchmark needs \`stoke train\`"
fi
train_help=$("$bin" train --help 2>&1)
lacking=()
for f in --model --train --output --batch-size --max-steps --no-shuffle --precision --lr --max-length \
         --log-every --save-every --quiet --label-field ${dropout[0]:-}; do
  grep -Eq -- "$f([^-[:alnum:]]|$)" <<<"$train_help" || lacking+=("$f")
done
[ ${#lacking[@]} -eq 0 ] || die "\`$bin train --help\` lists no ${lacking[*]}: the flags this benchmark passes"

# ---- the PyTorch peer ------------------------------------------------------------
# python3-torch, OpenBLAS for it, and the OPENBLAS_* settings it runs under
# (see bench/common/cpu_peer.sh): sets torch_env and blas_note.
torch_peer_setup

# ---- model, records, token ids -------------------------------------------------
/usr/bin/python3 bench/train_cpu/make_data.py "$fixtures" "$work" "$texts" >&2
dir="$work/minilm-l6-cls"
data="$work/train.jsonl"
rm -rf "$res"
mkdir -p "$res"
# The peer trains on stoke's own token ids (tokenization not timed there).
ids="$res/ids.jsonl"
"$bin" tokenize --model "$dir" --input "$data" --max-length 128 --quiet --output "$ids"

for prec in $precisions; do
  say "$prec: stoke train, $steps steps of $batch"
  outd="$res/stoke-$prec"
  t0=$(now)
  OMP_NUM_THREADS=$threads "$bin" train --model "$dir" --train "$data" --output "$outd" \
    --batch-size $batch --max-steps "$steps" --no-shuffle --precision "$prec" --lr 5e-5 --max-length 128 \
    --log-every 50 --save-every 0 --quiet --label-field label "${dropout[@]}" ||
    die "stoke train ($prec) exited with status $?"
  wall=$(sub "$(now)" "$t0")
  [ -f "$outd/run.json" ] || die "stoke train ($prec) wrote no $outd/run.json"
  printf '{"kind": "stoke", "precision": "%s", "wall": %s, "run": "%s"}\n' "$prec" "$wall" "$outd/run.json" \
    >>"$res/runs.jsonl"

  say "$prec: torch eager, the same $steps batches"
  "${torch_env[@]}" OMP_NUM_THREADS=$threads /usr/bin/python3 bench/train_cpu/torch_train.py \
    --model "$dir" --train "$data" --ids "$ids" --precision "$prec" --threads $threads \
    --batch-size $batch --steps "$steps" --warmup 2 --log-every 50 --lr 5e-5 "${dropout[@]}" \
    | sed 's/^{/{"kind": "torch", /' >>"$res/runs.jsonl"
done

cpu_load_others  # sets $others: CPU seconds other processes used during the run
/usr/bin/python3 bench/train_cpu/report.py "$res" "$dir" "$batch" "$steps" "$blas_note" \
  $(( $(date +%s) - t_start )) "$others"
