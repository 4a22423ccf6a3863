"""What looking for supersessions costs the write path: `add_many` with the rule on and off, on the same memories.

Memories are insights written from crossed templates (distinct advice, some near-duplicate pairs that conflict),
added in batches into a fresh embedded pool each time; the embeddings are computed once beforehand and replayed,
so the timing is the pool's own work (dedup lookup, upsert, and the supersession search and rule), not the
embedder's.

    python benchmarks/supersede_cost.py [--memories 600] [--batch 50]
"""

from __future__ import annotations

import argparse
import itertools
import time

from langchain_core.embeddings import Embeddings

from mtl_graph.memory.base import Provenance
from mtl_graph.memory.engine.embeddings import local_embeddings
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.lifecycle.supersede import SupersedeConfig
from mtl_graph.memory.pool.pool import MemoryPool

VERBS = ["run", "rebuild", "clear", "format", "restart", "check", "lint", "profile", "vendor", "cache"]
OBJECTS = ["the linter", "the docker image", "the pip cache", "the database container", "the test suite",
           "the build directory", "the lock file", "the frontend bundle", "the migrations", "the coverage report"]
WHEN = ["before committing", "after every edit", "when the build fails", "in continuous integration",
        "before a release", "when a test is flaky"]


class Replayed(Embeddings):
    """The local embedder's vectors, computed once and replayed (the pool's work is what is timed)."""

    def __init__(self, inner: Embeddings, texts: list[str]) -> None:
        self.model_name = inner.model_name
        self.vectors = dict(zip(texts, inner.embed_documents(texts)))
        self.inner = inner

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors.get(t) or self.inner.embed_documents([t])[0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def memories(n: int) -> list[InsightMemory]:
    out = []
    for i, (verb, obj, when) in enumerate(itertools.product(VERBS, OBJECTS, WHEN)):
        if len(out) >= n:
            break
        text = f"{'Never' if i % 7 == 0 else 'Always'} {verb} {obj} {when}."
        out.append(InsightMemory(title=text[:-1], description=text, content=text,
                                 sources=[Provenance(domain="bench", source_task_id=f"t{i}")]))
    return out


def timed(embeddings: Embeddings, items: list[InsightMemory], batch: int, config: SupersedeConfig) -> tuple[float, int]:
    with MemoryPool.open(":memory:", embeddings) as pool:
        start = time.perf_counter()
        for i in range(0, len(items), batch):
            pool.add_many(items[i:i + batch], supersede=config)
        return time.perf_counter() - start, len(pool.superseded())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=600)
    parser.add_argument("--batch", type=int, default=50)
    args = parser.parse_args()
    items = memories(args.memories)
    embeddings = Replayed(local_embeddings(), [m.key_text() for m in items])
    for name, config in (("off", SupersedeConfig(enabled=False)), ("rule", SupersedeConfig())):
        seconds, superseded = timed(embeddings, items, args.batch, config)
        print(f"supersession {name:4}: {len(items)} memories in batches of {args.batch}: {seconds:.2f} s "
              f"({1000 * seconds / len(items):.2f} ms a memory), {superseded} superseded")


if __name__ == "__main__":
    main()
