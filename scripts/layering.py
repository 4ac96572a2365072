#!/usr/bin/env python3
"""Which folder of src/ includes which: the layering of DESIGN.md "Layers of
the code", counted from the #include lines (no build needed). The issue of
the structure (one place for each thing) counts its "backends below the
model" point with it.

    scripts/layering.py            # the matrix of folder -> folder includes, and every arrow that points up
    scripts/layering.py --check    # exit 1 when an arrow points up (a lower layer including a higher one)

A layer may include itself and the layers below it. The order (lowest
first) is DESIGN.md's list read bottom up; cpu/ and cuda/ (the backends)
sit right above backend/, below everything that uses a backend.
"""
import collections
import os
import re
import sys

# Lowest first. Folders on one rank may not include each other either
# (cpu and cuda: a backend does not reach into the other).
RANKS = [
    ["core"],
    ["io"],
    ["text"],
    ["backend"],
    ["cpu", "cuda"],
    ["dist"],
    ["model"],
    ["pipeline"],
    ["train"],
    ["doctor"],
    ["jobs"],
    ["serve"],
]
RANK = {folder: i for i, folders in enumerate(RANKS) for folder in folders}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def top_folder(path, src):
    return os.path.relpath(path, src).split(os.sep)[0]


def main():
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    counts = collections.Counter()  # (from, to) -> include lines
    up = []  # (file, line, from, to)
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".h", ".cc", ".cu", ".cuh")):
                continue
            path = os.path.join(root, name)
            here = top_folder(path, src)
            if here not in RANK:
                continue
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or m.group(1) not in RANK or m.group(1) == here:
                        continue
                    there = m.group(1)
                    counts[(here, there)] += 1
                    same_rank_other = RANK[there] == RANK[here]
                    if RANK[there] > RANK[here] or same_rank_other:
                        up.append((os.path.relpath(path, src), number, here, there))
    print("includes between folders of src/ (from -> to: lines)")
    for (a, b), n in sorted(counts.items(), key=lambda kv: (RANK[kv[0][0]], kv[0][0], RANK[kv[0][1]], kv[0][1])):
        print(f"  {a:>9} -> {b:<9} {n}")
    print(f"arrows that point up or across: {len(up)}")
    for path, number, a, b in up:
        print(f"  src/{path}:{number}: {a} includes {b}")
    if "--check" in sys.argv[1:] and up:
        sys.exit(1)


if __name__ == "__main__":
    main()
