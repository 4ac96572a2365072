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


SAFETENSORS_DTYPES = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}


def read_safetensors(path):
    """name -> torch tensor (f32; also f64 and int64, as goldens and position_ids have)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        assert h["dtype"] in SAFETENSORS_DTYPES, (name, h["dtype"])
        b, e = h["data_offsets"]
        out[name] = torch.from_numpy(np.array(data[b:e]).view(SAFETENSORS_DTYPES[h["dtype"]]).reshape(h["shape"]))
    return out


class Bert:
    """The encoder of transformers' BertModel. Inference (bench/embed_cpu):
    weights as plain tensors of `dtype`. Training (bench/train_cpu):
    trainable=True makes them leaf nn.Parameters (keep dtype f32: master
    weights, with autocast for bf16) and hidden() takes dropout rates.
    Reads BertModel names, or BertFor*'s "bert."-prefixed ones."""

    def __init__(self, model_dir, dtype, trainable=False, weights=None):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = cfg = json.load(f)
        w = weights if weights is not None else read_safetensors(os.path.join(model_dir, "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
        self.heads = cfg["num_attention_heads"]
        self.eps = cfg["layer_norm_eps"]
        self.dtype = dtype
        self.params = {}  # name -> parameter, when trainable (Q, K, V fused into one "...qkv")

        def leaf(name, x):
            x = x.to(dtype).contiguous()
            if trainable:
                x = self.params[name] = torch.nn.Parameter(x)
            return x

        def t(name):
            return leaf(name, w[prefix + name])

        self.word = t("embeddings.word_embeddings.weight")            # (V, H)
        self.pos = t("embeddings.position_embeddings.weight")         # (P, H)
        self.type_emb = t("embeddings.token_type_embeddings.weight")  # (T, H); every token is type 0
        self.emb_ln = (t("embeddings.LayerNorm.weight"), t("embeddings.LayerNorm.bias"))
        self.layers = []
        for i in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            a = p + "attention.self."
            qkv = [prefix + a + n for n in ("query", "key", "value")]
            self.layers.append(dict(
                wqkv=leaf(a + "qkv.weight", torch.cat([w[n + ".weight"] for n in qkv])),  # (3H, H)
                bqkv=leaf(a + "qkv.bias", torch.cat([w[n + ".bias"] for n in qkv])),      # (3H,)
                wo=t(p + "attention.output.dense.weight"), bo=t(p + "attention.output.dense.bias"),  # (H, H)
                ln1=(t(p + "attention.output.LayerNorm.weight"), t(p + "attention.output.LayerNorm.bias")),
                wi=t(p + "intermediate.dense.weight"), bi=t(p + "intermediate.dense.bias"),          # (I, H)
                wf=t(p + "output.dense.weight"), bf=t(p + "output.dense.bias"),                      # (H, I)
                ln2=(t(p + "output.LayerNorm.weight"), t(p + "output.LayerNorm.bias")),
            ))
        self.sdpa = getattr(F, "scaled_dot_product_attention", None)  # torch >= 2.0

    def hidden(self, ids, mask, dropout=0.0, attn_dropout=0.0):
        """ids, mask: (B, S) int64 -> last hidden states (B, S, H). Dropout
        where BertModel has it (embeddings, attention probabilities, the
        attention and FFN outputs before their residual add), only when a rate
        is given."""
        B, S = ids.shape
        H = self.word.shape[1]
        nh, hd = self.heads, H // self.heads
        x = F.embedding(ids, self.word) + self.pos[:S] + self.type_emb[0]  # (B, S, H), as nn.Embedding
        x = F.layer_norm(x, (H,), *self.emb_ln, self.eps)
        if dropout:
            x = F.dropout(x, dropout)
        # Additive key mask, as BertModel builds it: 0 to keep, dtype min to drop.
        add = (1.0 - mask[:, None, None, :].to(self.dtype)) * torch.finfo(self.dtype).min  # (B, 1, 1, S)
        for L in self.layers:
            qkv = F.linear(x, L["wqkv"], L["bqkv"]).view(B, S, 3, nh, hd).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]                                # (B, nh, S, hd)
            if self.sdpa is not None:
                ctx = self.sdpa(q, k, v, attn_mask=add, dropout_p=attn_dropout)
            else:
                scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd) + add
                probs = torch.softmax(scores, dim=-1)
                if attn_dropout:
                    probs = F.dropout(probs, attn_dropout)
                ctx = torch.matmul(probs, v)
            ctx = ctx.transpose(1, 2).reshape(B, S, H)
            o = F.linear(ctx, L["wo"], L["bo"])
            if dropout:
                o = F.dropout(o, dropout)
            x = F.layer_norm(x + o, (H,), *L["ln1"], self.eps)
            h = F.linear(F.gelu(F.linear(x, L["wi"], L["bi"])), L["wf"], L["bf"])
            if dropout:
                h = F.dropout(h, dropout)
            x = F.layer_norm(x + h, (H,), *L["ln2"], self.eps)
        return x

    def embed(self, ids, mask):
        """ids, mask: (B, S) int64 -> mean-pooled (B, H) f32."""
        x = self.hidden(ids, mask)
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
