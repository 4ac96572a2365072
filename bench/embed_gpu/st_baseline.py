"""The peer: sentence-transformers on the same model and texts, at its best batch size.

    python3 st_baseline.py --model DIR --texts TEXTS.jsonl [--device cuda] [--precision bf16]
        [--sweep 32,64,128,256,512] [--sweep-texts 4000] [--warmup 1000] [--stats STATS.json]
        [--sample-rows ROWS.json --sample-out ST.npy] [--out st.json]

SentenceTransformer(DIR, device=...), cast with .to(torch.bfloat16) for bf16.
One untimed warm-up encode on the first WARMUP texts (CUDA context, cuBLAS
handles, allocator). Then the sweep: encode(SUBSAMPLE, batch_size=b) for
each b of --sweep, timed, on --sweep-texts texts spread evenly over the input
(every language and length; encode sorts by length itself, as in the full
run); the best texts/s picks the batch size. Then the --sample-rows vectors
(for compare.py) at that batch size, and then encode(ALL texts, that batch
size, convert_to_numpy=True), timed from the call to a torch.cuda.synchronize()
after it returns: tokenization and the copy back are inside the time, as they
are in stoke's. st.json is written after the sweep and again at the end, so a
cut run still says which batch size won.

Tokens: --stats (make_texts.py's, from the corpus's counts that prepare
computed) gives the count stoke's manifest reports too (truncation at the
model's max_seq_length, no padding, special tokens included); the sample rows
are tokenized here and checked against it. Without --stats, or on any
difference, every text is counted here, untimed (~2 s on 16 cores).
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
    ap.add_argument("--sweep", default="32,64,128,256,512", help="batch sizes to try (one: no sweep)")
    ap.add_argument("--sweep-texts", type=int, default=4000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--stats", help="make_texts.py's token counts of TEXTS")
    ap.add_argument("--sample-rows")
    ap.add_argument("--sample-out")
    ap.add_argument("--out")
    a = ap.parse_args()
    sizes = [int(x) for x in a.sweep.split(",") if x]

    import sentence_transformers
    import transformers
    from sentence_transformers import SentenceTransformer

    # Progress bars and advice would crowd the few KB of output that come back.
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()

    with open(a.texts, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    rows = None
    if a.sample_rows:
        with open(a.sample_rows) as f:
            rows = json.load(f)
    t = time.perf_counter()
    model = SentenceTransformer(a.model, device=a.device)
    if a.precision == "bf16":
        model.to(torch.bfloat16)
    sync(a.device)
    load_s = time.perf_counter() - t
    max_len = model.max_seq_length

    def count(some):
        return [len(ids) for ids in model.tokenizer(some, truncation=True, max_length=max_len)["input_ids"]]

    # ---- tokens: the precomputed counts, checked on the sample rows; else counted here (untimed)
    t = time.perf_counter()
    stats, lens_source = None, "counted"
    if a.stats:
        try:
            with open(a.stats) as f:
                stats = json.load(f)
        except (OSError, ValueError):
            stats = None
    if stats and stats.get("texts") == len(texts) and stats.get("max_length") == max_len:
        if rows and len(stats.get("rows_lens", [])) == len(rows):
            got = count([texts[r] for r in rows])
            bad = sum(1 for x, y in zip(got, stats["rows_lens"]) if x != y)
            if bad == 0:
                lens_source = f"precomputed ({stats.get('source', '?')}), checked on {len(rows)} sample rows"
            else:
                lens_source = f"counted (the precomputed counts differ on {bad} of {len(rows)} sample rows)"
        else:
            lens_source = f"precomputed ({stats.get('source', '?')}), unchecked"
    elif stats:
        lens_source = "counted (the precomputed counts are for another input or max length)"
    if lens_source.startswith("precomputed"):
        tokens, at_max = stats["tokens"], stats["at_max_len"]
        weighted = stats["token_weighted_len"]
    else:
        lens = np.array(count(texts), dtype=np.int64)
        tokens, at_max = int(lens.sum()), int((lens >= max_len).sum())
        weighted = float((lens.astype(np.float64) ** 2).sum() / max(tokens, 1))
    count_s = time.perf_counter() - t

    res = {
        "impl": f"sentence-transformers {sentence_transformers.__version__} (torch {torch.__version__})",
        "device": a.device, "precision": a.precision, "texts": len(texts), "tokens": tokens,
        "max_seq_length": max_len, "at_max_len": at_max,  # truncated, or exactly full
        "mean_len": tokens / max(len(texts), 1),
        # sum(S^2)/sum(S): the length each token's attention actually spans, on average
        "token_weighted_len": weighted, "lens_source": lens_source,
        "load_seconds": load_s, "count_seconds": count_s, "sweep": [],
    }

    def save():
        if a.out:
            with open(a.out, "w") as f:
                json.dump(res, f, indent=1)

    t = time.perf_counter()
    model.encode(texts[: a.warmup], batch_size=sizes[len(sizes) // 2], convert_to_numpy=True, show_progress_bar=False)
    sync(a.device)
    res["warmup_seconds"] = time.perf_counter() - t

    # ---- the sweep: the batch size sentence-transformers does best at, on a subsample
    if len(sizes) > 1:
        k = min(a.sweep_texts, len(texts))
        sub = [texts[i * len(texts) // k] for i in range(k)]
        for b in sizes:
            t = time.perf_counter()
            model.encode(sub, batch_size=b, convert_to_numpy=True, show_progress_bar=False)
            sync(a.device)
            s = time.perf_counter() - t
            res["sweep"].append({"batch_size": b, "texts": k, "seconds": s, "texts_per_s": k / s})
            print(f"st sweep: batch {b}: {k / s:.0f} texts/s ({k} texts, {s:.2f} s)", flush=True)
        best = max(res["sweep"], key=lambda x: x["texts_per_s"])["batch_size"]
    else:
        best = sizes[0]
    res["batch_size"] = best
    save()

    # ---- the vectors compare.py checks (apart from the timed run, so a cut run still has them)
    if rows and a.sample_out:
        v = model.encode([texts[r] for r in rows], batch_size=best, convert_to_numpy=True, show_progress_bar=False)
        np.save(a.sample_out, np.asarray(v, dtype=np.float32))

    # ---- the timed run: every text at the best batch size
    t = time.perf_counter()
    emb = model.encode(texts, batch_size=best, convert_to_numpy=True, show_progress_bar=False)
    sync(a.device)
    secs = time.perf_counter() - t
    res.update({"seconds": secs, "texts_per_s": len(texts) / secs, "tokens_per_s": tokens / secs,
                "dim": int(emb.shape[1]), "out_dtype": str(emb.dtype)})
    save()
    sweep = ", ".join(f"{x['batch_size']}: {x['texts_per_s']:.0f}/s" for x in res["sweep"])
    print(f"st: {len(texts)} texts, {tokens} tokens (mean {res['mean_len']:.1f}, max length {max_len}) in "
          f"{secs:.2f} s: {res['texts_per_s']:.0f} texts/s, {res['tokens_per_s']:.0f} tokens/s "
          f"[{res['impl']}, {a.precision}, batch {best}{' (sweep ' + sweep + ')' if sweep else ''}; "
          f"load {load_s:.1f} s, tokens {lens_source} in {count_s:.1f} s, warm-up {res['warmup_seconds']:.1f} s]")


if __name__ == "__main__":
    main()
