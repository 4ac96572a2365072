"""Token offsets goldens for the two fixture models.

Run from the repository root with the pinned oracle environment:

    python tests/golden/tokenizers/make_offset_goldens.py [FIXTURES_DIR]

FIXTURES_DIR defaults to ../shared/fixtures (relative to the repository root).
Pinned versions: transformers==5.24.0, tokenizers==0.23.3.

For tiny-bert (WordPiece, BertNormalizer) and tiny-xlmr (SentencePiece
Unigram with its precompiled charsmap), every golden text without special
tokens: the ids and each token's offsets as transformers gives them
(return_offsets_mapping: character offsets), converted to byte offsets into
the text's UTF-8 (what TEI's /tokenize returns as start/stop). Writes
offsets.expected.jsonl beside this script:
    {"model", "text": i, "ids": [...], "offsets": [[start, stop], ...]}
"""

import json
import os
import sys

import tokenizers
import transformers
from transformers import AutoTokenizer

assert transformers.__version__ == "5.24.0", transformers.__version__
assert tokenizers.__version__ == "0.23.3", tokenizers.__version__

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FIXTURES = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "fixtures")


def main():
    with open(os.path.join(FIXTURES, "golden", "texts.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    rows = []
    for model in ["tiny-bert", "tiny-xlmr"]:
        tok = AutoTokenizer.from_pretrained(os.path.join(FIXTURES, "models", model))
        for i, text in enumerate(texts):
            enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
            byte_at = [len(text[:k].encode("utf-8")) for k in range(len(text) + 1)]
            offsets = [[byte_at[a], byte_at[b]] for a, b in enc["offset_mapping"]]
            rows.append({"model": model, "text": i, "ids": enc["input_ids"], "offsets": offsets})
    with open(os.path.join(HERE, "offsets.expected.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"{len(rows)} rows")


if __name__ == "__main__":
    main()
