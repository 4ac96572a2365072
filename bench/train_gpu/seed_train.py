#!/usr/bin/env python3
"""The seed's two PyTorch training loops on the classifier make_classifier.py
wrote, with transformers' BertForSequenceClassification, timed the same way:

  --loop first   as the seed first wrote it: fp32, AdamW lr 2e-5, batch 16,
                 every step reads the loss and the batch accuracy with
                 .item() (two host syncs per step)
  --loop fixed   the seed's fix: bf16 autocast (f32 master weights), batch
                 64, lr 8e-5 (scaled with the batch), loss and accuracy summed
                 on the device, read once at the end (one host sync per run)
  --loop first,fixed   both, in that order, in one process (scripts/gpu-check.sh:
                 one interpreter start and one model load instead of two); each
                 loop starts from the same initial weights and seed, and each
                 loop's JSON is written as soon as it ends

Both: shuffled records in a seeded order, padding to the batch's longest
(max --max-length tokens), dropout on (model.train()), no clipping, constant
learning rate. --warmup steps run first (not timed; the weights are then put
back). Prints and writes (--out; with several loops it holds "{loop}") one
JSON object per loop: samples_per_s, tokens_per_s (real tokens), steps,
seconds, host_syncs, final_loss (the last step's), losses (every timed step's
loss, for the curve comparison), tokens, params, flops_per_step_mean
(6 x params x padded tokens, for MFU).

--matmul-out FILE first measures the bf16 matmul rate (bench/embed_gpu/
matmul_rate.py's measure(), --matmul-n N) before transformers is imported or
the data read: the MFU denominator, in the same interpreter; a failure there
is printed and the loops still run.

    python3 seed_train.py --dir DIR --loop first|fixed|first,fixed --device cuda|cpu [--steps 200]
        [--out FILE] [--matmul-n 8192 --matmul-out FILE]
"""
import argparse
import json
import os
import random
import sys
import time
import traceback

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def matmul(n, device, out):
    sys.path.insert(0, os.path.join(HERE, "..", "embed_gpu"))
    try:
        import matmul_rate  # bench/embed_gpu/matmul_rate.py

        res = matmul_rate.measure(n, device)
        with open(out, "w") as f:
            json.dump(res, f, indent=1)
    except Exception:  # the loops below are still worth their numbers
        traceback.print_exc()
        print("seed_train: the matmul rate failed (above); the training loops run anyway", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, help="make_classifier.py's --out")
    ap.add_argument("--loop", required=True, help="first, fixed, or first,fixed")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=None, help="default: 16 (first), 64 (fixed)")
    ap.add_argument("--lr", type=float, default=None, help="default: 2e-5 (first), 8e-5 (fixed)")
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--matmul-n", type=int, default=8192)
    ap.add_argument("--matmul-out", default=None)
    a = ap.parse_args()
    loops = a.loop.split(",")
    if not loops or any(l not in ("first", "fixed") for l in loops):
        sys.exit(f"seed_train: --loop {a.loop}: want first, fixed or first,fixed")
    if a.out and len(loops) > 1 and "{loop}" not in a.out:
        sys.exit("seed_train: with several loops, --out must hold {loop}")
    if a.matmul_out:
        matmul(a.matmul_n, a.device, a.matmul_out)

    from transformers import AutoTokenizer, BertForSequenceClassification

    dev = torch.device(a.device)
    model_dir = os.path.join(a.dir, "model")
    with open(os.path.join(a.dir, "train.jsonl"), encoding="utf-8") as f:
        recs = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(model_dir, "config.json")) as f:
        label2id = json.load(f)["label2id"]
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = BertForSequenceClassification.from_pretrained(model_dir).to(dev)
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    params = sum(p.numel() for p in model.parameters())
    for loop in loops:
        res = run_loop(a, loop, dev, recs, label2id, tok, model, initial, params)
        print(json.dumps({k: v for k, v in res.items() if k != "losses"}), flush=True)
        if a.out:
            with open(a.out.replace("{loop}", loop), "w") as f:
                json.dump(res, f)


def run_loop(a, loop, dev, recs, label2id, tok, model, initial, params):
    torch.manual_seed(a.seed)
    model.load_state_dict(initial)
    model.train()
    first = loop == "first"
    B = a.batch_size or (16 if first else 64)
    lr = a.lr or (2e-5 if first else 8e-5)
    order = list(range(len(recs)))
    random.Random(a.seed).shuffle(order)
    batches = []
    for k in range(a.warmup + a.steps):
        idx = [order[(k * B + r) % len(order)] for r in range(B)]
        enc = tok([recs[i]["text"] for i in idx], padding=True, truncation=True, max_length=a.max_length,
                  return_tensors="pt")
        labels = torch.tensor([label2id[recs[i]["label"]] for i in idx])
        batches.append((enc["input_ids"].to(dev), enc["attention_mask"].to(dev), labels.to(dev),
                        int(enc["attention_mask"].sum()), enc["input_ids"].numel()))

    def run(steps, offset):
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
        syncs, losses_host = 0, []
        loss_sum = torch.zeros((), device=dev)
        correct = torch.zeros((), device=dev)
        losses_dev = []
        for k in range(steps):
            ids, mask, labels, _, _ = batches[offset + k]
            if first:
                out = model(input_ids=ids, attention_mask=mask, labels=labels)
                out.loss.backward()
                opt.step()
                opt.zero_grad()
                losses_host.append(out.loss.item())  # host sync 1
                (out.logits.argmax(-1) == labels).float().mean().item()  # host sync 2
                syncs += 2
            else:
                with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
                    out = model(input_ids=ids, attention_mask=mask, labels=labels)
                out.loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                d = out.loss.detach().float()
                loss_sum += d
                correct += (out.logits.argmax(-1) == labels).sum()
                losses_dev.append(d)
        if not first:
            losses_host = torch.stack(losses_dev).tolist() if losses_dev else []  # the one host sync
            syncs += 1
        return syncs, losses_host

    if a.warmup:
        run(a.warmup, 0)
        model.load_state_dict(initial)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    syncs, losses = run(a.steps, a.warmup)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    timed = batches[a.warmup:]
    tokens = sum(b[3] for b in timed)
    padded = sum(b[4] for b in timed)
    return {
        "loop": loop, "device": a.device, "batch_size": B, "lr": lr, "steps": a.steps, "seconds": seconds,
        "samples_per_s": a.steps * B / seconds, "tokens_per_s": tokens / seconds, "tokens": tokens,
        "padded_tokens": padded, "host_syncs": syncs, "host_syncs_per_step": syncs / a.steps,
        "final_loss": losses[-1] if losses else None, "losses": losses, "params": params,
        "flops_per_step_mean": 6.0 * params * padded / a.steps,
        "precision": "f32" if first else "bf16-autocast",
    }


if __name__ == "__main__":
    main()
