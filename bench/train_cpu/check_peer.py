"""Checks torch_train.py's classifier against the training goldens that
Hugging Face transformers computed for the tiny-bert fixture (see
fixtures/golden/README.md "Training"): loss, every gradient, the parameters
after one AdamW step and after a second batch. Dropout off, as the goldens
have it. Q, K and V are fused in the peer, so their goldens are compared
slice by slice.

    python3 check_peer.py [FIXTURES_DIR]

Prints the worst deviation per kind and exits 1 when one is over tolerance.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import Classifier, read_safetensors  # noqa: E402


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    fixtures = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "..", "shared", "fixtures")
    torch.set_num_threads(1)
    g = read_safetensors(os.path.join(fixtures, "golden", "tiny-bert.safetensors"))
    model = Classifier(os.path.join(fixtures, "models", "tiny-bert"))
    model.p_hidden = model.p_attn = model.p_head = 0.0
    H = model.cfg["hidden_size"]

    def mine(name, kind):
        """The peer's tensor (parameter or its grad) for a golden parameter name."""
        for j, qkv in enumerate(("query", "key", "value")):
            if f".attention.self.{qkv}." in name:
                fused = name[len("bert."):].replace(f".{qkv}.", ".qkv.")
                t = model.params[fused]
                t = t.grad if kind == "grad" else t.detach()
                return t[j * H:(j + 1) * H]
        key = name if name in model.params else name[len("bert."):]
        t = model.params[key]
        return t.grad if kind == "grad" else t.detach()

    def compare(prefix, tol, skip=()):
        worst, where = 0.0, ""
        for k in g:
            if not k.startswith(prefix + ".") or k.endswith(".f64") or any(s in k for s in skip):
                continue
            name = k[len(prefix) + 1:]
            ref, got = g[k], mine(name, "grad" if prefix == "grad" else "param")
            scale = ref.abs().max().clamp(min=1e-6)
            d = float((got - ref).abs().max() / scale)
            if d > worst:
                worst, where = d, name
        ok = worst <= tol
        print(f"  {prefix:<12} max |diff| / max |ref| = {worst:.2e} ({where})  tol {tol:.0e}  {'ok' if ok else 'FAIL'}")
        return ok

    def loss(batch):
        ids, mask, y = g[batch + ".input_ids"], g[batch + ".attention_mask"], g[batch + ".labels"]
        S = int(mask.sum(1).max())
        return model.loss(ids[:, :S], mask[:, :S], y)

    params = list(model.params.values())
    opt = torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    ok = True
    l1 = loss("train")
    ok &= abs(l1.item() - g["loss.f64"].item()) < 1e-5
    print(f"  loss         {l1.item():.7f} vs golden {g['loss.f64'].item():.7f}")
    l1.backward()
    ok &= compare("grad", 1e-4, skip=("attention.self.key.bias",))  # mathematically 0: noise (README)
    opt.step()
    opt.zero_grad()
    ok &= compare("after_step", 1e-4, skip=("attention.self.key.bias",))
    l2 = loss("train2")
    ok &= abs(l2.item() - g["loss_step2.f64"].item()) < 1e-5
    print(f"  loss_step2   {l2.item():.7f} vs golden {g['loss_step2.f64'].item():.7f}")
    l2.backward()
    opt.step()
    ok &= compare("after_step2", 1e-4, skip=("attention.self.key.bias",))
    print("check_peer: " + ("ok" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
