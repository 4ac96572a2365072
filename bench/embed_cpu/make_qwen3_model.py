"""A random model of Qwen3-Embedding-0.6B's size, for bench/embed_cpu and the
memory check (docs/performance.md), made with transformers from a config —
nothing is downloaded.

    python make_qwen3_model.py TOKENIZER_DIR OUT_DIR

Writes OUT_DIR/qwen3-0.6b/: Qwen3Model(config) with Qwen3-Embedding-0.6B's
config.json numbers (28 layers, hidden 1024, 16 query / 8 k/v heads of 128,
intermediate 3072, vocab 151669, rope_theta 1e6), stock random init (seed 0),
float32 safetensors (2.4 GB), the tokenizer of TOKENIZER_DIR (the repository's
tests/golden/tokenizers/qwen3: a small vocabulary, so every id the texts give
is a row of the table), and Qwen3-Embedding's sentence-transformers files
(Pooling(lasttoken), Normalize, the "query" prompt). A folder whose
config.json already matches is left alone. Needs torch and transformers.
"""
import json
import shutil
import sys
from pathlib import Path

import torch
import transformers

from st_folder import write_sentence_transformers_files

CONFIG = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
              num_key_value_heads=8, head_dim=128, max_position_embeddings=32768, rms_norm_eps=1e-6,
              rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, vocab_size=151669,
              tie_word_embeddings=True, attention_bias=False, hidden_act="silu")


def main():
    tokenizer_dir, out = Path(sys.argv[1]), Path(sys.argv[2]) / "qwen3-0.6b"
    config = transformers.Qwen3Config(**CONFIG)
    marker = out / "bench-config.json"
    if marker.exists() and json.loads(marker.read_text()) == CONFIG:
        return
    if out.exists():
        shutil.rmtree(out)
    torch.manual_seed(0)
    model = transformers.Qwen3Model(config)
    model.save_pretrained(str(out))
    write_sentence_transformers_files(out, tokenizer_dir, {
        "word_embedding_dimension": 1024, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_lasttoken": True, "include_prompt": True})
    (out / "config_sentence_transformers.json").write_text(json.dumps({
        "prompts": {"query": "Instruct: Given a web search query, retrieve relevant passages that answer the "
                             "query\nQuery:", "document": ""},
        "default_prompt_name": None, "similarity_fn_name": "cosine"}))
    marker.write_text(json.dumps(CONFIG))


if __name__ == "__main__":
    main()
