"""A randomly initialised BERT in Hugging Face + sentence-transformers layout,
of any size (default: bert-base, 12 layers, hidden 768, 12 heads, FFN 3072),
for the GPU check. Needs numpy.

    python3 make_model.py --fixtures FIXTURES --out DIR [--layers 12 --hidden 768
        --heads 12 --intermediate 3072 --max-seq-length 512 --seed 0] [--info INFO.json]

The weights, names and initialisation come from bench/embed_cpu/make_models.py
(imported, not copied: one definition of "a random BERT" for both benchmarks);
this file only picks the size and the max length. The tokenizer is the
tiny-bert fixture's (3,000 WordPiece tokens): the vocabulary only sizes the
embedding table, which costs no FLOPs, so throughput is bert-base's.

Mean pooling, no Normalize: stoke and SentenceTransformer return the same
unnormalised vectors, so the comparison also catches a scale error.
The max length is written to sentence_bert_config.json (both tools read it)
and to tokenizer_config.json's model_max_length (the fixture says 128), so
every reader agrees. --info writes the numbers the report's FLOP count needs.
"""
import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "embed_cpu"))
import make_models as mm  # noqa: E402  (bench/embed_cpu/make_models.py)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", required=True, help="the fixtures folder (holds models/tiny-bert)")
    ap.add_argument("--out", required=True, help="model folder to write")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--intermediate", type=int, default=3072)
    ap.add_argument("--max-seq-length", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--info", help="write {layers, hidden, ..., non_embedding_params} here")
    a = ap.parse_args()

    fixture = os.path.join(a.fixtures, "models", "tiny-bert")
    with open(os.path.join(fixture, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    cfg = mm.config_for(a.layers, a.hidden, a.heads, a.intermediate, vocab)
    # Positions cover the max length (make_models' 512 today; never fewer).
    cfg["max_position_embeddings"] = max(cfg["max_position_embeddings"], a.max_seq_length)

    os.makedirs(os.path.join(a.out, "1_Pooling"), exist_ok=True)
    for fn in mm.TOKENIZER_FILES:
        shutil.copyfile(os.path.join(fixture, fn), os.path.join(a.out, fn))
    tc_path = os.path.join(a.out, "tokenizer_config.json")
    with open(tc_path) as f:
        tc = json.load(f)
    tc["model_max_length"] = a.max_seq_length
    mm.write_json(tc_path, tc)

    tensors = mm.bert_tensors(cfg, a.seed)
    mm.write_safetensors(os.path.join(a.out, "model.safetensors"), tensors)
    mm.write_json(os.path.join(a.out, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ])
    mm.write_json(os.path.join(a.out, "1_Pooling", "config.json"), {
        "word_embedding_dimension": a.hidden,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    })
    mm.write_json(os.path.join(a.out, "sentence_bert_config.json"),
                  {"max_seq_length": a.max_seq_length, "do_lower_case": False})
    mm.write_json(os.path.join(a.out, "config.json"), cfg)

    # Non-embedding parameters = the encoder layers. The pooler is left out:
    # mean pooling never runs it (DESIGN.md's FLOP formula counts what runs).
    non_emb = sum(t.size for n, t in tensors.items() if n.startswith("encoder."))
    total = sum(t.size for t in tensors.values())
    info = {"layers": a.layers, "hidden": a.hidden, "heads": a.heads, "intermediate": a.intermediate,
            "vocab": vocab, "max_seq_length": a.max_seq_length, "non_embedding_params": int(non_emb),
            "params": int(total), "dir": os.path.abspath(a.out)}
    if a.info:
        mm.write_json(a.info, info)
    print(f"make_model: {a.out}: {a.layers} layers, hidden {a.hidden}, {a.heads} heads, FFN {a.intermediate}, "
          f"max length {a.max_seq_length}; {total / 1e6:.1f}M parameters ({non_emb / 1e6:.1f}M non-embedding)")


if __name__ == "__main__":
    main()
