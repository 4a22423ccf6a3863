"""Builds a pool's HNSW index in a process of its own (see rebuild.py): ``python build_worker.py DIR``.

Qdrant Edge's `optimize()` holds the GIL for the whole build (~110 s of CPU for 100k memories), so inside the
agent's process it would stall every thread. This process gets the pool's points over stdin, builds one indexed
segment in DIR at low priority, then applies the writes the pool took meanwhile, and closes the shard.

Protocol: stdin is a stream of pickled tuples from the parent (our own process, so pickle is safe here):
  ``("config", {...})`` first; ``("points", ids, dense float32 matrix, sparse [(indices, values)], payloads)`` (see `points_of`);
  ``("payload", id, payload)``; ``("delete", ids)``; ``("index",)`` builds the index (reply ``{"indexed": N}``);
  ``("sync",)`` replies ``{"synced": N}`` once everything before it is applied; ``("finish",)`` flushes and closes
  (reply ``{"points": N}``). Replies are JSON lines on stdout; any failure is ``{"error": "..."}`` and exit 1.
Runs as a script (not ``-m``) so that it imports only the standard library, numpy and qdrant_edge.
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import signal
import sys
from typing import Any

INDEX_MARKER = "mtl_index.json"
"""Written into the built shard: how many points its indexed segment holds (the rest is the unindexed tail)."""
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """A pool process killed mid-build must not leave this one writing into the pool's directory."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before the line above
        os._exit(1)


def edge_config(q: Any, config: dict[str, Any], building: bool) -> Any:
    """The shard's EdgeConfig; `building`: optimizer settings that merge everything into one indexed segment."""
    optimizers = q.EdgeOptimizersConfig(indexing_threshold=1, max_segment_size=2**31 - 1, default_segment_number=1) \
        if building else q.EdgeOptimizersConfig(indexing_threshold=2**31 - 1, max_segment_size=2**31 - 1)
    # int8 copies of the dense vectors for the HNSW walk (the float vectors rescore the best, see _request)
    quantized = q.ScalarQuantizationConfig(type=q.ScalarType.Int8, quantile=0.99, memory=q.Memory.Cached) \
        if config.get("quantization", "none") == "int8" else None
    return q.EdgeConfig(
        vectors={config["dense"]: q.EdgeVectorParams(size=config["dim"], distance=q.Distance.Cosine,
                                                     quantization_config=quantized)},
        sparse_vectors={config["sparse"]: q.EdgeSparseVectorParams(modifier=q.Modifier.Idf)},
        # Mapped on demand, not loaded whole: a search reads its top k payloads only (filters use the payload
        # indexes), and Cached kept every 32 MB payload page resident, holes included (430 MB of a 1.09 GB peak
        # with 13 segments at 100k) for no faster search (docs/benchmarks.md, "Peak RSS").
        payload_memory=q.Memory.Cold,
        hnsw_config=q.HnswIndexConfig(m=config["hnsw_m"], ef_construct=config["ef_construct"],
                                      full_scan_threshold=config["full_scan_threshold_kb"]),
        optimizers=optimizers,
    )


def points_of(q: Any, config: dict[str, Any], ids: str, dense: Any, sparse: str, payloads: str) -> list:
    """Points from a ``points`` message: ids, sparse vectors and payloads as JSON text, dense as a float32 matrix.

    Text and an array, not lists of dicts: the pool's process holds a batch while the pipe is full, and thousands
    of live containers per batch would be promoted to the collector's oldest generation and trigger full
    collections (seconds in a process holding a large heap) in whatever thread allocates next."""
    out = []
    for point_id, vector, (indices, values), payload in zip(json.loads(ids), dense, json.loads(sparse),
                                                           json.loads(payloads)):
        vectors = {config["dense"]: vector.tolist(), config["sparse"]: q.SparseVector(list(indices), list(values))}
        out.append(q.Point(point_id, vectors, payload))
    return out


def apply_write(q: Any, shard: Any, config: dict[str, Any], message: tuple) -> bool:
    """Apply one journaled write (``points``, ``payload`` or ``delete``) to shard; False for any other message."""
    kind = message[0]
    if kind == "points":
        shard.update(q.UpdateOperation.upsert_points(points_of(q, config, *message[1:])))
    elif kind == "payload":
        try:
            key = message[3] if len(message) > 3 else None
            shard.update(q.UpdateOperation.set_payload([message[1]], message[2], key=key))
        except Exception:  # the point was deleted after its payload changed: the delete follows in order
            pass
    elif kind == "delete":
        shard.update(q.UpdateOperation.delete_points(message[1]))
    else:
        return False
    return True


class Builder:
    def __init__(self, directory: str) -> None:
        import qdrant_edge as q

        self.q = q
        self.directory = directory
        self.shard: Any = None
        self.config: dict[str, Any] = {}

    def handle(self, message: tuple) -> dict[str, Any] | None:
        q, kind = self.q, message[0]
        if kind == "config":
            self.config = message[1]
            self.shard = q.EdgeShard.create(self.directory, edge_config(q, self.config, building=True))
            for name in self.config["fields"]:
                self.shard.update(q.UpdateOperation.create_field_index(name, q.PayloadSchemaType.Keyword))
        elif apply_write(q, self.shard, self.config, message):
            pass
        elif kind == "index":
            self.shard.optimize()
            indexed = self.shard.info().points_count
            with open(os.path.join(self.directory, INDEX_MARKER), "w") as fh:
                json.dump({"indexed_points": indexed}, fh)
            return {"indexed": indexed}
        elif kind == "sync":
            return {"synced": self.shard.info().points_count}
        elif kind == "finish":
            points = self.shard.info().points_count
            self.shard.flush()
            self.shard.close()
            self.shard = None
            return {"points": points}
        else:
            raise ValueError(f"unknown message {kind!r}")
        return None


def main() -> int:
    die_with_parent()
    os.nice(10)  # the agent's own work comes first; the index can wait
    builder = Builder(sys.argv[1])
    stdin, stdout = sys.stdin.buffer, sys.stdout
    try:
        while True:
            try:
                message = pickle.load(stdin)
            except EOFError:
                return 1  # the pool gave up on this build (closed, or failed)
            reply = builder.handle(message)
            if reply is not None:
                stdout.write(json.dumps(reply) + "\n")
                stdout.flush()
                if "points" in reply:
                    return 0
    except Exception as exc:  # reported to the pool, which keeps its current shard
        stdout.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
        stdout.flush()
        return 1


if __name__ == "__main__":
    sys.exit(main())
