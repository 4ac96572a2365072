"""Loads a stoke training output (a checkpoint-N folder or the final model
folder) with Hugging Face transformers and checks that it gives the logits
`stoke classify` gives for the same texts.

    python check_hf_checkpoint.py MODEL_DIR TEXTS.jsonl STOKE_LOGITS.jsonl [MAX_LENGTH]

STOKE_LOGITS.jsonl is `stoke classify --model MODEL_DIR --input TEXTS.jsonl
--max-length MAX_LENGTH`'s output (MAX_LENGTH: default 128). transformers reads model.safetensors by its HF parameter names,
config.json (id2label/label2id, architectures) and the tokenizer files stoke
copied in; a name or shape it does not expect is reported by from_pretrained
(missing/unexpected keys), which this script treats as a failure.
"""
import json
import sys

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer


def main():
    model_dir, texts_path, stoke_path = sys.argv[1:4]
    max_length = int(sys.argv[4]) if len(sys.argv) > 4 else 128
    texts = [json.loads(line)["text"] for line in open(texts_path, encoding="utf-8")]
    want = [json.loads(line)["logits"] for line in open(stoke_path, encoding="utf-8")]
    model, info = AutoModelForSequenceClassification.from_pretrained(model_dir, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        sys.exit(f"check_hf_checkpoint: transformers reports {problems}")
    model.eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    worst = 0.0
    with torch.no_grad():
        for text, ref in zip(texts, want):
            enc = tok(text, truncation=True, max_length=max_length, return_tensors="pt")
            got = model(**enc).logits[0].double()
            ref = torch.tensor(ref, dtype=torch.float64)
            worst = max(worst, float((got - ref).abs().max() / max(ref.abs().max(), 1e-6)))
    labels = model.config.id2label
    print(f"check_hf_checkpoint: {model_dir}: {type(model).__name__}, {len(labels)} labels {list(labels.values())}, "
          f"{len(texts)} texts, worst relative logit difference {worst:.2e}")
    if worst > 1e-4:
        sys.exit("check_hf_checkpoint: logits differ from stoke's")
    print("check_hf_checkpoint: ok")


if __name__ == "__main__":
    main()
