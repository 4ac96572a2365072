"""Errors: the CLI's one-line messages, as the Python exception of their kind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

import stoke
from conftest import model_dir, python_with


def test_missing_folder_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        stoke.Model(tmp_path / "nope")
    assert "nope" in str(e.value) and "\n" not in str(e.value)


def test_pickle_only_folder_is_refused(tmp_path):
    d = tmp_path / "pickled"
    shutil.copytree(model_dir("tiny-bert"), d)
    (d / "model.safetensors").unlink()
    (d / "pytorch_model.bin").write_bytes(b"\x80\x04not really")
    with pytest.raises(stoke.ModelError) as e:
        stoke.Model(d)
    msg = str(e.value)
    assert "pytorch_model.bin" in msg and "\n" not in msg
    assert isinstance(e.value, ValueError)


def test_folder_without_config_is_refused(tmp_path):
    with pytest.raises(stoke.ModelError, match="config.json"):
        stoke.Model(tmp_path)


def test_bad_constructor_arguments(tmp_path):
    with pytest.raises(ValueError, match='dtype "f64": expected f32, bf16 or f16'):
        stoke.Model(model_dir("tiny-bert"), dtype="f64")
    with pytest.raises(ValueError, match="--device"):
        stoke.Model(model_dir("tiny-bert"), device="tpu")
    with pytest.raises(ValueError, match="is more than the model's"):
        stoke.Model(model_dir("tiny-bert"), max_length=100000)
    with pytest.raises(ValueError, match="workers 0: expected 1 to"):
        stoke.Model(model_dir("tiny-bert"), workers=0)


def test_predict_without_a_head(tmp_path):
    from safetensors_min import headless_copy

    d = headless_copy(model_dir("tiny-bert"), tmp_path / "no-head")
    m = stoke.Model(d, device="cpu")
    assert m.labels == []
    with pytest.raises(ValueError, match="has no classification head"):
        m.predict(["a"])


SIGINT_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import stoke
    # Python installs its KeyboardInterrupt handler only when SIGINT was not
    # ignored at start-up, and a shell ignores SIGINT in what it starts with "&"
    # (a background CI job, nohup): put back what an interactive session has.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    m = stoke.Model(sys.argv[1], device="cpu")
    texts = ["a long enough text to take some time " * 8] * 200000
    # Ctrl-C as a terminal sends it: SIGINT to the process, a moment into the encode.
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    try:
        m.encode(texts)
        print("NOT INTERRUPTED")
    except KeyboardInterrupt:
        print("INTERRUPTED after %.1f s" % (time.monotonic() - t0))
    out = m.encode("the next call works")
    print("NEXT", out.shape)
    """
)


def test_sigint_during_a_long_encode_raises_keyboard_interrupt(tmp_path):
    script = tmp_path / "sigint.py"
    script.write_text(SIGINT_SCRIPT)
    r = subprocess.run([sys.executable, str(script), str(model_dir("tiny-bert"))], capture_output=True, text=True,
                       env=python_with({}), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "INTERRUPTED after" in r.stdout, r.stdout + r.stderr
    assert "NEXT (64,)" in r.stdout
