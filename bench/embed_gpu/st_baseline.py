"""The peer: sentence-transformers on the same model and texts.

    python3 st_baseline.py --model DIR --texts TEXTS.jsonl [--device cuda] [--precision bf16]
        [--batch-size 128] [--warmup 2000] [--sample-rows ROWS.json --sample-out ST.npy] [--out st.json]

SentenceTransformer(DIR, device=...), cast with .to(torch.bfloat16) for bf16,
then encode(texts, batch_size, convert_to_numpy=True) over ALL texts, timed
from the call to a torch.cuda.synchronize() after it returns: tokenization
and the copy back are inside the time, as they are in stoke's. encode sorts
by length itself. One untimed warm-up encode on the first WARMUP texts comes
first (CUDA context, cuBLAS handles, allocator).

Tokens are counted once, untimed, with the model's own tokenizer: truncation
at the model's max_seq_length, no padding, special tokens included, the
count stoke's manifest reports too. --sample-rows names rows (a JSON list of
record numbers) whose vectors are saved for the comparison with stoke.
"""
import argparse
import json
import time

import numpy as np
import torch


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--texts", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="bf16", choices=["f32", "bf16"])
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--sample-rows")
    ap.add_argument("--sample-out")
    ap.add_argument("--out")
    a = ap.parse_args()

    import sentence_transformers
    import transformers
    from sentence_transformers import SentenceTransformer

    # Progress bars and advice would crowd the few KB of output that come back.
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()

    with open(a.texts, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    t = time.perf_counter()
    model = SentenceTransformer(a.model, device=a.device)
    if a.precision == "bf16":
        model.to(torch.bfloat16)
    sync(a.device)
    load_s = time.perf_counter() - t

    # Count tokens: what the model sees, per text (untimed).
    t = time.perf_counter()
    max_len = model.max_seq_length
    lens = np.array([len(ids) for ids in model.tokenizer(texts, truncation=True, max_length=max_len)["input_ids"]],
                    dtype=np.int64)
    count_s = time.perf_counter() - t

    t = time.perf_counter()
    model.encode(texts[: a.warmup], batch_size=a.batch_size, convert_to_numpy=True, show_progress_bar=False)
    sync(a.device)
    warm_s = time.perf_counter() - t

    t = time.perf_counter()
    emb = model.encode(texts, batch_size=a.batch_size, convert_to_numpy=True, show_progress_bar=False)
    sync(a.device)
    secs = time.perf_counter() - t

    if a.sample_rows and a.sample_out:
        with open(a.sample_rows) as f:
            rows = json.load(f)
        np.save(a.sample_out, np.asarray(emb[rows], dtype=np.float32))

    tokens = int(lens.sum())
    res = {
        "impl": f"sentence-transformers {sentence_transformers.__version__} (torch {torch.__version__})",
        "device": a.device, "precision": a.precision, "batch_size": a.batch_size,
        "texts": len(texts), "tokens": tokens, "max_seq_length": max_len,
        "at_max_len": int((lens >= max_len).sum()),  # truncated, or exactly full
        "mean_len": tokens / max(len(texts), 1),
        # sum(S^2)/sum(S): the length each token's attention actually spans, on average
        "token_weighted_len": float((lens.astype(np.float64) ** 2).sum() / max(tokens, 1)),
        "seconds": secs, "texts_per_s": len(texts) / secs, "tokens_per_s": tokens / secs,
        "load_seconds": load_s, "count_seconds": count_s, "warmup_seconds": warm_s,
        "dim": int(emb.shape[1]), "out_dtype": str(emb.dtype),
    }
    print(f"st: {len(texts)} texts, {tokens} tokens (mean {res['mean_len']:.1f}, max length {max_len}) in "
          f"{secs:.2f} s: {res['texts_per_s']:.0f} texts/s, {res['tokens_per_s']:.0f} tokens/s "
          f"[{res['impl']}, {a.precision}, batch {a.batch_size}; load {load_s:.1f} s, count {count_s:.1f} s, "
          f"warm-up {warm_s:.1f} s]")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
