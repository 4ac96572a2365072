#!/usr/bin/env bash
# Configures and builds one flavour of stoke into build/<flavour>.
#   scripts/build.sh release   optimised build, CUDA backend when nvcc is found
#   scripts/build.sh asan      ASan+UBSan, CPU only (unit tests)
#   scripts/build.sh fuzz      clang + libFuzzer targets
#   scripts/build.sh release stoke   only the named targets (here: the CLI)
set -euo pipefail
cd "$(dirname "$0")/.."
flavour="${1:-release}"
shift || true
jobs="${STOKE_JOBS:-$(nproc)}"
# The sanitizer builds are clang with line tables only: a stack trace still
# names file and line, and the build takes about a third of gcc's -O2 -g time
# (Boost.Beast's headers with full debug info dominated CI's ASan build).
clang_lines=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
             "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG"
             "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG")
case "$flavour" in
  release) args=(-DCMAKE_BUILD_TYPE=Release -DSTOKE_CUDA=AUTO) ;;
  # asan also builds without MPI: Open MPI's own allocations would drown the
  # leak report, and it keeps the MPI-less build (and its refusal) tested.
  asan)    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKE_ASAN=ON -DSTOKE_UBSAN=ON -DSTOKE_CUDA=OFF -DSTOKE_BENCH=OFF
                 -DSTOKE_MPI=OFF "${clang_lines[@]}") ;;
  tsan)    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKE_TSAN=ON -DSTOKE_CUDA=OFF -DSTOKE_BENCH=OFF) ;;
  fuzz)    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKE_FUZZ=ON -DSTOKE_CUDA=OFF -DSTOKE_BENCH=OFF "${clang_lines[@]}") ;;
  *) echo "usage: $0 release|asan|tsan|fuzz" >&2; exit 2 ;;
esac
# A tree configured with another compiler (the asan tree was gcc's before) is
# configured afresh: CMake refuses to switch a cache's compiler in place.
cache="build/$flavour/CMakeCache.txt"
if [ -f "$cache" ] && [ "$flavour" != release ] && [ "$flavour" != tsan ] &&
   ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' "$cache"; then
  rm -rf "$cache" "build/$flavour/CMakeFiles"
fi
cmake -S . -B "build/$flavour" -G Ninja "${args[@]}" >/dev/null
ninja -C "build/$flavour" -j "$jobs" "$@"
