#!/usr/bin/env python3
"""Every source file a doc names exists.

docs/*.md name the files that hold each thing (docs/ops.md's op families,
docs/cuda.md's file table, ...); a file moved or merged without its docs
leaves them pointing at nothing. This finds every `name.cc` / `.cu` / `.cuh`
/ `.h` in docs/*.md and checks it against the source tree:
  - a name with a folder (src/cuda/kernels.h, cuda/kernels.h) must be a
    file at that path from the repository root, or end a file's path;
  - a bare name (fast_linear.cc) must be some file's name;
  - `gemm.{h,cc}` stands for gemm.h and gemm.cc;
  - patterns (`ref_<family>.cc`, `*_checks.h`) are not names and are skipped.
Names of files outside the repository (system headers) are listed in
EXTERNAL. Run with --check (the test): exit 1 and one line per missing name.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Headers of other projects that the docs name on purpose.
EXTERNAL = {"nccl.h"}
# Not part of the source tree: build outputs, virtual environments, git.
SKIP_DIRS = {"build", "node_modules", "__pycache__"}

_EXT = r"(?:cc|cu|cuh|h)"
NAME = re.compile(r"[A-Za-z0-9_./{},-]*[A-Za-z0-9_}]\.(?:" + _EXT + r"|\{" + _EXT + r"(?:," + _EXT + r")*\})(?![\w/.])")


def source_files():
    paths, names = set(), set()
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".") and not d.startswith("build")]
        for f in files:
            rel = os.path.relpath(os.path.join(top, f), ROOT)
            paths.add(rel.replace(os.sep, "/"))
            names.add(f)
    return paths, names


def expand(name):
    m = re.search(r"\{([^{}]*)\}", name)
    if not m:
        return [name]
    out = []
    for alt in m.group(1).split(","):
        out += expand(name[: m.start()] + alt + name[m.end():])
    return out


def exists(name, paths, names):
    if name in EXTERNAL:
        return True
    if "/" not in name:
        return name in names
    return name in paths or any(p.endswith("/" + name) for p in paths)


def missing_names():
    paths, names = source_files()
    docs = os.path.join(ROOT, "docs")
    found = []
    for doc in sorted(f for f in os.listdir(docs) if f.endswith(".md")):
        with open(os.path.join(docs, doc), encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                for m in NAME.finditer(line):
                    before = line[m.start() - 1] if m.start() > 0 else ""
                    if before in "*<>":  # a pattern: *_checks.h, <family>_checks.h
                        continue
                    for name in expand(m.group(0).lstrip("./")):
                        if not exists(name, paths, names):
                            found.append(f"docs/{doc}:{line_no}: names {name}, which is no file of the tree")
    return found


def main():
    found = missing_names()
    for line in found:
        print(line)
    if "--check" in sys.argv:
        return 1 if found else 0
    print(f"{len(found)} missing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
