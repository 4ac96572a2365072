"""ONNX Runtime peer for bench/embed_cpu (f32 and dynamic int8), on token ids
that `stoke tokenize` wrote, so tokenization is not timed and every engine
embeds exactly the same ids.

    python ort_baseline.py MODEL_DIR IDS.jsonl f32|int8 THREADS REPEATS BUDGET_S OUT.npy WORK_DIR

The graph is what a performance-minded user runs: the model exported with
torch.onnx (opset 17, eager attention so ORT's fuser recognises it),
optimized by onnxruntime.transformers.optimizer (model_type "bert": fused
attention, SkipLayerNorm, BiasGelu), and for int8 that optimized graph through
onnxruntime.quantization.quantize_dynamic (s8 weights, u8 activations
quantized per tensor at run time). Graphs are cached in WORK_DIR. Batches of
32 by decreasing length, padded, mean pooling over the mask (in numpy, inside
the timing). One JSON line: the best pass.
"""
import json
import os
import sys
import time

import numpy as np


def export(model_dir, path):
    import torch
    import transformers

    model = transformers.AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()

    class Hidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, mask, types):
            return self.m(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

    ids = torch.ones((2, 8), dtype=torch.int64)
    torch.onnx.export(Hidden(model), (ids, torch.ones_like(ids), torch.zeros_like(ids)), path,
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state"],
                      dynamic_axes={n: {0: "batch", 1: "seq"} for n in ("input_ids", "attention_mask", "token_type_ids")},
                      opset_version=17, dynamo=False)


def graphs(model_dir, work):
    """The optimized f32 graph and its dynamic-int8 quantization (cached)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer

    name = os.path.basename(os.path.normpath(model_dir))
    raw, opt, q8 = (os.path.join(work, f"{name}{s}.onnx") for s in ("", "-opt", "-opt-int8"))
    if not os.path.exists(raw):
        export(model_dir, raw)
    if not os.path.exists(opt):
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        m = optimizer.optimize_model(raw, model_type="bert", num_heads=cfg["num_attention_heads"],
                                     hidden_size=cfg["hidden_size"])
        m.save_model_to_file(opt)
        with open(opt + ".fused.json", "w") as f:
            json.dump(m.get_fused_operator_statistics(), f)
    if not os.path.exists(q8):
        import onnx
        # The fused contrib ops defeat ONNX shape inference; their outputs are f32.
        quantize_dynamic(opt, q8, weight_type=QuantType.QInt8,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return opt, q8


def batches(seqs, batch_size):
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        S = len(seqs[idx[0]])
        ids = np.zeros((len(idx), S), dtype=np.int64)
        mask = np.zeros((len(idx), S), dtype=np.int64)
        for r, i in enumerate(idx):
            ids[r, :len(seqs[i])] = seqs[i]
            mask[r, :len(seqs[i])] = 1
        yield idx, ids, mask


def main():
    import onnxruntime as ort

    model_dir, ids_path, precision = sys.argv[1], sys.argv[2], sys.argv[3]
    threads, repeats, budget = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    out_npy, work = sys.argv[7], sys.argv[8]
    os.makedirs(work, exist_ok=True)
    opt, q8 = graphs(model_dir, work)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(q8 if precision == "int8" else opt, so, providers=["CPUExecutionProvider"])
    with open(ids_path) as f:
        seqs = [json.loads(line)["ids"] for line in f if line.strip()]
    tokens = sum(len(s) for s in seqs)
    prepared = list(batches(seqs, 32))
    warm = prepared[-1]
    sess.run(None, {"input_ids": warm[1], "attention_mask": warm[2], "token_type_ids": np.zeros_like(warm[1])})
    passes, spent, out = [], 0.0, None
    while len(passes) < repeats and (not passes or spent < budget):
        out = None
        t = time.perf_counter()
        for idx, ids, mask in prepared:
            (h,) = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
            m = mask[:, :, None].astype(np.float32)
            pooled = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            if out is None:
                out = np.empty((len(seqs), pooled.shape[1]), dtype=np.float32)
            out[idx] = pooled
        s = time.perf_counter() - t
        passes.append(s)
        spent += s
    np.save(out_npy, out)
    best = min(passes)
    with open(opt + ".fused.json") as f:
        fused = {k: v for k, v in json.load(f).items() if v}
    print(json.dumps({"impl": f"onnxruntime {ort.__version__}", "precision": precision, "threads": threads,
                      "texts": len(seqs), "tokens": tokens, "seconds": best, "passes": passes,
                      "tokens_per_s": tokens / best, "fused": fused}))


if __name__ == "__main__":
    main()
