"""Each corpus line's token count with a model's own tokenizer, at prepare
time, so the device call does not spend its clock counting.

    python3 corpus_lens.py MODEL_DIR CORPUS.jsonl OUT.json

MODEL_DIR: the tokenizer the benchmark's model copies (the tiny-bert
fixture's: bench/embed_gpu/make_model.py). Counts are what
sentence-transformers' tokenizer gives with special tokens, before
truncation: a record's count at max length M is min(count, M), since
truncation keeps the special tokens (make_texts.py applies it; st_baseline.py
checks its sample rows against the tokenizer there and counts everything
itself if any differs). OUT: {"tokenizer", "tokenizer_sha256",
"corpus_sha256", "lens": [one per non-blank line]}. Needs transformers.
"""
import hashlib
import json
import os
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    model_dir, corpus, out = sys.argv[1:]
    import transformers
    from transformers import AutoTokenizer

    transformers.utils.logging.set_verbosity_error()  # "longer than the maximum length": counted on purpose
    with open(corpus, "rb") as f:
        raw = f.read()
    texts = [json.loads(line)["text"] for line in raw.decode("utf-8").splitlines() if line.strip()]
    tok = AutoTokenizer.from_pretrained(model_dir)
    lens = [len(ids) for ids in tok(texts, truncation=False)["input_ids"]]
    tj = os.path.join(model_dir, "tokenizer.json")
    tsha = hashlib.sha256(open(tj, "rb").read()).hexdigest() if os.path.exists(tj) else None
    res = {"tokenizer": f"{os.path.basename(os.path.normpath(model_dir))} (transformers {transformers.__version__})",
           "tokenizer_sha256": tsha, "corpus_sha256": hashlib.sha256(raw).hexdigest(), "lens": lens}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".tmp", "w") as f:
        json.dump(res, f, separators=(",", ":"))
    os.replace(out + ".tmp", out)
    print(f"corpus_lens: {len(lens)} lines of {corpus}, {sum(lens)} tokens (max {max(lens)}) -> {out}")


if __name__ == "__main__":
    main()
