"""bge-m3's sparse and ColBERT shards through stoke.load_embeddings: the files `stoke embed
--outputs dense,sparse,colbert` writes, read back as FlagEmbedding's shapes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import stoke
from conftest import FIXTURES, REPO, corpus_texts, run_cli, write_jsonl

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


# ---- Model.encode_outputs / encode(output=...): the same outputs in-process, against FlagEmbedding's goldens

import safetensors_min  # noqa: E402

GOLDEN = REPO / "tests" / "data" / "bge_m3_tiny"


def _golden():
    texts = json.loads((GOLDEN / "golden.json").read_text(encoding="utf-8"))["texts"]
    return texts, safetensors_min.read(GOLDEN / "golden.safetensors")


def test_encode_outputs_is_bgem3flagmodel_encode():
    texts, g = _golden()
    model = stoke.Model(M3, device="cpu")
    assert model.outputs["dense"] and model.outputs["sparse"] == "bge-m3" and model.outputs["multi_vector"] == "bge-m3"
    out = model.encode_outputs(texts, return_dense=True, return_sparse=True, return_colbert_vecs=True)
    dense = out["dense_vecs"]
    want_dense = g["dense_vecs"]
    assert dense.shape == want_dense.shape
    assert np.max(np.linalg.norm(dense - want_dense, axis=1) / np.linalg.norm(want_dense, axis=1)) <= 1e-5
    indptr, indices, values = g["sparse_indptr"], g["sparse_indices"], g["sparse_values"]
    for i, weights in enumerate(out["lexical_weights"]):
        want = dict(zip(indices[indptr[i]:indptr[i + 1]].tolist(), values[indptr[i]:indptr[i + 1]].tolist()))
        assert sorted(weights) == sorted(want), f"text {i}"
        assert weights == pytest.approx(want, rel=1e-5, abs=1e-6), f"text {i}"
    offsets, vecs = g["colbert_offsets"], g["colbert_vecs"]
    for i, v in enumerate(out["colbert_vecs"]):
        want = vecs[offsets[i]:offsets[i + 1]]
        assert v.shape == want.shape, f"text {i}"
        assert np.max(np.abs(v - want)) <= 1e-5, f"text {i}"
    # The per-text arrays are views of one buffer, not copies.
    assert all(v.base is not None for v in out["colbert_vecs"])


def test_encode_output_sparse_and_colbert():
    texts, g = _golden()
    model = stoke.Model(M3, device="cpu")
    scipy = pytest.importorskip("scipy.sparse")
    m = model.encode(texts, output="sparse")
    assert isinstance(m, scipy.csr_matrix) and m.shape == (len(texts), model.outputs["sparse_columns"])
    assert np.array_equal(m.indptr, g["sparse_indptr"]) and np.array_equal(m.indices, g["sparse_indices"])
    assert np.allclose(m.data, g["sparse_values"], rtol=1e-5, atol=1e-6)
    v = model.encode(texts[0], output="colbert")
    assert v.shape == (int(g["colbert_offsets"][1]), g["colbert_vecs"].shape[1])
    one = model.encode_outputs(texts[0], return_dense=False, return_sparse=True)
    assert isinstance(one["lexical_weights"], dict) and one["dense_vecs"] is None and one["colbert_vecs"] is None


def test_outputs_a_model_lacks_are_refused():
    bert = stoke.Model(FIXTURES / "models" / "tiny-bert", device="cpu")
    assert bert.outputs == {"dense": True, "sparse": "none", "multi_vector": "none", "colbert_dim": 0,
                            "sparse_columns": 0}
    with pytest.raises(ValueError, match="gives no sparse output"):
        bert.encode(["a"], output="sparse")
    with pytest.raises(ValueError, match="gives no ColBERT vectors"):
        bert.encode_outputs(["a"], return_dense=False, return_colbert_vecs=True)
    with pytest.raises(ValueError, match='output \'words\''):
        bert.encode(["a"], output="words")
    with pytest.raises(ValueError, match="role"):
        stoke.Model(M3, device="cpu").encode_outputs(["a"], return_sparse=True, role="questioner")
