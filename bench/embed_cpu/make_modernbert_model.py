"""A random model of ModernBERT-base's size, for bench/embed_cpu (docs/performance.md),
made with transformers from a config — nothing is downloaded.

    python make_modernbert_model.py TOKENIZER_DIR OUT_DIR

Writes OUT_DIR/modernbert-base/: ModernBertModel(config) with answerdotai/ModernBERT-base's
config.json numbers (22 layers, hidden 768, 12 heads of 64, GeGLU intermediate 1152, a global
layer every 3rd with rope theta 160000, the others local with a window of 128 (+-64) and theta
10000, vocab 50368, bias-free LayerNorms and linears), stock random init (seed 0), float32
safetensors (~0.6 GB), the tokenizer of TOKENIZER_DIR (the repository's
tests/golden/models/tiny-modernbert: ModernBERT's tokenizer.json form with a small vocabulary,
so every id the texts give is a row of the table), and modernbert-embed's sentence-transformers
files (Pooling(mean), Normalize). A folder whose config.json already matches is left alone.
Needs torch and transformers.
"""
import json
import shutil
import sys
from pathlib import Path

import torch
import transformers

from st_folder import write_sentence_transformers_files

CONFIG = dict(hidden_size=768, intermediate_size=1152, num_hidden_layers=22, num_attention_heads=12,
              hidden_activation="gelu", max_position_embeddings=8192, norm_eps=1e-5, norm_bias=False,
              global_rope_theta=160000.0, local_rope_theta=10000.0, global_attn_every_n_layers=3,
              local_attention=128, attention_bias=False, mlp_bias=False, classifier_bias=False,
              classifier_pooling="mean", vocab_size=50368, pad_token_id=2003, cls_token_id=2001,
              sep_token_id=2002, bos_token_id=2001, eos_token_id=2002)


def main():
    tokenizer_dir, out = Path(sys.argv[1]), Path(sys.argv[2]) / "modernbert-base"
    marker = out / "bench-config.json"
    if marker.exists() and json.loads(marker.read_text()) == CONFIG:
        return
    if out.exists():
        shutil.rmtree(out)
    config = transformers.ModernBertConfig(**CONFIG)
    torch.manual_seed(0)
    model = transformers.ModernBertModel(config)
    model.save_pretrained(str(out))
    write_sentence_transformers_files(out, tokenizer_dir, {
        "word_embedding_dimension": 768, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False})
    marker.write_text(json.dumps(CONFIG))


if __name__ == "__main__":
    main()
