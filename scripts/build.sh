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
case "$flavour" in
  release) args=(-DCMAKE_BUILD_TYPE=Release -DSTOKE_CUDA=AUTO) ;;
  # asan also builds without MPI: Open MPI's own allocations would drown the
  # leak report, and it keeps the MPI-less build (and its refusal) tested.
  asan)    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKE_ASAN=ON -DSTOKE_UBSAN=ON -DSTOKE_CUDA=OFF -DSTOKE_BENCH=OFF
                 -DSTOKE_MPI=OFF) ;;
  tsan)    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKE_TSAN=ON -DSTOKE_CUDA=OFF -DSTOKE_BENCH=OFF) ;;
  fuzz)    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTOKE_FUZZ=ON -DSTOKE_CUDA=OFF -DSTOKE_BENCH=OFF
                 -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++) ;;
  *) echo "usage: $0 release|asan|tsan|fuzz" >&2; exit 2 ;;
esac
cmake -S . -B "build/$flavour" -G Ninja "${args[@]}" >/dev/null
ninja -C "build/$flavour" -j "$jobs" "$@"
