"""A LangChain / LlamaIndex-style embeddings adapter that needs neither installed (duck-typed)."""

from __future__ import annotations

from typing import Any, List, Optional


class StokeEmbeddings:
    """embed_documents / embed_query over a stoke.Model: drops into LangChain and LlamaIndex apps.

        from stoke import Model, StokeEmbeddings
        embeddings = StokeEmbeddings(Model("path/to/model"))
        vectors = embeddings.embed_documents(["a", "b"])   # list of lists of float

    Documents use the model's document prompt and queries its query prompt (when it
    has them), as encode_document / encode_query do. Extra keywords go to encode
    (normalize_embeddings=True, truncate_dim=..., ...).
    """

    def __init__(self, model: Any, **encode_kwargs: Any):
        if isinstance(model, str):
            from ._model import Model

            model = Model(model)
        self.model = model
        self.encode_kwargs = encode_kwargs

    def embed_documents(self, texts: List[str]) -> List[List[float]]:
        return self.model.encode_document(list(texts), **self.encode_kwargs).tolist()

    def embed_query(self, text: str) -> List[float]:
        return self.model.encode_query(text, **self.encode_kwargs).tolist()

    # The async variants LangChain calls when present.
    async def aembed_documents(self, texts: List[str]) -> List[List[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> List[float]:
        return self.embed_query(text)

    # LlamaIndex's BaseEmbedding names.
    def get_text_embedding(self, text: str) -> List[float]:
        return self.embed_documents([text])[0]

    def get_query_embedding(self, query: str) -> List[float]:
        return self.embed_query(query)

    def get_text_embedding_batch(self, texts: List[str], show_progress: Optional[bool] = None) -> List[List[float]]:
        return self.embed_documents(texts)
