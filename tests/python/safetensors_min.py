"""Just enough safetensors reading and writing to derive test models from the fixtures."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def read(path: Path) -> dict:
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(body[a:b], dtype=_DTYPES[t["dtype"]]).reshape(t["shape"]).copy()
    return out


def write(path: Path, tensors: dict) -> None:
    header, chunks, offset = {}, [], 0
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": _NAMES[arr.dtype], "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def one_label_copy(src: Path, dst: Path) -> Path:
    """The fixture classifier as a one-label cross-encoder: the first row of its classifier."""
    shutil.copytree(src, dst)
    t = read(dst / "model.safetensors")
    t["classifier.weight"] = t["classifier.weight"][:1]
    t["classifier.bias"] = t["classifier.bias"][:1]
    write(dst / "model.safetensors", t)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["id2label"] = {"0": "LABEL_0"}
    cfg["label2id"] = {"LABEL_0": 0}
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return dst


def headless_copy(src: Path, dst: Path) -> Path:
    """The fixture as a plain encoder: no classification head (weights and config)."""
    shutil.copytree(src, dst)
    t = read(dst / "model.safetensors")
    for name in [n for n in t if n.startswith("classifier.")]:
        del t[name]
    write(dst / "model.safetensors", t)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["architectures"] = ["BertModel"]
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return dst
