"""Did stoke compute what sentence-transformers computed? Cosine per row.

    python3 compare.py --rows ROWS.json --st ST.npy --stoke OUT_DIR
        [--min-mean-cos 0.999] [--min-cos 0.99] [--max-norm-err 0.02] [--out compare.json]

ROWS.json: record numbers; ST.npy: sentence-transformers' vectors for those
records, in that order. OUT_DIR: a `stoke embed` folder (manifest.json lists
the shards; ids-NNNNN.jsonl gives each row's id, which the check's input sets
to the record number). Reports mean and min cosine and the worst relative
difference of the vector norms (no Normalize module: a wrong scale would pass
a cosine check alone). Exits 1 when a threshold is missed.

The default thresholds are for two bf16 implementations of the same model,
which round at different places (fused vs unfused ops, accumulation order).
Measured on the CPU (2026-11-29), random bert-base-size model, 150 corpus
texts, stoke bf16 vs sentence-transformers bf16: cosine mean 0.999992, min
0.999967, norm error 5e-4. The defaults (mean >= 0.999, min >= 0.99, norm
error <= 0.02) leave a GPU's different rounding ~100x that room; a wrong
mask, pooling or layer lands far below them. The selftest (f32 against f32)
passes much tighter ones.
"""
import argparse
import json
import os
import sys

import numpy as np


def stoke_rows(out_dir, wanted):
    """{record id: vector} for the wanted ids, reading shards memory-mapped."""
    with open(os.path.join(out_dir, "manifest.json")) as f:
        manifest = json.load(f)
    got = {}
    for sh in manifest["shards"]:
        emb = np.load(os.path.join(out_dir, sh["embeddings"]), mmap_mode="r")
        with open(os.path.join(out_dir, sh["ids"])) as f:
            for j, line in enumerate(f):
                rid = json.loads(line)
                if rid in wanted:
                    got[rid] = np.asarray(emb[j], dtype=np.float64)
    return manifest, got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", required=True)
    ap.add_argument("--st", required=True)
    ap.add_argument("--stoke", required=True)
    ap.add_argument("--min-mean-cos", type=float, default=0.999)
    ap.add_argument("--min-cos", type=float, default=0.99)
    ap.add_argument("--max-norm-err", type=float, default=0.02)
    ap.add_argument("--out")
    a = ap.parse_args()

    with open(a.rows) as f:
        rows = json.load(f)
    st = np.load(a.st).astype(np.float64)
    if st.shape[0] != len(rows):
        sys.exit(f"compare: {a.st} has {st.shape[0]} rows, {a.rows} names {len(rows)}")
    manifest, got = stoke_rows(a.stoke, set(rows))
    missing = [r for r in rows if r not in got]
    if missing:
        sys.exit(f"compare: {len(missing)} of {len(rows)} records missing from {a.stoke} (first: {missing[0]})")
    sk = np.stack([got[r] for r in rows])
    if sk.shape != st.shape:
        sys.exit(f"compare: stoke vectors {sk.shape} vs sentence-transformers {st.shape}")

    n_st, n_sk = np.linalg.norm(st, axis=1), np.linalg.norm(sk, axis=1)
    cos = (st * sk).sum(axis=1) / np.maximum(n_st * n_sk, 1e-30)
    norm_err = np.abs(n_sk - n_st) / np.maximum(n_st, 1e-30)
    worst = int(np.argmin(cos))
    ok = bool(cos.mean() >= a.min_mean_cos and cos.min() >= a.min_cos and norm_err.max() <= a.max_norm_err)
    res = {
        "rows": len(rows), "mean_cos": float(cos.mean()), "min_cos": float(cos.min()),
        "worst_record": int(rows[worst]), "max_norm_err": float(norm_err.max()),
        "thresholds": {"min_mean_cos": a.min_mean_cos, "min_cos": a.min_cos, "max_norm_err": a.max_norm_err},
        "stoke_precision": manifest.get("precision"), "pass": ok,
    }
    print(f"compare: {len(rows)} rows, cosine mean {res['mean_cos']:.6f} min {res['min_cos']:.6f} "
          f"(record {res['worst_record']}), norm error max {res['max_norm_err']:.2e}: {'PASS' if ok else 'FAIL'}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
