#!/usr/bin/env python3
"""A tiny MPNet with the activation statistics of a trained encoder, and what torch computes with it
in float64 and in float32: the goldens of tests/model/test_model_trained_stats.cc (issue 36, "f32
within torch's error on every input").

Why: the random fixtures' hidden states are of unit scale with zero mean, where every f32 method is
accurate. Trained encoders are not like that: residual streams with means in the hundreds and a
spread of hundredths, a few "outlier" dimensions far larger than the rest, hidden states in the
hundreds, and texts with long runs of one token (identical keys, values and rows). On such
activations an f32 kernel that subtracts a mean rounded to f32, or sums near-equal terms serially,
loses digits torch keeps; a trained all-mpnet-base-v2 showed it (one 198-token text at ten times
torch's f32 error). This model reproduces those statistics on the tiny-mpnet architecture with
positions for 512 tokens, so a test can hold stoke's f32 to torch's f32 error on every text.

What it makes (README.md next to this script, "tiny-mpnet-trained"):
  tests/golden/models/tiny-mpnet-trained/   a sentence-transformers MPNet folder (bare MPNetModel,
                                            tiny-mpnet's tokenizer, mean pooling + Normalize)
  tests/golden/tiny-mpnet-trained.safetensors  input_ids / cu_seqlens (packed, I64), the mean-pooled
                                            normalized vectors of torch float64 (.f64) and float32
  tests/golden/tiny-mpnet-trained.json      the settings, the extra texts, torch f32's error per text

Pinned: torch 2.15.0 (CPU), transformers 5.24.0. Run from anywhere, e.g.
    .venv-bench-st/bin/python tests/golden/make_trained_stats_goldens.py
Deterministic in its weights and float64 goldens (fixed seeds, one torch thread). The float32
vectors are torch's on the machine that ran it (its BLAS kernels): they are what the test measures
torch's error by, so the json records the CPU.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
import transformers
from safetensors.torch import save_file

PINNED = {"torch": (torch.__version__.split("+")[0], "2.15.0"), "transformers": (transformers.__version__, "5.24.0")}

REPO = Path(__file__).resolve().parents[2]
GOLDEN_DIR = REPO / "tests" / "golden"
FIXTURES = Path(os.environ.get("STOKE_FIXTURES_DIR", REPO.parent / "shared" / "fixtures"))
NAME = "tiny-mpnet-trained"
SEED = 40
MAX_LENGTH = 512

# Runs of one token, as in the text that showed the problem (a docstring with runs of repeated
# digits), up to the 512 positions: the relative bias is the same across each of its buckets, so
# a query meets hundreds of near-equal weights.
EXTRA_TEXTS = [
    "1 " * 500,
    "00 " * 200 + "11 " * 200,
    "the the the the " * 100,
    "2 3 " * 240,
    ('    def parse(self):\n        """Parse 1111111111 2222222222 3333333333 4444444444 5555555555 '
     '6666666666 7777777777 8888888888 9999999999 0000000000."""\n') * 4,
]


def config() -> transformers.MPNetConfig:
    return transformers.MPNetConfig(vocab_size=3000, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=60, max_position_embeddings=MAX_LENGTH + 2,
                                    relative_attention_num_buckets=32, layer_norm_eps=1e-5, pad_token_id=1,
                                    bos_token_id=0, eos_token_id=2, initializer_range=0.1, hidden_act="gelu")


def trained_statistics(m: transformers.MPNetModel) -> None:
    """Gives the residual stream a trained encoder's statistics, LayerNorm by LayerNorm."""
    layers = m.encoder.layer
    emb = m.embeddings.LayerNorm
    emb.bias.add_(300.0)  # rows near 300 with a spread of ~0.05: a large mean, nearly constant
    emb.weight.mul_(0.05)
    a0 = layers[0].attention.LayerNorm
    a0.bias[3] += 300.0  # two outlier dimensions
    a0.bias[17] -= 150.0
    a0.weight[3] *= 0.05
    o0 = layers[0].output.LayerNorm
    o0.weight.mul_(30.0)  # hidden states in the hundreds ...
    o0.bias.mul_(30.0)
    for lin in (layers[1].attention.attn.q, layers[1].attention.attn.k, layers[1].attention.attn.v,
                layers[1].intermediate.dense):
        lin.weight.div_(30.0)  # ... which the next layer's projections scale back
    layers[1].attention.LayerNorm.bias.add_(300.0)
    o1 = layers[1].output.LayerNorm  # the sentence vectors: two moderately large dimensions
    o1.bias[3] += 20.0
    o1.bias[17] -= 10.0


def make_model() -> transformers.MPNetModel:
    torch.manual_seed(SEED)
    m = transformers.MPNetModel(config(), add_pooling_layer=False).eval()
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        # As make_model_goldens.py: LayerNorm weights ~ N(1, 0.1), biases ~ N(0, 0.05), the relative
        # attention bias ~ N(0, 0.5) so the buckets matter; then the trained statistics.
        for n, p in m.named_parameters():
            if n.endswith("LayerNorm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif n.endswith("bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
        rel = m.encoder.relative_attention_bias.weight
        rel.copy_(0.5 * torch.randn(rel.shape, generator=g))
        trained_statistics(m)
    return m


def pooled(m: transformers.MPNetModel, ids: list[list[int]], dtype: torch.dtype) -> np.ndarray:
    """sentence-transformers' mean pooling + Normalize, one text at a time (no padding), eager attention."""
    mm = m.to(dtype)
    out = []
    with torch.no_grad():
        for x in ids:
            h = mm(input_ids=torch.tensor([x]))[0][0]
            v = h.mean(0)
            out.append((v / v.norm()).numpy())
    return np.stack(out)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().split("\n"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def main() -> None:
    for pkg, (have, want) in PINNED.items():
        if have != want:
            sys.exit(f"{pkg} {have}: this script is pinned to {want}")
    torch.set_num_threads(1)
    lines = (FIXTURES / "golden" / "texts.jsonl").read_text(encoding="utf-8").split("\n")
    texts = [json.loads(line)["text"] for line in lines if line.strip()] + EXTRA_TEXTS
    tok = transformers.AutoTokenizer.from_pretrained(str(GOLDEN_DIR / "models" / "tiny-mpnet"),
                                                     model_max_length=MAX_LENGTH)
    ids = [tok(t, truncation=True, max_length=MAX_LENGTH)["input_ids"] for t in texts]

    folder = GOLDEN_DIR / "models" / NAME
    if folder.exists():
        shutil.rmtree(folder)
    make_model().save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    for f in ("special_tokens_map.json", "vocab.txt"):
        (folder / f).unlink(missing_ok=True)  # tokenizer.json holds the tokenizer (as tiny-mpnet's folder)
    src = GOLDEN_DIR / "models" / "tiny-mpnet"
    shutil.copytree(src / "1_Pooling", folder / "1_Pooling")
    shutil.copy(src / "modules.json", folder / "modules.json")
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": MAX_LENGTH,
                                                                  "do_lower_case": False}) + "\n")

    f64 = pooled(make_model(), ids, torch.float64)
    f32 = pooled(make_model(), ids, torch.float32)
    err32 = np.linalg.norm(f32.astype(np.float64) - f64, axis=1) / np.linalg.norm(f64, axis=1)
    packed = torch.tensor([i for x in ids for i in x], dtype=torch.int64)
    cu = torch.tensor(np.concatenate([[0], np.cumsum([len(x) for x in ids])]), dtype=torch.int64)
    save_file({"input_ids": packed, "cu_seqlens": cu,
               "mean_pooled_normalized": torch.from_numpy(f32.astype(np.float32)),
               "mean_pooled_normalized.f64": torch.from_numpy(f64)},
              str(GOLDEN_DIR / f"{NAME}.safetensors"))
    info = {
        "model": NAME,
        "what": "MPNetModel with trained-like activation statistics (make_trained_stats_goldens.py, "
                "trained_statistics), torch's mean-pooled normalized vectors in float64 and float32",
        "seed": SEED,
        "config": json.loads((folder / "config.json").read_text()),
        "texts": "the fixtures' golden/texts.jsonl (66), then extra_texts",
        "extra_texts": EXTRA_TEXTS,
        "tokens_per_text": [len(x) for x in ids],
        "tensors": {
            "input_ids": "I64 [T]: every text's token ids (tiny-mpnet's tokenizer, max_length 512), packed",
            "cu_seqlens": "I64 [N + 1]: text n owns input_ids[cu_seqlens[n]:cu_seqlens[n + 1]]",
            "mean_pooled_normalized": "F32 [N, 32]: torch float32, eager attention, one text at a time",
            "mean_pooled_normalized.f64": "F64 [N, 32]: the same model widened with .to(float64)",
        },
        "torch_f32_relative_error": {"max": float(err32.max()), "median": float(np.median(err32)),
                                     "per_text": [float(e) for e in err32]},
        "machine": {"cpu": cpu_model(), "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
                    "torch_threads": 1},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
    }
    (GOLDEN_DIR / f"{NAME}.json").write_text(json.dumps(info, indent=1) + "\n")
    for path in (GOLDEN_DIR / f"{NAME}.safetensors", folder / "model.safetensors"):
        path.chmod(0o644)  # safetensors writes 0600
    print(f"{NAME}: {len(ids)} texts, {int(cu[-1])} tokens; torch f32 vs f64: max {err32.max():.2e}, "
          f"median {np.median(err32):.2e}")


if __name__ == "__main__":
    main()
