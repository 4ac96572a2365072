"""SPLADE and ColBERT models through stoke.Model: encode(output="sparse" | "colbert") against the
goldens sentence-transformers' SparseEncoder and PyLate wrote (tests/golden/make_splade.py,
tests/golden/make_colbert.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import safetensors_min
import stoke
from conftest import REPO

COLBERT = REPO / "tests" / "data" / "colbert_tiny"


def test_colbert_encode_per_role_is_pylates():
    g = json.loads((COLBERT / "golden.json").read_text(encoding="utf-8"))
    t = safetensors_min.read(COLBERT / "golden.safetensors")
    model = stoke.Model(COLBERT / "model", device="cpu")
    assert model.outputs["dense"] is False and model.outputs["multi_vector"] == "colbert"
    assert model.outputs["colbert_dim"] == g["colbert_dim"]
    for role in ("query", "document"):
        got = model.encode(g["texts"], output="colbert", role=role)
        vecs, offsets = t[role + "_vecs"], t[role + "_offsets"]
        assert len(got) == len(g["texts"])
        for i, v in enumerate(got):
            want = vecs[offsets[i]:offsets[i + 1]]
            assert v.shape == want.shape, f"{role} text {i}"
            err = np.linalg.norm(v - want, axis=1) / np.maximum(np.linalg.norm(want, axis=1), 1e-30)
            assert err.max() <= 1e-5, f"{role} text {i}"
    with pytest.raises(ValueError, match="no dense vector"):
        model.encode_outputs(g["texts"][:1])


SPLADE = REPO / "tests" / "data" / "splade_tiny"


def _splade_golden(variant):
    g = json.loads((SPLADE / "golden.json").read_text(encoding="utf-8"))
    t = safetensors_min.read(SPLADE / "golden.safetensors")
    return g["texts"], t[variant + "_indptr"], t[variant + "_indices"], t[variant + "_values"]


def _expect_csr(m, indptr, indices, values, what):
    """The same ids; each weight within 1e-5 of its row's largest (an f32 dot product's rounding is relative
    to its terms, not to a small result), as the C++ golden tests compare them."""
    assert np.array_equal(m.indptr, indptr), what
    assert np.array_equal(m.indices, indices), what
    for r in range(len(indptr) - 1):
        got, want = m.data[indptr[r]:indptr[r + 1]], values[indptr[r]:indptr[r + 1]]
        if len(want):
            assert np.max(np.abs(got - want)) <= 1e-5 * max(1.0, float(np.max(want))), f"{what} row {r}"


@pytest.mark.parametrize("folder,variant,role,top_k", [
    ("model", "max", "document", 0),
    ("model", "top8", "document", 8),
    ("inference_free", "query", "query", 0),
    ("inference_free", "max", "document", 0),
])
def test_splade_encode_is_sparse_encoders(folder, variant, role, top_k):
    pytest.importorskip("scipy.sparse")
    texts, indptr, indices, values = _splade_golden(variant)
    model = stoke.Model(SPLADE / folder, device="cpu")
    assert model.outputs["dense"] is False and model.outputs["sparse"] == "splade"
    m = model.encode(texts, output="sparse", role=role, sparse_top_k=top_k)
    assert m.shape == (len(texts), model.outputs["sparse_columns"])
    _expect_csr(m, indptr, indices, values, f"{folder} {variant}")
    with pytest.raises(ValueError, match="no dense vector"):
        model.encode(texts[:1])
