"""Table for bench/train_cpu/run.sh: reads RESULTS/runs.jsonl (one line per
`stoke train` process, pointing at its run.json, and one per torch peer
process), RESULTS/ids.jsonl (the token ids both sides trained on) and the
model's config.json, and prints what was measured and what is derived.

    python3 report.py RESULTS_DIR MODEL_DIR BATCH STEPS BLAS_NOTE SECONDS [OTHERS_CPU_SECONDS]
"""
import importlib.util
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from cpu_load import load_line  # noqa: E402  (bench/common/cpu_load.py)

_spec = importlib.util.spec_from_file_location("embed_report", os.path.join(HERE, "..", "embed_cpu", "report.py"))
embed_report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(embed_report)  # its flops(): the forward FLOP count of DESIGN.md "Physical limits"

TARGET = 1.3  # stoke samples/s over torch's


def loss_of(run):
    """stoke's loss, where run.json reports one: final.loss is the mean over
    the steps since the last log read (all steps when --log-every > steps)."""
    for section in ("final", "metrics"):
        sec = run.get(section)
        if isinstance(sec, dict) and isinstance(sec.get("loss"), (int, float)):
            return f"{section}.loss", float(sec["loss"])
    for key in ("final_loss", "loss", "train_loss"):
        if isinstance(run.get(key), (int, float)):
            return key, float(run[key])
    return None, None


def main():
    res, model_dir, batch, steps, blas_note = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    total_s = int(sys.argv[6])
    others_s = float(sys.argv[7]) if len(sys.argv) > 7 else None
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(res, "ids.jsonl")) as f:
        lengths = [len(json.loads(line)["ids"]) for line in f if line.strip()]
    used = lengths[:steps * batch]  # run.sh keeps steps x batch within one pass of the file
    tokens = sum(used)
    gemm_f, attn_f = embed_report.flops(cfg, used)
    train_f = 3 * (gemm_f + attn_f)  # forward + backward (2x forward) of the encoder, real tokens only
    runs = [json.loads(line) for line in open(os.path.join(res, "runs.jsonl")) if line.strip()]
    precs = []
    for r in runs:
        if r["precision"] not in precs:
            precs.append(r["precision"])

    rows, checks = [], []
    torch_impl = blas = ""
    for prec in precs:
        s = next((r for r in runs if r["kind"] == "stoke" and r["precision"] == prec), None)
        t = next((r for r in runs if r["kind"] == "torch" and r["precision"] == prec), None)
        row = dict(prec=prec, stoke=None, torch=None)
        c = dict(prec=prec, notes=[])
        if s:
            with open(s["run"]) as f:
                run = json.load(f)
            tp = run.get("throughput", {})
            sec = tp.get("train_seconds")
            row.update(stoke=tp.get("samples_per_s"), stoke_tps=tp.get("tokens_per_s"), stoke_s=sec,
                       syncs=run.get("host_syncs"), wall=s["wall"], steps=run.get("steps"))
            row["loss_key"], row["stoke_loss"] = loss_of(run)
            row["stoke_dropout"] = run.get("settings", {}).get("dropout")
            for k in ("samples_per_s", "tokens_per_s", "train_seconds"):
                if not isinstance(tp.get(k), (int, float)):
                    c["notes"].append(f"run.json throughput.{k} MISSING")
            if run.get("steps") != steps:
                c["notes"].append(f"stoke steps {run.get('steps')} vs {steps} asked  MISMATCH")
            if isinstance(sec, (int, float)) and sec > 0:
                row["stoke_gflops"] = train_f / sec / 1e9
                # Counts from run.json where it has them, else rate x seconds.
                for what, want in (("samples", steps * batch), ("tokens", tokens)):
                    got = tp.get(what)
                    if not isinstance(got, (int, float)) and isinstance(tp.get(what + "_per_s"), (int, float)):
                        got = tp[what + "_per_s"] * sec
                    if got is not None:
                        ok = abs(got - want) <= 0.01 * want
                        c["notes"].append(f"{what} stoke {got:,.0f} vs {'ids ' if what == 'tokens' else ''}{want:,}"
                                          + ("" if ok else "  MISMATCH"))
        if t:
            torch_impl, blas = t["impl"], t.get("blas", "")
            row.update(torch=t["samples_per_s"], torch_tps=t["tokens_per_s"], torch_s=t["seconds"],
                       torch_loss=t["final_loss"], torch_interval=t["interval_loss"], reads=t["host_reads"],
                       pad=t["padded_tokens"] / t["tokens"], torch_gflops=train_f / t["seconds"] / 1e9,
                       torch_dropout=t.get("dropout"))
            if t["tokens"] != tokens:
                c["notes"].append(f"tokens torch {t['tokens']} vs ids {tokens}  MISMATCH")
        sd, td = row.get("stoke_dropout"), row.get("torch_dropout")
        if isinstance(sd, list) and isinstance(td, list):
            c["notes"].append(f"dropout stoke {sd} vs torch {td}" + ("" if sorted(sd) == sorted(td) else "  MISMATCH"))
        if row.get("stoke_loss") is not None and t:
            # The same steps on the same weights: without dropout the losses
            # agree to rounding (bf16 a little looser); with it, the masks
            # differ, so only roughly.
            d = abs(row["stoke_loss"] - t["interval_loss"])
            verdict = ("" if not td or any(td) else ("  ok" if d <= (0.01 if prec == "bf16" else 0.002) else "  DIFFERS"))
            c["notes"].append(f"loss stoke {row['stoke_loss']:.4f} vs torch {t['interval_loss']:.4f} (|diff| {d:.1e}"
                              + (", dropout on: masks differ)" if td and any(td) else ")") + verdict)
        rows.append(row)
        checks.append(c)

    f0 = lambda x: "-" if x is None else f"{x:,.0f}"
    f1 = lambda x: "-" if x is None else f"{x:,.1f}"
    ratio = lambda r: None if (r["stoke"] is None or r["torch"] is None) else r["stoke"] / r["torch"]
    print()
    print(f"CPU fine-tuning: a MiniLM-L6-size BERT classifier ({cfg['num_hidden_layers']} layers, hidden "
          f"{cfg['hidden_size']}, {len(cfg['id2label'])} labels), {steps} steps of batch {batch}, records in file "
          f"order, max length 128, {len(used)} records / {tokens:,} tokens, 2 threads each side")
    hdr = (f"{'prec':<5} | {'stoke':>7} {'torch':>7} | {'stoke/torch':>11} {'target':>7} | {'stoke':>7} {'torch':>7} | "
           f"{'stoke':>6} {'torch':>6} | {'stoke':>6} {'torch':>6}")
    print(f"{'':<6}| {'samples/s':^15} | {'ratio (measured)':^19} | {'tokens/s':^15} | {'host syncs':^13} | "
          f"{'GFLOP/s (derived)':^13}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        q = ratio(r)
        met = "-" if q is None else (f">={TARGET:.1f} ok" if q >= TARGET else f">={TARGET:.1f} NO")
        print(f"{r['prec']:<5} | {f1(r['stoke']):>7} {f1(r['torch']):>7} | {'-' if q is None else f'{q:.2f}':>11} "
              f"{met:>7} | {f0(r.get('stoke_tps')):>7} {f0(r.get('torch_tps')):>7} | {f0(r.get('syncs')):>6} "
              f"{f0(r.get('reads')):>6} | {f0(r.get('stoke_gflops')):>6} {f0(r.get('torch_gflops')):>6}")
    print()
    print("runs (seconds; losses: the mean over the steps since the last log read, ln(7) = %.3f is chance)" % math.log(7))
    for r in rows:
        parts = []
        if r["stoke"] is not None:
            loss = "-" if r.get("stoke_loss") is None else f"{r['stoke_loss']:.4f} ({r['loss_key']})"
            parts.append(f"stoke train_seconds {r['stoke_s']:.2f}, process wall {r['wall']:.2f}, loss {loss}")
        if r["torch"] is not None:
            parts.append(f"torch {r['torch_s']:.2f} s, loss {r['torch_interval']:.4f} (mean since the last log read; "
                         f"the last step's {r['torch_loss']:.4f}), "
                         f"padded/real tokens {r['pad']:.2f}")
        print(f"  {r['prec']:<5} " + "; ".join(parts))
    print()
    print("checks")
    for c in checks:
        print(f"  {c['prec']:<5} " + ("; ".join(c["notes"]) or "-"))
    print()
    print("measured: stoke = run.json throughput (samples/s, tokens/s over train_seconds: the training loop only,")
    print("  model load and final save excluded; its own data pipeline, tokenization included, runs inside it),")
    print("  host syncs = run.json host_syncs; torch = the same steps timed after 2 warm-up steps (weights and")
    print(f"  optimizer then reset), batches built and tokenized before the clock, {torch_impl}, plain BERT classifier,")
    print("  dropout as the checks say, AdamW, clip 1.0, linear LR to 0, bf16 = autocast with f32 master weights, padded to each")
    print(f"  batch's longest; its host syncs = .item() reads (every 50 steps, and 2 at the end). BLAS: {blas}; {blas_note}")
    print("derived: GFLOP/s = 3 x forward FLOPs (2 x layer matrix parameters per token + 4*S*H*L per token, S = each")
    print("  text's own length, no padding; embeddings, pooler, head and optimizer left out) / seconds above;")
    print("  torch's padding is extra work it does, not counted.")
    print(f"target: stoke/torch >= {TARGET:.1f} in samples/s.")
    print(load_line(total_s, others_s))


if __name__ == "__main__":
    main()
