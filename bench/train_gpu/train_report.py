#!/usr/bin/env python3
"""The seed's training case, summed up: (a) the seed's first PyTorch loop,
(b) its fixed loop, (c) `stoke train` on the same data and batch as (b).
Reads what the gpu-check steps wrote in WORK (train-first.json,
train-fixed.json from seed_train.py; train-stoke/run.json and log.jsonl;
train-stoke-smi.csv; matmul.json for the MFU denominator, which seed_train.py
measured first) and writes OUT (one JSON: per run samples/s, tokens/s, MFU,
GPU utilization, host syncs per step, final loss; for stoke also its host
syncs by reason and the ones left inside the steps, which must be 0; stoke /
(b) in samples/s; the loss-curve check). gpu-check.sh writes it as
WORK/train.json; report.py puts it into $OUT/summary.json ("train") and its
numbers into summary.md.

Loss curves: stoke logs the mean loss over each --log-every interval; (b)'s
per-step losses are averaged over the same steps. Dropout masks differ
between the two (different generators), so step losses differ; the interval
means must agree within --tolerance (relative, default 0.15) after the first
interval (where a random head's loss is the same ~log(labels) for both).

    python3 train_report.py WORK OUT [--tolerance 0.15]
"""
import argparse
import json
import os
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def smi_util(path):
    """Mean utilization over the samples where the GPU was busy at all."""
    try:
        vals = []
        for line in open(path):
            parts = [p.strip() for p in line.split(",")]
            if parts and parts[0].replace(".", "").isdigit():
                vals.append(float(parts[0]))
    except OSError:
        return None
    busy = [v for v in vals if v > 0]
    return sum(busy) / len(busy) if busy else None


def curve_check(stoke_log, fixed_losses, tolerance):
    if not stoke_log or not fixed_losses:
        return {"ok": None, "why": "no curve from one of the runs"}
    rows, prev, worst = [], 0, 0.0
    for line in stoke_log:
        if "loss" not in line:
            continue
        s = int(line["step"])
        window = fixed_losses[prev:s]
        if s > len(fixed_losses) or not window:
            break
        want = sum(window) / len(window)
        rel = abs(line["loss"] - want) / max(abs(want), 1e-6)
        rows.append({"steps": [prev + 1, s], "stoke": line["loss"], "torch_fixed": want, "rel": rel})
        if prev > 0:
            worst = max(worst, rel)
        prev = s
    if len(rows) < 2:
        return {"ok": None, "why": "fewer than two logged intervals to compare", "intervals": rows}
    return {"ok": worst <= tolerance, "worst_rel": worst, "tolerance": tolerance, "intervals": rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("out")
    ap.add_argument("--tolerance", type=float, default=0.15)
    a = ap.parse_args()
    w = a.work
    info = load(os.path.join(w, "train", "classifier.json")) or {}
    peak = (load(os.path.join(w, "matmul.json")) or {}).get("tflops")
    params = info.get("params")
    res = {"case": info, "peak_tflops": peak, "runs": {}}
    for key in ("first", "fixed"):
        r = load(os.path.join(w, f"train-{key}.json"))
        if not r:
            continue
        mfu = None
        if peak and r.get("seconds"):
            mfu = r["flops_per_step_mean"] * r["steps"] / r["seconds"] / (peak * 1e12)
        res["runs"][key] = {k: r.get(k) for k in ("samples_per_s", "tokens_per_s", "host_syncs_per_step",
                                                    "final_loss", "batch_size", "lr", "precision", "steps")}
        res["runs"][key]["mfu"] = mfu
    run = load(os.path.join(w, "train-stoke", "run.json"))
    log = []
    try:
        log = [json.loads(l) for l in open(os.path.join(w, "train-stoke", "log.jsonl")) if l.strip()]
    except (OSError, ValueError):
        pass
    if run:
        tp = run.get("throughput", {})
        steps = run.get("steps") or 0
        reads = run.get("host_sync_reads")  # {log, eval, save, final_model, out_of_memory}: each a counted wait
        syncs = run.get("host_syncs")
        st = {"samples_per_s": tp.get("samples_per_s"), "tokens_per_s": tp.get("tokens_per_s"),
              "host_syncs": syncs, "steps": steps,
              "host_syncs_per_step": (syncs or 0) / steps if steps else None,
              "host_sync_reads": reads,
              "host_syncs_in_steps": syncs - sum(reads.values()) if isinstance(reads, dict) and syncs is not None else None,
              "precision": (run.get("settings") or {}).get("precision"),
              "device_busy_share": (tp["device_busy_seconds"] / tp["train_seconds"]
                                    if tp.get("device_busy_seconds") and tp.get("train_seconds") else None),
              "final_loss": (run.get("final") or {}).get("loss"), "memory": run.get("memory"),
              "graphs": run.get("graphs"),
              "util_busy_mean": smi_util(os.path.join(w, "train-stoke-smi.csv"))}
        fixed = load(os.path.join(w, "train-fixed.json"))
        if peak and params and tp.get("train_seconds") and fixed:
            # the same batches' padded-token FLOPs as (b): stoke packs (no padding), so this is the
            # useful work it did at (b)'s rate of counting
            st["mfu_as_torch_counts"] = fixed["flops_per_step_mean"] * steps / tp["train_seconds"] / (peak * 1e12)
        res["runs"]["stoke"] = st
    f, s = res["runs"].get("fixed"), res["runs"].get("stoke")
    if f and s and f.get("samples_per_s") and s.get("samples_per_s"):
        res["stoke_over_fixed"] = s["samples_per_s"] / f["samples_per_s"]
    fixed = load(os.path.join(w, "train-fixed.json"))
    res["loss_curve"] = curve_check(log, (fixed or {}).get("losses"), a.tolerance)
    with open(a.out, "w") as fh:
        json.dump(res, fh, indent=1)
    for k, r in res["runs"].items():
        print(f"train {k}: " + ", ".join(f"{n} {v:.4g}" if isinstance(v, float) else f"{n} {v}"
                                          for n, v in r.items() if n not in ("memory", "graphs")))
    g = (res["runs"].get("stoke") or {}).get("graphs")
    if g:
        print(f"train stoke graphs: used {g.get('used')}, buckets {g.get('buckets_captured')}, replayed "
              f"{g.get('micro_batches_replayed')}, eager {g.get('micro_batches_eager')}, padding "
              f"{g.get('padding_fraction')}, capture failed {g.get('capture_failed')}, graphed {g.get('graphed')}, "
              f"optimizer steps replayed {g.get('optimizer_steps_replayed')}")
    print(f"train: stoke / fixed loop = {res.get('stoke_over_fixed')}; loss curve ok = {res['loss_curve'].get('ok')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
