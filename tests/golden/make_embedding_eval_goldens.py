#!/usr/bin/env python3
"""Goldens of the embedding evaluation metrics (src/train/embedding_eval_metrics.h).

What it makes: tests/golden/embedding_eval.expected.json, read by
tests/train/test_embedding_eval_metrics.cc, with three cases, each holding its
float32 embeddings and the metrics sentence-transformers itself computes on them:

  retrieval     40 queries x 300 documents x 16 dims, 1-3 relevant documents per
                query (3 queries with none: ST leaves them out), scores tie-free
                with a margin (checked below), so f32 (ST) and f64 (stoke) rank alike
  ties          8 queries x 24 documents x 8 dims, every document vector present
                three times: exact score ties, which ST 6.2 breaks by ascending
                corpus id (ids shuffled, so id order is not row order)
  scored_pairs  60 pairs x 16 dims, gold scores rounded to one decimal (ties, so
                Spearman's average ranks matter), cosines tie-free

ST's numbers come from its own evaluators, InformationRetrievalEvaluator and
EmbeddingSimilarityEvaluator, called as a trainer calls them, on a stand-in model
whose encode* methods return the fixed embeddings (no network, no weights).

Pinned versions (the script refuses others): torch 2.15.0 (CPU),
sentence-transformers 6.2.0, scipy 1.17.1, numpy 2.4.6.

Run from anywhere:
    /work/main/.venv-bench-st/bin/python tests/golden/make_embedding_eval_goldens.py
Deterministic: fixed seeds, one torch thread; a rerun writes the same bytes.
"""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import numpy as np
import scipy
import sentence_transformers
import torch
from sentence_transformers.sentence_transformer.evaluation import (
    EmbeddingSimilarityEvaluator,
    InformationRetrievalEvaluator,
)
from sentence_transformers.util import cos_sim

PINNED = {
    "torch": (torch.__version__.split("+")[0], "2.15.0"),
    "sentence_transformers": (sentence_transformers.__version__, "6.2.0"),
    "scipy": (scipy.__version__, "1.17.1"),
    "numpy": (np.__version__, "2.4.6"),
}

OUT = Path(__file__).resolve().parent / "embedding_eval.expected.json"
# Consecutive scores in every ranked prefix that decides a metric (the top 101
# of each query) differ by at least this much in both f32 and f64, and the two orders
# are asserted equal: ST's f32
# scores and stoke's f64 ones then give the same order.
MIN_GAP = 5e-7  # about 8 f32 ulps of 1.0; the f32 cosines err by about one


class FixedEmbeddings:
    """What the evaluators use of a SentenceTransformer, answering from a table."""

    similarity_fn_name = "cosine"

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table
        self.model_card_data = types.SimpleNamespace(set_evaluation_metrics=lambda *a, **k: None)

    def similarity(self, a, b):
        return cos_sim(a, b)

    def encode(self, sentences, convert_to_tensor=False, **kwargs):
        rows = np.stack([self.table[s] for s in sentences]).astype(np.float32)
        return torch.from_numpy(rows) if convert_to_tensor else rows

    encode_query = encode
    encode_document = encode


def f32_rows(a: np.ndarray) -> list[list[float]]:
    # float(np.float32) is the f32 value exactly; JSON keeps it exactly.
    return [[float(v) for v in row] for row in a.astype(np.float32)]


def check_tie_free(q: np.ndarray, c: np.ndarray, depth: int) -> float:
    """The smallest gap between consecutive top-`depth` scores, f32 and f64; both orders must agree."""
    s32 = cos_sim(torch.from_numpy(q), torch.from_numpy(c)).numpy()
    q64, c64 = q.astype(np.float64), c.astype(np.float64)
    s64 = (q64 / np.linalg.norm(q64, axis=1, keepdims=True)) @ (c64 / np.linalg.norm(c64, axis=1, keepdims=True)).T
    smallest = np.inf
    for i in range(len(q)):
        o32 = np.argsort(-s32[i], kind="stable")[:depth]
        o64 = np.argsort(-s64[i], kind="stable")[:depth]
        assert (o32 == o64).all(), f"query {i}: f32 and f64 orders differ"
        smallest = min(smallest, float(np.min(-np.diff(s32[i][o32]))), float(np.min(-np.diff(s64[i][o64]))))
    return smallest


def ir_case(queries: np.ndarray, corpus: np.ndarray, corpus_ids: list[str], relevant: list[list[int]]) -> dict:
    qids = [f"q{i:03d}" for i in range(len(queries))]
    table = {qid: queries[i] for i, qid in enumerate(qids)}
    table.update({f"text-{cid}": corpus[i] for i, cid in enumerate(corpus_ids)})
    evaluator = InformationRetrievalEvaluator(
        queries={qid: qid for qid in qids},
        corpus={cid: f"text-{cid}" for cid in corpus_ids},
        relevant_docs={qids[i]: {corpus_ids[j] for j in rel} for i, rel in enumerate(relevant) if rel},
        write_csv=False,
    )
    metrics = evaluator(FixedEmbeddings(table))
    return {
        "queries": f32_rows(queries),
        "corpus": f32_rows(corpus),
        "corpus_ids": corpus_ids,
        "relevant": relevant,
        "queries_evaluated": len(evaluator.queries_ids),
        "metrics": {k: float(v) for k, v in metrics.items()},
    }


def retrieval(rng: np.random.Generator) -> dict:
    n_q, n_c, dim = 40, 300, 16
    corpus = rng.standard_normal((n_c, dim)).astype(np.float32)
    relevant, queries = [], []
    for i in range(n_q):
        rel = [] if i % 13 == 5 else sorted(rng.choice(n_c, size=int(rng.integers(1, 4)), replace=False).tolist())
        centre = corpus[rel].mean(axis=0) if rel else np.zeros(dim, dtype=np.float32)
        # Noise large enough that many relevant documents fall below rank 1 (the metrics are not all 1).
        queries.append(centre + rng.standard_normal(dim).astype(np.float32) * float(rng.uniform(0.3, 1.6)))
        relevant.append(rel)
    queries = np.stack(queries).astype(np.float32)
    gap = check_tie_free(queries, corpus, 101)
    assert gap > MIN_GAP, f"scores too close for an f32/f64 comparison: {gap}"
    ids = [f"doc-{k}" for k in rng.permutation(n_c)]
    case = ir_case(queries, corpus, ids, relevant)
    case["min_score_gap"] = gap
    return case


def ties(rng: np.random.Generator) -> dict:
    n_q, distinct, copies, dim = 8, 8, 3, 8
    base = rng.standard_normal((distinct, dim)).astype(np.float32)
    rows = rng.permutation(np.repeat(np.arange(distinct), copies))
    corpus = base[rows]
    # Each query sits near one or two documents, so the three tied copies of a
    # relevant vector share the top ranks and the tie order decides @1 and @3.
    relevant = [sorted(rng.choice(len(corpus), size=int(rng.integers(1, 3)), replace=False).tolist()) for _ in range(n_q)]
    q = np.stack([corpus[r].mean(axis=0) + rng.standard_normal(dim).astype(np.float32) * 0.1 for r in relevant])
    q = q.astype(np.float32)
    # Exact copies must score exactly alike in ST's f32 (else this case tests nothing).
    s32 = cos_sim(torch.from_numpy(q), torch.from_numpy(corpus)).numpy()
    for v in range(distinct):
        same = np.where(rows == v)[0]
        assert (s32[:, same] == s32[:, same[:1]]).all(), "copies of a document scored differently in f32"
    ids = [f"t{k:02d}" for k in rng.permutation(len(corpus))]
    return ir_case(q, corpus, ids, relevant)


def scored_pairs(rng: np.random.Generator) -> dict:
    n, dim = 60, 16
    a = rng.standard_normal((n, dim)).astype(np.float32)
    mix = rng.uniform(0.0, 1.0, n).astype(np.float32)
    b = (a * mix[:, None] + rng.standard_normal((n, dim)).astype(np.float32) * (1 - mix[:, None])).astype(np.float32)
    cos = torch.nn.functional.cosine_similarity(torch.from_numpy(a).double(), torch.from_numpy(b).double()).numpy()
    assert np.min(np.diff(np.sort(cos))) > MIN_GAP, "cosines too close for an f32/f64 comparison"
    gold = [round(float(v), 1) for v in cos + rng.normal(0, 0.15, n)]
    assert len(set(gold)) < n, "no ties in the gold scores"
    table = {f"a{i}": a[i] for i in range(n)} | {f"b{i}": b[i] for i in range(n)}
    evaluator = EmbeddingSimilarityEvaluator(
        [f"a{i}" for i in range(n)], [f"b{i}" for i in range(n)], gold, similarity_fn_names=["cosine"], write_csv=False
    )
    metrics = evaluator(FixedEmbeddings(table))
    return {"a": f32_rows(a), "b": f32_rows(b), "gold": gold, "metrics": {k: float(v) for k, v in metrics.items()}}


def dump(v, indent: str = "") -> str:
    """JSON with objects one key a line and every list of numbers (a row) on one line."""
    if isinstance(v, dict):
        inner = indent + " "
        items = [f"{inner}{json.dumps(k)}: {dump(x, inner)}" for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(v, list) and v and isinstance(v[0], list):
        inner = indent + " "
        return "[\n" + ",\n".join(inner + json.dumps(x) for x in v) + "\n" + indent + "]"
    return json.dumps(v)


def main() -> int:
    wrong = {k: v for k, v in PINNED.items() if v[0] != v[1]}
    if wrong:
        print("wrong versions (have, want): " + json.dumps(wrong), file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    doc = {
        "generator": "tests/golden/make_embedding_eval_goldens.py",
        "versions": {k: v[0] for k, v in PINNED.items()},
        "retrieval": retrieval(np.random.default_rng(34001)),
        "ties": ties(np.random.default_rng(34002)),
        "scored_pairs": scored_pairs(np.random.default_rng(34003)),
    }
    OUT.write_text(dump(doc) + "\n")
    print(f"wrote {OUT}")
    for case in ("retrieval", "ties", "scored_pairs"):
        print(case, json.dumps(doc[case]["metrics"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
