"""How Qdrant Edge indexes a growing pool: one indexed segment, rebuilt in the background (edge_rebuild.py).

Edge builds HNSW only inside `optimize()`, which holds the GIL for the whole build: any build inside the pool's
process stalls it (17.8 s at ~98.7k memories with one ever larger segment; 2-3 s per build with segments capped
at ~10k, which left 13 segments to search at 100k). So the pool's process never builds: a worker process builds
one indexed segment of every point, and the writes that came after it form an unindexed tail, searched exactly,
until the tail is long enough for the next build.

Every indexed payload field keeps its HNSW links: building them only for `type` saved little indexing time and
cost filtered recall (0.83 -> 0.69 on a 30k pool with a domain held out)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from mtl_graph.memory.engine.storage import HNSW_EF


class EdgeIndexConfig(BaseModel):
    """Qdrant Edge HNSW settings and when the background index build runs."""

    model_config = ConfigDict(extra="forbid")

    hnsw_m: int = Field(default=16, ge=4)
    """Edges per HNSW node (Qdrant's default)."""
    ef_construct: int = Field(default=100, ge=8)
    """Candidates while building the graph (Qdrant's default); search uses `hnsw_ef`."""
    hnsw_ef: int = Field(default=HNSW_EF, ge=4, le=4096)
    """HNSW beam width of a dense query (storage.HNSW_EF: chosen by measurement, see there)."""
    exact_below: int = Field(default=40_000, ge=0)
    """A shard of at most this many points answers every dense query by an exact scan (Qdrant's `exact`), not the
    HNSW walk, unless the query names its own beam (`QuerySpec.hnsw_ef`). An exact scan costs about 0.1 ms per
    thousand points whatever the filter, and a filtered walk at ef 400 as much up to ~40k; below that the walk
    only loses recall: @3 with the retrieve node's filter 0.918 at 20k and 0.970 at 40k (10k real-embedded
    memories), 0.830 at 5k (2k), 1.000 exact (docs/benchmarks.md, "Small pools are searched exactly"). 0: always
    walk the graph."""
    quantization: Literal["none", "int8"] = "none"
    """"int8": dense vectors also kept as int8 (scalar quantisation, a quarter of the bytes), the HNSW walk compares
    those and the best candidates are rescored with the float vectors; applied when an index is built. Off by
    default: measured losing filtered recall@3 at 100k before, not yet measured there since (docs/benchmarks.md,
    "Search at scale")."""
    oversampling: float = Field(default=2.0, ge=1.0, le=16.0)
    """With quantisation: candidates rescored with the float vectors per hit asked for."""
    full_scan_threshold_kb: int = Field(default=1_500, ge=0)
    """Below this many KB of vectors matching a filter, a segment is scanned exactly (Qdrant's 10 MB would scan
    most filtered queries of a 100k pool exactly)."""
    rebuild_min_points: int = Field(default=4_000, ge=1)
    """No build for a shorter unindexed tail: an exact scan of 4k memories costs ~0.3 ms, a build seconds."""
    rebuild_ratio: float = Field(default=0.25, gt=0, le=10)
    """A build starts when the tail reaches this fraction of the indexed memories, so that the total indexing
    work stays a small multiple of one build of the whole pool while the tail's exact scan stays short (25k
    memories filtered to one type: ~2.5 ms)."""

    def rebuild_after(self, indexed: int) -> int:
        """The tail length at which a pool with `indexed` indexed memories starts its next build."""
        return max(self.rebuild_min_points, int(self.rebuild_ratio * indexed))
