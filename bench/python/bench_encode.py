"""stoke.Model.encode next to SentenceTransformer.encode: same process, same texts, same threads.

    python bench_encode.py MODELS_DIR TEXTS.jsonl THREADS "minilm-l6 bert-base" "f32 bf16" N_MINILM N_BERT OUT.jsonl

Needs a Python with torch and sentence-transformers, and stoke importable
(PYTHONPATH=build/release/python, or pip-installed). Both sides embed the raw
texts (tokenization timed), max length 128, on THREADS threads: torch's
intra-op threads and stoke's OpenMP team (OMP_NUM_THREADS, set by run.sh).
The two take turns (stoke, ST, stoke, ST) so a load that comes and goes on a
shared machine falls on both; the best pass of each counts. Then the per-call
overhead: the median wall time of encode("one short text") over 200 calls.
Prints one JSON line per cell and writes them to OUT.jsonl.
"""
import json
import statistics
import sys
import time

import numpy as np
import torch

import stoke


def best_of(fn, repeats):
    times = []
    out = None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), times, out


def per_call_us(fn, calls=200):
    for _ in range(20):
        fn()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main():
    models_dir, texts_path, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    models, precisions = sys.argv[4].split(), sys.argv[5].split()
    counts = {"minilm-l6": int(sys.argv[6]), "bert-base": int(sys.argv[7])}
    out_path = sys.argv[8]
    torch.set_num_threads(threads)
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    with open(texts_path, encoding="utf-8") as f:
        all_texts = [json.loads(line)["text"] for line in f if line.strip()]
    rows = []
    for name in models:
        n = counts[name]
        # n texts evenly spread over the file: the same mix of languages and lengths.
        texts = [all_texts[int(i * len(all_texts) / n)] for i in range(n)]
        path = f"{models_dir}/{name}"
        for prec in precisions:
            sm = stoke.Model(path, device="cpu", dtype=prec, max_length=128)
            st = SentenceTransformer(path, device="cpu")
            st.max_seq_length = 128
            if prec == "bf16":
                st = st.to(torch.bfloat16)
            tokens = int(sm.tokenize(texts)["attention_mask"].sum())
            sm.encode(texts[:64])
            st.encode(texts[:32], batch_size=32)  # warm-up
            s_times, t_times = [], []
            for _ in range(2):
                s, _, s_out = best_of(lambda: sm.encode(texts), 1)
                s_times.append(s)
                t, _, t_out = best_of(lambda: st.encode(texts, batch_size=32, convert_to_numpy=True), 1)
                t_times.append(t)
            diff = float(np.abs(s_out - np.asarray(t_out, dtype=np.float32)).max())
            one = "A short query."
            s_us = per_call_us(lambda: sm.encode(one))
            t_us = per_call_us(lambda: st.encode(one))
            row = {
                "model": name, "precision": prec, "threads": threads, "texts": n, "tokens": tokens,
                "stoke_s": min(s_times), "st_s": min(t_times), "stoke_passes": s_times, "st_passes": t_times,
                "speedup": min(t_times) / min(s_times),
                "stoke_tokens_per_s": tokens / min(s_times), "st_tokens_per_s": tokens / min(t_times),
                "max_abs_diff": diff, "stoke_one_text_us": s_us, "st_one_text_us": t_us,
                "st": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
            del sm, st
    with open(out_path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
