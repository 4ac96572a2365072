"""Small readers that turn each step's raw output into one JSON file for the
report. Standard library only: they must work even where torch does not.

    python3 collect.py env OUT.json [KEY=VALUE ...]          # card, driver, date (+ given facts)
    python3 collect.py gtest NAME GTEST.json LOG RC OUT.json # passed/failed/skipped of one test binary
    python3 collect.py smi SAMPLES.csv OUT.json              # GPU utilization over stoke's run
    python3 collect.py stoke MANIFEST WALL_S RC OUT.json     # stoke's counts, end-to-end rate
    python3 collect.py sanitizer OUT.json SKIP_REASON [NAME RC LIMIT_S LOG]...
                                                             # compute-sanitizer's error counts, per tool
"""
import json
import os
import platform
import re
import subprocess
import sys
import time


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)


def run_text(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def env(out, facts):
    res = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host_libc": " ".join(platform.libc_ver()),
           "python": platform.python_version()}
    q = run_text(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit",
                  "--format=csv,noheader,nounits"]).strip().splitlines()
    if q:
        f = [x.strip() for x in q[0].split(",")]
        res.update({"card": f[0], "driver": f[1], "memory_mib": f[2], "max_sm_mhz": f[3], "power_limit_w": f[4],
                    "gpus": len(q)})
    m = re.search(r"CUDA Version:\s*([0-9.]+)", run_text(["nvidia-smi"]))
    if m:
        res["driver_cuda"] = m.group(1)
    for kv in facts:
        k, _, v = kv.partition("=")
        res[k] = v
    write(out, res)


def gtest(name, json_path, log_path, rc, out):
    """Counts from gtest's JSON report; from its text output when the binary
    died before writing the JSON (crash, timeout)."""
    res = {"name": name, "rc": rc, "passed": 0, "failed": 0, "skipped": 0, "failed_tests": [], "skip_reason": ""}
    log = ""
    if os.path.exists(log_path):
        with open(log_path, errors="replace") as f:
            log = f.read()
    if os.path.exists(json_path):
        with open(json_path) as f:
            rep = json.load(f)
        for suite in rep.get("testsuites", []):
            for t in suite.get("testsuite", []):
                full = f"{suite.get('name')}.{t.get('name')}"
                if t.get("status") == "NOTRUN":  # DISABLED_ tests
                    continue
                if t.get("failures"):
                    res["failed"] += 1
                    res["failed_tests"].append(full)
                elif t.get("result") == "SKIPPED":
                    res["skipped"] += 1
                    for s in t.get("skipped", []):  # newer gtest keeps the message here
                        res["skip_reason"] = res["skip_reason"] or s.get("message", "")
                else:
                    res["passed"] += 1
        res["source"] = "json"
    else:
        for key, pat in (("passed", r"\[  PASSED  \] (\d+) test"), ("failed", r"\[  FAILED  \] (\d+) test"),
                         ("skipped", r"\[  SKIPPED \] (\d+) test")):
            m = re.search(pat, log)
            if m:
                res[key] = int(m.group(1))
        res["failed_tests"] = re.findall(r"^\[  FAILED  \] (\S+\.\S+)", log, re.M)
        res["source"] = "log" if re.search(r"\[==========\]", log) else "none"
    if not res["skip_reason"]:
        # gtest prints "file:line: Skipped" then the GTEST_SKIP() message (also with --gtest_brief=1)
        m = re.search(r"Skipped\n(.+)", log)
        if m:
            res["skip_reason"] = m.group(1).strip()
    res["failed_tests"] = sorted(set(res["failed_tests"]))[:10]
    write(out, res)
    print(f"{name}: {res['passed']} passed, {res['failed']} failed, {res['skipped']} skipped (rc {rc})"
          + (f"; skipped because: {res['skip_reason']}" if res["skipped"] and res["skip_reason"] else ""))


def num(x):
    try:
        return float(x)
    except ValueError:
        return None


def smi(csv_path, out):
    """utilization.gpu, memory.used, power.draw per 100 ms sample. 'whole' is
    every sample of the process (start-up included); 'busy' runs from the
    first sample with non-zero utilization to the last one."""
    util, mem, power = [], [], []
    if os.path.exists(csv_path):
        with open(csv_path) as f:
            for line in f:
                p = [num(x.strip()) for x in line.split(",")]
                if len(p) == 3 and p[0] is not None:
                    util.append(p[0])
                    mem.append(p[1])
                    power.append(p[2])
    res = {"samples": len(util), "interval_ms": 100}
    if util:
        # One point a second (the mean of ten samples), so summary.json holds the curve, not 600 lines of it.
        res["series"] = [round(sum(util[i:i + 10]) / len(util[i:i + 10]), 1) for i in range(0, len(util), 10)]
        busy = [i for i, u in enumerate(util) if u > 0]
        span = util[busy[0]: busy[-1] + 1] if busy else []
        res.update({
            "util_mean_whole": sum(util) / len(util),
            "util_mean_busy": sum(span) / len(span) if span else 0.0,
            "busy_samples": len(span),
            "mem_max_mib": max((m for m in mem if m is not None), default=None),
            "power_mean_w": (lambda v: sum(v) / len(v) if v else None)([w for w in power if w is not None]),
        })
    write(out, res)
    if util:
        print(f"smi: {len(util)} samples; GPU utilization mean {res['util_mean_whole']:.1f}% over the process, "
              f"{res['util_mean_busy']:.1f}% over the busy span ({len(span)} samples); "
              f"memory max {res['mem_max_mib']} MiB")
    else:
        print("smi: no samples")


def stoke(manifest_path, wall, rc, out):
    res = {"rc": rc, "wall_seconds": wall}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            m = json.load(f)
        c, run = m.get("counts", {}), m.get("run", {})
        res.update({
            "complete": m.get("complete"), "texts": c.get("texts"), "tokens": c.get("tokens"),
            "truncated": c.get("truncated"), "precision": m.get("precision"), "max_length": m.get("max_length"),
            "device": m.get("settings", {}).get("device"), "settings": m.get("settings", {}),
            "run_seconds": run.get("seconds"), "run_tokens_per_s": run.get("tokens_per_second"),
            "batches": run.get("batches"), "host_syncs": run.get("host_syncs"),
            "padding_efficiency": run.get("padding_efficiency"),
        })
        if res["texts"] and wall > 0:
            res["texts_per_s"] = res["texts"] / wall
            res["tokens_per_s"] = (res["tokens"] or 0) / wall
    write(out, res)
    if "texts_per_s" in res:
        print(f"stoke: {res['texts']} texts, {res['tokens']} tokens in {wall:.2f} s wall: "
              f"{res['texts_per_s']:.0f} texts/s, {res['tokens_per_s']:.0f} tokens/s (rc {rc})")
    else:
        print(f"stoke: no manifest (rc {rc})")


def sanitizer_tool(name, rc, limit, log_path):
    """One compute-sanitizer run of a gtest binary: its ERROR SUMMARY (None
    when it never printed one: cut, or it did not start), the hazards it had
    printed by then, how many tests had finished of how many."""
    log = ""
    if os.path.exists(log_path):
        with open(log_path, errors="replace") as f:
            log = f.read()
    m = re.findall(r"ERROR SUMMARY: (\d+) error", log)
    total = re.search(r"Running (\d+) tests?", log)
    res = {"rc": rc, "limit_s": limit, "errors": int(m[-1]) if m else None,
           "errors_seen": len(re.findall(r"^=+ (?:Error:|ERROR:|Invalid |Race |Program hit )", log, re.M)),
           "tests_total": int(total.group(1)) if total else None,
           # a finished test's line ends with its time; gtest's closing list of failures does not
           "tests_done": len(re.findall(r"^\[ +(?:OK|FAILED) +\] \S+\.\S+.*\(\d+ ms\)$", log, re.M)),
           "tests_failed": len(re.findall(r"^\[  FAILED  \] \S+\.\S+.*\(\d+ ms\)$", log, re.M)),
           "cut": rc in (124, 137)}
    of = f" of {res['tests_total']}" if res["tests_total"] is not None else ""
    if res["cut"]:
        res["summary"] = (f"cut at {limit:g}s after {res['tests_done']}{of} tests, "
                          f"{res['errors_seen']} errors seen before the cut")
    elif res["errors"] is None:
        last = [l for l in log.splitlines() if l.strip()]
        res["summary"] = f"no ERROR SUMMARY (rc {rc}): {last[-1][:100] if last else 'no output'}"
    else:
        res["summary"] = f"{res['errors']} errors, {res['tests_done']}{of} tests ran"
        if res["tests_failed"]:
            res["summary"] += f", {res['tests_failed']} failed"
    return res


def sanitizer(out, reason, groups):
    """Exit status for the step: 0 clean, 1 errors (or a failed test, or no
    summary), 4 skipped (prints "skip: REASON"), 5 a tool was cut before it
    finished, without errors so far (prints "partial: ...")."""
    tools = {}
    for i in range(0, len(groups) - 3, 4):
        name, rc, limit, log = groups[i], int(groups[i + 1]), float(groups[i + 2]), groups[i + 3]
        tools[name] = sanitizer_tool(name, rc, limit, log)
    checked = {k: v for k, v in tools.items() if k != "probe"}
    res = {"skipped": reason or None, "tools": tools,
           "errors": sum(t["errors"] or 0 for t in checked.values()) if checked else None,
           "rc": max((t["rc"] for t in checked.values()), default=0)}
    write(out, res)
    for k, t in tools.items():
        print(f"compute-sanitizer {k}: {t['summary']}")
    if reason:
        print(f"skip: {reason}")
        return 4
    bad = [k for k, t in checked.items() if (t["errors"] or t["errors_seen"] or t["tests_failed"]
                                             or (t["errors"] is None and not t["cut"]))]
    if bad:
        print("compute-sanitizer: " + "; ".join(f"{k} {checked[k]['summary']}" for k in bad))
        return 1
    cut = [k for k, t in checked.items() if t["cut"]]
    if cut:
        print("partial: " + "; ".join(f"{k} {checked[k]['summary']}" for k in cut))
        return 5
    return 0


def main():
    a = sys.argv[1:]
    if not a:
        sys.exit(__doc__)
    if a[0] == "env" and len(a) >= 2:
        env(a[1], a[2:])
    elif a[0] == "gtest" and len(a) == 6:
        gtest(a[1], a[2], a[3], int(a[4]), a[5])
    elif a[0] == "smi" and len(a) == 3:
        smi(a[1], a[2])
    elif a[0] == "stoke" and len(a) == 5:
        stoke(a[1], float(a[2]), int(a[3]), a[4])
    elif a[0] == "sanitizer" and len(a) >= 3 and (len(a) - 3) % 4 == 0:
        sys.exit(sanitizer(a[1], a[2], a[3:]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
