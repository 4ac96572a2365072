"""SentenceTransformer peer for bench/embed_cpu (PyPI torch + sentence-transformers,
in .venv-bench-st): SentenceTransformer(DIR, device="cpu").encode(texts,
batch_size=32) on the raw texts, so its tokenization IS timed, as stoke's is.

    python st_baseline.py MODEL_DIR TEXTS.jsonl PRECISION THREADS REPEATS BUDGET_S [OUT.npy]

bf16: the model is cast with .to(torch.bfloat16), as the brief for the eager
peer says. Runs one pass, then more (up to REPEATS) while the passes so far
took under BUDGET_S, and prints one JSON line with the best pass; tokens are
counted with ST's own tokenizer (specials included, truncated to its
max_seq_length), which should equal stoke's count.
"""
import json
import sys
import time

import numpy as np
import torch


def main():
    model_dir, texts_path, precision = sys.argv[1], sys.argv[2], sys.argv[3]
    threads, repeats, budget = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    out_npy = sys.argv[7] if len(sys.argv) > 7 else None
    torch.set_num_threads(threads)
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    with open(texts_path, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    t0 = time.perf_counter()
    model = SentenceTransformer(model_dir, device="cpu")
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    load_s = time.perf_counter() - t0
    enc = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)
    tokens = sum(len(i) for i in enc["input_ids"])
    model.encode(texts[:32], batch_size=32)  # warm-up
    passes, spent = [], 0.0
    while len(passes) < repeats and (not passes or spent < budget):
        t = time.perf_counter()
        emb = model.encode(texts, batch_size=32, convert_to_tensor=True)
        s = time.perf_counter() - t
        passes.append(s)
        spent += s
    if out_npy:
        np.save(out_npy, emb.float().numpy())
    best = min(passes)
    print(json.dumps({
        "impl": f"sentence-transformers {sentence_transformers.__version__} (torch {torch.__version__})",
        "precision": precision, "threads": threads, "texts": len(texts), "tokens": tokens,
        "max_seq_length": model.max_seq_length, "seconds": best, "passes": passes,
        "tokens_per_s": tokens / best, "load_seconds": load_s,
    }))


if __name__ == "__main__":
    main()
