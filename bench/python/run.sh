#!/usr/bin/env bash
# stoke's Python package next to sentence-transformers, in one process on the
# same texts and threads (bench_encode.py says how), on the MiniLM-L6 and
# bert-base-size random models of bench/embed_cpu; a markdown table at the end.
#   bench/python/run.sh
# Environment (defaults in brackets):
#   BENCH_PYTHON       a Python with torch + sentence-transformers [.venv-bench-st/bin/python,
#                      which bench/embed_cpu/run.sh installs from PyPI]
#   BENCH_TEXTS_MINILM [2000]  BENCH_TEXTS_BERT [500]  BENCH_THREADS [2]
#   BENCH_MODELS ["minilm-l6 bert-base"]  BENCH_PRECISIONS [f32, plus bf16 when the CPU has AVX512-BF16/AMX]
# The module is built into build/release (STOKE_PYTHON=ON) for BENCH_PYTHON's interpreter.
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
py="${BENCH_PYTHON:-.venv-bench-st/bin/python}"
threads="${BENCH_THREADS:-2}"
work=build/bench-models
if ! "$py" -c 'import sentence_transformers, torch' 2>/dev/null; then
  echo "bench/python: $py cannot import sentence_transformers and torch (set BENCH_PYTHON, or run bench/embed_cpu/run.sh once)" >&2
  exit 1
fi
native_bf16=0
grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo && native_bf16=1
precisions="${BENCH_PRECISIONS:-f32$([ $native_bf16 = 1 ] && echo ' bf16')}"
# The module for this interpreter, from build/release's objects (nanobind from the pins, in a side venv).
nb_dir=$("$py" -m nanobind --cmake_dir 2>/dev/null || true)
if [ -z "$nb_dir" ]; then
  tmp=build/python-bench-nanobind
  "$py" -m pip install -q --target "$tmp" "$(grep '^nanobind==' python/requirements-test.txt)"
  nb_dir="$PWD/$tmp/nanobind/cmake"
fi
cmake -S . -B build/release -DSTOKE_PYTHON=ON -DPython_EXECUTABLE="$(command -v "$py" || echo "$py")" -Dnanobind_DIR="$nb_dir" >/dev/null
ninja -C build/release -j "${STOKE_JOBS:-$(nproc)}" stoke_python stoke >/dev/null
"$py" bench/embed_cpu/make_models.py "$fixtures" "$work" 2000 >&2
mkdir -p "$work/results"
out="$work/results/python-bench.jsonl"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "bench/python: $cpu, $threads threads, bf16 native: $([ $native_bf16 = 1 ] && echo yes || echo no)" >&2
OMP_NUM_THREADS=$threads PYTHONPATH="$PWD/build/release/python" "$py" bench/python/bench_encode.py \
  "$work" "$work/texts.jsonl" "$threads" "${BENCH_MODELS:-minilm-l6 bert-base}" "$precisions" \
  "${BENCH_TEXTS_MINILM:-2000}" "${BENCH_TEXTS_BERT:-500}" "$out" >&2
"$py" - "$out" "$cpu" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"CPU: {sys.argv[2]}; {rows[0]['threads']} threads; {rows[0]['st']}")
print("| model | precision | texts | stoke encode s | ST encode s | speedup | stoke one text µs | ST one text µs | max abs diff |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['model']} | {r['precision']} | {r['texts']} | {r['stoke_s']:.2f} | {r['st_s']:.2f} | "
          f"{r['speedup']:.2f}x | {r['stoke_one_text_us']:.0f} | {r['st_one_text_us']:.0f} | {r['max_abs_diff']:.1e} |")
PY
