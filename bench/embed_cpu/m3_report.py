"""m3_run.sh's table: stoke dense-only, stoke dense+sparse+colbert and FlagEmbedding's three-output encode.

    python m3_report.py RESULTS_DIR TEXTS MAX_LENGTH BATCH "LOAD_START" "LOAD_END" OTHERS_CPU_S

Reads RESULTS_DIR/runs.jsonl (one line per process: wall clock and peak RSS from /usr/bin/time, stoke's
manifest, FlagEmbedding's own timings), takes the median of the rounds per side, prints the table and the
ratios, and checks that both sides did the same work: dense cosine, sparse ids and weights, ColBERT rows.
"""
import json
import statistics
import sys
from pathlib import Path

import numpy as np


def cosines(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def main():
    res = Path(sys.argv[1])
    n, max_length, batch = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    load_start, load_end, others = sys.argv[5], sys.argv[6], sys.argv[7]
    runs = [json.loads(line) for line in open(res / "runs.jsonl")]
    for r in runs:
        if "manifest" in r:
            m = json.load(open(r["manifest"]))
            r["pipeline"] = m["run"]["pipeline_seconds"]
            r["device_busy"] = m["run"]["stages"]["device"]["busy"]
            r["tokens"] = m["counts"]["tokens"]
        else:
            d = r["detail"]
            r["encode"], r["probe"], r["tokens"] = d["encode_seconds"], d["probe_seconds"], d["tokens"]
            r["loop"] = d["encode_seconds"] - d["probe_seconds"]

    def med(kind, key):
        return statistics.median(r[key] for r in runs if r["kind"] == kind)

    def each(kind, key, fmt="{:.1f}"):
        return " / ".join(fmt.format(r[key]) for r in runs if r["kind"] == kind)

    tokens = next(r["tokens"] for r in runs if r["kind"] == "stoke-3out")
    fe = next(r["detail"] for r in runs if r["kind"] == "flagemb")
    rounds = sum(r["kind"] == "flagemb" for r in runs)
    print(f"{n} texts ({tokens} tokens after truncation), max length {max_length} on both sides, 2 threads each, "
          f"{rounds} interleaved rounds, medians (each round's value after it). FlagEmbedding: {fe['impl']}, "
          f"{fe['blas']}, batch_size {batch}. Load average at the start {load_start}, at the end {load_end}; "
          f"other processes used {others} CPU s during the run.\n")
    print("| run | wall s (whole process) | texts/s | pipeline / encode s | texts/s (pipeline / encode) | peak RSS |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, label in (("stoke-dense", "stoke, dense"), ("stoke-3out", "stoke, dense+sparse+colbert")):
        w, p = med(kind, "wall"), med(kind, "pipeline")
        print(f"| {label} | {w:.1f} ({each(kind, 'wall')}) | {n / w:.2f} | {p:.1f} ({each(kind, 'pipeline')}) | "
              f"{n / p:.2f} | {med(kind, 'peak_rss_mib'):,.0f} MiB |")
    w, e, lp = med("flagemb", "wall"), med("flagemb", "encode"), med("flagemb", "loop")
    print(f"| FlagEmbedding, dense+sparse+colbert | {w:.1f} ({each('flagemb', 'wall')}) | {n / w:.2f} | "
          f"{e:.1f} ({each('flagemb', 'encode')}); without its probe pass {lp:.1f} | {n / e:.2f}; {n / lp:.2f} | "
          f"{med('flagemb', 'peak_rss_mib'):,.0f} MiB |")
    sd, s3 = med("stoke-dense", "wall"), med("stoke-3out", "wall")
    pd, p3 = med("stoke-dense", "pipeline"), med("stoke-3out", "pipeline")
    print()
    print(f"- stoke 3-out / dense-only: **{s3 / sd:.3f}x** wall ({p3 / pd:.3f}x pipeline; per round "
          + ", ".join(f"{a['wall'] / b['wall']:.3f}" for a, b in zip(
              [r for r in runs if r["kind"] == "stoke-3out"], [r for r in runs if r["kind"] == "stoke-dense"]))
          + "); target <= 1.1x")
    print(f"- FlagEmbedding 3-out / stoke 3-out: **{w / s3:.2f}x** whole process; {e / p3:.2f}x encode vs pipeline; "
          f"{lp / p3:.2f}x without FlagEmbedding's probe pass; target >= 2x")
    print(f"- FlagEmbedding's probe pass (its first, longest batch run twice): {med('flagemb', 'probe'):.1f} s; "
          f"model load incl. imports {statistics.median(r['detail']['load_seconds'] for r in runs if r['kind'] == 'flagemb'):.1f} s")

    # ---- same work? -------------------------------------------------------------------------------------
    # Compared on the texts both tokenizers cut into the same ids; the others are named (SentencePiece and
    # Hugging Face's Unigram can break a Viterbi tie differently: stoke follows sentencepiece.bpe.model).
    s = res / "stoke-3out-1"
    f = res / "flagemb-1"
    s_ids = [json.loads(line)["ids"] for line in open(res / "stoke-ids.jsonl")]
    f_ids = [json.loads(line)["ids"] for line in open(f / "ids.jsonl")]
    same = [i for i in range(n) if s_ids[i] == f_ids[i]]
    other = [i for i in range(n) if s_ids[i] != f_ids[i]]
    sdense = np.load(s / "embeddings-00000.npy")
    cos = cosines(sdense, np.load(f / "dense.npy"))
    same_dense = np.array_equal(sdense, np.load(res / "stoke-dense-1" / "embeddings-00000.npy"))
    si, sv, sp = (np.load(s / f"sparse-00000.{k}.npy") for k in ("indices", "values", "indptr"))
    fi, fv, fp = (np.load(f / f"sparse.{k}.npy") for k in ("indices", "values", "indptr"))
    sc, so = np.load(s / "colbert-00000.npy"), np.load(s / "colbert-00000.offsets.npy")
    fc, fo = np.load(f / "colbert.npy"), np.load(f / "colbert.offsets.npy")
    ids_equal, worst_w, col_min = 0, 0.0, 1.0
    for i in same:
        a_i, a_v = si[sp[i]:sp[i + 1]].astype(np.int64), sv[sp[i]:sp[i + 1]]
        b_i, b_v = fi[fp[i]:fp[i + 1]], fv[fp[i]:fp[i + 1]]
        if np.array_equal(a_i, b_i):
            ids_equal += 1
            if len(a_v):
                worst_w = max(worst_w, float(np.max(np.abs(a_v - b_v) / np.abs(b_v))))
        if so[i + 1] - so[i] == fo[i + 1] - fo[i] and so[i + 1] > so[i]:
            col_min = min(col_min, float(np.min(cosines(sc[so[i]:so[i + 1]], fc[fo[i]:fo[i + 1]]))))
    print(f"- same work, on the {len(same)} of {n} texts whose token ids agree: dense min cosine(stoke, FlagEmbedding) "
          f"{float(np.min(cos[same])):.6f} (>= 0.9999: {bool(np.min(cos[same]) >= 0.9999)}); sparse ids equal in "
          f"{ids_equal} of {len(same)} rows, max relative weight difference {worst_w:.1e}; ColBERT min cosine "
          f"{col_min:.6f} ({sc.shape[1]} wide); stoke's dense rows bytewise equal with and without the heads: {same_dense}")
    for i in other:
        k = next(j for j, (a, b) in enumerate(zip(s_ids[i], f_ids[i])) if a != b)
        print(f"- text {i}: token ids differ from position {k} (stoke {s_ids[i][k:k + 3]}, FlagEmbedding's tokenizer "
              f"{f_ids[i][k:k + 3]}); its dense cosine {float(cos[i]):.6f}")

if __name__ == "__main__":
    main()
