# Shared by the CPU benchmarks' run.sh (bench/embed_cpu, bench/train_cpu,
# bench/pipeline):
# sourced, not run. Expects `say` (a log function) defined by the caller.
#
#   cpu_load_start            remember the machine's busy CPU seconds now
#   cpu_load_others           set $others: CPU seconds other processes used
#                             since cpu_load_start (call it in the script's
#                             own shell, not in $(...): it reads `times`)
#   torch_peer_setup          install python3-torch + libopenblas0-openmp when
#                             missing, point libblas.so.3 at OpenBLAS, and set
#                             the array $torch_env (the command prefix the
#                             torch peer runs under) and $blas_note

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

# Busy CPU seconds of the whole machine (user+nice+system+irq+softirq+steal):
# what is left after subtracting this script's own CPU time was other work,
# which on 2 shared cores skews every number, so the reports state it.
cpu_busy() { awk '/^cpu / { printf "%.2f", ($2 + $3 + $4 + $7 + $8 + $9) / 100 }' /proc/stat; }
cpu_load_start() { cpu_busy_start=$(cpu_busy); }
cpu_load_others() {
  local t ours
  # CPU seconds of this shell's finished children (every command so far):
  # `times` is a builtin, so without a subshell the counts are this shell's.
  t=$(mktemp)
  times >"$t"
  ours=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] } print s }' "$t")
  rm -f "$t"
  others=$(awk -v b0="$cpu_busy_start" -v b1="$(cpu_busy)" -v o="$ours" 'BEGIN { printf "%.0f", b1 - b0 - o }')
}

torch_peer_setup() {
  local missing=() p alt openblas core coretype=""
  for p in python3-torch libopenblas0-openmp; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # Debian's torch calls the system libblas.so.3: the reference BLAS (~5 GFLOP/s)
  # unless the alternative points at OpenBLAS.
  alt=libblas.so.3-x86_64-linux-gnu
  openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3
  if [ "$(update-alternatives --query "$alt" | sed -n 's/^Value: //p')" != "$openblas" ]; then
    say "pointing $alt at OpenBLAS (was: $(update-alternatives --query "$alt" | sed -n 's/^Value: //p'))"
    $SUDO update-alternatives --set "$alt" "$openblas"
  fi
  # OpenBLAS 0.3.21 picks its kernels from the CPU model; one it does not know
  # (Emerald Rapids here) gets the generic Prescott (SSE3) kernels, ~7x slower
  # in f32. Inherited OPENBLAS_* settings are dropped, and where the
  # autodetected core is Prescott on an AVX-512/AVX2 CPU, the matching kernels
  # are named instead.
  torch_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
  core=$("${torch_env[@]}" OPENBLAS_VERBOSE=2 /usr/bin/python3 -c \
    'import torch; torch.ones(64, 64) @ torch.ones(64, 64)' 2>&1 | sed -n 's/^Core: //p' | head -1)
  blas_note="OpenBLAS autodetected core: ${core:-unknown}"
  if [ "$core" = "Prescott" ]; then
    if grep -qw avx512f /proc/cpuinfo; then coretype=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo; then coretype=Haswell; fi
  fi
  if [ -n "$coretype" ]; then
    torch_env+=(OPENBLAS_CORETYPE=$coretype)
    blas_note+=" (its generic fallback: this CPU model is unknown to it), so the peer runs with OPENBLAS_CORETYPE=$coretype"
  fi
  say "$blas_note"
}
