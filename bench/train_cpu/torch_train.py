"""PyTorch eager peer for bench/train_cpu: fine-tuning steps of a
BertForSequenceClassification written in plain torch (bench/embed_cpu's
Bert encoder: post-LN, erf GELU, Q/K/V fused into one matmul; then the
pooler's tanh(dense(h[CLS])), dropout, the classifier, CrossEntropyLoss mean),
on token ids that `stoke tokenize` wrote, so tokenization is not timed and
both sides train on exactly the same ids.

    python3 torch_train.py --model DIR --train FILE.jsonl --ids IDS.jsonl --precision f32|bf16 \\
        [--threads 2] [--batch-size 32] [--steps 40] [--warmup 2] [--log-every 50] [--lr 5e-5]

What a step is, as HF Trainer runs it with its defaults: model.train() with
the config's dropout (0.1 hidden and attention, 0.1 before the classifier;
--dropout P sets all three, as `stoke train --dropout P` does),
loss.backward(), clip_grad_norm_(1.0), torch.optim.AdamW (betas 0.9/0.999,
eps 1e-8, weight decay 0) at a learning rate falling linearly to 0 over
--steps, zero_grad(set_to_none=True). bf16: torch.autocast("cpu",
torch.bfloat16) around forward and loss, f32 master weights and gradients.
The loss is summed on the side without a host read and read (.item()) every
--log-every steps and after the last one; interval_loss = the mean over the
steps after the last log read before the end (what a trainer's final log
line, and stoke's run.json final.loss, report).

Batches: step k takes records [kB, (k+1)B) of the file (in file order,
wrapping around at its end), each truncated by `stoke tokenize --max-length`,
padded to the batch's longest with an attention mask. All batches are built
before the clock starts. --warmup steps run first on the first batches, then
the initial weights and a fresh optimizer are put back, so the timed steps are
steps 0..N-1 from the saved model, as `stoke train --max-steps N` runs them.
Prints one JSON line: samples_per_s, tokens_per_s (real tokens, padding not
counted), steps, seconds, final_loss (the last step's), interval_loss,
mean_loss (over all timed steps), ...
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "embed_cpu"))
from torch_baseline import Bert, blas_info, read_safetensors  # noqa: E402  (bench/embed_cpu)


class Classifier:
    """BertForSequenceClassification's math with leaf f32 parameters."""

    def __init__(self, model_dir, dropout=None):
        w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.bert = Bert(model_dir, torch.float32, trainable=True, weights=w)
        cfg = self.cfg = self.bert.cfg
        self.p_hidden = cfg["hidden_dropout_prob"]
        self.p_attn = cfg["attention_probs_dropout_prob"]
        cd = cfg.get("classifier_dropout")
        self.p_head = self.p_hidden if cd is None else cd
        if dropout is not None:  # one rate for all, as stoke train --dropout
            self.p_hidden = self.p_attn = self.p_head = dropout
        self.params = dict(self.bert.params)
        for name in ("bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight", "classifier.bias"):
            self.params[name] = torch.nn.Parameter(w[name].to(torch.float32).contiguous())
        P = self.params
        self.pool = (P["bert.pooler.dense.weight"], P["bert.pooler.dense.bias"])
        self.head = (P["classifier.weight"], P["classifier.bias"])

    def loss(self, ids, mask, labels):
        x = self.bert.hidden(ids, mask, self.p_hidden, self.p_attn)
        pooled = torch.tanh(F.linear(x[:, 0], *self.pool))
        logits = F.linear(F.dropout(pooled, self.p_head), *self.head)
        return F.cross_entropy(logits.float(), labels)


def make_batches(seqs, labels, batch_size, steps):
    out = []
    for k in range(steps):
        idx = [(k * batch_size + r) % len(seqs) for r in range(batch_size)]
        S = max(len(seqs[i]) for i in idx)
        ids = torch.zeros((len(idx), S), dtype=torch.int64)
        mask = torch.zeros((len(idx), S), dtype=torch.int64)
        for r, i in enumerate(idx):
            ids[r, :len(seqs[i])] = torch.tensor(seqs[i])
            mask[r, :len(seqs[i])] = 1
        out.append((ids, mask, torch.tensor([labels[i] for i in idx]), sum(len(seqs[i]) for i in idx)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--train", required=True, help="the JSONL stoke trains on (its label field)")
    ap.add_argument("--ids", required=True, help="`stoke tokenize` output for the same file")
    ap.add_argument("--precision", choices=("f32", "bf16"), required=True)
    ap.add_argument("--label-field", default="label")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dropout", type=float, default=None, help="every dropout rate (default: the config's)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    t0 = time.perf_counter()
    model = Classifier(a.model, a.dropout)
    load_s = time.perf_counter() - t0
    label2id = model.cfg["label2id"]
    with open(a.train, encoding="utf-8") as f:
        names = [json.loads(line)[a.label_field] for line in f if line.strip()]
    labels = [n if isinstance(n, int) else label2id[n] for n in names]
    with open(a.ids) as f:
        seqs = [json.loads(line)["ids"] for line in f if line.strip()]
    assert len(seqs) == len(labels), f"{a.ids}: {len(seqs)} records, {a.train}: {len(labels)}"
    batches = make_batches(seqs, labels, a.batch_size, max(a.steps, a.warmup))

    params = list(model.params.values())
    initial = [p.detach().clone() for p in params]
    autocast = (torch.autocast(device_type="cpu", dtype=torch.bfloat16) if a.precision == "bf16"
                else torch.autocast(device_type="cpu", enabled=False))

    def run(steps):
        """`steps` training steps from the current weights with a fresh AdamW
        and schedule; returns (seconds, last step's loss, mean loss since the
        last log read before the end, mean loss over all steps, host reads)."""
        opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, (steps - s) / steps))
        total, reads, last = torch.zeros(()), 0, None
        logged_sum, logged_step = 0.0, 0
        t = time.perf_counter()
        for k in range(steps):
            ids, mask, y, _ = batches[k]
            with autocast:
                loss = model.loss(ids, mask, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            total += loss.detach()
            if (k + 1) % a.log_every == 0 and k + 1 < steps:
                logged_sum, logged_step = total.item(), k + 1  # the logging read, as a trainer's log step does
                reads += 1
            last = loss.detach()
        last_loss, total_loss = last.item(), total.item()
        seconds = time.perf_counter() - t
        return seconds, last_loss, (total_loss - logged_sum) / (steps - logged_step), total_loss / steps, reads + 2

    if a.warmup:
        run(a.warmup)
        with torch.no_grad():
            for p, p0 in zip(params, initial):
                p.copy_(p0)
    seconds, final_loss, interval_loss, mean_loss, reads = run(a.steps)

    samples = a.steps * a.batch_size
    tokens = sum(b[3] for b in batches[:a.steps])
    padded = sum(b[0].numel() for b in batches[:a.steps])
    print(json.dumps({
        "impl": f"torch {torch.__version__} eager", "precision": a.precision, "threads": a.threads,
        "batch_size": a.batch_size, "steps": a.steps, "samples": samples, "tokens": tokens,
        "padded_tokens": padded, "seconds": seconds, "samples_per_s": samples / seconds,
        "tokens_per_s": tokens / seconds, "final_loss": final_loss, "interval_loss": interval_loss, "mean_loss": mean_loss,
        "host_reads": reads, "dropout": [model.p_hidden, model.p_attn, model.p_head], "warmup_steps": a.warmup, "load_seconds": load_s, "blas": blas_info(),
    }))


if __name__ == "__main__":
    main()
