"""Shrink the .gpu/ folder to fit the device tool's 64 MiB, and restore it there.

    python3 pack.py pack DIR MAX_BYTES    # xz-compress the largest files until DIR fits
    python3 pack.py unpack DIR            # decompress every *.xz under DIR in place
    python3 pack.py size DIR              # bytes under DIR (files only)

Why files one by one and not one tarball: the folder keeps its layout (bin/,
lib/, fixtures/, bench/), small files stay readable, and only what must shrink
pays for it (libdnnl.so.2, ~40 MB, is most of the folder and packs to ~7 MB).
Python's lzma is used on both sides because python3 is certain to be on the
device machine and the xz command is not. Standard library only.
"""
import lzma
import os
import sys

CHUNK = 1 << 20


def files_under(root):
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                yield p


def size(root):
    return sum(os.path.getsize(p) for p in files_under(root))


def compress(path):
    """path -> path.xz (mode kept in a side file is not needed: unpack restores
    the executable bit on everything under bin/ and lib/)."""
    with open(path, "rb") as src, lzma.open(path + ".xz.tmp", "wb", preset=6) as dst:
        while True:
            b = src.read(CHUNK)
            if not b:
                break
            dst.write(b)
    os.replace(path + ".xz.tmp", path + ".xz")
    os.remove(path)


def decompress(path):
    out = path[: -len(".xz")]
    with lzma.open(path, "rb") as src, open(out + ".tmp", "wb") as dst:
        while True:
            b = src.read(CHUNK)
            if not b:
                break
            dst.write(b)
    os.replace(out + ".tmp", out)
    os.remove(path)
    return out


def pack(root, max_bytes):
    total = size(root)
    # Largest first: fewest files touched for the bytes saved.
    for p in sorted(files_under(root), key=os.path.getsize, reverse=True):
        if total <= max_bytes:
            break
        if p.endswith(".xz") or os.path.getsize(p) < (256 << 10):
            continue
        before = os.path.getsize(p)
        compress(p)
        after = os.path.getsize(p + ".xz")
        total -= before - after
        print(f"pack: {os.path.relpath(p, root)} {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB (xz)")
    return total


def unpack(root):
    n = 0
    for p in sorted(files_under(root)):
        if p.endswith(".xz"):
            out = decompress(p)
            if os.path.basename(os.path.dirname(out)) in ("bin", "lib"):
                os.chmod(out, 0o755)
            n += 1
    return n


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("pack", "unpack", "size"):
        sys.exit(__doc__)
    verb, root = sys.argv[1], sys.argv[2]
    if verb == "size":
        print(size(root))
    elif verb == "pack":
        total = pack(root, int(sys.argv[3]))
        print(f"pack: {root} is {total / 2**20:.1f} MiB")
    else:
        print(f"unpack: {unpack(root)} file(s) decompressed under {root}")


if __name__ == "__main__":
    main()
