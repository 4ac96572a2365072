"""stoke.embed_job: `stoke embed` from Python (the same job function, not the CLI)."""

from __future__ import annotations

import os
from typing import Any, Dict, Union

from . import _stoke


def embed_job(
    model: Union[str, "os.PathLike[str]", Any],
    input: Union[str, "os.PathLike[str]"],
    output: Union[str, "os.PathLike[str]"],
    **flags: Any,
) -> Dict[str, Any]:
    """Runs the crash-safe, resumable `stoke embed` job: `input` -> shards + manifest in `output`.

    Args:
        model: a model folder (or cached hub id), or a `stoke.Model` (its folder,
            device and dtype are used; the job opens the model itself).
        input: a JSONL / CSV / TSV / text file.
        output: the output folder (docs/output-format.md).
        **flags: the CLI's flags with underscores, from the job's one option table
            (each value checked as the CLI checks it): input_format, text_field,
            id_field, max_length, device, precision, workers, batch_tokens, trace,
            overwrite, resume, min_centered_cosine, pooling, normalize (False: the
            CLI's --no-normalize), dimensions, prompt, prompt_name, output_dtype,
            max_batch_size, on_error, sort_window, shard_size, shard_index, num_shards
            (an int or "auto"), partition, outputs ("dense,sparse,colbert": bge-m3's
            three outputs; "sparse" for a SPLADE model, "colbert" for a ColBERT model),
            role ("document" or "query": ColBERT and inference-free SPLADE models),
            sparse_top_k, chunk_tokens, chunk_overlap, chunk_boundary, late_chunking,
            pool_chunks (long documents: docs/pipeline.md); and progress=True for a
            progress bar on stderr.

    Returns the run's summary (texts, tokens, batches, shards, notes, seconds, ...).
    With precision="int8", summary["quality"] is the manifest's "quality": the
    int8 model against f32 on the first texts of the input (centered cosine
    mean and min, the threshold, what the sample cost; "kept": True when a
    resume read it from the first run); None for other precisions.

    A run killed at any moment (even with SIGKILL) is finished by the same call
    with resume=True, byte-identical to an uninterrupted run. The GIL is released
    while the job runs. Ctrl-C stops it between batches and raises
    KeyboardInterrupt: the folder keeps what was committed, as after a kill, and
    resume=True continues from there.

    Raises:
        ValueError: a bad flag (an unknown name, a wrong value), with the CLI's message.
        FileNotFoundError: a missing input file or model folder.
    """
    from ._model import Model

    if isinstance(model, Model):
        flags.setdefault("device", model.device)
        flags.setdefault("precision", model.dtype)
        model = model.path
    return _stoke.embed_job(os.fspath(model), os.fspath(input), os.fspath(output), dict(flags))
