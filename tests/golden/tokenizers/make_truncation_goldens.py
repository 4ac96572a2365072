"""Left and right truncation goldens for the two fixture models.

Run from the repository root with the pinned oracle environment:

    python tests/golden/tokenizers/make_truncation_goldens.py [FIXTURES_DIR]

FIXTURES_DIR defaults to ../shared/fixtures (relative to the repository root).
Pinned versions: transformers==5.24.0, tokenizers==0.23.3.

For tiny-bert (WordPiece, tokenizer.json) and tiny-xlmr (SentencePiece
Unigram, sentencepiece.bpe.model), every golden text alone and paired with the
next text, truncated to a few max lengths on each side (transformers'
truncation_side, the Rust `tokenizers` library's truncation direction, which
TEI's truncation_direction sets), with special tokens, longest_first for
pairs. Writes truncation.expected.jsonl beside this script:
    {"model", "max_length", "side", "text": i, "pair": j or null, "ids": [...]}
and truncation_pairs.expected.jsonl: pairs of word lists of equal and
unequal length cut to odd and even budgets (the pair tie-break, both sides cut):
    {"model", "max_length", "side", "a": text, "b": text, "lengths": [na, nb], "ids": [...]}
Every id comes from transformers' (Rust-backed) tokenizers; stoke is not used.
The Rust tokenizer's own truncation is checked to give the same ids.
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
MAX_LENGTHS = [6, 16]


def main():
    with open(os.path.join(FIXTURES, "golden", "texts.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    rows = []
    for model in ["tiny-bert", "tiny-xlmr"]:
        tok = AutoTokenizer.from_pretrained(os.path.join(FIXTURES, "models", model))
        backend = tok.backend_tokenizer
        for side in ["left", "right"]:
            tok.truncation_side = side
            for max_length in MAX_LENGTHS:
                for i, text in enumerate(texts):
                    # transformers reads an empty second text as no pair at all: such pairs are left out.
                    nxt = (i + 1) % len(texts)
                    for pair in [None] + ([nxt] if text and texts[nxt] else []):
                        second = None if pair is None else texts[pair]
                        ids = tok(text, second, truncation="longest_first", max_length=max_length)["input_ids"]
                        # The Rust tokenizer, truncating on its own, agrees.
                        backend.enable_truncation(max_length, strategy="longest_first", direction=side)
                        rust = backend.encode(text, second).ids
                        backend.no_truncation()
                        assert rust == ids, (model, side, max_length, i, pair, rust, ids)
                        rows.append({"model": model, "max_length": max_length, "side": side, "text": i,
                                     "pair": pair, "ids": ids})
    with open(os.path.join(HERE, "truncation.expected.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"{len(rows)} rows")
    rows = []
    # The pair tie-break: sides of equal and unequal length, budgets (max
    # length less the special tokens) that leave an odd and an even number
    # of tokens to share, so that both sides are cut.
    words = [w for w in "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()]
    for model in ["tiny-bert", "tiny-xlmr"]:
        tok = AutoTokenizer.from_pretrained(os.path.join(FIXTURES, "models", model))
        backend = tok.backend_tokenizer
        specials = backend.num_special_tokens_to_add(True)
        for side in ["left", "right"]:
            tok.truncation_side = side
            for la, lb in [(6, 6), (7, 6), (6, 7), (9, 4), (4, 9), (8, 8)]:
                a, b = " ".join(words[:la]), " ".join(reversed(words[:lb]))
                na = len(backend.encode(a, add_special_tokens=False).ids)
                nb = len(backend.encode(b, add_special_tokens=False).ids)
                for budget in sorted({na + nb - 1, na + nb - 2, min(na, nb) + 1, min(na, nb), 5, 6}):
                    if budget <= 0 or budget >= na + nb:
                        continue
                    max_length = budget + specials
                    ids = tok(a, b, truncation="longest_first", max_length=max_length)["input_ids"]
                    backend.enable_truncation(max_length, strategy="longest_first", direction=side)
                    rust = backend.encode(a, b).ids
                    backend.no_truncation()
                    assert rust == ids, (model, side, max_length, a, b)
                    rows.append({"model": model, "max_length": max_length, "side": side, "a": a, "b": b,
                                 "lengths": [na, nb], "ids": ids})
    with open(os.path.join(HERE, "truncation_pairs.expected.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    print(f"{len(rows)} pair rows")


if __name__ == "__main__":
    main()
