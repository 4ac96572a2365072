"""Compares `stoke tokenize` with the reference implementations on every text of
the fixture corpus (24,400 texts in 7 languages), not only the 66 golden texts:
HF `tokenizers` (Rust) on tiny-bert's tokenizer.json, and SentencePiece's own
encoder + transformers' fairseq id mapping on tiny-xlmr. Exits 1 on any mismatch.

    python3 tests/peer/compare_corpus.py STOKE_BINARY FIXTURES_DIR
"""
import json
import os
import subprocess
import sys
import tempfile


def stoke_ids(binary, model, corpus):
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as out:
        subprocess.run([binary, "tokenize", "--quiet", "--no-truncation", "--model", model, "--input", corpus,
                        "--output", out.name], check=True)
        with open(out.name, encoding="utf-8") as f:
            return [json.loads(line)["ids"] for line in f]


def main():
    binary, fixtures = sys.argv[1], sys.argv[2]
    corpus = os.path.join(fixtures, "corpus", "fortunes-multilingual.jsonl")
    with open(corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]

    import tokenizers
    import sentencepiece as spm
    failures = 0
    bert = os.path.join(fixtures, "models", "tiny-bert")
    hf = tokenizers.Tokenizer.from_file(os.path.join(bert, "tokenizer.json"))
    ours = stoke_ids(binary, bert, corpus)
    bad = [i for i, t in enumerate(texts) if hf.encode(t).ids != ours[i]]
    print(f"tiny-bert vs tokenizers {tokenizers.__version__}: {len(texts) - len(bad)}/{len(texts)} identical")
    failures += len(bad)

    xlmr = os.path.join(fixtures, "models", "tiny-xlmr")
    sp = spm.SentencePieceProcessor(model_file=os.path.join(xlmr, "sentencepiece.bpe.model"))
    ours = stoke_ids(binary, xlmr, corpus)
    want = [[0] + [i + 1 if i else 3 for i in sp.encode(t)] + [2] for t in texts]
    bad_x = [i for i in range(len(texts)) if want[i] != ours[i]]
    print(f"tiny-xlmr vs sentencepiece {spm.__version__}: {len(texts) - len(bad_x)}/{len(texts)} identical")
    failures += len(bad_x)
    for i in (bad + bad_x)[:5]:
        print("  mismatch on text", i, repr(texts[i][:80]))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
