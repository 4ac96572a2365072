#!/usr/bin/env python3
"""Row-for-row check of a split embed job against a single-process run.

    compare_rows.py WHOLE_DIR TASK_DIR...

Reads the manifests (the committed shards, not file names), pairs every row of
the task folders with the whole run's row of the same record number (ids
without --id-field are record numbers), and exits 1 naming the first record
that is missing, extra, or differs by more than --tolerance (absolute, per
element). Prints how many rows matched and whether they were bitwise equal.
Standard library only (no numpy), so it runs wherever Slurm's test does.
"""
import argparse
import ast
import json
import struct
import sys
from pathlib import Path


def read_npy(path):
    """(dtype char, rows, columns, raw row bytes list) of a 2-D little-endian .npy."""
    data = path.read_bytes()
    if data[:6] != b"\x93NUMPY":
        raise SystemExit(f"{path}: not a .npy file")
    major = data[6]
    if major == 1:
        (hlen,) = struct.unpack_from("<H", data, 8)
        start = 10
    else:
        (hlen,) = struct.unpack_from("<I", data, 8)
        start = 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    descr = header["descr"]
    if descr not in ("<f4", "<f2") or header["fortran_order"] or len(header["shape"]) != 2:
        raise SystemExit(f"{path}: expected a 2-D <f4 or <f2 C-order array, found {header}")
    rows, cols = header["shape"]
    width = cols * (4 if descr == "<f4" else 2)
    body = data[start + hlen:]
    if len(body) != rows * width:
        raise SystemExit(f"{path}: {len(body)} data bytes, expected {rows * width}")
    char = "f" if descr == "<f4" else "e"
    return char, cols, [body[r * width:(r + 1) * width] for r in range(rows)]


def rows_by_record(folder):
    folder = Path(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    if manifest["input"]["id_field"]:
        raise SystemExit(f"{folder}: written with --id-field; this check needs record numbers as ids")
    out = {}
    char = cols = None
    for shard in manifest["shards"]:
        char, cols, rows = read_npy(folder / shard["embeddings"])
        ids = [json.loads(line) for line in (folder / shard["ids"]).read_text().splitlines()]
        if len(ids) != len(rows):
            raise SystemExit(f"{folder}/{shard['ids']}: {len(ids)} ids for {len(rows)} rows")
        for record, row in zip(ids, rows):
            if record in out:
                raise SystemExit(f"{folder}: record {record} twice")
            out[record] = row
    return out, char, cols


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("whole")
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    args = ap.parse_args()
    whole, char, cols = rows_by_record(args.whole)
    split = {}
    for folder in args.tasks:
        rows, _, _ = rows_by_record(folder)
        for record, row in rows.items():
            if record in split:
                raise SystemExit(f"{folder}: record {record} is also in another task's folder")
            split[record] = row
    missing = sorted(set(whole) - set(split))
    extra = sorted(set(split) - set(whole))
    if missing or extra:
        print(f"compare_rows: {len(missing)} records missing from the tasks (first {missing[:5]}), "
              f"{len(extra)} not in the whole run (first {extra[:5]})", file=sys.stderr)
        return 1
    bitwise = 0
    worst = 0.0
    fmt = f"<{cols}{char}"
    for record in sorted(whole):
        a, b = whole[record], split[record]
        if a == b:
            bitwise += 1
            continue
        diff = max(abs(x - y) for x, y in zip(struct.unpack(fmt, a), struct.unpack(fmt, b)))
        worst = max(worst, diff)
        if diff > args.tolerance:
            print(f"compare_rows: record {record} differs by {diff:g} (> {args.tolerance:g})", file=sys.stderr)
            return 1
    print(f"compare_rows: {len(whole)} rows equal to the single-process run "
          f"({bitwise} bitwise, the rest within {worst:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
