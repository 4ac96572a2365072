"""encode equals SentenceTransformer(path).encode within 1e-5 (where sentence-transformers is installed).

sentence-transformers (and torch) are not in the test venv: the oracle runs in
the Python that STOKE_ORACLE_PYTHON names, in a subprocess, and these tests
are skipped, saying so, without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import numpy as np
import pytest

import stoke
from conftest import MODELS, corpus_texts, golden_texts, model_dir, run_cli

ORACLE = os.environ.get("STOKE_ORACLE_PYTHON", "")

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from sentence_transformers import SentenceTransformer
    path, texts_file, out, kwargs = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    texts = json.load(open(texts_file, encoding="utf-8"))
    m = SentenceTransformer(path, device="cpu")
    np.save(out, np.asarray(m.encode(texts, batch_size=16, **kwargs), dtype=np.float32))
    prompt = kwargs.get("prompt", "")
    ids = m.tokenizer([prompt + t for t in texts], truncation=True, max_length=m.max_seq_length)["input_ids"]
    json.dump(ids, open(out + ".ids.json", "w"))
    """
)


def oracle_encode(tmp_path, name, texts, path=None, **kwargs) -> np.ndarray:
    if not ORACLE:
        pytest.skip("STOKE_ORACLE_PYTHON is not set: no Python with sentence-transformers to compare with")
    probe = subprocess.run([ORACLE, "-c", "import sentence_transformers"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"sentence-transformers is not importable by {ORACLE}: {probe.stderr.strip().splitlines()[-1:]}")
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    script = tmp_path / "oracle.py"
    script.write_text(SCRIPT)
    out = tmp_path / "oracle.npy"
    env = dict(os.environ, OMP_NUM_THREADS="2", PYTHONPATH="")
    r = subprocess.run([ORACLE, str(script), str(path or model_dir(name)), str(tmp_path / "texts.json"), str(out),
                        json.dumps(kwargs)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return np.load(out), json.loads(open(str(out) + ".ids.json").read())


def same_tokens(model, texts, oracle_ids, prompt=""):
    """Rows whose tokens the oracle's tokenizer agrees on. stoke's tokenizers equal
    transformers' reference (slow) tokenizers (the golden tests); the
    sentence-transformers install may carry a newer transformers whose XLM-R
    tokenizer treats some control characters differently (golden text 50), and a
    row of other tokens is another input, not a difference of the encoder."""
    t = model.tokenize([prompt + x for x in texts])
    rows = [i for i in range(len(texts)) if t["input_ids"][i, : int(t["attention_mask"][i].sum())].tolist() == oracle_ids[i]]
    assert len(rows) >= 0.95 * len(texts), f"only {len(rows)} of {len(texts)} texts tokenize alike"
    return rows


@pytest.mark.parametrize("name", MODELS)
def test_encode_equals_sentence_transformers(tmp_path, name):
    texts = golden_texts() + corpus_texts(200)
    want, ids = oracle_encode(tmp_path, name, texts)
    model = stoke.Model(model_dir(name), device="cpu")
    got = model.encode(texts)
    assert got.shape == want.shape
    rows = same_tokens(model, texts, ids)
    assert np.abs(got[rows] - want[rows]).max() <= 1e-5


def test_truncate_normalize_equal_sentence_transformers(tmp_path):
    texts = corpus_texts(50)
    want, ids = oracle_encode(tmp_path, "tiny-bert", texts, truncate_dim=16, normalize_embeddings=True)
    got = stoke.Model(model_dir("tiny-bert"), device="cpu").encode(texts, truncate_dim=16, normalize_embeddings=True)
    assert np.abs(got - want).max() <= 1e-5


def test_prompt_equals_sentence_transformers(tmp_path):
    texts = corpus_texts(30)
    want, ids = oracle_encode(tmp_path, "tiny-bert", texts, prompt="query: ")
    got = stoke.Model(model_dir("tiny-bert"), device="cpu").encode(texts, prompt="query: ")
    assert np.abs(got - want).max() <= 1e-5


QUANTIZE = textwrap.dedent(
    """
    import sys
    import numpy as np
    from sentence_transformers.quantization import quantize_embeddings
    e = np.load(sys.argv[1])
    for p in ("int8", "uint8", "binary", "ubinary"):
        np.save(sys.argv[2] + p + ".npy", quantize_embeddings(e, p))
    """
)


def test_quantize_embeddings_equals_sentence_transformers(tmp_path):
    oracle_encode(tmp_path, "tiny-bert", ["x"])  # skips without the oracle
    e = stoke.Model(model_dir("tiny-bert"), device="cpu").encode(corpus_texts(120))
    np.save(tmp_path / "e.npy", e)
    (tmp_path / "q.py").write_text(QUANTIZE)
    r = subprocess.run([ORACLE, str(tmp_path / "q.py"), str(tmp_path / "e.npy"), str(tmp_path / "q-")],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=""), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    for p in ("int8", "uint8", "binary", "ubinary"):
        want = np.load(tmp_path / f"q-{p}.npy")
        got = stoke.quantize_embeddings(e, p)
        assert got.dtype == want.dtype and np.array_equal(got, want), p


def test_a_trained_embedding_model_loads_in_sentence_transformers(tmp_path):
    """stoke train --objective mnrl writes a folder SentenceTransformer(path) loads
    as it is (modules, pooling, Normalize, AutoModel names, no warning about
    missing weights), and both embed it alike."""
    texts = corpus_texts(64)
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"anchor": a, "positive": b}) + "\n" for a, b in zip(texts[0::2], texts[1::2])))
    out = tmp_path / "trained"
    r = run_cli("train", "--objective", "mnrl", "--model", str(model_dir("tiny-bert")), "--train", str(data),
                "--batch-size", "8", "--max-steps", "3", "--lr", "1e-3", "--output", str(out), "--quiet")
    assert r.returncode == 0, r.stderr
    probe = corpus_texts(40, offset=500)
    want, ids = oracle_encode(tmp_path, "tiny-bert", probe, path=out)
    model = stoke.Model(str(out), device="cpu")
    got = model.encode(probe)
    rows = same_tokens(model, probe, ids)
    assert np.abs(got[rows] - want[rows]).max() <= 1e-5
    base = stoke.Model(model_dir("tiny-bert"), device="cpu").encode(probe)
    assert np.abs(got - base).max() > 1e-3  # the trained weights, not the base's
