#!/usr/bin/env bash
# int8 on the CPU, side by side in one run (issues 20, 36): stoke f32, bf16
# and int8, ONNX Runtime f32 and ONNX Runtime dynamic int8 on the MiniLM-L6
# and bert-base sizes, 2 threads. Two figures per engine: the forward alone
# (stoke's device-busy time; ORT's session runs over the same token ids) and
# the whole process as a user waits for it (`stoke embed` texts in, shards
# out, against ort_e2e.py: import, session, HF tokenizers, run, pool, save),
# each timed from outside. Also centered cosine to stoke f32, stoke's GEMM
# share and GOP/s against the oneDNN matmul peak measured in the same run, and
# the int8 op alone at the layer shapes (bench_linear_int8) against that peak.
#   bench/embed_cpu/int8_run.sh
# Needs a Python with onnxruntime, onnx, torch and transformers (BENCH_PY,
# default .venv-bench-ort/bin/python: made with pinned PyPI versions when
# missing). Knobs: BENCH_TEXTS_MINILM [2000], BENCH_TEXTS_BERT [500],
# BENCH_MODELS ["minilm-l6 bert-base"]. Run it on a quiet machine (on a
# shared one under the build lock): the report prints the load average
# before and after.
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
work=build/bench-models
res="$work/results-int8"
bin=build/release/apps/stoke/stoke
peak_bin=build/release/bench/embed_cpu/bench_gemm_peak
op_bin=build/release/bench/embed_cpu/bench_linear_int8
py="${BENCH_PY:-.venv-bench-ort/bin/python}"
texts_minilm="${BENCH_TEXTS_MINILM:-2000}"
texts_bert="${BENCH_TEXTS_BERT:-500}"
models="${BENCH_MODELS:-minilm-l6 bert-base}"
threads=2
say() { echo "int8_run: $*" >&2; }
now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }

if [ ! -x "$py" ]; then
  say "making .venv-bench-ort (PyPI: onnxruntime, onnx, torch CPU, transformers; pinned)"
  /usr/bin/python3 -m venv .venv-bench-ort
  .venv-bench-ort/bin/pip install -q onnxruntime==1.32.0 onnx==1.23.2 torch==2.15.0 transformers==5.24.0 numpy
  py=.venv-bench-ort/bin/python
fi
[ -x "$peak_bin" ] && [ -x "$op_bin" ] || ninja -C build/release bench_gemm_peak bench_linear_int8 >/dev/null
mkdir -p "$res"
rm -f "$res"/runs.jsonl
cat /proc/loadavg >"$res/loadavg-before"
"$py" bench/embed_cpu/make_models.py "$fixtures" "$work" 2000 >&2
OMP_NUM_THREADS=$threads "$peak_bin" --threads $threads --seconds 0.7 >"$res/peak-start.json"
OMP_NUM_THREADS=$threads "$op_bin" --threads $threads --m 12288 --hidden 384 --ffn 1536 >"$res/op-minilm-l6.json"
OMP_NUM_THREADS=$threads "$op_bin" --threads $threads --m 8192 --hidden 768 --ffn 3072 --reps 5 >"$res/op-bert-base.json"

stoke_run() {  # MODEL PREC DIR TEXTS [TRACE]: one `stoke embed` process
  local outd="$res/stoke-$1-$2" t0 wall trace=()
  [ -n "${5:-}" ] && trace=(--trace "$5")
  t0=$(now)
  OMP_NUM_THREADS=$threads "$bin" embed --model "$3" --input "$4" --output "$outd" --overwrite --quiet \
    --workers $threads --precision "$2" --max-length 128 --pooling mean --no-normalize "${trace[@]}"
  wall=$(sub "$(now)" "$t0")
  [ -n "${5:-}" ] && return 0
  printf '{"kind": "stoke", "model": "%s", "precision": "%s", "wall": %s, "manifest": %s}\n' \
    "$1" "$2" "$wall" "$(cat "$outd/manifest.json" | tr -d '\n')" >>"$res/runs.jsonl"
}
ort_e2e_run() {  # MODEL PREC DIR TEXTS: one ort_e2e.py process, timed from outside as stoke_run times stoke
  local graph="$work/onnx/$1-opt.onnx" t0 wall
  [ "$2" = int8 ] && graph="$work/onnx/$1-opt-int8.onnx"
  t0=$(now)
  OMP_NUM_THREADS=$threads "$py" bench/embed_cpu/ort_e2e.py "$3" "$4" "$graph" $threads "$res/ort-e2e-$1-$2.npy" >/dev/null
  wall=$(sub "$(now)" "$t0")
  printf '{"kind": "ort_e2e", "model": "%s", "precision": "%s", "wall": %s}\n' "$1" "$2" "$wall" >>"$res/runs.jsonl"
}
ort_run() {  # MODEL PREC DIR IDS
  OMP_NUM_THREADS=$threads "$py" bench/embed_cpu/ort_baseline.py "$3" "$4" "$2" $threads 2 10 \
    "$res/ort-$1-$2.npy" "$work/onnx" | sed "s/^{/{\"kind\": \"ort\", \"model\": \"$1\", /" >>"$res/runs.jsonl"
}

for model in $models; do
  dir="$work/$model"
  n=$texts_minilm
  [ "$model" = bert-base ] && n=$texts_bert
  texts="$res/texts-$model.jsonl"
  awk -v n="$n" -v t=2000 'c < n && NR - 1 == int(c * t / n) { print; c++ }' "$work/texts.jsonl" >"$texts"
  ids="$res/ids-$model.jsonl"
  "$bin" tokenize --model "$dir" --input "$texts" --max-length 128 --quiet --output "$ids"
  # The ONNX graphs first (export, optimize, quantize: not timed).
  ort_run "$model" f32 "$dir" "$ids" >/dev/null 2>"$res/ort-$model-export.log" || { say "ORT failed: $res/ort-$model-export.log"; exit 1; }
  sed -i '$d' "$res/runs.jsonl"
  for round in 1 2 3; do
    for prec in f32 bf16 int8; do
      if [ "$prec" = bf16 ]; then say "$model round $round: stoke $prec"; else say "$model round $round: stoke $prec, ORT $prec"; fi
      stoke_run "$model" "$prec" "$dir" "$texts"
      [ "$prec" = bf16 ] && continue  # ORT's CPU graphs: f32 and dynamic int8
      ort_run "$model" "$prec" "$dir" "$ids" 2>>"$res/ort-$model.log"
      ort_e2e_run "$model" "$prec" "$dir" "$texts"
    done
  done
  for prec in f32 int8; do stoke_run "$model" "$prec" "$dir" "$texts" "$res/trace-$model-$prec.json"; done
done
OMP_NUM_THREADS=$threads "$peak_bin" --threads $threads --seconds 0.7 >"$res/peak-end.json"
cat /proc/loadavg >"$res/loadavg-after"
"$py" bench/embed_cpu/int8_report.py "$res" "$work"
