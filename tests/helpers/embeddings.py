"""Embeddings wrappers the tests share."""

from langchain_core.embeddings import Embeddings


class Memoised(Embeddings):
    """The real local embedder, each distinct text embedded once (the permutations repeat a few texts)."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner, self.cache, self.model_name = inner, {}, inner.model_name

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        self.cache.update(zip(missing, self.inner.embed_documents(missing)) if missing else ())
        return [self.cache[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]
