#!/usr/bin/env bash
# The one device script (DESIGN.md): everything stoke checks on a GPU, as ONE
# call of the device tool, because a GPU is lent to few sessions, for 15
# minutes of device time (the machine's start of 2-4 minutes included), and
# each call costs a machine start. Binaries are built HERE (no GPU needed to
# compile for sm_90) and carried there with the non-CUDA shared libraries
# they need; the device machine has CUDA's own libraries.
#
#   scripts/gpu-check.sh prepare [--no-build]   here: build build/gpu, fill .gpu/ (git-ignored); prints the call last
#   bash .gpu/gpu-check.sh run                  there, in the repo root, as the one device call:
#       run(command="bash .gpu/gpu-check.sh run", carry=[".gpu"], timeout_s=390)
#   scripts/gpu-check.sh selftest               here, CPU only: the plan's arithmetic, the Python parts, the whole run at tiny scale
#
# Budget (set once, in "the plan" below; selftest checks the arithmetic):
# every step has a cap; the caps sum to 337 s, under the deadline of 350 s
# (GPU_CHECK_DEADLINE_S), which is under the call's timeout_s less 30 s; no
# step starts, nor runs, past the deadline less 5 s kept for the last table.
# So the call takes at most 6 minutes of command time, even if every step
# hits its cap; about 2.5 minutes are expected on an H100.
#
# run, in this order (a step's failure or cut never stops the next):
#   setup          unpack .gpu, find libcublasLt, the card and driver
#   tests_table    test_op_table's CUDA cases: every op against the CPU reference
#   sanitizer      compute-sanitizer: a probe of seconds (a refused device skips the step,
#                  with the reason), memcheck on ten attention and embedding-backward
#                  cases, then racecheck on two small flash training cases
#   tests_ops      test_cuda_ops;  tests_encoder: test_cuda_encoder (goldens through CUDA)
#   data           (CPU) a random bert-base-size model, 100,000 multilingual texts (token
#                  counts precomputed by prepare), the training case's classifier and records
#   train_torch    one torch process: the bf16 matmul rate measured on the card (MFU's
#                  denominator), then the seed's first PyTorch loop, then its fixed loop
#   train_stoke    `stoke train --device cuda --precision bf16` on the fixed loop's data and batch
#   train_report   samples/s, MFU, GPU utilization, host syncs, loss curves
#   st             sentence-transformers bf16: a batch-size sweep on a subsample, then
#                  all texts at the best batch size
#   stoke          `stoke embed --device cuda --precision bf16`, nvidia-smi beside it
#   compare        cosine between the two on 1,000 records
#   profile        a traced `stoke embed`: device time by op
# $OUT receives only the files named in GC_OUT_FILES (below; the tool returns
# at most 8): summary.md (the table, rewritten as each step starts and ends,
# so a call cut at any point still returns it with every step marked),
# summary.json (every number), run.log, tests.log, stoke.log (report.py
# writes the two summaries through NAME.tmp and a rename, so a reader never
# sees half a table; a call killed in that instant returns one file more,
# still under 8). nvidia-smi's
# samples and stoke's manifest stay in the work folder; their numbers go into
# summary.json. bench/embed_gpu/README.md and bench/train_gpu/README.md have more.
#
# Knobs (environment; defaults in brackets):
#   prepare: STOKE_FIXTURES [../shared/fixtures], GPU_CHECK_BUILD_DIR [build/gpu], GPU_CHECK_JOBS [2],
#            GPU_CHECK_MAX_MIB [60], GPU_CHECK_PREPARE_DIR [.gpu] (selftest's), PY [a python with transformers,
#            for the corpus's token counts; else they are counted there]
#   run:     GPU_CHECK_TEXTS [100000], GPU_CHECK_BATCH_TOKENS [32768], GPU_CHECK_WORKERS [12],
#            GPU_CHECK_STOKE_FLAGS [--max-batch-size 1024] (more `stoke embed` flags), GPU_CHECK_SANITIZER [1 on a GPU, 0 on the CPU],
#            GPU_CHECK_DEADLINE_S [350] (no step runs past it), GPU_CHECK_MODEL
#            [12,768,12,3072: layers,hidden,heads,FFN], GPU_CHECK_MAX_LENGTH [512], GPU_CHECK_MATMUL_N
#            [8192], GPU_CHECK_WARMUP [1000], GPU_CHECK_ST_SWEEP [32,64,128,256,512] (ST batch sizes tried),
#            GPU_CHECK_ST_SWEEP_TEXTS [4000], GPU_CHECK_COMPARE_ROWS [1000],
#            GPU_CHECK_PROFILE_TEXTS [10000] (the traced run), GPU_CHECK_DEVICE [cuda], GPU_CHECK_PRECISION [bf16],
#            GPU_CHECK_DIR [.gpu], GPU_CHECK_FIXTURES [.gpu/fixtures], PY [python3],
#            GPU_CHECK_KEEP [0] (1 keeps the work folder in $TMPDIR), GPU_CHECK_COMPARE_ARGS [],
#            STOKE_BIN [.gpu/bin/stoke], OUT [out/gpu-check] (the device tool sets OUT), GPU_CHECK_GPU_INDEX [0],
#            GPU_CHECK_TRAIN_MODEL [12,768,12,3072], GPU_CHECK_TRAIN_STEPS [150], GPU_CHECK_TRAIN_RECORDS [16384],
#            GPU_CHECK_TRAIN_PRECISION [bf16] (stoke's; the fixed loop is bf16 autocast), GPU_CHECK_TRAIN_LOG_EVERY [25]
#   tests of the script itself: GPU_CHECK_FORCE_CAP [0] (1: every step sleeps past its cap instead of
#            running), GPU_CHECK_CAP_SCALE [1] (multiplies every cap, the reserve, and the deadline
#            unless GPU_CHECK_DEADLINE_S is given)
#   selftest: PY (a python with torch + sentence-transformers; default: .venv-bench-st of this
#            checkout or of the main worktree), STOKE_BIN (a CPU stoke; default build/release's)
set -euo pipefail

self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
here="$(dirname "$self")"
# In the repository the Python parts are in bench/embed_gpu; in .gpu/ (a copy
# made by prepare, so the device call needs nothing but .gpu) they sit in
# .gpu/bench/embed_gpu beside this script.
if [ -d "$here/bench/embed_gpu" ]; then bench="$here/bench/embed_gpu"; else bench="$(cd "$here/.." && pwd)/bench/embed_gpu"; fi

# ============================================================================
# the plan: the ONE place the call's budget is set (selftest reads it: `_plan`)
# ============================================================================
GC_TIMEOUT_S=390 # the device call's timeout_s (prepare prints the call; the docs quote it)
GC_DEADLINE_S=350 # run's deadline from its start: no step runs past it (GPU_CHECK_DEADLINE_S)
GC_REPORT_S=5     # kept back before the deadline for the last table
GC_MIN_STEP_S=5   # a step that would get less than this before the deadline is skipped
# The sanitizer step's three tools, each under its own timeout (+0.5 s to SIGKILL) inside the step's cap.
GC_SAN_PROBE_S=10 GC_SAN_MEMCHECK_S=12 GC_SAN_RACECHECK_S=8
# Every file run writes to $OUT (the tool returns at most 8): out_path refuses any other name.
GC_OUT_FILES=(summary.md summary.json run.log tests.log stoke.log)
# Estimates (est_s) are for one H100 80GB with 16 cores, from a cold machine
# (the first torch import reads ~2 GB of libraries from a cold disk): a
# Python process that imports torch 3-5 s (8 s for the first), bert-base bf16
# forward through sentence-transformers ~10k short texts/s, a 350 MB random
# model with numpy ~3 s (1.8 s on the 2-core machine that prepares).
#   setup          xz-unpacking .gpu (~100 MB out at ~80 MB/s), nvidia-smi 3 times (1-3 s the first, cold): 5 s
#   tests_table    ~100 CUDA op tests, each a fresh backend (context, cuBLASLt) and the CPU reference per case: 15 s
#   sanitizer      probe 3 s (10 s cap; "Device not supported" skips at once), memcheck 4 op tests
#                  (10 small cases) 10 s (12 s), racecheck 2 op tests (2 cases) 6 s (8 s); a cut tool
#                  reports "cut at Ns after K of N tests" (gtest tests: one per op)
#   tests_ops      the CUDA op sweeps, graphs, OOM recovery: 10 s
#   tests_encoder  goldens, two CLI embeds (GPU and CPU), training goldens and graphs: 12 s
#   data           three numpy processes side by side: two 350-440 MB models 3 s each, 100k texts 0.5 s: 5 s
#   train_torch    import 8 s, matmul 1 s, load 2 s, 155 steps x ~35 ms first (fp32, batch 16),
#                  155 x ~30 ms fixed (bf16 autocast, batch 64), tokenizing 1 s: 27 s
#   train_stoke    load 440 MB, 150 steps, save: 12 s
#   st             import 4 s, load 2 s, warm-up 1 s, sweep of 5 batch sizes x 4,000 texts 5 s,
#                  sample vectors, 100k texts at ~10k/s 10 s, tokenizing inside: 30 s
#   stoke          100k texts (~7M tokens) at >= 3x sentence-transformers, load 1 s: 10 s
#   compare        numpy, 1,000 rows out of a 100k-row folder: 1 s (0.2 s on the 2-core machine)
#   profile        10,000 texts traced: 6 s
# step         cap_s est_s what
GC_PLAN='
setup            15     5 unpack .gpu, find libcublasLt, the card and driver
tests_table      30    15 test_op_table, CUDA cases: every op vs the CPU reference
sanitizer        35    20 compute-sanitizer: probe, memcheck (attention, embedding backward), racecheck (two flash training cases)
tests_ops        20    10 test_cuda_ops
tests_encoder    25    12 test_cuda_encoder: goldens through CUDA, CLI embed GPU = CPU, training goldens
data             20     5 random bert-base model, 100k multilingual texts, classifier + training records (CPU)
train_torch      45    27 bf16 matmul rate, then the seed first loop, then its fixed loop (one torch process)
train_stoke      30    12 stoke train --device cuda --precision bf16 on the fixed loop data and batch
train_report      5     1 training: samples/s, MFU, host syncs, loss curves
train_contrastive 12    6 stoke train --objective mnrl --device cuda --precision bf16, batch 256 as GradCache mini-batches
st               55    30 sentence-transformers bf16: batch-size sweep, sample vectors, all texts at the best batch
stoke            25    10 stoke embed --device cuda --precision bf16, nvidia-smi beside it
compare           5     1 cosine stoke vs sentence-transformers, 1,000 records
profile          15     6 stoke embed --trace on 10,000 texts: device time by op
'
# test_op_table's CUDA cases (the CPU backends are checked on the CPU); the
# sanitizer's: a tiny probe; memcheck on attention (inference, and the flash
# training kernels at the tile edges, head dims 16, 20, 36 — the scalar tile
# loads — and 128, dropout, f32 gradients) and the embedding backward (CUB's
# sort); racecheck on two small flash training cases (d 16 and d 36, lengths
# 1 to 130). The gtest filter picks the ops, STOKE_OP_TABLE_CASES the cases
# within them (parts of case names; tests/ops/test_op_table.cc).
GC_OP_TABLE_FILTER='EveryOp/OpTable.MatchesReference/cuda_*:OpTableCoverage.*:UnsupportedOps.*'
GC_PROBE_FILTER='EveryOp/OpTable.MatchesReference/cuda_bias_gelu'
GC_PROBE_CASES=''
GC_MEMCHECK_FILTER='EveryOp/OpTable.MatchesReference/cuda_attention:EveryOp/OpTable.MatchesReference/cuda_attention_train:EveryOp/OpTable.MatchesReference/cuda_attention_backward:EveryOp/OpTable.MatchesReference/cuda_embed_layernorm_backward'
GC_MEMCHECK_CASES='attention_f32,attention_bf16,attention_f16,attention_train_flash_bf16_d16_edges,attention_train_flash_bf16_d36_edges,attention_backward_flash_bf16_d16_edges,attention_backward_flash_bf16_d36_edges,attention_backward_flash_f16_d128_edges,attention_backward_flash_bf16_d20_p1_f32_grads,embed_layernorm_backward_bf16'
GC_RACECHECK_FILTER='EveryOp/OpTable.MatchesReference/cuda_attention_train:EveryOp/OpTable.MatchesReference/cuda_attention_backward'
GC_RACECHECK_CASES='attention_train_flash_bf16_d16_edges,attention_backward_flash_bf16_d36_edges'
GC_OUT_MAX_BYTES=$((8 * 1048576)) # per file in $OUT (the tool takes 16 MiB a file, 64 MiB together)

call_line() { echo "run(command=\"bash .gpu/gpu-check.sh run\", carry=[\".gpu\"], timeout_s=$GC_TIMEOUT_S)"; }
plan_rows() { sed -e '/^[[:space:]]*$/d' <<<"$GC_PLAN"; }
plan_cap() { awk -v k="$1" '$1 == k { print $2 }' <<<"$GC_PLAN"; }

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; } # calc 'EXPR': arithmetic on fractional seconds
pretty() { awk -v x="$1" 'BEGIN { printf "%g", x }'; }
fless() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
say() { echo "gpu-check: $*"; }
die() {
  echo "gpu-check: error: $*" >&2
  exit 1
}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# ---- $OUT: every write goes through out_path ----------------------------------
# out_path NAME: $OUT/NAME when NAME is in GC_OUT_FILES; otherwise an error
# line and status 1 (use it as `p="$(out_path NAME)" || ...`).
out_path() {
  local n
  for n in "${GC_OUT_FILES[@]}"; do
    if [ "$n" = "$1" ]; then
      echo "${GC_OUT:?GC_OUT is not set}/$1"
      return 0
    fi
  done
  echo "gpu-check: error: '$1' is not in GC_OUT_FILES (${GC_OUT_FILES[*]}): \$OUT holds only those (the tool returns 8 files at most)" >&2
  [ -n "${GC_WORK:-}" ] && echo "$1" >>"$GC_WORK/out-refused"
  return 1
}
# out_put NAME SRC: SRC's first GC_OUT_MAX_BYTES as $OUT/NAME.
out_put() {
  local dst
  dst="$(out_path "$1")" || return 1
  [ -f "$2" ] || return 0
  head -c "$GC_OUT_MAX_BYTES" "$2" >"$dst"
}
# out_append NAME SRC: appends SRC (its first 2 MiB) to $OUT/NAME while it stays under GC_OUT_MAX_BYTES.
out_append() {
  local dst have
  dst="$(out_path "$1")" || return 1
  [ -f "$2" ] || return 0
  have=$(stat -c %s "$dst" 2>/dev/null || echo 0)
  if [ "$have" -lt $((GC_OUT_MAX_BYTES - 2097152)) ]; then
    head -c 2097152 "$2" >>"$dst"
  else
    echo "(gpu-check: $(basename "$2") left out: $1 is at its size limit)" >>"$dst"
  fi
}

# ============================================================================
# prepare (here)
# ============================================================================

# Libraries the device machine has or must provide itself: glibc's parts,
# the C++ runtime (newer there than here; glibc and libstdc++ are backward
# compatible), and CUDA's own (the driver's libcuda, the toolkit's cuBLAS).
system_lib() {
  case "$1" in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libmvec.so.* | libpthread.so.* | libdl.so.* | \
      librt.so.* | libresolv.so.* | libutil.so.* | libstdc++.so.* | libgcc_s.so.*) return 0 ;;
    libcublas*.so* | libcudart*.so* | libcuda.so*) return 0 ;;
  esac
  return 1
}

# find_py MODULES: the first python that imports MODULES (comma-separated):
# PY, then .venv-bench-st of this checkout or of the main worktree, then python3.
find_py() {
  local root main_wt c
  root="$(cd "$here/.." && pwd)"
  main_wt="$(git -C "$root" worktree list --porcelain 2>/dev/null | awk '/^worktree / { print $2; exit }')"
  for c in ${PY:+"$PY"} "$root/.venv-bench-st/bin/python" "$main_wt/.venv-bench-st/bin/python" python3; do
    if "$c" -c "import $1" 2>/dev/null; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

# size_verdict TREE_BYTES GPU_BYTES: what travels against the tool's 64 MiB;
# status 1 (and a clear line) when the margin left is under 4 MiB.
size_verdict() {
  local tree=$1 gpu=$2 limit=$((64 * 1048576)) margin
  margin=$((limit - tree - gpu))
  say "travels: working tree $(mib "$tree") MiB + .gpu $(mib "$gpu") MiB = $(mib $((tree + gpu))) MiB; margin $(mib "$margin") MiB under 64 MiB"
  if [ "$margin" -lt $((4 * 1048576)) ]; then
    echo "gpu-check: error: margin $(mib "$margin") MiB is under 4 MiB: the device call could be refused (ignore files in the tree, or carry less)" >&2
    return 1
  fi
}

prepare() {
  local build_it=1 a
  for a in "$@"; do
    case "$a" in
      --no-build) build_it=0 ;;
      *) die "prepare: unknown argument '$a' (only --no-build)" ;;
    esac
  done
  local root
  root="$(cd "$here/.." && pwd)"
  [ -f "$root/CMakeLists.txt" ] || die "prepare runs from the repository (scripts/gpu-check.sh), not from a .gpu/ copy"
  cd "$root"
  local build="${GPU_CHECK_BUILD_DIR:-build/gpu}"
  local fixtures="${STOKE_FIXTURES:-$root/../shared/fixtures}"
  local gpu="${GPU_CHECK_PREPARE_DIR:-$root/.gpu}"
  local budget=$((${GPU_CHECK_MAX_MIB:-60} * 1048576))
  local targets=(stoke test_cuda_ops test_op_table test_cuda_encoder) t
  for t in models/tiny-bert golden corpus/fortunes-multilingual.jsonl; do
    [ -e "$fixtures/$t" ] || die "no $fixtures/$t (set STOKE_FIXTURES to the fixtures folder)"
  done

  if [ "$build_it" = 1 ]; then
    command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "no nvcc: building for the GPU needs the CUDA toolkit"
    say "configuring $build (Release, STOKE_CUDA=ON, sm_90, no benchmarks, no MPI)"
    # No MPI (and so no NCCL): one GPU has no data parallelism to check, and
    # Open MPI's five libraries cost ~1.4 MiB of the 64 MiB the call carries.
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTOKE_CUDA=ON -DSTOKE_CUDA_ARCHS=90 -DSTOKE_BENCH=OFF \
      -DSTOKE_MPI=OFF
    say "building ${targets[*]} (-j${GPU_CHECK_JOBS:-2})"
    ninja -C "$build" -j"${GPU_CHECK_JOBS:-2}" "${targets[@]}"
  fi

  # Where the build put each binary (tests/ or tests/cuda/, whatever CMake chose).
  local -a bins=()
  for t in "${targets[@]}"; do
    local p
    p="$(find "$build" -type f -name "$t" -perm -u+x -not -path '*/CMakeFiles/*' 2>/dev/null | head -n 1)"
    [ -n "$p" ] || die "no executable '$t' under $build: the CUDA backend must provide the target $t"
    bins+=("$p")
  done
  # (ldd's output taken whole: grep -q quitting early would fail the pipe under pipefail)
  if ! grep -q 'libcublasLt' <<<"$(ldd "${bins[0]}" 2>&1)"; then
    say "warning: ${bins[0]} does not link cuBLASLt: was it built with the CUDA backend (STOKE_CUDA=ON)?"
  fi

  say "filling $gpu"
  if [ -d "$gpu" ]; then chmod -R u+w "$gpu" && rm -rf "$gpu"; fi
  mkdir -p "$gpu/bin" "$gpu/lib" "$gpu/fixtures" "$gpu/data" "$gpu/bench/embed_gpu" "$gpu/bench/embed_cpu" "$gpu/bench/train_gpu"

  # bin/: stripped copies (symbols are no use there, and they cost megabytes).
  local b
  for b in "${bins[@]}"; do
    cp "$b" "$gpu/bin/"
    strip --strip-unneeded "$gpu/bin/$(basename "$b")" 2>/dev/null || say "warning: could not strip $(basename "$b")"
  done

  # lib/: every shared library ldd resolves for the binaries, less system_lib.
  # ldd prints "name => /path (0x...)", or "name => not found".
  local name path
  while read -r name path; do
    system_lib "$name" && continue
    [ "$path" = not ] && die "ldd: $name not found for the binaries in $build (install it here first)"
    [ -e "$gpu/lib/$name" ] || cp -L "$path" "$gpu/lib/$name"
  done < <(for b in "${bins[@]}"; do ldd "$b" 2>/dev/null || true; done | awk '$2 == "=>" { print $1, $3 }' | sort -u)

  # fixtures/: what the CUDA tests (STOKE_FIXTURES) and the benchmark read.
  # The shared fixtures are read-only; the copies must be deletable.
  cp -rL "$fixtures/models" "$fixtures/golden" "$fixtures/corpus" "$gpu/fixtures/"
  chmod -R u+w "$gpu/fixtures"

  # data/: what Python would otherwise compute there on the call's clock. The
  # corpus's token counts (the benchmark's model has the tiny-bert fixture's
  # tokenizer): counting 100k texts takes ~12 s on 2 cores, 24,400 corpus
  # lines ~3 s; make_texts.py maps record r to corpus line r mod 24,400.
  local lens_py
  if lens_py="$(find_py transformers)"; then
    "$lens_py" "$bench/corpus_lens.py" "$fixtures/models/tiny-bert" "$fixtures/corpus/fortunes-multilingual.jsonl" \
      "$gpu/data/corpus-lens.json"
  else
    say "warning: no python with transformers here (set PY): the texts' tokens will be counted there, on the call's clock"
  fi

  # bench/ and this script: the device call runs `bash .gpu/gpu-check.sh run`,
  # so it works from any checkout that carries .gpu, even one without this branch.
  cp "$bench"/*.py "$gpu/bench/embed_gpu/"
  cp "$root/bench/embed_cpu/make_models.py" "$gpu/bench/embed_cpu/"
  cp "$root"/bench/train_gpu/*.py "$gpu/bench/train_gpu/"
  cp "$self" "$gpu/gpu-check.sh"

  # What was built, and what the device's loader must offer (shown there if a
  # binary does not start).
  {
    # the commit of the sources the build was configured from (GPU_CHECK_BUILD_DIR may be another tree's)
    local src
    src="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)"
    echo "rev=$(git -C "${src:-$root}" describe --always --dirty 2>/dev/null || echo unknown) (${src:-$root})"
    echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
    # shellcheck source=/dev/null
    echo "built_on=$( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null), glibc $(ldd --version | head -n 1 | awk '{ print $NF }')"
    echo "nvcc=$( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | grep -o 'release [0-9.]*' | head -n 1 || true)"
    echo "needs_glibc=$(objdump -T "$gpu"/bin/* "$gpu"/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1 || true)"
    echo "needs_glibcxx=$(objdump -T "$gpu"/bin/* "$gpu"/lib/* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -n 1 || true)"
    echo "libs=$(cd "$gpu/lib" && echo *)"
  } >"$gpu/PREPARED"

  # Size: the device tool carries at most 64 MiB with the working tree (the
  # tracked files are ~30 MiB, most of them tests/golden): .gpu gets what is
  # left less a 4.5 MiB margin (or GPU_CHECK_MAX_MIB, if smaller).
  local size tree left
  tree="$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)"
  left=$((64 * 1048576 - tree - 4718592))
  [ "$left" -lt "$budget" ] && budget=$left
  size="$(python3 "$bench/pack.py" size "$gpu")"
  if [ "$size" -gt "$budget" ]; then
    say ".gpu is $(mib "$size") MiB, over $(mib "$budget"): xz-compressing its largest files (run unpacks them)"
    python3 "$bench/pack.py" pack "$gpu" "$budget"
    size="$(python3 "$bench/pack.py" size "$gpu")"
  fi
  (cd "$gpu" && du -sh bin lib fixtures data bench | sed 's/^/  /')
  sed 's/^/  /' "$gpu/PREPARED"
  say "the tool sends the checkout its session started in: if that is not $root, copy .gpu/ there first"
  say "(it must be git-ignored there: '/.gpu/' in .gitignore or .git/info/exclude)."
  size_verdict "$tree" "$size" || exit 1
  say "ready. In a session whose task has a GPU, ONE device call (its steps end by ${GC_DEADLINE_S} s, the table by $((GC_DEADLINE_S + GC_REPORT_S)) s):"
  echo
  echo "    $(call_line)"
}

# ============================================================================
# run (there)
# ============================================================================

# The folder holding a shared library NAME: CUDA toolkits first (what the
# binaries were linked against), then the loader's cache, then pip's nvidia
# packages (nvidia/cu13/lib/ for CUDA 13 wheels, nvidia/cublas/lib/ before).
find_lib_dir() {
  local name=$1 d
  for d in /usr/local/cuda/lib64 /usr/local/cuda*/lib64 /usr/local/cuda/targets/*/lib /usr/local/cuda*/targets/*/lib; do
    if [ -e "$d/$name" ]; then
      echo "$d"
      return 0
    fi
  done
  d="$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n { print $NF; exit }')"
  if [ -n "$d" ]; then
    dirname "$d"
    return 0
  fi
  "$GC_PY" - "$name" <<'EOF' 2>/dev/null || true
import glob, os, site, sys
roots = []
try:
    import nvidia
    roots += list(nvidia.__path__)
except Exception:
    pass
roots += [os.path.join(p, "nvidia") for p in site.getsitepackages()]
for r in roots:
    hits = sorted(glob.glob(os.path.join(r, "**", sys.argv[1]), recursive=True))
    if hits:
        print(os.path.dirname(hits[0]))
        break
EOF
}

# record KEY STATUS SECONDS NOTE: one line of steps.tsv (the last line of a key wins).
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$GC_WORK/steps.tsv"; }

# plain_summary: the step table in awk, for when report.py cannot run.
plain_summary() {
  echo "stoke GPU check: report.py failed; the steps as this script recorded them (run.log has the rest)"
  echo
  echo "| step | status | s | cap | note |"
  echo "|---|---|---|---|---|"
  awk -F'\t' 'NR == FNR { st[$1] = $2; s[$1] = $3; n[$1] = $4; next }
    { printf "| %s | %s | %s | %s | %s |\n", $1, ($1 in st) ? st[$1] : "not reached", s[$1], $2, n[$1] }' \
    "$GC_WORK/steps.tsv" "$GC_WORK/plan.tsv"
}

# report_now [--print]: summary.md and summary.json from what the work folder
# holds now (report.py: standard library only, ~50 ms).
GC_REPORT_BROKEN=0
report_now() {
  local md js
  md="$(out_path summary.md)" && js="$(out_path summary.json)" || return 0
  if [ "$GC_REPORT_BROKEN" = 0 ] &&
    timeout 10 "$GC_PY" "$GC_BENCH/report.py" "$GC_WORK" --md "$md" --json "$js" "$@" 2>"$GC_WORK/report.err"; then
    return 0
  fi
  [ "$GC_REPORT_BROKEN" = 0 ] && say "report.py failed ($(tail -n 1 "$GC_WORK/report.err" 2>/dev/null)): summary.md from steps.tsv alone from now on"
  GC_REPORT_BROKEN=1
  plain_summary >"$md"
  [ "${1:-}" = --print ] && cat "$md"
  return 0
}

# step KEY CMD...: run CMD under KEY's cap from the plan (cut to what is
# left before the deadline, less the reserve; skipped when under the
# minimum), print and record its status and seconds, rewrite the summary as
# it starts and as it ends. Never fails: one broken step cannot stop the run.
# CMD gets SIGTERM `grace` seconds before the cap and SIGKILL at it, so no
# step outlives its cap.
step() {
  local key=$1 cap left
  shift
  cap="$(plan_cap "$key")"
  if [ -z "$cap" ]; then
    say "== $key: not in the plan (GC_PLAN): not run"
    record "$key" "failed (not in the plan)" 0 ""
    return 0
  fi
  cap="$(calc "$cap * $GC_SCALE")"
  left="$(calc "$GC_DEADLINE - $(now) - $GC_RESERVE")"
  if fless "$left" "$GC_MIN_STEP"; then
    say "== $key: skipped, out of time ($(pretty "$left")s left before the deadline)"
    record "$key" "skipped (out of time)" 0 "$(pretty "$left") s left before the deadline, $(pretty "$cap") s wanted"
    report_now
    return 0
  fi
  fless "$left" "$cap" && cap=$left
  local grace run_for
  grace="$(calc "($cap / 4 < 2) ? $cap / 4 : 2")"
  run_for="$(calc "$cap - $grace")"
  say "== $key (cap $(pretty "$cap")s)"
  record "$key" running 0 "started at +$(since "$GC_T0") s, cap $(pretty "$cap") s"
  report_now
  [ "$GC_FORCE_CAP" = 1 ] && set -- sleep "$(calc "$cap + 1")"
  local t0 rc st s note=""
  t0=$(now)
  set +e
  timeout -k "$grace" "$run_for" "$@" 2>&1 | tee "$GC_WORK/step-$key.log"
  rc=${PIPESTATUS[0]}
  set -e
  case $rc in
    0) st=ok ;;
    124 | 137) st="timeout (cap $(pretty "$cap")s)" ;;
    127) st=missing ;;
    3) st="no test ran (all skipped)" ;;
    4) st=skipped ;;
    5) st=partial ;;
    *) st="failed (rc $rc)" ;;
  esac
  s=$(since "$t0")
  # The note: a skip's or partial's reason; a failed step's last error line
  # (the exception, stoke's error; else its last line).
  if [ "$rc" != 0 ]; then
    local lines
    lines="$(tr '\r\t' '\n ' <"$GC_WORK/step-$key.log" | sed 's/^[[:space:]]*//' | grep -v '^$' || true)"
    case $rc in
      4) note="$(sed -n 's/^skip: //p' <<<"$lines" | tail -n 1)" ;;
      5) note="$(sed -n 's/^partial: //p' <<<"$lines" | tail -n 1)" ;;
      124 | 137) note="$(tail -n 1 <<<"$lines")" ;;
    esac
    [ -n "$note" ] || note="$(grep -E '^[A-Za-z_.]+(Error|Exception|Interrupt)\b' <<<"$lines" | tail -n 1 || true)" # python's
    [ -n "$note" ] || note="$(grep -E 'error|not found|Segmentation|Abort' <<<"$lines" | tail -n 1 || true)"
    [ -n "$note" ] || note="$(tail -n 1 <<<"$lines")"
    note="$(cut -c1-160 <<<"$note")"
  fi
  record "$key" "$st" "$s" "$note"
  say "== $key: $st in ${s}s${note:+: $note}"
  report_now
}

# skip_step KEY REASON: a step that is not run, marked so.
skip_step() {
  say "== $1: skipped ($2)"
  record "$1" skipped 0 "$2"
  report_now
}

run() {
  GC_OUT="${OUT:-$PWD/out/gpu-check}"
  mkdir -p "$GC_OUT"
  GC_OUT="$(cd "$GC_OUT" && pwd)"
  export GC_OUT
  # Everything printed also goes to $OUT/run.log; the table comes last, so
  # it is in the tail the device tool returns.
  local log rc=0
  log="$(out_path run.log)"
  run_steps 2>&1 | tee "$log" || rc=$?
  return "$rc"
}

run_steps() {
  GC_T0=$(now)
  # Everything the steps (some are this script again, under `timeout`) need.
  GC_TRAIN_BENCH="$(cd "$bench/../train_gpu" 2>/dev/null && pwd || echo "$bench/../train_gpu")"
  export GC_T0 GC_BENCH="$bench" GC_TRAIN_BENCH
  export GC_PY="${PY:-python3}"
  export GC_DEVICE="${GPU_CHECK_DEVICE:-cuda}" GC_PRECISION="${GPU_CHECK_PRECISION:-bf16}"
  export GC_SCALE="${GPU_CHECK_CAP_SCALE:-1}" GC_FORCE_CAP="${GPU_CHECK_FORCE_CAP:-0}"
  local deadline_s="${GPU_CHECK_DEADLINE_S:-$(calc "$GC_DEADLINE_S * $GC_SCALE")}"
  GC_DEADLINE="$(calc "$GC_T0 + $deadline_s")"
  GC_RESERVE="$(calc "$GC_REPORT_S * $GC_SCALE")"
  GC_MIN_STEP="$(calc "$GC_MIN_STEP_S * $GC_SCALE")"
  export GC_DEADLINE GC_RESERVE GC_MIN_STEP
  GC_GPU="${GPU_CHECK_DIR:-$PWD/.gpu}"
  case "$GC_GPU" in /*) ;; *) GC_GPU="$PWD/$GC_GPU" ;; esac
  export GC_GPU
  # The repository root there (the call runs in it): the CUDA golden tests read
  # the repository's own goldens (tests/golden) through STOKE_SOURCE_DIR, not
  # through the path the binaries were built at.
  export GC_SRC="${GPU_CHECK_SOURCE_DIR:-$PWD}"
  export GC_FIX="${GPU_CHECK_FIXTURES:-$GC_GPU/fixtures}"
  export GC_STOKE="${STOKE_BIN:-$GC_GPU/bin/stoke}"
  export GC_BINLIB="$GC_GPU/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # setup adds CUDA's
  GC_WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")"
  export GC_WORK
  # No network there: never let transformers or the hub try it.
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONIOENCODING=utf-8
  # ... and keep progress bars out of the 12 KB of output that comes back.
  export HF_HUB_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error TQDM_DISABLE=1
  export GC_TEXTS="${GPU_CHECK_TEXTS:-100000}" GC_TRAIN_STEPS="${GPU_CHECK_TRAIN_STEPS:-150}"
  # plan.tsv (key, cap as run uses it, estimate, what): report.py marks every
  # planned step, "not reached" until it has a line in steps.tsv.
  plan_rows | awk -v s="$GC_SCALE" '{ w = $4; for (i = 5; i <= NF; i++) w = w " " $i; printf "%s\t%g\t%g\t%s\n", $1, $2 * s, $3, w }' \
    >"$GC_WORK/plan.tsv"
  : >"$GC_WORK/steps.tsv"
  local tests_log
  tests_log="$(out_path tests.log)" && : >"$tests_log"
  report_now
  say "device $GC_DEVICE, $GC_PRECISION, $GC_TEXTS texts; deadline $(pretty "$deadline_s")s; work $GC_WORK; out $GC_OUT; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  [ "$GC_FORCE_CAP" = 1 ] && say "GPU_CHECK_FORCE_CAP=1: every step sleeps past its cap (caps x $GC_SCALE)"

  # ---- a. the carried folder, then correctness first --------------------------
  step setup bash "$self" _setup
  # shellcheck source=/dev/null
  [ -f "$GC_WORK/setup.env" ] && . "$GC_WORK/setup.env" && export GC_BINLIB
  step tests_table bash "$self" _gtest table test_op_table "$GC_OP_TABLE_FILTER"
  if [ "${GPU_CHECK_SANITIZER:-$([ "$GC_DEVICE" = cpu ] && echo 0 || echo 1)}" = 1 ]; then
    step sanitizer bash "$self" _sanitizer
  else
    skip_step sanitizer "GPU_CHECK_SANITIZER=0"
  fi
  step tests_ops bash "$self" _gtest ops test_cuda_ops
  step tests_encoder bash "$self" _gtest encoder test_cuda_encoder

  # ---- b. the inputs, made here (~800 MB of weights: never carried) -------------
  step data bash "$self" _data

  # ---- c. the MFU denominator, and the seed's training case ----------------------
  step train_torch "$GC_PY" "$GC_TRAIN_BENCH/seed_train.py" --dir "$GC_WORK/train" --loop first,fixed \
    --device "$GC_DEVICE" --steps "$GC_TRAIN_STEPS" --out "$GC_WORK/train-{loop}.json" \
    --matmul-n "${GPU_CHECK_MATMUL_N:-8192}" --matmul-out "$GC_WORK/matmul.json"
  step train_stoke bash "$self" _train_stoke
  step train_report "$GC_PY" "$GC_TRAIN_BENCH/train_report.py" "$GC_WORK" "$GC_WORK/train.json"
  step train_contrastive bash "$self" _train_contrastive

  # ---- d. embedding: the peer at its best batch size, then stoke --------------------
  step st "$GC_PY" "$GC_BENCH/st_baseline.py" --model "$GC_WORK/model" --texts "$GC_WORK/texts.jsonl" \
    --device "$GC_DEVICE" --precision "$GC_PRECISION" --sweep "${GPU_CHECK_ST_SWEEP:-32,64,128,256,512}" \
    --sweep-texts "${GPU_CHECK_ST_SWEEP_TEXTS:-4000}" --warmup "${GPU_CHECK_WARMUP:-1000}" \
    --stats "$GC_WORK/texts-stats.json" --sample-rows "$GC_WORK/rows.json" --sample-out "$GC_WORK/st-sample.npy" \
    --out "$GC_WORK/st.json"
  step stoke bash "$self" _stoke
  # shellcheck disable=SC2086  # GPU_CHECK_COMPARE_ARGS is a list of flags
  step compare "$GC_PY" "$GC_BENCH/compare.py" --rows "$GC_WORK/rows.json" --st "$GC_WORK/st-sample.npy" \
    --stoke "$GC_WORK/stoke-out" ${GPU_CHECK_COMPARE_ARGS:-} --out "$GC_WORK/compare.json"
  step profile bash "$self" _profile

  # ---- e. the table, last ---------------------------------------------------------
  say "all steps done in $(since "$GC_T0")s"
  echo
  report_now --print
  # The work folder holds the models (~800 MB) and stoke's vectors; only $OUT comes back.
  # The exit status says whether every step ran cleanly (the table says how well).
  local status=0
  awk -F'\t' '{ st[$1] = $2 } END { for (k in st) if (st[k] != "ok") exit 1 }' "$GC_WORK/steps.tsv" || status=1
  if [ "${GPU_CHECK_KEEP:-0}" = 1 ]; then say "kept $GC_WORK"; else rm -rf "$GC_WORK"; fi
  return "$status"
}

# _setup: the carried folder (unpacked), CUDA's libraries, the card. What
# later steps need goes to setup.env (this runs as its own process).
setup_step() {
  local prepared_rev=none cublas binlib
  if [ -d "$GC_GPU" ]; then
    if [ -n "$(find "$GC_GPU" -name '*.xz' -print -quit)" ]; then
      "$GC_PY" "$GC_BENCH/pack.py" unpack "$GC_GPU" || say "unpacking $GC_GPU failed"
    fi
    chmod +x "$GC_GPU"/bin/* 2>/dev/null || true
    if [ -f "$GC_GPU/PREPARED" ]; then
      sed 's/^/  prepared: /' "$GC_GPU/PREPARED"
      prepared_rev="$(sed -n 's/^rev=\([^ ]*\).*/\1/p' "$GC_GPU/PREPARED")"
    fi
  else
    say "no $GC_GPU (scripts/gpu-check.sh prepare makes it): no carried binaries"
  fi
  cublas="$(find_lib_dir libcublasLt.so.13 || true)"
  if [ -n "$cublas" ]; then say "libcublasLt.so.13 in $cublas"; else say "libcublasLt.so.13 NOT FOUND (CUDA toolkit, ldconfig, pip nvidia packages)"; fi
  # Only stoke and the tests get .gpu/lib: python must keep its own libcrypto, libgomp.
  binlib="$GC_GPU/lib${cublas:+:$cublas}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  printf 'GC_BINLIB=%q\n' "$binlib" >"$GC_WORK/setup.env"
  say "libcuda.so.1: $(ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" { print $NF; exit }' || true) (loader cache; LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
  say "device glibc: $(ldd --version 2>/dev/null | head -n 1)"
  if [ -x "$GC_STOKE" ]; then
    local missing
    missing="$(LD_LIBRARY_PATH="$binlib" ldd "$GC_STOKE" 2>&1 | grep -E 'not found|version .* not found' || true)"
    [ -n "$missing" ] && say "stoke cannot load: $missing"
  fi
  if command -v nvidia-smi >/dev/null; then
    timeout 15 nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,utilization.gpu,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm \
      --format=csv,noheader 2>&1 | sed 's/^/  nvidia-smi: /' || true
  else
    say "no nvidia-smi"
  fi
  "$GC_PY" "$GC_BENCH/collect.py" env "$GC_WORK/env.json" "device=$GC_DEVICE" "precision=$GC_PRECISION" \
    "texts=$GC_TEXTS" "prepared_rev=$prepared_rev" "cublas_dir=$cublas"
}

# _gtest NAME BINARY [FILTER]: one gtest binary against the carried fixtures;
# its output is appended to $OUT/tests.log, its counts go to tests-NAME.json.
gtest_step() {
  local name=$1 b=$2 filter=${3:-} exe="$GC_GPU/bin/$2" rc=0
  local log="$GC_WORK/$name.log" json="$GC_WORK/gtest-$name.json"
  if [ ! -x "$exe" ]; then
    echo "no $exe (scripts/gpu-check.sh prepare builds it)"
    exit 127
  fi
  echo "===== $b ${filter:+--gtest_filter=$filter }$(date -u +%H:%M:%S)" >"$log"
  set +e
  STOKE_FIXTURES="$GC_FIX" STOKE_SOURCE_DIR="${GC_SRC:-$PWD}" STOKE_BIN="$GC_GPU/bin/stoke" LD_LIBRARY_PATH="$GC_BINLIB" \
    "$exe" --gtest_brief=1 \
    ${filter:+"--gtest_filter=$filter"} --gtest_output="json:$json" >>"$log" 2>&1
  rc=$?
  set -e
  out_append tests.log "$log" || true
  "$GC_PY" "$GC_BENCH/collect.py" gtest "$b" "$json" "$log" "$rc" "$GC_WORK/tests-$name.json" || true
  grep -E '^\[  FAILED  \]|Failure$|error' "$log" | head -n 12 || true
  # On the GPU every test skipped means the device was not usable: not a pass.
  if [ "$rc" = 0 ] && [ "$GC_DEVICE" != cpu ] && ! grep -q '\[  PASSED  \] [1-9]' "$log"; then exit 3; fi
  exit "$rc"
}

# _sanitizer: compute-sanitizer, each tool under its own timeout inside the
# step's cap. First a probe of seconds (a tiny case under memcheck): where
# the runtime refuses the device (gVisor: "Device not supported", KINDS.md)
# or the probe gives no ERROR SUMMARY, the step is skipped with the reason at
# once. Then memcheck, then racecheck on the few flash cases. collect.py
# counts each tool's errors and says "cut at Ns" for a tool that ran out of time.
sanitizer_step() {
  local exe="$GC_GPU/bin/test_op_table" cs c
  cs="$(command -v compute-sanitizer || true)"
  for c in /usr/local/cuda*/bin/compute-sanitizer; do [ -z "$cs" ] && [ -x "$c" ] && cs=$c; done
  [ -n "$cs" ] || {
    echo "no compute-sanitizer"
    exit 127
  }
  [ -x "$exe" ] || {
    echo "no $exe"
    exit 127
  }
  local -a results=()
  # san NAME TOOL LIMIT FILTER CASES: one compute-sanitizer run; appends "NAME RC LIMIT LOG" to results.
  san() {
    local name=$1 tool=$2 limit=$3 filter=$4 cases=$5 log="$GC_WORK/sanitizer-$1.log" rc=0
    limit="$(calc "$limit * $GC_SCALE")"
    echo "===== compute-sanitizer --tool $tool test_op_table --gtest_filter=$filter${cases:+ STOKE_OP_TABLE_CASES=$cases} (limit $(pretty "$limit")s) $(date -u +%H:%M:%S)" >"$log"
    set +e
    STOKE_FIXTURES="$GC_FIX" STOKE_OP_TABLE_CASES="$cases" LD_LIBRARY_PATH="$GC_BINLIB" timeout -k 0.5 "$limit" "$cs" \
      --tool "$tool" --error-exitcode 99 "$exe" --gtest_filter="$filter" >>"$log" 2>&1
    rc=$?
    set -e
    out_append tests.log "$log" || true
    results+=("$name" "$rc" "$(pretty "$limit")" "$log")
    echo "compute-sanitizer $tool ($name): rc $rc, $(grep -c '^\[       OK \]' "$log" || true) tests passed, $(grep -o 'ERROR SUMMARY: [0-9]* error' "$log" | tail -n 1 || true)"
  }
  san probe memcheck "$GC_SAN_PROBE_S" "$GC_PROBE_FILTER" "$GC_PROBE_CASES"
  local reason=""
  if grep -q 'Device not supported' "$GC_WORK/sanitizer-probe.log"; then
    reason="compute-sanitizer refused the device (\"Device not supported\") in the probe"
  elif [ "${results[1]}" = 124 ] || [ "${results[1]}" = 137 ]; then
    reason="compute-sanitizer's probe did not finish in ${results[2]} s"
  elif ! grep -q 'ERROR SUMMARY' "$GC_WORK/sanitizer-probe.log"; then
    reason="compute-sanitizer's probe gave no ERROR SUMMARY (rc ${results[1]}): $(grep -v '^[[:space:]]*$' "$GC_WORK/sanitizer-probe.log" | tail -n 1 | cut -c1-100)"
  fi
  if [ -z "$reason" ]; then
    san memcheck memcheck "$GC_SAN_MEMCHECK_S" "$GC_MEMCHECK_FILTER" "$GC_MEMCHECK_CASES"
    san racecheck racecheck "$GC_SAN_RACECHECK_S" "$GC_RACECHECK_FILTER" "$GC_RACECHECK_CASES"
  fi
  # exit: 0 clean, 1 errors or failures, 4 skipped (reason printed as "skip: ..."), 5 a tool was cut
  "$GC_PY" "$GC_BENCH/collect.py" sanitizer "$GC_WORK/tests-sanitizer.json" "$reason" "${results[@]}"
}

# _data: the benchmark's inputs, three numpy processes side by side: the
# random embedding model, the texts (token counts from prepare's
# corpus-lens.json), the training case's classifier and records.
data_step() {
  local layers hidden heads inter tl th tn ti rc=0 lens=()
  IFS=, read -r layers hidden heads inter <<<"${GPU_CHECK_MODEL:-12,768,12,3072}"
  IFS=, read -r tl th tn ti <<<"${GPU_CHECK_TRAIN_MODEL:-12,768,12,3072}"
  [ -f "$GC_GPU/data/corpus-lens.json" ] && lens=(--lens "$GC_GPU/data/corpus-lens.json")
  "$GC_PY" "$GC_BENCH/make_model.py" --fixtures "$GC_FIX" --out "$GC_WORK/model" \
    --layers "$layers" --hidden "$hidden" --heads "$heads" --intermediate "$inter" \
    --max-seq-length "${GPU_CHECK_MAX_LENGTH:-512}" --info "$GC_WORK/model.json" >"$GC_WORK/data-model.log" 2>&1 &
  local p1=$!
  "$GC_PY" "$GC_BENCH/make_texts.py" "$GC_FIX/corpus/fortunes-multilingual.jsonl" "$GC_TEXTS" "$GC_WORK/texts.jsonl" \
    "${GPU_CHECK_COMPARE_ROWS:-1000}" "$GC_WORK/rows.json" "${lens[@]}" --max-length "${GPU_CHECK_MAX_LENGTH:-512}" \
    --stats "$GC_WORK/texts-stats.json" >"$GC_WORK/data-texts.log" 2>&1 &
  local p2=$!
  "$GC_PY" "$GC_TRAIN_BENCH/make_classifier.py" --fixtures "$GC_FIX" --out "$GC_WORK/train" \
    --layers "$tl" --hidden "$th" --heads "$tn" --intermediate "$ti" --records "${GPU_CHECK_TRAIN_RECORDS:-16384}" \
    >"$GC_WORK/data-train.log" 2>&1 &
  local p3=$!
  wait "$p1" || rc=$?
  wait "$p2" || rc=$?
  wait "$p3" || rc=$?
  cat "$GC_WORK/data-model.log" "$GC_WORK/data-texts.log" "$GC_WORK/data-train.log"
  exit "$rc"
}

# _train_stoke: (c) of the training case, `stoke train` on (b)'s data, batch
# and learning rate (constant schedule, no clipping, torch AdamW's default
# weight decay 0.01 on every tensor, no length grouping), nvidia-smi beside it.
train_stoke_step() {
  local outd="$GC_WORK/train-stoke" smi_pid="" rc=0
  [ -x "$GC_STOKE" ] || {
    echo "no stoke binary at $GC_STOKE"
    exit 127
  }
  if [ "$GC_DEVICE" != cpu ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi -i "${GPU_CHECK_GPU_INDEX:-0}" --query-gpu=utilization.gpu,memory.used,power.draw \
      --format=csv,noheader,nounits -lms 100 >"$GC_WORK/train-stoke-smi.csv" 2>/dev/null &
    smi_pid=$!
    # shellcheck disable=SC2064  # the pid is known now
    trap "kill $smi_pid 2>/dev/null || true" EXIT
  fi
  set +e
  LD_LIBRARY_PATH="$GC_BINLIB" "$GC_STOKE" train --model "$GC_WORK/train/model" --train "$GC_WORK/train/train.jsonl" \
    --label-field label --output "$outd" --overwrite --device "$GC_DEVICE" \
    --precision "${GPU_CHECK_TRAIN_PRECISION:-$([ "$GC_DEVICE" = cpu ] && echo f32 || echo bf16)}" \
    --batch-size 64 --lr 8e-5 --schedule constant --warmup-steps 0 --max-grad-norm 0 --weight-decay 0.01 \
    --decay-all --no-group-by-length --max-length 64 --max-steps "$GC_TRAIN_STEPS" \
    --log-every "${GPU_CHECK_TRAIN_LOG_EVERY:-25}" --save-every 0 --seed 0 --quiet 2>&1 | tail -n 20
  rc=${PIPESTATUS[0]}
  set -e
  exit "$rc"
}

# _train_contrastive: an embedding model's training on the card (issue 34):
# mnrl with in-batch negatives at batch 256, the step's 512 texts embedded as
# GradCache mini-batches of at most 8,192 tokens, bf16, 30 steps; its
# run.json (samples/s as the user waits, mini-batches per step, host syncs)
# goes to the work folder. Pairs: halves of (b)'s texts.
train_contrastive_step() {
  local outd="$GC_WORK/train-contrastive" rc=0
  [ -x "$GC_STOKE" ] || {
    echo "no stoke binary at $GC_STOKE"
    exit 127
  }
  "$GC_PY" - "$GC_WORK/texts.jsonl" "$GC_WORK/pairs.jsonl" <<'PY'
import json, sys
n = 0
with open(sys.argv[1], encoding="utf-8") as f, open(sys.argv[2], "w", encoding="utf-8") as out:
    for line in f:
        w = json.loads(line)["text"].split()
        if len(w) < 12:
            continue
        out.write(json.dumps({"anchor": " ".join(w[: len(w) // 2]), "positive": " ".join(w[len(w) // 2 :])}) + "\n")
        n += 1
        if n == 8192:
            break
PY
  set +e
  LD_LIBRARY_PATH="$GC_BINLIB" "$GC_STOKE" train --objective mnrl --model "$GC_WORK/train/model" \
    --train "$GC_WORK/pairs.jsonl" --output "$outd" --overwrite --device "$GC_DEVICE" \
    --precision "${GPU_CHECK_TRAIN_PRECISION:-$([ "$GC_DEVICE" = cpu ] && echo f32 || echo bf16)}" \
    --batch-size 256 --mini-batch-tokens 8192 --max-length 64 --max-steps "${GPU_CHECK_CONTRASTIVE_STEPS:-30}" \
    --lr 5e-5 --log-every 10 --save-every 0 --seed 0 --quiet 2>&1 | tail -n 20
  rc=${PIPESTATUS[0]}
  set -e
  [ -f "$outd/run.json" ] && cp "$outd/run.json" "$GC_WORK/train-contrastive.json" &&
    "$GC_PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("contrastive:", r["throughput"]["samples_per_s"], "samples/s;", r["mini_batch"], "; host syncs", r["host_syncs"])' "$outd/run.json"
  exit "$rc"
}

# _stoke: one timed `stoke embed` process, nvidia-smi sampling beside it
# (into the work folder: util.json takes its numbers to summary.json).
stoke_step() {
  local outd="$GC_WORK/stoke-out" log="$GC_WORK/stoke.log" rc=0 smi_pid="" t0 wall
  [ -x "$GC_STOKE" ] || {
    echo "no stoke binary at $GC_STOKE"
    exit 127
  }
  if [ "$GC_DEVICE" != cpu ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi -i "${GPU_CHECK_GPU_INDEX:-0}" --query-gpu=utilization.gpu,memory.used,power.draw \
      --format=csv,noheader,nounits -lms 100 >"$GC_WORK/smi.csv" 2>/dev/null &
    smi_pid=$!
    # shellcheck disable=SC2064  # the pid is known now
    trap "kill $smi_pid 2>/dev/null || true" EXIT
  fi
  t0=$(now)
  # shellcheck disable=SC2086  # GPU_CHECK_STOKE_FLAGS is a list of flags
  LD_LIBRARY_PATH="$GC_BINLIB" "$GC_STOKE" embed --model "$GC_WORK/model" --input "$GC_WORK/texts.jsonl" \
    --output "$outd" --device "$GC_DEVICE" --precision "$GC_PRECISION" --overwrite --id-field id \
    --batch-tokens "${GPU_CHECK_BATCH_TOKENS:-32768}" --workers "${GPU_CHECK_WORKERS:-12}" \
    ${GPU_CHECK_STOKE_FLAGS---max-batch-size 1024} >"$log" 2>&1 || rc=$?
  wall=$(since "$t0")
  if [ -n "$smi_pid" ]; then
    kill "$smi_pid" 2>/dev/null || true
    wait "$smi_pid" 2>/dev/null || true
  fi
  out_put stoke.log "$log" || true
  "$GC_PY" "$GC_BENCH/collect.py" stoke "$outd/manifest.json" "$wall" "$rc" "$GC_WORK/stoke.json" || true
  "$GC_PY" "$GC_BENCH/collect.py" smi "$GC_WORK/smi.csv" "$GC_WORK/util.json" || true
  # stoke's own summary (incl. any `gpu:` line); progress-bar redraws folded
  tr '\r' '\n' <"$log" | grep -v '^[[:space:]]*$' | tail -n 12 | sed 's/^/  stoke: /' || true
  exit "$rc"
}

# _profile: `stoke embed --trace` on the first GPU_CHECK_PROFILE_TEXTS texts;
# the device spans (one per op) summed by op name into profile.json.
profile_step() {
  local outd="$GC_WORK/profile-out" n="${GPU_CHECK_PROFILE_TEXTS:-10000}" rc=0
  [ -x "$GC_STOKE" ] || {
    echo "no stoke binary at $GC_STOKE"
    exit 127
  }
  head -n "$n" "$GC_WORK/texts.jsonl" >"$GC_WORK/profile-texts.jsonl"
  # shellcheck disable=SC2086  # GPU_CHECK_STOKE_FLAGS is a list of flags
  LD_LIBRARY_PATH="$GC_BINLIB" "$GC_STOKE" embed --model "$GC_WORK/model" --input "$GC_WORK/profile-texts.jsonl" \
    --output "$outd" --device "$GC_DEVICE" --precision "$GC_PRECISION" --overwrite --id-field id --quiet \
    --batch-tokens "${GPU_CHECK_BATCH_TOKENS:-32768}" --workers "${GPU_CHECK_WORKERS:-12}" \
    --trace "$GC_WORK/trace.json" ${GPU_CHECK_STOKE_FLAGS---max-batch-size 1024} >"$GC_WORK/profile.log" 2>&1 || rc=$?
  tail -n 3 "$GC_WORK/profile.log" | sed 's/^/  stoke --trace: /' || true
  [ "$rc" = 0 ] || exit "$rc"
  "$GC_PY" "$GC_BENCH/op_breakdown.py" "$GC_WORK/trace.json" "$GC_WORK/profile.json"
}

# _plan: the plan as lines selftest reads (the numbers are defined once, above).
print_plan() {
  echo "timeout_s $GC_TIMEOUT_S"
  echo "deadline_s $GC_DEADLINE_S"
  echo "report_s $GC_REPORT_S"
  echo "min_step_s $GC_MIN_STEP_S"
  echo "sanitizer_s $GC_SAN_PROBE_S $GC_SAN_MEMCHECK_S $GC_SAN_RACECHECK_S"
  echo "out_files ${GC_OUT_FILES[*]}"
  echo "call $(call_line)"
  plan_rows | sed 's/^/step /'
}

# ============================================================================
# selftest (here, CPU only)
# ============================================================================

selftest() {
  local root t0 main_wt
  t0=$(now)
  root="$(cd "$here/.." && pwd)"
  cd "$root"
  main_wt="$(git worktree list --porcelain 2>/dev/null | awk '/^worktree / { print $2; exit }')"
  local py c
  py="$(find_py 'sentence_transformers, torch, numpy')" ||
    die "selftest: no python with torch + sentence-transformers + numpy (set PY; bench/embed_cpu/run.sh makes .venv-bench-st)"
  local stoke="${STOKE_BIN:-}"
  if [ -z "$stoke" ]; then
    for c in "$root/build/release/apps/stoke/stoke" "$main_wt/build/release/apps/stoke/stoke"; do
      if [ -x "$c" ]; then stoke="$c" && break; fi
    done
  fi
  local fixtures="${STOKE_FIXTURES:-$root/../shared/fixtures}"
  [ -d "$fixtures/models/tiny-bert" ] || fixtures="$main_wt/../shared/fixtures"
  [ -d "$fixtures/models/tiny-bert" ] || die "selftest: no fixtures (set STOKE_FIXTURES)"
  local tmp
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-selftest.XXXXXX")"
  say "selftest: python $py; stoke ${stoke:-none (the stoke steps will be missing)}; fixtures $fixtures; in $tmp"
  local B="$bench" T="$bench/../train_gpu" corpus="$fixtures/corpus/fortunes-multilingual.jsonl"

  say "selftest 1/9: the plan: files in \$OUT, caps < deadline < timeout - 30 s, the call line in the docs"
  bash "$self" _plan >"$tmp/plan.txt"
  "$py" - "$tmp/plan.txt" "$self" "$root" <<'EOF'
import re, sys
plan, script, root = sys.argv[1], sys.argv[2], sys.argv[3]
v, steps = {}, []
for line in open(plan):
    k, _, rest = line.rstrip("\n").partition(" ")
    if k == "step":
        f = rest.split(None, 3)
        steps.append((f[0], float(f[1]), float(f[2]), f[3]))
    else:
        v[k] = rest
timeout, deadline, reserve = float(v["timeout_s"]), float(v["deadline_s"]), float(v["report_s"])
files = v["out_files"].split()
caps = sum(s[1] for s in steps)
print(f"plan: {len(steps)} steps, caps sum {caps:g} s, deadline {deadline:g} s, timeout_s {timeout:g}; "
      f"$OUT files ({len(files)}): {' '.join(files)}")
# (a) what a GPU run can write to $OUT: the declared list, smi.csv and all, within the tool's 8 files
assert 0 < len(files) <= 8 and len(set(files)) == len(files), files
assert files[0] == "summary.md", files
assert all(re.fullmatch(r"[A-Za-z0-9._-]+", f) for f in files), files
# every step capped; the caps leave the reserve before the deadline; the deadline fits the timeout with room
assert all(s[1] > 0 and s[2] > 0 for s in steps), steps
assert caps + reserve < deadline < timeout - 30, (caps, reserve, deadline, timeout)
assert deadline + reserve <= 360, "the whole call must take at most 6 minutes of command time"
assert sum(s[2] for s in steps) < caps, "estimates over the caps"
probe, memcheck, racecheck = map(float, v["sanitizer_s"].split())
san = [s for s in steps if s[0] == "sanitizer"][0]
# the three tools, their 0.5 s kill graces, collect.py, and the step's own 2 s grace fit its cap
assert probe + memcheck + racecheck + 3 * 0.5 + 1 + 2 <= san[1], (probe, memcheck, racecheck, san)
assert 10 <= probe <= 15, probe
# the header and the docs quote the same call and numbers
call = v["call"]
assert f"timeout_s={timeout:g})" in call, call
head = open(script).read().split("\nset -euo pipefail", 1)[0]
assert call in head, "the header's call line is not the plan's"
assert f"caps sum to {caps:g} s" in " ".join(head.replace("#", " ").split()), "the header's cap sum is not the plan's"
assert f"deadline of {deadline:g} s" in " ".join(head.replace("#", " ").split()), "the header's deadline is not the plan's"
# bench/embed_gpu/README.md's step table is the plan's
rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+) \|", open(f"{root}/bench/embed_gpu/README.md", encoding="utf-8").read(), re.M)
assert [(k, float(c), float(e)) for k, c, e in rows] == [s[:3] for s in steps], ("README's step table", rows)
for doc in ("bench/embed_gpu/README.md", "bench/train_gpu/README.md", "docs/performance.md"):
    text = open(f"{root}/{doc}", encoding="utf-8").read()
    assert call in text, f"{doc} does not quote the call {call}"
    assert not re.search(r"timeout_s=(?!%d\))\d+" % timeout, text), f"{doc} quotes another timeout_s"
EOF
  GC_OUT="$tmp/o" bash "$self" _out_path summary.md >/dev/null || die "selftest: out_path refused summary.md"
  if GC_OUT="$tmp/o" bash "$self" _out_path smi.csv 2>/dev/null; then die "selftest: out_path let smi.csv into \$OUT"; fi
  grep -qF 'is not in GC_OUT_FILES' <<<"$(GC_OUT="$tmp/o" bash "$self" _out_path smi.csv 2>&1 || true)" ||
    die "selftest: out_path's refusal does not say why"

  say "selftest 2/9: prepare --no-build on stand-in binaries: the size, the margin, the call line last"
  mkdir -p "$tmp/fakebuild/tests"
  for c in stoke test_cuda_ops test_op_table test_cuda_encoder; do cp /bin/true "$tmp/fakebuild/tests/$c"; done
  GPU_CHECK_BUILD_DIR="$tmp/fakebuild" GPU_CHECK_PREPARE_DIR="$tmp/prep" STOKE_FIXTURES="$fixtures" PY="$py" \
    bash "$self" prepare --no-build >"$tmp/prepare.log" 2>&1 || {
    cat "$tmp/prepare.log"
    die "selftest: prepare --no-build failed"
  }
  [ "$(tail -n 1 "$tmp/prepare.log" | sed 's/^ *//')" = "$(bash "$self" _call_line)" ] || {
    tail -n 5 "$tmp/prepare.log"
    die "selftest: prepare's last line is not the call"
  }
  grep -E '^gpu-check: travels: working tree [0-9.]+ MiB \+ \.gpu [0-9.]+ MiB = [0-9.]+ MiB; margin [0-9.]+ MiB under 64 MiB$' \
    "$tmp/prepare.log" >/dev/null || die "selftest: prepare does not print the size and margin"
  for c in data/corpus-lens.json bin/stoke gpu-check.sh bench/embed_gpu/report.py bench/train_gpu/seed_train.py PREPARED; do
    # pack.py may have packed a folder into <folder>/<folder>.tar.xz to fit (setup unpacks it)
    [ -e "$tmp/prep/$c" ] || [ -e "$tmp/prep/${c%%/*}/${c%%/*}.tar.xz" ] || die "selftest: prepare left no $c in .gpu"
  done
  bash "$self" _size_verdict $((30 * 1048576)) $((29 * 1048576)) >/dev/null || die "selftest: a 5 MiB margin was refused"
  if bash "$self" _size_verdict $((30 * 1048576)) $((31 * 1048576)) >/dev/null 2>&1; then
    die "selftest: a 3 MiB margin was accepted"
  fi

  say "selftest 3/9: pack.py round trip"
  mkdir -p "$tmp/pack/lib" "$tmp/pack/fixtures"
  "$py" -c 'print("stoke\n" * 500000)' >"$tmp/pack/lib/libbig.so.1" # compressible, 3 MB
  chmod 644 "$tmp/pack/lib/libbig.so.1"
  cp "$corpus" "$tmp/pack/fixtures/"
  echo small >"$tmp/pack/small.txt"
  cp -r "$tmp/pack" "$tmp/pack.orig"
  "$py" "$B/pack.py" pack "$tmp/pack" 4000000
  [ -f "$tmp/pack/fixtures/fortunes-multilingual.jsonl.xz" ] || die "selftest: pack did not compress the corpus"
  [ "$("$py" "$B/pack.py" size "$tmp/pack")" -le 4000000 ] || die "selftest: pack left it over budget"
  "$py" "$B/pack.py" unpack "$tmp/pack"
  diff -r "$tmp/pack" "$tmp/pack.orig" || die "selftest: pack/unpack changed the files"
  [ -x "$tmp/pack/lib/libbig.so.1" ] || die "selftest: unpack lost the executable bit under lib/"

  say "selftest 4/9: gtest, nvidia-smi and compute-sanitizer readers on made-up output"
  cat >"$tmp/gtest.json" <<'EOF'
{"tests": 4, "failures": 1, "disabled": 1, "testsuites": [
 {"name": "CudaOps", "testsuite": [
  {"name": "Gemm", "status": "RUN", "result": "COMPLETED"},
  {"name": "LayerNorm", "status": "RUN", "result": "COMPLETED", "failures": [{"failure": "x", "type": ""}]},
  {"name": "Softmax", "status": "RUN", "result": "SKIPPED"},
  {"name": "DISABLED_Old", "status": "NOTRUN", "result": "SUPPRESSED"},
  {"name": "Gelu", "status": "RUN", "result": "COMPLETED"}]}]}
EOF
  printf 'tests/cuda/test_cuda_ops.cc:12: Skipped\nno CUDA device: no GPU\n[  FAILED  ] CudaOps.LayerNorm (3 ms)\n' >"$tmp/gtest.log"
  "$py" "$B/collect.py" gtest test_cuda_ops "$tmp/gtest.json" "$tmp/gtest.log" 1 "$tmp/g1.json"
  "$py" "$B/collect.py" gtest test_cuda_ops "$tmp/none.json" "$tmp/gtest.log" 134 "$tmp/g2.json"
  printf '0, 500, 80.1\n0, 900, 81.0\n97, 20000, 500.5\n100, 21000, 610.0\n[N/A], 1, 1\n99, 21000, 600.0\n0, 21000, 90.0\n' >"$tmp/smi.csv"
  "$py" "$B/collect.py" smi "$tmp/smi.csv" "$tmp/u.json"
  # compute-sanitizer: a clean run, a cut run, a run with errors, a refused device
  printf '[==========] Running 9 tests from 1 test suite.\n[ RUN      ] A.a\n[       OK ] A.a (1 ms)\n[ RUN      ] A.b\n[       OK ] A.b (1 ms)\n========= ERROR SUMMARY: 0 errors\n' >"$tmp/san-clean.log"
  printf '[==========] Running 9 tests from 1 test suite.\n[ RUN      ] A.a\n[       OK ] A.a (1 ms)\n[ RUN      ] A.b\n' >"$tmp/san-cut.log"
  printf '[==========] Running 2 tests from 1 test suite.\n========= Error: Race reported between Write access at f+0x10\n========= Error: Race reported between Read access at f+0x20\n[       OK ] A.a (1 ms)\n[       OK ] A.b (1 ms)\n========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)\n========= ERROR SUMMARY: 2 errors\n' >"$tmp/san-err.log"
  printf '========= Error: Device not supported\n========= Error: Target application returned an error\n' >"$tmp/san-refused.log"
  local src=0
  "$py" "$B/collect.py" sanitizer "$tmp/s1.json" "" probe 0 12 "$tmp/san-clean.log" memcheck 0 12 "$tmp/san-clean.log" \
    racecheck 124 8 "$tmp/san-cut.log" >"$tmp/s1.out" || src=$?
  if [ "$src" != 5 ] || ! grep -q '^partial: racecheck cut at 8s' "$tmp/s1.out"; then
    die "selftest: a cut racecheck is not reported as cut ($src)"
  fi
  src=0
  "$py" "$B/collect.py" sanitizer "$tmp/s2.json" "" probe 0 12 "$tmp/san-clean.log" memcheck 0 12 "$tmp/san-clean.log" \
    racecheck 99 8 "$tmp/san-err.log" >/dev/null || src=$?
  [ "$src" = 1 ] || die "selftest: racecheck errors did not fail the step ($src)"
  src=0
  "$py" "$B/collect.py" sanitizer "$tmp/s3.json" 'compute-sanitizer refused the device ("Device not supported") in the probe' \
    probe 1 12 "$tmp/san-refused.log" >"$tmp/s3.out" || src=$?
  if [ "$src" != 4 ] || ! grep -q '^skip: compute-sanitizer refused the device' "$tmp/s3.out"; then
    die "selftest: a refused device is not a skip ($src)"
  fi
  "$py" - "$tmp" <<'EOF'
import json, sys
t = sys.argv[1]
g = json.load(open(t + "/g1.json"))
assert (g["passed"], g["failed"], g["skipped"]) == (2, 1, 1), g
assert g["failed_tests"] == ["CudaOps.LayerNorm"] and g["skip_reason"] == "no CUDA device: no GPU", g
g = json.load(open(t + "/g2.json"))  # no JSON (a crash): counts from the text
assert g["source"] == "none" and g["failed_tests"] == ["CudaOps.LayerNorm"], g
u = json.load(open(t + "/u.json"))
assert u["samples"] == 6 and abs(u["util_mean_busy"] - 98.667) < 0.01 and abs(u["util_mean_whole"] - 49.333) < 0.01, u
assert u["mem_max_mib"] == 21000 and len(u["series"]) >= 1, u
s = json.load(open(t + "/s1.json"))
m, r = s["tools"]["memcheck"], s["tools"]["racecheck"]
assert m["errors"] == 0 and m["tests_done"] == 2 and not m["cut"], m
assert r["cut"] and r["errors"] is None and r["tests_done"] == 1 and r["tests_total"] == 9, r
assert r["summary"] == "cut at 8s after 1 of 9 tests, 0 errors seen before the cut", r["summary"]
s = json.load(open(t + "/s2.json"))
assert s["tools"]["racecheck"]["errors"] == 2 and s["errors"] == 2, s
s = json.load(open(t + "/s3.json"))
assert s["skipped"].startswith("compute-sanitizer refused") and "memcheck" not in s["tools"], s
EOF

  # The steps' bash side with stand-ins: a compute-sanitizer that refuses the device, one whose
  # racecheck outlives its limit, and a gtest binary; what the steps leave in $OUT and the work folder.
  mkdir -p "$tmp/st-bin" "$tmp/st-gpu/bin" "$tmp/st-work" "$tmp/st-out"
  cat >"$tmp/st-bin/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
# compute-sanitizer --tool TOOL --error-exitcode 99 EXE ARGS...
tool=$2
shift 4
if [ -n "${FAKE_CS_REFUSE:-}" ]; then echo "========= Error: Device not supported" && exit 1; fi
if [ -n "${FAKE_CS_HANG:-}" ]; then exec sleep 30; fi
echo "========= COMPUTE-SANITIZER"
FAKE_TOOL=$tool "$@" || exit $?
echo "========= ERROR SUMMARY: 0 errors"
EOF
  cat >"$tmp/st-gpu/bin/test_op_table" <<'EOF'
#!/usr/bin/env bash
echo "[==========] Running 9 tests from 1 test suite."
echo "[ RUN      ] EveryOp/OpTable.MatchesReference/cuda_attention"
echo "[       OK ] EveryOp/OpTable.MatchesReference/cuda_attention (3 ms)"
if [ "${FAKE_TOOL:-}" = racecheck ]; then exec sleep 30; fi
EOF
  cat >"$tmp/st-gpu/bin/test_cuda_ops" <<'EOF'
#!/usr/bin/env bash
for a in "$@"; do case $a in --gtest_output=json:*) out=${a#--gtest_output=json:} ;; esac; done
printf '{"testsuites": [{"name": "CudaOps", "testsuite": [{"name": "Gemm", "status": "RUN", "result": "COMPLETED"}]}]}\n' >"$out"
echo "[==========] 1 test from 1 test suite ran. (5 ms total)"
echo "[  PASSED  ] 1 test."
EOF
  chmod +x "$tmp/st-bin/compute-sanitizer" "$tmp/st-gpu/bin/"*
  local st_env=(PATH="$tmp/st-bin:$PATH" GC_GPU="$tmp/st-gpu" GC_WORK="$tmp/st-work" GC_OUT="$tmp/st-out" GC_FIX="$fixtures"
    GC_BINLIB="" GC_PY="$py" GC_BENCH="$B" GC_DEVICE=cuda GC_SCALE=0.1)
  src=0
  env "${st_env[@]}" FAKE_CS_REFUSE=1 bash "$self" _sanitizer >"$tmp/st-refused.out" 2>&1 || src=$?
  if [ "$src" != 4 ] || ! grep -q '^skip: compute-sanitizer refused the device ("Device not supported") in the probe' "$tmp/st-refused.out"; then
    cat "$tmp/st-refused.out"
    die "selftest: a refusing compute-sanitizer did not skip the sanitizer step at once ($src)"
  fi
  [ ! -e "$tmp/st-work/sanitizer-memcheck.log" ] || die "selftest: memcheck ran after the probe was refused"
  src=0
  env "${st_env[@]}" FAKE_CS_HANG=1 bash "$self" _sanitizer >"$tmp/st-hang.out" 2>&1 || src=$?
  if [ "$src" != 4 ] || ! grep -q "^skip: compute-sanitizer's probe did not finish in 1 s" "$tmp/st-hang.out"; then
    cat "$tmp/st-hang.out"
    die "selftest: a hanging probe did not skip the sanitizer step after its limit ($src)"
  fi
  src=0
  env "${st_env[@]}" bash "$self" _sanitizer >"$tmp/st-cut.out" 2>&1 || src=$?
  if [ "$src" != 5 ] || ! grep -q '^partial: racecheck cut at 0.8s after 1 of 9 tests, 0 errors seen before the cut' "$tmp/st-cut.out" ||
    ! grep -q '^compute-sanitizer memcheck: 0 errors, 1 of 9 tests ran' "$tmp/st-cut.out"; then
    cat "$tmp/st-cut.out"
    die "selftest: the sanitizer step does not report memcheck's count and racecheck's cut ($src)"
  fi
  env "${st_env[@]}" bash "$self" _gtest ops test_cuda_ops >"$tmp/st-gtest.out" 2>&1 || die "selftest: _gtest on a passing stand-in failed"
  if ! grep -q 'test_cuda_ops: 1 passed, 0 failed' "$tmp/st-gtest.out" || ! grep -q 'PASSED  \] 1 test' "$tmp/st-out/tests.log" ||
    ! grep -q 'racecheck' "$tmp/st-out/tests.log"; then
    die "selftest: the steps' output did not reach tests.log"
  fi
  [ "$(ls "$tmp/st-out")" = tests.log ] || die "selftest: the test steps wrote more than tests.log to \$OUT: $(ls "$tmp/st-out")"

  say "selftest 5/9: host-side work at full size (each under 10 s on this machine); make_texts' records"
  local layers_full="12,768,12,3072"
  timed() { # timed LABEL CMD...: run CMD, fail the selftest when it takes 10 s or more here (LABEL "prepare: ...": not held to it)
    local label=$1 t s
    shift
    t=$(now)
    "$@" >"$tmp/timed.log" 2>&1 || {
      cat "$tmp/timed.log"
      die "selftest: $label failed"
    }
    s=$(since "$t")
    say "  $label: ${s}s"
    case $label in prepare:*) return 0 ;; esac
    fless "$s" 10 || die "selftest: $label took ${s}s here: over the 10 s budget for a step's CPU-side work"
  }
  timed "prepare: corpus token counts, 24,400 texts (here, not on the call's clock)" \
    "$py" "$B/corpus_lens.py" "$fixtures/models/tiny-bert" "$corpus" "$tmp/corpus-lens.json"
  timed "100,000 texts + rows + token stats (data)" "$py" "$B/make_texts.py" "$corpus" 100000 "$tmp/t100k.jsonl" 1000 \
    "$tmp/rows.json" --lens "$tmp/corpus-lens.json" --max-length 512 --stats "$tmp/t100k-stats.json"
  IFS=, read -r a1 a2 a3 a4 <<<"$layers_full"
  timed "random bert-base model, 350 MB (data)" "$py" "$B/make_model.py" --fixtures "$fixtures" --out "$tmp/big-model" \
    --layers "$a1" --hidden "$a2" --heads "$a3" --intermediate "$a4" --max-seq-length 512 --info "$tmp/big-model.json"
  timed "bert-base classifier + 16,384 records (data)" "$py" "$T/make_classifier.py" --fixtures "$fixtures" \
    --out "$tmp/big-train" --records 16384
  # A 100k-row stoke folder of random vectors (two shards), for compare.py's reading at full size.
  "$py" - "$tmp" <<'EOF'
import json, os, sys
import numpy as np
t = sys.argv[1]
d = t + "/big-stoke"
os.makedirs(d)
rng = np.random.default_rng(0)
shards = []
for k, (lo, hi) in enumerate(((0, 60000), (60000, 100000))):
    np.save(f"{d}/embeddings-{k:05d}.npy", rng.standard_normal((hi - lo, 768), dtype=np.float32))
    with open(f"{d}/ids-{k:05d}.jsonl", "w") as f:
        f.writelines(f"{i}\n" for i in range(lo, hi))
    shards.append({"embeddings": f"embeddings-{k:05d}.npy", "ids": f"ids-{k:05d}.jsonl"})
json.dump({"precision": "bf16", "shards": shards}, open(d + "/manifest.json", "w"))
rows = json.load(open(t + "/rows.json"))
np.save(t + "/big-st.npy", np.load(f"{d}/embeddings-00000.npy")[rows])
with open(t + "/big-smi.csv", "w") as f:  # 5 minutes of 100 ms samples
    f.writelines(f"{(i * 7) % 101}, {20000 + i}, {300 + i % 50}.5\n" for i in range(3000))
EOF
  timed "compare.py, 1,000 of 100,000 rows (compare)" "$py" "$B/compare.py" --rows "$tmp/rows.json" --st "$tmp/big-st.npy" \
    --stoke "$tmp/big-stoke" --min-mean-cos 0.9999999 --min-cos 0.9999999 --max-norm-err 1e-6 --out "$tmp/big-compare.json"
  timed "collect.py smi, 3,000 samples (stoke)" "$py" "$B/collect.py" smi "$tmp/big-smi.csv" "$tmp/big-util.json"
  "$py" - "$tmp" <<'EOF'
import json, sys
t = sys.argv[1]
recs = [json.loads(l) for l in open(t + "/t100k.jsonl", encoding="utf-8")]
assert len(recs) == 100000 and [r["id"] for r in recs] == list(range(100000))
assert recs[24400]["text"] == recs[0]["text"] and recs[48800 + 5]["text"] == recs[5]["text"]
rows = json.load(open(t + "/rows.json"))
assert len(rows) == 1000 and rows[0] == 0 and max(rows) < 24400, rows[-1]
lens = json.load(open(t + "/corpus-lens.json"))
assert len(lens["lens"]) == 24400 and min(lens["lens"]) >= 2, len(lens["lens"])
s = json.load(open(t + "/t100k-stats.json"))
L = lens["lens"]
want = sum(min(L[r % 24400], 512) for r in range(100000))
assert s["texts"] == 100000 and s["tokens"] == want and s["max_length"] == 512, s
m = json.load(open(t + "/big-model.json"))
assert m["non_embedding_params"] == 85054464 and m["layers"] == 12, m
EOF

  say "selftest 6/9: the whole 'run' on the CPU: tiny models, 500 texts, 6 training steps, f32 (no binaries: the test steps are 'missing')"
  mkdir -p "$tmp/fake-gpu/data"
  cp "$tmp/corpus-lens.json" "$tmp/fake-gpu/data/"
  local rc=0
  # The run on the CPU at tiny scale; caps x 4: this 2-core machine, shared with a build, is slower than the device's 16 cores.
  # shellcheck disable=SC2054  # the commas are in the values (layers,hidden,heads,FFN)
  local cpu_env=(GPU_CHECK_DIR="$tmp/fake-gpu" GPU_CHECK_FIXTURES="$fixtures" PY="$py" STOKE_BIN="${stoke:-$tmp/no-stoke}"
    GPU_CHECK_DEVICE=cpu GPU_CHECK_PRECISION=f32 GPU_CHECK_TEXTS=500 GPU_CHECK_MODEL=2,64,4,128
    GPU_CHECK_MATMUL_N=256 GPU_CHECK_WARMUP=50 GPU_CHECK_COMPARE_ROWS=200 GPU_CHECK_WORKERS=2
    GPU_CHECK_ST_SWEEP=16,64 GPU_CHECK_ST_SWEEP_TEXTS=100 GPU_CHECK_PROFILE_TEXTS=200
    GPU_CHECK_BATCH_TOKENS=4096 GPU_CHECK_COMPARE_ARGS="--min-mean-cos 0.99999 --min-cos 0.9999 --max-norm-err 1e-4"
    GPU_CHECK_TRAIN_MODEL=2,64,4,128 GPU_CHECK_TRAIN_STEPS=6 GPU_CHECK_TRAIN_RECORDS=512 GPU_CHECK_TRAIN_LOG_EVERY=2
    GPU_CHECK_CAP_SCALE=4)
  env "${cpu_env[@]}" OUT="$tmp/out" bash "$self" run >"$tmp/run.log" 2>&1 || rc=$?
  [ "$rc" = 1 ] || {
    tail -n 40 "$tmp/run.log"
    die "selftest: run should exit 1 (test binaries missing), got $rc"
  }
  bash "$self" _plan >"$tmp/plan.txt"
  "$py" - "$tmp/out" "${stoke:+yes}" "$tmp/plan.txt" <<'EOF' || {
import json, os, sys
out, have_stoke, plan = sys.argv[1], sys.argv[2] == "yes", sys.argv[3]
declared = [l.split()[1:] for l in open(plan) if l.startswith("out_files ")][0]
planned = [l.split()[1] for l in open(plan) if l.startswith("step ")]
files = sorted(os.listdir(out))
# (b) the run wrote only names from the declared list
assert set(files) <= set(declared), (files, declared)
assert {"summary.md", "summary.json", "run.log", "tests.log"} <= set(files), files
s = json.load(open(os.path.join(out, "summary.json")))
st = {x["step"]: x["status"] for x in s["steps"]}
assert [x["step"] for x in s["steps"]] == planned, (list(st), planned)
want_ok = ["setup", "data", "train_torch", "train_report", "st"] + (["train_stoke", "stoke", "compare", "profile"] if have_stoke else [])
assert all(st[k] == "ok" for k in want_ok), st
assert st["tests_table"] == st["tests_ops"] == st["tests_encoder"] == "missing", st
assert st["sanitizer"] == "skipped", st
assert s["st"]["texts"] == 500 and s["model"]["layers"] == 2 and s["matmul"]["tflops"] > 0
assert s["st"]["batch_size"] in (16, 64) and len(s["st"]["sweep"]) == 2, s["st"]
assert s["st"]["lens_source"].startswith("precomputed"), s["st"]["lens_source"]
md = open(os.path.join(out, "summary.md"), encoding="utf-8").read()
assert all(f"| {k} " in md for k in planned), md
if have_stoke:
    assert "stoke.log" in files, files
    assert s["stoke"]["texts"] == 500 and s["stoke"]["tokens"] == s["st"]["tokens"], (s["stoke"], s["st"]["tokens"])
    assert s["compare"]["pass"] and s["compare"]["mean_cos"] > 0.99999 and s["compare"]["rows"] == 200, s["compare"]
    assert s["derived"]["mfu_stoke"] > 0 and s["derived"]["ratio"] > 0
    assert s["stoke_manifest"]["counts"]["texts"] == 500, s["stoke_manifest"]
# The training case at tiny size: both PyTorch loops, stoke train (the CPU's), the report, in summary.json.
t = s["train"]
first, fixed = t["runs"]["first"], t["runs"]["fixed"]
assert first["host_syncs_per_step"] == 2 and first["batch_size"] == 16 and first["final_loss"] > 0, first
assert fixed["host_syncs_per_step"] < 1 and fixed["batch_size"] == 64 and fixed["final_loss"] > 0, fixed
assert first["mfu"] > 0 and fixed["mfu"] > 0, (first, fixed)
if have_stoke:
    sk = t["runs"]["stoke"]
    assert sk["steps"] == 6 and sk["final_loss"] > 0 and sk["samples_per_s"] > 0, sk
    assert t["stoke_over_fixed"] > 0 and len(t["loss_curve"]["intervals"]) == 3, t["loss_curve"]
print("selftest: the CPU run's summary.json checks out; $OUT:", ", ".join(files))
EOF
    tail -n 40 "$tmp/run.log"
    die "selftest: the CPU run's outputs do not check out"
  }

  say "selftest 7/9: every step forced past its cap (caps x 0.01), a deadline already past, a call killed mid-way"
  local force=(GPU_CHECK_FORCE_CAP=1 GPU_CHECK_SANITIZER=1)
  rc=0
  env "${cpu_env[@]}" "${force[@]}" OUT="$tmp/forced" GPU_CHECK_CAP_SCALE=0.01 GPU_CHECK_DEADLINE_S=300 \
    bash "$self" run >"$tmp/forced.log" 2>&1 || rc=$?
  [ "$rc" = 1 ] || die "selftest: the forced run should exit 1, got $rc"
  rc=0
  env "${cpu_env[@]}" "${force[@]}" OUT="$tmp/late" GPU_CHECK_CAP_SCALE=0.01 GPU_CHECK_DEADLINE_S=0 \
    bash "$self" run >"$tmp/late.log" 2>&1 || rc=$?
  [ "$rc" = 1 ] || die "selftest: the late run should exit 1, got $rc"
  # A call the tool kills (SIGKILL to all) after two steps: the table it leaves.
  local pid n=0
  setsid env "${cpu_env[@]}" "${force[@]}" OUT="$tmp/killed" GPU_CHECK_CAP_SCALE=0.05 bash "$self" run >"$tmp/killed.log" 2>&1 &
  pid=$!
  local done_steps=0
  until [ "$done_steps" -ge 2 ]; do
    sleep 0.1
    n=$((n + 1))
    [ "$n" -lt 600 ] || {
      kill -9 -- -"$pid" 2>/dev/null || true
      die "selftest: the run to kill never got two steps in"
    }
    done_steps="$(grep -c 'timeout (cap' "$tmp/killed/summary.md" 2>/dev/null || true)"
    done_steps="${done_steps:-0}"
  done
  kill -9 -- -"$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  "$py" - "$tmp" "$tmp/plan.txt" <<'EOF'
import json, os, sys
t, plan = sys.argv[1], sys.argv[2]
declared = [l.split()[1:] for l in open(plan) if l.startswith("out_files ")][0]
planned = [l.split()[1] for l in open(plan) if l.startswith("step ")]

def table(out, killed=False):
    """The step table of summary.md: {step: status}, as a reader of the file alone sees it."""
    # (a kill during report.py's rewrite may leave its NAME.tmp beside NAME: still within the 8 files)
    names = {f[:-4] if killed and f.endswith(".tmp") else f for f in os.listdir(out)}
    assert names <= set(declared), os.listdir(out)
    md = open(os.path.join(out, "summary.md"), encoding="utf-8").read()
    rows = {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) >= 5 and cells[0] in planned:
            rows[cells[0]] = cells[1]
    assert list(rows) == planned, (list(rows), planned)
    return rows

forced = table(t + "/forced")
assert all(s.startswith("timeout (cap ") for s in forced.values()), forced
assert json.load(open(t + "/forced/summary.json"))["steps"][-1]["status"].startswith("timeout"), "summary.json"
late = table(t + "/late")
assert all(s == "skipped (out of time)" for s in late.values()), late
killed = table(t + "/killed", killed=True)
kinds = [s.split(" ")[0] for s in killed.values()]
assert kinds.count("timeout") >= 2 and kinds.count("running") <= 1 and kinds[-1] == "not", killed
assert all(k in ("timeout", "running", "not") for k in kinds), killed
print("selftest: forced:", len(forced), "steps at their caps; late: all skipped; killed:",
      ", ".join(f"{k} {v}" for k, v in killed.items() if not v.startswith("timeout")).replace("not reached", "-")[:150])
EOF

  say "selftest 8/9: sentence-transformers in bf16 (the device's path) on 100 texts, a sweep; compare.py against itself"
  head -n 100 "$tmp/t100k.jsonl" >"$tmp/t100.jsonl"
  "$py" -c 'import json; json.dump(list(range(0, 100, 7)), open("'"$tmp"'/rows100.json", "w"))'
  "$py" "$B/make_model.py" --fixtures "$fixtures" --out "$tmp/model" --layers 2 --hidden 64 --heads 4 --intermediate 128
  "$py" "$B/st_baseline.py" --model "$tmp/model" --texts "$tmp/t100.jsonl" --device cpu --precision bf16 \
    --warmup 10 --sweep 8,32 --sweep-texts 40 --sample-rows "$tmp/rows100.json" --sample-out "$tmp/st100.npy" --out "$tmp/st100.json"
  # A fake stoke folder holding the ST vectors themselves (ids in reverse, two shards).
  "$py" - "$tmp" <<'EOF'
import json, os, sys
import numpy as np
t = sys.argv[1]
rows = json.load(open(t + "/rows100.json"))
v = np.load(t + "/st100.npy")
assert v.dtype == np.float32 and np.isfinite(v).all() and v.shape == (len(rows), 64), (v.dtype, v.shape)
s = json.load(open(t + "/st100.json"))
assert s["batch_size"] in (8, 32) and s["texts"] == 100 and s["lens_source"] == "counted", s
d = t + "/fake-stoke"
os.makedirs(d)
order = list(range(len(rows)))[::-1]
shards = []
for k, part in enumerate((order[:5], order[5:])):
    np.save(f"{d}/embeddings-{k:05d}.npy", v[part])
    with open(f"{d}/ids-{k:05d}.jsonl", "w") as f:
        f.writelines(f"{rows[i]}\n" for i in part)
    shards.append({"embeddings": f"embeddings-{k:05d}.npy", "ids": f"ids-{k:05d}.jsonl"})
json.dump({"precision": "bf16", "shards": shards}, open(d + "/manifest.json", "w"))
EOF
  "$py" "$B/compare.py" --rows "$tmp/rows100.json" --st "$tmp/st100.npy" --stoke "$tmp/fake-stoke" \
    --min-mean-cos 0.9999999 --min-cos 0.9999999 --max-norm-err 1e-7
  # ... and it must fail on a wrong vector (one row scaled, one row shuffled).
  "$py" -c 'import numpy as np, sys; v = np.load(sys.argv[1]); v[0] *= 2; v[1] = v[1][::-1].copy(); np.save(sys.argv[2], v)' \
    "$tmp/st100.npy" "$tmp/st100-bad.npy"
  if "$py" "$B/compare.py" --rows "$tmp/rows100.json" --st "$tmp/st100-bad.npy" --stoke "$tmp/fake-stoke"; then
    die "selftest: compare.py passed wrong vectors"
  fi

  say "selftest 9/9: the table with made-up H200-scale numbers"
  mkdir -p "$tmp/fake" "$tmp/fake-out"
  cp "$tmp/g1.json" "$tmp/fake/tests-ops.json"
  cp "$tmp/s1.json" "$tmp/fake/tests-sanitizer.json"
  cat >"$tmp/fake/tests-encoder.json" <<'EOF'
{"name": "test_cuda_encoder", "rc": 0, "passed": 14, "failed": 0, "skipped": 0, "failed_tests": [], "skip_reason": "", "source": "json"}
EOF
  cat >"$tmp/fake/env.json" <<'EOF'
{"date": "2026-12-01 10:00 UTC", "card": "NVIDIA H200", "driver": "580.159.04", "driver_cuda": "13.0", "device": "cuda", "precision": "bf16", "prepared_rev": "abc1234"}
EOF
  cat >"$tmp/fake/matmul.json" <<'EOF'
{"n": 8192, "iters": 10, "tflops": 780.0}
EOF
  cat >"$tmp/fake/model.json" <<'EOF'
{"layers": 12, "hidden": 768, "heads": 12, "intermediate": 3072, "non_embedding_params": 85054464, "max_seq_length": 512}
EOF
  cat >"$tmp/fake/st.json" <<'EOF'
{"precision": "bf16", "batch_size": 256, "sweep": [{"batch_size": 128, "texts": 4000, "seconds": 0.5, "texts_per_s": 8000.0}, {"batch_size": 256, "texts": 4000, "seconds": 0.4, "texts_per_s": 10000.0}], "texts": 200000, "tokens": 13883934, "seconds": 40.0, "texts_per_s": 5000.0, "tokens_per_s": 347098.35, "max_seq_length": 512, "at_max_len": 1500, "token_weighted_len": 154.0, "lens_source": "precomputed"}
EOF
  cat >"$tmp/fake/stoke.json" <<'EOF'
{"rc": 0, "wall_seconds": 10.0, "texts": 200000, "tokens": 13883934, "texts_per_s": 20000.0, "tokens_per_s": 1388393.4, "run_seconds": 8.0, "run_tokens_per_s": 1735491.75}
EOF
  cat >"$tmp/fake/util.json" <<'EOF'
{"samples": 100, "util_mean_whole": 90.0, "util_mean_busy": 97.5}
EOF
  cat >"$tmp/fake/compare.json" <<'EOF'
{"rows": 1000, "mean_cos": 0.99991, "min_cos": 0.9981, "max_norm_err": 0.002, "thresholds": {"min_mean_cos": 0.999, "min_cos": 0.99, "max_norm_err": 0.02}, "pass": true}
EOF
  printf '%s\t%s\t%s\t%s\n' tests_ops ok 12.0 "" tests_encoder ok 3.1 "" sanitizer partial 20.0 "racecheck cut at 8s" \
    st ok 75.0 "" stoke ok 11.0 "" compare ok 4.0 "" >"$tmp/fake/steps.tsv"
  "$py" "$B/report.py" "$tmp/fake" --md "$tmp/fake-out/summary.md" --json "$tmp/fake-out/summary.json" --print >/dev/null
  "$py" - "$tmp/fake-out" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
d = s["derived"]
S = 13883934 / 200000
fpt = 2 * 85054464 + 4 * S * 768 * 12
assert abs(d["flops_per_token"] - fpt) < 1 and abs(d["ratio"] - 4.0) < 1e-9, d
assert abs(d["mfu_stoke"] - 1388393.4 * fpt / 780e12) < 1e-9, d
md = open(sys.argv[1] + "/summary.md", encoding="utf-8").read()
assert "cut at 8s after 1 of 9 tests" in md and "best of 128, 256" in md, md
EOF
  grep -q 'MISSED' "$tmp/fake-out/summary.md" || die "selftest: the made-up MFU (~31%) should show as MISSED"
  rm -rf "$tmp"
  say "selftest: PASS in $(since "$t0")s"
}

case "${1:-}" in
  prepare) shift && prepare "$@" ;;
  run) run ;;
  selftest) selftest ;;
  _setup) setup_step ;;
  _gtest) gtest_step "$2" "$3" "${4:-}" ;;
  _sanitizer) sanitizer_step ;;
  _data) data_step ;;
  _train_stoke) train_stoke_step ;;
  _train_contrastive) train_contrastive_step ;;
  _stoke) stoke_step ;;
  _profile) profile_step ;;
  _plan) print_plan ;;
  _call_line) call_line ;;
  _out_path) out_path "$2" ;;
  _size_verdict) size_verdict "$2" "$3" ;;
  *) sed -n '2,/^set -euo/p' "$self" | sed '$d' | sed 's/^# \{0,1\}//' >&2 && exit 2 ;;
esac
