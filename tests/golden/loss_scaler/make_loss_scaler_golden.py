#!/usr/bin/env python3
"""Writes loss_scaler.json: torch.amp.GradScaler's numbers for stoke's loss
scaler test (tests/train/test_loss_scaler.cc) — skip on inf, backoff, growth
after N clean steps, NaN, growth capped at a finite scale.

Two runs: the defaults (init 65536, growth 2.0 every 2000 clean steps,
backoff 0.5) over 2004 steps with an inf at step 1 and a NaN at step 2002,
and a short interval (3) so growth and backoff alternate within a few steps.
For each step the gradient the backward pass would have left (the true
gradient times the scale then in force, in f32), whether torch found an
inf/NaN, the unscaled gradient torch's optimizer saw (when not skipped), and
the scale and growth tracker after update(). Needs torch (the pinned oracle
venv); the C++ suite reads only the JSON.

Run: python3 tests/golden/loss_scaler/make_loss_scaler_golden.py > tests/golden/loss_scaler/loss_scaler.json
"""
import json
import math

import torch


def run(init_scale, growth_interval, steps, bad):
    w = torch.nn.Parameter(torch.zeros(3, dtype=torch.float32))
    # SGD with lr 0: the step changes nothing, but GradScaler's skip logic
    # (an optimizer step or none) runs as it does for any optimizer.
    opt = torch.optim.SGD([w], lr=0.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_factor=2.0, backoff_factor=0.5,
                                  growth_interval=growth_interval)
    out = []
    keep_all = steps <= 40
    for step in range(steps):
        scaler.scale(torch.ones(()))  # what scaler.scale(loss) does first: the scale tensor exists
        scale = scaler.get_scale()
        true_grad = torch.tensor([0.25 + step * 1e-3, -1.5, 3.0e-5], dtype=torch.float32)
        g = true_grad * torch.tensor(scale, dtype=torch.float32)
        if step in bad:
            g[1] = float("inf") if bad[step] == "inf" else float("nan")
        w.grad = g.clone()
        scaler.unscale_(opt)
        found_inf = bool(sum(v.item() for v in scaler._found_inf_per_device(opt).values()) > 0)
        unscaled = w.grad.clone()
        scaler.step(opt)
        scaler.update()
        record = {
            "step": step,
            "scale_before": scale,
            "grad": [v if math.isfinite(v) else str(v) for v in g.tolist()],
            "found_inf": found_inf,
            "unscaled": None if found_inf else unscaled.tolist(),
            "scale_after": scaler.get_scale(),
            "growth_tracker": int(scaler._growth_tracker.item()),
        }
        if keep_all or step in bad or step < 3 or step >= steps - 4 or record["scale_after"] != scale:
            out.append(record)
    return out


def main():
    torch.manual_seed(0)
    golden = {
        "torch": torch.__version__,
        "runs": [
            {"name": "defaults", "init_scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,
             "growth_interval": 2000, "steps": 2004,
             "records": run(65536.0, 2000, 2004, {1: "inf", 2002: "nan"})},
            {"name": "short_interval", "init_scale": 4.0, "growth_factor": 2.0, "backoff_factor": 0.5,
             "growth_interval": 3, "steps": 14,
             "records": run(4.0, 3, 14, {0: "inf", 4: "nan", 5: "inf", 12: "inf"})},
            # Growth that would overflow f32 is not taken (the scale stays finite).
            {"name": "capped", "init_scale": 2.0 ** 127, "growth_factor": 2.0, "backoff_factor": 0.5,
             "growth_interval": 1, "steps": 3, "records": run(2.0 ** 127, 1, 3, {})},
        ],
    }
    print(json.dumps(golden, indent=1))


if __name__ == "__main__":
    main()
