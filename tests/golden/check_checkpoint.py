#!/usr/bin/env python3
"""Check that a checkpoint folder written by `stoke train` is a complete Hugging Face model.

    python tests/golden/check_checkpoint.py CHECKPOINT_DIR GOLDEN_NAME [--same-weights]

GOLDEN_NAME is a model of tests/golden (tiny-distilbert, tiny-electra, tiny-roberta, tiny-camembert,
tiny-xlmr5, tiny-mpnet, tiny-gte, tiny-nomic) the checkpoint was trained from.  The script

 1. loads the checkpoint with AutoModelForSequenceClassification.from_pretrained and reports every
    missing, unexpected and shape-mismatched key (transformers would fill a missing one with random
    numbers and only warn);
 2. compares the checkpoint's tensor names with `state_dict_keys` of tests/golden/<name>.json, the key
    list transformers itself has for that architecture;
 3. loads the same weights a second way -- the checkpoint's model.safetensors read with the safetensors
    package into a fresh model built from the checkpoint's config, with load_state_dict(strict=True)
    -- and compares the logits of a few texts from both loads (equal up to 1e-6 relative);
 4. with --same-weights (a checkpoint of the untrained golden weights, e.g. after 0 steps or a format
    round trip): compares the logits with the golden's `logits.f64` on the golden batch.

Prints one line per finding and exits 0 when all checks pass, 1 when one fails, 2 on bad usage.
Needs torch, transformers 5 and safetensors (the pinned oracle venv); the C++ suite does not use it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEXTS = [
    "A tiny model checks its own checkpoint.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "¿Dónde está la biblioteca? 图书馆在哪里？",
    "short",
]


def relative_error(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / max(float(b.norm()), 1e-300))


def main() -> int:
    parser = argparse.ArgumentParser(description="Check a stoke checkpoint folder with transformers.")
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("golden_name")
    parser.add_argument("--same-weights", action="store_true",
                        help="the checkpoint holds the golden's untrained weights: compare with logits.f64")
    args = parser.parse_args()

    import torch
    import transformers
    from safetensors.torch import load_file

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)
    golden_json = HERE / f"{args.golden_name}.json"
    golden_folder = HERE / "models" / args.golden_name
    if not golden_json.is_file() or not golden_folder.is_dir():
        print(f"check_checkpoint: no golden model {args.golden_name!r} in {HERE}", file=sys.stderr)
        return 2
    weights_file = args.checkpoint / "model.safetensors"
    if not weights_file.is_file():
        print(f"check_checkpoint: {weights_file}: missing (a checkpoint folder holds model.safetensors)",
              file=sys.stderr)
        return 2
    golden = json.loads(golden_json.read_text(encoding="utf-8"))
    failures = 0

    def fail(line: str) -> None:
        nonlocal failures
        failures += 1
        print("FAIL " + line)

    model, info = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(args.checkpoint), output_loading_info=True)
    model.eval()
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        for entry in sorted(map(str, info.get(kind) or [])):
            fail(f"{kind[:-1].replace('_', ' ')}: {entry}")
    print(f"loaded {args.checkpoint} as {type(model).__name__}")

    stored = load_file(str(weights_file))
    # GTE, NomicBERT: transformers 5 saves (and reads) the hub's fused names (qkv_proj, up_gate_proj,
    # Wqkv), not its module names: the checkpoint must hold what save_pretrained writes.
    fused = golden.get("safetensors_keys") is not None and set(golden["safetensors_keys"]) != set(golden["state_dict_keys"])
    want = set(golden["safetensors_keys"] if fused else golden["state_dict_keys"])
    for key in sorted(want - set(stored)):
        fail(f"{weights_file.name}: tensor {key} missing (transformers' state_dict has it)")
    for key in sorted(set(stored) - want):
        fail(f"{weights_file.name}: tensor {key} not in transformers' state_dict of {golden['architecture']}")

    # The checkpoint's own config: training may have given it a new head (another label count).
    config = transformers.AutoConfig.from_pretrained(str(args.checkpoint))
    second = transformers.AutoModelForSequenceClassification.from_config(config).eval()
    if fused:
        # The second way: transformers saves the model it loaded; the file must hold exactly stoke's tensors.
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            again = load_file(str(Path(tmp) / "model.safetensors"))
        for key in sorted(set(again) ^ set(stored)):
            fail(f"save_pretrained of the loaded model: tensor {key} in one file only")
        for key in sorted(set(again) & set(stored)):
            if not torch.equal(again[key], stored[key]):
                fail(f"save_pretrained of the loaded model: tensor {key} differs from the checkpoint's")
        second = model
    else:
        try:
            second.load_state_dict({k: v for k, v in stored.items() if k in want}, strict=True)
        except RuntimeError as e:
            fail(f"load_state_dict(strict=True): {str(e).splitlines()[0]}")

    # transformers 5 builds an empty tokenizer from config.json alone, so a checkpoint
    # without tokenizer.json takes the golden folder's
    has_tokenizer = (args.checkpoint / "tokenizer.json").is_file()
    tok = transformers.AutoTokenizer.from_pretrained(str(args.checkpoint if has_tokenizer else golden_folder))
    print("tokenizer: " + ("the checkpoint's" if has_tokenizer else "the golden folder's (the checkpoint has none)"))
    max_length = golden["tokenization"]["max_length"]
    batch = dict(tok(TEXTS, max_length=max_length, truncation=True, padding="longest", return_tensors="pt"))
    with torch.no_grad():
        a = model(**batch).logits
        b = second(**batch).logits
    error = relative_error(a, b)
    second_way = "itself (its save_pretrained equals the file)" if fused else "safetensors + load_state_dict"
    print(f"logits of {len(TEXTS)} texts, from_pretrained vs {second_way}: relative error {error:.2e}")
    if not error <= 1e-6:
        fail(f"the two loads disagree (relative error {error:.2e} > 1e-6)")

    if args.same_weights:
        g = load_file(str(HERE / f"{args.golden_name}.safetensors"))
        inputs = {k: g[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in g}
        with torch.no_grad():
            logits = model(**inputs).logits
        error = relative_error(logits, g["logits.f64"])
        print(f"logits vs the golden logits.f64: relative error {error:.2e}")
        if not error <= 1e-5:
            fail(f"logits differ from the golden (relative error {error:.2e} > 1e-5)")

    print("OK" if failures == 0 else f"{failures} check(s) failed")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
