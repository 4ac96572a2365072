#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzz build for a few seconds each, from its
# seed corpus. A crash fails the run and leaves the crashing input in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/fuzz}"
seconds="${2:-10}"
fail=0
for target in "$build"/tests/fuzz/fuzz_*; do
  [ -x "$target" ] || continue
  name=$(basename "$target")
  seeds="tests/fuzz/corpus/${name#fuzz_}"
  work="$build/fuzz-work/$name"
  mkdir -p "$work"
  [ -d "$seeds" ] && cp -n "$seeds"/* "$work"/ 2>/dev/null || true
  dict=()
  [ -f "tests/fuzz/dict/${name#fuzz_}.dict" ] && dict=(-dict="tests/fuzz/dict/${name#fuzz_}.dict")
  echo "fuzz: $name for ${seconds}s"
  if ! "$target" "$work" "${dict[@]}" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
       -artifact_prefix="$build/$name-" -print_final_stats=0 >"$build/$name.log" 2>&1; then
    echo "fuzz: $name FAILED (see $build/$name.log)"; tail -30 "$build/$name.log"; fail=1
  else
    grep -E "^Done|#[0-9]+.*DONE" "$build/$name.log" | tail -1 || true
  fi
done
exit $fail
