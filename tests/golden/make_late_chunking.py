"""Goldens for late chunking (tests/pipeline/test_chunked_pipeline.cc).

Late chunking runs a document once and pools each chunk's token states from
that pass. The reference is transformers' last hidden state of the whole
document (float32, CPU, eval mode); the test pools the rows of each chunk
stoke cut (its token span, after the leading special tokens) and compares
with stoke's rows. Run from the repository root with torch and transformers
installed (the bench venv):

    STOKE_FIXTURES=/path/to/shared/fixtures python tests/golden/make_late_chunking.py

Writes tests/golden/late_chunking.expected.json: for each model and
document, the ids transformers gives (specials included) and the hidden
state, one row per token.
"""

import json
import os
import pathlib

import torch
import transformers

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(os.environ.get("STOKE_FIXTURES", ROOT.parent / "shared" / "fixtures"))

MODELS = {
    "tiny-bert": FIXTURES / "models" / "tiny-bert",
    "tiny-modernbert": ROOT / "tests" / "golden" / "models" / "tiny-modernbert",
}

DOCUMENTS = [
    "The river rose overnight. By morning the bridge was closed, and the ferry ran every hour. "
    "Shops near the bank moved their goods upstairs. Nobody was hurt.",
    "Late chunking embeds a document once. Each chunk then pools the states of its own tokens, "
    "which have seen the whole text. A pronoun in the third sentence still knows who it means.",
    "Café prices rose 12% in 2023! Straße, naïve, déjà vu: accents survive normalization. "
    "Short line.\n\nA new paragraph starts here, after a blank line.",
]


def main():
    out = {}
    torch.manual_seed(0)
    for name, folder in MODELS.items():
        tok = transformers.AutoTokenizer.from_pretrained(folder)
        model = transformers.AutoModel.from_pretrained(folder, torch_dtype=torch.float32)
        model.eval()
        rows = []
        for text in DOCUMENTS:
            enc = tok(text, return_tensors="pt")
            assert enc["input_ids"].shape[1] <= 126, (name, enc["input_ids"].shape)
            with torch.no_grad():
                hidden = model(**enc).last_hidden_state[0]
            rows.append(
                {
                    "text": text,
                    "ids": enc["input_ids"][0].tolist(),
                    "hidden": [[float(f"{v:.9g}") for v in r] for r in hidden.tolist()],
                }
            )
        out[name] = rows
    path = ROOT / "tests" / "golden" / "late_chunking.expected.json"
    path.write_text(json.dumps(out) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
