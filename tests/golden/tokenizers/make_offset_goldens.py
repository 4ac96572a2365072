"""Token offsets goldens for every tokenizer with model goldens.

Run from the repository root with the pinned oracle environment:

    python tests/golden/tokenizers/make_offset_goldens.py [FIXTURES_DIR]

FIXTURES_DIR defaults to ../shared/fixtures (relative to the repository root).
Pinned versions: transformers==5.24.0, tokenizers==0.23.3.

For the two fixture models (tiny-bert: WordPiece; tiny-xlmr: SentencePiece
Unigram from sentencepiece.bpe.model, converted by transformers) and every
folder of tests/golden/models (WordPiece, Unigram with a Precompiled
normalizer, byte-level BPE with RobertaProcessing's trim_offsets, Qwen2's
NFC + Split + ByteLevel BPE), every golden text without special tokens: the
ids and each token's offsets as transformers gives them
(return_offsets_mapping: character offsets), converted to byte offsets into
the text's UTF-8 (what TEI's /tokenize returns as start/stop). Where a folder
has a tokenizer.json, the Rust tokenizer loaded from that file alone (what
TEI runs) is checked to give the same ids and offsets. Writes
offsets.expected.jsonl beside this script, fixtures first, then the golden
models by name:
    {"model", "text": i, "ids": [...], "offsets": [[start, stop], ...]}
then the normalizers no golden model has (NFD, NFKC, NFKD, Lowercase,
StripAccents, Strip, Prepend, Replace), each put in front of the Unigram
(camembert) and the byte-level BPE (roberta) folders of this directory, as
"model": "FOLDER+VARIANT"; offsets_normalizers.json holds each variant's
normalizer (the Rust tokenizer from the edited tokenizer.json is the oracle).
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
GOLDEN_MODELS = os.path.join(ROOT, "tests", "golden", "models")


def byte_offsets(text, char_offsets):
    byte_at = [len(text[:k].encode("utf-8")) for k in range(len(text) + 1)]
    return [[byte_at[a], byte_at[b]] for a, b in char_offsets]


# Normalizers put in front of a Unigram and a byte-level BPE tokenizer.json.
VARIANTS = {
    "nfd": {"type": "NFD"},
    "nfkc": {"type": "NFKC"},
    "nfkd-strip-lower": {"type": "Sequence", "normalizers": [
        {"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
    "replace-prepend-strip": {"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Replace", "pattern": {"String": "e"}, "content": "\u00eb\u00eb"},
        {"type": "Replace", "pattern": {"String": ", "}, "content": ";"},
        {"type": "Prepend", "prepend": "\u2581"}]},
}
VARIANT_BASES = ["camembert", "roberta"]


def main():
    with open(os.path.join(FIXTURES, "golden", "texts.jsonl"), encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    folders = [(m, os.path.join(FIXTURES, "models", m)) for m in ["tiny-bert", "tiny-xlmr"]]
    folders += [(m, os.path.join(GOLDEN_MODELS, m)) for m in sorted(os.listdir(GOLDEN_MODELS))]
    rows = []
    for model, path in folders:
        tok = AutoTokenizer.from_pretrained(path)
        rust_file = os.path.join(path, "tokenizer.json")
        rust = tokenizers.Tokenizer.from_file(rust_file) if os.path.exists(rust_file) else None
        for i, text in enumerate(texts):
            enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
            offsets = byte_offsets(text, enc["offset_mapping"])
            if rust is not None:
                r = rust.encode(text, add_special_tokens=False)
                assert r.ids == enc["input_ids"], (model, i)
                assert byte_offsets(text, r.offsets) == offsets, (model, i)
            rows.append({"model": model, "text": i, "ids": enc["input_ids"], "offsets": offsets})
    for base in VARIANT_BASES:
        with open(os.path.join(HERE, base, "tokenizer.json"), encoding="utf-8") as f:
            spec = json.load(f)
        for name, normalizer in VARIANTS.items():
            spec["normalizer"] = normalizer
            rust = tokenizers.Tokenizer.from_str(json.dumps(spec))
            for i, text in enumerate(texts):
                r = rust.encode(text, add_special_tokens=False)
                rows.append({"model": f"{base}+{name}", "text": i, "ids": r.ids,
                             "offsets": byte_offsets(text, r.offsets)})
    with open(os.path.join(HERE, "offsets_normalizers.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(VARIANTS, indent=1, sort_keys=True) + "\n")
    with open(os.path.join(HERE, "offsets.expected.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    print(f"{len(rows)} rows")


if __name__ == "__main__":
    main()
