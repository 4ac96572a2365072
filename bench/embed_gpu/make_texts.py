"""The GPU check's input: the fixture corpus replicated to N records.

    python3 make_texts.py CORPUS.jsonl N OUT.jsonl [K ROWS.json]
        [--lens CORPUS-LENS.json --max-length 512 --stats STATS.json]

Writes N lines {"id": r, "text": ...} where record r is corpus line r mod L
(L = the corpus's non-blank lines, 24,400 for fortunes-multilingual): whole
copies of the corpus in order, the last one cut short. Ids are the record
numbers, so they are unique and equal to stoke's own record numbers.
With K, ROWS.json gets the K record numbers the stoke-vs-ST comparison checks:
spread evenly over the first copy of the corpus, so every language and length
class is in it (the first 1,000 records alone are all English).
Why replicate instead of sampling: a GPU needs far more than 24,400 short
texts to reach a steady state, and copies keep the corpus's mix of languages
and lengths exactly.

--lens (corpus_lens.py's output, made by `gpu-check.sh prepare` and carried
in .gpu/data) gives each corpus line's token count, so STATS.json gets the N
records' counts at --max-length without a tokenizer: texts, tokens,
at_max_len, token_weighted_len, and rows_lens (each ROWS record's count, for
st_baseline.py to check against the tokenizer). Counting 100k texts with the
tokenizer took ~12 s on 2 cores; this takes milliseconds. Standard library only.
"""
import argparse
import hashlib
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("n", type=int)
    ap.add_argument("out")
    ap.add_argument("k", type=int, nargs="?")
    ap.add_argument("rows", nargs="?")
    ap.add_argument("--lens", help="corpus_lens.py's JSON for this corpus")
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--stats", help="token counts of the N records (needs --lens)")
    a = ap.parse_args()
    if (a.k is None) != (a.rows is None):
        sys.exit(__doc__)
    with open(a.corpus, "rb") as f:
        raw = f.read()
    texts = [json.loads(line)["text"] for line in raw.decode("utf-8").splitlines() if line.strip()]
    if not texts:
        sys.exit(f"make_texts: {a.corpus}: no records")
    L = len(texts)
    with open(a.out + ".tmp", "w", encoding="utf-8") as f:
        lines = [json.dumps({"text": t}, ensure_ascii=False)[1:] for t in texts]  # '"text": ...}'
        for r in range(a.n):
            f.write(f'{{"id": {r}, {lines[r % L]}\n')
    os.replace(a.out + ".tmp", a.out)
    rows = None
    if a.k is not None:
        span = min(a.n, L)
        rows = sorted({i * span // a.k for i in range(min(a.k, span))})
        with open(a.rows, "w") as f:
            json.dump(rows, f)
    print(f"make_texts: {a.out}: {a.n} records ({a.n / L:.2f} copies of the {L}-text corpus), "
          f"{os.path.getsize(a.out) / 2**20:.1f} MiB")
    if a.lens and a.stats:
        with open(a.lens) as f:
            cl = json.load(f)
        sha = hashlib.sha256(raw).hexdigest()
        if cl.get("corpus_sha256") != sha or len(cl.get("lens", [])) != L:
            print(f"make_texts: {a.lens} is for another corpus (sha256 or line count differ): no token stats; "
                  "sentence-transformers counts them")
            return
        lens = [min(cl["lens"][r % L], a.max_length) for r in range(a.n)]
        tokens = sum(lens)
        stats = {"texts": a.n, "tokens": tokens, "max_length": a.max_length,
                 "at_max_len": sum(1 for x in lens if x >= a.max_length),
                 "mean_len": tokens / max(a.n, 1),
                 "token_weighted_len": sum(x * x for x in lens) / max(tokens, 1),
                 "rows_lens": [lens[r] for r in rows] if rows is not None else [],
                 "source": f"{os.path.basename(a.lens)} ({cl.get('tokenizer', '?')})"}
        with open(a.stats, "w") as f:
            json.dump(stats, f)
        print(f"make_texts: {tokens} tokens at max length {a.max_length} (mean {stats['mean_len']:.1f}), "
              f"from {a.lens}")


if __name__ == "__main__":
    main()
