"""Table for bench/embed_cpu/run.sh: reads RESULTS/runs.jsonl (one line per
stoke run and per peer process), RESULTS/peak-{start,end}.json (bench_gemm_peak), the token ids
and the models' config.json, and prints what was measured and what is derived
from it.

    python3 report.py RESULTS_DIR MODELS_DIR BLAS_NOTE ST_NOTE SECONDS [OTHERS_CPU_SECONDS]
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from cpu_load import load_line  # noqa: E402  (bench/common/cpu_load.py)


def flops(cfg, lengths):
    """Forward FLOPs of the encoder for texts of these lengths, no padding:
    2 x the layers' matrix parameters per token (Q, K, V, O and the two FFN
    matrices; biases, LayerNorm, embeddings and pooler left out) plus
    4*S*H*L per token for attention (QK^T and PV), S = that text's length."""
    L, H, I = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["intermediate_size"]
    tokens = sum(lengths)
    gemm = 2 * L * (4 * H * H + 2 * H * I) * tokens
    attn = 4 * H * L * sum(s * s for s in lengths)
    return gemm, attn


def min_cosine(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-30)).min())


def load_npy(path):
    return np.load(path) if os.path.exists(path) else None


def main():
    res, models_dir, blas_note, st_note, total_s = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    others_s = float(sys.argv[6]) if len(sys.argv) > 6 else None
    peaks = []
    for name in ("peak-start.json", "peak-end.json"):
        if os.path.exists(os.path.join(res, name)):
            with open(os.path.join(res, name)) as f:
                peaks.append(json.load(f))
    # The better of the two measurements counts: contention only lowers it.
    peak = dict(peaks[0])
    for key in ("peak_gflops", "burst_gflops"):
        peak[key] = {d: max(p[key][d] for p in peaks) for d in ("f32", "bf16")}
    fmas = [p["fma_gflops"] for p in peaks if "fma_gflops" in p]
    fma = max(fmas, key=lambda f: f["f32_median"]) if fmas else None
    runs = [json.loads(line) for line in open(os.path.join(res, "runs.jsonl")) if line.strip()]
    keys = []
    for r in runs:
        k = (r["model"], r["precision"])
        if k not in keys:
            keys.append(k)

    rows, details, checks = [], [], []
    torch_impl = st_impl = blas = ""
    for model, prec in keys:
        with open(os.path.join(models_dir, model, "config.json")) as f:
            cfg = json.load(f)
        with open(os.path.join(res, f"ids-{model}.jsonl")) as f:
            lengths = [len(json.loads(line)["ids"]) for line in f if line.strip()]
        gemm_f, attn_f = flops(cfg, lengths)
        model_f = gemm_f + attn_f
        tokens = sum(lengths)

        stoke = []
        for r in runs:
            if r["kind"] == "stoke" and r["model"] == model and r["precision"] == prec:
                with open(r["manifest"]) as f:
                    m = json.load(f)
                stoke.append((r["wall"], m))
        def best(kind):
            rs = [r for r in runs if r["kind"] == kind and r["model"] == model and r["precision"] == prec]
            if not rs:
                return None
            b = dict(min(rs, key=lambda r: r["seconds"]))
            b["passes"] = [x for r in rs for x in r["passes"]]
            return b
        torch_r, st_r = best("torch"), best("st")
        if torch_r:
            torch_impl, blas = torch_r["impl"], torch_r.get("blas", "")
        if st_r:
            st_impl = st_r["impl"]

        wall, man = min(stoke, key=lambda x: x[0])
        run = man["run"]
        s_tokens = man["counts"]["tokens"]
        # The device's own busy time (the CPU backend times its executor thread).
        compute_s = run["stages"]["device"]["busy"]
        peak_g = peak["peak_gflops"][prec]
        stoke_tps = s_tokens / wall
        torch_tps = torch_r["tokens_per_s"] if torch_r else None
        st_tps = st_r["tokens_per_s"] if st_r else None
        gflops = model_f / compute_s / 1e9 if compute_s > 0 else float("nan")
        share = gflops / peak_g
        rows.append(dict(model=model, prec=prec, texts=len(lengths), tokens=tokens, stoke=stoke_tps, torch=torch_tps,
                         st=st_tps, compute_tps=s_tokens / compute_s if compute_s > 0 else float("nan"),
                         gflops=gflops, share=share,
                         torch_gflops=model_f / torch_r["seconds"] / 1e9 if torch_r else None,
                         st_gflops=model_f / st_r["seconds"] / 1e9 if st_r else None))
        details.append(dict(model=model, prec=prec, walls=[w for w, _ in stoke], wall=wall, run_s=run["seconds"],
                            tok_s=run["stages"]["tokenize"]["busy"], comp_s=compute_s,
                            other=run["seconds"] - compute_s, after=wall - run["seconds"],
                            batches=run.get("batches"), syncs=run.get("host_syncs"),
                            torch_passes=torch_r["passes"] if torch_r else [], st_passes=st_r["passes"] if st_r else [],
                            gemm_tf=gemm_f / 1e12, attn_tf=attn_f / 1e12))
        # Output checks: stoke's vectors against the f32 eager peer's.
        ref = load_npy(os.path.join(res, f"torch-{model}-f32.npy"))
        mine = load_npy(os.path.join(res, f"stoke-{model}-{prec}", "embeddings-00000.npy"))
        c = dict(model=model, prec=prec, tokens_match=(s_tokens == tokens), stoke_tokens=s_tokens, ids_tokens=tokens)
        if ref is not None and mine is not None and ref.shape == mine.shape:
            c["stoke_cos"] = min_cosine(mine, ref)
            c["stoke_maxabs"] = float(np.abs(mine.astype(np.float64) - ref).max())
        elif mine is not None and ref is not None:
            c["shape"] = f"stoke {mine.shape} vs torch {ref.shape}"
        peer = load_npy(os.path.join(res, f"torch-{model}-{prec}.npy"))
        if prec != "f32" and ref is not None and peer is not None:
            c["peer_cos"] = min_cosine(peer, ref)
        st = load_npy(os.path.join(res, f"st-{model}-{prec}.npy"))
        if st is not None and ref is not None and st.shape == ref.shape:
            c["st_cos"] = min_cosine(st, ref)
        checks.append(c)

    f2 = lambda x: "-" if x is None else f"{x:,.0f}"
    r2 = lambda a, b: "-" if (a is None or b is None) else f"{a / b:.2f}"
    print()
    print(f"CPU embedding, {peak['threads']} threads everywhere; tokens/s = tokens embedded / seconds of the best run")
    hdr = (f"{'model':<10} {'prec':<5} {'texts':>5} {'tokens':>7} | {'stoke e2e':>9} {'torch':>7} {'ST':>7} | "
           f"{'stoke/torch':>11} {'stoke/ST':>8} | {'stoke fwd':>9} {'fwd/torch':>9} {'GFLOP/s':>7} {'of peak':>7} | "
           f"{'torch':>7} {'ST':>7}")
    print(f"{'':<31}| {'tokens/s (measured)':^27} | {'ratios (measured)':^20} | {'stoke forward only (derived)':^37} | "
          f"{'GFLOP/s (derived)':^15}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['model']:<10} {r['prec']:<5} {r['texts']:>5} {r['tokens']:>7} | {f2(r['stoke']):>9} {f2(r['torch']):>7} "
              f"{f2(r['st']):>7} | {r2(r['stoke'], r['torch']):>11} {r2(r['stoke'], r['st']):>8} | "
              f"{f2(r['compute_tps']):>9} {r2(r['compute_tps'], r['torch']):>9} {r['gflops']:>7.0f} {r['share']:>7.2f} | "
              f"{f2(r['torch_gflops']):>7} {f2(r['st_gflops']):>7}")
    print()
    print(f"oneDNN {peak['onednn']} matmul peak, {peak['threads']} threads (bench_gemm_peak: median call of "
          f"[Mx768]x[768x3072] and [Mx3072]x[3072x768], M = {peak['cases'][0]['m']}, best case, measured at the start "
          f"and at the end): f32 {peak['peak_gflops']['f32']:.0f} GFLOP/s, bf16 {peak['peak_gflops']['bf16']:.0f} GFLOP/s "
          f"(best single call: f32 {peak['burst_gflops']['f32']:.0f}, bf16 {peak['burst_gflops']['bf16']:.0f})")
    if fma:
        print(f"f32 ceiling: every thread running FMAs on registers ({fma['isa']}, no memory traffic) "
              f"{fma['f32_median']:.0f} GFLOP/s (median round; best {fma['f32_best']:.0f}); the f32 matmul above "
              f"reaches {peak['peak_gflops']['f32'] / fma['f32_median']:.2f} of it")
        for r in rows:
            if r["prec"] == "f32" and r["torch_gflops"]:
                need = 1.5 * r["torch_gflops"]
                print(f"  {r['model']}: 1.5x the torch peer in f32 needs {need:.0f} model GFLOP/s end to end = "
                      f"{need / peak['peak_gflops']['f32']:.2f} of the f32 matmul rate, "
                      f"{need / fma['f32_median']:.2f} of the FMA ceiling")
    for when, p in zip(("start", "end"), peaks):
        for c in p["cases"]:
            print(f"  {when:<5} {c['dtype']:<4} {c['m']}x{c['k']}x{c['n']} weights {c['weights']:<12} median {c['gflops_median']:7.1f}  "
                  f"best {c['gflops_best']:7.1f} GFLOP/s  ({c['impl']})")
    print()
    print("stoke runs (seconds; measured: wall around the process, and manifest.json's run section)")
    print(f"{'model':<10} {'prec':<5} {'walls':<24} {'run':>6} {'tokenize':>8} {'compute':>8} {'rest':>6} {'exit':>6} "
          f"{'batches':>7} | torch passes / ST passes")
    for d in details:
        walls = " ".join(f"{w:.2f}" for w in d["walls"])
        tp = " ".join(f"{s:.2f}" for s in d["torch_passes"]) or "-"
        sp = " ".join(f"{s:.2f}" for s in d["st_passes"]) or "-"
        print(f"{d['model']:<10} {d['prec']:<5} {walls:<24} {d['run_s']:>6.2f} {d['tok_s']:>8.2f} {d['comp_s']:>8.2f} "
              f"{d['other']:>6.2f} {d['after']:>6.2f} {d['batches']!s:>7} | {tp} / {sp}")
    print("  run = manifest run.seconds; tokenize = run.stages.tokenize.busy (overlapped with compute); compute =")
    print("  run.stages.device.busy (the CPU executor thread running the forward); rest = run - compute (model load")
    print("  and whatever the pipeline did not hide); exit = wall - run (after the timer: process exit)")
    print()
    print("output checks (min cosine over all texts against the torch f32 eager peer's vectors)")
    for c in checks:
        parts = [f"tokens stoke {c['stoke_tokens']} vs ids {c['ids_tokens']}" + ("" if c["tokens_match"] else "  MISMATCH")]
        if "stoke_cos" in c:
            parts.append(f"stoke {c['stoke_cos']:.6f} (max |diff| {c['stoke_maxabs']:.2e})")
        if "shape" in c:
            parts.append("SHAPE MISMATCH " + c["shape"])
        if "peer_cos" in c:
            parts.append(f"torch {c['prec']} {c['peer_cos']:.6f}")
        if "st_cos" in c:
            parts.append(f"ST {c['st_cos']:.6f}")
        print(f"  {c['model']:<10} {c['prec']:<5} " + "; ".join(parts))
    print()
    print("measured: tokens/s of stoke = tokens / wall seconds of the whole `stoke embed` process (start, model")
    print("  load, reading, tokenization, forward, writing), best of the runs above; torch = tokens / seconds of")
    print(f"  one pass of batched forwards on stoke's token ids (tokenization and model load not timed), {torch_impl},")
    print(f"  plain BERT forward, batches of 32 by decreasing length, padded, mean pooling; BLAS: {blas}; {blas_note}")
    print(f"  ST = SentenceTransformer.encode(texts, batch_size=32), tokenization timed: {st_impl or st_note}")
    print("derived: model FLOPs = 2 x layer matrix parameters per token + 4*S*H*L per token (S = each text's own")
    print("  length, no padding); stoke fwd tokens/s and GFLOP/s use stoke's compute seconds (below), so fwd/torch")
    print("  compares forward with forward, tokenization and load left out on both sides; 'of peak' = GFLOP/s /")
    print("  oneDNN peak (median call) of that precision = the share of compute time the model's matmuls would")
    print("  take at that rate. Torch/ST GFLOP/s count the same useful FLOPs (their padding is extra work, not")
    print("  counted).")
    print(load_line(total_s, others_s))


if __name__ == "__main__":
    main()
