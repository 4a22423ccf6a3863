"""The query side of MemoryPool.search: one fused Qdrant query, retriever attribution from its candidates.

Hybrid search asks the fusion for every candidate it saw (the union of the dense and BM25 prefetch lists, ids and
dense vectors only), then reads the payloads of the top k alone. The dense list is recovered from the candidates:
it holds the `prefetch` candidates nearest the query, since any BM25-only candidate is farther than all of them.
That replaces a second dense query (1.5x the cost) that existed only to say which retriever found each hit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from mtl_graph.memory.storage import RRF_K, Conditions, QuerySpec, RawHit, Store

Retriever = Literal["dense", "bm25", "both"]


@dataclass
class RankedHit:
    """A hit before its payload is parsed into a memory."""

    raw: RawHit
    similarity: float
    retriever: Retriever


def attribute(score: float, dense_rank: int | None, prefetch: int) -> Retriever:
    """Which prefetch list(s) a fused hit came from.

    A fused score is the sum of 1 / (RRF_K + rank) over the lists holding the point. The dense rank is known, so
    whatever the score has beyond the dense share came from BM25 (the smallest BM25 share, 1 / (RRF_K + prefetch),
    is far above float error)."""
    if dense_rank is None:
        return "bm25"
    bm25_share = score - 1.0 / (RRF_K + dense_rank)
    return "both" if bm25_share > 0.5 / (RRF_K + prefetch) else "dense"


def _cosines(query: np.ndarray, hits: list[RawHit]) -> np.ndarray:
    matrix = np.asarray([h.dense if h.dense is not None else np.zeros_like(query) for h in hits], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * (float(np.linalg.norm(query)) or 1.0)
    return (matrix @ query) / np.where(norms > 0, norms, 1.0)


def ranked_search(store: Store, dense: list[float], sparse: tuple[list[int], list[float]] | None,
                  where: Conditions, k: int, prefetch: int, min_score: float | None) -> list[RankedHit]:
    """Top-k hits with cosine similarity and retriever, payloads read for the survivors only."""
    query = np.asarray(dense, dtype=np.float32)
    if sparse is None:  # dense only: Qdrant's score is the cosine
        hits = store.query([QuerySpec(limit=k, where=where, dense=dense)])[0]
        return [RankedHit(h, h.score, "dense") for h in hits if min_score is None or h.score >= min_score]
    candidates = store.query([QuerySpec(limit=2 * prefetch, where=where, dense=dense, sparse=sparse,
                                        prefetch_limit=prefetch, with_dense=True, with_payload=False)])[0]
    if not candidates:
        return []
    cosines = _cosines(query, candidates)
    dense_rank = {candidates[i].id: r for r, i in enumerate(np.argsort(-cosines, kind="stable")[:prefetch])}
    ranked = []
    for hit, cosine in zip(candidates, cosines.tolist()):
        if min_score is not None and cosine < min_score:
            continue
        ranked.append(RankedHit(hit, cosine, attribute(hit.score, dense_rank.get(hit.id), prefetch)))
        if len(ranked) == k:
            break
    payloads = {h.id: h.payload for h in store.retrieve([r.raw.id for r in ranked])} if ranked else {}
    for r in ranked:
        r.raw.payload = payloads.get(r.raw.id, {})
    return [r for r in ranked if r.raw.id in payloads]  # deleted between the two calls: gone
