#!/usr/bin/env python3
"""The seed's training case for scripts/gpu-check.sh: a random
BertForSequenceClassification (default bert-base size: 12 layers, hidden
768, 12 heads, FFN 3072; N(0, 0.02) weights from bench/embed_cpu's
make_models, the tiny-bert fixture's tokenizer) with one label per language
of the multilingual corpus, and the training records: the corpus's texts cut
to about --words words each (~32 tokens), {"text", "label"}, replicated in a
seeded order up to --records.

    python3 make_classifier.py --fixtures DIR --out DIR [--layers 12 --hidden 768 --heads 12
        --intermediate 3072] [--records 8192] [--words 20]
"""
import argparse
import json
import os
import random
import shutil
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
for rel in (("..", "embed_cpu"), ("..", "..", "bench", "embed_cpu")):
    sys.path.insert(0, os.path.join(here, *rel))
import make_models  # noqa: E402  (bench/embed_cpu/make_models.py)

SEED = 16


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--intermediate", type=int, default=3072)
    ap.add_argument("--records", type=int, default=8192)
    ap.add_argument("--words", type=int, default=20)
    a = ap.parse_args()

    fixture = os.path.join(a.fixtures, "models", "tiny-bert")
    with open(os.path.join(a.fixtures, "corpus", "fortunes-multilingual.jsonl"), encoding="utf-8") as f:
        corpus = [json.loads(line) for line in f if line.strip()]
    labels = sorted({r["lang"] for r in corpus})
    with open(os.path.join(fixture, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    cfg = make_models.config_for(a.layers, a.hidden, a.heads, a.intermediate, vocab)
    cfg["architectures"] = ["BertForSequenceClassification"]
    cfg["classifier_dropout"] = None
    cfg["id2label"] = {str(i): n for i, n in enumerate(labels)}
    cfg["label2id"] = {n: i for i, n in enumerate(labels)}
    model = os.path.join(a.out, "model")
    os.makedirs(model, exist_ok=True)
    for fn in make_models.TOKENIZER_FILES:
        shutil.copyfile(os.path.join(fixture, fn), os.path.join(model, fn))
    t = {"bert." + k: v for k, v in make_models.bert_tensors(cfg, SEED).items()}
    rng = np.random.default_rng(SEED + 1)
    t["classifier.weight"] = rng.normal(0.0, 0.02, size=(len(labels), a.hidden)).astype(np.float32)
    t["classifier.bias"] = np.zeros(len(labels), np.float32)
    make_models.write_safetensors(os.path.join(model, "model.safetensors"), t)
    make_models.write_json(os.path.join(model, "config.json"), dict(sorted(cfg.items())))

    order = list(range(len(corpus)))
    random.Random(0).shuffle(order)
    path = os.path.join(a.out, "train.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for k in range(a.records):
            r = corpus[order[k % len(order)]]
            words = r["text"].split()
            text = " ".join(words[: a.words]) if len(words) > 1 else r["text"][: a.words * 4]
            f.write(json.dumps({"text": text, "label": r["lang"]}, ensure_ascii=False) + "\n")
    params = sum(int(np.prod(v.shape)) for v in t.values())
    info = {"model": model, "train": path, "records": a.records, "labels": len(labels), "params": params,
            "layers": a.layers, "hidden": a.hidden, "heads": a.heads, "intermediate": a.intermediate}
    make_models.write_json(os.path.join(a.out, "classifier.json"), info)
    print(f"make_classifier: {model} ({params / 1e6:.1f} M parameters, {len(labels)} labels), {path} ({a.records} records)")


if __name__ == "__main__":
    main()
