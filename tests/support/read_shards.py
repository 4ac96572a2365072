#!/usr/bin/env python3
"""Reads a CSR shard and a ragged shard with numpy and scipy alone, as docs/output-format.md says a user
would, and checks them against the rows the C++ test wrote (tests/unit/test_output_shards.cc).

    python3 read_shards.py DIR EXPECTED.json

EXPECTED.json: {"vocab": V, "sparse_stem": "...", "sparse_rows": [[[id, value], ...], ...],
                "colbert_stem": "...", "dim": D, "colbert_rows": [[[v, ...], ...], ...], "tol": t}
Exit 0: all equal; 1: a difference (printed); 77: no numpy; 78: numpy checks passed, no scipy.
"""
import json
import sys
from pathlib import Path

try:
    import numpy as np
except ImportError:
    print("numpy is not installed")
    sys.exit(77)


def main() -> int:
    folder, expected = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
    tol = expected["tol"]
    stem = folder / expected["sparse_stem"]
    indices = np.load(f"{stem}.indices.npy", mmap_mode="r")
    values = np.load(f"{stem}.values.npy", mmap_mode="r")
    indptr = np.load(f"{stem}.indptr.npy", mmap_mode="r")
    assert indices.dtype == np.int32 and indptr.dtype == np.int64, (indices.dtype, indptr.dtype)
    rows = expected["sparse_rows"]
    assert indptr.shape == (len(rows) + 1,), indptr.shape
    for r, row in enumerate(rows):
        got = list(zip(indices[indptr[r]:indptr[r + 1]].tolist(), values[indptr[r]:indptr[r + 1]].tolist()))
        assert [g[0] for g in got] == [e[0] for e in row], (r, got, row)
        assert all(abs(g[1] - e[1]) <= tol * max(1.0, abs(e[1])) for g, e in zip(got, row)), (r, got, row)

    vec_stem = folder / expected["colbert_stem"]
    vectors = np.load(f"{vec_stem}.npy", mmap_mode="r")
    offsets = np.load(f"{vec_stem}.offsets.npy")
    assert offsets.dtype == np.int64 and vectors.shape[1] == expected["dim"], (offsets.dtype, vectors.shape)
    per_row = np.split(np.asarray(vectors), offsets[1:-1])
    assert len(per_row) == len(expected["colbert_rows"]), len(per_row)
    for r, (got, want) in enumerate(zip(per_row, expected["colbert_rows"])):
        want = np.asarray(want, dtype=np.float64).reshape(-1, expected["dim"])
        assert got.shape == want.shape, (r, got.shape, want.shape)
        assert np.all(np.abs(got - want) <= tol * np.maximum(1.0, np.abs(want))), r

    try:
        import scipy.sparse
    except ImportError:
        print("scipy is not installed (the numpy checks passed)")
        return 78
    # scipy.sparse has no float16 kernels (toarray, products: "Output dtype not compatible"): f16
    # values are widened first, as docs/output-format.md says.
    data = values.astype(np.float32) if values.dtype == np.float16 else values
    m = scipy.sparse.csr_matrix((data, indices, indptr), shape=(len(rows), expected["vocab"]))
    dense = m.toarray()
    for r, row in enumerate(rows):
        want = np.zeros(expected["vocab"])
        for i, v in row:
            want[i] = v
        assert np.all(np.abs(dense[r] - want) <= tol * np.maximum(1.0, np.abs(want))), r
    assert m.has_sorted_indices and m.nnz == len(indices)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print(f"mismatch: {e}")
        sys.exit(1)
