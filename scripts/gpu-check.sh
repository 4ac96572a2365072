#!/usr/bin/env bash
# The one device script (DESIGN.md): everything stoke checks on a GPU, as ONE
# call of the device tool, because a GPU is lent to few sessions, for 15
# minutes, and each call costs a machine start. Binaries are built HERE (no
# GPU needed to compile for sm_90) and carried there with the non-CUDA shared
# libraries they need; the device machine has CUDA's own libraries.
#
#   scripts/gpu-check.sh prepare [--no-build]   here: build build/gpu, fill .gpu/ (git-ignored)
#   bash .gpu/gpu-check.sh run                  there, in the repo root (prepare prints the device call)
#   scripts/gpu-check.sh selftest               here, CPU only: the Python parts at tiny scale
#
# run, in priority order within one call of at most 5 minutes: the op table
# on CUDA (every op against the CPU reference), compute-sanitizer racecheck
# and memcheck on the attention cases, the CUDA op tests and goldens (gtest),
# a bf16 matmul rate (the MFU denominator); the seed's training case
# (bench/train_gpu: a random bert-base-size classifier on ~32-token
# multilingual texts — the seed's first PyTorch loop, its fixed loop, and
# `stoke train --device cuda --precision bf16` on the same data and batch:
# samples/s, MFU, GPU utilization, host syncs, final loss, loss curves; into
# $OUT/train.json); then sentence-transformers vs `stoke embed --device cuda`
# on a random bert-base-size model, a cosine check between the two, GPU
# utilization while stoke runs; then a table (also $OUT/summary.md and
# summary.json). Each step has its own timeout and a failed step is marked in
# the table, never the end of the run; $OUT/steps.tsv is rewritten as each
# step ends, so a cut run still reports. bench/embed_gpu/README.md and
# bench/train_gpu/README.md have more.
#
# Knobs (environment; defaults in brackets):
#   prepare: STOKE_FIXTURES [../shared/fixtures], GPU_CHECK_BUILD_DIR [build/gpu],
#            GPU_CHECK_JOBS [2], GPU_CHECK_MAX_MIB [60]
#   run:     GPU_CHECK_TEXTS [100000], GPU_CHECK_BATCH_TOKENS [32768], GPU_CHECK_WORKERS [12],
#            GPU_CHECK_STOKE_FLAGS [--max-batch-size 1024] (more `stoke embed` flags), GPU_CHECK_SANITIZER [1 on a GPU, 0 on the CPU],
#            GPU_CHECK_DEADLINE_S [290] (steps stop being started after this), GPU_CHECK_MODEL
#            [12,768,12,3072: layers,hidden,heads,FFN], GPU_CHECK_MAX_LENGTH [512], GPU_CHECK_MATMUL_N
#            [8192], GPU_CHECK_WARMUP [2000], GPU_CHECK_COMPARE_ROWS [1000], GPU_CHECK_ST_BATCH [128],
#            GPU_CHECK_PROFILE_TEXTS [20000] (the traced run), GPU_CHECK_DEVICE [cuda], GPU_CHECK_PRECISION [bf16], GPU_CHECK_DIR [.gpu], PY [python3],
#            GPU_CHECK_KEEP [0] (1 keeps the work folder in $TMPDIR), GPU_CHECK_COMPARE_ARGS [],
#            STOKE_BIN [.gpu/bin/stoke], OUT [out/gpu-check] (the device tool sets OUT),
#            GPU_CHECK_TRAIN_MODEL [12,768,12,3072], GPU_CHECK_TRAIN_STEPS [150], GPU_CHECK_TRAIN_RECORDS [16384],
#            GPU_CHECK_TRAIN_PRECISION [bf16] (stoke's; the fixed loop is bf16 autocast), GPU_CHECK_TRAIN_LOG_EVERY [25]
#   selftest: PY (a python with torch + sentence-transformers; default: .venv-bench-st of this
#            checkout or of the main worktree), STOKE_BIN (a CPU stoke; default build/release's)
set -euo pipefail

self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
here="$(dirname "$self")"
# In the repository the Python parts are in bench/embed_gpu; in .gpu/ (a copy
# made by prepare, so the device call needs nothing but .gpu) they sit beside
# this script.
if [ -d "$here/bench/embed_gpu" ]; then bench="$here/bench/embed_gpu"; else bench="$(cd "$here/.." && pwd)/bench/embed_gpu"; fi

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
say() { echo "gpu-check: $*"; }
die() { echo "gpu-check: error: $*" >&2; exit 1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

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
  local gpu="$root/.gpu"
  local budget=$((${GPU_CHECK_MAX_MIB:-60} * 1048576))
  local py="${PY:-python3}"
  local targets=(stoke test_cuda_ops test_op_table test_cuda_encoder) t
  for t in models/tiny-bert golden corpus/fortunes-multilingual.jsonl; do
    [ -e "$fixtures/$t" ] || die "no $fixtures/$t (set STOKE_FIXTURES to the fixtures folder)"
  done

  if [ "$build_it" = 1 ]; then
    command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "no nvcc: building for the GPU needs the CUDA toolkit"
    say "configuring $build (Release, STOKE_CUDA=ON, sm_90, no benchmarks)"
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTOKE_CUDA=ON -DSTOKE_CUDA_ARCHS=90 -DSTOKE_BENCH=OFF
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
  if ! grep -q 'libcublasLt' <<<"$(ldd "${bins[0]}")"; then
    say "warning: ${bins[0]} does not link cuBLASLt: was it built with the CUDA backend (STOKE_CUDA=ON)?"
  fi

  say "filling $gpu"
  if [ -d "$gpu" ]; then chmod -R u+w "$gpu" && rm -rf "$gpu"; fi
  mkdir -p "$gpu/bin" "$gpu/lib" "$gpu/fixtures" "$gpu/bench/embed_gpu" "$gpu/bench/embed_cpu" "$gpu/bench/train_gpu"

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
  done < <(for b in "${bins[@]}"; do ldd "$b"; done | awk '$2 == "=>" { print $1, $3 }' | sort -u)

  # fixtures/: what the CUDA tests (STOKE_FIXTURES) and the benchmark read.
  # The shared fixtures are read-only; the copies must be deletable.
  cp -rL "$fixtures/models" "$fixtures/golden" "$fixtures/corpus" "$gpu/fixtures/"
  chmod -R u+w "$gpu/fixtures"

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
    src="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)"
    echo "rev=$(git -C "${src:-$root}" describe --always --dirty 2>/dev/null || echo unknown) (${src:-$root})"
    echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
    # shellcheck source=/dev/null
    echo "built_on=$( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null), glibc $(ldd --version | head -n 1 | awk '{ print $NF }')"
    echo "nvcc=$( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version) | grep -o 'release [0-9.]*' | head -n 1)"
    echo "needs_glibc=$(objdump -T "$gpu"/bin/* "$gpu"/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)"
    echo "needs_glibcxx=$(objdump -T "$gpu"/bin/* "$gpu"/lib/* 2>/dev/null | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -n 1)"
    echo "libs=$(cd "$gpu/lib" && echo *)"
  } >"$gpu/PREPARED"

  # Size: the device tool carries at most 64 MiB with the working tree (the
  # tracked files are ~30 MiB, most of them tests/golden): .gpu gets what is
  # left, less 1 MiB (or GPU_CHECK_MAX_MIB, if smaller).
  local size tree
  tree="$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)"
  [ $((64 * 1048576 - tree - 1048576)) -lt "$budget" ] && budget=$((64 * 1048576 - tree - 1048576))
  size="$("$py" "$bench/pack.py" size "$gpu")"
  if [ "$size" -gt "$budget" ]; then
    say ".gpu is $(mib "$size") MiB, over $(mib "$budget"): xz-compressing its largest files (run unpacks them)"
    "$py" "$bench/pack.py" pack "$gpu" "$budget"
    size="$("$py" "$bench/pack.py" size "$gpu")"
  fi
  (cd "$gpu" && du -sh bin lib fixtures bench | sed 's/^/  /')
  [ "$size" -le "$budget" ] || die ".gpu is $(mib "$size") MiB even compressed, over $(mib "$budget") MiB (64 MiB less the working tree, or GPU_CHECK_MAX_MIB)"
  say ".gpu: $(mib "$size") MiB; with the working tree ($(mib "$tree") MiB) $(mib $((size + tree))) MiB travel (limit 64 MiB)"
  [ $((size + tree)) -le $((64 * 1048576)) ] || say "warning: over 64 MiB: the device call will be refused"
  sed 's/^/  /' "$gpu/PREPARED"
  say "ready. Next, in a session whose task has a GPU, ONE device call:"
  echo
  echo '    run(command="bash .gpu/gpu-check.sh run", carry=[".gpu"], timeout_s=330)'
  echo
  say "the tool sends the checkout its session started in: if that is not $root, copy .gpu/ there first"
  say "(it must be git-ignored there: '/.gpu/' in .gitignore or .git/info/exclude)."
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

# step KEY MAX_SECONDS CMD...: run CMD under its own timeout, print and record
# (steps.tsv) its status and seconds; never fails, so one broken step cannot
# stop the run. The timeout is cut to what is left before the deadline, less
# time kept for the report; a step that would get under 5 s is skipped.
step() {
  local key=$1 max=$2
  shift 2
  local left=$((GC_DEADLINE - $(date +%s) - 25))
  if [ "$left" -lt 5 ]; then
    say "== $key: skipped, out of time"
    printf '%s\tskipped (out of time)\t0\n' "$key" >>"$GC_WORK/steps.tsv"
    return 0
  fi
  [ "$max" -gt "$left" ] && max=$left
  say "== $key (limit ${max}s)"
  local t0 rc=0 st s note=""
  t0=$(now)
  set +e
  timeout -k 5 "$max" "$@" 2>&1 | tee "$GC_WORK/step-$key.log"
  rc=${PIPESTATUS[0]}
  set -e
  case $rc in
    0) st=ok ;;
    124 | 137) st="timeout (${max}s)" ;;
    127) st=missing ;;
    3) st="no test ran (all skipped)" ;;
    *) st="failed (rc $rc)" ;;
  esac
  s=$(since "$t0")
  # A failed step's last error line (the exception, stoke's error; else its
  # last line) goes into the table.
  if [ "$rc" != 0 ]; then
    local lines
    lines="$(tr '\r\t' '\n ' <"$GC_WORK/step-$key.log" | sed 's/^[[:space:]]*//' | grep -v '^$' || true)"
    note="$(grep -E '^[A-Za-z_.]+(Error|Exception|Interrupt)\b' <<<"$lines" | tail -n 1 || true)"  # python's
    [ -n "$note" ] || note="$(grep -E 'error|not found|Segmentation|Abort' <<<"$lines" | tail -n 1 || true)"
    [ -n "$note" ] || note="$(tail -n 1 <<<"$lines")"
    note="$(cut -c1-140 <<<"$note")"
  fi
  printf '%s\t%s\t%s\t%s\n' "$key" "$st" "$s" "$note" >>"$GC_WORK/steps.tsv"
  cp "$GC_WORK/steps.tsv" "$GC_OUT/steps.tsv" 2>/dev/null || true  # a cut run still says what finished
  say "== $key: $st in ${s}s"
}

run() {
  local out="${OUT:-$PWD/out/gpu-check}"
  mkdir -p "$out"
  out="$(cd "$out" && pwd)"
  # Everything printed also goes to $OUT/run.log; the table comes last, so
  # it is in the tail the device tool returns.
  local rc=0
  run_steps "$out" 2>&1 | tee "$out/run.log" || rc=$?
  return "$rc"
}

run_steps() {
  local out=$1 t_start
  t_start=$(now)
  # Everything the steps (some are this script again, under `timeout`) need.
  export GC_OUT="$out" GC_BENCH="$bench" GC_TRAIN_BENCH="$(cd "$bench/../train_gpu" 2>/dev/null && pwd || echo "$bench/../train_gpu")"
  export GC_PY="${PY:-python3}"
  export GC_DEVICE="${GPU_CHECK_DEVICE:-cuda}" GC_PRECISION="${GPU_CHECK_PRECISION:-bf16}"
  export GC_DEADLINE=$(($(date +%s) + ${GPU_CHECK_DEADLINE_S:-290}))
  GC_GPU="${GPU_CHECK_DIR:-$PWD/.gpu}"
  case "$GC_GPU" in /*) ;; *) GC_GPU="$PWD/$GC_GPU" ;; esac
  export GC_GPU
  export GC_FIX="${GPU_CHECK_FIXTURES:-$GC_GPU/fixtures}"
  export GC_STOKE="${STOKE_BIN:-$GC_GPU/bin/stoke}"
  GC_WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")"
  export GC_WORK
  # No network there: never let transformers or the hub try it.
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONIOENCODING=utf-8
  # ... and keep progress bars out of the 12 KB of output that comes back.
  export HF_HUB_DISABLE_PROGRESS_BARS=1 TRANSFORMERS_VERBOSITY=error TQDM_DISABLE=1
  local n_texts="${GPU_CHECK_TEXTS:-100000}" layers hidden heads inter
  IFS=, read -r layers hidden heads inter <<<"${GPU_CHECK_MODEL:-12,768,12,3072}"
  say "device $GC_DEVICE, $GC_PRECISION, $n_texts texts; work $GC_WORK; out $GC_OUT; $(date -u +%Y-%m-%dT%H:%M:%SZ)"

  # ---- the carried folder: unpack, then find CUDA's libraries ---------------
  local prepared_rev="none"
  if [ -d "$GC_GPU" ]; then
    if [ -n "$(find "$GC_GPU" -name '*.xz' -print -quit)" ]; then
      "$GC_PY" "$GC_BENCH/pack.py" unpack "$GC_GPU" || say "unpacking $GC_GPU failed"
    fi
    chmod +x "$GC_GPU"/bin/* 2>/dev/null || true
    [ -f "$GC_GPU/PREPARED" ] && sed 's/^/  prepared: /' "$GC_GPU/PREPARED" && prepared_rev="$(sed -n 's/^rev=\([^ ]*\).*/\1/p' "$GC_GPU/PREPARED")"
  else
    say "no $GC_GPU (scripts/gpu-check.sh prepare makes it): no carried binaries"
  fi
  local cublas
  cublas="$(find_lib_dir libcublasLt.so.13 || true)"
  if [ -n "$cublas" ]; then say "libcublasLt.so.13 in $cublas"; else say "libcublasLt.so.13 NOT FOUND (CUDA toolkit, ldconfig, pip nvidia packages)"; fi
  # Only stoke and the tests get .gpu/lib: python must keep its own libcrypto, libgomp.
  export GC_BINLIB="$GC_GPU/lib${cublas:+:$cublas}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "libcuda.so.1: $(ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" { print $NF; exit }' || true) (loader cache; LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"
  say "device glibc: $(ldd --version 2>/dev/null | head -n 1)"
  if [ -x "$GC_STOKE" ]; then
    local missing
    missing="$(LD_LIBRARY_PATH="$GC_BINLIB" ldd "$GC_STOKE" 2>&1 | grep -E 'not found|version .* not found' || true)"
    [ -n "$missing" ] && say "stoke cannot load: $missing"
  fi
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,utilization.gpu,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm \
      --format=csv,noheader 2>&1 | sed 's/^/  nvidia-smi: /' || true
  else
    say "no nvidia-smi"
  fi
  "$GC_PY" "$GC_BENCH/collect.py" env "$GC_WORK/env.json" "device=$GC_DEVICE" "precision=$GC_PRECISION" \
    "texts=$n_texts" "prepared_rev=$prepared_rev" "cublas_dir=$cublas" || say "collect env failed"

  # ---- a. correctness, in priority order: the op table, the sanitizer on attention, the op tests
  : >"$GC_OUT/tests.log"
  step tests_table 60 bash "$self" _gtest table test_op_table
  if [ "${GPU_CHECK_SANITIZER:-$([ "$GC_DEVICE" = cpu ] && echo 0 || echo 1)}" = 1 ]; then
    step sanitizer 60 bash "$self" _sanitizer
  fi
  step tests_ops 60 bash "$self" _gtest ops test_cuda_ops
  step tests_encoder 45 bash "$self" _gtest encoder test_cuda_encoder

  # ---- b. the MFU denominator ------------------------------------------------
  step matmul 45 "$GC_PY" "$GC_BENCH/matmul_rate.py" --n "${GPU_CHECK_MATMUL_N:-8192}" --device "$GC_DEVICE" \
    --out "$GC_WORK/matmul.json"

  # ---- b2. the seed's training case: (a) first PyTorch loop, (b) fixed loop, (c) stoke train
  local tl th tn ti
  IFS=, read -r tl th tn ti <<<"${GPU_CHECK_TRAIN_MODEL:-12,768,12,3072}"
  export GC_TRAIN_STEPS="${GPU_CHECK_TRAIN_STEPS:-150}"
  step train_data 60 "$GC_PY" "$GC_TRAIN_BENCH/make_classifier.py" --fixtures "$GC_FIX" --out "$GC_WORK/train" \
    --layers "$tl" --hidden "$th" --heads "$tn" --intermediate "$ti" --records "${GPU_CHECK_TRAIN_RECORDS:-16384}"
  step train_first 50 "$GC_PY" "$GC_TRAIN_BENCH/seed_train.py" --dir "$GC_WORK/train" --loop first \
    --device "$GC_DEVICE" --steps "$GC_TRAIN_STEPS" --out "$GC_WORK/train-first.json"
  step train_fixed 50 "$GC_PY" "$GC_TRAIN_BENCH/seed_train.py" --dir "$GC_WORK/train" --loop fixed \
    --device "$GC_DEVICE" --steps "$GC_TRAIN_STEPS" --out "$GC_WORK/train-fixed.json"
  step train_stoke 50 bash "$self" _train_stoke
  step train_report 20 "$GC_PY" "$GC_TRAIN_BENCH/train_report.py" "$GC_WORK" "$GC_OUT/train.json"

  # ---- c, d. the model (~350 MB of f32 weights, made there, never carried) and texts
  step model 150 "$GC_PY" "$GC_BENCH/make_model.py" --fixtures "$GC_FIX" --out "$GC_WORK/model" \
    --layers "$layers" --hidden "$hidden" --heads "$heads" --intermediate "$inter" \
    --max-seq-length "${GPU_CHECK_MAX_LENGTH:-512}" --info "$GC_WORK/model.json"
  step texts 60 "$GC_PY" "$GC_BENCH/make_texts.py" "$GC_FIX/corpus/fortunes-multilingual.jsonl" "$n_texts" \
    "$GC_WORK/texts.jsonl" "${GPU_CHECK_COMPARE_ROWS:-1000}" "$GC_WORK/rows.json"

  # ---- e. the peer -------------------------------------------------------------
  step st 200 "$GC_PY" "$GC_BENCH/st_baseline.py" --model "$GC_WORK/model" --texts "$GC_WORK/texts.jsonl" \
    --device "$GC_DEVICE" --precision "$GC_PRECISION" --batch-size "${GPU_CHECK_ST_BATCH:-128}" \
    --warmup "${GPU_CHECK_WARMUP:-2000}" --sample-rows "$GC_WORK/rows.json" --sample-out "$GC_WORK/st-sample.npy" \
    --out "$GC_WORK/st.json"

  # ---- f. stoke, and whether it computed the same vectors -------------------
  step stoke 150 bash "$self" _stoke
  # shellcheck disable=SC2086  # GPU_CHECK_COMPARE_ARGS is a list of flags
  step compare 60 "$GC_PY" "$GC_BENCH/compare.py" --rows "$GC_WORK/rows.json" --st "$GC_WORK/st-sample.npy" \
    --stoke "$GC_WORK/stoke-out" ${GPU_CHECK_COMPARE_ARGS:-} --out "$GC_WORK/compare.json"

  # ---- f2. where the device time goes: a traced run on the first texts, op by op
  step profile 90 bash "$self" _profile

  # ---- g. the table, last -------------------------------------------------------
  say "all steps done in $(since "$t_start")s"
  echo
  timeout 60 "$GC_PY" "$GC_BENCH/report.py" "$GC_WORK" "$GC_OUT" || say "report.py failed: the per-step lines above hold the numbers"
  # The work folder holds the model (~350 MB) and stoke's vectors; only $OUT comes back.
  # The exit status says whether every step ran cleanly (the table says how well).
  local status=0
  cut -f2 "$GC_WORK/steps.tsv" | grep -qv '^ok$' && status=1
  if [ "${GPU_CHECK_KEEP:-0}" = 1 ]; then say "kept $GC_WORK"; else rm -rf "$GC_WORK"; fi
  return "$status"
}

# _gtest NAME BINARY: one gtest binary against the carried fixtures; its output
# is appended to $OUT/tests.log, its counts go to tests-NAME.json.
gtest_step() {
  local name=$1 b=$2 exe="$GC_GPU/bin/$2" rc=0
  local log="$GC_WORK/$name.log" json="$GC_WORK/gtest-$name.json"
  if [ ! -x "$exe" ]; then
    echo "no $exe (scripts/gpu-check.sh prepare builds it)"
    exit 127
  fi
  echo "===== $b $(date -u +%H:%M:%S)" >>"$GC_OUT/tests.log"
  set +e
  STOKE_FIXTURES="$GC_FIX" STOKE_BIN="$GC_GPU/bin/stoke" LD_LIBRARY_PATH="$GC_BINLIB" "$exe" --gtest_brief=1 \
    --gtest_output="json:$json" 2>&1 |
    tee -a "$GC_OUT/tests.log" >"$log"
  rc=${PIPESTATUS[0]}
  set -e
  "$GC_PY" "$GC_BENCH/collect.py" gtest "$b" "$json" "$log" "$rc" "$GC_WORK/tests-$name.json" || true
  grep -E '^\[  FAILED  \]|Failure$|error' "$log" | head -n 12 || true
  # On the GPU every test skipped means the device was not usable: not a pass.
  if [ "$rc" = 0 ] && [ "$GC_DEVICE" != cpu ] && ! grep -q '\[  PASSED  \] [1-9]' "$log"; then exit 3; fi
  exit "$rc"
}

# _sanitizer: compute-sanitizer racecheck, then memcheck, on the attention
# and embedding-backward (CUB's sort, the runs) cases of the op table (works on the Firecracker machines, not on gVisor
# ones: KINDS.md); each tool capped at half the step.
sanitizer_step() {
  local exe="$GC_GPU/bin/test_op_table" cs c rc=0 tool log errors total=0 worst=0
  cs="$(command -v compute-sanitizer || true)"
  for c in /usr/local/cuda*/bin/compute-sanitizer; do [ -z "$cs" ] && [ -x "$c" ] && cs=$c; done
  [ -n "$cs" ] || { echo "no compute-sanitizer"; exit 127; }
  [ -x "$exe" ] || { echo "no $exe"; exit 127; }
  local json="{"
  for tool in racecheck memcheck; do
    log="$GC_WORK/sanitizer-$tool.log"
    echo "===== compute-sanitizer --tool $tool test_op_table (attention, embedding backward) $(date -u +%H:%M:%S)" >>"$GC_OUT/tests.log"
    set +e
    STOKE_FIXTURES="$GC_FIX" LD_LIBRARY_PATH="$GC_BINLIB" timeout -k 3 28 "$cs" --tool "$tool" --error-exitcode 99 \
      "$exe" --gtest_brief=1 --gtest_filter='*cuda_attention*:*cuda_embed_layernorm_backward*' 2>&1 |
      tee -a "$GC_OUT/tests.log" >"$log"
    rc=${PIPESTATUS[0]}
    set -e
    errors="$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$log" | tail -n 1)"
    echo "compute-sanitizer $tool: ${errors:-?} errors (rc $rc)"
    json="$json\"$tool\": {\"rc\": $rc, \"errors\": ${errors:-null}}, "
    total=$((total + ${errors:-0}))
    [ "$rc" != 0 ] && worst=$rc
  done
  printf '%s"errors": %d}\n' "$json" "$total" >"$GC_WORK/tests-sanitizer.json"
  exit "$worst"
}

# _train_stoke: (c) of the training case, `stoke train` on (b)'s data, batch
# and learning rate (constant schedule, no clipping, torch AdamW's default
# weight decay 0.01 on every tensor, no length grouping), nvidia-smi beside it.
train_stoke_step() {
  local outd="$GC_WORK/train-stoke" smi_pid="" rc=0
  [ -x "$GC_STOKE" ] || { echo "no stoke binary at $GC_STOKE"; exit 127; }
  if [ "$GC_DEVICE" != cpu ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi -i "${GPU_CHECK_GPU_INDEX:-0}" --query-gpu=utilization.gpu,memory.used,power.draw \
      --format=csv,noheader,nounits -lms 100 >"$GC_WORK/train-stoke-smi.csv" 2>/dev/null &
    smi_pid=$!
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
  [ -n "$smi_pid" ] && kill "$smi_pid" 2>/dev/null
  exit "$rc"
}

# _stoke: one timed `stoke embed` process, nvidia-smi sampling beside it.
stoke_step() {
  local outd="$GC_WORK/stoke-out" log="$GC_OUT/stoke.log" rc=0 smi_pid="" t0 wall
  [ -x "$GC_STOKE" ] || { echo "no stoke binary at $GC_STOKE"; exit 127; }
  if [ "$GC_DEVICE" != cpu ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi -i "${GPU_CHECK_GPU_INDEX:-0}" --query-gpu=utilization.gpu,memory.used,power.draw \
      --format=csv,noheader,nounits -lms 100 >"$GC_OUT/smi.csv" 2>/dev/null &
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
  cp "$outd/manifest.json" "$GC_OUT/stoke-manifest.json" 2>/dev/null || true
  "$GC_PY" "$GC_BENCH/collect.py" stoke "$outd/manifest.json" "$wall" "$rc" "$GC_WORK/stoke.json" || true
  "$GC_PY" "$GC_BENCH/collect.py" smi "$GC_OUT/smi.csv" "$GC_WORK/util.json" || true
  # stoke's own summary (incl. any `gpu:` line); progress-bar redraws folded
  tr '\r' '\n' <"$log" | grep -v '^[[:space:]]*$' | tail -n 12 | sed 's/^/  stoke: /' || true
  exit "$rc"
}

# _profile: `stoke embed --trace` on the first GPU_CHECK_PROFILE_TEXTS texts;
# the device spans (one per op) summed by op name into profile.json.
profile_step() {
  local outd="$GC_WORK/profile-out" n="${GPU_CHECK_PROFILE_TEXTS:-20000}" rc=0
  [ -x "$GC_STOKE" ] || { echo "no stoke binary at $GC_STOKE"; exit 127; }
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

# ============================================================================
# selftest (here, CPU only)
# ============================================================================

selftest() {
  local root t0 main_wt
  t0=$(now)
  root="$(cd "$here/.." && pwd)"
  cd "$root"
  main_wt="$(git worktree list --porcelain 2>/dev/null | awk '/^worktree / { print $2; exit }')"
  local py="${PY:-}" c
  if [ -z "$py" ]; then
    for c in "$root/.venv-bench-st/bin/python" "$main_wt/.venv-bench-st/bin/python" python3; do
      if "$c" -c 'import sentence_transformers, torch, numpy' 2>/dev/null; then py="$c" && break; fi
    done
  fi
  [ -n "$py" ] || die "selftest: no python with torch + sentence-transformers + numpy (set PY; bench/embed_cpu/run.sh makes .venv-bench-st)"
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
  say "selftest: python $py; stoke ${stoke:-none (the stoke and compare steps will be missing)}; fixtures $fixtures; in $tmp"
  local B="$bench"

  say "selftest 1/6: pack.py round trip"
  mkdir -p "$tmp/pack/lib" "$tmp/pack/fixtures"
  "$py" -c 'print("stoke\n" * 500000)' >"$tmp/pack/lib/libbig.so.1"  # compressible, 3 MB
  chmod 644 "$tmp/pack/lib/libbig.so.1"
  cp "$fixtures/corpus/fortunes-multilingual.jsonl" "$tmp/pack/fixtures/"
  echo small >"$tmp/pack/small.txt"
  cp -r "$tmp/pack" "$tmp/pack.orig"
  "$py" "$B/pack.py" pack "$tmp/pack" 4000000
  [ -f "$tmp/pack/fixtures/fortunes-multilingual.jsonl.xz" ] || die "selftest: pack did not compress the corpus"
  [ "$("$py" "$B/pack.py" size "$tmp/pack")" -le 4000000 ] || die "selftest: pack left it over budget"
  "$py" "$B/pack.py" unpack "$tmp/pack"
  diff -r "$tmp/pack" "$tmp/pack.orig" || die "selftest: pack/unpack changed the files"
  [ -x "$tmp/pack/lib/libbig.so.1" ] || die "selftest: unpack lost the executable bit under lib/"

  say "selftest 2/6: gtest and nvidia-smi readers on made-up output"
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
assert u["mem_max_mib"] == 21000, u
EOF

  say "selftest 3/6: make_texts replicates past one copy of the corpus, ids unique"
  "$py" "$B/make_texts.py" "$fixtures/corpus/fortunes-multilingual.jsonl" 50000 "$tmp/t50k.jsonl" 1000 "$tmp/rows.json"
  "$py" - "$tmp" <<'EOF'
import json, sys
t = sys.argv[1]
recs = [json.loads(l) for l in open(t + "/t50k.jsonl", encoding="utf-8")]
assert len(recs) == 50000 and [r["id"] for r in recs] == list(range(50000))
assert recs[24400]["text"] == recs[0]["text"] and recs[48800 + 5]["text"] == recs[5]["text"]
rows = json.load(open(t + "/rows.json"))
assert len(rows) == 1000 and rows[0] == 0 and max(rows) < 24400, rows[-1]
EOF

  say "selftest 4/6: the whole 'run' on the CPU: tiny models, 500 texts, 6 training steps, f32 (no .gpu: the test steps are 'missing')"
  local rc=0
  OUT="$tmp/out" GPU_CHECK_DIR="$tmp/no-gpu" GPU_CHECK_FIXTURES="$fixtures" PY="$py" STOKE_BIN="${stoke:-$tmp/no-stoke}" \
    GPU_CHECK_DEVICE=cpu GPU_CHECK_PRECISION=f32 GPU_CHECK_TEXTS=500 GPU_CHECK_MODEL=2,64,4,128 \
    GPU_CHECK_MATMUL_N=256 GPU_CHECK_WARMUP=50 GPU_CHECK_COMPARE_ROWS=200 GPU_CHECK_WORKERS=2 \
    GPU_CHECK_BATCH_TOKENS=4096 GPU_CHECK_COMPARE_ARGS="--min-mean-cos 0.99999 --min-cos 0.9999 --max-norm-err 1e-4" \
    GPU_CHECK_TRAIN_MODEL=2,64,4,128 GPU_CHECK_TRAIN_STEPS=6 GPU_CHECK_TRAIN_RECORDS=512 GPU_CHECK_TRAIN_LOG_EVERY=2 \
    GPU_CHECK_DEADLINE_S=900 bash "$self" run || rc=$?
  [ "$rc" = 1 ] || die "selftest: run should exit 1 (test binaries missing), got $rc"
  "$py" - "$tmp/out" "${stoke:+yes}" <<'EOF'
import json, os, sys
out, have_stoke = sys.argv[1], sys.argv[2] == "yes"
files = sorted(os.listdir(out))
assert len(files) <= 8, files  # the device tool returns at most 8 files
s = json.load(open(os.path.join(out, "summary.json")))
st = {x["step"]: x["status"] for x in s["steps"]}
want_ok = ["matmul", "model", "texts", "st"] + (["stoke", "compare"] if have_stoke else [])
assert all(st[k] == "ok" for k in want_ok), st
assert st["tests_ops"] == "missing" and st["tests_encoder"] == "missing", st
assert s["st"]["texts"] == 500 and s["model"]["layers"] == 2 and s["matmul"]["tflops"] > 0
if have_stoke:
    assert s["stoke"]["texts"] == 500 and s["stoke"]["tokens"] == s["st"]["tokens"], (s["stoke"], s["st"]["tokens"])
    assert s["compare"]["pass"] and s["compare"]["mean_cos"] > 0.99999 and s["compare"]["rows"] == 200, s["compare"]
    assert s["derived"]["mfu_stoke"] > 0 and s["derived"]["ratio"] > 0
# The training case at tiny size: both PyTorch loops, stoke train (the CPU's), the report.
assert all(st[k] == "ok" for k in ["train_data", "train_first", "train_fixed", "train_report"]
           + (["train_stoke"] if have_stoke else [])), st
assert "steps.tsv" in files, files
t = json.load(open(os.path.join(out, "train.json")))
first, fixed = t["runs"]["first"], t["runs"]["fixed"]
assert first["host_syncs_per_step"] == 2 and first["batch_size"] == 16 and first["final_loss"] > 0, first
assert fixed["host_syncs_per_step"] < 1 and fixed["batch_size"] == 64 and fixed["final_loss"] > 0, fixed
if have_stoke:
    sk = t["runs"]["stoke"]
    assert sk["steps"] == 6 and sk["final_loss"] > 0 and sk["samples_per_s"] > 0, sk
    assert t["stoke_over_fixed"] > 0 and len(t["loss_curve"]["intervals"]) == 3, t["loss_curve"]
print("selftest: run's summary.json and train.json check out:", ", ".join(files))
EOF

  say "selftest 5/6: sentence-transformers in bf16 (the device's path) on 100 texts; compare.py against itself"
  head -n 100 "$tmp/t50k.jsonl" >"$tmp/t100.jsonl"
  "$py" -c 'import json; json.dump(list(range(0, 100, 7)), open("'"$tmp"'/rows100.json", "w"))'
  "$py" "$B/make_model.py" --fixtures "$fixtures" --out "$tmp/model" --layers 2 --hidden 64 --heads 4 --intermediate 128
  "$py" "$B/st_baseline.py" --model "$tmp/model" --texts "$tmp/t100.jsonl" --device cpu --precision bf16 \
    --warmup 10 --sample-rows "$tmp/rows100.json" --sample-out "$tmp/st100.npy" --out "$tmp/st100.json"
  # A fake stoke folder holding the ST vectors themselves (ids in reverse, two shards).
  "$py" - "$tmp" <<'EOF'
import json, os, sys
import numpy as np
t = sys.argv[1]
rows = json.load(open(t + "/rows100.json"))
v = np.load(t + "/st100.npy")
assert v.dtype == np.float32 and np.isfinite(v).all() and v.shape == (len(rows), 64), (v.dtype, v.shape)
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

  say "selftest 6/6: the table with made-up H200-scale numbers"
  mkdir -p "$tmp/fake" "$tmp/fake-out"
  cp "$tmp/g1.json" "$tmp/fake/tests-ops.json"
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
{"precision": "bf16", "batch_size": 128, "texts": 200000, "tokens": 13883934, "seconds": 40.0, "texts_per_s": 5000.0, "tokens_per_s": 347098.35, "max_seq_length": 512, "at_max_len": 1500, "token_weighted_len": 154.0}
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
  printf 'tests_ops\tok\t12.0\ntests_encoder\tok\t3.1\nmatmul\tok\t8.0\nmodel\tok\t14.2\ntexts\tok\t1.0\nst\tok\t75.0\nstoke\tok\t11.0\ncompare\tok\t4.0\n' >"$tmp/fake/steps.tsv"
  "$py" "$B/report.py" "$tmp/fake" "$tmp/fake-out"
  "$py" - "$tmp/fake-out/summary.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))["derived"]
S = 13883934 / 200000
fpt = 2 * 85054464 + 4 * S * 768 * 12
assert abs(d["flops_per_token"] - fpt) < 1 and abs(d["ratio"] - 4.0) < 1e-9, d
assert abs(d["mfu_stoke"] - 1388393.4 * fpt / 780e12) < 1e-9, d
EOF
  grep -q 'MISSED' "$tmp/fake-out/summary.md" || die "selftest: the made-up MFU (~31%) should show as MISSED"
  rm -rf "$tmp"
  say "selftest: PASS in $(since "$t0")s"
}

case "${1:-}" in
  prepare) shift && prepare "$@" ;;
  run) run ;;
  selftest) selftest ;;
  _gtest) gtest_step "$2" "$3" ;;
  _sanitizer) sanitizer_step ;;
  _train_stoke) train_stoke_step ;;
  _stoke) stoke_step ;;
  _profile) profile_step ;;
  *) sed -n '2,/^set -euo/p' "$self" | sed '$d' | sed 's/^# \{0,1\}//' >&2 && exit 2 ;;
esac
