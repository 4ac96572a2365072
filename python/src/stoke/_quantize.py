"""Output quantization, as sentence-transformers' quantize_embeddings does it."""

from __future__ import annotations

from typing import Optional

import numpy as np

PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")


def quantize_embeddings(
    embeddings: np.ndarray,
    precision: str,
    ranges: Optional[np.ndarray] = None,
    calibration_embeddings: Optional[np.ndarray] = None,
) -> np.ndarray:
    """Quantizes float embeddings (rows) to `precision`, as sentence-transformers does.

    int8 / uint8: each column is scaled from its range — `ranges` ((2, d): mins,
    maxes), else the calibration embeddings' range, else the embeddings' own (at
    least two rows) — into 256 buckets. binary / ubinary: one bit per dimension
    (> 0), packed 8 to a byte along the last axis (int8 offset by -128, or uint8).
    """
    embeddings = np.asarray(embeddings)
    if embeddings.dtype in (np.uint8, np.int8):
        raise ValueError("embeddings to quantize must be float, not int8 or uint8")
    if precision not in PRECISIONS:
        raise ValueError(f'precision "{precision}": expected float32, int8, uint8, binary or ubinary')
    if embeddings.ndim == 2 and embeddings.shape[0] == 0:
        dim = embeddings.shape[1]
        if precision.endswith("int8"):
            return np.zeros((0, dim), dtype=np.int8 if precision == "int8" else np.uint8)
        if precision.endswith("binary"):
            return np.zeros((0, (dim + 7) // 8), dtype=np.int8 if precision == "binary" else np.uint8)
    if precision == "float32":
        return embeddings.astype(np.float32)
    if precision in ("int8", "uint8"):
        if ranges is None:
            if calibration_embeddings is None:
                if embeddings.ndim == 1 or embeddings.shape[0] == 1:
                    raise ValueError(
                        f"precision {precision}: cannot compute quantization ranges from a single embedding; "
                        "call quantize_embeddings with ranges or calibration_embeddings"
                    )
                source = embeddings
            else:
                source = np.asarray(calibration_embeddings)
            ranges = np.vstack((np.min(source, axis=0), np.max(source, axis=0)))
        ranges = np.asarray(ranges).astype(np.float32, copy=False)
        starts = ranges[0, :]
        steps = (ranges[1, :] - starts) / 255
        steps = np.where(steps == 0, 1, steps)
        q = np.clip(np.floor((embeddings - starts) / steps), 0, 255)
        if precision == "uint8":
            return q.astype(np.uint8)
        return (q - 128).astype(np.int8)
    if precision == "binary":
        return (np.packbits(embeddings > 0, axis=-1) - 128).astype(np.int8)
    return np.packbits(embeddings > 0, axis=-1)
