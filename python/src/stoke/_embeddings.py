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
        self.shards = [np.load(os.path.join(folder, s["embeddings"]), mmap_mode="r") for s in m["shards"]]
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
        self.records = own
        if len(own) != self.rows:
            raise ValueError(f"{folder}: {self.rows} rows for {len(own)} records (the manifest contradicts itself)")

    def row(self, r: int) -> np.ndarray:
        s = int(np.searchsorted(self.first_rows, r, side="right")) - 1
        return self.shards[s][r - int(self.first_rows[s])]


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

    def to_numpy(self) -> np.ndarray:
        """All rows as one in-memory array, in record order: the one copy a single array needs."""
        if len(self._tasks) == 1 and len(self._tasks[0].shards) == 1:
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
