"""The GPU check's table: what was measured, what is derived, against targets.

    python3 report.py WORK_DIR OUT_DIR

Reads the per-step JSON files scripts/gpu-check.sh left in WORK_DIR (any may
be missing: a failed step shows as failed, the rest of the table still
prints), prints the table, and writes OUT_DIR/summary.md (the same table) and
OUT_DIR/summary.json (every number, raw and derived). Standard library only:
the table must print even where torch or numpy are broken.

Derived numbers:
  FLOPs/token = 2 * non-embedding parameters + 4 * S * H * L (DESIGN.md,
                "Physical limits"), S = mean tokens per text of this input
  MFU         = tokens/s * FLOPs/token / the bf16 matmul rate measured in the same run
  ratio       = stoke texts/s / sentence-transformers texts/s (same texts, same model)
"""
import json
import os
import sys

TARGET_RATIO = 3.0  # stoke vs sentence-transformers, texts/s
TARGET_MFU = 0.50
TARGET_UTIL = 95.0  # mean nvidia-smi utilization.gpu over stoke's process


def load(work, name):
    p = os.path.join(work, name)
    if not os.path.exists(p):
        return None
    try:
        with open(p) as f:
            return json.load(f)
    except ValueError:
        return None


def steps(work):
    """steps.tsv: key, status, seconds, note (one line per step, in order)."""
    out = []
    p = os.path.join(work, "steps.tsv")
    if os.path.exists(p):
        with open(p) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 3:
                    out.append({"step": parts[0], "status": parts[1], "seconds": float(parts[2]),
                                "note": parts[3] if len(parts) > 3 else ""})
    return out


def fmt_int(x):
    return f"{x:,.0f}"


def verdict(value, target, higher=True):
    if value is None:
        return "n/a"
    return "met" if (value >= target if higher else value <= target) else "MISSED"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    work, out = sys.argv[1], sys.argv[2]
    env = load(work, "env.json") or {}
    st_list = steps(work)
    status = {s["step"]: s["status"] + (f": {s['note']}" if s["note"] else "") for s in st_list}

    def why(step):  # what to print when a step left no result: its status and last line
        return status.get(step, "not run")

    ops, enc, san = load(work, "tests-ops.json"), load(work, "tests-encoder.json"), load(work, "tests-sanitizer.json")
    table = load(work, "tests-table.json")
    mm, model, st = load(work, "matmul.json"), load(work, "model.json"), load(work, "st.json")
    sk, util, cmp_ = load(work, "stoke.json"), load(work, "util.json"), load(work, "compare.json")
    precision = env.get("precision", "bf16")
    device = env.get("device", "cuda")

    # ---- derived ------------------------------------------------------------
    d = {}
    if model and st and st.get("texts"):
        S = st["tokens"] / st["texts"]
        H, L = model["hidden"], model["layers"]
        d["mean_len"] = S
        d["flops_per_token"] = 2 * model["non_embedding_params"] + 4 * S * H * L
    rate = mm["tflops"] * 1e12 if mm else None
    if sk and not sk.get("tokens_per_s") and sk.get("wall_seconds") and st and sk.get("rc") == 0:
        sk["tokens_per_s"] = st["tokens"] / sk["wall_seconds"]  # no manifest count: ST's count, same texts
    if rate and "flops_per_token" in d:
        if sk and sk.get("tokens_per_s"):
            d["mfu_stoke"] = sk["tokens_per_s"] * d["flops_per_token"] / rate
            if sk.get("run_tokens_per_s"):
                d["mfu_stoke_own_timer"] = sk["run_tokens_per_s"] * d["flops_per_token"] / rate
        if st and st.get("tokens_per_s"):
            d["mfu_st"] = st["tokens_per_s"] * d["flops_per_token"] / rate
    if sk and st and sk.get("texts_per_s") and st.get("texts_per_s"):
        d["ratio"] = sk["texts_per_s"] / st["texts_per_s"]
    if sk and st and sk.get("tokens") is not None:
        d["tokens_agree"] = sk["tokens"] == st["tokens"]

    # ---- table ----------------------------------------------------------------
    def tests_cell(t, step, what):
        if not t:
            return why(step)
        s = f"{t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped"
        if t["failed_tests"]:
            s += " (" + ", ".join(t["failed_tests"][:3]) + ("…" if len(t["failed_tests"]) > 3 else "") + ")"
        if t["skipped"] and t.get("skip_reason"):
            r = t["skip_reason"]
            s += f"; skipped: {r[:60]}" + ("…" if len(r) > 60 else "")
        if t.get("source") == "none" or (t["rc"] != 0 and not t["failed"]):
            s += f" [{what} exited {t['rc']}: {why(step)}]"
        return s

    def tests_ok(t):
        return None if not t else (t["failed"] == 0 and t["rc"] == 0 and t["passed"] > 0)

    rows = []
    rows.append(("CUDA op tests (test_cuda_ops)", tests_cell(ops, "tests_ops", "test_cuda_ops"),
                 "all pass: " + {True: "met", False: "MISSED", None: "n/a"}[tests_ok(ops)]))
    rows.append(("op table, every op vs the reference (test_op_table)", tests_cell(table, "tests_table", "test_op_table"),
                 "all pass: " + {True: "met", False: "MISSED", None: "n/a"}[tests_ok(table)]))
    rows.append(("goldens through CUDA (test_cuda_encoder)", tests_cell(enc, "tests_encoder", "test_cuda_encoder"),
                 "all pass: " + {True: "met", False: "MISSED", None: "n/a"}[tests_ok(enc)]))
    if "sanitizer" in status:
        cell = why("sanitizer") if not san else f"{san.get('errors', '?')} errors (rc {san.get('rc')})"
        rows.append(("compute-sanitizer memcheck, op tests", cell,
                     "0 errors: " + ("met" if san and san.get("errors") == 0 else "MISSED")))
    rows.append((f"bf16 matmul {mm['n']}³ (torch, mean of {mm['iters']})" if mm else "bf16 matmul (torch)",
                 f"{mm['tflops']:.1f} TFLOP/s" if mm else why("matmul"), "the MFU denominator"))
    if st:
        rows.append((f"sentence-transformers {st['precision']}, batch {st['batch_size']}",
                     f"{fmt_int(st['texts_per_s'])} texts/s, {fmt_int(st['tokens_per_s'])} tokens/s "
                     f"({st['seconds']:.1f} s)", ""))
    else:
        rows.append(("sentence-transformers", why("st"), ""))
    if sk and sk.get("texts_per_s"):
        extra = f"; stoke's timer {sk['run_seconds']:.1f} s" if sk.get("run_seconds") else ""
        rows.append((f"stoke embed --device {device} {precision}",
                     f"{fmt_int(sk['texts_per_s'])} texts/s, {fmt_int(sk['tokens_per_s'])} tokens/s "
                     f"(wall {sk['wall_seconds']:.1f} s{extra})", ""))
    else:
        rows.append((f"stoke embed --device {device} {precision}", why("stoke"), ""))
    r = d.get("ratio")
    rows.append(("stoke / sentence-transformers (texts/s)", f"{r:.2f}×" if r else "n/a",
                 f"≥ {TARGET_RATIO:.0f}×: {verdict(r, TARGET_RATIO)}"))
    m = d.get("mfu_stoke")
    cell = f"{100 * m:.1f}%" if m is not None else "n/a"
    if d.get("mfu_stoke_own_timer") is not None:
        cell += f" ({100 * d['mfu_stoke_own_timer']:.1f}% by stoke's timer)"
    if d.get("mfu_st") is not None:
        cell += f"; ST {100 * d['mfu_st']:.1f}%"
    rows.append(("MFU, stoke end to end", cell, f"≥ {100 * TARGET_MFU:.0f}%: {verdict(m, TARGET_MFU)}"))
    u = util.get("util_mean_whole") if util else None
    if u is not None:
        cell = f"{u:.1f}% over the process, {util['util_mean_busy']:.1f}% over the busy span ({util['samples']} samples)"
    else:
        cell = "no nvidia-smi samples" if util is not None else why("stoke")
    rows.append(("GPU utilization during stoke", cell, f"≥ {TARGET_UTIL:.0f}%: {verdict(u, TARGET_UTIL)}"))
    if cmp_:
        th = cmp_["thresholds"]
        rows.append((f"cosine stoke vs ST, {cmp_['rows']} records",
                     f"mean {cmp_['mean_cos']:.6f}, min {cmp_['min_cos']:.6f}, norm err ≤ {cmp_['max_norm_err']:.1e}",
                     f"mean ≥ {th['min_mean_cos']}, min ≥ {th['min_cos']}: {'PASS' if cmp_['pass'] else 'FAIL'}"))
    else:
        rows.append(("cosine stoke vs ST", why("compare"), "n/a"))

    prof = load(work, "profile.json")
    if prof and prof.get("ops"):
        top = ", ".join(f"{o['name']} {100 * o['share']:.0f}%" for o in prof["ops"][:6])
        rows.append(("device time by op (traced run)", f"{top}; busy {100 * prof['busy_share']:.0f}% of the traced span",
                     "where to look first"))
    else:
        rows.append(("device time by op (traced run)", why("profile"), ""))

    head = (f"stoke GPU check: {env.get('card', 'no GPU seen')}, {env.get('date', '?')}, "
            f"driver {env.get('driver', '?')} (CUDA {env.get('driver_cuda', '?')}), prepared from {env.get('prepared_rev', '?')}")
    w0 = max(len(a) for a, _, _ in rows)
    w1 = max(len(b) for _, b, _ in rows)
    lines = [head, "", f"| {'check'.ljust(w0)} | {'result'.ljust(w1)} | target |",
             f"|{'-' * (w0 + 2)}|{'-' * (w1 + 2)}|--------|"]
    lines += [f"| {a.ljust(w0)} | {b.ljust(w1)} | {c} |" for a, b, c in rows]
    lines.append("")
    lines.append("steps: " + ", ".join(f"{s['step']} {s['status']} {s['seconds']:.0f}s" for s in st_list)
                 + f"; total {sum(s['seconds'] for s in st_list):.0f}s")
    if st and model:
        lines.append(f"input: {fmt_int(st['texts'])} texts, {fmt_int(st['tokens'])} tokens (mean {d['mean_len']:.1f}, "
                     f"token-weighted {st['token_weighted_len']:.1f}), max length {st['max_seq_length']} "
                     f"({st['at_max_len']} texts at it); model: random BERT, {model['layers']} layers, "
                     f"H {model['hidden']}, {model['heads']} heads, FFN {model['intermediate']}"
                     + ("" if d.get("tokens_agree", True) else f"; TOKEN COUNTS DIFFER: stoke {sk['tokens']}, ST {st['tokens']}"))
    if "flops_per_token" in d:
        lines.append(f"FLOPs/token = 2 × {model['non_embedding_params'] / 1e6:.2f}M non-embedding params + 4·S·H·L "
                     f"(S = {d['mean_len']:.1f} mean tokens/text, H = {model['hidden']}, L = {model['layers']}) "
                     f"= {d['flops_per_token'] / 1e6:.1f} MFLOP; MFU = tokens/s × FLOPs/token ÷ measured matmul rate.")
    lines.append("stoke's rate: the whole process by wall clock (load, read, tokenize, compute, write); "
                 "ST's: its encode() call (load, token count and warm-up outside). "
                 "Utilization: nvidia-smi utilization.gpu every 100 ms.")
    text = "\n".join(lines)
    print(text)

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    summary = {"env": env, "steps": st_list, "tests_ops": ops, "tests_encoder": enc, "tests_table": table, "sanitizer": san,
               "matmul": mm, "model": model, "st": st, "stoke": sk, "util": util, "compare": cmp_, "profile": prof,
               "derived": d, "targets": {"ratio": TARGET_RATIO, "mfu": TARGET_MFU, "util": TARGET_UTIL}}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
