#!/usr/bin/env bash
# Data-parallel training on the CPU: `mpirun -n 2 stoke train` with one OpenMP
# thread per rank next to one process with two threads, same model
# (bench/train_cpu's MiniLM-L6-size classifier), same global batch (32),
# same steps, f32, dropout 0. Prints samples/s of both and, for the MPI run,
# the all-reduce's share of the training loop (total, and what was left on
# the critical path after overlapping with the backward).
#   bench/train_cpu/data_parallel.sh
# Environment: BENCH_DP_STEPS [20], BENCH_DP_BUCKET_MB [25], STOKE_BIN,
# BENCH_PYTHON [/usr/bin/python3] (with numpy: make_data.py writes the model).
# Run it alone on the machine (e.g. under the build lock): it times things.
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
work=build/bench-models/train
bin="${STOKE_BIN:-build/release/apps/stoke/stoke}"
steps="${BENCH_DP_STEPS:-20}"
bucket="${BENCH_DP_BUCKET_MB:-25}"
command -v mpirun >/dev/null || { echo "data_parallel: error: mpirun is not installed (scripts/setup.sh)" >&2; exit 1; }
python="${BENCH_PYTHON:-/usr/bin/python3}"
"$python" -c "import numpy" 2>/dev/null ||
  { echo "data_parallel: error: $python has no numpy (apt-get install python3-numpy, or set BENCH_PYTHON)" >&2; exit 1; }
"$python" bench/train_cpu/make_data.py "$fixtures" "$work" 2048 >&2
model="$work/minilm-l6-cls"
data="$work/train.jsonl"
out="$work/dp"
rm -rf "$out"
mkdir -p "$out"
common=(train --model "$model" --train "$data" --max-steps "$steps" --no-shuffle --precision f32 --lr 5e-5
        --max-length 128 --dropout 0 --log-every 1000 --save-every 0 --quiet --label-field label)
echo "load before: $(cat /proc/loadavg)"
OMP_NUM_THREADS=2 "$bin" "${common[@]}" --output "$out/one" --batch-size 32
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 \
  mpirun --oversubscribe --bind-to core --mca btl self,vader --mca btl_vader_single_copy_mechanism none -n 2 \
  "$bin" "${common[@]}" --output "$out/mpi" --batch-size 16 --bucket-mb "$bucket"
echo "load after: $(cat /proc/loadavg)"
"$python" - "$out" <<'PY'
import json, sys
out = sys.argv[1]
one = json.load(open(f"{out}/one/run.json"))
mpi = json.load(open(f"{out}/mpi/run.json"))
t1, tm = one["throughput"], mpi["throughput"]
dp = mpi["data_parallel"]
loop = tm["train_seconds"]
print(f"1 process x 2 threads: {t1['samples_per_s']:.1f} samples/s ({t1['train_seconds']:.2f} s, {one['steps']} steps)")
print(f"mpirun -n 2 x 1 thread: {tm['samples_per_s']:.1f} samples/s ({loop:.2f} s); "
      f"all-reduce {dp['allreduce_bytes_per_step'] / 2**20:.1f} MiB/step, {dp['allreduce_seconds']:.2f} s "
      f"({100 * dp['allreduce_seconds'] / loop:.1f}% of the loop), on the critical path "
      f"{dp['allreduce_exposed_seconds']:.2f} s ({100 * dp['allreduce_exposed_seconds'] / loop:.1f}%), "
      f"overlapped {100 * dp['allreduce_overlapped_fraction']:.0f}%")
print(f"speed-up of 2 ranks over 2 threads: {tm['samples_per_s'] / t1['samples_per_s']:.2f}x")
PY
