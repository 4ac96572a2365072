"""The peer of bench/pipeline/chunk_run.sh: LangChain's token-counting splitter
then sentence-transformers, as a RAG user chunks and embeds today (PyPI
langchain-text-splitters, torch and sentence-transformers; in .venv-bench-st).

    python chunk_peer.py MODEL_DIR DOCS.jsonl CHUNK_TOKENS OVERLAP THREADS OUT.json

RecursiveCharacterTextSplitter.from_huggingface_tokenizer counts tokens with
the model's own tokenizer (so chunks are at most CHUNK_TOKENS tokens, as
stoke's), then SentenceTransformer.encode(chunks, batch_size=32). Prints and
writes one JSON object: seconds splitting, seconds encoding, chunks, tokens.
The whole process (imports, model load) is timed by the caller.
"""
import json
import sys
import time


def main():
    model_dir, docs_path, n, overlap, threads, out = sys.argv[1:7]
    t0 = time.perf_counter()
    import torch
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from sentence_transformers import SentenceTransformer
    import sentence_transformers

    torch.set_num_threads(int(threads))
    docs = [json.loads(line)["text"] for line in open(docs_path, encoding="utf-8") if line.strip()]
    model = SentenceTransformer(model_dir, device="cpu")
    model.max_seq_length = int(n) + 2
    load_s = time.perf_counter() - t0
    t = time.perf_counter()
    splitter = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
        model.tokenizer, chunk_size=int(n), chunk_overlap=int(overlap))
    chunks = [c for d in docs for c in splitter.split_text(d)]
    split_s = time.perf_counter() - t
    t = time.perf_counter()
    model.encode(chunks, batch_size=32)
    encode_s = time.perf_counter() - t
    tokens = sum(len(i) for i in model.tokenizer(chunks, truncation=True, max_length=int(n) + 2)["input_ids"])
    from importlib.metadata import version

    r = {"impl": f"langchain-text-splitters {version('langchain-text-splitters')}"
                 f" + sentence-transformers {sentence_transformers.__version__} (torch {torch.__version__})",
         "load_seconds": load_s, "split_seconds": split_s, "encode_seconds": encode_s, "chunks": len(chunks),
         "tokens": tokens}
    json.dump(r, open(out, "w"))
    print(json.dumps(r))


if __name__ == "__main__":
    main()
