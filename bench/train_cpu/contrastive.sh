#!/usr/bin/env bash
# CPU contrastive fine-tuning benchmark: `stoke train --objective mnrl` next to
# sentence-transformers' SentenceTransformerTrainer on the same model, pairs,
# batch size and step count, in one run, with ratios. Two cases:
#   mnrl          batch 64: stoke --objective mnrl --batch-size 64 vs
#                 MultipleNegativesRankingLoss, per_device_train_batch_size 64
#   cached        batch 256 in mini-batches: stoke --batch-size 256
#                 --mini-batch-tokens (32 texts' worth: 32 x the mean tokens of a
#                 text of the file) vs CachedMultipleNegativesRankingLoss(mini_batch_size=32)
# Both sides: NO_DUPLICATES batches (stoke's embedding objectives always draw
# them), lr 5e-5, linear schedule, AdamW, clip 1.0, fp32, the config's dropout
# (0.1), the final model saved. What is timed: each whole process, start to
# exit, as the user waits (/usr/bin/time -v: wall time and peak RSS).
#   bench/train_cpu/contrastive.sh
# Environment knobs (defaults in brackets):
#   BENCH_CTR_PAIRS         [4096]  anchor/positive pairs in the file (halves of fortunes)
#   BENCH_CTR_MNRL_STEPS    [16]    optimizer steps of the mnrl case (x 64 pairs)
#   BENCH_CTR_CACHED_STEPS  [3]     optimizer steps of the cached case (x 256 pairs)
#   BENCH_CTR_CASES         ["mnrl cached"]
#   BENCH_CTR_MINI_TEXTS    [32]    ST's mini_batch_size; stoke's --mini-batch-tokens
#                                   is this many texts' worth of tokens
#   BENCH_ST_PYTHON         [.venv-bench-st-trainer/bin/python]: a python with torch,
#                           transformers, sentence-transformers, datasets, accelerate;
#                           the default is made when missing (needs .venv-bench-st and
#                           PyPI: bench/train_cpu/requirements-st-trainer.txt)
#   STOKE_BIN               [build/release/apps/stoke/stoke]
# Everything generated goes to build/bench-models/train/contrastive/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
work=build/bench-models/train/contrastive
res="$work/results"
bin="${STOKE_BIN:-build/release/apps/stoke/stoke}"
py_default=.venv-bench-st-trainer/bin/python
py="${BENCH_ST_PYTHON:-$py_default}"
pairs="${BENCH_CTR_PAIRS:-4096}"
mnrl_steps="${BENCH_CTR_MNRL_STEPS:-16}"
cached_steps="${BENCH_CTR_CACHED_STEPS:-3}"
cases="${BENCH_CTR_CASES:-mnrl cached}"
mini_texts="${BENCH_CTR_MINI_TEXTS:-32}"
threads=2
t_start=$(date +%s)
say() { echo "contrastive: $*" >&2; }
die() { echo "contrastive: error: $*" >&2; exit 1; }
# cpu_load_start/cpu_load_others: shared with bench/embed_cpu and run.sh
source bench/common/cpu_peer.sh
cpu_load_start
now() { date +%s.%N; }

[ -x /usr/bin/time ] || die "/usr/bin/time is missing (apt-get install time): it measures the peak memory"
for c in $cases; do
  case $c in
    mnrl) [ $((mnrl_steps * 64)) -le "$pairs" ] || die "BENCH_CTR_MNRL_STEPS=$mnrl_steps x 64 > BENCH_CTR_PAIRS=$pairs (one pass, no epoch wrap)" ;;
    cached) [ $((cached_steps * 256)) -le "$pairs" ] || die "BENCH_CTR_CACHED_STEPS=$cached_steps x 256 > BENCH_CTR_PAIRS=$pairs (one pass, no epoch wrap)" ;;
    *) die "BENCH_CTR_CASES: unknown case '$c' (mnrl, cached)" ;;
  esac
done

# ---- stoke ----------------------------------------------------------------------
[ -x "$bin" ] || die "$bin is missing: build it (scripts/build.sh release)"
train_help=$("$bin" train --help 2>&1) || die "$bin train --help failed"
lacking=()
for f in --objective --mini-batch-tokens --model --train --output --batch-size --max-steps --max-length --lr \
         --save-every --quiet; do
  grep -Eq -- "$f([^-[:alnum:]]|$)" <<<"$train_help" || lacking+=("$f")
done
[ ${#lacking[@]} -eq 0 ] || die "\`$bin train --help\` lists no ${lacking[*]}: the flags this benchmark passes"
grep -q 'mnrl' <<<"$train_help" || die "\`$bin train --help\` has no mnrl objective"

# ---- the sentence-transformers peer ------------------------------------------------
if [ ! -x "$py" ] && [ "$py" = "$py_default" ]; then
  [ -d .venv-bench-st/lib/python3.11/site-packages ] ||
    die "no .venv-bench-st (torch, transformers, sentence-transformers): bench/embed_cpu/run.sh makes it; or set BENCH_ST_PYTHON"
  say "making .venv-bench-st-trainer: .venv-bench-st's packages + bench/train_cpu/requirements-st-trainer.txt (PyPI)"
  /usr/bin/python3 -m venv .venv-bench-st-trainer
  echo "$PWD/.venv-bench-st/lib/python3.11/site-packages" >.venv-bench-st-trainer/lib/python3.11/site-packages/bench-st.pth
  .venv-bench-st-trainer/bin/python -m pip install -q -r bench/train_cpu/requirements-st-trainer.txt
fi
[ -x "$py" ] || die "BENCH_ST_PYTHON=$py is not an executable python"
"$py" -c 'import torch, transformers, sentence_transformers, datasets, accelerate' 2>/dev/null ||
  die "$py lacks one of torch, transformers, sentence-transformers, datasets, accelerate (see bench/train_cpu/requirements-st-trainer.txt)"

# ---- model, pairs, token counts ---------------------------------------------------
/usr/bin/python3 bench/train_cpu/st_contrastive.py data "$fixtures" "$work" "$pairs" >&2
dir="$work/minilm-l6"
data="$work/pairs.jsonl"
rm -rf "$res"
mkdir -p "$res"
# Token counts of both columns (stoke's tokenizer; the same vocabulary ST
# loads): the mean length of a text sets --mini-batch-tokens.
ids="$res/ids.jsonl"
for col in anchor positive; do
  "$bin" tokenize --model "$dir" --input "$data" --text-field "$col" --max-length 128 --quiet --output "$res/ids-$col.jsonl"
done
cat "$res/ids-anchor.jsonl" "$res/ids-positive.jsonl" >"$ids"
mbt=$(/usr/bin/python3 -c '
import json, sys
n = [len(json.loads(l)["ids"]) for l in open(sys.argv[1]) if l.strip()]
print(max(max(n), round(int(sys.argv[2]) * sum(n) / len(n))))' "$ids" "$mini_texts")
say "$(wc -l <"$data") pairs; --mini-batch-tokens $mbt (= $mini_texts texts of the mean length)"

# timed KIND CASE STEPS BATCH EXTRA_JSON -- COMMAND...: runs COMMAND under
# /usr/bin/time -v (stdout to RES/KIND-CASE.out, stderr to .log) and appends
# one line to RES/runs.jsonl: its wall seconds, peak RSS, exit status.
timed() {
  local kind=$1 case=$2 steps=$3 batch=$4 extra=$5 t0 t1 rc=0
  shift 6
  t0=$(now)
  /usr/bin/time -v -o "$res/$kind-$case.time" "$@" >"$res/$kind-$case.out" 2>"$res/$kind-$case.log" || rc=$?
  t1=$(now)
  /usr/bin/python3 - "$res" "$kind" "$case" "$steps" "$batch" "$t0" "$t1" "$rc" "$extra" <<'EOF' >>"$res/runs.jsonl"
import json, os, sys
res, kind, case, steps, batch, t0, t1, rc, extra = sys.argv[1:]
base = os.path.join(res, f"{kind}-{case}")
rss = None
for line in open(base + ".time"):
    if "Maximum resident set size" in line:
        rss = int(line.rsplit(":", 1)[1])
row = {"kind": kind, "case": case, "steps": int(steps), "batch": int(batch), "samples": int(steps) * int(batch),
       "wall": float(t1) - float(t0), "max_rss_kb": rss, "status": int(rc), "log": base + ".log"}
row.update(json.loads(extra))
if kind == "st":
    peer = [l for l in open(base + ".out") if l.startswith('{"')]
    row["peer"] = json.loads(peer[-1]) if peer else None
print(json.dumps(row))
EOF
  [ "$rc" -eq 0 ] || say "$kind $case exited with status $rc (see $res/$kind-$case.log)"
}

export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1  # no network: the model is a local folder
for c in $cases; do
  if [ "$c" = mnrl ]; then
    steps=$mnrl_steps batch=64 stoke_extra=() st_extra=(--loss mnrl) mini=null
  else
    steps=$cached_steps batch=256 stoke_extra=(--mini-batch-tokens "$mbt")
    st_extra=(--loss cached --mini-batch-size "$mini_texts") mini=$mbt
  fi
  say "$c: stoke train, $steps steps of $batch"
  timed stoke "$c" "$steps" "$batch" "{\"run\": \"$res/stoke-$c/run.json\", \"mini_batch_tokens\": $mini}" -- \
    env -u OMP_NUM_THREADS "$bin" train --objective mnrl --model "$dir" --train "$data" --output "$res/stoke-$c" \
    --batch-size "$batch" "${stoke_extra[@]}" --max-steps "$steps" --max-length 128 --lr 5e-5 --save-every 0 --quiet
  say "$c: SentenceTransformerTrainer, $steps steps of $batch"
  timed st "$c" "$steps" "$batch" "{\"mini_batch_size\": $([ "$c" = mnrl ] && echo null || echo "$mini_texts")}" -- \
    env OMP_NUM_THREADS=$threads "$py" bench/train_cpu/st_contrastive.py train --model "$dir" --train "$data" \
    --output "$res/st-$c" --batch-size "$batch" --steps "$steps" --threads $threads --lr 5e-5 "${st_extra[@]}"
done

cpu_load_others  # sets $others: CPU seconds other processes used during the run
/usr/bin/python3 bench/train_cpu/st_contrastive.py report "$res" "$dir" "$ids" $(( $(date +%s) - t_start )) "$others"
