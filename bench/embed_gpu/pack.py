"""Shrink the .gpu/ folder to fit the device tool's 64 MiB, and restore it there.

    python3 pack.py pack DIR MAX_BYTES    # xz-compress the largest files until DIR fits
    python3 pack.py unpack DIR            # decompress every *.xz under DIR in place
    python3 pack.py size DIR              # bytes under DIR (files only)

Files one by one, largest first: the folder keeps its layout (bin/, lib/,
fixtures/, bench/), small files stay readable, and only what must shrink pays
for it (libdnnl.so.2, ~40 MB, packs to ~7 MB). Except bin/: its executables
each link the whole library (~20 MB apiece, mostly the same code), so they go
first, together, into one solid archive, bin/bin.tar.xz, with a dictionary
large enough to span them all: 4 binaries, 89 MB, pack to 7.5 MB that way
against 22.7 MB one by one. Python's lzma and tarfile are used on both sides
because python3 is certain to be on the device machine and the xz command is
not. Standard library only.
"""
import lzma
import os
import sys
import tarfile

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


BUNDLE = "bin.tar.xz"
# A dictionary past the binaries' total size, so the last one's copy of the
# library is found in the first one's (decompressing needs that much memory).
BUNDLE_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": 192 << 20}]


def bundle_bin(root):
    """bin/* (2 or more plain files) -> bin/bin.tar.xz; returns the bytes saved."""
    bin_dir = os.path.join(root, "bin")
    names = sorted(n for n in os.listdir(bin_dir) if os.path.isfile(os.path.join(bin_dir, n)) and not n.endswith(".xz"))
    if len(names) < 2:
        return 0
    before = sum(os.path.getsize(os.path.join(bin_dir, n)) for n in names)
    out = os.path.join(bin_dir, BUNDLE)
    with lzma.open(out + ".tmp", "wb", filters=BUNDLE_FILTERS) as f, tarfile.open(fileobj=f, mode="w") as tar:
        for n in names:
            tar.add(os.path.join(bin_dir, n), arcname=n)
    os.replace(out + ".tmp", out)
    for n in names:
        os.remove(os.path.join(bin_dir, n))
    after = os.path.getsize(out)
    print(f"pack: bin/ ({len(names)} files) {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB (one solid {BUNDLE})")
    return before - after


def unbundle_bin(root):
    path = os.path.join(root, "bin", BUNDLE)
    if not os.path.exists(path):
        return 0
    bin_dir = os.path.dirname(path)
    with lzma.open(path, "rb") as f, tarfile.open(fileobj=f, mode="r|") as tar:
        names = []
        for member in tar:
            if not member.isfile() or os.path.basename(member.name) != member.name:
                sys.exit(f"unpack: {path}: unexpected member {member.name!r}")
            tar.extract(member, bin_dir)
            os.chmod(os.path.join(bin_dir, member.name), 0o755)
            names.append(member.name)
    os.remove(path)
    return len(names)


def pack(root, max_bytes):
    total = size(root)
    if total > max_bytes and os.path.isdir(os.path.join(root, "bin")):
        total -= bundle_bin(root)
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
    n = unbundle_bin(root)
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
