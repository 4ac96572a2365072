# Type hints of the extension module stoke._stoke (python/ext). Use the
# `stoke` package's wrappers; these are its building blocks.
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

class ModelError(ValueError):
    """A model folder stoke refuses (malformed, unsupported or unsafe files)."""

class RowBuffer:
    """The buffer stoke filled with one call's rows; that call's arrays are views of it."""
    @property
    def address(self) -> int: ...
    @property
    def nbytes(self) -> int: ...

class Model:
    def __init__(
        self,
        path: str,
        device: str = "auto",
        dtype: str = "f32",
        max_length: Optional[int] = None,
        workers: Optional[int] = None,
    ) -> None: ...
    @property
    def dimension(self) -> int: ...
    @property
    def hidden_size(self) -> int: ...
    @property
    def max_length(self) -> int: ...
    @property
    def architecture(self) -> str: ...
    @property
    def pooling(self) -> str: ...
    @property
    def normalize(self) -> bool: ...
    @property
    def device(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def workers(self) -> int: ...
    @property
    def has_classifier(self) -> bool: ...
    @property
    def prompts(self) -> Dict[str, str]: ...
    @property
    def default_prompt_name(self) -> Optional[str]: ...
    @property
    def labels(self) -> List[str]: ...
    @property
    def problem_type(self) -> str: ...
    def resolve_prompt(self, prompt: Optional[str] = None, prompt_name: Optional[str] = None) -> str: ...
    def encode(
        self,
        texts: List[Union[str, Tuple[str, str]]],
        product: str = "pooled",
        prompt: str = "",
        batch_tokens: int = 16384,
        batch_size: int = 256,
        on_progress: Optional[Callable[[int], None]] = None,
    ) -> Tuple[Union[np.ndarray, List[np.ndarray]], RowBuffer]: ...
    def encode_chunks(
        self,
        texts: List[str],
        prompt: str,
        chunk_tokens: int,
        chunk_overlap: int = 0,
        chunk_boundary: str = "none",
        late_chunking: bool = False,
        pool_chunks: str = "none",
        batch_tokens: int = 16384,
        batch_size: int = 256,
        on_progress: Optional[Callable[[int], None]] = None,
    ) -> Tuple[np.ndarray, np.ndarray, RowBuffer]: ...
    @property
    def outputs(self) -> Dict[str, object]: ...
    def encode_outputs(
        self,
        texts: List[str],
        prompt: str,
        dense: bool,
        sparse: bool,
        colbert: bool,
        role: str = "document",
        sparse_top_k: int = 0,
        batch_tokens: int = 16384,
        batch_size: int = 256,
        on_progress: Optional[Callable[[int], None]] = None,
    ) -> Tuple[Optional[np.ndarray], np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, object]: ...
    def tokenize(self, texts: List[Union[str, Tuple[str, str]]]) -> Dict[str, np.ndarray]: ...

def embed_job(model: str, input: str, output: str, flags: Dict[str, object]) -> Dict[str, object]: ...
def embed_job_options() -> List[str]: ...
def verify(folders: Sequence[str]) -> Dict[str, object]: ...
