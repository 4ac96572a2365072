"""bge-m3's sparse and ColBERT shards through stoke.load_embeddings: the files `stoke embed
--outputs dense,sparse,colbert` writes, read back as FlagEmbedding's shapes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import stoke
from conftest import REPO, corpus_texts, run_cli, write_jsonl

M3 = REPO / "tests" / "data" / "bge_m3_tiny" / "model"


def test_sparse_and_colbert_rows_load_as_flagembedding_gives_them(tmp_path):
    texts = corpus_texts(120)
    inp = write_jsonl(tmp_path / "in.jsonl", texts)
    out = tmp_path / "out"
    r = run_cli("embed", "--model", str(M3), "--input", str(inp), "--output", str(out), "--device", "cpu", "--quiet",
                "--outputs", "dense,sparse,colbert", "--shard-size", "50")
    assert r.returncode == 0, r.stderr
    s = stoke.load_embeddings(out)
    assert s.has_dense and s.has_sparse and s.has_colbert
    assert len(s) == 120 and s.sparse_columns > 0
    for i in (0, 49, 50, 119):
        w = s.lexical_weights(i)
        assert w and all(isinstance(k, int) and v > 0 for k, v in w.items())
        v = s.colbert_vecs(i)
        assert v.ndim == 2 and v.shape[0] >= 1
        assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    scipy = pytest.importorskip("scipy.sparse")
    m = s.sparse_matrix()
    assert m.shape == (120, s.sparse_columns)
    assert dict(zip(m[50].indices.tolist(), m[50].data.tolist())) == pytest.approx(s.lexical_weights(50))


def test_an_output_without_dense_rows_says_so(tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", corpus_texts(10))
    out = tmp_path / "out"
    r = run_cli("embed", "--model", str(M3), "--input", str(inp), "--output", str(out), "--device", "cpu", "--quiet",
                "--outputs", "sparse")
    assert r.returncode == 0, r.stderr
    s = stoke.load_embeddings(out)
    assert not s.has_dense and s.has_sparse
    with pytest.raises(ValueError, match="no dense rows"):
        s.to_numpy()
    assert len(s.lexical_weights(3)) > 0
