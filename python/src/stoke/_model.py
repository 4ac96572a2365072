"""stoke.Model: sentence-transformers' SentenceTransformer / CrossEncoder calls on stoke's engine."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _stoke
from ._quantize import PRECISIONS, quantize_embeddings

Text = str
Pair = Tuple[str, str]

# `stoke embed`'s batch shape: the same texts give the same batches, so
# encode's rows equal embed's bit for bit.
DEFAULT_BATCH_TOKENS = 16384
DEFAULT_BATCH_SIZE = 256
# One row's span (Model.encode(chunk_tokens=...)): its text, its place among
# the text's chunks, and [start, end) in tokens, UTF-8 bytes and characters.
CHUNK_SPAN_DTYPE = np.dtype(
    [(name, np.int64) for name in ("text", "chunk", "chunks", "token_start", "token_end", "byte_start", "byte_end",
                                   "char_start", "char_end")]
)


def _texts_of(sentences: Any, name: str) -> Tuple[List[Any], bool]:
    """(the inputs as a list, whether one input was given rather than a list)."""
    if isinstance(sentences, str):
        return [sentences], True
    if isinstance(sentences, (bytes, bytearray)):
        raise TypeError(f"{name}: expected a str or a list of str, got bytes (decode it first)")
    try:
        return list(sentences), False
    except TypeError:
        raise TypeError(f"{name}: expected a str or a list of str, got {type(sentences).__name__}") from None


class _Progress:
    """A progress bar: tqdm's when installed, else one line on stderr."""

    def __init__(self, total: int, what: str):
        self.total = total
        try:
            from tqdm.auto import tqdm  # optional

            self.bar = tqdm(total=total, desc=what, unit="texts")
        except ImportError:
            self.bar = None
            self.what = what

    def __call__(self, done: int) -> None:
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
        else:
            sys.stderr.write(f"\r{self.what}: {done}/{self.total} texts")
            sys.stderr.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            sys.stderr.write("\n")


class Model:
    """One model folder opened on one device: encode (SentenceTransformer), predict and rank (CrossEncoder).

    Args:
        path: a model folder stoke runs (embedding model, classifier, cross-encoder),
            or a Hugging Face hub id ("org/name[@revision]") already in the local cache.
        device: "auto" (the first GPU when this build has the CUDA backend and one is
            usable, else the CPU), "cpu", "cuda" or "cuda:N".
        dtype: the compute precision, "f32", "bf16" or "f16" (sentence-transformers'
            `precision` is the *output* quantization: see `encode`).
        max_length: tokens per text at most (None: the model's, as `stoke embed` resolves it).
        workers: tokenizer threads (None: as `stoke embed` picks them).

    Raises:
        FileNotFoundError: the path does not exist.
        stoke.ModelError: a folder stoke refuses (the message names the file and why).
        ValueError: a bad device, dtype or max_length.

    One Model per process is enough: concurrent calls from several threads are
    safe and share the device (their texts may share batches).
    """

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        device: str = "auto",
        dtype: str = "f32",
        max_length: Optional[int] = None,
        workers: Optional[int] = None,
    ):
        self.path = os.fspath(path)
        self._model = _stoke.Model(self.path, device, dtype, max_length, workers)

    # ---- properties -----------------------------------------------------
    @property
    def dimension(self) -> int:
        """Width of a sentence vector (the last Dense module's, else the hidden size)."""
        return self._model.dimension

    @property
    def max_length(self) -> int:
        """Tokens per text at most (longer texts are cut), special tokens included."""
        return self._model.max_length

    @property
    def architecture(self) -> str:
        """config.json's architecture, e.g. "BertModel"."""
        return self._model.architecture

    @property
    def pooling(self) -> str:
        """The sentence-transformers pooling mode: cls, mean, max, mean_sqrt_len or lasttoken."""
        return self._model.pooling

    @property
    def normalize(self) -> bool:
        """Whether the model's own Normalize module L2-normalizes its sentence vectors."""
        return self._model.normalize

    @property
    def device(self) -> str:
        """The device the model runs on: "cpu" or "cuda:N"."""
        return self._model.device

    @property
    def dtype(self) -> str:
        """The compute precision: f32, bf16 or f16."""
        return self._model.dtype

    @property
    def prompts(self) -> Dict[str, str]:
        """The model's named prompts (config_sentence_transformers.json)."""
        return dict(self._model.prompts)

    @property
    def default_prompt_name(self) -> Optional[str]:
        return self._model.default_prompt_name

    @property
    def labels(self) -> List[str]:
        """A classifier's label names, by id (empty without a classification head)."""
        return list(self._model.labels) if self._model.has_classifier else []

    def get_sentence_embedding_dimension(self) -> int:
        """sentence-transformers' name for `dimension`."""
        return self.dimension

    def get_max_seq_length(self) -> int:
        """sentence-transformers' name for `max_length`."""
        return self.max_length

    def __repr__(self) -> str:
        return (
            f"stoke.Model({self.path!r}, device={self.device!r}, dtype={self.dtype!r}, "
            f"dimension={self.dimension}, max_length={self.max_length}, pooling={self.pooling!r}, "
            f"normalize={self.normalize})"
        )

    # ---- encode -----------------------------------------------------------
    def encode(
        self,
        sentences: Union[str, Sequence[str]],
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        batch_size: Optional[int] = None,
        show_progress_bar: Optional[bool] = None,
        output_value: Optional[str] = "sentence_embedding",
        precision: str = "float32",
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        device: Optional[str] = None,
        normalize_embeddings: bool = False,
        truncate_dim: Optional[int] = None,
        batch_tokens: Optional[int] = None,
        chunk_tokens: Optional[int] = None,
        chunk_overlap: int = 0,
        chunk_boundary: str = "none",
        late_chunking: bool = False,
        pool_chunks: Optional[str] = None,
        output: str = "dense",
        role: str = "document",
        sparse_top_k: int = 0,
    ) -> Union[np.ndarray, List[np.ndarray], Tuple[np.ndarray, np.ndarray], Any]:
        """Sentence vectors of `sentences`, in input order, as SentenceTransformer.encode makes them.

        Args:
            sentences: a str (the result is then one vector, shape (d,)) or a list of str.
            prompt_name: a prompt of the model's (`prompts`) put before every text.
            prompt: a prompt text put before every text (wins over prompt_name). With
                neither, the model's default prompt name applies, as in sentence-transformers.
            batch_size: sequences per batch at most (None: 256, `stoke embed`'s).
            show_progress_bar: a progress bar (tqdm's when installed); it advances per
                65,536 texts (one batching generation).
            output_value: "sentence_embedding", or "token_embeddings" for the last hidden
                state: a list of (len_i, hidden_size) arrays, special tokens included.
            precision: "float32", or "int8" / "uint8" / "binary" / "ubinary" to quantize
                the output as `stoke.quantize_embeddings` (sentence-transformers') does.
            convert_to_numpy: True: one (n, d) array; False: a list of (d,) arrays.
            convert_to_tensor: a torch tensor sharing the array's memory (needs torch).
            device: must be None or the model's device (the model is opened on one).
            normalize_embeddings: L2-normalize after `truncate_dim` (the model's own
                Normalize module always applies, before the cut).
            truncate_dim: keep the first `truncate_dim` dimensions (Matryoshka models).
            batch_tokens: tokens per batch at most (None: 16,384, `stoke embed`'s).
            chunk_tokens: cut each text's tokens into chunks of at most this many, each a
                row of its own, as `stoke embed --chunk-tokens` does (docs/pipeline.md "Long
                documents"); texts are then never truncated. Returns (embeddings, spans):
                spans is a numpy structured array, one record per row, with fields text,
                chunk, chunks, token_start, token_end, byte_start, byte_end, char_start,
                char_end (``sentences[s["text"]][s["char_start"]:s["char_end"]]`` is the
                chunk's text).
            chunk_overlap: tokens two neighbouring chunks share (below chunk_tokens).
            chunk_boundary: "none", "word", "sentence" or "paragraph": each cut moves back
                to the last such end inside the chunk when there is one.
            late_chunking: run each text whole and pool each chunk's token states from that
                one pass (models without Dense modules; `stoke embed --late-chunking` runs
                every model).
            pool_chunks: "mean" or "max": one row per text instead, its chunks' rows pooled
                (then normalized as the model's rows are); returns embeddings only, (n, d).
            output: "dense" (the sentence vectors above), "sparse" (a SPLADE model's or
                bge-m3's lexical weights: a scipy.sparse.csr_matrix (n, vocabulary size),
                as `stoke embed --outputs sparse` writes them) or "colbert" (a ColBERT
                model's or bge-m3's per-token vectors: a list of (tokens_i, d) arrays,
                views of one buffer). `Model.outputs` says which the model gives.
            role: "document" or "query": which side of retrieval the texts are on (ColBERT
                models prefix and expand queries; inference-free SPLADE encodes queries
                without the encoder; other models ignore it).
            sparse_top_k: output="sparse": keep each text's k largest weights (0: all), as
                sentence-transformers' max_active_dims.

        The rows equal `stoke embed`'s bit for bit for the same texts and settings
        (same batches). float32 results are numpy views of the buffer stoke filled:
        no copy is made (`arr.flags.owndata` is False) unless more than 65,536 texts
        are encoded in one call (their generations are joined into one array). The GIL
        is released while stoke computes; Ctrl-C raises KeyboardInterrupt between batches.

        Raises:
            TypeError: an input that is not a str (the message names its index).
            ValueError: a bad argument (an unknown prompt name, precision, ...).
        """
        texts, single = _texts_of(sentences, "sentences")
        if device is not None and device != self.device:
            raise ValueError(f'device "{device}": this model is open on {self.device}; open a Model on that device')
        if output not in ("dense", "sparse", "colbert"):
            raise ValueError(f'output {output!r}: expected "dense", "sparse" or "colbert"')
        if output != "dense":
            if chunk_tokens is not None or output_value != "sentence_embedding" or precision != "float32":
                raise ValueError(f'output "{output}": chunk_tokens, output_value and precision go with dense vectors')
            got = self.encode_outputs(texts, return_dense=False, return_sparse=output == "sparse",
                                      return_colbert_vecs=output == "colbert", lexical_weights="csr", role=role,
                                      sparse_top_k=sparse_top_k, prompt_name=prompt_name, prompt=prompt,
                                      batch_size=batch_size, batch_tokens=batch_tokens,
                                      show_progress_bar=show_progress_bar)
            if output == "sparse":
                rows = got["lexical_weights"]
                return rows[0] if single else rows
            vecs = got["colbert_vecs"]
            return vecs[0] if single else vecs
        if role != "document" or sparse_top_k:
            raise ValueError('role and sparse_top_k go with output="sparse" or "colbert"')
        if output_value not in ("sentence_embedding", "token_embeddings"):
            raise ValueError(
                f"output_value {output_value!r}: expected \"sentence_embedding\" or \"token_embeddings\""
            )
        if precision not in PRECISIONS:
            raise ValueError(f'precision "{precision}": expected float32, int8, uint8, binary or ubinary')
        if batch_size is not None and batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        if truncate_dim is not None and (not isinstance(truncate_dim, int) or truncate_dim <= 0):
            raise ValueError(f"truncate_dim {truncate_dim!r}: expected a positive int")
        tokens = output_value == "token_embeddings"
        if tokens and precision != "float32":
            raise ValueError(f'precision "{precision}": token embeddings are float32 only')
        spans = None
        if chunk_tokens is not None:
            if tokens:
                raise ValueError("chunk_tokens: token embeddings are not chunked; ask for sentence_embedding")
            emb, spans = self._run_chunks(texts, self._model.resolve_prompt(prompt, prompt_name), chunk_tokens,
                                          chunk_overlap, chunk_boundary, late_chunking, pool_chunks, batch_size,
                                          batch_tokens, show_progress_bar)
            single = single and pool_chunks is not None  # a text's chunks are rows even for one text
        else:
            if late_chunking or pool_chunks is not None or chunk_overlap or chunk_boundary != "none":
                raise ValueError("late_chunking, pool_chunks, chunk_overlap and chunk_boundary need chunk_tokens")
            result, _owner = self._run(texts, "tokens" if tokens else "pooled",
                                       self._model.resolve_prompt(prompt, prompt_name), batch_size, batch_tokens,
                                       show_progress_bar, "encode")
            if tokens:
                return result[0] if single else result
            emb = result
        if truncate_dim is not None:
            emb = emb[:, :truncate_dim]  # a view: sentence-transformers cuts after the model's Normalize
        if normalize_embeddings:
            norms = np.linalg.norm(emb, axis=1, keepdims=True)
            emb /= np.maximum(norms, np.float32(1e-12))  # in place: still the same buffer
        if precision != "float32":
            emb = quantize_embeddings(emb, precision)
        if convert_to_tensor:
            import torch  # optional: only for convert_to_tensor

            out = torch.from_numpy(np.ascontiguousarray(emb))
            return out[0] if single else out
        if not convert_to_numpy:
            rows = list(emb)
            emb = rows[0] if single else rows
        elif single:
            emb = emb[0]
        return emb if spans is None else (emb, spans)

    @property
    def outputs(self) -> Dict[str, Any]:
        """What the model gives: {"dense": bool, "sparse": "none" | "bge-m3" | "splade",
        "multi_vector": "none" | "bge-m3" | "colbert", "colbert_dim": int, "sparse_columns": int}."""
        return self._model.outputs

    def encode_outputs(
        self,
        sentences: Union[str, Sequence[str]],
        return_dense: bool = True,
        return_sparse: bool = False,
        return_colbert_vecs: bool = False,
        lexical_weights: str = "dict",
        role: str = "document",
        sparse_top_k: int = 0,
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        batch_size: Optional[int] = None,
        batch_tokens: Optional[int] = None,
        show_progress_bar: Optional[bool] = None,
    ) -> Dict[str, Any]:
        """Every output asked for, from one forward pass per batch — FlagEmbedding's
        ``BGEM3FlagModel.encode(return_dense, return_sparse, return_colbert_vecs)``.

        Returns a dict with the keys FlagEmbedding uses: "dense_vecs" ((n, d) float32, the
        model's dense vectors as `encode` gives them, or None), "lexical_weights" (per text
        a {token id: weight} dict — FlagEmbedding's keys are the ids as str; pass
        lexical_weights="csr" for one scipy.sparse.csr_matrix (n, vocabulary size) instead,
        or None) and "colbert_vecs" (per text a (tokens_i, d) float32 array, views of one
        buffer, or None). For one str the values are that text's alone.

        Raises:
            ValueError: an output the model does not give (`Model.outputs`), a bad argument.
        """
        texts, single = _texts_of(sentences, "sentences")
        if lexical_weights not in ("dict", "csr"):
            raise ValueError(f'lexical_weights {lexical_weights!r}: expected "dict" or "csr"')
        if not (return_dense or return_sparse or return_colbert_vecs):
            raise ValueError("ask for at least one of return_dense, return_sparse, return_colbert_vecs")
        if batch_size is not None and batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
        dense, indptr, indices, values, colbert, offsets, owner = self._with_progress(
            len(texts), "encode", show_progress_bar,
            lambda progress: self._model.encode_outputs(
                texts, self._model.resolve_prompt(prompt, prompt_name), return_dense, return_sparse,
                return_colbert_vecs, role, sparse_top_k, DEFAULT_BATCH_TOKENS if batch_tokens is None else batch_tokens,
                DEFAULT_BATCH_SIZE if batch_size is None else batch_size, progress))
        out: Dict[str, Any] = {"dense_vecs": None, "lexical_weights": None, "colbert_vecs": None}
        if return_dense:
            out["dense_vecs"] = dense[0] if single else dense
        if return_sparse:
            if lexical_weights == "csr":
                import scipy.sparse  # optional: only for lexical_weights="csr"

                rows = scipy.sparse.csr_matrix((values, indices, indptr),
                                               shape=(len(texts), self._model.outputs["sparse_columns"]))
                out["lexical_weights"] = rows[0] if single else rows
            else:
                dicts = [dict(zip(indices[indptr[i]:indptr[i + 1]].tolist(), values[indptr[i]:indptr[i + 1]].tolist()))
                         for i in range(len(texts))]
                out["lexical_weights"] = dicts[0] if single else dicts
        if return_colbert_vecs:
            vecs = [colbert[offsets[i]:offsets[i + 1]] for i in range(len(texts))]
            out["colbert_vecs"] = vecs[0] if single else vecs
        del owner  # each array above keeps its buffer alive
        return out

    def _run_chunks(self, texts, prompt, chunk_tokens, chunk_overlap, chunk_boundary, late_chunking, pool_chunks,
                    batch_size, batch_tokens, show_progress_bar):
        progress = _Progress(len(texts), "encode") if show_progress_bar else None
        try:
            emb, spans, _owner = self._model.encode_chunks(
                texts,
                prompt,
                chunk_tokens,
                chunk_overlap,
                chunk_boundary,
                late_chunking,
                "none" if pool_chunks is None else pool_chunks,
                DEFAULT_BATCH_TOKENS if batch_tokens is None else batch_tokens,
                DEFAULT_BATCH_SIZE if batch_size is None else batch_size,
                progress,
            )
        finally:
            if progress is not None:
                progress.close()
        if pool_chunks is not None:
            return emb, None
        return emb, spans.view(CHUNK_SPAN_DTYPE).reshape(-1)

    @staticmethod
    def _with_progress(n, what, show_progress_bar, call):
        """call(progress) with a progress bar over n texts when asked, closed whatever happens."""
        progress = _Progress(n, what) if show_progress_bar else None
        try:
            return call(progress)
        finally:
            if progress is not None:
                progress.close()

    def _run(self, texts, product, prompt, batch_size, batch_tokens, show_progress_bar, what):
        return self._with_progress(
            len(texts), what, show_progress_bar,
            lambda progress: self._model.encode(texts, product, prompt,
                                                DEFAULT_BATCH_TOKENS if batch_tokens is None else batch_tokens,
                                                DEFAULT_BATCH_SIZE if batch_size is None else batch_size, progress))

    def encode_query(self, sentences: Union[str, Sequence[str]], **kwargs: Any):
        """encode() with the model's "query" prompt (when it has one and none is given), as sentence-transformers does."""
        return self.encode(sentences, **self._with_prompt(kwargs, ("query",)))

    def encode_document(self, sentences: Union[str, Sequence[str]], **kwargs: Any):
        """encode() with the model's "document" (or "passage", "corpus") prompt, as sentence-transformers does."""
        return self.encode(sentences, **self._with_prompt(kwargs, ("document", "passage", "corpus")))

    def _with_prompt(self, kwargs: Dict[str, Any], names: Tuple[str, ...]) -> Dict[str, Any]:
        # sentence-transformers 5+: the task's prompt when the model has one, else
        # none at all (the default prompt name does not apply to queries/documents).
        if kwargs.get("prompt") is None and kwargs.get("prompt_name") is None:
            prompts = self._model.prompts
            for name in names:
                if name in prompts:
                    return dict(kwargs, prompt_name=name)
            return dict(kwargs, prompt="")
        return kwargs

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Cosine similarity of every row of `a` with every row of `b` ((n, m); sentence-transformers' default)."""
        a = np.atleast_2d(np.asarray(a, dtype=np.float32))
        b = np.atleast_2d(np.asarray(b, dtype=np.float32))
        a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
        b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
        return a @ b.T

    # ---- tokens -------------------------------------------------------------
    def tokenize(self, texts: Union[str, Sequence[Union[Text, Pair]]]) -> Dict[str, np.ndarray]:
        """Token ids as the model's encode makes them (special tokens added, cut at max_length).

        Returns {"input_ids", "attention_mask", "token_type_ids"}: int64 (n, longest),
        padded with the tokenizer's pad id (mask 0). A pair (a, b) is tokenized as one input.
        """
        items, _ = _texts_of(texts, "texts")
        return self._model.tokenize(items)

    # ---- classifiers and cross-encoders -------------------------------------
    def predict(
        self,
        sentences: Union[Text, Pair, Sequence[Union[Text, Pair]]],
        batch_size: Optional[int] = None,
        show_progress_bar: Optional[bool] = None,
        raw_scores: bool = False,
        batch_tokens: Optional[int] = None,
    ) -> np.ndarray:
        """A classifier's / cross-encoder's scores for texts or (text, text) pairs, in input order.

        raw_scores=False applies the head `stoke classify` applies: a sigmoid for one
        label (cross-encoders, as CrossEncoder.predict does) or a multi-label problem,
        a softmax over several single-label classes, nothing for regression.
        raw_scores=True returns the logits. One label gives shape (n,), else (n, labels);
        one text or one pair in gives its row.
        """
        if isinstance(sentences, tuple) and len(sentences) == 2 and all(isinstance(s, str) for s in sentences):
            items, single = [sentences], True
        else:
            items, single = _texts_of(sentences, "sentences")
        logits, _owner = self._run(items, "logits", "", batch_size, batch_tokens, show_progress_bar, "predict")
        scores = logits if raw_scores else self._activate(logits)
        if scores.shape[1] == 1:
            scores = scores[:, 0]
        return scores[0] if single else scores

    def _activate(self, logits: np.ndarray) -> np.ndarray:
        problem = self._model.problem_type
        if problem == "regression":
            return logits
        if problem == "multi_label_classification" or logits.shape[1] == 1:
            return (1.0 / (1.0 + np.exp(-logits.astype(np.float64)))).astype(np.float32)
        shifted = logits - logits.max(axis=1, keepdims=True)
        e = np.exp(shifted.astype(np.float64))
        return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)

    def rank(
        self,
        query: str,
        documents: Sequence[str],
        top_k: Optional[int] = None,
        return_documents: bool = False,
        batch_size: Optional[int] = None,
        show_progress_bar: Optional[bool] = None,
    ) -> List[Dict[str, Any]]:
        """Documents ranked by a cross-encoder's score against `query`, best first (CrossEncoder.rank's shape).

        Returns [{"corpus_id": index in documents, "score": float[, "text": document]}, ...],
        the `top_k` best (None: all).
        """
        if not isinstance(query, str):
            raise TypeError(f"query: expected a str, got {type(query).__name__}")
        docs, _ = _texts_of(documents, "documents")
        if not self._model.has_classifier or len(self._model.labels) != 1:
            raise ValueError(
                f"rank: needs a cross-encoder with one output label; {self.architecture} has "
                f"{len(self._model.labels) if self._model.has_classifier else 'no'} classification label(s)"
            )
        scores = self.predict([(query, d) for d in docs], batch_size=batch_size, show_progress_bar=show_progress_bar)
        order = np.argsort(-scores, kind="stable")
        if top_k is not None:
            order = order[:top_k]
        out = []
        for i in order:
            row: Dict[str, Any] = {"corpus_id": int(i), "score": float(scores[i])}
            if return_documents:
                row["text"] = docs[i]
            out.append(row)
        return out
