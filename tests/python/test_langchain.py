"""The duck-typed LangChain / LlamaIndex adapter."""

from __future__ import annotations

import asyncio

import numpy as np

import stoke
from conftest import corpus_texts


def test_adapter_methods(bert):
    e = stoke.StokeEmbeddings(bert)
    texts = corpus_texts(3)
    docs = e.embed_documents(texts)
    assert isinstance(docs, list) and len(docs) == 3 and isinstance(docs[0], list) and isinstance(docs[0][0], float)
    assert np.allclose(np.array(docs, dtype=np.float32), bert.encode(texts), atol=0)
    q = e.embed_query(texts[0])
    assert isinstance(q, list) and len(q) == 64
    assert np.allclose(q, bert.encode(texts[0]), atol=1e-6)
    assert asyncio.run(e.aembed_query(texts[0])) == q
    assert e.get_text_embedding_batch(texts) == docs


def test_adapter_passes_encode_keywords(bert):
    e = stoke.StokeEmbeddings(bert, truncate_dim=8, normalize_embeddings=True)
    v = e.embed_query("hello")
    assert len(v) == 8 and abs(np.linalg.norm(v) - 1) < 1e-5
