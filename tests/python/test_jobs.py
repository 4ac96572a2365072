"""embed_job (the crash-safe job of `stoke embed`) and load_embeddings (verify's checks, record order)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import stoke
from conftest import corpus_texts, model_dir, python_with, read_folder_rows, run_cli, write_jsonl

FLAGS = {"device": "cpu", "shard_size": 40, "batch_tokens": 1024}


def folder_bytes(folder: Path) -> dict:
    """Every file a finished run leaves, by name (the lock file and the manifest's run figures aside)."""
    out = {}
    for p in sorted(folder.iterdir()):
        if p.name == ".stoke.lock":
            continue
        data = p.read_bytes()
        if p.name == "manifest.json":
            m = json.loads(data)
            m.pop("run", None)
            m["settings"].pop("workers", None)
            data = json.dumps(m, sort_keys=True).encode()
        out[p.name] = data
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("in") / "texts.jsonl", corpus_texts(600))


@pytest.fixture(scope="module")
def reference(tmp_path_factory, corpus) -> Path:
    out = tmp_path_factory.mktemp("ref") / "out"
    summary = stoke.embed_job(model_dir("tiny-bert"), corpus, out, **FLAGS)
    assert summary["texts"] == 600 and summary["shards"] == 15
    return out


def test_embed_job_equals_the_cli(tmp_path, corpus, reference):
    out = tmp_path / "cli"
    r = run_cli("embed", "--model", str(model_dir("tiny-bert")), "--input", str(corpus), "--output", str(out),
                "--device", "cpu", "--shard-size", "40", "--batch-tokens", "1024", "--quiet")
    assert r.returncode == 0, r.stderr
    assert folder_bytes(out) == folder_bytes(reference)


def test_embed_job_rows_equal_encode(reference, bert):
    texts = corpus_texts(600)
    rows = stoke.load_embeddings(reference).to_numpy()
    assert np.array_equal(rows, bert.encode(texts, batch_tokens=1024))


def test_embed_job_summary_and_bad_flags(tmp_path, corpus, reference):
    again = stoke.embed_job(model_dir("tiny-bert"), corpus, reference, resume=True, **FLAGS)
    assert again["already_complete"] is True
    with pytest.raises(ValueError, match="embed_job: unknown option batchtokens"):
        stoke.embed_job(model_dir("tiny-bert"), corpus, tmp_path / "x", batchtokens=5)
    with pytest.raises(ValueError, match='--on-error "later": expected stop or skip'):
        stoke.embed_job(model_dir("tiny-bert"), corpus, tmp_path / "x", on_error="later")
    with pytest.raises(ValueError, match="shard_size: expected an int"):
        stoke.embed_job(model_dir("tiny-bert"), corpus, tmp_path / "x", shard_size="big")
    with pytest.raises(FileNotFoundError):
        stoke.embed_job(model_dir("tiny-bert"), tmp_path / "missing.jsonl", tmp_path / "y", device="cpu")


def test_embed_job_takes_exactly_the_option_tables_names(tmp_path, corpus):
    # One table declares embed's options (src/jobs/embed_option_table.cc): the
    # keywords embed_job takes are its names, each documented, each checked as
    # the CLI checks it.
    import re

    from stoke import _stoke

    names = set(_stoke.embed_job_options())
    documented = set(re.findall(r"[a-z][a-z_]+", stoke.embed_job.__doc__.split("**flags:")[1].split("Returns")[0]))
    assert {"batch_tokens", "shard_index", "partition", "normalize", "progress"} <= names
    assert names <= documented, names - documented
    with pytest.raises(ValueError, match="--batch-tokens -2: expected 1 to 16777216"):
        stoke.embed_job(model_dir("tiny-bert"), corpus, tmp_path / "x", batch_tokens=-2)
    with pytest.raises(ValueError, match="--max-length 0: expected 1 to 1048576"):
        stoke.embed_job(model_dir("tiny-bert"), corpus, tmp_path / "x", max_length=0)
    with pytest.raises(ValueError, match="normalize: expected True or False"):
        stoke.embed_job(model_dir("tiny-bert"), corpus, tmp_path / "x", normalize="yes")


JOB_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import stoke
    model, inp, out, flags = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    print(json.dumps(stoke.embed_job(model, inp, out, **flags)), flush=True)
    """
)


def run_job_process(tmp_path, corpus, out, flags, env_extra=None, stop_after=None):
    script = tmp_path / "job.py"
    script.write_text(JOB_SCRIPT)
    args = [sys.executable, str(script), str(model_dir("tiny-bert")), str(corpus), str(out), json.dumps(flags)]
    return subprocess.Popen(args, env=python_with(env_extra or {}), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_kill_9_of_the_python_process_then_resume_is_byte_identical(tmp_path, corpus, reference):
    # Killed by the commit protocol's crash points (SIGKILL of the Python process itself) ...
    for point in ("shard-written:3", "before-manifest:6", "after-manifest:9"):
        out = tmp_path / point.replace(":", "-")
        p = run_job_process(tmp_path, corpus, out, FLAGS, {"STOKE_CRASH_AT": point})
        p.communicate(timeout=300)
        assert p.returncode == -signal.SIGKILL, point
        summary = stoke.embed_job(model_dir("tiny-bert"), corpus, out, resume=True, **FLAGS)
        assert summary["resumed"] > 0 or summary["notes"], point
        assert folder_bytes(out) == folder_bytes(reference), point


def test_kill_9_from_outside_mid_run_then_resume(tmp_path, corpus, reference):
    # ... and by kill -9 from outside while the job is stopped mid-run.
    out = tmp_path / "outside"
    p = run_job_process(tmp_path, corpus, out, FLAGS, {"STOKE_STOP_AT": "after-manifest:4"})
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        with open(f"/proc/{p.pid}/stat") as f:
            if f.read().split(") ")[1].split()[0] == "T":  # stopped at the 4th commit
                break
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL
    m = json.loads((out / "manifest.json").read_text())
    assert not m["complete"] and len(m["shards"]) == 4
    with pytest.raises(ValueError, match="verify found"):
        stoke.load_embeddings(out)  # incomplete
    stoke.embed_job(model_dir("tiny-bert"), corpus, out, resume=True, **FLAGS)
    assert folder_bytes(out) == folder_bytes(reference)


def test_int8_embed_job_reports_its_quality(tmp_path, corpus, reference):
    out = tmp_path / "int8"
    s = stoke.embed_job(model_dir("tiny-bert"), corpus, out, precision="int8", **FLAGS)
    q = s["quality"]
    assert q["reference_precision"] == "f32" and q["metric"] == "centered_cosine", q
    # 600 texts: a small job samples a 64th of its records, at least 16 (jobs/int8_quality.h)
    assert q["sample_texts"] == 16 and q["threshold"] == 0.99 and q["kept"] is False, q
    assert 0.98 <= q["min"] <= q["mean"] <= 1.0, q
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["quality"] == {k: v for k, v in q.items() if k != "kept"}
    assert stoke.load_embeddings(out).quality == [manifest["quality"]]
    # A finished folder resumed: the first run's measurement, not a new one.
    again = stoke.embed_job(model_dir("tiny-bert"), corpus, out, precision="int8", resume=True, **FLAGS)
    assert again["already_complete"] and again["quality"] == dict(q, kept=True)
    # f32: no quality.
    assert stoke.embed_job(model_dir("tiny-bert"), corpus, reference, resume=True, **FLAGS)["quality"] is None
    assert stoke.load_embeddings(reference).quality == [None]


INTERRUPT_SCRIPT = textwrap.dedent(
    """
    import json, signal, sys, time
    import stoke
    model, inp, out, flags = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    handled = []
    def on_sigint(signum, frame):  # Python's own behaviour, timed: it runs when embed_job polls for signals
        handled.append(time.monotonic())
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_sigint)
    try:
        stoke.embed_job(model, inp, out, **flags)
        print("NOT INTERRUPTED", flush=True)
    except KeyboardInterrupt:
        print("INTERRUPTED %.3f s after the handler" % (time.monotonic() - handled[0]), flush=True)
    """
)


def test_sigint_during_embed_job_stops_it_then_resume_is_byte_identical(tmp_path):
    # Small windows: the job commits as it goes, and at its first commit has 9/10 of its work left — far
    # more than the 50 ms embed_job waits between polls for signals.
    corpus = write_jsonl(tmp_path / "long.jsonl", corpus_texts(4000))
    flags = {"device": "cpu", "shard_size": 400, "sort_window": 100, "batch_tokens": 1024}
    reference = tmp_path / "reference"
    stoke.embed_job(model_dir("tiny-bert"), corpus, reference, **flags)
    out = tmp_path / "interrupted"
    script = tmp_path / "interrupt.py"
    script.write_text(INTERRUPT_SCRIPT)
    args = [sys.executable, str(script), str(model_dir("tiny-bert")), str(corpus), str(out), json.dumps(flags)]
    # Ctrl-C mid-run: the job stops itself at its first commit (STOKE_STOP_AT: SIGSTOP), SIGINT is
    # sent while it is stopped, and arrives the moment it continues.
    p = subprocess.Popen(args, env=python_with({"STOKE_STOP_AT": "after-manifest:1"}), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        with open(f"/proc/{p.pid}/stat") as f:
            if f.read().split(") ")[1].split()[0] == "T":
                break
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGINT)
    os.kill(p.pid, signal.SIGCONT)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 0, stderr
    assert "INTERRUPTED" in stdout, stdout + stderr
    assert float(stdout.split()[1]) < 2.0, stdout  # KeyboardInterrupt within a batch or so, not at the end
    m = json.loads((out / "manifest.json").read_text())
    assert not m["complete"] and 1 <= len(m["shards"]) < 10, m["shards"][-1]
    summary = stoke.embed_job(model_dir("tiny-bert"), corpus, out, resume=True, **flags)
    assert summary["resumed"] > 0
    assert folder_bytes(out) == folder_bytes(reference)


def test_load_embeddings_views_rows_in_record_order(tmp_path, corpus, reference):
    whole = read_folder_rows(reference)
    s = stoke.load_embeddings(reference)
    assert len(s) == 600 and s.shape == (600, 64)
    assert np.array_equal(s[0], whole[0]) and np.array_equal(s[-1], whole[-1])
    assert np.array_equal(s[35:85], whole[35:85])
    assert np.array_equal(s[[5, 599, 41]], whole[[5, 599, 41]])
    assert np.array_equal(s.to_numpy(), whole)
    assert s.ids()[:3] == [0, 1, 2]
    # Three tasks: rows interleave back into record order.
    tasks = []
    for i in range(3):
        out = tmp_path / f"task{i}"
        stoke.embed_job(model_dir("tiny-bert"), corpus, out, shard_index=i, num_shards=3, **FLAGS)
        tasks.append(out)
    split = stoke.load_embeddings(tasks)
    assert len(split) == 600
    assert np.allclose(split.to_numpy(), whole, atol=1e-6, rtol=0)  # other batches: f32 rounding only
    assert list(split.records[:5]) == [0, 1, 2, 3, 4]
    assert np.array_equal(split[1], read_folder_rows(tasks[1])[0])
    # Refusals, with verify's lines: a task missing, a folder of another set mixed in.
    with pytest.raises(ValueError, match="verify found") as e:
        stoke.load_embeddings(tasks[:2])
    assert "task" in str(e.value)
    with pytest.raises(ValueError, match="verify found"):
        stoke.load_embeddings([tasks[0], tasks[1], reference])


def test_load_embeddings_with_skipped_records(tmp_path):
    texts = corpus_texts(50)
    inp = tmp_path / "bad.jsonl"
    with open(inp, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write('{"text": 5}\n' if i in (3, 17) else json.dumps({"text": t}) + "\n")
    out = tmp_path / "skip"
    summary = stoke.embed_job(model_dir("tiny-bert"), inp, out, on_error="skip", device="cpu")
    assert summary["skipped"] == 2
    s = stoke.load_embeddings(out)
    assert len(s) == 48 and 3 not in s.records and 17 not in s.records
    assert list(s.records[:4]) == [0, 1, 2, 4]


def test_embed_job_takes_a_model_and_the_cli_flags(tmp_path, corpus, bert):
    out = tmp_path / "flags"
    s = stoke.embed_job(bert, corpus, out, normalize=False, dimensions=16, output_dtype="f16", progress=True,
                        shard_size=1000)
    assert s["device"] == "cpu" and s["dimensions"] == 16 and s["normalize"] is False
    rows = stoke.load_embeddings(out)
    assert rows.dtype == np.float16 and rows.shape == (600, 16)
    norms = np.linalg.norm(rows.to_numpy().astype(np.float32), axis=1)
    assert not np.allclose(norms, 1.0, atol=1e-3)  # --no-normalize: the model's Normalize is off
