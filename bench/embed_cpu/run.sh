#!/usr/bin/env bash
# CPU embedding benchmark: stoke next to a PyTorch eager peer (and
# SentenceTransformer where PyPI's torch installs) on the same texts, in one
# run, with ratios, and stoke's FLOP rate held against oneDNN's matmul peak
# measured on this machine in the same run.
#   bench/embed_cpu/run.sh
# Environment knobs (defaults in brackets):
#   BENCH_TEXTS_MINILM [2000]   texts embedded with the MiniLM-L6-size model
#   BENCH_TEXTS_BERT   [500]    texts for the bert-base size (spread evenly over
#                               the same 2,000, so the length mix is the same);
#                               at 2,000, the f32 bert-base cell alone (~20 TFLOP
#                               a pass, ~100-150 GFLOP/s here) takes ~8 minutes
#   BENCH_ST           [1]      0 skips SentenceTransformer (PyPI torch, ~6 GB)
#   BENCH_MODELS, BENCH_PRECISIONS ["minilm-l6 bert-base", "f32 bf16"]
# Everything generated (models, texts, outputs) goes to build/bench-models/,
# which git ignores. Needs apt (python3-torch, libopenblas0-openmp are
# installed when missing) and, for SentenceTransformer, PyPI.
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
work=build/bench-models
res="$work/results"
bin=build/release/apps/stoke/stoke
peak_bin=build/release/bench/embed_cpu/bench_gemm_peak
texts_minilm="${BENCH_TEXTS_MINILM:-2000}"
texts_bert="${BENCH_TEXTS_BERT:-500}"
models="${BENCH_MODELS:-minilm-l6 bert-base}"
precisions="${BENCH_PRECISIONS:-f32 bf16}"
threads=2
t_start=$(date +%s)
say() { echo "embed_cpu: $*" >&2; }
# cpu_load_start/cpu_load_others, torch_peer_setup: shared with bench/train_cpu
source bench/common/cpu_peer.sh
cpu_load_start
now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }

# ---- stoke and the GEMM-peak program ---------------------------------------
if ! "$bin" embed --help >/dev/null 2>&1; then
  say "building stoke (scripts/setup.sh, scripts/build.sh release)"
  scripts/setup.sh
  scripts/build.sh release
fi
if [ ! -x "$peak_bin" ] && ! ninja -C build/release bench_gemm_peak >/dev/null 2>&1; then
  # A build tree without bench/embed_cpu in it: build the one file by hand.
  peak_bin=build/bench-embed-cpu/bench_gemm_peak
  mkdir -p "$(dirname "$peak_bin")"
  g++ -std=c++20 -O2 -fopenmp bench/embed_cpu/gemm_peak.cc -o "$peak_bin" -ldnnl
fi

# ---- the PyTorch peers -------------------------------------------------------
# python3-torch, OpenBLAS for it, and the OPENBLAS_* settings it runs under
# (see bench/common/cpu_peer.sh): sets torch_env and blas_note.
torch_peer_setup

st_py=.venv-bench-st/bin/python
st_note=""
if [ "${BENCH_ST:-1}" = 0 ]; then
  st_note="SentenceTransformer skipped (BENCH_ST=0)"
elif [ ! -x "$st_py" ] || ! "$st_py" -c 'import sentence_transformers' 2>/dev/null; then
  say "installing torch + sentence-transformers from PyPI into .venv-bench-st (CPU use only; ~6 GB with CUDA libraries)"
  if ! { /usr/bin/python3 -m venv .venv-bench-st && timeout 900 "$st_py" -m pip install -q torch sentence-transformers; } >&2; then
    st_note="SentenceTransformer skipped: pip install torch sentence-transformers failed"
  fi
fi
[ -n "$st_note" ] && say "$st_note"

# ---- models, texts, peak -----------------------------------------------------
/usr/bin/python3 bench/embed_cpu/make_models.py "$fixtures" "$work" 2000 >&2
rm -rf "$res"
mkdir -p "$res"
peak() {  # oneDNN matmul peak; run at the start and at the end, the best counts
  say "oneDNN matmul peak ($threads threads)"
  OMP_NUM_THREADS=$threads "$peak_bin" --threads $threads --seconds 0.7 >"$res/peak-$1.json"
}
over() { awk -v s="$1" -v l="$2" 'BEGIN { exit !(s > l) }'; }
peak start

# stoke and the eager peer take turns (stoke, torch, stoke, torch, [stoke]), so
# a load that comes and goes on this shared machine falls on both alike, and
# one pass stalled by it (libgomp's spinning threads lose their core) does not
# decide the result.
stoke_run() {  # MODEL PREC DIR TEXTS RUN#: one timed `stoke embed` process
  local outd="$res/stoke-$1-$2" t0 wall
  t0=$(now)
  "$bin" embed --model "$3" --input "$4" --output "$outd" --overwrite --quiet \
    --workers $threads --precision "$2" --max-length 128
  wall=$(sub "$(now)" "$t0")
  cp "$outd/manifest.json" "$res/manifest-$1-$2-$5.json"
  printf '{"kind": "stoke", "model": "%s", "precision": "%s", "wall": %s, "manifest": "%s"}\n' \
    "$1" "$2" "$wall" "$res/manifest-$1-$2-$5.json" >>"$res/runs.jsonl"
  echo "$wall"
}
torch_run() {  # MODEL PREC DIR IDS: one pass of the eager peer, in its own process
  "${torch_env[@]}" /usr/bin/python3 bench/embed_cpu/torch_baseline.py "$3" "$4" "$2" $threads 1 0 \
    "$res/torch-$1-$2.npy" | sed "s/^{/{\"kind\": \"torch\", \"model\": \"$1\", /" >>"$res/runs.jsonl"
}

for model in $models; do
  dir="$work/$model"
  n=$texts_minilm
  [ "$model" = bert-base ] && n=$texts_bert
  texts="$res/texts-$model.jsonl"
  # n texts evenly spread over the 2,000 (which are in corpus order, grouped
  # by language and topic): the same mix of languages and lengths.
  awk -v n="$n" -v t=2000 'c < n && NR - 1 == int(c * t / n) { print; c++ }' "$work/texts.jsonl" >"$texts"
  ids="$res/ids-$model.jsonl"
  "$bin" tokenize --model "$dir" --input "$texts" --max-length 128 --quiet --output "$ids"
  for prec in $precisions; do
    tag="$model-$prec"
    say "$tag: stoke embed and torch eager, in turns"
    # Two of each, best counts; a third stoke run when two took under 30 s
    # (a bound that keeps the whole benchmark near 10 minutes on 2 cores).
    s1=$(stoke_run "$model" "$prec" "$dir" "$texts" 1)
    torch_run "$model" "$prec" "$dir" "$ids" >/dev/null
    s2=$(stoke_run "$model" "$prec" "$dir" "$texts" 2)
    torch_run "$model" "$prec" "$dir" "$ids" >/dev/null
    over 30 "$(sub "$s1" "-$s2")" && stoke_run "$model" "$prec" "$dir" "$texts" 3 >/dev/null
    if [ -z "$st_note" ]; then
      say "$tag: SentenceTransformer"
      # A peer that is nice to have: its failure is reported, not fatal.
      "$st_py" bench/embed_cpu/st_baseline.py "$dir" "$texts" "$prec" $threads 2 10 "$res/st-$tag.npy" \
        2>"$res/st-$tag.log" | sed "s/^{/{\"kind\": \"st\", \"model\": \"$model\", /" >>"$res/runs.jsonl" ||
        say "$tag: SentenceTransformer failed; see $res/st-$tag.log"
    fi
  done
done
peak end

cpu_load_others  # sets $others: CPU seconds other processes used during the run
/usr/bin/python3 bench/embed_cpu/report.py "$res" "$work" "$blas_note" "${st_note:-ran}" $(( $(date +%s) - t_start )) "$others"
