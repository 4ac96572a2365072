"""Model.encode(chunk_tokens=...): the rows and spans `stoke embed --chunk-tokens` writes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import corpus_texts, model_dir, read_folder_rows, run_cli, write_jsonl


def documents(n: int, per_doc: int) -> list:
    texts = corpus_texts(n * per_doc)
    return [" ".join(texts[i * per_doc:(i + 1) * per_doc]) for i in range(n)]


def embed_cli(tmp_path, texts: list, *flags: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    inp = write_jsonl(tmp_path / "in.jsonl", texts)
    out = tmp_path / "out"
    r = run_cli("embed", "--model", str(model_dir("tiny-bert")), "--input", str(inp), "--output", str(out),
                "--device", "cpu", "--quiet", *flags)
    assert r.returncode == 0, r.stderr
    ids = [json.loads(line) for line in open(out / "ids-00000.jsonl", encoding="utf-8")]
    return read_folder_rows(out), ids


FLAGS = ("--chunk-tokens", "30", "--chunk-overlap", "5", "--chunk-boundary", "sentence")


def test_chunks_and_spans_equal_stoke_embed(tmp_path, bert):
    docs = documents(12, 8)
    emb, spans = bert.encode(docs, chunk_tokens=30, chunk_overlap=5, chunk_boundary="sentence")
    want, ids = embed_cli(tmp_path, docs, *FLAGS)
    assert emb.shape == want.shape
    assert np.allclose(emb, want, atol=1e-6, rtol=0)  # other batches: f32 rounding of the GEMMs only
    assert len(spans) == len(ids)
    for s, line in zip(spans, ids):
        assert s["text"] == line["record"] and s["chunk"] == line["chunk"] and s["chunks"] == line["chunks"]
        assert [s["token_start"], s["token_end"]] == line["tokens"]
        assert [s["byte_start"], s["byte_end"]] == line["bytes"]
        assert [s["char_start"], s["char_end"]] == line["chars"]
        text = docs[s["text"]]
        assert text[s["char_start"]:s["char_end"]].encode() == text.encode()[s["byte_start"]:s["byte_end"]]


def test_late_chunking_equals_stoke_embed(tmp_path, bert):
    docs = documents(6, 25)  # longer than the max length: macro-windows
    emb, spans = bert.encode(docs, chunk_tokens=30, chunk_overlap=5, chunk_boundary="sentence", late_chunking=True)
    want, ids = embed_cli(tmp_path, docs, *FLAGS, "--late-chunking")
    assert len(spans) == len(ids) == emb.shape[0]
    assert np.allclose(emb, want, atol=2e-6, rtol=0)  # span means on the host vs. on the device


def test_pool_chunks_gives_one_row_per_text(tmp_path, bert):
    docs = documents(5, 10)
    emb = bert.encode(docs, chunk_tokens=30, chunk_overlap=5, chunk_boundary="sentence", pool_chunks="mean")
    want, _ = embed_cli(tmp_path, docs, *FLAGS, "--pool-chunks", "mean")
    assert emb.shape == (5, bert.dimension)
    assert np.allclose(emb, want, atol=1e-6, rtol=0)
    # numpy over the chunk rows: each record's mean, then normalized as the model's rows are.
    rows, ids = embed_cli(tmp_path / "chunks", docs, *FLAGS)
    record = np.array([line["record"] for line in ids])
    for mode, reduce in (("mean", np.mean), ("max", np.max)):
        pooled, _ = embed_cli(tmp_path / mode, docs, *FLAGS, "--pool-chunks", mode)
        by_numpy = np.stack([reduce(rows[record == r].astype(np.float64), axis=0) for r in range(len(docs))])
        by_numpy /= np.linalg.norm(by_numpy, axis=1, keepdims=True)
        assert np.allclose(pooled, by_numpy, atol=1e-6, rtol=0), mode
    one = bert.encode(docs[0], chunk_tokens=30, chunk_overlap=5, chunk_boundary="sentence", pool_chunks="mean")
    assert one.shape == (bert.dimension,)


def test_bad_chunk_arguments_are_refused(bert):
    with pytest.raises(ValueError, match="expected fewer tokens than --chunk-tokens 8"):
        bert.encode(["a text"], chunk_tokens=8, chunk_overlap=8)
    with pytest.raises(ValueError, match="more than the max length 128"):
        bert.encode(["a text"], chunk_tokens=500)
    with pytest.raises(ValueError, match='chunk_boundary "clause": expected none, word, sentence or paragraph'):
        bert.encode(["a text"], chunk_tokens=8, chunk_boundary="clause")
    with pytest.raises(ValueError, match="need chunk_tokens"):
        bert.encode(["a text"], late_chunking=True)


def test_load_embeddings_reads_chunked_folders(tmp_path, bert):
    import stoke

    docs = documents(8, 8)
    want, ids = embed_cli(tmp_path, docs, *FLAGS)
    s = stoke.load_embeddings(tmp_path / "out")
    assert len(s) == len(ids) == want.shape[0]
    assert np.array_equal(s.to_numpy(), want)
    assert list(s.records) == [line["record"] for line in ids]
    assert s.ids() == ids
