"""PyTorch eager peer for bench/embed_cpu: a plain BERT forward (the math of
transformers' BertModel, with Q, K and V fused into one matmul) plus mean
pooling, on token ids that `stoke tokenize` wrote, so tokenization is not
timed and both sides embed exactly the same ids.

    python3 torch_baseline.py MODEL_DIR IDS.jsonl PRECISION THREADS REPEATS BUDGET_S [OUT.npy]

Batches of 32 in order of decreasing length (as SentenceTransformer.encode
sorts them), each padded to its longest text, with an attention mask. Runs one
pass, then more (up to REPEATS) while the passes so far took under BUDGET_S,
and prints one JSON line with the best pass. OUT.npy gets the embeddings (f32,
in input order) for the cross-check against stoke's.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] == "F32", (name, h["dtype"])
        b, e = h["data_offsets"]
        out[name] = torch.from_numpy(np.array(data[b:e]).view("<f4").reshape(h["shape"]))
    return out


class Bert:
    def __init__(self, model_dir, dtype):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = cfg = json.load(f)
        w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.heads = cfg["num_attention_heads"]
        self.eps = cfg["layer_norm_eps"]
        self.dtype = dtype

        def t(name):
            return w[name].to(dtype).contiguous()

        self.word = t("embeddings.word_embeddings.weight")            # (V, H)
        self.pos = t("embeddings.position_embeddings.weight")         # (P, H)
        self.type0 = t("embeddings.token_type_embeddings.weight")[0]  # (H,)
        self.emb_ln = (t("embeddings.LayerNorm.weight"), t("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            a = p + "attention.self."
            self.layers.append(dict(
                wqkv=torch.cat([t(a + "query.weight"), t(a + "key.weight"), t(a + "value.weight")]),  # (3H, H)
                bqkv=torch.cat([t(a + "query.bias"), t(a + "key.bias"), t(a + "value.bias")]),        # (3H,)
                wo=t(p + "attention.output.dense.weight"), bo=t(p + "attention.output.dense.bias"),  # (H, H)
                ln1=(t(p + "attention.output.LayerNorm.weight"), t(p + "attention.output.LayerNorm.bias")),
                wi=t(p + "intermediate.dense.weight"), bi=t(p + "intermediate.dense.bias"),          # (I, H)
                wf=t(p + "output.dense.weight"), bf=t(p + "output.dense.bias"),                      # (H, I)
                ln2=(t(p + "output.LayerNorm.weight"), t(p + "output.LayerNorm.bias")),
            ))
        self.sdpa = getattr(F, "scaled_dot_product_attention", None)  # torch >= 2.0

    def embed(self, ids, mask):
        """ids, mask: (B, S) int64 -> mean-pooled (B, H) f32."""
        B, S = ids.shape
        H = self.word.shape[1]
        nh, hd = self.heads, H // self.heads
        x = self.word[ids] + self.pos[:S] + self.type0                     # (B, S, H)
        x = F.layer_norm(x, (H,), *self.emb_ln, self.eps)
        # Additive key mask, as BertModel builds it: 0 to keep, dtype min to drop.
        add = (1.0 - mask[:, None, None, :].to(self.dtype)) * torch.finfo(self.dtype).min  # (B, 1, 1, S)
        for L in self.layers:
            qkv = F.linear(x, L["wqkv"], L["bqkv"]).view(B, S, 3, nh, hd).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]                                # (B, nh, S, hd)
            if self.sdpa is not None:
                ctx = self.sdpa(q, k, v, attn_mask=add)
            else:
                scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd) + add
                ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
            ctx = ctx.transpose(1, 2).reshape(B, S, H)
            x = F.layer_norm(x + F.linear(ctx, L["wo"], L["bo"]), (H,), *L["ln1"], self.eps)
            h = F.gelu(F.linear(x, L["wi"], L["bi"]))
            x = F.layer_norm(x + F.linear(h, L["wf"], L["bf"]), (H,), *L["ln2"], self.eps)
        m = mask[:, :, None].to(torch.float32)
        return (x.float() * m).sum(1) / m.sum(1).clamp(min=1e-9)


def blas_info():
    """Which BLAS torch's f32 matmuls go to: its build's BLAS_INFO, and where
    that is the system libblas.so.3, OpenBLAS's own config string, which names
    the kernel set it picked for this CPU (a generic one such as Prescott is
    several times slower than SkylakeX)."""
    import ctypes
    import re
    m = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    info = "BLAS_INFO=" + (m.group(1) if m else "?")
    with open("/proc/self/maps") as f:  # only a BLAS this process has loaded
        libs = sorted({line.split()[-1] for line in f if "blas" in line.lower() and "/" in line})
    for lib in libs:
        try:
            fn = ctypes.CDLL(lib).openblas_get_config
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_char_p
        info += f"; {lib} = {fn().decode()}"
        break
    return info


def batches(seqs, batch_size):
    """(indices, ids, mask) per batch, longest texts first, padded with 0."""
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        S = len(seqs[idx[0]])
        ids = torch.zeros((len(idx), S), dtype=torch.int64)
        mask = torch.zeros((len(idx), S), dtype=torch.int64)
        for r, i in enumerate(idx):
            n = len(seqs[i])
            ids[r, :n] = torch.tensor(seqs[i])
            mask[r, :n] = 1
        yield idx, ids, mask


def main():
    model_dir, ids_path, precision = sys.argv[1], sys.argv[2], sys.argv[3]
    threads, repeats, budget = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    out_npy = sys.argv[7] if len(sys.argv) > 7 else None
    torch.set_num_threads(threads)
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[precision]
    with open(ids_path) as f:
        seqs = [json.loads(line)["ids"] for line in f if line.strip()]
    tokens = sum(len(s) for s in seqs)
    t0 = time.perf_counter()
    model = Bert(model_dir, dtype)
    load_s = time.perf_counter() - t0
    H = model.word.shape[1]
    with torch.inference_mode():
        model.embed(torch.tensor([seqs[0][:16]]), torch.ones((1, min(16, len(seqs[0]))), dtype=torch.int64))  # warm-up
        passes, spent = [], 0.0
        while len(passes) < repeats and (not passes or spent < budget):
            out = torch.empty((len(seqs), H))
            t = time.perf_counter()
            for idx, ids, mask in batches(seqs, 32):
                out[idx] = model.embed(ids, mask)
            s = time.perf_counter() - t
            passes.append(s)
            spent += s
    if out_npy:
        np.save(out_npy, out.numpy())
    best = min(passes)
    print(json.dumps({
        "impl": f"torch {torch.__version__} eager", "precision": precision, "threads": threads,
        "texts": len(seqs), "tokens": tokens, "seconds": best, "passes": passes,
        "tokens_per_s": tokens / best, "load_seconds": load_s, "blas": blas_info(),
    }))


if __name__ == "__main__":
    main()
