"""The GPU check's input: the fixture corpus replicated to N records.

    python3 make_texts.py CORPUS.jsonl N OUT.jsonl [K ROWS.json]

Writes N lines {"id": r, "text": ...} where record r is corpus line r mod L
(L = the corpus's non-blank lines, 24,400 for fortunes-multilingual): whole
copies of the corpus in order, the last one cut short. Ids are the record
numbers, so they are unique and equal to stoke's own record numbers.
With K, ROWS.json gets the K record numbers the stoke-vs-ST comparison checks:
spread evenly over the first copy of the corpus, so every language and length
class is in it (the first 1,000 records alone are all English).
Why replicate instead of sampling: a GPU needs far more than 24,400 short
texts to reach a steady state, and copies keep the corpus's mix of languages
and lengths exactly. Standard library only.
"""
import json
import os
import sys


def main():
    if len(sys.argv) not in (4, 6):
        sys.exit(__doc__)
    corpus, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    if not texts:
        sys.exit(f"make_texts: {corpus}: no records")
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        for r in range(n):
            f.write(json.dumps({"id": r, "text": texts[r % len(texts)]}, ensure_ascii=False) + "\n")
    os.replace(out + ".tmp", out)
    if len(sys.argv) == 6:
        k, span = int(sys.argv[4]), min(n, len(texts))
        with open(sys.argv[5], "w") as f:
            json.dump(sorted({i * span // k for i in range(min(k, span))}), f)
    print(f"make_texts: {out}: {n} records ({n / len(texts):.2f} copies of the {len(texts)}-text corpus), "
          f"{os.path.getsize(out) / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
