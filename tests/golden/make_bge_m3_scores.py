#!/usr/bin/env python3
"""What FlagEmbedding's BGEM3FlagModel.compute_score gives for query/passage pairs on the tiny bge-m3 that
make_bge_m3.py writes: the oracle of `stoke serve`'s /compute_score and /rerank on a bge-m3 model.

Writes tests/data/bge_m3_tiny/scores.json: the pairs, and per pair the five scores ("dense", "sparse",
"colbert", "sparse+dense", "colbert+sparse+dense") under the default weights and under [0.4, 0.2, 0.4].
Each pair is scored in a call of its own: compute_score pads a batch's passages with zero ColBERT vectors,
which take part in its max (a batch-dependent score); one pair alone has no padding, which is the score the
model defines and the one stoke gives. max_query_length = max_passage_length = the model's 64.

Run it in the venv of make_bge_m3.py (same pins), after make_bge_m3.py:
    .venv-flagemb/bin/python tests/golden/make_bge_m3_scores.py
Deterministic (one torch thread): a rerun writes the same bytes.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import sys
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"

import torch  # noqa: E402
import transformers  # noqa: E402

PINNED = {
    "FlagEmbedding": (importlib.metadata.version("FlagEmbedding"), "1.3.5"),
    "transformers": (transformers.__version__, "4.57.1"),
    "torch": (torch.__version__.split("+")[0], "2.15.0"),
}
REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "bge_m3_tiny"
MAX_LENGTH = 64
WEIGHTS = [0.4, 0.2, 0.4]


def main() -> None:
    wrong = {k: v for k, v in PINNED.items() if v[0] != v[1]}
    if wrong:
        sys.exit("wrong versions (have, want): " + json.dumps(wrong))
    torch.set_num_threads(1)
    from FlagEmbedding import BGEM3FlagModel

    texts = json.loads((DATA / "golden.json").read_text(encoding="utf-8"))["texts"]
    texts = [t for t in texts if t]  # the server refuses empty texts (400, as TEI)
    pairs = [[texts[i], texts[j]] for i in range(4) for j in range(len(texts)) if i != j][:24]
    model = BGEM3FlagModel(str(DATA / "model"), use_fp16=False, devices="cpu")

    def score(pair, weights):
        s = model.compute_score([pair], max_query_length=MAX_LENGTH, max_passage_length=MAX_LENGTH,
                                weights_for_different_modes=weights)
        return {k: float(v[0]) for k, v in s.items()}

    out = {
        "what": "BGEM3FlagModel(model, use_fp16=False, devices='cpu').compute_score([pair], max_query_length=64, "
                "max_passage_length=64, weights_for_different_modes=w), one pair per call",
        "versions": {k: v[0] for k, v in PINNED.items()},
        "weights": WEIGHTS,
        "pairs": pairs,
        "default": [score(p, None) for p in pairs],
        "weighted": [score(p, WEIGHTS) for p in pairs],
    }
    (DATA / "scores.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {DATA / 'scores.json'}: {len(pairs)} pairs")


if __name__ == "__main__":
    main()
