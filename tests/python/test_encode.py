"""Model.encode: the same rows as `stoke embed`, and every keyword of sentence-transformers' encode."""

from __future__ import annotations

import numpy as np
import pytest

import stoke
from conftest import MODELS, corpus_texts, golden_texts, model_dir, read_folder_rows, run_cli, write_jsonl


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def embed_cli(tmp_path, model: str, texts: list, *flags: str) -> np.ndarray:
    inp = write_jsonl(tmp_path / "in.jsonl", texts)
    out = tmp_path / "out"
    r = run_cli("embed", "--model", str(model_dir(model)), "--input", str(inp), "--output", str(out),
                "--device", "cpu", "--quiet", *flags)
    assert r.returncode == 0, r.stderr
    return read_folder_rows(out)


@pytest.mark.parametrize("name", MODELS)
def test_encode_equals_stoke_embed_bit_for_bit(tmp_path, name):
    texts = golden_texts() + corpus_texts(700)
    model = stoke.Model(model_dir(name), device="cpu")
    got = model.encode(texts)
    want = embed_cli(tmp_path, name, texts)
    assert got.shape == want.shape == (len(texts), model.dimension)
    assert got.dtype == np.float32
    assert np.array_equal(bits(got), bits(want))


def test_prompt_and_truncate_dim_equal_embed_flags(tmp_path, bert):
    texts = corpus_texts(200)
    got = bert.encode(texts, prompt="query: ", truncate_dim=24)
    want = embed_cli(tmp_path, "tiny-bert", texts, "--prompt", "query: ", "--dimensions", "24")
    assert np.array_equal(bits(got), bits(want))


def test_batch_shape_keywords_equal_embed_flags(tmp_path, bert):
    texts = corpus_texts(300)
    got = bert.encode(texts, batch_size=7, batch_tokens=2048)
    want = embed_cli(tmp_path, "tiny-bert", texts, "--max-batch-size", "7", "--batch-tokens", "2048")
    assert np.array_equal(bits(got), bits(want))
    # Other batches: the same rows up to f32 rounding.
    assert np.allclose(bert.encode(texts), got, atol=1e-6, rtol=0)


def test_one_string_gives_one_vector(bert):
    texts = corpus_texts(5)
    many = bert.encode(texts)
    one = bert.encode(texts[2])
    assert one.shape == (bert.dimension,)
    assert np.allclose(one, many[2], atol=1e-6, rtol=0)


def test_properties(bert):
    assert bert.dimension == 64
    assert bert.get_sentence_embedding_dimension() == 64
    assert bert.max_length == 128 == bert.get_max_seq_length()
    assert bert.architecture == "BertForSequenceClassification"
    assert bert.pooling == "mean"
    assert bert.normalize is True
    assert bert.device == "cpu"
    assert bert.dtype == "f32"
    assert bert.labels == ["LABEL_0", "LABEL_1", "LABEL_2"]
    assert "tiny-bert" in repr(bert)


def test_model_normalize_applies_then_truncate_then_normalize_embeddings(bert):
    texts = corpus_texts(20)
    full = bert.encode(texts)
    assert np.allclose(np.linalg.norm(full, axis=1), 1.0, atol=1e-5)  # the model's Normalize module
    cut = bert.encode(texts, truncate_dim=16)
    assert cut.shape == (20, 16)
    assert np.array_equal(bits(cut), bits(full[:, :16]))  # cut after the model's Normalize
    renorm = bert.encode(texts, truncate_dim=16, normalize_embeddings=True)
    want = full[:, :16] / np.linalg.norm(full[:, :16], axis=1, keepdims=True)
    assert np.allclose(renorm, want, atol=1e-6, rtol=0)
    assert np.allclose(np.linalg.norm(renorm, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("precision,dtype,width", [("int8", np.int8, 64), ("uint8", np.uint8, 64),
                                                   ("binary", np.int8, 8), ("ubinary", np.uint8, 8)])
def test_precision_quantizes_as_quantize_embeddings(bert, precision, dtype, width):
    texts = corpus_texts(50)
    full = bert.encode(texts)
    q = bert.encode(texts, precision=precision)
    assert q.dtype == dtype and q.shape == (50, width)
    assert np.array_equal(q, stoke.quantize_embeddings(full, precision))


def test_quantize_embeddings_values():
    e = np.array([[0.5, -1.0, 0.0, 2.0, 0.1, -0.1, 0.3, 0.9], [1.5, 1.0, -2.0, 0.0, 0.2, 0.1, -0.3, -0.9]],
                 dtype=np.float32)
    u = stoke.quantize_embeddings(e, "uint8")
    # Column ranges from the embeddings: min -> bucket 0, max -> the top one (floored: 254 or 255).
    assert u[0, 0] == 0 and u[1, 0] >= 254 and u[0, 1] == 0 and u[1, 1] >= 254
    assert np.array_equal(stoke.quantize_embeddings(e, "int8"), (u.astype(np.int16) - 128).astype(np.int8))
    assert np.array_equal(stoke.quantize_embeddings(e, "ubinary"),
                          np.array([[0b10011011], [0b11001100]], dtype=np.uint8))
    assert np.array_equal(stoke.quantize_embeddings(e, "binary"),
                          np.array([[0b10011011 - 128], [0b11001100 - 128]], dtype=np.int8))
    with pytest.raises(ValueError, match="single embedding"):
        stoke.quantize_embeddings(e[:1], "int8")


def test_convert_to_numpy_false_gives_rows(bert):
    texts = corpus_texts(4)
    rows = bert.encode(texts, convert_to_numpy=False)
    assert isinstance(rows, list) and len(rows) == 4
    assert all(r.shape == (64,) for r in rows)
    assert np.array_equal(np.stack(rows), bert.encode(texts))


def test_token_embeddings(bert):
    texts = corpus_texts(6) + ["short"]
    tokens = bert.encode(texts, output_value="token_embeddings")
    ids = bert.tokenize(texts)
    lengths = ids["attention_mask"].sum(axis=1)
    assert isinstance(tokens, list) and len(tokens) == len(texts)
    sentence = bert.encode(texts)
    for t, n, s in zip(tokens, lengths, sentence):
        assert t.shape == (n, 64) and t.dtype == np.float32
        mean = t.mean(axis=0)
        assert np.allclose(mean / np.linalg.norm(mean), s, atol=1e-5)  # mean pooling, then Normalize
    one = bert.encode("short", output_value="token_embeddings")
    assert one.shape == tokens[-1].shape


def test_tokenize_matches_the_golden_tokens(bert):
    import json
    from conftest import FIXTURES

    with open(FIXTURES / "golden" / "tiny-bert.tokens.jsonl", encoding="utf-8") as f:
        golden = [json.loads(line) for line in f]
    texts = golden_texts()
    out = bert.tokenize(texts)
    assert out["input_ids"].dtype == np.int64
    compared = 0
    for g in golden:
        i, ids = g["text_index"], g["ids"]
        n = int(out["attention_mask"][i].sum())
        if len(ids) <= bert.max_length:
            assert out["input_ids"][i, :n].tolist() == ids
            compared += 1
        else:  # cut to max_length, the closing special token kept
            assert out["input_ids"][i, :n].tolist() == ids[: bert.max_length - 1] + ids[-1:]
    assert compared > 50


def test_prompt_name_and_default_prompt(prompted_model_dir):
    m = stoke.Model(prompted_model_dir, device="cpu")
    assert m.prompts["query"] == "query: " and m.default_prompt_name == "classify"
    texts = corpus_texts(10)
    explicit = m.encode(texts, prompt="topic: ")
    assert np.array_equal(bits(m.encode(texts)), bits(explicit))  # the default prompt name applies
    assert np.array_equal(bits(m.encode(texts, prompt_name="query")), bits(m.encode(texts, prompt="query: ")))
    assert np.array_equal(bits(m.encode_query(texts)), bits(m.encode(texts, prompt="query: ")))
    assert np.array_equal(bits(m.encode_document(texts)), bits(m.encode(texts, prompt="passage: ")))
    # An explicit prompt wins over a name; an empty one means none.
    assert np.array_equal(bits(m.encode(texts, prompt="", prompt_name="query")), bits(m.encode(texts, prompt="")))
    assert not np.array_equal(bits(m.encode(texts, prompt="")), bits(explicit))
    with pytest.raises(ValueError, match="prompt_name nope: the model defines no such prompt"):
        m.encode(texts, prompt_name="nope")


def test_encode_query_without_prompts_uses_none(bert):
    texts = corpus_texts(5)
    assert np.array_equal(bits(bert.encode_query(texts)), bits(bert.encode(texts)))
    assert np.array_equal(bits(bert.encode_document(texts)), bits(bert.encode(texts)))


def test_show_progress_bar(bert, capsys):
    got = bert.encode(corpus_texts(30), show_progress_bar=True)
    assert got.shape == (30, 64)


def test_empty_input(bert):
    assert bert.encode([]).shape == (0, 64)
    assert bert.encode([], output_value="token_embeddings") == []


def test_similarity(bert):
    e = bert.encode(corpus_texts(3))
    s = bert.similarity(e, e)
    assert s.shape == (3, 3) and np.allclose(np.diag(s), 1.0, atol=1e-5)


def test_bad_arguments(bert):
    with pytest.raises(ValueError, match='precision "float16"'):
        bert.encode(["a"], precision="float16")
    with pytest.raises(ValueError, match="output_value"):
        bert.encode(["a"], output_value="nope")
    with pytest.raises(ValueError, match="truncate_dim"):
        bert.encode(["a"], truncate_dim=0)
    with pytest.raises(ValueError, match="batch_size"):
        bert.encode(["a"], batch_size=0)
    with pytest.raises(ValueError, match="batch_tokens: expected a positive number"):
        bert.encode(["a"], batch_tokens=-1)
    with pytest.raises(ValueError, match="this model is open on cpu"):
        bert.encode(["a"], device="cuda:3")
    with pytest.raises(TypeError, match=r"sentences\[1\]: expected a str, got int"):
        bert.encode(["a", 3, "b"])
    with pytest.raises(TypeError, match=r"sentences\[0\]: expected a str, got NoneType"):
        bert.encode([None])
    with pytest.raises(TypeError, match="got bytes"):
        bert.encode(b"abc")
    # The model still works after refused calls.
    assert bert.encode("fine").shape == (64,)
