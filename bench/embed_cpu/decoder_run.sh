#!/usr/bin/env bash
# The decoder embedder on the CPU: a random model of Qwen3-Embedding-0.6B's
# size (make_qwen3_model.py), stoke embed next to SentenceTransformer (PyPI
# torch) on the same texts, f32 and bf16, 2 threads, in one run; and the
# peak resident memory of each stoke process (the 24 GiB question).
#   bench/embed_cpu/decoder_run.sh
# Knobs: BENCH_TEXTS_QWEN [300] texts (evenly spread over the corpus sample),
# BENCH_PY [.venv-bench-st/bin/python] a Python with PyPI torch,
# transformers and sentence-transformers (it also makes the model).
# Prints one JSON line per run and the table; everything generated goes to
# build/bench-models/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
work=build/bench-models
res="$work/results-qwen3"
bin=build/release/apps/stoke/stoke
py="${BENCH_PY:-.venv-bench-st/bin/python}"
n="${BENCH_TEXTS_QWEN:-300}"
threads=2
say() { echo "decoder_run: $*" >&2; }
mkdir -p "$work" "$res"
"$py" bench/embed_cpu/make_qwen3_model.py tests/golden/tokenizers/qwen3 "$work" >&2
model="$work/qwen3-0.6b"
source bench/embed_cpu/st_compare.sh
