"""Near-duplicate pairs of a large group, compared within cells: a full consolidation pass that grows linearly.

Comparing all pairs of a group of n memories costs n^2 products; asking the dense index once per memory costs n
filtered HNSW walks, and a filtered walk over a group of a few thousand points is a scan of the group (the engine's
full-scan threshold), so that pass grew faster than the pool too (docs/benchmarks.md). Here the group's vectors are
read once and split into cells of about `cell_size` memories by spherical k-means (trained on a sample, seeded:
the same vectors give the same cells); each memory joins its `probes` nearest cells, and the pairs are compared
within each cell only, as numpy block products. With cells of a fixed size the work is n x probes^2 x cell_size
products: linear in the group.

Which pairs it can miss: two memories at or above the threshold are compared when they share a cell, that is when
one of the `probes` centroids nearest to one of them is among those nearest to the other. A near-duplicate (cosine
0.9 and up) is close to the same centroids, so with two probes none of the planted and natural pairs of the
generated groups in the tests and benchmarks was missed (docs/benchmarks.md gives the counts); it is not a proof,
and a cell border can still part two memories. An exact bound (the distance from a memory to a cell's bisecting
hyperplane) prunes nothing in 384 dimensions at this threshold, so it is not used. A cell holding many near-copies
of one memory is compared whole, so a tight group of any size is seen whole.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

SAMPLE_PER_CELL = 32
"""Vectors sampled per cell to train the centroids (k-means on the whole group would cost as much as the pass)."""
ROUNDS = 8
"""k-means rounds: the cells only need to keep near vectors together, not to converge."""


def centroids(vectors: np.ndarray, cells: int, seed: int = 0) -> np.ndarray:
    """`cells` unit centroids of unit `vectors` by spherical k-means on a seeded sample (deterministic)."""
    rng = np.random.default_rng(seed)
    sample = vectors[np.sort(rng.choice(len(vectors), min(len(vectors), SAMPLE_PER_CELL * cells), replace=False))]
    out = sample[np.sort(rng.choice(len(sample), cells, replace=False))].copy()
    for _ in range(ROUNDS):
        nearest = np.argmax(sample @ out.T, axis=1)
        sums = np.zeros_like(out)
        np.add.at(sums, nearest, sample)
        norms = np.linalg.norm(sums, axis=1)
        filled = norms > 0  # an empty cell keeps its centroid
        out[filled] = sums[filled] / norms[filled, None]
    return out


def cells_of(vectors: np.ndarray, centres: np.ndarray, probes: int, block: int = 4096) -> list[np.ndarray]:
    """The members (row numbers, ascending) of each non-empty cell, each vector in its `probes` nearest cells."""
    probes = min(probes, len(centres))
    owners = np.empty((len(vectors), probes), dtype=np.int64)
    for start in range(0, len(vectors), block):
        sims = vectors[start:start + block] @ centres.T
        if probes == len(centres):
            owners[start:start + block] = np.arange(probes)
        else:
            owners[start:start + block] = np.argpartition(-sims, probes - 1, axis=1)[:, :probes]
    cell = owners.ravel()
    row = np.repeat(np.arange(len(vectors)), probes)
    order = np.lexsort((row, cell))
    cell, row = cell[order], row[order]
    return np.split(row, np.flatnonzero(np.diff(cell)) + 1)


def pairs_within(vectors: np.ndarray, members: np.ndarray, threshold: float, block: int) -> np.ndarray:
    """The pairs (i < j, row numbers) of `members` whose cosine is at or above the threshold."""
    sub = vectors[members]
    found = []
    for start in range(0, len(members), block):
        sims = sub[start:start + block] @ sub[start:].T  # the upper triangle from this block down
        r, c = np.nonzero(sims >= threshold)
        keep = c > r  # both relative to `start`: each pair once, never a memory with itself
        if keep.any():
            a, b = members[start + r[keep]], members[start + c[keep]]
            found.append(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1))
    return np.concatenate(found) if found else np.zeros((0, 2), dtype=np.int64)


def partitioned_pairs(vectors: np.ndarray, threshold: float, *, cell_size: int = 300, probes: int = 2,
                      seed: int = 0, block: int = 2048,
                      tick: Callable[[int], None] = lambda n: None) -> np.ndarray:
    """The pairs (i < j, row numbers, sorted, each once) of unit `vectors` at or above `threshold` that share a
    cell (see the module docstring). `tick` is called as cells are compared, with n in all."""
    if vectors.ndim != 2:
        raise ValueError(f"vectors must be a matrix, not of shape {vectors.shape}")
    if cell_size < 2 or probes < 1:
        raise ValueError(f"cell_size must be at least 2 and probes at least 1, not {cell_size} and {probes}")
    n = len(vectors)
    if n < 2:
        tick(n)
        return np.zeros((0, 2), dtype=np.int64)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    centres = centroids(vectors, max(1, n // cell_size), seed)
    found, rows, reported = [], 0, 0
    probes = min(probes, len(centres))
    for members in cells_of(vectors, centres, probes):
        if len(members) > 1:
            found.append(pairs_within(vectors, members, threshold, block))
        rows += len(members)  # n x probes rows in all
        if rows // probes > reported:
            tick(rows // probes - reported)
            reported = rows // probes
    merged = np.concatenate(found) if found else np.zeros((0, 2), dtype=np.int64)
    return np.unique(merged, axis=0) if len(merged) else merged
