"""The MFU denominator: the measured rate of one big bf16 matrix product.

    python3 matmul_rate.py [--n 8192] [--device cuda] [--warmup 3] [--iters 10] [--out rate.json]

torch.matmul of two random N x N bf16 matrices, WARMUP untimed products, then
ITERS products each timed with CUDA events; the rate is 2 N^3 / mean time.
Random data, not zeros (zeros run ~13% faster on an H200: KINDS.md). On the
CPU (the selftest) perf_counter replaces the events.

scripts/gpu-check.sh calls measure() from bench/train_gpu/seed_train.py, the
first torch process of its call, so the rate costs no interpreter start of
its own (torch's import is 3-8 s there; the products take well under 1 s).
"""
import argparse
import json
import time


def measure(n=8192, device="cuda", warmup=3, iters=10):
    """{n, tflops (mean), tflops_best, ms_mean, ...} of N^3 bf16 products on DEVICE."""
    import torch

    dev = torch.device(device)
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=g)
    y = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=g)
    cuda = dev.type == "cuda"
    for _ in range(warmup):
        z = x @ y
    if cuda:
        torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            z = x @ y
            end.record()
            end.synchronize()
            ms.append(start.elapsed_time(end))
        else:
            t = time.perf_counter()
            z = x @ y
            ms.append((time.perf_counter() - t) * 1e3)
    del z, x, y
    mean_ms = sum(ms) / len(ms)
    flop = 2.0 * n ** 3
    res = {
        "n": n, "dtype": "bf16", "device": device,
        "device_name": torch.cuda.get_device_name(dev) if cuda else "cpu",
        "torch": torch.__version__, "warmup": warmup, "iters": iters,
        "ms_mean": mean_ms, "ms_min": min(ms),
        "tflops": flop / (mean_ms * 1e-3) / 1e12, "tflops_best": flop / (min(ms) * 1e-3) / 1e12,
    }
    print(f"matmul: {n}^3 bf16 on {res['device_name']}: {res['tflops']:.1f} TFLOP/s "
          f"(mean of {iters}, {mean_ms:.3f} ms; best {res['tflops_best']:.1f})")
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--out")
    a = ap.parse_args()
    res = measure(a.n, a.device, a.warmup, a.iters)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
