"""The query side of MemoryPool.search: the dense and BM25 lists in one batch, fused here, payloads for the top k.

Hybrid search asks the engine for its two prefetch lists (ids and scores only, one batched call) and fuses them
with reciprocal rank fusion here, on at most 2 x prefetch ids. That gives the same ranking as Qdrant's fusion
query, says exactly which retriever found each hit, and the dense list's scores are the cosines the hits report.
The fused query it replaced had to return every candidate's dense vector to recover the dense list (40 x 384
floats read and converted per search), and before that a second dense query (1.5x the cost).
Only a BM25-only hit in the answer needs its vector read, for its cosine."""

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


def fuse(dense: list[str], bm25: list[str]) -> list[tuple[str, float, Retriever]]:
    """Reciprocal rank fusion of two ranked id lists: (id, score, retriever), best first.

    A point at 0-based rank r of a list contributes 1 / (RRF_K + r); ties keep the dense list's order first."""
    scores: dict[str, float] = {}
    for ranked in (dense, bm25):
        for rank, point in enumerate(ranked):
            scores[point] = scores.get(point, 0.0) + 1.0 / (RRF_K + rank)
    in_dense, in_bm25 = set(dense), set(bm25)
    order = sorted(scores, key=lambda p: -scores[p])  # stable: dense ids were inserted first
    return [(p, scores[p], "both" if p in in_dense and p in in_bm25 else "dense" if p in in_dense else "bm25")
            for p in order]


def _cosine(query: np.ndarray, vector: list[float] | None) -> float:
    if vector is None:
        return 0.0
    v = np.asarray(vector, dtype=np.float32)
    norms = float(np.linalg.norm(v)) * (float(np.linalg.norm(query)) or 1.0)
    return float(v @ query) / norms if norms > 0 else 0.0


def ranked_search(store: Store, dense: list[float], sparse: tuple[list[int], list[float]] | None,
                  where: Conditions, k: int, prefetch: int, min_score: float | None) -> list[RankedHit]:
    """Top-k hits with cosine similarity and retriever, payloads read for the survivors only."""
    if sparse is None:  # dense only: Qdrant's score is the cosine
        hits = store.query([QuerySpec(limit=k, where=where, dense=dense)])[0]
        return [RankedHit(h, h.score, "dense") for h in hits if min_score is None or h.score >= min_score]
    dense_hits, bm25_hits = store.query([
        QuerySpec(limit=prefetch, where=where, dense=dense, with_payload=False),
        QuerySpec(limit=prefetch, where=where, sparse=sparse, with_payload=False),
    ])
    cosines = {h.id: h.score for h in dense_hits}
    fused = fuse([h.id for h in dense_hits], [h.id for h in bm25_hits])
    # BM25-only candidates have no cosine yet: those that may enter the answer get their vectors read
    considered = fused if min_score is not None else fused[:k]
    missing = [point for point, _, _ in considered if point not in cosines]
    if missing:
        query = np.asarray(dense, dtype=np.float32)
        cosines.update((h.id, _cosine(query, h.dense)) for h in store.retrieve(missing, with_dense=True))
    ranked = []
    for point, score, retriever in fused:
        if point not in cosines:  # deleted between the two calls
            continue
        if min_score is not None and cosines[point] < min_score:
            continue
        ranked.append(RankedHit(RawHit(point, score, {}), cosines[point], retriever))
        if len(ranked) == k:
            break
    payloads = {h.id: h.payload for h in store.retrieve([r.raw.id for r in ranked])} if ranked else {}
    for r in ranked:
        r.raw.payload = payloads.get(r.raw.id, {})
    return [r for r in ranked if r.raw.id in payloads]  # deleted between the calls: gone
