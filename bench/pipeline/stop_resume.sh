#!/usr/bin/env bash
# What a kill -9 in the middle of one sort window costs `stoke embed`, timed as
# the user waits (whole processes):
#   bench/pipeline/stop_resume.sh
# One window of 65,536 texts (the default --sort-window, one shard): nothing
# is committed until the end, so before the batch journal a kill threw the
# whole window away. The run is killed right after its batch journal kept half
# of the window's batches (STOKE_CRASH_AT=journal-appended:K), then resumed
# with `--output DIR --resume` alone. Printed: the uninterrupted run's time and
# batches, what the resume took from the journal and computed, the work lost
# (the batches that were in flight: at most 3 of --max-batch-size texts), the
# resume's time, and whether the files equal the uninterrupted run's.
# Environment: BENCH_TEXTS [65536], BENCH_MODEL [the fixtures' tiny-bert],
# BENCH_BUILD [build/release].
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
corpus="$fixtures/corpus/fortunes-multilingual.jsonl"
model="${BENCH_MODEL:-$fixtures/models/tiny-bert}"
bin="${BENCH_BUILD:-build/release}/apps/stoke/stoke"
n="${BENCH_TEXTS:-65536}"
work=build/bench-models/stop-resume
rm -rf "$work" && mkdir -p "$work" && : > "$work/texts.jsonl"
# The corpus repeated up to n texts (one window when n <= 65,536).
while [ "$(wc -l < "$work/texts.jsonl")" -lt "$n" ]; do cat "$corpus" >> "$work/texts.jsonl"; done
head -n "$n" "$work/texts.jsonl" > "$work/input.jsonl"

seconds() { python3 -c 'import sys,time; t=time.time(); import subprocess; subprocess.run(sys.argv[1:]); print(f"{time.time()-t:.2f}")' "$@"; }
field() { python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["run"][sys.argv[2]])' "$1/manifest.json" "$2"; }

full=$(seconds "$bin" embed --model "$model" --input "$work/input.jsonl" --output "$work/full" --quiet)
batches=$(field "$work/full" batches)
half=$((batches / 2))
STOKE_CRASH_AT="journal-appended:$half" "$bin" embed --model "$model" --input "$work/input.jsonl" \
  --output "$work/killed" --quiet 2>/dev/null || status=$?
[ "${status:-0}" = 137 ] || { echo "the run was not killed (status ${status:-0})" >&2; exit 1; }
resume=$(seconds "$bin" embed --output "$work/killed" --resume --quiet)
computed=$(field "$work/killed" device_texts)
taken=$(field "$work/killed" kept_rows_taken)
max_batch=256
same=no
cmp -s "$work/full/embeddings-00000.npy" "$work/killed/embeddings-00000.npy" &&
  cmp -s "$work/full/ids-00000.jsonl" "$work/killed/ids-00000.jsonl" && same=yes
python3 - "$n" "$full" "$batches" "$half" "$taken" "$computed" "$resume" "$max_batch" "$same" <<'EOF'
import sys
n, full, batches, half, taken, computed, resume, max_batch, same = sys.argv[1:]
n, batches, half, taken, computed, max_batch = map(int, (n, batches, half, taken, computed, max_batch))
full, resume = float(full), float(resume)
print(f"uninterrupted: {n} texts, {batches} batches, {full:.2f} s (whole process)")
print(f"killed after {half} of {batches} batches were kept; the resume took {taken} rows from partial-*.rows "
      f"and computed {computed} ({100 * computed / n:.1f}% of the window) in {resume:.2f} s "
      f"({resume / full:.2f}x the uninterrupted run)")
print(f"work lost: the batches in flight at the kill, at most 3 x {max_batch} = {3 * max_batch} texts "
      f"({100 * 3 * max_batch / n:.1f}% of the window); without the journal the resume computes all {n} (100%)")
print(f"recomputed beyond what no file kept: {taken + computed - n} texts")
print(f"files identical to the uninterrupted run: {same}")
EOF
