"""predict (classifiers, cross-encoders) and rank, against `stoke classify`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import corpus_texts, run_cli, write_jsonl, model_dir


def classify_cli(tmp_path, records: list) -> list:
    inp = tmp_path / "in.jsonl"
    with open(inp, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    out = tmp_path / "out.jsonl"
    r = run_cli("classify", "--model", str(model_dir("tiny-bert")), "--input", str(inp), "--output", str(out),
                "--device", "cpu", "--quiet")
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in open(out, encoding="utf-8")]


def test_predict_equals_stoke_classify(tmp_path, bert):
    texts = corpus_texts(40)
    want = classify_cli(tmp_path, [{"text": t} for t in texts])
    logits = bert.predict(texts, raw_scores=True)
    assert logits.shape == (40, 3)
    assert np.allclose(logits, np.array([w["logits"] for w in want]), atol=1e-5, rtol=0)
    probs = bert.predict(texts)
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    labels = [bert.labels[i] for i in probs.argmax(axis=1)]
    assert labels == [w["label"] for w in want]


def test_predict_pairs(tmp_path, bert):
    pairs = [(a, b) for a, b in zip(corpus_texts(10), corpus_texts(10, offset=500))]
    want = classify_cli(tmp_path, [{"text": a, "text_pair": b} for a, b in pairs])
    got = bert.predict(pairs, raw_scores=True)
    assert np.allclose(got, np.array([w["logits"] for w in want]), atol=1e-5, rtol=0)
    one = bert.predict(pairs[0], raw_scores=True)
    assert one.shape == (3,) and np.allclose(one, got[0], atol=1e-6)
    with pytest.raises(TypeError, match=r"sentences\[1\]: expected a str or a pair"):
        bert.predict([("a", "b"), ("a", "b", "c")])


def test_rank_needs_one_label(bert):
    with pytest.raises(ValueError, match="rank: needs a cross-encoder with one output label"):
        bert.rank("q", ["a", "b"])


def test_rank_orders_by_score(tmp_path):
    import shutil

    import stoke

    # A one-label cross-encoder from the fixture: keep the first row of the classifier.
    from safetensors_min import one_label_copy

    d = one_label_copy(model_dir("tiny-bert"), tmp_path / "ce")
    m = stoke.Model(d, device="cpu")
    docs = corpus_texts(12)
    ranked = m.rank("what is art?", docs, top_k=5, return_documents=True)
    assert len(ranked) == 5
    scores = m.predict([("what is art?", x) for x in docs])
    assert scores.shape == (12,)
    assert [r["corpus_id"] for r in ranked] == list(np.argsort(-scores, kind="stable")[:5])
    assert all(ranked[i]["score"] >= ranked[i + 1]["score"] for i in range(4))
    assert ranked[0]["text"] == docs[ranked[0]["corpus_id"]]
    assert np.allclose(scores, 1 / (1 + np.exp(-m.predict([("what is art?", x) for x in docs], raw_scores=True))),
                       atol=1e-6)
