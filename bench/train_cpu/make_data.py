"""The model and the training records for bench/train_cpu, built with
bench/embed_cpu/make_models.py's pieces (same config, initialisation and
safetensors writer).

    python3 make_data.py FIXTURES_DIR OUT_DIR [N_RECORDS]

Writes OUT_DIR/minilm-l6-cls/: a BertForSequenceClassification of MiniLM-L6
size (hidden 384, 6 layers, 12 heads, intermediate 1536, the tiny-bert
fixture's 3,000-token vocabulary and tokenizer files) with bert.pooler.dense.*
and a 7-way classifier.* head (N(0, 0.02), bias 0), id2label/label2id = the
corpus languages sorted (de en es it pl ru zh), tensor names as
BertForSequenceClassification.state_dict() has them. Both stoke and the torch
peer start from these weights. And OUT_DIR/train.jsonl: N_RECORDS (2048)
records {"text", "label"} of the multilingual fortunes corpus, label = its
lang field, sampled and put in a seeded random order (the corpus itself is
grouped by language; consecutive batches in file order mix them this way).
A model folder whose config.json already matches is left alone. Needs numpy.
"""
import json
import os
import random
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "embed_cpu"))
import make_models  # noqa: E402  (bench/embed_cpu/make_models.py)

NAME = "minilm-l6-cls"
SIZE = "minilm-l6"
SEED = 10  # weights; make_models seeds its two embedding models 0 and 1
DATA_SEED = 0


def classifier_config(vocab, labels):
    cfg = make_models.config_for(*make_models.SIZES[SIZE], vocab)
    cfg["architectures"] = ["BertForSequenceClassification"]
    cfg["classifier_dropout"] = None  # the head's dropout is hidden_dropout_prob (0.1)
    cfg["id2label"] = {str(i): name for i, name in enumerate(labels)}
    cfg["label2id"] = {name: i for i, name in enumerate(labels)}
    return dict(sorted(cfg.items()))


def classifier_tensors(cfg, seed):
    t = {"bert." + name: a for name, a in make_models.bert_tensors(cfg, seed).items()}  # pooler included
    rng = np.random.default_rng(seed + 1)
    n, H = len(cfg["id2label"]), cfg["hidden_size"]
    t["classifier.weight"] = rng.normal(0.0, 0.02, size=(n, H)).astype(np.float32)
    t["classifier.bias"] = np.zeros(n, np.float32)
    return t


def read_corpus(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def make_model(fixture, out, labels):
    with open(os.path.join(fixture, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    cfg = classifier_config(vocab, labels)
    d = os.path.join(out, NAME)
    cfg_path = os.path.join(d, "config.json")
    if os.path.exists(os.path.join(d, "model.safetensors")) and os.path.exists(cfg_path):
        with open(cfg_path) as f:
            if json.load(f) == cfg:
                return d, False
    os.makedirs(d, exist_ok=True)
    for fn in make_models.TOKENIZER_FILES:
        shutil.copyfile(os.path.join(fixture, fn), os.path.join(d, fn))
    make_models.write_safetensors(os.path.join(d, "model.safetensors"), classifier_tensors(cfg, SEED))
    make_models.write_json(cfg_path, cfg)  # last: its presence marks a complete folder
    return d, True


def make_records(records, out_path, n):
    picked = random.Random(DATA_SEED).sample(range(len(records)), min(n, len(records)))  # seeded order, not sorted
    with open(out_path + ".tmp", "w", encoding="utf-8") as f:
        for i in picked:
            r = records[i]
            f.write(json.dumps({"text": r["text"], "label": r["lang"]}, ensure_ascii=False) + "\n")
    os.replace(out_path + ".tmp", out_path)
    return len(picked)


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 2048
    os.makedirs(out, exist_ok=True)
    records = read_corpus(os.path.join(fixtures, "corpus", "fortunes-multilingual.jsonl"))
    labels = sorted({r["lang"] for r in records})
    d, made = make_model(os.path.join(fixtures, "models", "tiny-bert"), out, labels)
    print(f"make_data: {d} {'written' if made else 'up to date'} (labels {' '.join(labels)})")
    path = os.path.join(out, "train.jsonl")
    print(f"make_data: {path} ({make_records(records, path, n)} records)")


if __name__ == "__main__":
    main()
