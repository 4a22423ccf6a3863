"""How Qdrant Edge indexes a growing pool: bounded HNSW builds instead of ever larger merges.

Edge builds HNSW only inside `optimize()`, and that call holds the GIL for the whole build, so a background thread
stalls the process just the same. With Edge's defaults the optimizer re-merges everything into one ever larger
segment each time the unindexed segment passes the indexing threshold (~6.6k memories of 384 floats): the `add`
that crosses it rebuilt the index of the whole pool (17.8 s at ~98.7k memories). Capping the segment size bounds
every build to one segment's worth of points, whatever the pool's size; the price is a query that visits a few
more segments (benchmarks/system.py measures both).

Every indexed payload field keeps its HNSW links: building them only for `type` saved little indexing time and
cost filtered recall (0.83 -> 0.69 on a 30k pool with a domain held out)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class EdgeIndexConfig(BaseModel):
    """Qdrant Edge HNSW and optimizer settings for new and reopened pools."""

    hnsw_m: int = Field(default=16, ge=4)
    """Edges per HNSW node (Qdrant's default)."""
    ef_construct: int = Field(default=100, ge=8)
    """Candidates while building the graph (Qdrant's default); search uses storage.HNSW_EF."""
    full_scan_threshold_kb: int = Field(default=1_500, ge=0)
    """Below this many KB of vectors matching a filter, a segment is scanned exactly. Qdrant's 10 MB made every
    capped segment scan its ~2k filtered memories exactly (100k pool: 14.8 ms p50); 1.5 MB keeps them on HNSW
    (7.6 ms, recall@3 0.990)."""
    indexing_threshold_kb: int = Field(default=10_000, ge=0)
    """An unindexed segment above this many KB gets an HNSW index (10 MB = ~6.6k memories)."""
    max_segment_size_kb: int = Field(default=16_000, ge=1_000)
    """No merge builds a segment larger than this (16 MB = ~10k memories): the bound on one build's time."""
    default_segment_number: int = Field(default=16, ge=1)
    """Segments the merge optimizer aims for: above it, small segments are merged (never past the size cap)."""

    def to_edge(self, q: Any) -> dict[str, Any]:
        """Keyword arguments for `qdrant_edge.EdgeConfig`."""
        return {
            "hnsw_config": q.HnswIndexConfig(m=self.hnsw_m, ef_construct=self.ef_construct,
                                              full_scan_threshold=self.full_scan_threshold_kb),
            "optimizers": q.EdgeOptimizersConfig(indexing_threshold=self.indexing_threshold_kb,
                                                  max_segment_size=self.max_segment_size_kb,
                                                  default_segment_number=self.default_segment_number),
        }
