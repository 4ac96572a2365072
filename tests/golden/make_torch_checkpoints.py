#!/usr/bin/env python3
"""Real torch.save files for stoke's restricted PyTorch checkpoint reader (src/io/torch_checkpoint.h).

What it makes, under tests/data/torch/ (tests/unit/test_torch_checkpoint.cc reads all of it; the small
files are also the fuzzer's seeds, tests/fuzz/corpus/torch_checkpoint/):
  dtypes.pt              a plain dict: f32, f16, bf16, f64, i64, i32, i16, i8, u8, u16, bool, a 0-dim
                         scalar and an empty [0, 3] tensor
  views.pt               an OrderedDict: three views of one storage (the whole, a tail at storage offset
                         4, one row at offset 4 with a size-1 dim), an nn.Parameter, a [3, 1] column
  state_dict.pt          nn.Sequential(Linear, LayerNorm).state_dict(): the OrderedDict BUILD with
                         `_metadata`, as every model.state_dict() saves
  protocol4.pt           pickle_protocol=4: FRAME, MEMOIZE, SHORT_BINUNICODE, STACK_GLOBAL
  expected.json          for each of those four: every tensor's name, stoke dtype, shape, values
                         (exact: floats as Python repr of the stored value) and whether it is a Parameter
  refused/transposed.pt           a transposed (non-contiguous) tensor
  refused/training_checkpoint.pt  {"state_dict": {...}, "epoch": 3}
  refused/complex.pt              a complex64 tensor (no stoke dtype)
  refused/module.pt               torch.save(nn.Linear(2, 2)): a pickled module (a class global)
  refused/legacy.pt               _use_new_zipfile_serialization=False (the pre-1.6 bare pickle)
  tiny-bert/pytorch_model.bin     the fixture tiny-bert's model.safetensors, loaded with safetensors and
                                  saved with torch.save (same names, same order, same bytes)

Every accepted file is also checked here with torch.load(weights_only=True) (protocol4.pt excepted:
torch's weights-only unpickler has no FRAME), and module.pt must be refused by it.

Pinned: torch 2.15.0, safetensors 0.8.0 (the script refuses others). Deterministic: fixed seeds, and
torch.save's serialization id depends on the content only, so a rerun writes the same bytes -- except
refused/legacy.pt, whose storage keys are memory addresses (the test reads only its first bytes' kind).
Inputs: the fixtures (../shared/fixtures relative to the repository root, or $STOKE_FIXTURES_DIR).

    .venv-bench-st/bin/python tests/golden/make_torch_checkpoints.py
"""
from __future__ import annotations

import collections
import json
import os
import sys
from pathlib import Path

import safetensors  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from torch import nn  # noqa: E402

PINNED = {"torch": (torch.__version__.split("+")[0], "2.15.0"), "safetensors": (safetensors.__version__, "0.8.0")}
REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("STOKE_FIXTURES_DIR", REPO.parent / "shared" / "fixtures"))
OUT = REPO / "tests" / "data" / "torch"

STOKE_DTYPE = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
    torch.uint16: "U16", torch.bool: "BOOL",
}


def dtypes() -> dict:
    g = torch.Generator().manual_seed(1)
    return {
        "f32": torch.randn(2, 3, generator=g),
        "f16": torch.randn(4, generator=g).half(),
        "bf16": torch.randn(3, generator=g).bfloat16(),
        "f64": torch.randn(2, generator=g, dtype=torch.float64),
        "i64": torch.tensor([-(2**40), -1, 0, 7, 2**62], dtype=torch.int64),
        "i32": torch.tensor([-(2**31), 5, 2**31 - 1], dtype=torch.int32),
        "i16": torch.tensor([-300, 300], dtype=torch.int16),
        "i8": torch.tensor([-128, 0, 127], dtype=torch.int8),
        "u8": torch.tensor([0, 200, 255], dtype=torch.uint8),
        "u16": torch.tensor([0, 40000, 65535], dtype=torch.uint16),
        "bool": torch.tensor([True, False, True, True]),
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 3),
    }


def views() -> collections.OrderedDict:
    g = torch.Generator().manual_seed(2)
    base = torch.arange(12, dtype=torch.float32) * 0.5
    whole = base.view(3, 4)
    sd = collections.OrderedDict()
    sd["shared.whole"] = whole
    sd["shared.tail"] = base[4:]         # storage offset 4
    sd["shared.row"] = whole[1:2]        # offset 4, shape [1, 4], strides (4, 1)
    sd["param"] = nn.Parameter(torch.randn(2, 2, generator=g))
    sd["column"] = torch.randn(3, 1, generator=g)
    assert sd["shared.tail"].storage_offset() == 4 and sd["shared.row"].storage_offset() == 4
    return sd


def state_dict() -> collections.OrderedDict:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2)).state_dict()


def expected(sd) -> list:
    out = []
    for name, t in sd.items():
        flat = t.detach().reshape(-1)
        if t.dtype == torch.bool:
            values = [bool(v) for v in flat.tolist()]
        elif t.dtype.is_floating_point:
            values = [float(v) for v in flat.float().tolist()] if t.dtype != torch.float64 else flat.tolist()
        else:
            values = [int(v) for v in flat.to(torch.int64).tolist()] if t.dtype != torch.uint16 else [
                int(v) for v in flat.to(torch.int32).tolist()]
        out.append({"name": name, "dtype": STOKE_DTYPE[t.dtype], "shape": list(t.shape), "values": values,
                    "parameter": isinstance(t, nn.Parameter)})
    return out


def save(obj, path: Path, **kwargs) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(obj, path, **kwargs)


def main() -> int:
    for name, (have, want) in PINNED.items():
        if have != want:
            print(f"make_torch_checkpoints: {name} {have}, expected {want}", file=sys.stderr)
            return 1
    accepted = {
        "dtypes.pt": (dtypes(), {}),
        "views.pt": (views(), {}),
        "state_dict.pt": (state_dict(), {}),
        "protocol4.pt": ({"a": torch.arange(4, dtype=torch.float32).reshape(2, 2), "b": torch.arange(3)},
                         {"pickle_protocol": 4}),
    }
    record = {}
    for file, (sd, kwargs) in accepted.items():
        save(sd, OUT / file, **kwargs)
        record[file] = expected(sd)
        if "pickle_protocol" not in kwargs:
            back = torch.load(OUT / file, weights_only=True)
            assert list(back) == list(sd), file
    # One tensor per line: reviewable diffs.
    lines = []
    for file, tensors in record.items():
        rows = ",\n".join("  " + json.dumps(t) for t in tensors)
        lines.append(f" {json.dumps(file)}: [\n{rows}\n ]")
    (OUT / "expected.json").write_text("{\n" + ",\n".join(lines) + "\n}\n")

    g = torch.Generator().manual_seed(4)
    save({"t": torch.randn(2, 3, generator=g).t()}, OUT / "refused" / "transposed.pt")
    save({"state_dict": {"w": torch.zeros(2)}, "epoch": 3}, OUT / "refused" / "training_checkpoint.pt")
    save({"c": torch.zeros(2, dtype=torch.complex64)}, OUT / "refused" / "complex.pt")
    torch.manual_seed(5)
    save(nn.Linear(2, 2), OUT / "refused" / "module.pt")
    save({"w": torch.zeros(2)}, OUT / "refused" / "legacy.pt", _use_new_zipfile_serialization=False)
    try:
        torch.load(OUT / "refused" / "module.pt", weights_only=True)
        raise AssertionError("torch.load(weights_only=True) read a pickled module")
    except Exception as e:  # noqa: BLE001 (torch raises UnpicklingError wrapped in its own type)
        assert "weights_only" in str(e) or "Unsupported global" in str(e), e

    # tiny-bert: the same state dict as its model.safetensors, as torch.save writes it.
    st = load_file(FIXTURES / "models" / "tiny-bert" / "model.safetensors")
    save(collections.OrderedDict(st.items()), OUT / "tiny-bert" / "pytorch_model.bin")
    back = torch.load(OUT / "tiny-bert" / "pytorch_model.bin", weights_only=True)
    assert all(torch.equal(back[k], v) for k, v in st.items())
    for p in sorted(OUT.rglob("*")):
        if p.is_file():
            print(f"{p.relative_to(REPO)}: {p.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
