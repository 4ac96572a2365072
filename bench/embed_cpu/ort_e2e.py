"""ONNX Runtime as a user runs it end to end, for the whole-process figure of
bench/embed_cpu/int8_run.sh: texts in, embeddings out, in one process.

    python ort_e2e.py MODEL_DIR TEXTS.jsonl GRAPH.onnx THREADS OUT.npy

The graph is ort_baseline.py's (exported, optimized and, for int8,
quantize_dynamic'd once beforehand: a user does that once, so it is not in
this process). Here: import, session creation, the model's tokenizer.json
through Hugging Face `tokenizers` (truncation at 128, encode_batch), batches
of 32 by decreasing length, session.run, mean pooling over the mask, np.save.
int8_run.sh times the whole process from outside, as it times `stoke embed`.
Prints one JSON line with the parts timed inside (seconds).
"""
import json
import sys
import time

t_start = time.perf_counter()
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

from ort_baseline import batches  # noqa: E402  (same folder; imports nothing heavy at load)


def main():
    model_dir, texts_path, graph, threads, out_npy = sys.argv[1:6]
    t_import = time.perf_counter()
    so = ort.SessionOptions()
    so.intra_op_num_threads = int(threads)
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(graph, so, providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tok.enable_truncation(128)
    t_load = time.perf_counter()
    with open(texts_path) as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    enc = tok.encode_batch(texts)
    seqs = [e.ids for e in enc]
    t_tok = time.perf_counter()
    out = None
    for idx, ids, mask in batches(seqs, 32):  # ort_baseline's batches: the same order and padding
        (h,) = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
        m = mask[:, :, None].astype(np.float32)
        pooled = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        if out is None:
            out = np.empty((len(seqs), pooled.shape[1]), dtype=np.float32)
        out[idx] = pooled
    t_run = time.perf_counter()
    np.save(out_npy, out)
    print(json.dumps({"texts": len(seqs), "tokens": sum(len(s) for s in seqs), "import": t_import - t_start,
                      "load": t_load - t_import, "tokenize": t_tok - t_load, "run": t_run - t_tok,
                      "save": time.perf_counter() - t_run}))


if __name__ == "__main__":
    main()
