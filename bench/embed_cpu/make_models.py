"""Randomly initialised BERT models in Hugging Face + sentence-transformers
layout, for bench/embed_cpu, and the benchmark's texts.

    python3 make_models.py FIXTURES_DIR OUT_DIR [N_TEXTS]

Writes OUT_DIR/{bert-base,minilm-l6}/ (config.json, model.safetensors, the
tiny-bert fixture's tokenizer files, modules.json, 1_Pooling/config.json,
sentence_bert_config.json) and OUT_DIR/texts.jsonl (N_TEXTS texts, a seeded
sample of the multilingual fortunes corpus, in corpus order). Weights follow
BERT's initialisation: N(0, 0.02) for matrices and embeddings, LayerNorm weight
1 and bias 0, every other bias 0; tensor names are BertModel.state_dict()'s.
A model folder whose config.json already matches is left alone, so reruns are
cheap. Needs only numpy.
"""
import json
import os
import random
import shutil
import sys

import numpy as np

SIZES = {
    # name: (layers, hidden, heads, intermediate); 12 heads for both, as the
    # real bert-base-uncased and all-MiniLM-L6-v2 have.
    "bert-base": (12, 768, 12, 3072),
    "minilm-l6": (6, 384, 12, 1536),
}
TOKENIZER_FILES = ["vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
MAX_POSITIONS = 512
MAX_SEQ_LENGTH = 128


def config_for(layers, hidden, heads, intermediate, vocab):
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": intermediate,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": MAX_POSITIONS,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": vocab,
    }


def bert_tensors(cfg, seed):
    """BertModel.state_dict() names, shapes and initial values, in its order."""
    rng = np.random.default_rng(seed)
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]

    def normal(*shape):
        return rng.normal(0.0, 0.02, size=shape).astype(np.float32)

    def zeros(*shape):
        return np.zeros(shape, np.float32)

    def ones(*shape):
        return np.ones(shape, np.float32)

    t = {}
    t["embeddings.word_embeddings.weight"] = normal(V, H)
    t["embeddings.position_embeddings.weight"] = normal(cfg["max_position_embeddings"], H)
    t["embeddings.token_type_embeddings.weight"] = normal(cfg["type_vocab_size"], H)
    t["embeddings.LayerNorm.weight"] = ones(H)
    t["embeddings.LayerNorm.bias"] = zeros(H)
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            t[p + f"attention.self.{name}.weight"] = normal(H, H)  # (out, in), as nn.Linear
            t[p + f"attention.self.{name}.bias"] = zeros(H)
        t[p + "attention.output.dense.weight"] = normal(H, H)
        t[p + "attention.output.dense.bias"] = zeros(H)
        t[p + "attention.output.LayerNorm.weight"] = ones(H)
        t[p + "attention.output.LayerNorm.bias"] = zeros(H)
        t[p + "intermediate.dense.weight"] = normal(I, H)
        t[p + "intermediate.dense.bias"] = zeros(I)
        t[p + "output.dense.weight"] = normal(H, I)
        t[p + "output.dense.bias"] = zeros(H)
        t[p + "output.LayerNorm.weight"] = ones(H)
        t[p + "output.LayerNorm.bias"] = zeros(H)
    t["pooler.dense.weight"] = normal(H, H)
    t["pooler.dense.bias"] = zeros(H)
    return t


def write_safetensors(path, tensors):
    """safetensors: u64 little-endian header length, JSON header padded with
    spaces to a multiple of 8 bytes, then the raw little-endian data."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, a in tensors.items():
        assert a.dtype == np.float32
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        for a in tensors.values():
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())
    os.replace(tmp, path)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def make_model(fixture, out, name, seed):
    layers, hidden, heads, intermediate = SIZES[name]
    with open(os.path.join(fixture, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    cfg = config_for(layers, hidden, heads, intermediate, vocab)
    d = os.path.join(out, name)
    cfg_path = os.path.join(d, "config.json")
    if os.path.exists(os.path.join(d, "model.safetensors")) and os.path.exists(cfg_path):
        with open(cfg_path) as f:
            if json.load(f) == cfg:
                return d, False
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    for fn in TOKENIZER_FILES:
        shutil.copyfile(os.path.join(fixture, fn), os.path.join(d, fn))
    write_safetensors(os.path.join(d, "model.safetensors"), bert_tensors(cfg, seed))
    # Transformer + mean pooling, no Normalize: stoke and SentenceTransformer
    # read the same folder and return the same (unnormalised) vectors.
    write_json(os.path.join(d, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ])
    write_json(os.path.join(d, "1_Pooling", "config.json"), {
        "word_embedding_dimension": hidden,
        "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    })
    write_json(os.path.join(d, "sentence_bert_config.json"), {"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False})
    write_json(cfg_path, cfg)  # last: its presence marks a complete folder
    return d, True


def make_texts(corpus, out_path, n, seed):
    with open(corpus, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    picked = sorted(random.Random(seed).sample(range(len(lines)), min(n, len(lines))))
    with open(out_path + ".tmp", "w", encoding="utf-8") as f:
        for i in picked:
            f.write(json.dumps({"text": json.loads(lines[i])["text"]}, ensure_ascii=False) + "\n")
    os.replace(out_path + ".tmp", out_path)


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    os.makedirs(out, exist_ok=True)
    fixture = os.path.join(fixtures, "models", "tiny-bert")
    for seed, name in enumerate(SIZES):
        d, made = make_model(fixture, out, name, seed)
        print(f"make_models: {d} {'written' if made else 'up to date'}")
    make_texts(os.path.join(fixtures, "corpus", "fortunes-multilingual.jsonl"), os.path.join(out, "texts.jsonl"), n, 0)
    print(f"make_models: {os.path.join(out, 'texts.jsonl')} ({n} texts)")


if __name__ == "__main__":
    main()
