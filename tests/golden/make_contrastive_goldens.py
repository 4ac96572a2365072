#!/usr/bin/env python3
"""Goldens of contrastive training of embedding models, from sentence-transformers' own losses.

What it makes (README.md next to this script, section "Contrastive training goldens"):
  tests/golden/contrastive/<case>.jsonl                 the 8 training records of a case (shared by the models)
  tests/golden/contrastive/<model>.<case>.json          losses, settings, parameter names, tensor list
  tests/golden/contrastive/<model>.<case>.safetensors   every parameter after two AdamW steps (f32), the
                                                        batches' token ids, the step-1 sentence embeddings
for <model> in tiny-bert (the fixtures' folder), tiny-xlmr5, tiny-mpnet, tiny-modernbert (models/ here) and
<case> in mnrl, mnrl-symmetric, cosent, cosine-mse, mnrl-matryoshka; and, asked for by name,
tiny-bert-dense (tiny-bert + Pooling(cls) + Dense(64 -> 24, tanh) + Normalize; its Dense parameters are
"2_Dense/linear.weight", "2_Dense/linear.bias"), made with
  OMP_NUM_THREADS=1 python tests/golden/make_contrastive_goldens.py tiny-bert-dense --case mnrl --case cosent

With --check-trainer it also runs tiny-bert / mnrl through SentenceTransformerTrainer and writes
tests/golden/contrastive/trainer_check.json (which batches the trainer formed, its optimizer's parameter
groups, and how its parameters after two steps compare with this script's plain loop). That needs the
`datasets` and `accelerate` packages, which the pinned venv lacks; the goldens themselves do not.

Pinned versions (the script refuses others): torch 2.15.0 (CPU), transformers 5.24.0, tokenizers 0.23.3,
sentence-transformers 6.2.0.

Run from anywhere:
    .venv-bench-st/bin/python tests/golden/make_contrastive_goldens.py [model ...] [--case CASE ...]
Deterministic: one torch thread, deterministic algorithms, eager attention, every dropout 0, no shuffling;
a rerun writes the same bytes (on the same machine: the float32 numbers are this CPU's kernels').
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import sentence_transformers  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402
from sentence_transformers.base.losses.merged_forward import column_merging_disabled, embed_columns  # noqa: E402
from sentence_transformers.base.modules.normalize import Normalize  # noqa: E402
from sentence_transformers.base.modules.transformer import Transformer  # noqa: E402
from sentence_transformers.sentence_transformer import losses  # noqa: E402
from sentence_transformers.sentence_transformer.data_collator import SentenceTransformerDataCollator  # noqa: E402
from sentence_transformers.sentence_transformer.losses.matryoshka import shrink  # noqa: E402
from torch import nn  # noqa: E402

PINNED = {
    "torch": (torch.__version__.split("+")[0], "2.15.0"),
    "transformers": (transformers.__version__, "5.24.0"),
    "tokenizers": (tokenizers.__version__, "0.23.3"),
    "sentence_transformers": (sentence_transformers.__version__, "6.2.0"),
}

REPO = Path(__file__).resolve().parents[2]
GOLDEN_DIR = REPO / "tests" / "golden"
OUT_DIR = GOLDEN_DIR / "contrastive"
FIXTURES = Path(os.environ.get("STOKE_FIXTURES_DIR", REPO.parent / "shared" / "fixtures"))

MODELS = {
    "tiny-bert": ("fixtures", "models/tiny-bert"),
    "tiny-xlmr5": ("golden", "models/tiny-xlmr5"),
    "tiny-mpnet": ("golden", "models/tiny-mpnet"),
    "tiny-modernbert": ("golden", "models/tiny-modernbert"),
    # tiny-bert + Pooling(cls) + Dense(64 -> 24, tanh) + Normalize: the Dense module's parameters are
    # trained with the encoder ("2_Dense/linear.weight", ...). Only the mnrl and cosent cases: run it by name.
    "tiny-bert-dense": ("golden", "models/tiny-bert-dense"),
}
DEFAULT_MODELS = ["tiny-bert", "tiny-xlmr5", "tiny-mpnet", "tiny-modernbert"]
CASES = ["mnrl", "mnrl-symmetric", "cosent", "cosine-mse", "mnrl-matryoshka"]

# The texts: the corpus texts (index 0..39 of the fixtures' golden/texts.jsonl) that have at most
# MAX_TOKENS tokens (special tokens included) in every one of the four tokenizers, in index order.
# Checked against the rule at run time; far below every max_seq_length (112..140), so nothing is truncated.
MAX_TOKENS = 64
SELECTED = [2, 3, 4, 7, 9, 10, 11, 13, 14, 15, 16, 17, 19, 23, 24, 25, 28, 29, 30, 31, 35, 36, 37, 38]
# Scores of the scored pairs: dyadic (exact in float32 and in decimal), one tie (records 1 and 3, batch 1).
SCORES = [0.875, 0.25, 0.5, 0.25, 0.0, 1.0, 0.375, 0.625]
BATCHES = [[0, 1, 2, 3], [4, 5, 6, 7]]

LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.999), 1e-8, 0.01
MATRYOSHKA_WEIGHTS = [1, 0.5, 0.25]
DROPOUT_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout", "dropout",
                "attention_dropout", "embedding_dropout", "mlp_dropout")

CASE_DESCRIPTIONS = {
    "mnrl": "MultipleNegativesRankingLoss(model): scale 20, cos_sim, directions ('query_to_doc',), "
            "partition_mode 'joint'; columns anchor, positive, negative (one hard negative per anchor)",
    "mnrl-symmetric": "MultipleNegativesRankingLoss(model, directions=('query_to_doc', 'doc_to_query'), "
                      "partition_mode='per_direction'): scale 20, cos_sim; columns anchor, positive",
    "cosent": "CoSENTLoss(model): scale 20, cos_sim; columns sentence1, sentence2, score",
    "cosine-mse": "CosineSimilarityLoss(model): MSELoss(cos(u, v), score), mean over the batch; "
                  "columns sentence1, sentence2, score",
    "mnrl-matryoshka": "MatryoshkaLoss(model, MultipleNegativesRankingLoss(model), matryoshka_dims=[H, H//2, H//4], "
                       "matryoshka_weights=[1, 0.5, 0.25]); columns anchor, positive, negative",
}


def folder_of(model_name: str) -> Path:
    base, rel = MODELS[model_name]
    return (FIXTURES if base == "fixtures" else GOLDEN_DIR) / rel


def folder_label(model_name: str) -> str:
    base, rel = MODELS[model_name]
    return ("fixtures:" if base == "fixtures" else "tests/golden/") + rel


def texts_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def to_json(obj, level: int = 0) -> str:
    """json.dumps(indent=2), but a list of scalars stays on one line."""
    pad, inner = "  " * level, "  " * (level + 1)
    if isinstance(obj, dict) and obj:
        items = [f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {to_json(v, level + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and any(isinstance(v, (dict, list)) for v in obj):
        return "[\n" + ",\n".join(inner + to_json(v, level + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False)


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert json.loads(to_json(obj)) == json.loads(json.dumps(obj))
    path.write_text(to_json(obj) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Data


def check_selection(rows: list[dict]) -> dict[str, list[int]]:
    """The SELECTED rule, recomputed with the four tokenizers; returns the token counts per model."""
    counts = {}
    for name in MODELS:
        tok = transformers.AutoTokenizer.from_pretrained(str(folder_of(name)))
        counts[name] = [len(tok(r["text"], truncation=False)["input_ids"]) for r in rows]
    chosen = [r["index"] for r in rows
              if r["source"] == "corpus" and max(counts[n][r["index"]] for n in MODELS) <= MAX_TOKENS]
    assert chosen == SELECTED, f"the text selection rule gives {chosen}"
    return counts


def case_records(case: str, texts: list[str]) -> tuple[list[dict], dict[str, list[int]]]:
    """The 8 records of a case and the text index of every cell."""
    s = SELECTED
    if case in ("mnrl", "mnrl-matryoshka"):
        idx = {"anchor": [s[3 * i] for i in range(8)], "positive": [s[3 * i + 1] for i in range(8)],
               "negative": [s[3 * i + 2] for i in range(8)]}
    elif case == "mnrl-symmetric":
        idx = {"anchor": [s[2 * i] for i in range(8)], "positive": [s[2 * i + 1] for i in range(8)]}
    else:
        idx = {"sentence1": [s[8 + 2 * i] for i in range(8)], "sentence2": [s[9 + 2 * i] for i in range(8)]}
    records = []
    for i in range(8):
        rec = {col: texts[idx[col][i]] for col in idx}
        if case in ("cosent", "cosine-mse"):
            rec["score"] = SCORES[i]
        records.append(rec)
    cells = [t for r in records for k, t in r.items() if k != "score"]
    assert len(set(cells)) == len(cells), f"{case}: a text occurs twice"
    return records, idx


def text_columns(records: list[dict]) -> list[str]:
    return [k for k in records[0] if k != "score"]


# ---------------------------------------------------------------------------------------------
# Model


def load_st(folder: Path, dtype=torch.float32) -> SentenceTransformer:
    """The folder's own modules, eager attention, every dropout 0, train mode."""
    config = transformers.AutoConfig.from_pretrained(str(folder))
    config_kwargs = {k: 0.0 for k in DROPOUT_KEYS if hasattr(config, k)}
    # Parameters missing from the file (the pooler of XLM-R / MPNet) are initialized from the RNG:
    # seeded so that a rerun gives the same values (they get no gradient and are not stored).
    torch.manual_seed(0)
    model = SentenceTransformer(str(folder), device="cpu", model_kwargs={"attn_implementation": "eager"},
                                config_kwargs=config_kwargs)
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    auto = transformer_module(model).auto_model
    assert auto.config._attn_implementation == "eager"
    for k in config_kwargs:
        assert getattr(auto.config, k) == 0.0, k
    model = model.to(dtype)
    model.train()
    return model


def transformer_module(model: SentenceTransformer) -> Transformer:
    found = [m for m in model if isinstance(m, Transformer)]
    assert len(found) == 1 and model[0] is found[0]
    return found[0]


def module_paths(folder: Path) -> dict[int, str]:
    return {int(m["idx"]): m["path"] for m in json.loads((folder / "modules.json").read_text())}


def golden_names(model: SentenceTransformer, folder: Path) -> dict[str, str]:
    """ST parameter name -> golden name: the AutoModel's own state-dict names for the Transformer,
    '<module path>/<name>' for any other module with parameters."""
    transformer = transformer_module(model)
    auto_names = {id(p): n for n, p in transformer.auto_model.named_parameters()}
    paths = module_paths(folder)
    names = {}
    for st_name, p in model.named_parameters():
        idx = int(st_name.split(".", 1)[0])
        if model[idx] is transformer:
            names[st_name] = auto_names[id(p)]
        else:
            names[st_name] = f"{paths[idx]}/{st_name.split('.', 1)[1]}"
    return names


def file_tensors(folder: Path, model: SentenceTransformer) -> dict[str, torch.Tensor]:
    """The AutoModel's tensors as model.safetensors holds them, keyed by the AutoModel's names."""
    prefix = transformer_module(model).auto_model.base_model_prefix + "."
    out = {}
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        for k in f.keys():
            out[k[len(prefix):] if k.startswith(prefix) else k] = f.get_tensor(k)
    return out


def pooling_mode(model: SentenceTransformer) -> str:
    pool = model[1]
    return pool.get_config_dict()["pooling_mode"]


def has_normalize(model: SentenceTransformer) -> bool:
    return any(isinstance(m, Normalize) for m in model)


def make_loss(case: str, model: SentenceTransformer) -> nn.Module:
    if case == "mnrl":
        return losses.MultipleNegativesRankingLoss(model)
    if case == "mnrl-symmetric":
        return losses.MultipleNegativesRankingLoss(model, directions=("query_to_doc", "doc_to_query"),
                                                   partition_mode="per_direction")
    if case == "cosent":
        return losses.CoSENTLoss(model)
    if case == "cosine-mse":
        return losses.CosineSimilarityLoss(model)
    if case == "mnrl-matryoshka":
        return losses.MatryoshkaLoss(model, losses.MultipleNegativesRankingLoss(model),
                                     matryoshka_dims=matryoshka_dims(model), matryoshka_weights=MATRYOSHKA_WEIGHTS)
    raise ValueError(case)


def matryoshka_dims(model: SentenceTransformer) -> list[int]:
    h = model.get_embedding_dimension()
    return [h, h // 2, h // 4]


def loss_config(case: str, loss: nn.Module) -> dict:
    cfg = {"class": type(loss).__name__, "config": json.loads(json.dumps(loss.get_config_dict(), default=str))}
    if case == "mnrl-matryoshka":
        cfg["inner"] = {"class": type(loss.loss).__name__,
                        "config": json.loads(json.dumps(loss.loss.get_config_dict(), default=str))}
    return cfg


# ---------------------------------------------------------------------------------------------
# Batches and the training run


def collate(model: SentenceTransformer, records: list[dict], rows: list[int]):
    """sentence-transformers' own data collator on the batch's records (model.preprocess on each text
    column, padding to the longest in the column; the score column becomes the label tensor), split
    into one feature dict per column as the trainer's collect_features does."""
    collator = SentenceTransformerDataCollator(preprocess_fn=model.preprocess)
    batch = collator([records[i] for i in rows])
    columns = text_columns(records)
    features = [{k[len(col) + 1:]: v for k, v in batch.items() if k.startswith(col + "_")} for col in columns]
    return features, batch.get("label")


def copies(features: list[dict]) -> list[dict]:
    # the ST modules write their outputs into the feature dict they get: hand each call fresh dicts
    return [dict(f) for f in features]


class PerTextForward:
    """model.forward replaced by one forward per row, cut to its real tokens (right padding). Used for
    tiny-modernbert in float64 only: transformers' ModernBERT turns padded rows into NaN in float64
    (README, tiny-modernbert)."""

    def __init__(self, model: SentenceTransformer):
        self.model = model
        self.original = model.forward

    def __enter__(self):
        original = self.original

        def forward(features, **kwargs):
            mask = features["attention_mask"]
            out = []
            for i in range(mask.shape[0]):
                n = int(mask[i].sum())
                assert torch.all(mask[i, :n] == 1) and torch.all(mask[i, n:] == 0)
                one = {k: (v[i:i + 1, :n] if isinstance(v, torch.Tensor) and v.ndim == 2 else v)
                       for k, v in features.items()}
                out.append(original(one, **kwargs)["sentence_embedding"])
            return {"sentence_embedding": torch.cat(out)}

        self.model.forward = forward
        return self

    def __exit__(self, *exc):
        del self.model.forward  # back to the class's forward
        return False


def run_case(model_name: str, case: str, records: list[dict], dtype=torch.float32, batches=BATCHES,
             optimizer_factory=None) -> dict:
    """Two training steps of the case's loss; returns what the goldens need."""
    folder = folder_of(model_name)
    model = load_st(folder, dtype)
    loss_fn = make_loss(case, model)
    names = golden_names(model, folder)
    params = dict(model.named_parameters())
    initial = {names[n]: p.detach().clone() for n, p in params.items()}
    if optimizer_factory is None:
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    else:
        opt = optimizer_factory(model, names)
    per_text = model_name == "tiny-modernbert" and dtype == torch.float64
    result = {"losses": [], "no_grad": [], "features": [], "labels": [], "initial": initial, "names": names,
              "model": model, "loss_fn": loss_fn}
    for step, rows in enumerate(batches):
        features, labels = collate(model, records, rows)
        result["features"].append(features)
        result["labels"].append(labels)
        ctx = PerTextForward(model) if per_text else None
        if ctx:
            ctx.__enter__()
        try:
            if step == 0:
                with torch.no_grad():
                    if dtype == torch.float32:
                        check_dropout_off(model, features[0])
                    result["embeddings"] = [e.detach().clone() for e in embed_columns(model, copies(features))]
                    with column_merging_disabled():
                        result["loss_per_column_forwards"] = float(loss_fn(copies(features), labels))
                    if case == "mnrl-matryoshka":
                        inner = loss_fn.loss
                        result["per_dim"] = {d: float(inner.compute_loss_from_embeddings(
                            [shrink(e, d) for e in result["embeddings"]], labels)) for d in loss_fn.matryoshka_dims}
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(copies(features), labels)
            loss.backward()
        finally:
            if ctx:
                ctx.__exit__()
        result["no_grad"].append(sorted(names[n] for n, p in params.items() if p.grad is None))
        if step == 0:
            result["grads1"] = {names[n]: (p.grad.detach().clone() if p.grad is not None else None)
                                for n, p in params.items()}
        else:
            result["grads2"] = {names[n]: (p.grad.detach().clone() if p.grad is not None else None)
                                for n, p in params.items()}
        opt.step()
        result["losses"].append(loss.detach().clone())
        if step == 0:
            result["after1"] = {names[n]: p.detach().clone() for n, p in params.items()}
    result["after2"] = {names[n]: p.detach().clone() for n, p in params.items()}
    return result


def check_dropout_off(model: SentenceTransformer, features: dict) -> None:
    """Every dropout is off: the train-mode forward equals the eval-mode one."""
    train = model(dict(features))["sentence_embedding"]
    model.eval()
    evaluated = model(dict(features))["sentence_embedding"]
    model.train()
    assert torch.allclose(train, evaluated, rtol=0, atol=1e-6), "a dropout is still active"


def word_embedding_name(model: SentenceTransformer, names: dict[str, str]) -> str:
    weight = transformer_module(model).auto_model.get_input_embeddings().weight
    return next(names[n] for n, p in model.named_parameters() if p is weight)


def small_first_gradients(r: dict, word: str, rows: torch.Tensor) -> dict:
    """Elements whose first nonzero gradient (step 1's, or step 2's where step 1's is exactly 0) is below
    1e-7 in magnitude: AdamW's first step there is lr * g / (|g| + eps), mostly rounding noise (the key
    biases: their gradient is mathematically 0). Flat indices into the stored tensor (rows.<word> for the
    word embeddings)."""
    out = {}
    for name, g1 in r["grads1"].items():
        if g1 is None:
            continue
        g2 = r["grads2"][name]
        if name == word:
            g1, g2 = g1[rows], g2[rows]
        first = torch.where(g1 != 0, g1, g2)
        small = (first != 0) & (first.abs() < 1e-7)
        count = int(small.sum())
        if count:
            flat = torch.nonzero(small.flatten()).flatten().tolist()
            out[("rows." + name) if name == word else name] = {
                "count": count, "numel": first.numel(), "max_abs_first_gradient": float(first[small].abs().max()),
                "flat_indices": "all" if count == first.numel() else flat}
    return out


def check_untouched_rows(name, rows, r) -> None:
    """Word-embedding rows outside the data: zero gradient at both steps, AdamW's decay only (bit for bit)."""
    initial, after1, after2 = r["initial"][name], r["after1"][name], r["after2"][name]
    others = torch.ones(initial.shape[0], dtype=torch.bool)
    others[rows] = False
    decay = 1 - LR * WEIGHT_DECAY
    assert torch.all(r["grads1"][name][others] == 0) and torch.all(r["grads2"][name][others] == 0), \
        f"{name}: a row outside the data has a gradient"
    assert torch.equal(after1[others], initial[others] * decay), f"{name}: after step 1 of untouched rows"
    assert torch.equal(after2[others], initial[others] * decay * decay), f"{name}: after step 2 of untouched rows"


# ---------------------------------------------------------------------------------------------
# Goldens


def produced_by() -> dict:
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__, "sentence_transformers": sentence_transformers.__version__,
            "safetensors": safetensors.__version__, "numpy": np.__version__,
            "python": platform.python_version(), "device": "cpu, torch.set_num_threads(1)",
            "script": "tests/golden/make_contrastive_goldens.py"}


def settings() -> dict:
    return {
        "device": "cpu, one torch thread, torch.use_deterministic_algorithms(True), float32",
        "attention": "eager (model_kwargs={'attn_implementation': 'eager'})",
        "mode": "model.train() with every dropout 0 (the config's dropout fields 0.0 via config_kwargs, every "
                "nn.Dropout p=0; checked: the train-mode embeddings equal the eval-mode ones)",
        "batches": "batch 1 = records 0..3, batch 2 = records 4..7 of the data file (file order: what a "
                   "no-duplicates sampler without shuffling forms, every text being distinct)",
        "tokenization": "sentence-transformers' SentenceTransformerDataCollator (model.preprocess per text column: "
                        "padding to the longest text of the column, truncation at max_seq_length; nothing is "
                        "truncated here), no prompts",
        "forward": "loss(features, labels) as SentenceTransformerTrainer.compute_loss calls it: labels = the "
                   "collator's float32 score tensor for cosent / cosine-mse, None for the MNRL cases. The losses "
                   "embed their columns with embed_columns: the first column in its own forward, the remaining "
                   "columns merged into one forward padded to the widest of them (mnrl, mnrl-matryoshka: positive "
                   "and negative together; two-column cases: one forward per column)",
        "optimizer": f"torch.optim.AdamW(model.parameters(), lr={LR}, betas={BETAS}, eps={EPS}, "
                     f"weight_decay={WEIGHT_DECAY}): one parameter group, so decay applies to biases and norms too; "
                     "torch's default implementation on CPU (for-loop, not foreach/fused); parameters whose grad "
                     "is None are skipped entirely (no decay)",
        "schedule": "constant lr, no warmup, no gradient clipping, zero_grad(set_to_none=True) before each step",
        "steps": 2,
    }


def embedding_rows(features_per_batch, pad_id: int) -> list[int]:
    ids = {pad_id}
    for features in features_per_batch:
        for f in features:
            ids.update(int(i) for i in f["input_ids"].flatten())
    return sorted(ids)


def make_goldens(model_name: str, case: str, records: list[dict], text_idx: dict, token_counts: dict) -> dict:
    r = run_case(model_name, case, records)
    r64 = run_case(model_name, case, records, dtype=torch.float64)
    model, names, loss_fn = r["model"], r["names"], r["loss_fn"]
    folder = folder_of(model_name)
    columns = text_columns(records)
    h = model.get_embedding_dimension()
    auto = transformer_module(model).auto_model
    pad_id = auto.config.pad_token_id
    word = word_embedding_name(model, names)
    rows = embedding_rows(r["features"], pad_id)
    check_untouched_rows(word, torch.tensor(rows), r)
    assert r["no_grad"][0] == r["no_grad"][1] == r64["no_grad"][0], "the parameters without gradient differ"
    no_grad = r["no_grad"][0]

    in_file = file_tensors(folder, model)
    order = [names[n] for n, _ in model.named_parameters()]
    for n in order:  # the names are right: every loaded parameter equals the file's tensor
        if n in in_file:
            assert torch.equal(r["initial"][n], in_file[n].to(torch.float32)), f"{n} differs from the file"
    missing = [n for n in order if "/" not in n and n not in in_file]  # '/': a module other than the Transformer
    assert set(missing) <= set(no_grad), f"{model_name}: parameters not in the file that get a gradient: {missing}"
    for n in no_grad:
        assert torch.equal(r["after2"][n], r["initial"][n]), f"{n} has no gradient but changed"

    tensors, meta = {}, {}

    def add(name, t, description):
        t = t.detach().contiguous().clone()
        tensors[name] = t
        meta[name] = {"dtype": {torch.float32: "F32", torch.int64: "I64"}[t.dtype], "shape": list(t.shape),
                      "description": description}

    for n in order:
        if n == word:
            continue
        if n in missing:
            continue  # newly initialized by transformers, not in the model's file: not stored
        what = "unchanged: no gradient, so torch's AdamW skips it" if n in no_grad else "after two AdamW steps"
        add(n, r["after2"][n], what)
    rows_t = torch.tensor(rows, dtype=torch.int64)
    add("word_embedding_rows", rows_t, f"the {len(rows)} rows of {word} (token ids) that occur in the data (either "
        f"batch, any column) plus the padding id {pad_id}, ascending")
    add("rows." + word, r["after2"][word][rows_t], f"rows word_embedding_rows of {word} after two AdamW steps; every "
        "other row had gradient 0 at both steps and is w * (1 - 1e-3 * 0.01)^2 in float32 (w from the model's file)")
    for b, features in enumerate(r["features"], 1):
        for col, f in zip(columns, features):
            mask = f["attention_mask"]
            assert torch.equal(mask.sum(1), torch.tensor([token_counts[model_name][text_idx[col][i]]
                                                          for i in BATCHES[b - 1]])), "truncated or mis-padded"
            if "token_type_ids" in f:
                assert torch.all(f["token_type_ids"] == 0)
            add(f"batch{b}.{col}.input_ids", f["input_ids"], f"batch {b} (records {BATCHES[b - 1]}), column {col}: "
                "input_ids from the collator, right-padded with the padding id to the longest of the column "
                "(attention_mask: the first token_counts[col][record] positions; token_type_ids, where the "
                "tokenizer gives them, all 0)")
    for col, e in zip(columns, r["embeddings"]):
        add(f"step1.{col}.sentence_embedding", e, f"batch 1, column {col}: the sentence embeddings the loss sees at "
            "step 1, before any update (the folder's modules: Transformer -> Pooling -> Normalize)")

    safetensors_path = OUT_DIR / f"{model_name}.{case}.safetensors"
    save_file(tensors, str(safetensors_path))
    safetensors_path.chmod(0o644)

    widths = [[int(f["input_ids"].shape[1]) for f in features] for features in r["features"]]
    info = {
        "what": f"{CASE_DESCRIPTIONS[case]}. Two AdamW steps of the SentenceTransformer of {folder_label(model_name)} "
                f"on {case}.jsonl (batch 1 = records 0..3, batch 2 = records 4..7).",
        "model": model_name,
        "folder": folder_label(model_name),
        "case": case,
        "data": f"{case}.jsonl",
        "columns": columns,
        "label_column": "score" if "score" in records[0] else None,
        "labels": [[float(x) for x in lab] if lab is not None else None for lab in r["labels"]],
        "text_indices": text_idx,
        "batches": BATCHES,
        "loss": loss_config(case, loss_fn),
        "modules": [type(m).__name__ for m in model],
        "auto_model_class": type(auto).__name__,
        "embedding_width": h,
        "pooling_mode": pooling_mode(model),
        "normalize": has_normalize(model),
        "max_seq_length": model.max_seq_length,
        "token_counts": {col: [token_counts[model_name][i] for i in text_idx[col]] for col in columns},
        "truncated": False,
        "batch_widths": {f"batch{b}": dict(zip(columns, w)) for b, w in enumerate(widths, 1)},
        "loss_step1": float(r["losses"][0]),
        "loss_step2": float(r["losses"][1]),
        "loss_step1_f64": float(r64["losses"][0]),
        "loss_step2_f64": float(r64["losses"][1]),
        "f64_note": "the same two-step run with the model cast to float64 (.double() of the float32 weights; the "
                    "scores stay the collator's float32 values, exact here)" +
                    ("; tiny-modernbert: every text embedded alone without padding (transformers' ModernBERT "
                     "gives NaN on padded rows in float64)" if model_name == "tiny-modernbert" else ""),
        "loss_step1_per_column_forwards": r["loss_per_column_forwards"],
        "loss_step1_per_column_forwards_note": "step 1's loss with every column in its own forward "
                                               "(column_merging_disabled), no gradient: the effect of the merged "
                                               "forward's extra padding",
        "model_inputs": [k for k, v in r["features"][0][0].items() if isinstance(v, torch.Tensor)],
        "small_first_gradients": small_first_gradients(r, word, rows_t),
        "small_first_gradients_note": "elements whose first nonzero gradient is below 1e-7 in magnitude (key "
                                      "biases: mathematically 0, the values are rounding noise): their AdamW "
                                      "steps are mostly noise, compare them at an absolute ~2e-3 (two steps of at "
                                      "most ~lr each); flat indices into the stored tensor",
        "parameters": order,
        "parameters_without_grad": no_grad,
        "parameters_not_in_model_file": missing,
        "parameters_note": "the Transformer module's AutoModel state-dict names (no '0.' / 'model.' prefix of the "
                           "sentence-transformers modules); other modules with parameters would be "
                           "'<module path>/<name>' (none here). Parameters without gradient are skipped by torch's "
                           "AdamW (unchanged, not decayed); those in the model's file are stored (equal to the file), "
                           "those not in it (newly initialized by transformers) are not stored",
        "word_embedding": {"name": word, "vocab_size": int(r["initial"][word].shape[0]), "rows": rows,
                           "padding_id": pad_id,
                           "rule": "only rows word_embedding_rows are stored (as rows.<name>); every other row has "
                                   "gradient exactly 0 at both steps and after step 2 equals w * (1 - 1e-3 * 0.01) * "
                                   "(1 - 1e-3 * 0.01) in float32, w the model file's row (checked bit for bit)"},
        "settings": settings(),
        "versions": produced_by(),
    }
    if case == "mnrl-matryoshka":
        weighted = sum(w * r["per_dim"][d] for d, w in zip(loss_fn.matryoshka_dims, loss_fn.matryoshka_weights))
        info["matryoshka"] = {
            "dims": list(loss_fn.matryoshka_dims), "weights": list(loss_fn.matryoshka_weights),
            "loss_step1_per_dim": {str(d): v for d, v in r["per_dim"].items()},
            "note": "loss_step1_per_dim: the inner MNRL of step 1's embeddings cut to the first d values and "
                    "renormalized (no gradient); loss_step1 = sum of weight * per-dim loss. MatryoshkaLoss itself "
                    "cuts each smaller dim from the previous (already cut and renormalized) embedding: the same "
                    "numbers up to rounding",
            "weighted_sum_minus_loss_step1": weighted - float(r["losses"][0]),
        }
    info["tensors"] = meta
    write_json(OUT_DIR / f"{model_name}.{case}.json", info)
    return {"model": model_name, "case": case, "loss1": info["loss_step1"], "loss2": info["loss_step2"],
            "loss1_f64": info["loss_step1_f64"], "no_grad": no_grad, "rows": len(rows),
            "bytes": safetensors_path.stat().st_size, "per_column": r["loss_per_column_forwards"]}


def write_data(case: str, records: list[dict]) -> None:
    with open(OUT_DIR / f"{case}.jsonl", "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------------------------------------
# SentenceTransformerTrainer check (tiny-bert, mnrl)


def check_trainer(records: list[dict]) -> None:
    import accelerate
    import datasets
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers

    model_name, case = "tiny-bert", "mnrl"
    folder = folder_of(model_name)
    model = load_st(folder)
    names = golden_names(model, folder)
    loss = make_loss(case, model)
    anchors = [rec["anchor"] for rec in records]
    seen = {"batches": [], "losses": [], "labels": []}

    class Recording(SentenceTransformerTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            ids = inputs["anchor_input_ids"]
            tok = transformer_module(self.model).tokenizer
            decoded = [tok.decode(row[row != tok.pad_token_id], skip_special_tokens=True) for row in ids]
            # map the anchors back to record numbers through their own tokenization
            own = [tok.decode(tok(a)["input_ids"], skip_special_tokens=True) for a in anchors]
            seen["batches"].append([own.index(d) for d in decoded])
            seen["labels"].append(None if inputs.get("label") is None else inputs["label"].tolist())
            out = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            seen["losses"].append(float((out[0] if isinstance(out, tuple) else out).detach()))
            return out

    with tempfile.TemporaryDirectory() as tmp:
        args = SentenceTransformerTrainingArguments(
            output_dir=tmp, per_device_train_batch_size=4, batch_sampler=BatchSamplers.NO_DUPLICATES,
            learning_rate=LR, weight_decay=WEIGHT_DECAY, lr_scheduler_type="constant", warmup_steps=0,
            max_grad_norm=0.0, dataloader_drop_last=False, num_train_epochs=1, report_to="none",
            save_strategy="no", logging_steps=1, use_cpu=True, dataloader_num_workers=0, disable_tqdm=True)
        trainer = Recording(model=model, args=args, train_dataset=datasets.Dataset.from_list(records), loss=loss)
        trainer.train()
        opt = trainer.optimizer
        inner_opt = getattr(opt, "optimizer", opt)
        st_names = {id(p): n for n, p in model.named_parameters()}
        groups = []
        for g in inner_opt.param_groups:
            groups.append({"weight_decay": g["weight_decay"], "lr": g["lr"], "fused": g.get("fused"),
                           "foreach": g.get("foreach"), "betas": list(g["betas"]), "eps": g["eps"],
                           "params": [names[st_names[id(p)]] for p in g["params"]]})
        sampler_default = [list(b) for b in trainer.get_train_dataloader().batch_sampler]
    trained = {names[n]: p.detach().clone() for n, p in model.named_parameters()}
    no_decay = sorted(n for g in groups if g["weight_decay"] == 0.0 for n in g["params"])

    def hf_groups(fused):
        def factory(m, nm):
            by_name = {nm[n]: p for n, p in m.named_parameters()}
            return torch.optim.AdamW(
                [{"params": [by_name[n] for n in g["params"]], "weight_decay": g["weight_decay"]} for g in groups],
                lr=LR, betas=BETAS, eps=EPS, fused=fused)
        return factory

    variants = {
        "plain loop, trainer's batches, one group (decay on all), default AdamW (these goldens' optimizer)": None,
        "plain loop, trainer's batches, trainer's two groups (no decay on biases/norms), fused AdamW": hf_groups(True),
        "plain loop, trainer's batches, trainer's two groups, default (for-loop) AdamW": hf_groups(None),
    }
    compared = {}
    for label, factory in variants.items():
        r = run_case(model_name, case, records, batches=seen["batches"], optimizer_factory=factory)
        diffs = {n: float((r["after2"][n] - trained[n]).abs().max()) for n in trained}
        worst = max(diffs, key=diffs.get)
        rest = {n: v for n, v in diffs.items() if "key.bias" not in n}
        worst_rest = max(rest, key=rest.get)
        compared[label] = {"losses": [float(x) for x in r["losses"]], "bitwise_equal": all(v == 0 for v in diffs.values()),
                           "max_abs_diff": diffs[worst], "worst_parameter": worst,
                           "max_abs_diff_without_key_biases": rest[worst_rest], "worst_other_parameter": worst_rest,
                           "parameters_differing": sum(v != 0 for v in diffs.values())}
    file_order = run_case(model_name, case, records)
    report = {
        "what": "tiny-bert / mnrl through SentenceTransformerTrainer (two steps) against this script's plain loop",
        "trainer_args": {"per_device_train_batch_size": 4, "batch_sampler": "no_duplicates", "learning_rate": LR,
                         "weight_decay": WEIGHT_DECAY, "lr_scheduler_type": "constant", "warmup_steps": 0,
                         "max_grad_norm": 0.0, "dataloader_drop_last": False, "num_train_epochs": 1,
                         "seed": args.seed, "optim": getattr(args.optim, "value", str(args.optim)), "use_cpu": True},
        "trainer_batches": seen["batches"],
        "trainer_batches_equal_file_order": seen["batches"] == BATCHES,
        "sampler_rule": "NoDuplicatesBatchSampler.__iter__ seeds its generator with seed + epoch (42 + 0) and walks "
                        "torch.randperm(8) of the records, so the batches are a seeded shuffle, not file order; "
                        "a fresh iteration gives the same batches",
        "sampler_iteration_after_training": sampler_default,
        "randperm_8_seed_42": torch.randperm(8, generator=torch.Generator().manual_seed(42)).tolist(),
        "trainer_labels": seen["labels"],
        "trainer_losses": seen["losses"],
        "plain_loop_file_order_losses": [float(x) for x in file_order["losses"]],
        "optimizer": {"class": type(inner_opt).__name__, "groups": groups},
        "parameters_without_weight_decay": no_decay,
        "decay_rule": "HF Trainer.get_decay_parameter_names: no decay for parameters inside nn.LayerNorm or whose "
                      "name matches bias, layernorm, rmsnorm, '.norm.' or '_norm' (case-insensitive); decay for the "
                      "rest (the word / position / token-type embeddings included)",
        "comparisons_after_step2": compared,
        "versions": dict(produced_by(), datasets=datasets.__version__, accelerate=accelerate.__version__),
    }
    write_json(OUT_DIR / "trainer_check.json", report)
    print(json.dumps({k: report[k] for k in ("trainer_batches", "trainer_batches_equal_file_order",
                                             "trainer_losses", "plain_loop_file_order_losses")}, indent=1))
    for label, c in compared.items():
        print(f"{label}: bitwise {c['bitwise_equal']}, max |diff| {c['max_abs_diff']:.3e} ({c['worst_parameter']}), "
              f"without key biases {c['max_abs_diff_without_key_biases']:.3e} ({c['worst_other_parameter']}), "
              f"{c['parameters_differing']} tensors differ, losses {c['losses']}")
    print("no weight decay in the trainer:", len(no_decay), "tensors, e.g.", no_decay[:4])


# ---------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", help="models (default: all): " + ", ".join(MODELS))
    parser.add_argument("--case", action="append", choices=CASES, help="cases (default: all)")
    parser.add_argument("--check-trainer", action="store_true",
                        help="only run the SentenceTransformerTrainer check (needs datasets and accelerate)")
    args = parser.parse_args()
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"unknown model {unknown[0]!r}; known: {', '.join(MODELS)}")
    wrong = {k: v for k, v in PINNED.items() if v[0] != v[1]}
    if wrong:
        print("wrong versions (have, want): " + json.dumps(wrong), file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    rows = texts_of(FIXTURES / "golden" / "texts.jsonl")
    assert [r["index"] for r in rows] == list(range(66))
    texts = [r["text"] for r in rows]
    token_counts = check_selection(rows)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    if args.check_trainer:
        check_trainer(case_records("mnrl", texts)[0])
        return 0
    summary = []
    for case in args.case or CASES:
        records, idx = case_records(case, texts)
        write_data(case, records)
        for model_name in args.models or DEFAULT_MODELS:
            summary.append(make_goldens(model_name, case, records, idx, token_counts))
            s = summary[-1]
            print(f"{model_name:16s} {case:16s} loss1 {s['loss1']:.9g}  loss2 {s['loss2']:.9g}", flush=True)
    print()
    print(f"{'model':16s} {'case':16s} {'loss_step1':>14s} {'loss_step2':>14s} {'|f32-f64| step1':>16s} "
          f"{'merge effect':>12s} {'rows':>5s} {'bytes':>8s}  no grad")
    for s in summary:
        print(f"{s['model']:16s} {s['case']:16s} {s['loss1']:14.9f} {s['loss2']:14.9f} "
              f"{abs(s['loss1'] - s['loss1_f64']):16.3e} {abs(s['loss1'] - s['per_column']):12.3e} {s['rows']:5d} "
              f"{s['bytes']:8d}  {', '.join(s['no_grad']) or '-'}")
    total = sum(p.stat().st_size for p in OUT_DIR.iterdir() if p.is_file())
    print(f"\ntests/golden/contrastive: {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
