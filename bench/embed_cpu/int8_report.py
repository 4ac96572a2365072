"""The table of bench/embed_cpu/int8_run.sh.

    python3 int8_report.py RESULTS_DIR MODELS_DIR

Per model and engine: forward tokens/s (stoke: tokens / the manifest's
run.stages.device.busy, the device thread's busy time — the same forward-only
measure as ORT's timed session runs over pre-tokenized ids; best of the
runs), end-to-end tokens/s (the whole process timed from outside: `stoke embed`
and ort_e2e.py; best of the runs, and the ratio of the medians), centered cosine to stoke f32 (mean over
texts, after removing stoke f32's mean vector) and the worst raw cosine;
stoke's GEMM share of the device time and its GEMM GOP/s (from a traced run:
the linear / linear_int8 spans), against the oneDNN matmul peak of the same
run (int8: u8 x s8 -> s32, VNNI).
"""
import json
import os
import sys

import numpy as np

SIZES = {"bert-base": (12, 768, 3072), "minilm-l6": (6, 384, 1536)}


def load_runs(res):
    with open(os.path.join(res, "runs.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def stoke_embeddings(res, model, prec):
    d = os.path.join(res, f"stoke-{model}-{prec}")
    shards = sorted(p for p in os.listdir(d) if p.startswith("embeddings-") and p.endswith(".npy"))
    return np.concatenate([np.load(os.path.join(d, p)) for p in shards]).astype(np.float64)


def agreement(ref, got):
    mean = ref.mean(0)
    a, b = ref - mean, got - mean
    centered = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-30)
    raw = (ref * got).sum(1) / np.maximum(np.linalg.norm(ref, axis=1) * np.linalg.norm(got, axis=1), 1e-30)
    return centered.mean(), centered.min(), raw.min()


def gemm_share(trace_path):
    with open(trace_path) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "device"]
    total = sum(e["dur"] for e in ev)
    gemm = sum(e["dur"] for e in ev if e["name"] in ("linear", "linear_int8"))
    return gemm / max(total, 1), gemm / 1e6


def main():
    res, work = sys.argv[1], sys.argv[2]
    runs = load_runs(res)
    peaks = [json.load(open(os.path.join(res, f"peak-{w}.json"))) for w in ("start", "end")]
    peak = {k: max(p["peak_gflops"].get(k, 0) for p in peaks) for k in ("f32", "bf16", "int8")}
    rows = []
    for model in SIZES:
        mine = [r for r in runs if r["model"] == model]
        if not mine:
            continue
        L, H, I = SIZES[model]
        ref = stoke_embeddings(res, model, "f32")
        for kind, prec in (("stoke", "f32"), ("stoke", "bf16"), ("stoke", "int8"), ("ort", "f32"), ("ort", "int8")):
            rr = [r for r in mine if r["kind"] == kind and r["precision"] == prec]
            if not rr:
                continue
            if kind == "stoke":
                man = [r["manifest"] for r in rr]
                tokens = man[0]["counts"]["tokens"]
                fwd = max(tokens / m["run"]["stages"]["device"]["busy"] for m in man)
                e2e = max(tokens / r["wall"] for r in rr)
                emb = stoke_embeddings(res, model, prec)
                trace = os.path.join(res, f"trace-{model}-{prec}.json")
                share, gops = None, None
                if os.path.exists(trace):  # traced: f32 and int8
                    share, gemm_s = gemm_share(trace)
                    gops = 2 * L * (4 * H * H + 2 * H * I) * tokens / gemm_s / 1e9
            else:
                tokens = rr[0]["tokens"]
                fwd = max(r["tokens_per_s"] for r in rr)
                walls = [r["wall"] for r in mine if r["kind"] == "ort_e2e" and r["precision"] == prec]
                e2e = tokens / min(walls) if walls else None
                share, gops = None, None
                emb = np.load(os.path.join(res, f"ort-{model}-{prec}.npy")).astype(np.float64)
            cmean, cmin, rmin = agreement(ref, emb)
            rows.append(dict(model=model, engine=f"{kind} {prec}", fwd=fwd, e2e=e2e, cmean=cmean, cmin=cmin,
                             rmin=rmin, share=share, gops=gops,
                             peak=peak["int8" if prec == "int8" else "bf16" if prec == "bf16" else "f32"]))
    print(f"{'model':<10} {'engine':<10} {'fwd tok/s':>10} {'e2e tok/s':>10} {'centered cos':>12} {'worst':>7} "
          f"{'raw worst':>9} {'GEMM share':>10} {'GEMM GOP/s':>10} {'of peak':>7}")
    for r in rows:
        f = lambda v, fmt: (fmt % v) if v is not None else "-"
        print(f"{r['model']:<10} {r['engine']:<10} {r['fwd']:>10.0f} {f(r['e2e'], '%10.0f'):>10} {r['cmean']:>12.5f} "
              f"{r['cmin']:>7.4f} {r['rmin']:>9.5f} {f(r['share'], '%10.2f'):>10} {f(r['gops'], '%10.0f'):>10} "
              f"{f(r['gops'] / r['peak'] if r['gops'] else None, '%7.2f'):>7}")
    for model in SIZES:
        get = {r["engine"]: r for r in rows if r["model"] == model}
        if "stoke int8" in get and "ort int8" in get:
            print(f"{model}: forward only (device busy vs session runs): stoke int8 / ORT int8 = "
                  f"{get['stoke int8']['fwd'] / get['ort int8']['fwd']:.2f}x "
                  f"(centered cosine {get['stoke int8']['cmean']:.5f} vs {get['ort int8']['cmean']:.5f}); "
                  f"stoke f32 / ORT f32 = {get['stoke f32']['fwd'] / get['ort f32']['fwd']:.2f}x")
        for prec in ("int8", "f32"):
            sw = [r["wall"] for r in runs if r["model"] == model and r["kind"] == "stoke" and r["precision"] == prec]
            ow = [r["wall"] for r in runs if r["model"] == model and r["kind"] == "ort_e2e" and r["precision"] == prec]
            if sw and ow:
                print(f"{model}: whole process, as the user waits: stoke {prec} "
                      f"{' / '.join('%.2f' % w for w in sw)} s, ORT {prec} {' / '.join('%.2f' % w for w in ow)} s; "
                      f"stoke / ORT speed {float(np.median(ow)) / float(np.median(sw)):.2f}x (medians), "
                      f"{min(ow) / min(sw):.2f}x (bests)")
    for model in SIZES:
        path = os.path.join(res, f"op-{model}.json")
        if os.path.exists(path):
            op = json.load(open(path))
            lay = op["layer"]
            print(f"{model} int8 op at M = {op['m']} (bench_linear_int8): the layer's four linear_int8 "
                  f"{lay['op_gops']:.0f} GOP/s ({lay['op_gops'] / peak['int8']:.2f} of peak), their GEMMs alone "
                  f"{lay['gemm_gops']:.0f} ({lay['gemm_gops'] / peak['int8']:.2f})")
    print(f"oneDNN matmul peak (median call, best of start/end): f32 {peak['f32']:.0f} GFLOP/s, "
          f"int8 {peak['int8']:.0f} GOP/s")
    for w in ("before", "after"):
        with open(os.path.join(res, f"loadavg-{w}")) as f:
            print(f"load average {w}: {f.read().strip()}")


if __name__ == "__main__":
    main()
