#!/usr/bin/env bash
# Long documents, chunked and embedded, timed as the user waits (whole
# processes), stoke and its peer side by side on the same cores:
#   bench/pipeline/chunk_run.sh
# Documents of ~2,000 tokens (fortunes joined, paragraphs every fourth),
# chunks of at most 256 tokens overlapping by 32, on a MiniLM-L6-size model
# with random weights (bench/embed_cpu/make_models.py; the fixtures'
# tokenizer). Runs:
#   stoke embed --chunk-tokens 256 --chunk-overlap 32 --chunk-boundary word
#   stoke embed ... --late-chunking   (each document's chunks pooled from one pass)
#   LangChain's RecursiveCharacterTextSplitter (counting tokens with the
#   model's tokenizer) + SentenceTransformer.encode on its chunks
# Printed: texts/s (documents and chunks), the share of time chunking, the
# ratio. Environment: BENCH_DOCS [200], BENCH_THREADS [2], BENCH_PY
# [.venv-bench-st/bin/python], BENCH_BUILD [build/release].
set -euo pipefail
cd "$(dirname "$0")/../.."
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
py="${BENCH_PY:-.venv-bench-st/bin/python}"
bin="${BENCH_BUILD:-build/release}/apps/stoke/stoke"
docs="${BENCH_DOCS:-200}"
threads="${BENCH_THREADS:-2}"
work=build/bench-models/chunks
mkdir -p "$work"
"$py" bench/embed_cpu/make_models.py "$fixtures" build/bench-models 10 >/dev/null
model=build/bench-models/minilm-l6
"$py" - "$fixtures/corpus/fortunes-multilingual.jsonl" "$docs" "$work/docs.jsonl" <<'PY'
import json, sys
corpus, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
texts = [json.loads(l)["text"] for l in open(corpus, encoding="utf-8")]
with open(out, "w", encoding="utf-8") as f:
    k = 0
    for d in range(n):
        parts, size = [], 0
        while size < 7000:  # ~2,000 tokens with the fixtures' tokenizer
            t = texts[k % len(texts)]; k += 1
            parts.append(t + ("\n\n" if len(parts) % 4 == 3 else " "))
            size += len(t)
        f.write(json.dumps({"id": f"doc-{d}", "text": "".join(parts).strip()}, ensure_ascii=False) + "\n")
PY
timed() { /usr/bin/time -f '%e %M' -o "$work/time.txt" "$@" >/dev/null; cat "$work/time.txt"; }
flags=(--model "$model" --input "$work/docs.jsonl" --id-field id --max-length 512 --workers "$threads" --quiet
       --overwrite --chunk-tokens 256 --chunk-overlap 32 --chunk-boundary word)
read -r plain_s plain_kb < <(timed "$bin" embed "${flags[@]}" --output "$work/stoke")
read -r late_s late_kb < <(timed "$bin" embed "${flags[@]}" --output "$work/stoke-late" --late-chunking)
read -r peer_s peer_kb < <(timed "$py" bench/pipeline/chunk_peer.py "$model" "$work/docs.jsonl" 256 32 "$threads" "$work/peer.json")
"$py" - "$work" "$docs" "$plain_s" "$late_s" "$peer_s" "$plain_kb" "$late_kb" "$peer_kb" <<'PY'
import json, sys
work, docs = sys.argv[1], int(sys.argv[2])
plain_s, late_s, peer_s = map(float, sys.argv[3:6])
plain_kb, late_kb, peer_kb = map(int, sys.argv[6:9])
m = json.load(open(f"{work}/stoke/manifest.json"))
ml = json.load(open(f"{work}/stoke-late/manifest.json"))
peer = json.load(open(f"{work}/peer.json"))
chunks = m["counts"]["texts"]
tok = m["run"]["stages"]["tokenize"]["busy"]
print(f"{docs} documents, {m['counts']['tokens']} chunk tokens (stoke), {chunks} chunks (stoke), {peer['chunks']} (LangChain)")
print("| run | whole process s | documents/s | chunks/s | chunking share | peak RSS |")
print("|---|---|---|---|---|---|")
print(f"| stoke --chunk-tokens 256 --chunk-overlap 32 --chunk-boundary word | {plain_s:.1f} | {docs/plain_s:.1f} | "
      f"{chunks/plain_s:.0f} | {tok/plain_s:.0%} (tokenize + cut, beside the device) | {plain_kb/1024:.0f} MiB |")
print(f"| stoke ... --late-chunking | {late_s:.1f} | {docs/late_s:.1f} | {ml['counts']['texts']/late_s:.0f} | "
      f"{ml['run']['stages']['tokenize']['busy']/late_s:.0%} | {late_kb/1024:.0f} MiB |")
print(f"| {peer['impl']} | {peer_s:.1f} | {docs/peer_s:.1f} | {peer['chunks']/peer_s:.0f} | "
      f"{peer['split_seconds']/peer_s:.0%} (splitting, before encoding) | {peer_kb/1024:.0f} MiB |")
print(f"stoke / peer (documents/s, whole processes): {peer_s/plain_s:.2f}x; late chunking costs "
      f"{late_s/plain_s:.2f}x plain chunking's time")
PY
