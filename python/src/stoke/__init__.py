"""stoke: BERT-family embeddings on stoke's engine, with sentence-transformers' calls.

    import stoke
    model = stoke.Model("path/to/model")          # any folder `stoke embed` runs
    vectors = model.encode(["a text", "another"])  # numpy float32 (2, dimension)

The C++ library does the work (the same code as the `stoke` CLI); this package
gives it sentence-transformers' names and semantics. Results are numpy views
of the buffer stoke filled (no copy); the GIL is released while stoke computes,
so other Python threads run, and Ctrl-C cancels an encode between batches.
"""

from ._stoke import ModelError
from ._model import Model
from ._quantize import quantize_embeddings
from ._jobs import embed_job
from ._embeddings import EmbeddingSet, load_embeddings
from .langchain import StokeEmbeddings

__version__ = "0.1.0"

__all__ = [
    "Model",
    "ModelError",
    "EmbeddingSet",
    "StokeEmbeddings",
    "embed_job",
    "load_embeddings",
    "quantize_embeddings",
]
