"""The query side of MemoryPool.search: the dense and BM25 lists, fused here, payloads for the top k.

Hybrid search asks the engine for its prefetch lists (ids and scores only; both in one batched call when BM25 has
a say) and fuses them here, on at most 2 x prefetch ids, so it says exactly which retriever found each hit and
the dense list's scores are the cosines the hits report. Only a BM25-only hit in the answer needs its vector
read, for its cosine.

The fusion: BM25 has a say only when the query names an exact identifier (snake_case, camelCase, a dotted or file
name, a flag, an error code or errno/signal name, a call): there the two lists are fused by distribution-based
score fusion (DBSF: each list's scores mapped through mean +- 3 std, then summed). Any other query is ranked by its
cosines, and its BM25 list is asked for only when fewer than k dense hits pass the floor (its ids can enter
only then, after the dense ones): such a query's hits say "dense", "bm25"/"both" only on that path. Why: on the
labelled cross-domain set (benchmarks/quality.py) BM25 alone is well below dense (MRR 0.61 vs 0.75) and
equal-weight RRF of the two pulled hybrid below dense alone; words shared by chance outvote paraphrases. What
BM25 finds that embeddings miss is a rare exact token. DBSF over RRF in that branch because it keeps how far a
match stands out: an identifier hit far above the rest of its list stays on top, where RRF gives the first of a
flat list as much as it. Neither branch has a constant fitted to a set; the numbers behind the choice are in
docs/benchmarks.md."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mtl_graph.memory.engine.storage import RRF_K, Conditions, QuerySpec, RawHit, Store

Retriever = Literal["dense", "bm25", "both"]
"""Which retriever found a hit (a search's mode is one of points.RETRIEVERS)."""

PREFETCH = 20
"""Length of each of the two lists a hybrid search fuses (longer only for a k above it). One length whatever k is
asked: the fusion normalises each list's scores over the list, so a k-dependent length would reorder the first
hits (the lifecycle's 20 candidates, or a search for k + the memories already shown, would rank its top 3 unlike
a search for 3)."""

IDENTIFIER = re.compile(r"""(?x)
    \w_\w                                        # snake_case, SCREAMING_SNAKE (ERR_SSL_PROTOCOL_ERROR)
  | \b[a-z]+[A-Z]                                # camelCase (useEffect)
  | \b[A-Z][a-z0-9]+[A-Z]                        # CamelCase, two humps or more (ProcessBuilder)
  | \b[A-Za-z_]\w+\.[A-Za-z_] | \b[A-Za-z_]\.[A-Za-z_]\w  # dotted and file names (parse.go), not "e.g."
  | (?<![\w-])--?[A-Za-z]                        # flags (--maxfail, -rf), not "one-liner"
  | \b[A-Z]{1,5}-?\d{2,}\b                       # error codes (E0502, TS2345)
  | \bE[A-Z]{3,}\b | \bSIG[A-Z]{2,}\b            # errno and signal names (ENOSPC, SIGPIPE)
  | \w\(\)                                       # calls (fsync())
""")
"""A query token that looks like an exact identifier: what BM25 matches and an embedding blurs."""


@dataclass
class RankedHit:
    """A hit before its payload is parsed into a memory."""

    raw: RawHit
    similarity: float
    retriever: Retriever


Fused = list[tuple[str, float, Retriever]]


def names_identifier(text: str) -> bool:
    """Whether a query names an exact identifier (see IDENTIFIER): then BM25 takes part in the ranking."""
    # the regex only sees words that could match (a capital past the first letter, a digit, _ . - or a call): on a
    # plain question that is a few short words, 5x faster than scanning the whole text
    maybe = [w for w in text.split() if not w[1:].islower() or "_" in w or "." in w or "-" in w or "(" in w]
    return bool(maybe) and IDENTIFIER.search(" ".join(maybe)) is not None


def _retrievers(order: list[str], dense: set[str], bm25: set[str], scores: dict[str, float]) -> Fused:
    return [(p, scores[p], "both" if p in dense and p in bm25 else "dense" if p in dense else "bm25") for p in order]


def rrf(dense: list[str], bm25: list[str]) -> Fused:
    """Reciprocal rank fusion of two ranked id lists (the fusion before DBSF; kept for comparison).

    A point at 0-based rank r of a list contributes 1 / (RRF_K + r); ties keep the dense list's order first."""
    scores: dict[str, float] = {}
    for ranked in (dense, bm25):
        for rank, point in enumerate(ranked):
            scores[point] = scores.get(point, 0.0) + 1.0 / (RRF_K + rank)
    order = sorted(scores, key=lambda p: -scores[p])  # stable: dense ids were inserted first
    return _retrievers(order, set(dense), set(bm25), scores)


def _dbsf_scores(hits: list[tuple[str, float]]) -> dict[str, float]:
    """A list's scores mapped through [mean - 3 std, mean + 3 std] to about [0, 1]; a flat list gives 0.5 each."""
    if not hits:
        return {}
    mean = sum(s for _, s in hits) / len(hits)  # plain Python: on 20-40 scores numpy's call overhead dominates
    std = (sum((s - mean) ** 2 for _, s in hits) / len(hits)) ** 0.5
    low, span = mean - 3 * std, 6 * std
    return {p: (s - low) / span if span > 0 else 0.5 for p, s in hits}


def fuse(dense: list[tuple[str, float]], bm25: list[tuple[str, float]], exact: bool = True) -> Fused:
    """Fuse the two (id, score) lists, best first, as (id, fused score, retriever).

    exact (the query names an identifier): DBSF of both lists. Otherwise BM25 carries no weight: the dense order,
    then BM25-only ids in BM25 order (score 0). Ties keep the dense list's order, then the BM25 list's."""
    scores = _dbsf_scores(dense)
    in_dense = set(scores)
    if exact:
        for p, s in _dbsf_scores(bm25).items():
            scores[p] = scores.get(p, 0.0) + s
    else:
        for p, _ in bm25:
            scores.setdefault(p, 0.0)
    order = sorted(scores, key=lambda p: -scores[p])  # stable: dense ids were inserted first, then BM25's
    return _retrievers(order, in_dense, {p for p, _ in bm25}, scores)


def _cosine(query: np.ndarray, vector: list[float] | None) -> float:
    if vector is None:
        return 0.0
    v = np.asarray(vector, dtype=np.float32)
    norms = float(np.linalg.norm(v)) * (float(np.linalg.norm(query)) or 1.0)
    return float(v @ query) / norms if norms > 0 else 0.0


def ranked_search(store: Store, dense: list[float], sparse: tuple[list[int], list[float]] | None,
                  where: Conditions, k: int, prefetch: int, min_score: float | None,
                  query: str | None = None, bm25_only: bool = False, with_payload: bool = True) -> list[RankedHit]:
    """Top-k hits with cosine similarity and retriever, payloads read for the survivors only (none: with_payload
    False, for a caller that reads what it needs of them itself).

    query is the text, for the identifier test (see `fuse`); without it BM25 takes part as for an identifier.
    bm25_only ranks by BM25 alone (keyword retrieval, for comparison); the cosine is still read, for the floor."""
    if sparse is None:  # dense only: Qdrant's score is the cosine
        hits = store.query([QuerySpec(limit=k, where=where, dense=dense, with_payload=with_payload)])[0]
        return [RankedHit(h, h.score, "dense") for h in hits if min_score is None or h.score >= min_score]
    if bm25_only:
        if not sparse[0]:  # no word of the query is in the vocabulary: nothing matches by keyword
            return []
        # as long a list whatever k is: the engine orders equal BM25 scores by the list it was asked for
        [bm25_hits] = store.query([QuerySpec(limit=prefetch, where=where, sparse=sparse, with_payload=False)])
        cosines: dict[str, float] = {}
        fused = [(h.id, h.score, "bm25") for h in bm25_hits]
        return _with_cosines(store, dense, fused, cosines, k, min_score, with_payload)
    dense_spec = QuerySpec(limit=prefetch, where=where, dense=dense, with_payload=False)
    bm25_spec = QuerySpec(limit=prefetch, where=where, sparse=sparse, with_payload=False)
    if query is not None and not names_identifier(query):
        # BM25 carries no weight here (fuse(exact=False)): its ids come after every dense one, so they can enter
        # only when fewer than k dense hits pass the floor (a filter leaving few points, a high min_score).
        # Otherwise the answer is the dense list's and the BM25 list is not asked for at all.
        [dense_hits] = store.query([dense_spec])
        cosines = {h.id: h.score for h in dense_hits}
        passing = sum(1 for h in dense_hits if min_score is None or h.score >= min_score)
        if passing >= k:
            fused = fuse([(h.id, h.score) for h in dense_hits], [], exact=False)
            return _with_cosines(store, dense, fused, cosines, k, min_score, with_payload)
        [bm25_hits] = store.query([bm25_spec])
        fused = fuse([(h.id, h.score) for h in dense_hits], [(h.id, h.score) for h in bm25_hits], exact=False)
        return _with_cosines(store, dense, fused, cosines, k, min_score, with_payload)
    dense_hits, bm25_hits = store.query([dense_spec, bm25_spec])
    cosines = {h.id: h.score for h in dense_hits}
    fused = fuse([(h.id, h.score) for h in dense_hits], [(h.id, h.score) for h in bm25_hits])
    return _with_cosines(store, dense, fused, cosines, k, min_score, with_payload)


def _with_cosines(store: Store, dense: list[float], fused: list[tuple[str, float, str]], cosines: dict[str, float],
                  k: int, min_score: float | None, with_payload: bool = True) -> list[RankedHit]:
    """The ranked points with their cosine (read for those the dense query did not return), floored, cut to k,
    payloads read for the survivors (with_payload)."""
    # BM25-only candidates have no cosine yet: those that may enter the answer get their vectors read
    considered = fused if min_score is not None else fused[:k]
    missing = [point for point, _, _ in considered if point not in cosines]
    if missing:
        query = np.asarray(dense, dtype=np.float32)
        cosines.update((h.id, _cosine(query, h.dense)) for h in store.fetch(missing, with_dense=True))
    ranked = []
    for point, score, retriever in fused:
        if point not in cosines:  # deleted between the two calls
            continue
        if min_score is not None and cosines[point] < min_score:
            continue
        ranked.append(RankedHit(RawHit(point, score, {}), cosines[point], retriever))
        if len(ranked) == k:
            break
    if not with_payload:
        return ranked
    payloads = {h.id: h.payload for h in store.fetch([r.raw.id for r in ranked])} if ranked else {}
    for r in ranked:
        r.raw.payload = payloads.get(r.raw.id, {})
    return [r for r in ranked if r.raw.id in payloads]  # deleted between the calls: gone
