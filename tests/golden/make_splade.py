#!/usr/bin/env python3
"""A tiny random SPLADE model (a sentence-transformers SparseEncoder: MLMTransformer over a BertForMaskedLM,
then SpladePooling) and what sentence-transformers' SparseEncoder.encode computes with it: the oracle of
stoke's SPLADE sparse output (issue 33).

What it makes, under tests/data/splade_tiny/:
  model/               the folder SparseEncoder.save writes (sentence-transformers 6.2.0): config.json
                       (BertForMaskedLM, tied decoder), model.safetensors (float32; the MLM head as
                       cls.predictions.transform.{dense,LayerNorm}.* and cls.predictions.bias, no decoder
                       weight: it is the word embeddings), the tokenizer (the fixtures' tiny-bert, as
                       transformers 5 saves it: tokenizer.json + tokenizer_config.json), modules.json
                       (sentence_transformers.sparse_encoder.modules.mlm_transformer.MLMTransformer,
                       ...splade_pooling.SpladePooling), sentence_bert_config.json, 1_SpladePooling/config.json
                       (pooling_strategy max, activation_function relu), config_sentence_transformers.json.
                       The model card (README.md) is not kept.
  inference_free/      an inference-free SPLADE folder, as SparseEncoder.save writes a Router
                       (Router.for_query_document): modules.json (one Router), router_config.json, the
                       document route (document_0_MLMTransformer, document_1_SpladePooling: model/'s
                       modules and weights) and the query route query_0_SparseStaticEmbedding (its
                       tokenizer, model.safetensors "weight" [vocab] float32: idf-like weights, a tenth of
                       them 0, config.json {"frozen": true}).
  distilbert/          the same kind of folder over a DistilBertForMaskedLM (hidden 16, 2 layers; its head
                       vocab_transform, vocab_layer_norm, vocab_projector tied to the word embeddings).
  golden.safetensors   the goldens (names below); golden.json: the texts, the settings, what each is.

Goldens (N texts; each a CSR matrix [N, vocab] of encode()'s rows: the non-zero entries of each row,
ascending ids):
  input_ids, input_ids_offsets           the tokenizer's ids per text (special tokens in, truncated)
  max_indices/max_values/max_indptr      encode(texts) of the model as saved (max pooling, relu)
  sum_indices/...                        the same weights with SpladePooling(pooling_strategy="sum")
  log1p_relu_indices/...                 max pooling, activation_function="log1p_relu" (a second log1p)
  top8_indices/...                       encode(texts, max_active_dims=8) of the saved model
  distilbert_indices/...                 encode(texts) of distilbert/ (max pooling, relu)
  query_indices/...                      encode_query(texts) of inference_free/ (SparseStaticEmbedding: no
                                         forward); its encode_document(texts) equals max_* (checked here)
  margin [N] f32                         per text, the smallest |max over its tokens of the MLM logit| over
                                         the vocabulary: how far every id is from the ReLU's cut, so a 1e-5
                                         comparison cannot flip an id in or out (the script requires > 1e-4)
Weights are scaled like a trained MLM head's: logits mostly around -6, a few dozen ids per text positive.
The top-8 goldens have no tie at the cut (the script requires a gap > 1e-4 between the 8th and 9th value).

Pinned versions (the script refuses others): sentence-transformers 6.2.0, transformers 5.24.0, torch 2.15.0
(CPU), tokenizers 0.23.3 -- the venv of the other goldens (tests/golden/README.md), e.g.
    .venv-bench-st/bin/python tests/golden/make_splade.py
Inputs: the fixtures (../shared/fixtures, or $STOKE_FIXTURES_DIR): the tokenizer of models/tiny-bert and
texts of golden/texts.jsonl. Deterministic: fixed seeds, one torch thread; a rerun writes the same bytes.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402
import sentence_transformers  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402
from sentence_transformers import SparseEncoder  # noqa: E402
from sentence_transformers.base.modules import Router  # noqa: E402
from sentence_transformers.sparse_encoder.modules import (  # noqa: E402
    MLMTransformer, SparseStaticEmbedding, SpladePooling)

PINNED = {
    "sentence_transformers": (sentence_transformers.__version__, "6.2.0"),
    "transformers": (transformers.__version__, "5.24.0"),
    "torch": (torch.__version__.split("+")[0], "2.15.0"),
    "tokenizers": (tokenizers.__version__, "0.23.3"),
}

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("STOKE_FIXTURES_DIR", REPO.parent / "shared" / "fixtures"))
OUT = REPO / "tests" / "data" / "splade_tiny"

SEED = 34
HIDDEN = 32
MAX_LENGTH = 128  # the tokenizer's model_max_length and max_seq_length
TOP_K = 8


def texts() -> list[str]:
    """~20 texts: multilingual fixture texts, long ones (truncated at MAX_LENGTH), an empty one (the special
    tokens alone), repeated words (the max or sum over a token id's positions matters)."""
    with open(FIXTURES / "golden" / "texts.jsonl", encoding="utf-8") as f:
        fixture = [json.loads(line)["text"] for line in f if line.strip()]
    return fixture[:14] + [
        "",
        "a",
        "the cat and the dog and the cat and the bird: the end, the end, the end.",
        "Paris Paris Paris, Berlin, Paris. [MASK] is the capital of France.",
        "naïve café — 東京 Tokyo 東京 ☃ ☃",
        "what is sparse retrieval? " * 40,
    ]


def check_versions() -> None:
    wrong = {k: v for k, v in PINNED.items() if v[0] != v[1]}
    if wrong:
        print("wrong versions (have, want): " + json.dumps(wrong), file=sys.stderr)
        sys.exit(1)


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def make_model(folder: Path, distilbert: bool = False) -> None:
    torch.manual_seed(SEED + (20 if distilbert else 0))
    g = torch.Generator().manual_seed(SEED + (21 if distilbert else 1))
    if distilbert:
        h = 16
        config = transformers.DistilBertConfig(
            vocab_size=3000, dim=h, n_layers=2, n_heads=2, hidden_dim=32, max_position_embeddings=MAX_LENGTH,
            activation="gelu", initializer_range=0.2, architectures=["DistilBertForMaskedLM"])
        mlm = transformers.DistilBertForMaskedLM(config).eval()
        emb, bias = mlm.distilbert.embeddings.word_embeddings.weight, mlm.vocab_projector.bias
        norm, dense = mlm.vocab_layer_norm, mlm.vocab_transform
    else:
        h = HIDDEN
        config = transformers.BertConfig(
            vocab_size=3000, hidden_size=h, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=MAX_LENGTH, type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12,
            initializer_range=0.2, architectures=["BertForMaskedLM"])
        mlm = transformers.BertForMaskedLM(config).eval()
        emb, bias = mlm.bert.embeddings.word_embeddings.weight, mlm.cls.predictions.bias
        norm, dense = mlm.cls.predictions.transform.LayerNorm, mlm.cls.predictions.transform.dense
    with torch.no_grad():
        # A trained MLM head's logits: mostly far below zero (bias ~ -6), a few ids per token above it.
        emb.normal_(0.0, 0.3 * (32 / h) ** 0.5, generator=g)
        bias.copy_(torch.randn(3000, generator=g) - 6.0)
        norm.weight.copy_(1.0 + 0.1 * torch.randn(h, generator=g))
        norm.bias.copy_(0.1 * torch.randn(h, generator=g))
        dense.bias.copy_(0.1 * torch.randn(h, generator=g))
    with tempfile.TemporaryDirectory() as tmp:
        mlm.save_pretrained(tmp)
        tok = transformers.AutoTokenizer.from_pretrained(str(FIXTURES / "models" / "tiny-bert"),
                                                         model_max_length=MAX_LENGTH)
        tok.save_pretrained(tmp)
        module = MLMTransformer(tmp, max_seq_length=MAX_LENGTH)
        model = SparseEncoder(modules=[module, SpladePooling(pooling_strategy="max")], device="cpu")
        if folder.exists():
            shutil.rmtree(folder)
        model.save(str(folder))
    (folder / "README.md").unlink(missing_ok=True)


def csr(rows: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    dense = rows.to_dense() if rows.is_sparse else rows
    dense = dense.numpy().astype(np.float32)
    indices, values, indptr = [], [], [0]
    for r in dense:
        nz = np.nonzero(r)[0]
        indices.extend(nz.tolist())
        values.extend(r[nz].tolist())
        indptr.append(len(indices))
    return (np.asarray(indices, np.int64), np.asarray(values, np.float32), np.asarray(indptr, np.int64))


def main() -> None:
    check_versions()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    OUT.mkdir(parents=True, exist_ok=True)
    make_model(OUT / "model")
    ts = texts()

    model = SparseEncoder(str(OUT / "model"), device="cpu")
    model.eval()
    assert model.max_seq_length == MAX_LENGTH, model.max_seq_length
    tok = model.tokenizer
    enc = [tok(t, truncation=True, max_length=MAX_LENGTH)["input_ids"] for t in ts]
    ids = np.asarray([i for e in enc for i in e], np.int64)
    offsets = np.asarray(np.cumsum([0] + [len(e) for e in enc]), np.int64)

    # The margins, from the transformers model underneath (the logits SpladePooling reads).
    hf = model[0].auto_model
    margins = []
    with torch.no_grad():
        for e in enc:
            logits = hf(input_ids=torch.tensor([e])).logits[0]  # (T, V)
            margins.append(float(logits.max(dim=0).values.abs().min()))
    margins = np.asarray(margins, np.float32)
    assert margins.min() > 1e-4, margins

    tensors = {"input_ids": ids, "input_ids_offsets": offsets, "margin": margins}
    info = {}

    def encode(name: str, **kwargs) -> np.ndarray:
        with torch.no_grad():
            rows = model.encode(ts, batch_size=len(ts), convert_to_tensor=True, **kwargs)
        i, v, p = csr(rows.cpu())
        tensors[f"{name}_indices"], tensors[f"{name}_values"], tensors[f"{name}_indptr"] = i, v, p
        info[name] = {"nnz_per_text": np.diff(p).tolist()}
        return rows.to_dense().numpy() if rows.is_sparse else rows.numpy()

    full = encode("max")
    for r in full:  # no tie at the top-k cut
        s = np.sort(r)[::-1]
        assert s[TOP_K - 1] - s[TOP_K] > 1e-4 or s[TOP_K - 1] == 0, s[: TOP_K + 1]
    encode("top8", max_active_dims=TOP_K)
    model[1].activation_function = "log1p_relu"
    encode("log1p_relu")
    model[1].activation_function = "relu"
    model[1].pooling_strategy = "sum"
    encode("sum")
    model[1].pooling_strategy = "max"

    # The DistilBERT one.
    make_model(OUT / "distilbert", distilbert=True)
    distil = SparseEncoder(str(OUT / "distilbert"), device="cpu")
    with torch.no_grad():
        for e in enc:
            logits = distil[0].auto_model(input_ids=torch.tensor([e])).logits[0]
            margin = float(logits.max(dim=0).values.abs().min())
            assert margin > 1e-4, margin
        rows = distil.encode(ts, batch_size=len(ts), convert_to_tensor=True)
    i, v, p = csr(rows.cpu())
    tensors["distilbert_indices"], tensors["distilbert_values"], tensors["distilbert_indptr"] = i, v, p
    info["distilbert"] = {"nnz_per_text": np.diff(p).tolist()}

    # Inference-free: the same document modules behind a Router, a static query side.
    g = torch.Generator().manual_seed(SEED + 2)
    idf = torch.rand(3000, generator=g) * 5.0 + 0.1
    idf[torch.rand(3000, generator=g) < 0.1] = 0.0
    query = SparseStaticEmbedding(tokenizer=model.tokenizer, weight=idf, frozen=True)
    router = Router.for_query_document(query_modules=[query], document_modules=[model[0], model[1]])
    free_dir = OUT / "inference_free"
    if free_dir.exists():
        shutil.rmtree(free_dir)
    SparseEncoder(modules=[router], device="cpu").save(str(free_dir))
    (free_dir / "README.md").unlink(missing_ok=True)
    free = SparseEncoder(str(free_dir), device="cpu")
    with torch.no_grad():
        rows = free.encode_query(ts, batch_size=len(ts), convert_to_tensor=True)
        docs = free.encode_document(ts, batch_size=len(ts), convert_to_tensor=True).to_dense().numpy()
    assert np.array_equal(docs, full), "the Router's document side is not the plain model"
    i, v, p = csr(rows.cpu())
    tensors["query_indices"], tensors["query_values"], tensors["query_indptr"] = i, v, p
    info["query"] = {"nnz_per_text": np.diff(p).tolist()}

    save_file(tensors, str(OUT / "golden.safetensors"))
    write_json(OUT / "golden.json", {
        "what": "SparseEncoder.encode of model/ (tests/golden/make_splade.py)",
        "texts": ts,
        "max_length": MAX_LENGTH,
        "top_k": TOP_K,
        "vocab_size": 3000,
        "variants": {
            "max": "the saved model: SpladePooling(pooling_strategy='max', activation_function='relu')",
            "sum": "pooling_strategy='sum'",
            "log1p_relu": "activation_function='log1p_relu'",
            "top8": f"encode(max_active_dims={TOP_K}) of the saved model",
            "query": "encode_query of inference_free/ (its encode_document equals max)",
            "distilbert": "encode of distilbert/ (DistilBertForMaskedLM, max pooling, relu)",
        },
        "nnz": info,
        "versions": {"sentence_transformers": sentence_transformers.__version__,
                     "transformers": transformers.__version__, "torch": torch.__version__,
                     "tokenizers": tokenizers.__version__, "numpy": np.__version__,
                     "python": platform.python_version(), "device": "cpu, torch.set_num_threads(1)"},
    })
    print(f"wrote {OUT}: {len(ts)} texts, nnz per text (max) {info['max']['nnz_per_text']}")


if __name__ == "__main__":
    main()
