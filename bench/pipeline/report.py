"""Table for bench/pipeline/run.sh: reads RESULTS/runs.jsonl (one line per
`stoke embed` process and per bench_pipeline run), the output folders'
manifest.json and the rows bench_pipeline wrote, and prints what was measured,
the ratios, each run's stage report and the output checks.

    python3 report.py RESULTS_DIR SECONDS [OTHERS_CPU_SECONDS]
"""
import glob
import json
import os
import sys

import numpy as np


def stage_report(run):
    """manifest.json run.stages in the layout stoke prints without --quiet."""
    st, wall = run["stages"], max(run["pipeline_seconds"], 1e-9)
    dev = st["device"]
    busy = dev["busy"] if dev["busy"] >= 0 else 0.0
    rows = [
        "  stage      busy s   waiting for input s   waiting for output s",
        f"  read     {st['read']['busy']:8.2f}   {'-':>19}   {st['read']['wait_output']:20.2f}",
        f"  tokenize {st['tokenize']['busy']:8.2f}   {st['tokenize']['wait_input']:19.2f}   {st['tokenize']['wait_output']:20.2f}",
        f"  batch    {st['batch']['busy']:8.2f}   {st['batch']['wait_input']:19.2f}   {st['batch']['wait_output']:20.2f}"
        "  (output slot: the device is behind)",
        f"  device   {busy:8.2f}   {'-':>19}   {'-':>20}  ({100 * busy / wall:.0f}% busy)",
        f"  write    {st['write']['busy']:8.2f}   {st['write']['wait_input'] + dev['result_wait']:19.2f}   {'-':>20}"
        f"  (of the input wait, {dev['result_wait']:.2f} s for results)",
    ]
    return "\n".join(rows)


def same_files(a_dir, c_dir, pattern):
    """(identical, what differs) for every file matching pattern in either folder."""
    names = sorted({os.path.basename(p) for d in (a_dir, c_dir) for p in glob.glob(os.path.join(d, pattern))})
    if not names:
        return False, "no files"
    bad = []
    for n in names:
        pa, pc = os.path.join(a_dir, n), os.path.join(c_dir, n)
        if not (os.path.exists(pa) and os.path.exists(pc)):
            bad.append(f"{n} missing on one side")
            continue
        with open(pa, "rb") as fa, open(pc, "rb") as fc:
            if fa.read() != fc.read():
                bad.append(n)
    return not bad, f"{len(names)} file(s)" + (f"; differ: {', '.join(bad)}" if bad else "")


def main():
    res, total_s = sys.argv[1], int(sys.argv[2])
    others_s = float(sys.argv[3]) if len(sys.argv) > 3 else None
    runs = [json.loads(line) for line in open(os.path.join(res, "runs.jsonl")) if line.strip()]
    precs = []
    for r in runs:
        if r["precision"] not in precs:
            precs.append(r["precision"])

    rows, stages, checks = [], [], []
    for prec in precs:
        mine = [r for r in runs if r["precision"] == prec]
        of = {k: [r for r in mine if r["kind"] == k] for k in ("pipelined", "compute", "serial")}
        # The best round of each counts: other load only ever slows a run down.
        a = min(of["pipelined"], key=lambda r: r["wall"])
        b = min(of["compute"], key=lambda r: r["seconds"])
        c = min(of["serial"], key=lambda r: r["wall"])
        man = {}
        for k, r in (("pipelined", a), ("serial", c)):
            with open(os.path.join(r["out"], "manifest.json")) as f:
                man[k] = json.load(f)
        ma, mc = man["pipelined"], man["serial"]
        texts, tokens = ma["counts"]["texts"], ma["counts"]["tokens"]
        a_tps, c_tps = tokens / a["wall"], mc["counts"]["tokens"] / c["wall"]
        a_pipe_tps = tokens / ma["run"]["pipeline_seconds"]
        b_tps = b["tokens_per_s"]
        rounds = lambda k, key: ", ".join(f"{r[key]:.2f}" for r in of[k])
        rows.append(dict(prec=prec, texts=texts, tokens=tokens, batches=ma["run"]["batches"],
                         a_walls=rounds("pipelined", "wall"), b_secs=rounds("compute", "seconds"),
                         c_walls=rounds("serial", "wall"), a_texts=texts / a["wall"], a=a_tps, b=b_tps, c=c_tps,
                         a_pipe=a_pipe_tps, a_dev=ma["run"]["stages"]["device"]["busy"] / ma["run"]["pipeline_seconds"],
                         c_dev=mc["run"]["stages"]["device"]["busy"] / mc["run"]["pipeline_seconds"]))
        for k, label, r in (("pipelined", "(a) stoke embed", a), ("serial", "(c) stoke embed --serial", c)):
            run = man[k]["run"]
            stages.append(f"{prec} {label}, round {r['round']}: process {r['wall']:.2f} s, pipeline "
                          f"{run['pipeline_seconds']:.2f} s, {run['batches']} batches, {run['host_syncs']} host syncs; "
                          f"bound by {run['bound_by']}\n" + stage_report(run))
        stages.append(f"{prec} (b) bench_pipeline, round {b['round']}: {b['seconds']:.2f} s timed (enqueue + result "
                      f"wait; waiting {b['result_wait_seconds']:.2f} s, device busy {b['device_busy_seconds']:.2f} s), "
                      f"{b['batches']} batches, {b['host_syncs']} host syncs; untimed: load {b['load_seconds']:.2f} s, "
                      f"load + read + tokenize + pack {b['prep_seconds']:.2f} s")
        # Checks: the same work everywhere, every a and c output identical to the first a's.
        ch = dict(prec=prec)
        ch["counts"] = (ma["counts"]["texts"] == mc["counts"]["texts"] == b["texts"]
                        and ma["counts"]["tokens"] == mc["counts"]["tokens"] == b["tokens"]
                        and ma["run"]["batches"] == mc["run"]["batches"] == b["batches"])
        ch["counts_text"] = (f"texts {ma['counts']['texts']}/{b['texts']}/{mc['counts']['texts']}, tokens "
                             f"{ma['counts']['tokens']}/{b['tokens']}/{mc['counts']['tokens']}, batches "
                             f"{ma['run']['batches']}/{b['batches']}/{mc['run']['batches']} (a/b/c)")
        ref = of["pipelined"][0]["out"]
        others = [r["out"] for r in of["pipelined"][1:] + of["serial"]]
        ch["n_outputs"] = 1 + len(others)
        emb = [same_files(ref, o, "embeddings-*.npy") for o in others]
        ids = [same_files(ref, o, "ids-*.jsonl") for o in others]
        ch["emb_same"] = all(e[0] for e in emb)
        ch["emb_text"] = "; ".join(f"{os.path.basename(o)}: {e[1]}" for o, e in zip(others, emb))
        ch["ids_same"] = all(e[0] for e in ids)
        # b's rows against a's vectors (f32 output): the same batches should give the same bytes.
        shards = sorted(glob.glob(os.path.join(ref, "embeddings-*.npy")))
        vec = np.concatenate([np.load(p) for p in shards]).astype("<f4") if shards else None
        ch["b_same"], ch["b_maxabs"] = True, 0.0
        for r in of["compute"]:
            comp = np.fromfile(os.path.join(res, f"compute-{prec}-{r['round']}.f32"), dtype="<f4")
            if vec is None or comp.size != vec.size:
                ch["b_same"], ch["b_maxabs"] = False, None
                break
            comp = comp.reshape(vec.shape)
            ch["b_same"] = ch["b_same"] and vec.tobytes() == comp.tobytes()
            ch["b_maxabs"] = max(ch["b_maxabs"], float(np.abs(vec.astype(np.float64) - comp).max()))
        checks.append(ch)

    n = lambda x: f"{x:,.0f}"
    print()
    print("Embed pipeline on the CPU: tokens/s = tokens embedded / seconds of the best round "
          "(same texts, flags and batches in a, b, c)")
    hdr = (f"{'prec':<5} {'texts':>6} {'tokens':>9} {'batches':>7} | {'(a) embed':>9} {'(b) compute':>11} "
           f"{'(c) serial':>10} | {'efficiency a/b':>14} {'speed-up a/c':>12} | {'a texts/s':>9} {'a pipeline/b':>12} "
           f"{'device busy a, c':>16}")
    print(f"{'':<31}| {'tokens/s (measured)':^33} | {'ratios':^27} |")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['prec']:<5} {r['texts']:>6} {r['tokens']:>9} {r['batches']:>7} | {n(r['a']):>9} {n(r['b']):>11} "
              f"{n(r['c']):>10} | {r['a'] / r['b']:>14.2f} {r['a'] / r['c']:>12.2f} | {n(r['a_texts']):>9} "
              f"{r['a_pipe'] / r['b']:>12.2f} {100 * r['a_dev']:>7.1f}% {100 * r['c_dev']:>6.1f}%")
    print()
    print("efficiency a/b: the pipeline's wall-clock efficiency (target >= 0.95: the whole `stoke embed` process")
    print("  within 5% of the executor alone on the same batches); speed-up a/c: over the serial loop")
    print("  (`stoke embed --serial`, same flags).")
    print("(a), (c): wall clock around the whole process (load, hashing, reading, tokenizing, compute, writing).")
    print("(b): bench_pipeline, only enqueue + result wait timed, 3 batches in flight as the pipeline keeps them.")
    print("a pipeline/b: a's in-process pipeline seconds (manifest run.pipeline_seconds: no model load, no input")
    print("  hashing, no manifest) against b.")
    print("device busy a, c: the executor's busy seconds over the in-process pipeline seconds (manifest); unlike the")
    print("  ratios, other load on the machine hardly moves it: what the pipeline leaves idle, the serial loop too.")
    print()
    print("Seconds per round: " + "; ".join(f"{r['prec']} a {r['a_walls']} | b {r['b_secs']} | c {r['c_walls']}"
                                         for r in rows))
    print()
    print("Stage reports of the best rounds (manifest.json run.stages; device busy: the CPU backend's executor thread)")
    for s in stages:
        print(s)
    print()
    print("Checks")
    for ch in checks:
        print(f"  {ch['prec']}: same work in a, b, c: {'yes' if ch['counts'] else 'NO'} ({ch['counts_text']})")
        print(f"  {ch['prec']}: embeddings of every a and c run byte-identical ({ch['n_outputs']} outputs): "
              f"{'yes' if ch['emb_same'] else 'NO'} ({ch['emb_text']}); ids files too: {'yes' if ch['ids_same'] else 'NO'}")
        mx = "-" if ch["b_maxabs"] is None else f"{ch['b_maxabs']:.3g}"
        print(f"  {ch['prec']}: b's rows byte-identical to a's: {'yes' if ch['b_same'] else 'no'} (max |diff| {mx})")
    print()
    print("Tracing overhead (d vs a: `stoke embed --trace`, every stage and device-op span recorded; target <= 2%)")
    for prec in precs:
        mine = [r for r in runs if r["precision"] == prec]
        a = [r for r in mine if r["kind"] == "pipelined"]
        d = [r for r in mine if r["kind"] == "traced"]
        if not a or not d:
            continue
        with open(os.path.join(min(a, key=lambda r: r["wall"])["out"], "manifest.json")) as f:
            pa = json.load(f)["run"]["pipeline_seconds"]
        with open(os.path.join(min(d, key=lambda r: r["wall"])["out"], "manifest.json")) as f:
            pd = json.load(f)["run"]["pipeline_seconds"]
        print(f"  {prec}: pipeline seconds {pa:.3f} untraced, {pd:.3f} traced: overhead {100 * (pd / pa - 1):+.1f}%")
    print()
    line = f"whole run {total_s} s"
    if others_s is not None:
        # CPU seconds other processes used while this ran: on 2 cores, more than
        # ~0.1 of a core on average skews the comparison.
        share = others_s / max(total_s, 1)
        line += (f"; other processes used {others_s:.0f} CPU s ({share:.2f} of a core on average): "
                 + ("quiet machine" if share < 0.1 else "busy machine, rerun when quiet for clean numbers"))
    print(line)
    if not all(ch["emb_same"] for ch in checks):
        sys.exit(1)


if __name__ == "__main__":
    main()
