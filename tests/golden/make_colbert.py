#!/usr/bin/env python3
"""A tiny random PyLate ColBERT model (a BERT encoder + PyLate's per-token Dense projection) and what
PyLate 1.6.0's ColBERT.encode and rank.rerank compute with it: the oracle of stoke's ColBERT outputs and
its maxsim op (issue 33).

What it makes, under tests/data/colbert_tiny/:
  model/                 the folder as ColBERT.save writes it: config.json (BertModel), model.safetensors,
                         the tokenizer (the fixture tiny-bert's vocab, with PyLate's prefix tokens "[Q] " and
                         "[D] " added, tokenizer.json + tokenizer_config.json + vocab.txt), modules.json
                         (Transformer, pylate.models.Dense.Dense), 1_Dense/{config.json,model.safetensors}
                         (hidden 32 -> 16, no bias, Identity), config_sentence_transformers.json (PyLate's
                         settings: every one at its default: prefixes "[Q] "/"[D] ", query_length 32,
                         document_length 180, do_query_expansion true, attend_to_expansion_tokens false,
                         skiplist_words = string.punctuation).
  golden.safetensors     the goldens (below); golden.json: the texts, the settings, what each tensor is.

Goldens (N texts; per-text rows concatenated, offsets [N + 1] int64):
  query_ids, query_ids_offsets           the ids PyLate's tokenize(is_query=True) gives (prefix inserted
                                         after [CLS], padded with [MASK] to query_length)
  query_keys [N] i64                     how many of them the attention mask lets be keys (the rest are
                                         expansion tokens: queries, not keys)
  query_vecs, query_offsets              encode(texts, is_query=True): query_length vectors per text
  document_ids, document_ids_offsets     tokenize(is_query=False): prefix after [CLS], truncated at
                                         document_length, no padding
  document_vecs, document_offsets        encode(texts, is_query=False): skiplist tokens removed
  rerank_queries [Q] i64, rerank_documents [Q, K] i64   which texts are ranked against which
  rerank_scores [Q, K] f32               rank.rerank(...)'s scores, put back in the documents' given order
  maxsim_scores [Q, K] f32               colbert_scores with a documents mask (no padding counted): equal to
                                         rerank's here (checked), see rerank's zero padding in golden.json

Pinned versions (the script refuses others): pylate 1.6.0, sentence-transformers 5.3.0, transformers 5.3.0,
torch 2.15.0, tokenizers 0.22.2. The venv (tests/golden/requirements-pylate.txt says how):
    .venv-pylate/bin/python tests/golden/make_colbert.py
Inputs: the fixtures (../shared/fixtures, or $STOKE_FIXTURES_DIR): models/tiny-bert's vocabulary and texts of
golden/texts.jsonl. Deterministic: fixed seeds, one torch thread; a rerun writes the same bytes.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shutil
import string
import sys
import tempfile
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["PYLATE_SCORES_BACKEND"] = "torch"

import numpy as np  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

PINNED = {
    "pylate": (importlib.metadata.version("pylate"), "1.6.0"),
    "sentence-transformers": (importlib.metadata.version("sentence-transformers"), "5.3.0"),
    "transformers": (transformers.__version__, "5.3.0"),
    "torch": (torch.__version__.split("+")[0], "2.15.0"),
    "tokenizers": (tokenizers.__version__, "0.22.2"),
}

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("STOKE_FIXTURES_DIR", REPO.parent / "shared" / "fixtures"))
OUT = REPO / "tests" / "data" / "colbert_tiny"

SEED = 331
HIDDEN = 32
DIM = 16
POSITIONS = 192  # > document_length (180): PyLate's default length must fit the model


def texts() -> list[str]:
    """~20 texts: fixture texts of several languages, the long one (past document_length: truncated; past
    query_length too), punctuation-heavy ones (the skiplist drops many of their tokens), an empty text and a
    space (queries of expansion tokens alone), special-token strings inside a text."""
    with open(FIXTURES / "golden" / "texts.jsonl", encoding="utf-8") as f:
        fixture = [json.loads(line)["text"] for line in f if line.strip()]
    return [
        fixture[7], fixture[12], fixture[25], fixture[32],  # en
        fixture[3], fixture[5], fixture[1], fixture[39],    # de, ru, zh, pl (a long one, > query_length)
        fixture[42],  # ?!.,;:-()[]{}"'/\@#$%^&*_+=<>|~`…–—«»¿¡
        fixture[54], fixture[55], fixture[56], fixture[64],  # apostrophes, a URL, numbers, dashes
        fixture[60],  # [CLS] hello [SEP] world [MASK] ...
        fixture[40], fixture[41],  # "", " "
        fixture[65],  # 1650 characters: past document_length
        "a",
        "the cat sat on the mat, and the dog sat on the log.",
        "What is the capital of France?",
    ]


def check_versions() -> None:
    wrong = {k: v for k, v in PINNED.items() if v[0] != v[1]}
    if wrong:
        print("wrong versions (have, want): " + json.dumps(wrong), file=sys.stderr)
        sys.exit(1)


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def make_model_folder(folder: Path) -> None:
    from pylate import models

    torch.manual_seed(SEED)
    base = Path(tempfile.mkdtemp(prefix="colbert-base-"))
    try:
        config = transformers.BertConfig(
            vocab_size=3000, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=POSITIONS, type_vocab_size=2, pad_token_id=0,
            layer_norm_eps=1e-12, initializer_range=0.2, architectures=["BertModel"])
        bert = transformers.BertModel(config, add_pooling_layer=False).eval()
        bert.save_pretrained(str(base), safe_serialization=True)
        tok = transformers.BertTokenizerFast.from_pretrained(str(FIXTURES / "models" / "tiny-bert"),
                                                             model_max_length=POSITIONS)
        tok.save_pretrained(str(base))
        # PyLate from a plain encoder: adds Dense(HIDDEN -> DIM, bias=False), the prefix tokens (the word
        # embeddings grow by two rows), and keeps every other setting at its default.
        model = models.ColBERT(model_name_or_path=str(base), embedding_size=DIM, device="cpu")
        # The projection, random at a trained-like scale (unit-ish outputs before normalization).
        with torch.no_grad():
            g = torch.Generator().manual_seed(SEED + 1)
            model[1].linear.weight.copy_(torch.randn(DIM, HIDDEN, generator=g) * 0.3)
            # The two prefix rows of the word embeddings, random like the rest.
            emb = model[0].auto_model.embeddings.word_embeddings.weight
            emb[-2:] = torch.randn(2, HIDDEN, generator=g) * 0.2
        model.save(str(folder))
    finally:
        shutil.rmtree(base)
    # transformers 5.3's save writes BERT's LayerNorm parameters under their legacy names (gamma, beta);
    # checkpoints on the hub have weight / bias, and transformers loads either. Store the usual names.
    from safetensors.numpy import load_file
    weights = load_file(str(folder / "model.safetensors"))
    renamed = {k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias"): v
               for k, v in weights.items()}
    save_file(renamed, str(folder / "model.safetensors"), metadata={"format": "pt"})
    # The model card is not read by anyone: leave it out (size; it holds dates).
    for name in ("README.md",):
        if (folder / name).exists():
            (folder / name).unlink()


def ragged(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.cumsum([0] + [r.shape[0] for r in rows]).astype(np.int64)
    return np.concatenate(rows, axis=0), offsets


def encode_goldens(folder: Path, texts_: list[str]) -> tuple[dict, dict]:
    from pylate import models, rank
    from pylate.scores import colbert_scores

    model = models.ColBERT(model_name_or_path=str(folder), device="cpu")
    settings = {k: getattr(model, k) for k in ("query_prefix", "document_prefix", "query_length",
                                                 "document_length", "do_query_expansion",
                                                 "attend_to_expansion_tokens")}
    assert settings == {"query_prefix": "[Q] ", "document_prefix": "[D] ", "query_length": 32,
                        "document_length": 180, "do_query_expansion": True,
                        "attend_to_expansion_tokens": False}, settings
    assert model.skiplist_words == list(string.punctuation)

    # The ids as PyLate's own tokenize forms them, one text at a time (no batch padding).
    qids, qkeys, dids = [], [], []
    for t in texts_:
        q = model.tokenize([t], is_query=True)
        qids.append(q["input_ids"][0].numpy().astype(np.int64))
        qkeys.append(int(q["attention_mask"][0].sum()))
        assert q["attention_mask"][0][: qkeys[-1]].all(), "keys are a prefix"
        d = model.tokenize([t], is_query=False)
        dids.append(d["input_ids"][0].numpy().astype(np.int64))

    # encode as users call it (batches of 32, sorted by length inside: several texts padded together).
    qv = [np.asarray(v, dtype=np.float32) for v in model.encode(texts_, is_query=True)]
    dv = [np.asarray(v, dtype=np.float32) for v in model.encode(texts_, is_query=False)]
    skip = set(model.skiplist)
    for i in range(len(texts_)):
        assert qv[i].shape == (settings["query_length"], DIM), (i, qv[i].shape)
        kept = [x for x in dids[i] if x not in skip]
        assert dv[i].shape == (len(kept), DIM), (i, dv[i].shape, len(kept))

    # Reranking: three queries, each against six documents.
    rq = [19, 0, 17]
    rd = [[4, 0, 16, 19, 8, 13], [0, 1, 2, 3, 17, 18], [18, 17, 9, 10, 14, 6]]
    ranked = rank.rerank(documents_ids=rd, queries_embeddings=[qv[q] for q in rq],
                         documents_embeddings=[[dv[d] for d in ds] for ds in rd])
    rerank_scores = np.zeros((len(rq), len(rd[0])), dtype=np.float32)
    maxsim = np.zeros_like(rerank_scores)
    for a, (q, ds) in enumerate(zip(rq, rd)):
        by_id = {r["id"]: r["score"] for r in ranked[a]}
        rerank_scores[a] = [by_id[d] for d in ds]
        for k, d in enumerate(ds):
            s = colbert_scores(torch.from_numpy(qv[q])[None], torch.from_numpy(dv[d])[None])
            maxsim[a, k] = float(s[0, 0])
    # rerank pads a query's documents with zero vectors and masks nothing: a shorter document's max is
    # then at least 0. Where every query vector has a positive best match the two agree (checked).
    assert np.allclose(rerank_scores, maxsim, rtol=0, atol=1e-5), (rerank_scores, maxsim)

    query_vecs, query_offsets = ragged(qv)
    document_vecs, document_offsets = ragged(dv)
    query_ids, query_ids_offsets = ragged(qids)
    document_ids, document_ids_offsets = ragged(dids)
    tensors = {
        "query_ids": query_ids, "query_ids_offsets": query_ids_offsets,
        "query_keys": np.asarray(qkeys, dtype=np.int64),
        "query_vecs": query_vecs, "query_offsets": query_offsets,
        "document_ids": document_ids, "document_ids_offsets": document_ids_offsets,
        "document_vecs": document_vecs, "document_offsets": document_offsets,
        "rerank_queries": np.asarray(rq, dtype=np.int64),
        "rerank_documents": np.asarray(rd, dtype=np.int64),
        "rerank_scores": rerank_scores, "maxsim_scores": maxsim,
    }
    info = {
        **settings,
        "skiplist_words": model.skiplist_words,
        "skiplist_ids": sorted(skip),
        "query_prefix_id": model.query_prefix_id,
        "document_prefix_id": model.document_prefix_id,
        "mask_token_id": model.tokenizer.mask_token_id,
        "truncated_documents": [i for i, x in enumerate(dids) if len(x) == settings["document_length"]],
        "truncated_queries": [i for i, k in enumerate(qkeys) if k == settings["query_length"]],
        "rerank_padding": "rank.rerank pads each query's documents with zero vectors and no mask; its scores "
                          "equal colbert_scores' unpadded MaxSim here (checked to 1e-5)",
    }
    return tensors, info


def main() -> None:
    check_versions()
    torch.set_num_threads(1)
    model_dir = OUT / "model"
    if model_dir.exists():
        shutil.rmtree(model_dir)
    make_model_folder(model_dir)
    texts_ = texts()
    tensors, info = encode_goldens(model_dir, texts_)
    save_file(tensors, str(OUT / "golden.safetensors"))
    write_json(OUT / "golden.json", {
        "what": "pylate.models.ColBERT(model).encode(texts, is_query=True|False) (batch_size 32, float32, "
                "normalize_embeddings=True) and pylate.rank.rerank",
        "texts": texts_,
        "hidden_size": HIDDEN,
        "colbert_dim": DIM,
        **info,
        "tensors": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in tensors.items()},
        "produced_by": {**{k: v[0] for k, v in PINNED.items()}, "numpy": np.__version__,
                        "python": platform.python_version(), "device": "cpu, torch.set_num_threads(1)",
                        "script": "tests/golden/make_colbert.py"},
    })
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT.relative_to(REPO)}: {total} bytes")


if __name__ == "__main__":
    main()
