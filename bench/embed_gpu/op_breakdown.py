"""Where the device time of a traced `stoke embed` run went, by op.

    op_breakdown.py TRACE.json OUT.json

Reads the Chrome trace stoke wrote with --trace: spans of category "device"
(one per op on a GPU: event pairs around each op, see src/cuda/op_timer.h)
are summed by name. Prints one line (the largest shares first) and writes
{"ops": [{"name", "ms", "share", "count"}...], "device_ms", "wall_ms",
"busy_share"} for the report.
"""
import json
import sys


def main():
    trace_path, out_path = sys.argv[1], sys.argv[2]
    with open(trace_path) as f:
        trace = json.load(f)
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    by_name = {}
    first, last = None, None
    for e in events:
        if e.get("ph") != "X":
            continue
        ts, dur = float(e.get("ts", 0)), float(e.get("dur", 0))
        first = ts if first is None else min(first, ts)
        last = ts + dur if last is None else max(last, ts + dur)
        if e.get("cat") != "device":
            continue
        ms, count = by_name.get(e["name"], (0.0, 0))
        by_name[e["name"]] = (ms + dur / 1000.0, count + 1)
    device_ms = sum(ms for ms, _ in by_name.values())
    wall_ms = (last - first) / 1000.0 if first is not None else 0.0
    ops = sorted(({"name": n, "ms": ms, "count": c, "share": ms / device_ms if device_ms else 0.0}
                  for n, (ms, c) in by_name.items()), key=lambda o: -o["ms"])
    res = {"ops": ops, "device_ms": device_ms, "wall_ms": wall_ms,
           "busy_share": device_ms / wall_ms if wall_ms else 0.0}
    print("device time by op: " + (", ".join(f"{o['name']} {100 * o['share']:.1f}%" for o in ops) or "no device spans")
          + f"; device busy {device_ms:.0f} ms of {wall_ms:.0f} ms traced")
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
