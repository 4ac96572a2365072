"""The GPU check's table: what was measured, what is derived, against targets,
and every step of the plan with its status.

    python3 report.py WORK_DIR [--md SUMMARY.md] [--json SUMMARY.json] [--print]

scripts/gpu-check.sh runs this as each step starts and as it ends, so
summary.md in $OUT always holds the latest table: a call cut at any point
still returns one, with every planned step marked ok / failed / timeout /
skipped / partial / missing / running / not reached. So it must be cheap
(standard library only, no torch, no numpy: ~50 ms) and must never fail on
what a cut step left behind: any file may be missing or half-written.

Reads from WORK_DIR: plan.tsv (step, cap, estimate, what: the script's plan),
steps.tsv (step, status, seconds, note; the last line of a step wins), and
the steps' JSON files (env, tests-*, matmul, model, texts-stats, st, stoke,
util, compare, profile, train; stoke-out/manifest.json). Writes SUMMARY.md
(the tables) and SUMMARY.json (every number, raw and derived), each through a
temporary name and a rename, so a reader never sees half a file. --print
prints the table too (the script's last one, so it ends the call's output).

Derived numbers:
  FLOPs/token = 2 * non-embedding parameters + 4 * S * H * L (DESIGN.md,
                "Physical limits"), S = mean tokens per text of this input
  MFU         = tokens/s * FLOPs/token / the bf16 matmul rate measured in the same call
  ratio       = stoke texts/s / sentence-transformers texts/s (same texts, same model)
"""
import argparse
import json
import os
import time

TARGET_RATIO = 3.0  # stoke vs sentence-transformers, texts/s
TARGET_MFU = 0.50
TARGET_UTIL = 95.0  # mean nvidia-smi utilization.gpu over stoke's process
TARGET_TRAIN_RATIO = 3.0  # stoke train vs the seed's fixed loop, samples/s
TARGET_TRAIN_UTIL = 97.0


def load(work, name):
    p = os.path.join(work, name)
    try:
        with open(p) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def tsv(path, min_fields):
    rows = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= min_fields and parts[0]:
                    rows.append(parts)
    except OSError:
        pass
    return rows


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def steps(work):
    """Every planned step with its latest status (not reached: no line yet),
    in plan order; steps.tsv's steps outside the plan after them."""
    plan = tsv(os.path.join(work, "plan.tsv"), 2)
    events = tsv(os.path.join(work, "steps.tsv"), 3)
    last = {}
    for e in events:
        last[e[0]] = e
    out, seen = [], set()
    for p in plan:
        k = p[0]
        seen.add(k)
        e = last.get(k)
        out.append({"step": k, "status": e[1] if e else "not reached", "seconds": num(e[2]) if e else None,
                    "note": (e[3] if e and len(e) > 3 else ""), "cap": num(p[1]),
                    "est": num(p[2]) if len(p) > 2 else None, "what": p[3] if len(p) > 3 else ""})
    for e in events:
        if e[0] not in seen:
            seen.add(e[0])
            e = last[e[0]]
            out.append({"step": e[0], "status": e[1], "seconds": num(e[2]), "note": e[3] if len(e) > 3 else "",
                        "cap": None, "est": None, "what": ""})
    return out


def fmt_int(x):
    return f"{x:,.0f}"


def pct(x):
    return f"{100 * x:.1f}%"


def verdict(value, target, higher=True):
    if value is None:
        return "n/a"
    return "met" if (value >= target if higher else value <= target) else "MISSED"


def derive(model, st, sk, mm):
    d = {}
    if model and st and st.get("texts"):
        S = st["tokens"] / st["texts"]
        H, L = model["hidden"], model["layers"]
        d["mean_len"] = S
        d["flops_per_token"] = 2 * model["non_embedding_params"] + 4 * S * H * L
    rate = mm["tflops"] * 1e12 if mm and mm.get("tflops") else None
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
    if sk and st and sk.get("tokens") is not None and st.get("tokens") is not None:
        d["tokens_agree"] = sk["tokens"] == st["tokens"]
    return d


def table(rows):
    w0 = max(len(a) for a, _, _ in rows)
    w1 = max(len(b) for _, b, _ in rows)
    lines = [f"| {'check'.ljust(w0)} | {'result'.ljust(w1)} | target |", f"|{'-' * (w0 + 2)}|{'-' * (w1 + 2)}|--------|"]
    return lines + [f"| {a.ljust(w0)} | {b.ljust(w1)} | {c} |" for a, b, c in rows]


def build(work):
    env = load(work, "env.json") or {}
    st_list = steps(work)
    status = {s["step"]: s["status"] + (f": {s['note']}" if s["note"] else "") for s in st_list}

    def why(step):  # what to print when a step left no result: its status and note
        return status.get(step, "not run")

    ops, enc, table_t = load(work, "tests-ops.json"), load(work, "tests-encoder.json"), load(work, "tests-table.json")
    san = load(work, "tests-sanitizer.json")
    mm, model, st = load(work, "matmul.json"), load(work, "model.json"), load(work, "st.json")
    sk, util, cmp_ = load(work, "stoke.json"), load(work, "util.json"), load(work, "compare.json")
    prof, train = load(work, "profile.json"), load(work, "train.json")
    manifest = load(work, os.path.join("stoke-out", "manifest.json"))
    if manifest and isinstance(manifest.get("shards"), list):  # the shard list can be long; its count will do
        manifest = dict(manifest, shards=len(manifest["shards"]))
    precision, device = env.get("precision", "bf16"), env.get("device", "cuda")
    st_raw = st
    st = st if st and st.get("tokens_per_s") else None  # a sweep alone (the full run cut) gives no ratio
    d = derive(model, st, sk, mm)

    # ---- correctness -----------------------------------------------------------
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
        return {True: "met", False: "MISSED", None: "n/a"}[None if not t else (t["failed"] == 0 and t["rc"] == 0 and t["passed"] > 0)]

    rows = [
        ("op table on CUDA, every op vs the reference (test_op_table)",
         tests_cell(table_t, "tests_table", "test_op_table"), "all pass: " + tests_ok(table_t)),
    ]
    if san and san.get("skipped"):
        rows.append(("compute-sanitizer", f"skipped: {san['skipped']}", "n/a"))
    elif san and san.get("tools"):
        for tool in ("memcheck", "racecheck"):
            t = san["tools"].get(tool)
            if t:
                ok = t["errors"] == 0 and not t["tests_failed"] and not t["cut"]
                rows.append((f"compute-sanitizer {tool} (test_op_table cases)", t["summary"],
                             "0 errors: " + ("met" if ok else "n/a (cut)" if t["cut"] and not t["errors_seen"] else "MISSED")))
    else:
        rows.append(("compute-sanitizer", why("sanitizer"), "0 errors: n/a"))
    rows.append(("CUDA op tests (test_cuda_ops)", tests_cell(ops, "tests_ops", "test_cuda_ops"), "all pass: " + tests_ok(ops)))
    rows.append(("goldens through CUDA (test_cuda_encoder)", tests_cell(enc, "tests_encoder", "test_cuda_encoder"),
                 "all pass: " + tests_ok(enc)))
    rows.append((f"bf16 matmul {mm['n']}³ (torch, mean of {mm['iters']})" if mm else "bf16 matmul (torch)",
                 f"{mm['tflops']:.1f} TFLOP/s (best {mm.get('tflops_best', mm['tflops']):.1f})" if mm else why("train_torch"),
                 "the MFU denominator"))

    # ---- training ----------------------------------------------------------------
    runs = (train or {}).get("runs", {})
    names = {"first": "seed's first loop (fp32, batch 16, 2 .item()/step)",
             "fixed": "seed's fixed loop (bf16 autocast, batch 64)",
             "stoke": f"stoke train --device {device} "
                      f"{(runs.get('stoke') or {}).get('precision') or ('bf16' if device != 'cpu' else 'f32')}, batch 64"}
    for key in ("first", "fixed", "stoke"):
        r = runs.get(key)
        if not r or not r.get("samples_per_s"):
            rows.append((f"train: {names[key]}", why("train_stoke" if key == "stoke" else "train_torch"), ""))
            continue
        mfu = r.get("mfu") if key != "stoke" else r.get("mfu_as_torch_counts")
        hs = r.get("host_syncs_per_step")
        cell = (f"{fmt_int(r['samples_per_s'])} samples/s, MFU {pct(mfu) if mfu is not None else 'n/a'}, "
                f"{hs:.2f} host syncs/step, final loss {r['final_loss']:.4f}" if hs is not None and r.get("final_loss") is not None
                else f"{fmt_int(r['samples_per_s'])} samples/s")
        target = ""
        if key == "stoke":
            inside = r.get("host_syncs_in_steps")
            reads = r.get("host_sync_reads") or {}
            cell += (f" ({', '.join(f'{k} {v}' for k, v in reads.items() if v)}; {inside} inside the steps)"
                     if inside is not None else "")
            if r.get("util_busy_mean") is not None:
                cell += f", nvidia-smi busy {r['util_busy_mean']:.1f}%"
            if r.get("device_busy_share") is not None:
                cell += f", device busy {pct(r['device_busy_share'])} by stoke's timer"
            target = (f"0 syncs inside the steps: {verdict(inside, 0, higher=False)}; "
                      f"≥ {TARGET_TRAIN_UTIL:.0f}% busy: {verdict(r.get('util_busy_mean'), TARGET_TRAIN_UTIL)}")
        rows.append((f"train: {names[key]}", cell, target))
    if train:
        ratio = train.get("stoke_over_fixed")
        rows.append(("train: stoke / fixed loop (samples/s)", f"{ratio:.2f}×" if ratio else "n/a",
                     f"≥ {TARGET_TRAIN_RATIO:.0f}×: {verdict(ratio, TARGET_TRAIN_RATIO)}"))
        lc = train.get("loss_curve") or {}
        cell = (f"{len(lc.get('intervals', []))} intervals, worst relative difference {lc['worst_rel']:.3f}"
                if lc.get("worst_rel") is not None else lc.get("why", "n/a"))
        rows.append(("train: loss curve stoke vs fixed loop", cell,
                     f"≤ {lc.get('tolerance', 0.15)}: " + {True: "met", False: "MISSED", None: "n/a"}[lc.get("ok")]))
    else:
        rows.append(("train: stoke / fixed loop", why("train_report"), ""))

    # ---- embedding ------------------------------------------------------------------
    sweep = (st_raw or {}).get("sweep") or []
    sweep_txt = (f" (best of {', '.join(str(x['batch_size']) for x in sweep)} on {fmt_int(sweep[0]['texts'])} texts)"
                 if sweep else "")
    if st_raw and st_raw.get("texts_per_s"):
        rows.append((f"sentence-transformers {st_raw['precision']}, batch {st_raw['batch_size']}{sweep_txt}",
                     f"{fmt_int(st_raw['texts_per_s'])} texts/s, {fmt_int(st_raw['tokens_per_s'])} tokens/s "
                     f"({st_raw['seconds']:.1f} s)", ""))
    elif sweep:
        best = max(sweep, key=lambda x: x["texts_per_s"])
        rows.append((f"sentence-transformers, sweep only{sweep_txt}",
                     f"best {fmt_int(best['texts_per_s'])} texts/s at batch {best['batch_size']}; full run: {why('st')}", ""))
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
    cell = pct(m) if m is not None else "n/a"
    if d.get("mfu_stoke_own_timer") is not None:
        cell += f" ({pct(d['mfu_stoke_own_timer'])} by stoke's timer)"
    if d.get("mfu_st") is not None:
        cell += f"; ST {pct(d['mfu_st'])}"
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
    if prof and prof.get("ops"):
        top = ", ".join(f"{o['name']} {100 * o['share']:.0f}%" for o in prof["ops"][:6])
        rows.append(("device time by op (traced run)", f"{top}; busy {100 * prof['busy_share']:.0f}% of the traced span",
                     "where to look first"))
    else:
        rows.append(("device time by op (traced run)", why("profile"), ""))
    try:
        refused = sorted(set(open(os.path.join(work, "out-refused")).read().split()))
    except OSError:
        refused = []
    if refused:
        rows.append(("files refused in $OUT (not in GC_OUT_FILES)", ", ".join(refused), "none: MISSED"))

    # ---- the text ---------------------------------------------------------------------
    finished = sum(1 for s in st_list if s["status"] not in ("running", "not reached"))
    head = (f"stoke GPU check: {env.get('card', 'no GPU seen')}, {env.get('date', '?')}, "
            f"driver {env.get('driver', '?')} (CUDA {env.get('driver_cuda', '?')}), prepared from {env.get('prepared_rev', '?')}")
    lines = [head, f"written {time.strftime('%H:%M:%S', time.gmtime())} UTC: {finished} of {len(st_list)} steps finished", ""]
    lines += table(rows)
    lines += ["", "| step | status | s | cap | est | note |", "|---|---|---|---|---|---|"]

    def g(x):
        return "" if x is None else f"{x:g}"

    for s in st_list:
        note = (s["note"] or s["what"]).replace("|", "/")
        status, secs = s["status"], g(s["seconds"])
        if status == "running":  # the step under way as this was written: if the call ended here, it was cut
            status, secs = "running (unfinished when this table was written)", ""
        lines.append(f"| {s['step']} | {status} | {secs} | {g(s['cap'])} | {g(s['est'])} | {note} |")
    total = sum(s["seconds"] or 0 for s in st_list)
    caps = sum(s["cap"] or 0 for s in st_list)
    lines.append("")
    lines.append(f"steps' seconds sum to {total:.0f} (caps {caps:g}; est = expected on an H100, 16 cores, cold start)")
    if st and model and "mean_len" in d:
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
                 "ST's: its encode() call at its best batch size (load, warm-up and sweep outside). "
                 "Utilization: nvidia-smi utilization.gpu every 100 ms. Training MFU: 6 × params × padded tokens.")
    summary = {"env": env, "steps": st_list, "tests_ops": ops, "tests_encoder": enc, "tests_table": table_t,
               "sanitizer": san, "matmul": mm, "model": model, "texts": load(work, "texts-stats.json"), "st": st_raw,
               "stoke": sk, "stoke_manifest": manifest, "util": util, "compare": cmp_, "profile": prof,
               "train": train, "derived": d, "out_refused": refused,
               "targets": {"ratio": TARGET_RATIO, "mfu": TARGET_MFU, "util": TARGET_UTIL,
                           "train_ratio": TARGET_TRAIN_RATIO, "train_util": TARGET_TRAIN_UTIL}}
    if summary["texts"]:
        summary["texts"].pop("rows_lens", None)
    return "\n".join(lines), summary


def write_atomic(path, text):
    tmp = path + ".tmp"  # beside it: a rename across file systems is not atomic
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("work")
    ap.add_argument("--md")
    ap.add_argument("--json")
    ap.add_argument("--print", action="store_true")
    a = ap.parse_args()
    text, summary = build(a.work)
    if a.print:
        print(text)
    if a.md:
        write_atomic(a.md, text + "\n")
    if a.json:
        write_atomic(a.json, json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
