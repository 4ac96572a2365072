"""Peers for bench/tokenize: Hugging Face `tokenizers` (Rust core, PyPI) on the
BERT fixture's tokenizer.json, and SentencePiece's own Python encoder (Debian
python3-sentencepiece) on the XLM-R fixture. Prints one JSON line per run, in
the same format as bench_tokenize.

    python3 peers.py hf MODEL_DIR CORPUS.jsonl THREADS SECONDS
    python3 peers.py spm MODEL_DIR CORPUS.jsonl 1 SECONDS
"""
import json
import os
import sys
import time


def load_texts(corpus):
    with open(corpus, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def timed(encode_all, count_tokens, min_seconds):
    tokens = count_tokens(encode_all())  # warm-up pass, also counts tokens
    passes, start = 0, time.perf_counter()
    while True:
        encode_all()
        passes += 1
        secs = time.perf_counter() - start
        if secs >= min_seconds:
            return tokens, passes, secs


def main():
    kind, model_dir, corpus, threads, min_seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    texts = load_texts(corpus)
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    if kind == "hf":
        # Rayon reads its pool size once, at first use.
        os.environ["RAYON_NUM_THREADS"] = str(threads)
        os.environ["TOKENIZERS_PARALLELISM"] = "true" if threads > 1 else "false"
        import tokenizers
        tok = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        tok.no_truncation()
        tokens, passes, secs = timed(lambda: tok.encode_batch(texts), lambda encs: sum(len(e.ids) for e in encs), min_seconds)
        impl = "hf-tokenizers " + tokenizers.__version__
    else:
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "sentencepiece.bpe.model"))
        # + 2 special tokens per text, as stoke counts <s> and </s>. A list is
        # encoded on a thread pool whose size must be given, or it uses every core.
        tokens, passes, secs = timed(lambda: sp.encode(texts, num_threads=threads),
                                     lambda ids: sum(len(i) + 2 for i in ids), min_seconds)
        impl = "sentencepiece-python " + spm.__version__
    print(json.dumps({"impl": impl, "threads": threads, "texts": len(texts), "tokens": tokens, "bytes": nbytes,
                      "passes": passes, "seconds": secs, "tokens_per_s": tokens * passes / secs,
                      "mb_per_s": nbytes * passes / secs / 1e6}))


if __name__ == "__main__":
    main()
