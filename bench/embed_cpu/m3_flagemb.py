"""FlagEmbedding peer of bench/embed_cpu/m3_run.sh: bge-m3's three outputs as FlagEmbedding computes them.

    python m3_flagemb.py MODEL_DIR TEXTS.jsonl MAX_LENGTH BATCH_SIZE THREADS OUT_DIR

Runs, on the raw texts (its tokenization is timed, as stoke's is),
    BGEM3FlagModel(MODEL_DIR, use_fp16=False, devices="cpu").encode(texts, batch_size=BATCH_SIZE,
        max_length=MAX_LENGTH, return_dense=True, return_sparse=True, return_colbert_vecs=True)
once (FlagEmbedding 1.3.5, the pinned .venv-flagemb), with torch.set_num_threads(THREADS), and prints one JSON
line: seconds since the interpreter started until the model was loaded (imports included) and the encode
call's seconds, plus the seconds of each forward pass of the model inside it. encode() runs its first (longest)
batch twice: once to probe whether the batch size fits ("adjust batch size" in encode_single_device), then again
in its loop; "probe_seconds" is that first pass, so encode minus probe is the loop alone. Writes the outputs to
OUT_DIR in stoke's layouts (docs/output-format.md) so m3_report.py can compare them: dense.npy [N, H] f32,
sparse.indices.npy (int64 token ids ascending per row) / sparse.values.npy f32 / sparse.indptr.npy int64 [N + 1],
colbert.npy [total, D] f32 / colbert.offsets.npy int64 [N + 1], and ids.jsonl (its tokenizer's ids per text).
"""
import time

T0 = time.perf_counter()

import importlib.metadata  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402


def main():
    model_dir, texts_path = sys.argv[1], sys.argv[2]
    max_length, batch_size, threads = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    out = Path(sys.argv[6])
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(threads)
    from FlagEmbedding import BGEM3FlagModel

    with open(texts_path, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    model = BGEM3FlagModel(model_dir, use_fp16=False, devices="cpu")
    loaded = time.perf_counter() - T0

    forwards = []  # seconds of each forward pass of the model (the encoder and both heads)
    start = {}
    model.model.register_forward_pre_hook(lambda m, a: start.__setitem__("t", time.perf_counter()))
    model.model.register_forward_hook(lambda m, a, o: forwards.append(time.perf_counter() - start["t"]))
    t = time.perf_counter()
    res = model.encode(texts, batch_size=batch_size, max_length=max_length, return_dense=True,
                       return_sparse=True, return_colbert_vecs=True)
    encode_s = time.perf_counter() - t

    np.save(out / "dense.npy", np.asarray(res["dense_vecs"], dtype=np.float32))
    indices, values, indptr = [], [], [0]
    for weights in res["lexical_weights"]:
        items = sorted((int(k), float(w)) for k, w in weights.items())
        indices += [k for k, _ in items]
        values += [w for _, w in items]
        indptr.append(len(indices))
    np.save(out / "sparse.indices.npy", np.asarray(indices, dtype=np.int64))
    np.save(out / "sparse.values.npy", np.asarray(values, dtype=np.float32))
    np.save(out / "sparse.indptr.npy", np.asarray(indptr, dtype=np.int64))
    colbert = [np.asarray(v, dtype=np.float32) for v in res["colbert_vecs"]]
    np.save(out / "colbert.npy", np.concatenate(colbert, axis=0))
    np.save(out / "colbert.offsets.npy", np.cumsum([0] + [v.shape[0] for v in colbert]).astype(np.int64))

    ids = model.tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    tokens = sum(len(i) for i in ids)
    with open(out / "ids.jsonl", "w") as f:  # the token ids encode() ran, one row per text
        f.writelines(json.dumps({"ids": list(i)}) + "\n" for i in ids)
    print(json.dumps({
        "impl": f"FlagEmbedding {importlib.metadata.version('FlagEmbedding')} (torch {torch.__version__}, "
                f"transformers {importlib.metadata.version('transformers')})",
        "blas": "BLAS " + (re.findall(r"BLAS_INFO=(\w+)", torch.__config__.show()) or ["?"])[0]
                + ", CPU capability " + torch.backends.cpu.get_cpu_capability(),
        "threads": threads, "texts": len(texts), "tokens": tokens, "max_length": max_length,
        "batch_size": batch_size, "load_seconds": loaded, "encode_seconds": encode_s,
        "forward_seconds": forwards, "probe_seconds": forwards[0] if forwards else 0.0,
    }))


if __name__ == "__main__":
    main()
