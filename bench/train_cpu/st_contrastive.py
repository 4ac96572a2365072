"""The sentence-transformers side of bench/train_cpu/contrastive.sh, and the
data and the table it needs.

    python3 st_contrastive.py data FIXTURES_DIR OUT_DIR [N_PAIRS]
    PY st_contrastive.py train --model DIR --train PAIRS.jsonl --output OUT \\
        --loss mnrl|cached --batch-size B --steps N [--mini-batch-size 32] [--threads 2] [--lr 5e-5]
    python3 st_contrastive.py report RESULTS_DIR MODEL_DIR IDS.jsonl SECONDS [OTHERS_CPU_SECONDS]

data (numpy only): OUT_DIR/minilm-l6/, an embedding model of MiniLM-L6 size
(hidden 384, 6 layers, 12 heads, intermediate 1536, the tiny-bert fixture's
vocabulary and tokenizer files, BertModel tensor names, Transformer + mean
pooling in sentence-transformers layout, max_seq_length 128), built by
bench/embed_cpu/make_models.py with the seed of bench/train_cpu's classifier;
and OUT_DIR/pairs.jsonl: N_PAIRS (4096) records {"anchor", "positive"}, the
first and the second half of one text of the multilingual fortunes corpus
(cut at the whitespace nearest the middle; at the middle character where a
text has none, as Chinese), texts of at least 40 characters, no half
repeated anywhere in the file, sampled and ordered by a seeded shuffle.

train (the venv with sentence-transformers, datasets, accelerate): one
training run as its documentation writes one: SentenceTransformer(DIR) on
the CPU, a datasets.Dataset of the two columns,
SentenceTransformerTrainer with MultipleNegativesRankingLoss (--loss mnrl)
or CachedMultipleNegativesRankingLoss(mini_batch_size) (--loss cached),
batch_sampler NO_DUPLICATES, max_steps, learning rate, everything else the
trainer's defaults (AdamW, linear schedule, no warmup, weight decay 0, clip
1.0, seed 42, fp32, the config's dropout); then the model saved to
OUT/final, as `stoke train` saves its final model. torch runs on --threads
threads. Prints one JSON line: the trainer's own metrics (train_runtime,
train_samples_per_second), the seconds of each phase of the process (imports,
model load, dataset, trainer set-up, train, save), the versions.

report: reads RESULTS_DIR/runs.jsonl (one line per timed process, from
contrastive.sh: wall seconds and peak RSS from /usr/bin/time -v, and the
stoke run.json or the peer's JSON line) and prints the table.
"""
import argparse
import json
import os
import random
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

SIZE = "minilm-l6"
SEED = 10  # bench/train_cpu/make_data.py's weights seed
DATA_SEED = 0
MIN_CHARS = 40
TARGET_SPEED, TARGET_MEMORY = 2.0, 0.5  # the cached case: stoke/ST samples/s >= 2, peak memory <= 0.5


# ---- data -----------------------------------------------------------------------

def halves(text):
    """The text cut in two at the whitespace nearest its middle (its middle
    character when it has none), both parts stripped."""
    t = text.strip()
    mid = len(t) // 2
    cuts = [i for i, c in enumerate(t) if c.isspace() and 0 < i < len(t) - 1]
    cut = min(cuts, key=lambda i: (abs(i - mid), i)) if cuts else mid
    return t[:cut].strip(), t[cut:].strip()


def make_pairs(corpus, out_path, n):
    with open(corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    order = list(range(len(texts)))
    random.Random(DATA_SEED).shuffle(order)
    seen, pairs = set(), []
    for i in order:
        if len(pairs) == n:
            break
        if len(texts[i].strip()) < MIN_CHARS:
            continue
        a, p = halves(texts[i])
        if not a or not p or a in seen or p in seen or a == p:
            continue
        seen.update((a, p))
        pairs.append((a, p))
    with open(out_path + ".tmp", "w", encoding="utf-8") as f:
        for a, p in pairs:
            f.write(json.dumps({"anchor": a, "positive": p}, ensure_ascii=False) + "\n")
    os.replace(out_path + ".tmp", out_path)
    return len(pairs)


def cmd_data(argv):
    fixtures, out = argv[0], argv[1]
    n = int(argv[2]) if len(argv) > 2 else 4096
    sys.path.insert(0, os.path.join(HERE, "..", "embed_cpu"))
    import make_models  # noqa: E402  (bench/embed_cpu/make_models.py: config, initialisation, writer)

    os.makedirs(out, exist_ok=True)
    d, made = make_models.make_model(os.path.join(fixtures, "models", "tiny-bert"), out, SIZE, SEED)
    print(f"st_contrastive: {d} {'written' if made else 'up to date'}")
    path = os.path.join(out, "pairs.jsonl")
    got = make_pairs(os.path.join(fixtures, "corpus", "fortunes-multilingual.jsonl"), path, n)
    print(f"st_contrastive: {path} ({got} pairs)")
    if got < n:
        sys.exit(f"st_contrastive: only {got} pairs of the {n} asked")


# ---- the sentence-transformers run -------------------------------------------------

def cmd_train(argv):
    t_start = time.perf_counter()
    ap = argparse.ArgumentParser(prog="st_contrastive.py train")
    ap.add_argument("--model", required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--loss", choices=("mnrl", "cached"), required=True)
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--mini-batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=5e-5)
    a = ap.parse_args(argv)

    import torch
    torch.set_num_threads(a.threads)
    import datasets
    import sentence_transformers
    import transformers
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import (CachedMultipleNegativesRankingLoss,
                                                                   MultipleNegativesRankingLoss)
    t_import = time.perf_counter()

    model = SentenceTransformer(a.model, device="cpu")
    t_load = time.perf_counter()

    with open(a.train, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    train = datasets.Dataset.from_dict({"anchor": [r["anchor"] for r in rows],
                                        "positive": [r["positive"] for r in rows]})
    t_data = time.perf_counter()

    if a.loss == "mnrl":
        loss = MultipleNegativesRankingLoss(model)
    else:
        loss = CachedMultipleNegativesRankingLoss(model, mini_batch_size=a.mini_batch_size)
    args = SentenceTransformerTrainingArguments(
        output_dir=a.output,
        per_device_train_batch_size=a.batch_size,
        max_steps=a.steps,
        learning_rate=a.lr,
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        use_cpu=True,
        save_strategy="no",  # the final model is saved below; stoke writes no checkpoint either (--save-every 0)
        report_to="none",
        disable_tqdm=True,  # stoke runs --quiet
    )
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=train, loss=loss)
    # Counts what the encoder is given (cheap: two host-side sums per forward,
    # no device on the CPU): token slots (padding included) and real tokens.
    seen = {"forwards": 0, "slots": 0, "real": 0}

    def count(_module, args):
        f = args[0]
        seen["forwards"] += 1
        seen["slots"] += int(f["input_ids"].numel())
        seen["real"] += int(f["attention_mask"].sum())

    model[0].register_forward_pre_hook(count)
    t_setup = time.perf_counter()
    rss_setup = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # peak so far (KiB on Linux): imports + model

    out = trainer.train()
    t_train = time.perf_counter()
    model.save_pretrained(os.path.join(a.output, "final"))
    t_save = time.perf_counter()

    m = out.metrics
    print(json.dumps({
        "impl": f"sentence-transformers {sentence_transformers.__version__} SentenceTransformerTrainer",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "sentence_transformers": sentence_transformers.__version__, "datasets": datasets.__version__,
                     "accelerate": __import__("accelerate").__version__},
        "loss_class": type(loss).__name__, "mini_batch_size": a.mini_batch_size if a.loss == "cached" else None,
        "batch_size": a.batch_size, "steps": out.global_step, "threads": torch.get_num_threads(),
        "train_runtime": m.get("train_runtime"), "train_samples_per_second": m.get("train_samples_per_second"),
        "train_loss": m.get("train_loss"),
        "dropout": [model[0].auto_model.config.hidden_dropout_prob,
                    model[0].auto_model.config.attention_probs_dropout_prob],
        "max_seq_length": model.max_seq_length,
        "peak_rss_mib_before_train": rss_setup,
        "encoder_forwards": seen["forwards"], "token_slots": seen["slots"], "real_tokens_forwarded": seen["real"],
        "phases": {"imports": t_import - t_start, "model_load": t_load - t_import, "dataset": t_data - t_load,
                   "trainer_setup": t_setup - t_data, "train": t_train - t_setup, "save": t_save - t_train},
    }))


# ---- the table -------------------------------------------------------------------

def cmd_report(argv):
    res, model_dir, ids_path, total_s = argv[0], argv[1], argv[2], int(argv[3])
    others_s = float(argv[4]) if len(argv) > 4 else None
    sys.path.insert(0, os.path.join(HERE, "..", "common"))
    from cpu_load import load_line  # noqa: E402  (bench/common/cpu_load.py)

    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    with open(ids_path) as f:
        lengths = [len(json.loads(line)["ids"]) for line in f if line.strip()]
    runs = [json.loads(line) for line in open(os.path.join(res, "runs.jsonl")) if line.strip()]
    cases = []
    for r in runs:
        if r["case"] not in cases:
            cases.append(r["case"])

    rows, notes = [], []
    for case in cases:
        s = next((r for r in runs if r["case"] == case and r["kind"] == "stoke"), None)
        t = next((r for r in runs if r["case"] == case and r["kind"] == "st"), None)
        label = {"mnrl": "mnrl, batch 64", "cached": "cached, batch 256"}.get(case, case)
        if case == "cached" and s is not None and s.get("mini_batch_tokens"):
            label += f" ({s['mini_batch_tokens']} tok / {(t or {}).get('mini_batch_size') or '-'})"
        row = {"case": label}
        for side, r in (("stoke", s), ("st", t)):
            if r is None:
                continue
            row[side + "_status"] = r["status"]
            if r["status"] != 0:  # no numbers from a failed run
                continue
            row[side + "_wall"], row[side + "_samples"] = r["wall"], r["samples"]
            row[side + "_rss"] = None if r["max_rss_kb"] is None else r["max_rss_kb"] / 1024
            row[side + "_sps"] = r["samples"] / r["wall"]
        if s is not None and s["status"] == 0:
            with open(s["run"]) as f:
                run = json.load(f)
            tp = run.get("throughput", {})
            row["stoke_inner"] = tp.get("samples_per_s")
            row["stoke_train_s"] = tp.get("train_seconds")
            row["stoke_steps"] = run.get("steps")
            fin = run.get("final") if isinstance(run.get("final"), dict) else {}
            row["stoke_loss"] = fin.get("loss")
            row["stoke_mbt"] = s.get("mini_batch_tokens")
            row["stoke_tokens"] = tp.get("tokens")
            if run.get("steps") != s["steps"]:
                notes.append(f"{case}: stoke ran {run.get('steps')} steps, {s['steps']} asked  MISMATCH")
            row["stoke_dropout"] = run.get("settings", {}).get("dropout")
        if t is not None and t["status"] == 0 and t.get("peer"):
            p = t["peer"]
            row["st_inner"] = p.get("train_samples_per_second")
            row["st_train_s"] = p.get("train_runtime")
            row["st_loss"] = p.get("train_loss")
            row["st_phases"] = p.get("phases")
            row["st_impl"], row["st_versions"] = p.get("impl"), p.get("versions")
            row["st_dropout"] = p.get("dropout")
            row["st_rss_before"] = p.get("peak_rss_mib_before_train")
            row["st_fwd"] = (p.get("encoder_forwards"), p.get("token_slots"), p.get("real_tokens_forwarded"))
            if p.get("steps") != t["steps"]:
                notes.append(f"{case}: ST ran {p.get('steps')} steps, {t['steps']} asked  MISMATCH")
        if s and t and s["samples"] != t["samples"]:
            notes.append(f"{case}: samples stoke {s['samples']} vs ST {t['samples']}  MISMATCH")
        for side, r in (("stoke", s), ("ST", t)):
            if r is not None and r["status"] != 0:
                notes.append(f"{case}: {side} exited with status {r['status']} (see {r.get('log', 'its log')})")
        rows.append(row)

    f1 = lambda x: "-" if x is None else f"{x:,.1f}"
    f0 = lambda x: "-" if x is None else f"{x:,.0f}"
    f4 = lambda x: "-" if x is None else f"{x:.4f}"
    q = lambda a, b: None if a is None or b is None or b == 0 else a / b
    n_tok = sum(lengths)
    print()
    print(f"CPU contrastive fine-tuning: a MiniLM-L6-size BERT embedding model ({cfg['num_hidden_layers']} layers, "
          f"hidden {cfg['hidden_size']}, mean pooling), anchor/positive pairs (halves of fortunes), max length 128, "
          f"{len(lengths) // 2:,} pairs in the file ({n_tok / len(lengths):.1f} tokens a text on average), fp32, "
          "dropout 0.1; stoke with its default threads, ST on 2 torch threads")
    hdr = (f"{'case':<33} | {'stoke':>7} {'ST':>7} {'ratio':>6} | {'stoke':>7} {'ST':>7} {'ratio':>6} | "
           f"{'stoke':>6} {'ST':>6} | {'stoke':>6} {'ST':>6}")
    print(f"{'':<34}| {'samples/s, whole process':^22} | {'peak memory (RSS MiB)':^22} | {'trainer samples/s':^13} | "
          f"{'wall s':^13}")
    print(hdr)
    print("-" * len(hdr))
    fr = lambda x: "-" if x is None else f"{x:.2f}"
    for r in rows:
        r["sps_ratio"] = q(r.get("stoke_sps"), r.get("st_sps"))
        r["rss_ratio"] = q(r.get("stoke_rss"), r.get("st_rss"))
        print(f"{r['case']:<33} | {f1(r.get('stoke_sps')):>7} {f1(r.get('st_sps')):>7} {fr(r['sps_ratio']):>6} | "
              f"{f0(r.get('stoke_rss')):>7} {f0(r.get('st_rss')):>7} {fr(r['rss_ratio']):>6} | "
              f"{f1(r.get('stoke_inner')):>6} {f1(r.get('st_inner')):>6} | "
              f"{f1(r.get('stoke_wall')):>6} {f1(r.get('st_wall')):>6}")
    print()
    print("runs")
    for r in rows:
        parts = []
        if r.get("stoke_steps") is not None:
            mbt = f", --mini-batch-tokens {r['stoke_mbt']}" if r.get("stoke_mbt") else ""
            parts.append(f"stoke {r['stoke_steps']} steps{mbt}: train_seconds {f1(r.get('stoke_train_s'))} of "
                         f"{f1(r.get('stoke_wall'))} wall, final loss {f4(r.get('stoke_loss'))}, "
                         f"dropout {r.get('stoke_dropout')}")
        if r.get("st_phases"):
            ph = r["st_phases"]
            parts.append("ST: " + ", ".join(f"{k} {v:.1f}" for k, v in ph.items())
                         + f" s of {f1(r.get('st_wall'))} wall, train_runtime {f1(r.get('st_train_s'))}, "
                         f"train_loss {f4(r.get('st_loss'))}, dropout {r.get('st_dropout')}, "
                         f"peak RSS before training (imports, model) {f0(r.get('st_rss_before'))} MiB")
        print(f"  {r['case']}: " + "; ".join(parts))
        fwd, tok = r.get("st_fwd"), r.get("stoke_tokens")
        if fwd and all(x is not None for x in fwd) and fwd[2]:
            line = (f"    ST's encoder forwards: {fwd[0]}, over {fwd[1]:,} token slots for {fwd[2]:,} real tokens "
                    f"(padding: {fwd[1] / fwd[2]:.2f}x)")
            if tok:
                line += f"; the real tokens of the batches: {tok:,} (stoke's run.json), so ST computed ~{fwd[1] / tok:.2f}x that (other batches: about the same counts)"
            print(line)
    if notes:
        print()
        print("checks")
        for n in notes:
            print("  " + n)
    cached = next((r for r in rows if r["case"].startswith("cached")), None)
    if cached and cached.get("rss_ratio") is None:
        cached = None
    print()
    if cached and q(cached.get("stoke_sps"), cached.get("st_sps")) is not None:
        sp, mem = cached["sps_ratio"], cached["rss_ratio"]
        ok = sp >= TARGET_SPEED and mem <= TARGET_MEMORY
        print(f"target (cached case): stoke/ST samples/s >= {TARGET_SPEED:.1f} and peak memory <= {TARGET_MEMORY:.1f}: "
              f"{sp:.2f} and {mem:.2f}: {'met' if ok else 'NOT met'}")
    versions = next((r["st_versions"] for r in rows if r.get("st_versions")), None)
    if versions:
        print("peer: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print("measured: samples/s = pairs trained (steps x batch) / the whole process's wall time (start to exit:")
    print("  imports, model load, data reading and tokenization, training, saving the final model), peak memory =")
    print("  /usr/bin/time -v's maximum resident set size; trainer samples/s = stoke run.json throughput.samples_per_s")
    print("  (its training loop), ST TrainOutput.metrics train_samples_per_second (trainer.train()'s own clock).")
    print(load_line(total_s, others_s))


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("data", "train", "report"):
        sys.exit(__doc__)
    {"data": cmd_data, "train": cmd_train, "report": cmd_report}[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
