#!/usr/bin/env python3
"""Tiny random Hugging Face models of the architectures stoke adds, and their goldens.

What it makes (README.md next to this script says what every tensor means):
  tests/golden/models/<name>/        a full Hugging Face folder (save_pretrained of the
                                      *ForSequenceClassification model and of its tokenizer,
                                      float32 safetensors) plus the sentence-transformers files
  tests/golden/<name>.json           every golden tensor (dtype, shape, description) and the settings
  tests/golden/<name>.safetensors    the golden tensors
  tests/golden/<name>.tokens.jsonl   per text: ids, tokens, pieces, decoded (no truncation)
for <name> in tiny-distilbert, tiny-electra, tiny-roberta, tiny-bert-dense, tiny-xlmr5,
tiny-camembert, tiny-mpnet, tiny-qwen3, tiny-qwen2, tiny-gte, tiny-nomic (or the names given on the command
line).

Pinned versions (the script refuses others): torch 2.15.0 (CPU), transformers 5.24.0,
tokenizers 0.23.3, sentence-transformers 6.2.0.

Inputs: the fixtures (../shared/fixtures relative to the repository root, or $STOKE_FIXTURES_DIR):
golden/texts.jsonl (the 66 test texts), corpus/fortunes-multilingual.jsonl (tokenizer training),
models/tiny-bert (WordPiece vocab, and the base of tiny-bert-dense), models/tiny-xlmr (tokenizer of
tiny-xlmr5, normalizer of tiny-camembert).

Run from anywhere:
    .venv-golden/bin/python tests/golden/make_model_goldens.py [name ...]
Deterministic: fixed seeds, one torch thread, eager attention, one tokenizers thread; a rerun writes
the same bytes.  The one exception, HF tokenizers' Unigram trainer (not run-to-run deterministic), is
kept out of reruns: tiny-camembert reuses the pieces and scores of its committed tokenizer.json unless
--retrain-unigram is given (or the folder is missing).
"""
from __future__ import annotations

import argparse
import base64
import copy
import json
import os
import platform
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# One thread for the Rust tokenizers too: the Unigram trainer's parallel E-step sums in a
# scheduling-dependent order, which changes the trained scores from run to run.
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import sentence_transformers  # noqa: E402
import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from torch import nn  # noqa: E402

PINNED = {
    "torch": (torch.__version__.split("+")[0], "2.15.0"),
    "transformers": (transformers.__version__, "5.24.0"),
    "tokenizers": (tokenizers.__version__, "0.23.3"),
    "sentence_transformers": (sentence_transformers.__version__, "6.2.0"),
}

REPO = Path(__file__).resolve().parents[2]
GOLDEN_DIR = REPO / "tests" / "golden"
FIXTURES = Path(os.environ.get("STOKE_FIXTURES_DIR", REPO.parent / "shared" / "fixtures"))

TRAIN_LABELS_1 = [0, 1, 2, 0, 1, 2, 0, 1]  # the fixtures' labels, taken mod num_labels
TRAIN_LABELS_2 = [2, 1, 0, 2, 1, 0, 2, 1]
PAIRS = [(0, 1), (54, 56), (2, 65)]
HIDDEN_TEXTS = 16  # last_hidden_state is stored for texts 0..15 only (size budget)
ST_BATCH = 16

F64_NOTE = "float64: the model cast with .double() (weights are the float32 file, widened), same inputs"


# ---------------------------------------------------------------------------------------------
# Model specifications


@dataclass
class Spec:
    name: str
    seed: int
    max_length: int  # tokenizer model_max_length = sentence-transformers max_seq_length
    make_config: Callable[[int], transformers.PretrainedConfig]  # vocab size -> config
    make_tokenizer: Callable[["Spec"], transformers.PreTrainedTokenizerBase]
    head_name: str  # golden name of the input of the final classifier Linear
    head_description: str
    pooling: str  # "mean" or "cls"
    normalize: bool
    notes: list[str] = field(default_factory=list)


def texts_of(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def corpus_records() -> list[dict]:
    path = FIXTURES / "corpus" / "fortunes-multilingual.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def corpus_texts(skip_langs: tuple[str, ...] = ()) -> list[str]:
    return [r["text"] for r in corpus_records() if r["lang"] not in skip_langs]


def bert_vocab() -> list[str]:
    return (FIXTURES / "models" / "tiny-bert" / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]


def wordpiece_tokenizer(cls_name: str) -> Callable[[Spec], transformers.PreTrainedTokenizerBase]:
    def make(spec: Spec):
        vocab = {tok: i for i, tok in enumerate(bert_vocab())}
        cls = getattr(transformers, cls_name)
        return cls(vocab=vocab, do_lower_case=True, model_max_length=spec.max_length)

    return make


def mpnet_tokenizer(spec: Spec):
    # MPNet's vocab is BERT's with <s> <pad> </s> <unk> in front and <mask> last (as in
    # microsoft/mpnet-base); here the tiny-bert vocab without its five [..] specials.
    bert = [t for t in bert_vocab() if t not in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")]
    tokens = ["<s>", "<pad>", "</s>", "<unk>"] + bert + ["<mask>"]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    return transformers.MPNetTokenizer(vocab=vocab, do_lower_case=True, unk_token="<unk>",
                                       model_max_length=spec.max_length)


def roberta_bpe_tokenizer(spec: Spec):
    # A real byte-level BPE, trained by HF tokenizers on the corpus like RoBERTa's/GPT-2's.
    bpe = tokenizers.ByteLevelBPETokenizer(add_prefix_space=False, trim_offsets=True)
    bpe.train_from_iterator(corpus_texts(), vocab_size=2000, min_frequency=2, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    model = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    # <mask> swallows the space before it, as in roberta-base's tokenizer.json
    mask = tokenizers.AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False, special=True)
    return transformers.RobertaTokenizer(vocab=model["vocab"], merges=merges, mask_token=mask,
                                         model_max_length=spec.max_length)


def xlmr_precompiled_charsmap() -> bytes:
    """The nmt_nfkc charsmap of the fixtures' sentencepiece model (as transformers converts it)."""
    tok = transformers.XLMRobertaTokenizer.from_pretrained(str(FIXTURES / "models" / "tiny-xlmr"))
    normalizer = json.loads(tok.backend_tokenizer.to_str())["normalizer"]
    found = [n for n in ([normalizer] + normalizer.get("normalizers", [])) if n.get("type") == "Precompiled"]
    if not found:
        raise RuntimeError("tiny-xlmr's converted tokenizer has no Precompiled normalizer")
    return base64.b64decode(found[0]["precompiled_charsmap"])


RETRAIN = {"unigram": False}  # --retrain-unigram


def committed_unigram_vocab(spec: Spec) -> list[tuple[str, float]] | None:
    path = GOLDEN_DIR / "models" / spec.name / "tokenizer.json"
    if RETRAIN["unigram"] or not path.exists():
        return None
    return [(p, s) for p, s in json.loads(path.read_text(encoding="utf-8"))["model"]["vocab"]]


def camembert_unigram_tokenizer(spec: Spec):
    # A Unigram model trained by HF tokenizers on the corpus, with the normalizer and the
    # pre-tokenizer CamembertTokenizer builds (sentencepiece nmt_nfkc, Metaspace), laid out
    # like camembert-base: <s>NOTUSED <pad> </s>NOTUSED <unk>, the trained pieces (its own
    # <unk> renamed <unk>NOTUSED, <s> and </s> at 5 and 6), <mask> last.
    # The trainer is not deterministic from run to run (the piece set is, the scores move by
    # ~1e-4: Rust hash-map order), so the pieces and scores of the committed tokenizer.json are
    # reused unless --retrain-unigram.
    charsmap = xlmr_precompiled_charsmap()
    committed = committed_unigram_vocab(spec)
    if committed is not None:
        return transformers.CamembertTokenizer(vocab=committed, _spm_precompiled_charsmap=charsmap,
                                               model_max_length=spec.max_length)
    shell = transformers.CamembertTokenizer(_spm_precompiled_charsmap=charsmap)
    trainer_tok = tokenizers.Tokenizer(tokenizers.models.Unigram())
    trainer_tok.normalizer = shell.backend_tokenizer.normalizer
    trainer_tok.pre_tokenizer = shell.backend_tokenizer.pre_tokenizer
    trainer = tokenizers.trainers.UnigramTrainer(vocab_size=2000, special_tokens=["<unk>", "<s>", "</s>"],
                                                 unk_token="<unk>", max_piece_length=16, show_progress=False)
    # Without the Chinese texts: their thousands of characters do not fit a 2000-piece vocab
    # (UnigramTrainer has no character_coverage); Chinese text then maps to <unk>, like camembert-base.
    trainer_tok.train_from_iterator(corpus_texts(skip_langs=("zh",)), trainer=trainer)
    pieces = json.loads(trainer_tok.to_str())["model"]["vocab"]
    # Scores rounded to float32, as sentencepiece stores them: the Rust tokenizers parse long
    # decimals in tokenizer.json up to 1 ulp off (serde_json), which flips near-ties in the
    # Viterbi search, so a file load and transformers' load would segment some texts apart.
    vocab = [("<s>NOTUSED", 0.0), ("<pad>", 0.0), ("</s>NOTUSED", 0.0), ("<unk>", 0.0)]
    vocab += [("<unk>NOTUSED" if p == "<unk>" else p, float(np.float32(s))) for p, s in pieces]
    vocab += [("<mask>", 0.0)]
    return transformers.CamembertTokenizer(vocab=vocab, _spm_precompiled_charsmap=charsmap,
                                           model_max_length=spec.max_length)


def xlmr5_tokenizer(spec: Spec):
    # transformers 5 converts the sentencepiece model into a tokenizer.json Unigram and
    # save_pretrained writes no sentencepiece.bpe.model.
    tok = transformers.XLMRobertaTokenizer.from_pretrained(str(FIXTURES / "models" / "tiny-xlmr"))
    tok.model_max_length = spec.max_length
    return tok


MODERNBERT_SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]


def modernbert_tokenizer(spec: Spec):
    # ModernBERT's tokenizer form (answerdotai/ModernBERT-base): a byte-level BPE (GPT-NeoX's, with
    # <|endoftext|> = 0 and <|padding|> = 1 in front), [UNK] [CLS] [SEP] [PAD] [MASK] appended after
    # the BPE vocab ([MASK] lstrip), a TemplateProcessing post-processor "[CLS] $A [SEP]" /
    # "[CLS] $A [SEP] $B:1 [SEP]:1", no token_type_ids. Here the BPE is tiny-roberta's (its five
    # specials at 0..4 renamed), read from its committed tokenizer.json.
    rob = json.loads((GOLDEN_DIR / "models" / "tiny-roberta" / "tokenizer.json").read_text(encoding="utf-8"))
    renamed = {"<s>": "<|endoftext|>", "<pad>": "<|padding|>", "</s>": "[unused0]", "<unk>": "[unused1]",
               "<mask>": "[unused2]"}
    vocab = {renamed.get(t, t): i for t, i in rob["model"]["vocab"].items()}
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in rob["model"]["merges"]]
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                                            use_regex=True)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    bpe.add_special_tokens([tokenizers.AddedToken(t, normalized=False, special=True)
                            for t in sorted(renamed.values(), key=lambda t: vocab[t])])
    first = len(vocab)
    bpe.add_special_tokens([tokenizers.AddedToken(t, lstrip=(t == "[MASK]"), normalized=False, special=True)
                            for t in MODERNBERT_SPECIALS])
    assert [bpe.token_to_id(t) for t in MODERNBERT_SPECIALS] == list(range(first, first + 5))
    cls_id, sep_id = bpe.token_to_id("[CLS]"), bpe.token_to_id("[SEP]")
    bpe.post_processor = tokenizers.processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
        mask_token="[MASK]", model_input_names=["input_ids", "attention_mask"], clean_up_tokenization_spaces=True,
        model_max_length=spec.max_length)


def modernbert_config(vocab: int, tok=None):
    # Both layer kinds (global, local, global), a window of 16 (+-8) narrower than most texts,
    # head dim 20 (not a power of two), distinct rope thetas, no biases (as every hub model).
    ids = {k: vocab + i for i, k in enumerate(("unk", "cls", "sep", "pad", "mask"))}
    return transformers.ModernBertConfig(
        vocab_size=vocab + 5, hidden_size=60, intermediate_size=44, num_hidden_layers=3, num_attention_heads=3,
        hidden_activation="gelu", max_position_embeddings=512, initializer_range=0.1, norm_eps=1e-5,
        norm_bias=False, global_rope_theta=20000.0, local_rope_theta=5000.0, global_attn_every_n_layers=2,
        local_attention=16, attention_bias=False, mlp_bias=False, classifier_bias=False,
        classifier_activation="gelu", classifier_pooling="mean", attention_dropout=0.0, embedding_dropout=0.0,
        mlp_dropout=0.0, classifier_dropout=0.0, pad_token_id=ids["pad"], cls_token_id=ids["cls"],
        sep_token_id=ids["sep"], bos_token_id=ids["cls"], eos_token_id=ids["sep"], num_labels=3)


def distilbert_config(vocab: int):
    return transformers.DistilBertConfig(
        vocab_size=vocab, max_position_embeddings=96, sinusoidal_pos_embds=False, n_layers=2, n_heads=5, dim=40,
        hidden_dim=88, activation="gelu", dropout=0.1, attention_dropout=0.1, seq_classif_dropout=0.2,
        initializer_range=0.1, pad_token_id=0, num_labels=2)


def electra_config(vocab: int):
    return transformers.ElectraConfig(
        vocab_size=vocab, embedding_size=24, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
        intermediate_size=100, hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
        max_position_embeddings=160, type_vocab_size=2, initializer_range=0.1, layer_norm_eps=1e-12,
        pad_token_id=0, num_labels=4)


def roberta_config(vocab: int):
    return transformers.RobertaConfig(
        vocab_size=vocab, hidden_size=48, num_hidden_layers=1, num_attention_heads=2, intermediate_size=80,
        hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=100,
        type_vocab_size=1, initializer_range=0.1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, num_labels=3)


def camembert_config(vocab: int):
    return transformers.CamembertConfig(
        vocab_size=vocab, hidden_size=40, num_hidden_layers=2, num_attention_heads=5, intermediate_size=68,
        hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=114,
        type_vocab_size=1, initializer_range=0.1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=5,
        eos_token_id=6, num_labels=2)


def xlmr5_config(vocab: int):
    return transformers.XLMRobertaConfig(
        vocab_size=vocab, hidden_size=24, num_hidden_layers=3, num_attention_heads=1, intermediate_size=44,
        hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=160,
        type_vocab_size=1, initializer_range=0.1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, num_labels=4)


def mpnet_config(vocab: int):
    return transformers.MPNetConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=60,
        hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=136,
        relative_attention_num_buckets=32, initializer_range=0.1, layer_norm_eps=1e-5, pad_token_id=1,
        bos_token_id=0, eos_token_id=2, num_labels=3)


def gte_config(vocab: int):
    # Head dim 18 (not a power of two), 2I = 140 GLU columns, a rope theta of its own, two token types.
    return transformers.GteConfig(
        vocab_size=vocab, hidden_size=54, num_hidden_layers=2, num_attention_heads=3, intermediate_size=70,
        hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=128,
        type_vocab_size=2, initializer_range=0.1, layer_norm_eps=1e-12, pad_token_id=0, num_labels=3,
        rope_parameters={"rope_type": "default", "rope_theta": 5000.0})


def nomic_config(vocab: int):
    # Head dim 10 (not a power of two), SwiGLU, its own rope theta, two token types.
    return transformers.NomicBertConfig(
        vocab_size=vocab, hidden_size=40, num_hidden_layers=2, num_attention_heads=4, intermediate_size=52,
        hidden_act="silu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=112,
        type_vocab_size=2, initializer_range=0.1, layer_norm_eps=1e-12, pad_token_id=0, num_labels=2,
        rope_parameters={"rope_type": "default", "rope_theta": 2000.0})


CLASSIFIERS = {"distilbert": "DistilBertForSequenceClassification", "electra": "ElectraForSequenceClassification",
               "roberta": "RobertaForSequenceClassification", "camembert": "CamembertForSequenceClassification",
               "xlm-roberta": "XLMRobertaForSequenceClassification", "mpnet": "MPNetForSequenceClassification",
               "gte": "GteForSequenceClassification", "nomic_bert": "NomicBertForSequenceClassification",
               "modernbert": "ModernBertForSequenceClassification"}
ROBERTA_HEAD = "the classification head's tanh(dense(last_hidden_state[:, 0])), the input of classifier.out_proj"
SPECS = {
    "tiny-distilbert": Spec(
        "tiny-distilbert", 20, 72, distilbert_config, wordpiece_tokenizer("DistilBertTokenizer"),
        "pre_classifier_hidden",
        "relu(pre_classifier(last_hidden_state[:, 0])), the input of classifier (dropout is identity in eval)",
        "mean", False),
    "tiny-electra": Spec(
        "tiny-electra", 21, 80, electra_config, wordpiece_tokenizer("ElectraTokenizer"), "cls_head_hidden",
        "ElectraClassificationHead: gelu(dense(last_hidden_state[:, 0])), the input of classifier.out_proj",
        "mean", False),
    "tiny-roberta": Spec("tiny-roberta", 22, 88, roberta_config, roberta_bpe_tokenizer, "cls_head_hidden",
                         ROBERTA_HEAD, "mean", False),
    "tiny-camembert": Spec("tiny-camembert", 23, 100, camembert_config, camembert_unigram_tokenizer,
                           "cls_head_hidden", ROBERTA_HEAD, "cls", False),
    "tiny-xlmr5": Spec("tiny-xlmr5", 24, 120, xlmr5_config, xlmr5_tokenizer, "cls_head_hidden", ROBERTA_HEAD,
                       "cls", True),
    "tiny-mpnet": Spec("tiny-mpnet", 25, 112, mpnet_config, mpnet_tokenizer, "cls_head_hidden",
                       "MPNetClassificationHead: tanh(dense(last_hidden_state[:, 0])), the input of "
                       "classifier.out_proj", "mean", True),
    "tiny-gte": Spec("tiny-gte", 26, 96, gte_config, wordpiece_tokenizer("BertTokenizer"), "pooler_output",
                     "GtePooler: tanh(pooler.dense(last_hidden_state[:, 0])), the input of classifier (dropout is "
                     "identity in eval)", "cls", True),
    "tiny-nomic": Spec("tiny-nomic", 27, 80, nomic_config, wordpiece_tokenizer("BertTokenizer"), "pooler_output",
                       "NomicBertPooler: tanh(pooler.dense(last_hidden_state[:, 0])), the input of classifier "
                       "(dropout is identity in eval)", "mean", True),
    "tiny-modernbert": Spec("tiny-modernbert", 28, 140, lambda v: modernbert_config(v - 5), modernbert_tokenizer,
                            "pooled_head_hidden",
                            "ModernBertPredictionHead: head.norm(gelu(head.dense(pooled))), pooled the masked mean "
                            "of last_hidden_state (classifier_pooling mean), the input of classifier",
                            "mean", True),
}
ORDER = ["tiny-distilbert", "tiny-electra", "tiny-roberta", "tiny-bert-dense", "tiny-xlmr5", "tiny-camembert",
         "tiny-mpnet", "tiny-qwen3", "tiny-qwen2", "tiny-gte", "tiny-nomic", "tiny-modernbert"]


# ---------------------------------------------------------------------------------------------
# Weights


def perturb(model: nn.Module) -> None:
    """LayerNorm weights ~ N(1, 0.1), every bias ~ N(0, 0.05), continuing the RNG stream.

    The stock init (biases 0, LayerNorm 1/0) gives goldens blind to a missing bias or
    LayerNorm term. MPNet's relative position bias is zero-mean N(0, 0.1) from the stock
    init; it is redrawn ~ N(0, 0.5) so a wrong bucket changes the outputs visibly.
    """
    layer_norm_weights = {id(m.weight) for m in model.modules() if isinstance(m, nn.LayerNorm)}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if id(p) in layer_norm_weights:
                p.normal_(1.0, 0.1)
            elif name.endswith("bias") and p.dim() == 1:
                p.normal_(0.0, 0.05)
        for name, p in model.named_parameters():
            if name.endswith("relative_attention_bias.weight"):
                p.normal_(0.0, 0.5)


def final_linear(model: nn.Module) -> nn.Linear:
    head = model.classifier
    return head.out_proj if hasattr(head, "out_proj") else head


def no_dropout_config(config):
    config = copy.deepcopy(config)
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout", "dropout",
                "attention_dropout", "seq_classif_dropout", "qa_dropout", "embedding_dropout", "mlp_dropout"):
        if hasattr(config, key):
            setattr(config, key, 0.0)
    return config


def load_model(folder: Path, dtype=torch.float32, train=False):
    config = transformers.AutoConfig.from_pretrained(str(folder))
    if train:
        config = no_dropout_config(config)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(folder), config=config, attn_implementation="eager")
    model = model.to(dtype)
    if train:
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0
        model.train()
    else:
        model.eval()
    return model


# ---------------------------------------------------------------------------------------------
# Golden collection


class Goldens:
    def __init__(self):
        self.tensors: dict[str, torch.Tensor] = {}
        self.meta: dict[str, dict] = {}

    def add(self, name: str, t: torch.Tensor, description: str) -> None:
        t = t.detach().contiguous()
        if t.dtype == torch.float64 and not name.endswith(".f64"):
            raise ValueError(name)
        self.tensors[name] = t.clone()
        dtype = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}[t.dtype]
        self.meta[name] = {"dtype": dtype, "shape": list(t.shape), "description": description}

    def add_f64(self, name: str, t: torch.Tensor, description: str) -> None:
        self.add(name + ".f64", t.double(), f"{description} ({F64_NOTE})")


def pooled_outputs(hidden: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    m = mask.unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
    cls = hidden[:, 0]
    norm = lambda x: torch.nn.functional.normalize(x, p=2, dim=1, eps=1e-12)  # noqa: E731
    return {"mean_pooled": mean, "cls_pooled": cls, "mean_pooled_normalized": norm(mean),
            "cls_pooled_normalized": norm(cls)}


POOLED_DESCRIPTIONS = {
    "mean_pooled": "sentence-transformers Pooling(mean): sum(h * mask) / max(sum(mask), 1e-9), special tokens included",
    "cls_pooled": "sentence-transformers Pooling(cls): last_hidden_state[:, 0]",
    "mean_pooled_normalized": "mean_pooled / max(||mean_pooled||_2, 1e-12) (sentence-transformers Normalize)",
    "cls_pooled_normalized": "cls_pooled / max(||cls_pooled||_2, 1e-12) (sentence-transformers Normalize)",
}


def forward(model, batch) -> dict[str, torch.Tensor]:
    captured = {}
    hooks = [final_linear(model).register_forward_pre_hook(lambda m, args: captured.setdefault("head", args[0]))]
    if model.config.model_type == "modernbert":  # its hidden_states are the layers' outputs, before final_norm
        def keep_hidden(module, args, output):  # returns None: the output stays as it is
            captured.setdefault("hidden", output[0])
        hooks.append(model.model.register_forward_hook(keep_hidden))
    try:
        with torch.no_grad():
            out = model(**batch, output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    hidden = captured["hidden"] if "hidden" in captured else out.hidden_states[-1]
    result = {"last_hidden_state": hidden, "logits": out.logits, "head": captured["head"]}
    result.update(pooled_outputs(hidden, batch["attention_mask"]))
    return result


def unpadded(model) -> bool:
    """transformers' ModernBERT in float64 turns padded rows into NaN in its local layers (a padding query
    whose window holds padding keys only: two float64 minima add up to -inf, the softmax gives NaN), and
    the NaN reaches the real rows through P V (0 * NaN). Its float64 goldens are therefore computed one
    text at a time, without padding; the float32 ones with the padded batch like every model."""
    return model.config.model_type == "modernbert" and next(model.parameters()).dtype == torch.float64


def forward_per_text(model, batch) -> dict[str, torch.Tensor]:
    """forward() of each row alone, cut to its real tokens; per-text outputs only."""
    rows = []
    for i in range(batch["input_ids"].shape[0]):
        n = int(batch["attention_mask"][i].sum())
        rows.append(forward(model, {k: v[i:i + 1, :n] for k, v in batch.items()}))
    return {k: torch.cat([r[k] for r in rows]) for k in rows[0] if k != "last_hidden_state"}


def batch_loss(model, batch, labels):
    """The model's mean cross-entropy of the batch (text by text where unpadded(model))."""
    if not unpadded(model):
        return model(**batch, labels=torch.tensor(labels)).loss
    n = batch["input_ids"].shape[0]
    losses = []
    for i in range(n):
        m = int(batch["attention_mask"][i].sum())
        losses.append(model(**{k: v[i:i + 1, :m] for k, v in batch.items()}, labels=torch.tensor(labels[i:i + 1])).loss)
    return torch.stack(losses).mean()


def tokenize(tok, texts, max_length, pairs_b=None):
    kwargs = dict(max_length=max_length, truncation=True, padding="longest", return_tensors="pt")
    return dict(tok(texts, pairs_b, **kwargs)) if pairs_b is not None else dict(tok(texts, **kwargs))


def add_inputs(g: Goldens, prefix: str, batch, what: str) -> None:
    g.add(prefix + "input_ids", batch["input_ids"], f"{what}: token ids")
    if "token_type_ids" in batch:
        g.add(prefix + "token_type_ids", batch["token_type_ids"], f"{what}: segment ids")
    g.add(prefix + "attention_mask", batch["attention_mask"], f"{what}: 1 for real tokens, 0 for padding")


def train_two_steps(folder: Path, tok, texts, spec_max_length, labels1, labels2, dtype):
    model = load_model(folder, dtype, train=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                            amsgrad=False)
    b1 = tokenize(tok, texts[0:8], spec_max_length)
    b2 = tokenize(tok, texts[8:16], spec_max_length)
    # every dropout is off: the train-mode forward equals the eval-mode one
    with torch.no_grad():
        b0 = {k: v[:1, :int(b1["attention_mask"][0].sum())] for k, v in b1.items()} if unpadded(model) else b1
        train_logits = model(**b0).logits
        model.eval()
        eval_logits = model(**b0).logits
        model.train()
    assert torch.allclose(train_logits, eval_logits, rtol=0, atol=1e-6), "a dropout is still active"
    opt.zero_grad()
    loss1 = batch_loss(model, b1, labels1)
    loss1.backward()
    grads = {n: (p.grad.clone() if p.grad is not None else torch.zeros_like(p)) for n, p in model.named_parameters()}
    opt.step()
    after1 = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt.zero_grad()
    loss2 = batch_loss(model, b2, labels2)
    loss2.backward()
    opt.step()
    after2 = {n: p.detach().clone() for n, p in model.named_parameters()}
    return b1, b2, loss1.detach(), grads, after1, loss2.detach(), after2


def gte_saved_names(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """GteModel's module names -> the names save_pretrained writes (the hub's: transformers 5 reverts its
    conversion on save): q/k/v fused into qkv_proj, up and gate into up_gate_proj ([up | gate]), the
    layers under encoder.layer, attn_ln / mlp_ln. Gradients and optimizer steps are per element, so
    the fused tensors' gradients and steps are the parts' concatenated."""
    import re
    out: dict[str, torch.Tensor] = {}
    parts: dict[str, dict[str, torch.Tensor]] = {}
    for name, t in tensors.items():
        m = re.fullmatch(r"(.*)layers\.(\d+)\.(.+)", name)
        if not m:
            out[name] = t
            continue
        base = f"{m.group(1)}encoder.layer.{m.group(2)}."
        rest = m.group(3)
        fused = re.fullmatch(r"self_attn\.([qkv])_proj\.(weight|bias)", rest)
        glu = re.fullmatch(r"mlp\.(up|gate)_proj\.weight", rest)
        if fused:
            parts.setdefault(f"{base}attention.qkv_proj.{fused.group(2)}", {})[fused.group(1)] = t
        elif glu:
            parts.setdefault(f"{base}mlp.up_gate_proj.weight", {})[glu.group(1)] = t
        else:
            rest = (rest.replace("self_attn.o_proj", "attention.o_proj")
                    .replace("post_attention_layernorm", "attn_ln").replace("post_mlp_layernorm", "mlp_ln"))
            out[base + rest] = t
    for name, p in parts.items():
        order = ("q", "k", "v") if "qkv_proj" in name else ("up", "gate")
        out[name] = torch.cat([p[k] for k in order], dim=0)
    return out


def nomic_saved_names(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """NomicBertModel's module names -> the hub names save_pretrained writes: q/k/v fused into Wqkv,
    up/gate/down as fc11/fc12/fc2, the layers under encoder.layers, norm1/norm2, emb_ln."""
    import re
    out: dict[str, torch.Tensor] = {}
    qkv: dict[str, dict[str, torch.Tensor]] = {}
    renames = [("self_attn.o_proj", "attn.out_proj"), ("mlp.up_proj", "mlp.fc11"), ("mlp.gate_proj", "mlp.fc12"),
               ("mlp.down_proj", "mlp.fc2"), ("post_attention_layernorm", "norm1"), ("post_mlp_layernorm", "norm2")]
    for name, t in tensors.items():
        name = name.replace("embeddings.LayerNorm", "emb_ln")
        m = re.fullmatch(r"(.*)layers\.(\d+)\.(.+)", name)
        if not m:
            out[name] = t
            continue
        base = f"{m.group(1)}encoder.layers.{m.group(2)}."
        rest = m.group(3)
        fused = re.fullmatch(r"self_attn\.([qkv])_proj\.weight", rest)
        if fused:
            qkv.setdefault(f"{base}attn.Wqkv.weight", {})[fused.group(1)] = t
            continue
        for a, b in renames:
            rest = rest.replace(a, b)
        out[base + rest] = t
    for name, p in qkv.items():
        out[name] = torch.cat([p[k] for k in ("q", "k", "v")], dim=0)
    return out


SAVED_NAMES = {"gte": gte_saved_names, "nomic_bert": nomic_saved_names}


def word_embedding_name(model) -> str:
    weight = model.get_input_embeddings().weight
    return next(n for n, p in model.named_parameters() if p is weight)


def check_untouched_rows(name, rows, initial, grad, after1, after2) -> None:
    """Rows of the word embeddings outside the batches: zero gradient, AdamW's decay only."""
    others = torch.ones(initial.shape[0], dtype=torch.bool)
    others[rows] = False
    decay = 1 - 1e-3 * 0.01
    assert torch.all(grad[others] == 0), f"{name}: a row outside the batches has a gradient"
    assert torch.equal(after1[others], initial[others] * decay), f"{name}: after_step of untouched rows"
    assert torch.equal(after2[others], initial[others] * decay * decay), f"{name}: after_step2 of untouched rows"


# ---------------------------------------------------------------------------------------------
# Folders


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_st_files(folder: Path, hidden: int, max_length: int, pooling: str, normalize: bool) -> list[dict]:
    """sentence-transformers files in the layout of the fixtures (and of most Hub models)."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    write_json(folder / "modules.json", modules)
    write_json(folder / "sentence_bert_config.json", {"max_seq_length": max_length, "do_lower_case": False})
    write_json(folder / "1_Pooling" / "config.json", {
        "word_embedding_dimension": hidden,
        "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    })
    return modules


def st_encode(folder_or_model, texts, dtype=torch.float32) -> torch.Tensor:
    st = folder_or_model
    if isinstance(st, Path):
        st = sentence_transformers.SentenceTransformer(str(st), device="cpu")
    st = st.to(dtype)
    emb = st.encode(texts, batch_size=ST_BATCH, convert_to_tensor=True, show_progress_bar=False)
    return emb.to(dtype)


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float(torch.linalg.norm(a - b) / max(float(torch.linalg.norm(b)), 1e-300))


def folder_files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}


def tokens_jsonl(tok, texts) -> list[dict]:
    rows = []
    for i, text in enumerate(texts):
        ids = tok(text, add_special_tokens=True, truncation=False)["input_ids"]
        rows.append({"text_index": i, "ids": ids, "tokens": tok.convert_ids_to_tokens(ids),
                     "pieces": tok.tokenize(text), "decoded": tok.decode(ids, skip_special_tokens=True)})
    return rows


def check_tokens_against_rust(folder: Path, rows: list[dict], texts) -> None:
    """A second, independent load: the bare Rust tokenizer from tokenizer.json."""
    raw = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    raw.no_truncation()
    raw.no_padding()
    for row, text in zip(rows, texts):
        enc = raw.encode(text, add_special_tokens=True)
        assert enc.ids == row["ids"], f"{folder.name}: text {row['text_index']}: tokenizer.json disagrees"
        assert [raw.id_to_token(i) for i in enc.ids] == row["tokens"], \
            f"{folder.name}: text {row['text_index']}: tokens disagree"


def check_tokens_against_bpe_files(folder: Path, tok, rows: list[dict], texts) -> None:
    """A third load: a byte-level BPE built from vocab.json + merges.txt alone."""
    bpe = tokenizers.ByteLevelBPETokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"),
                                           add_prefix_space=False, trim_offsets=True)
    bpe.add_special_tokens([t for t in tok.all_special_tokens if t != tok.mask_token])
    bpe.add_special_tokens([tokenizers.AddedToken(tok.mask_token, lstrip=True, special=True)])
    for row, text in zip(rows, texts):
        ids = bpe.encode(text).ids
        assert [tok.cls_token_id] + ids + [tok.sep_token_id] == row["ids"], \
            f"{folder.name}: text {row['text_index']}: vocab.json + merges.txt disagree"


def produced_by() -> dict:
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__, "sentence_transformers": sentence_transformers.__version__,
            "safetensors": safetensors.__version__, "numpy": np.__version__,
            "python": platform.python_version(), "device": "cpu, torch.set_num_threads(1)",
            "script": "tests/golden/make_model_goldens.py"}


def save_goldens(name: str, g: Goldens, info: dict, token_rows: list[dict] | None) -> None:
    save_file(g.tensors, str(GOLDEN_DIR / f"{name}.safetensors"))
    (GOLDEN_DIR / f"{name}.safetensors").chmod(0o644)
    info["tensors"] = g.meta
    write_json(GOLDEN_DIR / f"{name}.json", info)
    if token_rows is not None:
        with open(GOLDEN_DIR / f"{name}.tokens.jsonl", "w", encoding="utf-8") as f:
            for row in token_rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


def sizes(name: str) -> dict:
    folder = GOLDEN_DIR / "models" / name
    files = [p for p in folder.rglob("*") if p.is_file()] + sorted(GOLDEN_DIR.glob(f"{name}.*"))
    return {"total_bytes": sum(p.stat().st_size for p in files)}


# ---------------------------------------------------------------------------------------------
# The encoder models


def modernbert_hub_schema(spec: Spec, folder: Path, config) -> None:
    """config.json as the hub folders have it (answerdotai/ModernBERT-base and the embedders built on it):
    global_attn_every_n_layers, global_rope_theta, local_rope_theta instead of transformers 5's layer_types
    and rope_parameters. What transformers 5 wrote is kept beside the goldens, for the other schema's test."""
    written = json.loads((folder / "config.json").read_text())
    write_json(GOLDEN_DIR / f"{spec.name}.transformers5-config.json", written)
    cfg = dict(written)
    layer_types = cfg.pop("layer_types")
    rope = cfg.pop("rope_parameters")
    every = next(i for i, t in enumerate(layer_types[1:], 1) if t == "full_attention")
    assert layer_types == ["sliding_attention" if i % every else "full_attention" for i in range(len(layer_types))]
    cfg["global_attn_every_n_layers"] = every
    cfg["global_rope_theta"] = rope["full_attention"]["rope_theta"]
    cfg["local_rope_theta"] = rope["sliding_attention"]["rope_theta"]
    assert rope["full_attention"]["rope_type"] == rope["sliding_attention"]["rope_type"] == "default"
    write_json(folder / "config.json", cfg)
    again = transformers.AutoConfig.from_pretrained(str(folder))
    assert again.layer_types == config.layer_types and again.rope_parameters == config.rope_parameters, \
        "the hub schema reads back differently"


def make_encoder_model(spec: Spec, texts: list[str]) -> None:
    folder = GOLDEN_DIR / "models" / spec.name
    tok = spec.make_tokenizer(spec)  # before the folder goes: it may reuse the committed Unigram
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)

    config = spec.make_config(len(tok))
    config.architectures = None
    torch.manual_seed(spec.seed)
    cls = getattr(transformers, CLASSIFIERS[config.model_type])
    config._attn_implementation = "eager"
    model = cls(config)
    perturb(model)
    model.save_pretrained(str(folder))
    (folder / "model.safetensors").chmod(0o644)
    tok.save_pretrained(str(folder))
    if json.loads(tok.backend_tokenizer.to_str())["model"]["type"] == "BPE" and config.model_type != "modernbert":
        # transformers 5 writes tokenizer.json only; Hub RoBERTa folders also carry the
        # classic vocab.json + merges.txt, written here by the tokenizers BPE model itself.
        tok.backend_tokenizer.model.save(str(folder))
    assert not list(folder.glob("*.model")), f"{spec.name}: save_pretrained wrote a sentencepiece model"
    if config.model_type == "modernbert":
        modernbert_hub_schema(spec, folder, config)
    modules = write_st_files(folder, config.hidden_size, spec.max_length, spec.pooling, spec.normalize)
    built_state = {k: v.clone() for k, v in model.state_dict().items()}
    del model

    # Everything below comes from the saved folder, loaded again.
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = load_model(folder)
    state_dict_keys = list(model.state_dict().keys())
    for k, v in model.state_dict().items():
        assert torch.equal(v, built_state[k]), f"{spec.name}: {k} changed on reload"
    with safetensors.safe_open(str(folder / "model.safetensors"), "pt") as f:
        file_keys = sorted(f.keys())
    positions = config.max_position_embeddings - (config.pad_token_id + 1 if config.model_type in (
        "roberta", "camembert", "xlm-roberta", "mpnet") else 0)
    assert spec.max_length < positions, f"{spec.name}: max_length {spec.max_length} >= usable positions {positions}"

    g = Goldens()
    what = f"all {len(texts)} texts, fast tokenizer, max_length={spec.max_length}, truncation=True, padding to the longest"
    batch = tokenize(tok, texts, spec.max_length)
    add_inputs(g, "", batch, what)
    out = forward(model, batch)
    H = config.hidden_size
    g.add("last_hidden_state", out["last_hidden_state"][:HIDDEN_TEXTS],
          f"encoder output of texts 0..{HIDDEN_TEXTS - 1} only [16, L, {H}] (rows 0..15 of the main batch, same "
          "padded width L), eval mode, padding positions included as computed (float32)")
    g.add(spec.head_name, out["head"], spec.head_description + " (float32)")
    g.add("logits", out["logits"], f"sequence-classification logits [n, {config.num_labels}], eval mode (float32)")
    if config.model_type == "modernbert":  # the other classifier_pooling, same weights
        model.config.classifier_pooling = "cls"
        g.add("logits_cls_pooling", forward(model, batch)["logits"], "logits with classifier_pooling = cls "
              "(the head reads last_hidden_state[:, 0]) instead of the folder's mean, same weights (float32)")
        model.config.classifier_pooling = "mean"
    for key, desc in POOLED_DESCRIPTIONS.items():
        g.add(key, out[key], desc + " (float32)")

    pair_a = [texts[a] for a, _ in PAIRS]
    pair_b = [texts[b] for _, b in PAIRS]
    pairs = tokenize(tok, pair_a, spec.max_length, pair_b)
    add_inputs(g, "pair.", pairs, "sentence pairs (a, b) listed in the json, the tokenizer's pair template, "
               "truncation longest_first, padding to the longest")
    pout = forward(model, pairs)
    g.add("pair.logits", pout["logits"], "sequence-classification logits of the pairs, eval mode (float32)")
    g.add("pair." + spec.head_name, pout["head"], f"{spec.head_name} of the pairs (float32)")

    st = st_encode(folder, texts)
    st_reference = out[f"{spec.pooling}_pooled" + ("_normalized" if spec.normalize else "")]
    st_error = relative_error(st, st_reference)
    assert st_error < 1e-5, f"{spec.name}: sentence-transformers encode differs from the pooled golden: {st_error}"
    g.add("st_embeddings", st, "SentenceTransformer(folder).encode(texts, batch_size=16): the folder's own modules "
          f"(Transformer -> Pooling({spec.pooling})" + (" -> Normalize" if spec.normalize else "") + "), float32; "
          "its batches are sorted by length, so the padding differs from the main batch")

    model64 = load_model(folder, torch.float64)
    forward64 = forward_per_text if unpadded(model64) else forward
    out64 = forward64(model64, batch)
    g.add_f64(spec.head_name, out64["head"], spec.head_description)
    g.add_f64("logits", out64["logits"], "sequence-classification logits")
    for key, desc in POOLED_DESCRIPTIONS.items():
        g.add_f64(key, out64[key], desc)
    pout64 = forward64(model64, pairs)
    g.add_f64("pair.logits", pout64["logits"], "sequence-classification logits of the pairs")
    g.add_f64("pair." + spec.head_name, pout64["head"], f"{spec.head_name} of the pairs")

    labels1 = [x % config.num_labels for x in TRAIN_LABELS_1]
    labels2 = [x % config.num_labels for x in TRAIN_LABELS_2]
    b1, b2, loss, grads, after1, loss2, after2 = train_two_steps(folder, tok, texts, spec.max_length, labels1,
                                                                 labels2, torch.float32)
    saved_names = SAVED_NAMES.get(config.model_type)
    if saved_names:  # the goldens name tensors as the checkpoint file does (and as stoke's checkpoints do)
        with safetensors.safe_open(str(folder / "model.safetensors"), "pt") as f:
            file_tensors = {k: f.get_tensor(k) for k in f.keys()}
        renamed = saved_names(dict(model.state_dict()))
        assert sorted(renamed) == sorted(file_tensors), f"{spec.name}: renamed keys differ from the file's"
        assert all(torch.equal(renamed[k], file_tensors[k]) for k in renamed), f"{spec.name}: renaming is wrong"
        grads, after1, after2 = saved_names(grads), saved_names(after1), saved_names(after2)
    add_inputs(g, "train.", b1, "training step 1 batch (texts 0..7), padded to its own longest")
    g.add("train.labels", torch.tensor(labels1), f"training step 1 labels {labels1}")
    add_inputs(g, "train2.", b2, "training step 2 batch (texts 8..15), padded to its own longest")
    g.add("train2.labels", torch.tensor(labels2), f"training step 2 labels {labels2}")
    g.add("loss", loss, "mean cross-entropy of training step 1 (train mode, every dropout p=0) (float32)")
    g.add("loss_step2", loss2, "mean cross-entropy of training step 2, computed with the after_step parameters "
          "(float32)")
    word = word_embedding_name(model)
    initial = saved_names(dict(model.state_dict())) if saved_names else model.state_dict()
    rows = sorted(set(b1["input_ids"].flatten().tolist()) | set(b2["input_ids"].flatten().tolist()))
    check_untouched_rows(word, rows, initial[word], grads[word], after1[word], after2[word])
    rows_t = torch.tensor(rows, dtype=torch.int64)
    g.add("train.word_embedding_rows", rows_t, f"the {len(rows)} rows of {word} (token ids) that occur in either "
          "training batch, ascending; the *_rows.* goldens hold these rows only. Every other row has gradient exactly "
          "0, after_step = w * (1 - 1e-3 * 0.01) and after_step2 = that * (1 - 1e-3 * 0.01) (float32 arithmetic, "
          "checked by the generator)")
    for n in grads:
        if n == word:
            g.add("grad_rows." + n, grads[n][rows_t], f"rows train.word_embedding_rows of the gradient of the step 1 "
                  f"loss w.r.t. {n} (float32)")
        else:
            g.add("grad." + n, grads[n], f"gradient of the step 1 loss w.r.t. {n} (float32)")
    for prefix, after, what in (("after_step", after1, "one AdamW step"), ("after_step2", after2, "two AdamW steps")):
        for n in after:
            if n == word:
                g.add(prefix + "_rows." + n, after[n][rows_t], f"rows train.word_embedding_rows of {n} after {what} "
                      "(float32)")
            else:
                g.add(prefix + "." + n, after[n], f"{n} after {what} (float32)")
    _, _, loss64, _, _, loss2_64, _ = train_two_steps(folder, tok, texts, spec.max_length, labels1, labels2,
                                                      torch.float64)
    g.add_f64("loss", loss64, "mean cross-entropy of training step 1, the whole training run in float64")
    g.add_f64("loss_step2", loss2_64, "mean cross-entropy of training step 2, the whole training run in float64")

    token_rows = tokens_jsonl(tok, texts)
    check_tokens_against_rust(folder, token_rows, texts)
    if (folder / "merges.txt").exists():
        check_tokens_against_bpe_files(folder, tok, token_rows, texts)

    info = {
        "model": spec.name,
        "model_dir": f"models/{spec.name}",
        "golden_file": f"{spec.name}.safetensors",
        "tokens_file": f"{spec.name}.tokens.jsonl",
        "texts_file": "golden/texts.jsonl of the fixtures",
        "n_texts": len(texts),
        "architecture": cls.__name__,
        "shape": {"hidden_size": H, "num_hidden_layers": config.num_hidden_layers,
                  "num_attention_heads": config.num_attention_heads,
                  "head_dim": H // config.num_attention_heads,
                  "intermediate_size": getattr(config, "intermediate_size", None) or config.hidden_dim,
                  "max_position_embeddings": config.max_position_embeddings, "usable_positions": positions,
                  "vocab_size": config.vocab_size, "num_labels": config.num_labels,
                  **({"embedding_size": config.embedding_size} if hasattr(config, "embedding_size") else {})},
        "config": config.to_dict(),
        "seed": spec.seed,
        "weights": f"torch.manual_seed({spec.seed}); model = {cls.__name__}(config) (stock _init_weights, "
                   "initializer_range 0.1, padding rows zero); then, continuing the same RNG stream, every LayerNorm "
                   "weight ~ N(1, 0.1) and every bias ~ N(0, 0.05)"
                   + ("; then every relative_attention_bias weight ~ N(0, 0.5)" if config.model_type == "mpnet" else "")
                   + "; float32",
        "state_dict_keys": state_dict_keys,
        "safetensors_keys": file_keys,
        "folder_files": folder_files(folder),
        "tokenizer": {"class": type(tok).__name__, "backend": "tokenizers (tokenizer.json)",
                      "vocab_size": len(tok), "model": json.loads(tok.backend_tokenizer.to_str())["model"]["type"],
                      "special_tokens": {k: v for k, v in tok.special_tokens_map.items()},
                      "special_token_ids": {k: tok.convert_tokens_to_ids(v) for k, v in tok.special_tokens_map.items()
                                            if isinstance(v, str)},
                      "model_input_names": list(tok.model_input_names)},
        "tokenization": {"max_length": spec.max_length, "truncation": True, "truncation_strategy": "longest_first",
                         "padding": "longest (right padding)", "pad_token_id": tok.pad_token_id,
                         "add_special_tokens": True},
        "per_text_token_counts": [len(r["ids"]) for r in token_rows],
        "pairs": [{"a_index": a, "b_index": b} for a, b in PAIRS],
        "sentence_transformers": {"modules": modules, "max_seq_length": spec.max_length, "pooling": spec.pooling,
                                  "normalize": spec.normalize,
                                  "st_vs_pooled_relative_error": st_error},
        "head": {"name": spec.head_name, "definition": spec.head_description},
        "training": {
            "step1_text_indices": list(range(8)), "step1_labels": labels1,
            "step2_text_indices": list(range(8, 16)), "step2_labels": labels2,
            "mode": "model.train() with every dropout probability 0.0 (config dropouts 0.0, every nn.Dropout p=0); "
                    "checked: the train-mode logits equal the eval-mode ones",
            "loss": "torch.nn.CrossEntropyLoss() (mean over the batch), computed by the model from labels",
            "optimizer": "torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, "
                         "weight_decay=0.01, amsgrad=False); one parameter group, so weight decay applies to every "
                         "parameter incl. biases and LayerNorm; opt.zero_grad() before each step",
            "parameters": [n for n, _ in load_model(folder).named_parameters()],
        },
        "attention_implementation": "eager",
        "float64": "tensors named *.f64 come from the same weights widened with .double(); stored for the compact "
                   "outputs, the pair outputs and the losses (the loss pair from a float64 training run)",
        "left_out": [f"last_hidden_state of texts {HIDDEN_TEXTS}..{len(texts) - 1} (size budget)",
                     "probe.* (per-layer hidden states and attention probabilities)",
                     "float64 versions of last_hidden_state, st_embeddings, grad.*, after_step*.*",
                     f"rows of grad/after_step/after_step2 of {word} outside train.word_embedding_rows (their values "
                     "follow from the model file, see that tensor's description)"],
        "produced_by": produced_by(),
    }
    if spec.name == "tiny-camembert":
        info["tokenizer"]["unigram_training"] = (
            "tokenizers.trainers.UnigramTrainer(vocab_size=2000, special_tokens=['<unk>', '<s>', '</s>'], "
            "unk_token='<unk>', max_piece_length=16) on the corpus texts except lang zh, with CamembertTokenizer's "
            "normalizer (tiny-xlmr's Precompiled nmt_nfkc map) and pre-tokenizer; scores rounded to float32. "
            "The trainer is not run-to-run deterministic (same pieces, scores within ~1e-3), so the generator "
            "reuses the committed tokenizer.json's pieces and scores unless --retrain-unigram")
    if spec.name == "tiny-xlmr5":
        info["tokenizer"]["differences_from_fixture_tiny_xlmr"] = differences_from_slow_xlmr(token_rows)
    save_goldens(spec.name, g, info, token_rows)
    recheck(spec, texts)


def differences_from_slow_xlmr(rows: list[dict]) -> dict:
    """Where transformers 5's tokenizer.json of tiny-xlmr differs from the slow sentencepiece goldens."""
    fixture = [json.loads(line) for line in
               (FIXTURES / "golden" / "tiny-xlmr.tokens.jsonl").read_text(encoding="utf-8").split("\n") if line]
    out = {}
    for mine, theirs in zip(rows, fixture):
        fields = [k for k in ("ids", "tokens", "pieces", "decoded") if mine[k] != theirs[k]]
        if fields:
            out[str(mine["text_index"])] = fields
    return {"note": "fields of tokens.jsonl that differ from the fixtures' tiny-xlmr.tokens.jsonl (slow "
                    "sentencepiece tokenizer of transformers 4.29), by text index; see README.md",
            "texts": out}


def recheck(spec: Spec, texts: list[str]) -> None:
    """Reload the written folder and goldens and recompute the logits and one gradient."""
    from safetensors.torch import load_file
    folder = GOLDEN_DIR / "models" / spec.name
    g = load_file(str(GOLDEN_DIR / f"{spec.name}.safetensors"))
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()  # default attention
    batch = tokenize(tok, texts, spec.max_length)
    assert torch.equal(batch["input_ids"], g["input_ids"])
    with torch.no_grad():
        logits = model(**batch).logits
    err = relative_error(logits, g["logits.f64"])
    assert err < 1e-5, f"{spec.name}: logits recomputed with the default attention differ: {err}"
    print(f"{spec.name}: recheck ok (logits relative error {err:.2e} with the default attention)")


# ---------------------------------------------------------------------------------------------
# tiny-bert-dense: a sentence-transformers model with a Dense module after pooling


def make_bert_dense(texts: list[str]) -> None:
    name = "tiny-bert-dense"
    folder = GOLDEN_DIR / "models" / name
    if folder.exists():
        shutil.rmtree(folder)
    base = FIXTURES / "models" / "tiny-bert"
    shutil.copytree(base, folder, ignore=shutil.ignore_patterns("1_Pooling", "modules.json"))
    for p in folder.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)

    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer
    torch.manual_seed(30)
    dense = Dense(in_features=64, out_features=24, bias=True, activation_function=nn.Tanh())
    with torch.no_grad():
        dense.linear.weight.normal_(0.0, 0.15)
        dense.linear.bias.normal_(0.0, 0.05)
    st = sentence_transformers.SentenceTransformer(
        modules=[Transformer(str(base), max_seq_length=128), Pooling(64, "cls"), dense, Normalize()], device="cpu")
    # sentence-transformers 6.2 writes the module folders; the HF files stay the fixture's.
    with tempfile.TemporaryDirectory() as tmp:
        st.save(tmp, safe_serialization=True)
        for entry in ("modules.json", "config_sentence_transformers.json", "1_Pooling", "2_Dense", "3_Normalize"):
            src = Path(tmp) / entry
            if src.is_dir():
                shutil.copytree(src, folder / entry)
            elif src.exists():
                shutil.copy(src, folder / entry)
    for p in folder.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    assert (folder / "2_Dense" / "model.safetensors").exists(), "Dense was not saved as safetensors"
    assert not list(folder.rglob("*.bin")), "a pickle was written"

    loaded = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    modules = json.loads((folder / "modules.json").read_text())
    g = Goldens()
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    batch = tokenize(tok, texts, 128)
    add_inputs(g, "", batch, f"all {len(texts)} texts, fast tokenizer, max_length=128, truncation=True, padding "
               "to the longest (the same ids as the fixtures' tiny-bert)")
    full = st_encode(loaded, texts)
    assert relative_error(full, st_encode(st, texts)) < 1e-6, "the saved ST model differs from the built one"
    unnormalized_model = sentence_transformers.SentenceTransformer(modules=list(loaded)[:3], device="cpu")
    unnormalized = st_encode(unnormalized_model, texts)
    pooled = st_encode(sentence_transformers.SentenceTransformer(modules=list(loaded)[:2], device="cpu"), texts)
    with torch.no_grad():
        expected = torch.tanh(pooled.clone() @ dense.linear.weight.T + dense.linear.bias)
    assert relative_error(unnormalized, expected) < 1e-6
    g.add("cls_pooled", pooled, "Transformer -> Pooling(cls) output (the Dense module's input) [n, 64] (float32)")
    g.add("st_embeddings_unnormalized", unnormalized, "Transformer -> Pooling(cls) -> Dense(64 -> 24, tanh) [n, 24]: "
          "tanh(cls_pooled @ W^T + b) (float32)")
    g.add("st_embeddings", full, "SentenceTransformer(folder).encode(texts, batch_size=16): Pooling(cls) -> Dense -> "
          "Normalize [n, 24] (float32)")
    g.add_f64("cls_pooled", st_encode(sentence_transformers.SentenceTransformer(
        modules=list(loaded)[:2], device="cpu"), texts, torch.float64), "cls_pooled")
    g.add_f64("st_embeddings_unnormalized", st_encode(sentence_transformers.SentenceTransformer(
        modules=list(loaded)[:3], device="cpu"), texts, torch.float64), "st_embeddings_unnormalized")
    g.add_f64("st_embeddings", st_encode(sentence_transformers.SentenceTransformer(str(folder), device="cpu"), texts,
                                         torch.float64), "st_embeddings")
    # the encoder is the fixtures' tiny-bert: its goldens (transformers 4.29) agree
    from safetensors.torch import load_file
    fixture = load_file(str(FIXTURES / "golden" / "tiny-bert.safetensors"))
    assert torch.equal(g.tensors["input_ids"], fixture["input_ids"]), "ids differ from the fixtures' tiny-bert"
    fixture_error = relative_error(g.tensors["cls_pooled.f64"], fixture["cls_pooled.f64"])
    assert fixture_error < 1e-12, fixture_error
    info = {
        "model": name,
        "model_dir": f"models/{name}",
        "golden_file": f"{name}.safetensors",
        "texts_file": "golden/texts.jsonl of the fixtures",
        "checked": "input_ids equal the fixtures' tiny-bert goldens; cls_pooled.f64 equals their cls_pooled.f64 "
                   f"(relative error {fixture_error:.1e})",
        "n_texts": len(texts),
        "base": "the fixtures' models/tiny-bert folder, copied unchanged except its modules.json and 1_Pooling",
        "sentence_transformers": {
            "modules": modules,
            "written_by": "SentenceTransformer.save(safe_serialization=True) of sentence-transformers "
                          f"{sentence_transformers.__version__} (modules.json, config_sentence_transformers.json, "
                          "1_Pooling/config.json in its new format {embedding_dimension, pooling_mode, "
                          "include_prompt}, 2_Dense/config.json + 2_Dense/model.safetensors); "
                          "sentence_bert_config.json is the fixture's",
            "max_seq_length": 128,
            "pooling": "cls",
            "pooling_config": json.loads((folder / "1_Pooling" / "config.json").read_text()),
            "dense_config": json.loads((folder / "2_Dense" / "config.json").read_text()),
            "dense_weights": "2_Dense/model.safetensors: linear.weight [24, 64], linear.bias [24]; torch.manual_seed(30), "
                             "Dense(64, 24, bias=True, Tanh), then weight ~ N(0, 0.15), bias ~ N(0, 0.05)",
            "normalize": True,
        },
        "folder_files": folder_files(folder),
        "float64": "tensors named *.f64: the same sentence-transformers modules cast with .double()",
        "left_out": ["no transformer goldens: the encoder is the fixtures' tiny-bert (see its goldens)",
                     "no training goldens (stoke does not train the Dense module)"],
        "produced_by": produced_by(),
    }
    save_goldens(name, g, info, None)
    err = relative_error(st_encode(sentence_transformers.SentenceTransformer(str(folder), device="cpu"), texts),
                         g.tensors["st_embeddings.f64"])
    assert err < 1e-5, err
    print(f"{name}: recheck ok (st_embeddings relative error {err:.2e})")


# ---------------------------------------------------------------------------------------------
# Decoder embedders: tiny-qwen3 (Qwen3-Embedding's shape of model) and tiny-qwen2 (gte-Qwen2's)


QWEN_PROMPTS = {"query": "Instruct: Given a web search query, retrieve relevant passages that answer the query\n"
                         "Query:", "document": ""}


@dataclass
class DecoderSpec:
    name: str
    seed: int
    max_length: int
    config: dict  # the config class's arguments (vocab_size and the special ids are added)
    bare: bool    # saved as the bare *Model (no "model." prefix, no classifier), as Qwen3-Embedding and
                  # gte-Qwen2 are; else as *ForSequenceClassification
    hub_schema: bool  # config.json rewritten as hub folders write it (rope_theta, rope_scaling), not rope_parameters


DECODER_SPECS = {
    "tiny-qwen3": DecoderSpec("tiny-qwen3", 26, 150, dict(
        model_type="qwen3", hidden_size=40, intermediate_size=56, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=18, max_position_embeddings=256, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, initializer_range=0.1,
        num_labels=3, tie_word_embeddings=False), bare=False, hub_schema=False),
    "tiny-qwen2": DecoderSpec("tiny-qwen2", 27, 130, dict(
        model_type="qwen2", hidden_size=48, intermediate_size=72, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=200, rms_norm_eps=1e-5,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, initializer_range=0.1,
        is_causal=False), bare=True, hub_schema=True),
}


def perturb_decoder(model: nn.Module) -> None:
    """RMSNorm weights ~ N(1, 0.1), every bias ~ N(0, 0.05), continuing the RNG stream."""
    with torch.no_grad():
        for m in model.modules():
            if type(m).__name__.endswith("RMSNorm"):
                m.weight.normal_(1.0, 0.1)
        for name, p in model.named_parameters():
            if name.endswith("bias") and p.dim() == 1:
                p.normal_(0.0, 0.05)


def decoder_model_class(spec: DecoderSpec, config):
    prefix = "Qwen3" if config.model_type == "qwen3" else "Qwen2"
    return getattr(transformers, prefix + ("Model" if spec.bare else "ForSequenceClassification"))


def load_decoder(spec: DecoderSpec, folder: Path, dtype=torch.float32):
    config = transformers.AutoConfig.from_pretrained(str(folder))
    cls = decoder_model_class(spec, config)
    return cls.from_pretrained(str(folder), config=config, attn_implementation="eager").to(dtype).eval()


def decoder_forward(model, batch) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True)
    hidden = out.hidden_states[-1]
    mask = batch["attention_mask"]
    last = mask.sum(1) - 1  # right padding: the last real token (the appended <|endoftext|>)
    pooled = hidden[torch.arange(hidden.shape[0]), last]
    result = {"last_hidden_state": hidden, "lasttoken_pooled": pooled,
              "lasttoken_pooled_normalized": torch.nn.functional.normalize(pooled, p=2, dim=1, eps=1e-12)}
    if hasattr(out, "logits"):
        result["logits"] = out.logits
    return result


def make_decoder_model(spec: DecoderSpec, texts: list[str]) -> None:
    folder = GOLDEN_DIR / "models" / spec.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    tok = transformers.AutoTokenizer.from_pretrained(str(GOLDEN_DIR / "tokenizers" / "qwen3"))
    tok.model_max_length = spec.max_length
    args = dict(spec.config)
    model_type = args.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                                               eos_token_id=tok.eos_token_id, **args)
    config._attn_implementation = "eager"
    torch.manual_seed(spec.seed)
    cls = decoder_model_class(spec, config)
    model = cls(config)
    perturb_decoder(model)
    model.save_pretrained(str(folder))
    (folder / "model.safetensors").chmod(0o644)
    tok.save_pretrained(str(folder))
    if spec.hub_schema:  # as hub folders write it: top-level rope_theta, rope_scaling null, no layer_types
        cfg = json.loads((folder / "config.json").read_text())
        rope = cfg.pop("rope_parameters")
        cfg.pop("layer_types", None)
        cfg["rope_theta"] = rope["rope_theta"]
        cfg["rope_scaling"] = None
        write_json(folder / "config.json", cfg)
    # sentence-transformers: last-token pooling, Normalize, and Qwen3-Embedding's prompts.
    modules = write_st_files(folder, config.hidden_size, spec.max_length, "mean", True)
    write_json(folder / "1_Pooling" / "config.json", {
        "word_embedding_dimension": config.hidden_size, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_lasttoken": True, "include_prompt": True})
    write_json(folder / "config_sentence_transformers.json",
               {"prompts": QWEN_PROMPTS, "default_prompt_name": None, "similarity_fn_name": "cosine"})
    built_state = {k: v.clone() for k, v in model.state_dict().items()}
    del model

    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = load_decoder(spec, folder)
    for k, v in model.state_dict().items():
        assert torch.equal(v, built_state[k]), f"{spec.name}: {k} changed on reload"
    with safetensors.safe_open(str(folder / "model.safetensors"), "pt") as f:
        file_keys = sorted(f.keys())
    assert all(k.startswith("model.") != spec.bare for k in file_keys if not k.startswith("score")), file_keys

    g = Goldens()
    what = (f"all {len(texts)} texts, fast tokenizer (appends <|endoftext|>), max_length={spec.max_length}, "
            "truncation=True, padding to the longest (right)")
    batch = tokenize(tok, texts, spec.max_length)
    add_inputs(g, "", batch, what)
    out = decoder_forward(model, batch)
    H = config.hidden_size
    g.add("last_hidden_state", out["last_hidden_state"][:HIDDEN_TEXTS],
          f"the final RMSNorm's output of texts 0..{HIDDEN_TEXTS - 1} only [16, L, {H}], eval mode, padding "
          "positions included as computed (float32)")
    g.add("lasttoken_pooled", out["lasttoken_pooled"], "sentence-transformers Pooling(lasttoken): the last real "
          "token's row (the appended <|endoftext|>) (float32)")
    g.add("lasttoken_pooled_normalized", out["lasttoken_pooled_normalized"],
          "lasttoken_pooled / max(||lasttoken_pooled||_2, 1e-12) (float32)")
    if "logits" in out:
        g.add("logits", out["logits"], f"{cls.__name__} logits [n, {config.num_labels}]: score() of the last "
              "token that is not pad_token_id (<|endoftext|>, so the token before the appended one), eval mode "
              "(float32)")
    st_model = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    st = st_encode(st_model, texts)
    st_error = relative_error(st, out["lasttoken_pooled_normalized"])
    assert st_error < 1e-5, f"{spec.name}: sentence-transformers differs from the pooled golden: {st_error}"
    g.add("st_embeddings", st, "SentenceTransformer(folder).encode(texts, batch_size=16): Pooling(lasttoken) -> "
          "Normalize, no prompt (float32)")
    query = st_model.encode(texts[:8], prompt_name="query", batch_size=ST_BATCH, convert_to_tensor=True,
                            show_progress_bar=False)
    g.add("st_query_embeddings", query, "SentenceTransformer(folder).encode(texts[0:8], prompt_name='query'): the "
          "prompt of config_sentence_transformers.json prepended to each text (float32)")
    model64 = load_decoder(spec, folder, torch.float64)
    out64 = decoder_forward(model64, batch)
    for key in ("lasttoken_pooled", "lasttoken_pooled_normalized", "logits"):
        if key in out64:
            g.add_f64(key, out64[key], key)
    token_rows = tokens_jsonl(tok, texts)
    check_tokens_against_rust(folder, token_rows, texts)
    info = {
        "model": spec.name,
        "model_dir": f"models/{spec.name}",
        "golden_file": f"{spec.name}.safetensors",
        "tokens_file": f"{spec.name}.tokens.jsonl",
        "texts_file": "golden/texts.jsonl of the fixtures",
        "n_texts": len(texts),
        "architecture": cls.__name__,
        "shape": {"hidden_size": H, "num_hidden_layers": config.num_hidden_layers,
                  "num_attention_heads": config.num_attention_heads,
                  "num_key_value_heads": config.num_key_value_heads,
                  "head_dim": getattr(config, "head_dim", None) or H // config.num_attention_heads,
                  "intermediate_size": config.intermediate_size,
                  "max_position_embeddings": config.max_position_embeddings, "vocab_size": config.vocab_size,
                  "num_labels": config.num_labels, "causal": getattr(config, "is_causal", True)},
        "config": json.loads((folder / "config.json").read_text()),
        "seed": spec.seed,
        "weights": f"torch.manual_seed({spec.seed}); model = {cls.__name__}(config) (stock _init_weights, "
                   "initializer_range 0.1); then, continuing the same RNG stream, every RMSNorm weight ~ N(1, 0.1) "
                   "and every bias ~ N(0, 0.05); float32",
        "safetensors_keys": file_keys,
        "folder_files": folder_files(folder),
        "tokenizer": {"class": type(tok).__name__, "vocab_size": len(tok),
                      "source": "tests/golden/tokenizers/qwen3 (make_goldens.py there)",
                      "post_processor": "TemplateProcessing $A <|endoftext|> (as Qwen3-Embedding's)",
                      "pad_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id},
        "tokenization": {"max_length": spec.max_length, "truncation": True, "padding": "longest (right padding)",
                         "add_special_tokens": True},
        "per_text_token_counts": [len(r["ids"]) for r in token_rows],
        "sentence_transformers": {"modules": modules, "pooling": "lasttoken", "normalize": True,
                                  "prompts": QWEN_PROMPTS, "st_vs_pooled_relative_error": st_error},
        "attention_implementation": "eager",
        "left_out": [f"last_hidden_state of texts {HIDDEN_TEXTS}..{len(texts) - 1} (size budget)",
                     "training goldens (stoke does not fine-tune decoders)"],
        "produced_by": produced_by(),
    }
    save_goldens(spec.name, g, info, token_rows)
    model_default = decoder_model_class(spec, config).from_pretrained(str(folder)).eval()  # default attention
    again = decoder_forward(model_default, batch)["lasttoken_pooled"]
    err = relative_error(again, g.tensors["lasttoken_pooled.f64"])
    assert err < 1e-5, f"{spec.name}: recomputed with the default attention: {err}"
    print(f"{spec.name}: recheck ok (lasttoken_pooled relative error {err:.2e} with the default attention)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="models to make (default: all): " + ", ".join(ORDER))
    parser.add_argument("--retrain-unigram", action="store_true",
                        help="train tiny-camembert's Unigram again instead of reusing the committed pieces/scores")
    args = parser.parse_args()
    RETRAIN["unigram"] = args.retrain_unigram
    unknown = [n for n in args.names if n not in ORDER]
    if unknown:
        parser.error(f"unknown model {unknown[0]!r}; known: {', '.join(ORDER)}")
    wrong = {k: v for k, v in PINNED.items() if v[0] != v[1]}
    if wrong:
        print("wrong versions (have, want): " + json.dumps(wrong), file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    texts = texts_of(FIXTURES / "golden" / "texts.jsonl")
    assert len(texts) == 66
    for name in args.names or ORDER:
        if name == "tiny-bert-dense":
            make_bert_dense(texts)
        elif name in DECODER_SPECS:
            make_decoder_model(DECODER_SPECS[name], texts)
        else:
            make_encoder_model(SPECS[name], texts)
        print(f"{name}: {sizes(name)['total_bytes']} bytes (folder + goldens)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
