#!/usr/bin/env python3
"""A tiny random bge-m3 (XLM-R encoder + colbert_linear.pt + sparse_linear.pt) and what FlagEmbedding's
BGEM3FlagModel.encode computes with it: the oracle of stoke's sparse and ColBERT outputs (issue 33).

What it makes, under tests/data/bge_m3_tiny/:
  model/                 the model folder as BAAI/bge-m3 ships it: config.json (XLMRobertaModel),
                         model.safetensors (float32, save_pretrained), the tokenizer (tokenizer.json,
                         sentencepiece.bpe.model, tokenizer_config.json, special_tokens_map.json),
                         the sentence-transformers files (modules.json: Transformer, Pooling(cls),
                         Normalize; sentence_bert_config.json; 1_Pooling/config.json), and the two heads
                         saved with torch.save(linear.state_dict()) in float16, as bge-m3's are:
                         colbert_linear.pt (weight [H, H], bias [H]) and sparse_linear.pt (weight [1, H],
                         bias [1]).
  golden.safetensors     the goldens (names below); golden.json says what each is, plus the texts and
                         the settings.
  bad_heads/*.pt         head files stoke must refuse (wrong shapes, missing or extra tensors, a
                         non-float dtype), each written by torch.save; golden.json's "bad_heads" says
                         what is wrong with each.
  other_heads/colbert_dim8.pt  a valid colbert_linear of another width (weight [8, H], bias [8], float32).

Goldens (N texts; per-text rows concatenated, with offsets [N + 1] int64):
  input_ids, input_ids_offsets     the tokenizer's ids (special tokens in, truncated at max_length)
  dense_vecs [N, H] f32            encode()'s dense_vecs (CLS, normalized)
  colbert_vecs [total, D] f32      encode()'s colbert_vecs, one [len - 1, D] array per text, concatenated;
  colbert_offsets                  the rows of text i are colbert_offsets[i] .. colbert_offsets[i + 1]
  sparse_indices [nnz] i64         encode()'s lexical_weights as CSR: each text's token ids, ascending,
  sparse_values [nnz] f32          their weights (the float32 FlagEmbedding keeps),
  sparse_indptr [N + 1] i64        and the row pointers
  sparse_min_margin [N] f32        per text, the smallest |sparse_linear(h)| over its counted tokens (the
                                   ones not removed as special): how far each kept or dropped weight is
                                   from the ReLU's cut, so a 1e-5 comparison cannot flip an id in or out

Pinned versions (the script refuses others): FlagEmbedding 1.3.5, transformers 4.57.1, torch 2.15.0
(CPU), tokenizers 0.22.2. Make the venv (its own: FlagEmbedding wants transformers 4):
    python3 -m venv .venv-flagemb
    .venv-flagemb/bin/pip install -r tests/golden/requirements-bge-m3.txt
    .venv-flagemb/bin/pip install --no-deps FlagEmbedding==1.3.5
    .venv-flagemb/bin/python tests/golden/make_bge_m3.py
(FlagEmbedding's own requirements pull in training and evaluation packages; the ones its import needs
are in the requirements file.) Inputs: the fixtures (../shared/fixtures, or $STOKE_FIXTURES_DIR): the
tokenizer of models/tiny-xlmr and texts of golden/texts.jsonl. Deterministic: fixed seeds, one torch
thread; a rerun writes the same bytes.
"""
from __future__ import annotations

import collections
import importlib.metadata
import json
import os
import platform
import shutil
import sys
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

PINNED = {
    "FlagEmbedding": (importlib.metadata.version("FlagEmbedding"), "1.3.5"),
    "transformers": (transformers.__version__, "4.57.1"),
    "torch": (torch.__version__.split("+")[0], "2.15.0"),
    "tokenizers": (tokenizers.__version__, "0.22.2"),
}

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("STOKE_FIXTURES_DIR", REPO.parent / "shared" / "fixtures"))
OUT = REPO / "tests" / "data" / "bge_m3_tiny"

SEED = 33
HIDDEN = 32
MAX_LENGTH = 64  # tokenizer model_max_length = max_seq_length = encode(max_length=...)
POSITIONS = MAX_LENGTH + 2  # XLM-R numbers positions from pad_token_id + 1 = 2
MARGIN = 1e-4  # the smallest |pre-ReLU sparse weight| of a counted token the goldens accept


def texts() -> list[str]:
    """~10 varied texts: multilingual fixture texts, one longer than MAX_LENGTH tokens (truncated), an
    empty one (special tokens only: one ColBERT vector, no lexical weight), words repeated so that the
    max per token id matters, and a <mask> (kept: FlagEmbedding drops only cls, eos, pad and unk)."""
    with open(FIXTURES / "golden" / "texts.jsonl", encoding="utf-8") as f:
        fixture = [json.loads(line)["text"] for line in f if line.strip()]
    return [
        fixture[7],   # en
        fixture[1],   # zh
        fixture[5],   # ru, long: truncated at MAX_LENGTH
        fixture[3],   # de
        fixture[4],   # es, short
        "",
        "a",
        "the cat and the dog and the cat and the bird: the end, the end, the end.",
        "Paris Paris Paris, Berlin, Paris. <mask> is the capital of France.",
        "naïve café — 東京 Tokyo 東京 ☃ ☃",
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
    torch.manual_seed(SEED)
    config = transformers.XLMRobertaConfig(
        vocab_size=4002, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=POSITIONS, type_vocab_size=1,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5, initializer_range=0.1,
        architectures=["XLMRobertaModel"])
    model = transformers.XLMRobertaModel(config).eval()
    model.save_pretrained(str(folder), safe_serialization=True)

    # The tokenizer: the fixture tiny-xlmr's SentencePiece model, as XLMRobertaTokenizerFast converts
    # and saves it (tokenizer.json beside sentencepiece.bpe.model, as bge-m3's folder has both).
    tok = transformers.XLMRobertaTokenizerFast.from_pretrained(
        str(FIXTURES / "models" / "tiny-xlmr"), model_max_length=MAX_LENGTH)
    tok.save_pretrained(str(folder))

    write_json(folder / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])
    write_json(folder / "sentence_bert_config.json", {"max_seq_length": MAX_LENGTH, "do_lower_case": False})
    write_json(folder / "1_Pooling" / "config.json", {
        "word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False})

    # The heads, random, float16 on disk as bge-m3's (FlagEmbedding's load_state_dict copies them into
    # its float32 Linear layers). The sparse bias is shifted so that about half the tokens get a weight.
    g = torch.Generator().manual_seed(SEED + 1)
    colbert = collections.OrderedDict(
        weight=(torch.randn(HIDDEN, HIDDEN, generator=g) * 0.2).half(),
        bias=(torch.randn(HIDDEN, generator=g) * 0.1).half())
    sparse = collections.OrderedDict(
        weight=(torch.randn(1, HIDDEN, generator=g) * 0.3).half(),
        bias=(torch.randn(1, generator=g) * 0.05 + 0.1).half())
    torch.save(colbert, str(folder / "colbert_linear.pt"))
    torch.save(sparse, str(folder / "sparse_linear.pt"))


def write_bad_heads(folder: Path) -> dict[str, str]:
    """Head files stoke must refuse, each with why. Read back by torch here, so each is a real file
    torch.load(weights_only=True) accepts: the refusal is stoke's shape check, not the reader's."""
    g = torch.Generator().manual_seed(SEED + 2)
    H = HIDDEN

    def r(*shape):
        return torch.randn(*shape, generator=g)

    bad = {
        "sparse_two_outputs.pt": ({"weight": r(2, H), "bias": r(2)}, "sparse weight [2, H]: one output expected"),
        "sparse_wrong_hidden.pt": ({"weight": r(1, H + 1), "bias": r(1)}, "sparse weight [1, H + 1]"),
        "sparse_no_bias.pt": ({"weight": r(1, H)}, "sparse bias missing"),
        "sparse_bias_shape.pt": ({"weight": r(1, H), "bias": r(2)}, "sparse bias [2]"),
        "sparse_int_weight.pt": ({"weight": torch.ones(1, H, dtype=torch.int64), "bias": r(1)},
                                 "sparse weight int64"),
        "colbert_wrong_hidden.pt": ({"weight": r(H, H - 1), "bias": r(H)}, "colbert weight [H, H - 1]"),
        "colbert_bias_mismatch.pt": ({"weight": r(H, H), "bias": r(H + 1)}, "colbert bias [H + 1] for weight [H, H]"),
        "colbert_no_bias.pt": ({"weight": r(H, H)}, "colbert bias missing"),
        "colbert_extra_tensor.pt": ({"weight": r(H, H), "bias": r(H), "scale": r(1)},
                                    "colbert with an extra tensor (load_state_dict is strict)"),
        "colbert_1d_weight.pt": ({"weight": r(H * H), "bias": r(H)}, "colbert weight 1-D"),
        "colbert_no_weight.pt": ({"bias": r(H)}, "colbert weight missing"),
    }
    out = folder / "bad_heads"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    notes = {}
    for name, (state, why) in bad.items():
        torch.save(collections.OrderedDict(state), str(out / name))
        torch.load(str(out / name), weights_only=True)
        notes[name] = why
    # A valid head of another width: colbert_linear with colbert_dim 8 (FlagEmbedding's colbert_dim
    # argument), float32 on disk.
    other = folder / "other_heads"
    if other.exists():
        shutil.rmtree(other)
    other.mkdir(parents=True)
    torch.save(collections.OrderedDict(weight=r(8, H) * 0.2, bias=r(8) * 0.1), str(other / "colbert_dim8.pt"))
    return notes


def encode_goldens(folder: Path, texts_: list[str]) -> tuple[dict, dict]:
    from FlagEmbedding import BGEM3FlagModel

    # use_fp16 is turned off on the CPU by FlagEmbedding itself; said here too. normalize_embeddings
    # defaults to True (dense and ColBERT vectors normalized), batch_size 256 (one padded batch).
    model = BGEM3FlagModel(str(folder), use_fp16=False, devices="cpu")
    out = model.encode(texts_, max_length=MAX_LENGTH, return_dense=True, return_sparse=True,
                       return_colbert_vecs=True)
    tok = model.tokenizer
    enc = tok(texts_, truncation=True, max_length=MAX_LENGTH)
    ids = [list(x) for x in enc["input_ids"]]

    dense = np.asarray(out["dense_vecs"], dtype=np.float32)
    colbert = [np.asarray(v, dtype=np.float32) for v in out["colbert_vecs"]]
    for i, (v, row) in enumerate(zip(colbert, ids)):
        assert v.shape[0] == len(row) - 1, f"text {i}: {v.shape[0]} ColBERT vectors for {len(row)} tokens"

    unused = {tok.convert_tokens_to_ids(tok.special_tokens_map[k])
              for k in ("cls_token", "eos_token", "pad_token", "unk_token") if k in tok.special_tokens_map}
    indices, values, indptr = [], [], [0]
    for weights in out["lexical_weights"]:
        items = sorted((int(k), np.float32(w)) for k, w in weights.items())
        assert all(w > 0 for _, w in items)
        indices += [k for k, _ in items]
        values += [w for _, w in items]
        indptr.append(len(indices))

    # How far each counted token's weight is from the ReLU's cut, computed apart from FlagEmbedding
    # with the same modules (its model wraps the encoder and the two Linear layers).
    inner = model.model
    margins = []
    repeated_max = 0  # texts where one id has two different positive weights (max per id matters)
    with torch.no_grad():
        for row in ids:
            x = torch.tensor([row])
            h = inner.model(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state
            w = inner.sparse_linear(h)[0, :, 0]
            counted = [float(w[t]) for t, i in enumerate(row) if i not in unused]
            margins.append(min((abs(v) for v in counted), default=float("inf")))
            by_id = collections.defaultdict(set)
            for t, i in enumerate(row):
                if i not in unused and float(w[t]) > 0:
                    by_id[i].add(float(w[t]))
            repeated_max += any(len(s) > 1 for s in by_id.values())
    assert min(margins) > MARGIN, f"a sparse weight lies within {MARGIN} of 0: change SEED"
    assert repeated_max >= 2, "no text repeats a token id with different weights: change the texts"

    flat_ids = [i for row in ids for i in row]
    offsets = np.cumsum([0] + [len(r) for r in ids]).astype(np.int64)
    coffsets = np.cumsum([0] + [v.shape[0] for v in colbert]).astype(np.int64)
    tensors = {
        "input_ids": np.asarray(flat_ids, dtype=np.int64),
        "input_ids_offsets": offsets,
        "dense_vecs": dense,
        "colbert_vecs": np.concatenate(colbert, axis=0).astype(np.float32),
        "colbert_offsets": coffsets,
        "sparse_indices": np.asarray(indices, dtype=np.int64),
        "sparse_values": np.asarray(values, dtype=np.float32),
        "sparse_indptr": np.asarray(indptr, dtype=np.int64),
        "sparse_min_margin": np.asarray([min(m, 1e30) for m in margins], dtype=np.float32),
    }
    info = {
        "unused_token_ids": sorted(unused),
        "texts_with_repeated_id_weights": repeated_max,
        "truncated_texts": [i for i, t in enumerate(texts_) if len(tok(t)["input_ids"]) > MAX_LENGTH],
    }
    return tensors, info


def main() -> None:
    check_versions()
    torch.set_num_threads(1)
    model_dir = OUT / "model"
    if model_dir.exists():
        shutil.rmtree(model_dir)
    make_model_folder(model_dir)
    bad = write_bad_heads(OUT)
    texts_ = texts()
    tensors, info = encode_goldens(model_dir, texts_)
    save_file(tensors, str(OUT / "golden.safetensors"))
    write_json(OUT / "golden.json", {
        "what": "BGEM3FlagModel(model, use_fp16=False, devices='cpu').encode(texts, max_length=%d, "
                "return_dense=True, return_sparse=True, return_colbert_vecs=True)" % MAX_LENGTH,
        "texts": texts_,
        "max_length": MAX_LENGTH,
        "hidden_size": HIDDEN,
        "colbert_dim": HIDDEN,
        **info,
        "tensors": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in tensors.items()},
        "bad_heads": bad,
        "produced_by": {**{k: v[0] for k, v in PINNED.items()}, "numpy": np.__version__,
                        "python": platform.python_version(), "device": "cpu, torch.set_num_threads(1)",
                        "script": "tests/golden/make_bge_m3.py"},
    })
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT.relative_to(REPO)}: {total} bytes")


if __name__ == "__main__":
    main()
