"""stoke.load_embeddings: `stoke embed` output folders as one array-like, in record order."""

from __future__ import annotations

import json
import os
from typing import Any, Iterator, List, Sequence, Union

import numpy as np

from . import _stoke

PathLike = Union[str, "os.PathLike[str]"]


class _Task:
    """One folder: its shards (memory-mapped) and the record number of each of its rows."""

    def __init__(self, folder: str):
        with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as f:
            self.manifest = json.load(f)
        m = self.manifest
        self.index = int(m["task"]["index"])
        self.count = int(m["task"]["count"])
        self.dimensions = int(m["dimensions"])
        outputs = m.get("outputs", {"dense": True})
        self.dense = bool(outputs.get("dense", True))
        self.shards = ([np.load(os.path.join(folder, s["embeddings"]), mmap_mode="r") for s in m["shards"]]
                       if self.dense else [])
        # bge-m3's sparse rows (CSR) and multi-vector rows (ragged), per shard, memory-mapped.
        self.sparse_columns = int(outputs["sparse"]["columns"]) if "sparse" in outputs else 0
        self.sparse = [tuple(np.load(os.path.join(folder, f"sparse-{s['index']:05d}.{part}.npy"), mmap_mode="r")
                             for part in ("indices", "values", "indptr")) for s in m["shards"]] if self.sparse_columns else []
        self.colbert = [(np.load(os.path.join(folder, f"colbert-{s['index']:05d}.npy"), mmap_mode="r"),
                         np.load(os.path.join(folder, f"colbert-{s['index']:05d}.offsets.npy")))
                        for s in m["shards"]] if "colbert" in outputs else []
        self.first_rows = np.array([int(s["first_row"]) for s in m["shards"]], dtype=np.int64)
        self.rows = int(m["committed"]["rows"])
        records = int(m["counts"]["records"])
        # Record r is task r mod count's; its skipped records (errors.jsonl) have no row.
        own = np.arange(self.index, records, self.count, dtype=np.int64)
        skipped = []
        errors = os.path.join(folder, "errors.jsonl")
        if int(m["counts"].get("skipped", 0)) > 0 and os.path.exists(errors):
            with open(errors, encoding="utf-8") as f:
                skipped = [int(json.loads(line)["record"]) for line in f if line.strip()]
        if skipped:
            own = np.setdiff1d(own, np.array(skipped, dtype=np.int64), assume_unique=True)
        chunking = m.get("chunking")
        if chunking is not None and chunking.get("pool") == "none":
            # A row per chunk: each record's number once per chunk (its ids lines say how many).
            counts = []
            for sh in m["shards"]:
                with open(os.path.join(folder, sh["ids"]), encoding="utf-8") as f:
                    counts.extend(int(line["chunks"]) for line in map(json.loads, f) if int(line["chunk"]) == 0)
            if len(counts) != len(own):
                raise ValueError(f"{folder}: {len(counts)} chunked records for {len(own)} records")
            own = np.repeat(own, np.array(counts, dtype=np.int64))
        self.records = own
        if len(own) != self.rows:
            raise ValueError(f"{folder}: {self.rows} rows for {len(own)} records (the manifest contradicts itself)")

    def shard_of(self, r: int):
        s = int(np.searchsorted(self.first_rows, r, side="right")) - 1
        return s, r - int(self.first_rows[s])

    def row(self, r: int) -> np.ndarray:
        if not self.dense:
            raise ValueError("this output has no dense rows (it was written with --outputs without dense)")
        s, k = self.shard_of(r)
        return self.shards[s][k]

    def sparse_row(self, r: int):
        if not self.sparse:
            raise ValueError("this output has no sparse rows (write them with --outputs ...,sparse on bge-m3)")
        s, k = self.shard_of(r)
        indices, values, indptr = self.sparse[s]
        return indices[indptr[k]:indptr[k + 1]], values[indptr[k]:indptr[k + 1]]

    def colbert_row(self, r: int) -> np.ndarray:
        if not self.colbert:
            raise ValueError("this output has no ColBERT rows (write them with --outputs ...,colbert on bge-m3)")
        s, k = self.shard_of(r)
        vectors, offsets = self.colbert[s]
        return vectors[offsets[k]:offsets[k + 1]]


class EmbeddingSet:
    """The rows of verified `stoke embed` output folders, indexed in record order.

    A view over the memory-mapped shard files: indexing reads only the rows asked
    for (`s[i]`, `s[a:b]`, `s[[i, j]]`); `to_numpy()` makes the one copy a single
    array needs. `records[i]` is row i's record number in the input (records
    skipped as bad have no row); `ids()` reads the ids files. `quality[k]` is
    folder k's int8-vs-f32 agreement from its manifest (None unless int8).
    """

    def __init__(self, folders: List[str]):
        self.folders = folders
        self._tasks = [_Task(f) for f in folders]
        self.dimensions = self._tasks[0].dimensions if self._tasks else 0
        # --precision int8: each folder's measured agreement with f32 (its manifest's
        # "quality"); None for a folder of another precision.
        self.quality = [t.manifest.get("quality") for t in self._tasks]
        self.dtype = self._tasks[0].shards[0].dtype if self._tasks and self._tasks[0].shards else np.dtype(np.float32)
        # Which outputs the rows have (bge-m3: --outputs dense,sparse,colbert).
        self.has_dense = all(t.dense for t in self._tasks)
        self.has_sparse = bool(self._tasks) and all(t.sparse for t in self._tasks)
        self.has_colbert = bool(self._tasks) and all(t.colbert for t in self._tasks)
        self.sparse_columns = self._tasks[0].sparse_columns if self._tasks else 0
        task_of = [np.full(len(t.records), k, dtype=np.int32) for k, t in enumerate(self._tasks)]
        local = [np.arange(len(t.records), dtype=np.int64) for t in self._tasks]
        records = np.concatenate([t.records for t in self._tasks]) if self._tasks else np.zeros(0, np.int64)
        order = np.argsort(records, kind="stable")
        self.records = records[order]
        self._task = np.concatenate(task_of)[order] if self._tasks else np.zeros(0, np.int32)
        self._local = np.concatenate(local)[order] if self._tasks else np.zeros(0, np.int64)

    @property
    def shape(self):
        return (len(self.records), self.dimensions)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, (int, np.integer)):
            i = int(key)
            if i < 0:
                i += len(self)
            if not 0 <= i < len(self):
                raise IndexError(f"row {key}: the set has {len(self)} rows")
            return np.array(self._tasks[self._task[i]].row(int(self._local[i])))
        idx = np.arange(len(self))[key]
        return self._gather(np.atleast_1d(idx))

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(len(self)):
            yield self[i]

    def _gather(self, idx: np.ndarray) -> np.ndarray:
        if not self.has_dense:
            raise ValueError("this output has no dense rows (it was written with --outputs without dense)")
        out = np.empty((len(idx), self.dimensions), dtype=self.dtype)
        for k, t in enumerate(self._tasks):
            mine = np.nonzero(self._task[idx] == k)[0]
            if len(mine) == 0:
                continue
            rows = self._local[idx[mine]]
            shard = np.searchsorted(t.first_rows, rows, side="right") - 1
            for s in np.unique(shard):
                sel = shard == s
                out[mine[sel]] = t.shards[s][rows[sel] - t.first_rows[s]]
        return out

    def lexical_weights(self, i: int) -> dict:
        """Row i's sparse weights as {token id: weight} (FlagEmbedding's lexical_weights, int keys)."""
        ids, values = self._tasks[self._task[i]].sparse_row(int(self._local[i]))
        return {int(t): float(v) for t, v in zip(ids, values)}

    def colbert_vecs(self, i: int) -> np.ndarray:
        """Row i's ColBERT vectors, (tokens, dim): a view of the memory-mapped shard."""
        return self._tasks[self._task[i]].colbert_row(int(self._local[i]))

    def sparse_matrix(self):
        """Every row's sparse weights as one scipy.sparse.csr_matrix (rows, vocabulary size), in record order."""
        import scipy.sparse  # optional: only for this call

        indptr = [0]
        indices, values = [], []
        for i in range(len(self)):
            ids, vals = self._tasks[self._task[i]].sparse_row(int(self._local[i]))
            indices.append(np.asarray(ids))
            values.append(np.asarray(vals, dtype=np.float32))
            indptr.append(indptr[-1] + len(ids))
        cat = (lambda parts, dt: np.concatenate(parts) if parts else np.zeros(0, dt))
        return scipy.sparse.csr_matrix((cat(values, np.float32), cat(indices, np.int32), np.array(indptr, np.int64)),
                                       shape=(len(self), self.sparse_columns))

    def to_numpy(self) -> np.ndarray:
        """All rows as one in-memory array, in record order: the one copy a single array needs."""
        if self.has_dense and len(self._tasks) == 1 and len(self._tasks[0].shards) == 1:
            return np.array(self._tasks[0].shards[0])
        return self._gather(np.arange(len(self)))

    def ids(self) -> List[Any]:
        """Each row's id (its --id-field value, or its record number), in record order."""
        per_task = []
        for folder, t in zip(self.folders, self._tasks):
            values: List[Any] = []
            for s in t.manifest["shards"]:
                with open(os.path.join(folder, s["ids"]), encoding="utf-8") as f:
                    values.extend(json.loads(line) for line in f if line.strip())
            per_task.append(values)
        return [per_task[self._task[i]][self._local[i]] for i in range(len(self))]

    def __repr__(self) -> str:
        return f"stoke.EmbeddingSet({len(self.folders)} folder(s), {len(self)} rows x {self.dimensions}, {self.dtype})"


def load_embeddings(folders: Union[PathLike, Sequence[PathLike]]) -> EmbeddingSet:
    """Checks `stoke embed` output folder(s) as `stoke verify` does, then views their rows in record order.

    Args:
        folders: one folder, or every task's folder of a --shard-index/--num-shards split.

    Raises:
        ValueError: the set does not verify (incomplete, mixed, damaged); the message
            is verify's: one line per problem.
    """
    if isinstance(folders, (str, os.PathLike)):
        folders = [folders]
    paths = [os.fspath(f) for f in folders]
    if not paths:
        raise ValueError("load_embeddings: give at least one folder")
    report = _stoke.verify(paths)
    if report["problems"]:
        lines = "\n".join(report["problems"])
        raise ValueError(
            f"verify found {len(report['problems'])} problem(s) in {len(paths)} folder(s):\n{lines}"
        )
    return EmbeddingSet(paths)
