#!/usr/bin/env bash
# int8 on the CPU, side by side in one run (issue 20): stoke f32, stoke int8,
# ONNX Runtime f32 and ONNX Runtime dynamic int8 on the MiniLM-L6 and
# bert-base sizes, 2 threads, the same token ids; tokens/s of the forward,
# centered cosine to stoke f32, stoke's GEMM share and GOP/s against the
# oneDNN int8 (VNNI) matmul peak measured in the same run.
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
[ -x "$peak_bin" ] || ninja -C build/release bench_gemm_peak >/dev/null
mkdir -p "$res"
rm -f "$res"/runs.jsonl
cat /proc/loadavg >"$res/loadavg-before"
"$py" bench/embed_cpu/make_models.py "$fixtures" "$work" 2000 >&2
OMP_NUM_THREADS=$threads "$peak_bin" --threads $threads --seconds 0.7 >"$res/peak-start.json"

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
  for round in 1 2; do
    for prec in f32 int8; do
      say "$model round $round: stoke $prec, ORT $prec"
      stoke_run "$model" "$prec" "$dir" "$texts"
      ort_run "$model" "$prec" "$dir" "$ids" 2>>"$res/ort-$model.log"
    done
  done
  for prec in f32 int8; do stoke_run "$model" "$prec" "$dir" "$texts" "$res/trace-$model-$prec.json"; done
done
OMP_NUM_THREADS=$threads "$peak_bin" --threads $threads --seconds 0.7 >"$res/peak-end.json"
cat /proc/loadavg >"$res/loadavg-after"
"$py" bench/embed_cpu/int8_report.py "$res" "$work"
