"""Table of bench/contention/run.sh: seconds per job and policy, idle and
loaded, with each cell's ratio to the best idle time of its job and the
loaded/idle slowdown; then the policies that meet the rule (within 5% of the
best idle time, and never 10x slower loaded than idle's best)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
from cpu_load import load_line  # noqa: E402


def num(s):
    return float(s.lstrip(">"))


def main():
    path, cores, hogs, total, others = sys.argv[1:6]
    rows = [l.rstrip("\n").split("\t") for l in open(path)][1:]
    cell = {(p, load): (tr, em) for p, load, tr, em in rows}
    policies = list(dict.fromkeys(p for p, _, _, _ in rows))
    best = [min(num(cell[(p, "idle")][j]) for p in policies) for j in (0, 1)]
    print(f"contention benchmark: {cores} cores, {hogs} busy processes when loaded; seconds (idle: median of runs)\n")
    print(f"{'policy':<10} {'train idle':>10} {'x best':>7} {'loaded':>8} {'x best':>7}   "
          f"{'embed idle':>10} {'x best':>7} {'loaded':>8} {'x best':>7}")
    ok = []
    for p in policies:
        line = f"{p:<10}"
        good = True
        for j in (0, 1):
            idle, loaded = cell[(p, "idle")][j], cell[(p, "loaded")][j]
            ri, rl = num(idle) / best[j], num(loaded) / best[j]
            line += f" {idle:>10} {ri:>6.2f}x {loaded:>8} {rl:>6.2f}x  "
            good = good and ri <= 1.05 and rl < 10 and not loaded.startswith(">")
        print(line)
        if good:
            ok.append(p)
    print("\nwithin 5% of the best idle and under 10x the best idle time when loaded: " + (", ".join(ok) or "none"))
    if ok:
        pick = min(ok, key=lambda p: sum(num(cell[(p, "loaded")][j]) / best[j] for j in (0, 1)))
        print(f"of those, the least slowed down when loaded: {pick}")
    # The busy processes are this script's children: "others" excludes them.
    print(load_line(int(total), float(others) if others else None))


main()
