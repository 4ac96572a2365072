#!/bin/bash
# Submits an embed job array and the verify job that depends on it
# (docs/scale-out.md):
#   submit.sh N [sbatch flags for the array...]
# e.g. STOKE_MODEL=... STOKE_INPUT=... STOKE_OUT=... submit.sh 8 --gres=gpu:1 --time=06:00:00
# Prints "ARRAY_JOB_ID VERIFY_JOB_ID". The verify job starts only when every
# array task has exited 0 (afterok); a task that fails or is cancelled leaves
# it pending for ever (DependencyNeverSatisfied) — see docs/scale-out.md.
# Logs go to $STOKE_LOGS (default: logs/ under the current folder).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
n=${1:?usage: submit.sh N [sbatch flags for the array...]}
shift
: "${STOKE_OUT:?is not set: the folder for the task folders}"
logs=${STOKE_LOGS:-logs}
mkdir -p "$logs" "$STOKE_OUT"
jid=$(sbatch --parsable --array="0-$((n - 1))" --output="$logs/embed-%A_%a.log" "$@" "$here/embed-array.sbatch")
jid=${jid%%;*}  # --parsable may append ";cluster"
vid=$(sbatch --parsable --dependency=afterok:"$jid" --output="$logs/verify-%j.log" "$here/verify.sbatch")
vid=${vid%%;*}
echo "$jid $vid"
