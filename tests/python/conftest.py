"""Shared fixtures of the Python package's tests.

Environment:
  STOKE_FIXTURES        the shared fixtures folder (models, corpus); default ../shared/fixtures
  STOKE_CLI             the stoke binary (encode == `stoke embed`); default build/release/apps/stoke/stoke
  STOKE_ORACLE_PYTHON   a Python with sentence-transformers installed (the oracle comparisons);
                        their tests are skipped, saying so, without it
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stoke

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("STOKE_FIXTURES", REPO.parent / "shared" / "fixtures"))
CLI = Path(os.environ.get("STOKE_CLI", REPO / "build" / "release" / "apps" / "stoke" / "stoke"))

MODELS = ["tiny-bert", "tiny-xlmr"]


def model_dir(name: str) -> Path:
    path = FIXTURES / "models" / name
    if not path.is_dir():
        pytest.skip(f"fixture model {path} not found (set STOKE_FIXTURES)")
    return path


def corpus_texts(n: int, offset: int = 0) -> list:
    """The first n texts of the multilingual corpus (repeated when n is larger)."""
    path = FIXTURES / "corpus" / "fortunes-multilingual.jsonl"
    with open(path, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    out = []
    i = offset
    while len(out) < n:
        out.append(texts[i % len(texts)])
        i += 1
    return out


def golden_texts() -> list:
    with open(FIXTURES / "golden" / "texts.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def write_jsonl(path: Path, texts: list) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    return path


def run_cli(*args: str, env=None) -> subprocess.CompletedProcess:
    if not CLI.exists():
        pytest.skip(f"the stoke CLI {CLI} is not built (set STOKE_CLI)")
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, env=env, timeout=600)


def read_folder_rows(folder: Path) -> np.ndarray:
    m = json.loads((folder / "manifest.json").read_text())
    return np.concatenate([np.load(folder / s["embeddings"]) for s in m["shards"]])


@pytest.fixture(scope="session")
def bert() -> stoke.Model:
    return stoke.Model(model_dir("tiny-bert"), device="cpu")


@pytest.fixture(scope="session")
def xlmr() -> stoke.Model:
    return stoke.Model(model_dir("tiny-xlmr"), device="cpu")


@pytest.fixture()
def prompted_model_dir(tmp_path: Path) -> Path:
    """tiny-bert with named prompts and a default prompt name (config_sentence_transformers.json)."""
    dst = tmp_path / "tiny-bert-prompts"
    shutil.copytree(model_dir("tiny-bert"), dst)
    (dst / "config_sentence_transformers.json").write_text(
        json.dumps(
            {"prompts": {"query": "query: ", "document": "passage: ", "classify": "topic: "},
             "default_prompt_name": "classify"}
        )
    )
    return dst


def python_with(env_extra: dict) -> dict:
    env = dict(os.environ)
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env
