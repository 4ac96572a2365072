#!/usr/bin/env python3
"""Expected numbers of tests/ops/test_ops_train.cc (AdamWAgainstTorch): runs
torch.optim.AdamW (CPU, float32, default single-tensor path) and
torch.nn.utils.clip_grad_norm_ on a fixed parameter group and prints the
parameters, exp_avg and exp_avg_sq after every step as C++ literals.

The group is one flat buffer of 8 elements: w = elements 0..4 (weight decay on),
b = elements 5..7 (no decay), as two torch param groups. Run:
    python tests/ops/gen_adamw_torch.py   (needs torch; the test does not)
"""
import torch

P0 = [0.5, -1.25, 2.0, 0.0, 3.5, -0.75, 1e-3, -2.5]
GRADS = [
    [0.1, -0.2, 0.3, -0.4, 0.05, 1.5, -0.001, 0.25],
    [-0.3, 0.1, 0.02, 0.5, -0.6, -1.0, 0.002, 0.0],
    [0.2, 0.0, -0.7, 0.1, 0.3, 0.4, -0.5, 2.0],
]
SCENARIOS = {
    # name: (lr, betas, eps, weight_decay, max_norm or None)
    "decay": (1e-2, (0.9, 0.999), 1e-8, 0.01, None),
    "no_decay_betas": (1e-2, (0.8, 0.99), 1e-6, 0.0, None),
    "clip": (1e-3, (0.9, 0.999), 1e-8, 0.1, 1.5),  # steps 1 and 3 clip, step 2 does not
}


def lit(t):
    return "{" + ", ".join("%.9gf" % v for v in t.detach().flatten().tolist()) + "}"


for name, (lr, betas, eps, wd, max_norm) in SCENARIOS.items():
    w = torch.tensor(P0[:5], dtype=torch.float32, requires_grad=True)
    b = torch.tensor(P0[5:], dtype=torch.float32, requires_grad=True)
    opt = torch.optim.AdamW(
        [{"params": [w], "weight_decay": wd}, {"params": [b], "weight_decay": 0.0}],
        lr=lr, betas=betas, eps=eps)
    print("// %s: lr %g betas (%g, %g) eps %g weight_decay %g on w, max_norm %s" %
          (name, lr, betas[0], betas[1], eps, wd, max_norm))
    for step, g in enumerate(GRADS, start=1):
        w.grad = torch.tensor(g[:5], dtype=torch.float32)
        b.grad = torch.tensor(g[5:], dtype=torch.float32)
        if max_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_([w, b], max_norm)
            print("//   step %d: total norm %.9g" % (step, norm.item()))
        opt.step()
        sw, sb = opt.state[w], opt.state[b]
        print("{%d, %s, %s, %s}," % (step, lit(torch.cat([w, b])),
                                     lit(torch.cat([sw["exp_avg"], sb["exp_avg"]])),
                                     lit(torch.cat([sw["exp_avg_sq"], sb["exp_avg_sq"]]))))
