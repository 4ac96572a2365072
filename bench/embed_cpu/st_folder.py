"""The sentence-transformers files of a benchmark model folder (make_qwen3_model.py,
make_modernbert_model.py): the tokenizer copied in, Transformer -> Pooling -> Normalize
in modules.json, the pooling config and max_seq_length 512."""
import json
import shutil
from pathlib import Path


def write_sentence_transformers_files(out: Path, tokenizer_dir: Path, pooling: dict) -> None:
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / f, out / f)
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 512, "do_lower_case": False}))
