"""A random model of BAAI/bge-m3's shape, for bench/embed_cpu/m3_run.sh (docs/performance.md,
"bge-m3's three outputs on the CPU"), made with transformers from a config — nothing is downloaded.

    python make_m3_model.py TOKENIZER_DIR OUT_DIR

Writes OUT_DIR/bge-m3-size/ laid out as bge-m3 ships (tests/golden/make_bge_m3.py makes the tiny one the
same way): XLMRobertaModel(config) with bge-m3's encoder numbers (24 layers, hidden 1024, 16 heads of 64,
intermediate 4096, GELU, max_position_embeddings 8194, pad 1, LayerNorm eps 1e-5) and stock random init
(N(0, 0.02), seed 33), float32 safetensors (~1.2 GB); the tokenizer of TOKENIZER_DIR (the fixture
tiny-xlmr's SentencePiece model, as XLMRobertaTokenizerFast converts and saves it), whose 4,002 pieces set
vocab_size — bge-m3's table has 250,002 rows (1 GB in f32), but a row lookup costs the same in either, so
the FLOPs per token are bge-m3's; the two heads, random and float16 on disk as bge-m3's are (torch.save of
a Linear's state_dict): colbert_linear.pt (weight [1024, 1024], bias [1024]) and sparse_linear.pt (weight
[1, 1024], bias [1]); and bge-m3's sentence-transformers files (Pooling(cls), Normalize, max_seq_length
8192). A folder whose bench-config.json already matches is left alone. Needs torch and transformers (the
.venv-flagemb of tests/golden/requirements-bge-m3.txt has both).
"""
import collections
import json
import shutil
import sys
from pathlib import Path

import torch
import transformers

SEED = 33
CONFIG = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
              hidden_act="gelu", max_position_embeddings=8194, type_vocab_size=1, pad_token_id=1,
              bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5, initializer_range=0.02,
              architectures=["XLMRobertaModel"])
MAX_SEQ_LENGTH = 8192  # bge-m3's sentence_bert_config and tokenizer model_max_length


def write_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2) + "\n")


def main():
    tokenizer_dir, out = Path(sys.argv[1]), Path(sys.argv[2]) / "bge-m3-size"
    tok = transformers.XLMRobertaTokenizerFast.from_pretrained(str(tokenizer_dir), model_max_length=MAX_SEQ_LENGTH)
    config = dict(CONFIG, vocab_size=len(tok))
    marker = out / "bench-config.json"
    if marker.exists() and json.loads(marker.read_text()) == config:
        return
    if out.exists():
        # Remade only when this script made it (its marker is there): a folder
        # of that name that is not ours is left alone (RELIABILITY 14).
        if not marker.exists():
            sys.exit(f"{out} exists and was not made by make_m3_model.py (no {marker.name}): move it away first")
        shutil.rmtree(out)
    torch.manual_seed(SEED)
    model = transformers.XLMRobertaModel(transformers.XLMRobertaConfig(**config)).eval()
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))

    write_json(out / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])
    write_json(out / "sentence_bert_config.json", {"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False})
    write_json(out / "1_Pooling" / "config.json", {
        "word_embedding_dimension": CONFIG["hidden_size"], "pooling_mode_cls_token": True,
        "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False})

    # The heads: N(0, 0.02) like the encoder's linears (the sparse weight of a LayerNorm'd hidden state
    # is then ~N(b, 0.64): about half the tokens get a lexical weight), float16 on disk as bge-m3's.
    h = CONFIG["hidden_size"]
    g = torch.Generator().manual_seed(SEED + 1)
    colbert = collections.OrderedDict(weight=(torch.randn(h, h, generator=g) * 0.02).half(),
                                      bias=torch.zeros(h).half())
    sparse = collections.OrderedDict(weight=(torch.randn(1, h, generator=g) * 0.02).half(),
                                     bias=torch.zeros(1).half())
    torch.save(colbert, str(out / "colbert_linear.pt"))
    torch.save(sparse, str(out / "sparse_linear.pt"))
    marker.write_text(json.dumps(config))


if __name__ == "__main__":
    main()
