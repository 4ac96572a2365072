#!/bin/bash
# The Slurm test (issue 21): a real single-node slurmctld/slurmd (cluster.sh)
# runs the documented scripts — submit.sh, embed-array.sbatch, verify.sbatch —
# as docs/scale-out.md shows them:
#   1. a 4-task array and the verify job that depends on it (afterok): verify
#      passes, and the rows equal a single-process run's, record by record;
#   2. the same with task 1 requeued mid-run (scontrol requeue, after it has
#      committed a shard and before it finished): the second attempt resumes
#      (the manifest counts resumed records), afterok is still satisfied, the
#      set verifies and equals the single-process run.
#   test-array.sh STOKE_BINARY MODEL_DIR INPUT_JSONL
# Exits 77 (skipped) when Slurm or munge is not installed. Every wait is bounded.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 3 ] || { echo "usage: test-array.sh STOKE_BINARY MODEL_DIR INPUT_JSONL" >&2; exit 2; }
for b in munged slurmctld slurmd sbatch; do
  command -v "$b" >/dev/null || { echo "test-array: skipped: $b not installed (Debian: munge slurmctld slurmd slurm-client)"; exit 77; }
done
# slurmd starts jobs as their user (setuid): tried only as root, where it is
# known to work; STOKE_SLURM_TEST_ANY_USER=1 tries it as anyone.
if [ "$(id -u)" -ne 0 ] && [ "${STOKE_SLURM_TEST_ANY_USER:-0}" != 1 ]; then
  echo "test-array: skipped: needs root (slurmd runs jobs as their user); STOKE_SLURM_TEST_ANY_USER=1 tries anyway"
  exit 77
fi
stoke=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
model=$(cd "$2" && pwd)
corpus=$3
records=${STOKE_SLURM_TEST_RECORDS:-8000}

work=$(mktemp -d "${TMPDIR:-/tmp}/stoke-slurm.XXXXXX")
chmod 755 "$work"  # munged wants every folder above its socket searchable by all
cleanup() {
  local rc=$?
  "$here/cluster.sh" stop "$work/cluster" || true
  if [ $rc -ne 0 ]; then
    echo "test-array: failed; logs:" >&2
    for f in "$work"/logs/* "$work"/cluster/log/*.out; do
      [ -f "$f" ] && { echo "--- $f" >&2; tail -15 "$f" >&2; }
    done
  fi
  [ "${STOKE_KEEP_SLURM_TEST:-0}" = 1 ] && echo "test-array: kept $work" >&2 || rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # so that a killed test still stops its daemons (the EXIT trap)
fail() { echo "test-array: FAILED: $*" >&2; exit 1; }

"$here/cluster.sh" start "$work/cluster"
export SLURM_CONF="$work/cluster/slurm.conf"

head -n "$records" "$corpus" >"$work/texts.jsonl"
[ "$(wc -l <"$work/texts.jsonl")" -eq "$records" ] || fail "$corpus has fewer than $records lines"
# Small shards and windows: many commits, so a requeue lands mid-run.
export STOKE="$stoke" STOKE_MODEL="$model" STOKE_INPUT="$work/texts.jsonl"
export STOKE_EMBED_FLAGS="--device cpu --shard-size 20 --sort-window 40 --batch-tokens 1024"
export OMP_NUM_THREADS=1  # one core per task: two tasks run at once on two cores
# shellcheck disable=SC2086
"$stoke" embed --model "$model" --input "$STOKE_INPUT" --output "$work/whole" --quiet $STOKE_EMBED_FLAGS

# The state of a job (COMPLETED, FAILED, PENDING, ...).
job_state() { scontrol show job -o "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -1 | cut -d= -f2; }

# Waits (up to $2 s) for job $1 to end; fails on a dependency that can never be met.
wait_job_end() {
  local id=$1 deadline=$((SECONDS + $2)) state
  while :; do
    state=$(job_state "$id")
    case "$state" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) echo "$state"; return 0 ;;
    esac
    if scontrol show job -o "$id" | grep -q 'Reason=DependencyNeverSatisfied'; then
      echo "NEVER_SATISFIED"; return 0
    fi
    [ $SECONDS -lt $deadline ] || { echo "TIMEOUT_WAITING"; return 0; }
    sleep 0.5
  done
}

# Case $1: submit the documented array (4 tasks) + verify into $work/$1, then check.
submit_case() {
  local name=$1
  export STOKE_OUT="$work/$name" STOKE_LOGS="$work/logs/$name"
  read -r jid vid <<<"$(cd "$work" && "$here/submit.sh" 4 --cpus-per-task=1)"
  echo "$jid $vid"
}

check_case() {
  local name=$1 vid=$2 state
  state=$(wait_job_end "$vid" 600)
  [ "$state" = COMPLETED ] || fail "$name: the verify job ended $state (expected COMPLETED)"
  grep -q "^verified 4 folders (4 tasks): $records records" "$work/logs/$name/verify-$vid.log" ||
    fail "$name: verify's log does not say the 4 folders are complete: $(cat "$work/logs/$name/verify-$vid.log")"
  python3 "$here/compare_rows.py" "$work/whole" "$work/$name"/task-*
}

echo "== case 1: array of 4 + dependent verify"
read -r jid vid <<<"$(submit_case plain)"
check_case plain "$vid"

echo "== case 2: task 1 requeued mid-run, resumed"
read -r jid vid <<<"$(submit_case requeue)"
task="$work/requeue/task-1"
deadline=$((SECONDS + 300))
# Mid-run: at least one shard committed, not finished. The task is then
# stopped (SIGSTOP, by the pid its folder lock records) so that it is still
# mid-run when the requeue reaches it; Slurm then ends it (SIGTERM, SIGKILL).
mid_run() { grep -q '"complete": false' "$task/manifest.json" && grep -q '"embeddings"' "$task/manifest.json"; }
until [ -f "$task/manifest.json" ] && mid_run 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "task 1 never ran with a shard committed"
  if [ -f "$task/manifest.json" ] && grep -q '"complete": true' "$task/manifest.json"; then
    fail "task 1 finished before it could be requeued mid-run (raise STOKE_SLURM_TEST_RECORDS)"
  fi
  sleep 0.05
done
pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$task/.stoke.lock")
kill -STOP "$pid"
mid_run || fail "task 1 finished before it could be stopped mid-run (raise STOKE_SLURM_TEST_RECORDS)"
committed=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["committed"]["records"])' "$task/manifest.json")
echo "test-array: requeueing task 1 (pid $pid) with records 0..$committed committed"
scontrol requeue "${jid}_1"
# A requeued job, once its first attempt has ended, waits two minutes
# (BeginTime) before it may start again; let it go at once.
deadline=$((SECONDS + 120))
until [ "$(job_state "${jid}_1")" = PENDING ]; do
  [ $SECONDS -lt $deadline ] || fail "task 1 did not return to PENDING after the requeue ($(job_state "${jid}_1"))"
  sleep 0.2
done
scontrol update JobId="${jid}_1" StartTime=now
check_case requeue "$vid"
resumed=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"]["resumed_records"])' "$task/manifest.json")
[ "$resumed" -gt 0 ] || fail "task 1's last attempt resumed no records (run.resumed_records is $resumed)"
restarts=$(scontrol show job -o "${jid}_1" | grep -o 'Restarts=[0-9]*' | cut -d= -f2)
[ "${restarts:-0}" -ge 1 ] || fail "Slurm shows no restart of task 1 (Restarts=${restarts:-?})"
echo "test-array: requeued task 1 resumed $resumed records; Slurm restarts: $restarts"
echo "test-array: passed"
