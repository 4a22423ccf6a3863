"""Embed the synthetic corpus once with the real local model and cache the vectors between runs."""

from __future__ import annotations

import hashlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHUNK = 10_000
CACHE_DIR = Path(tempfile.gettempdir()) / "mtl-graph-bench-cache"


def _digest(texts: list[str], model: str) -> str:
    h = hashlib.sha256(model.encode())
    for t in texts:
        h.update(t.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def embed_cached(texts: list[str], embeddings, model: str, label: str, verbose: bool = True) -> np.ndarray:
    """float32 matrix (len(texts) x dim), embedded in chunks of CHUNK texts, each chunk cached by content hash."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    parts = []
    todo = 0
    for start in range(0, len(texts), CHUNK):
        chunk = texts[start:start + CHUNK]
        path = CACHE_DIR / f"{label}-{_digest(chunk, model)}-{len(chunk)}.npy"
        if path.exists():
            parts.append(np.load(path))
            continue
        todo += len(chunk)
        t0 = time.perf_counter()
        vecs = np.asarray(embeddings.embed_documents(chunk), dtype=np.float32)
        if verbose:
            rate = len(chunk) / (time.perf_counter() - t0)
            print(f"  embedded {label} {start + len(chunk):,}/{len(texts):,} ({rate:,.0f} texts/s)", file=sys.stderr)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, vecs)
        tmp.replace(path)
        parts.append(vecs)
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


def synthesize(base: np.ndarray, n: int, seed: int = 3) -> np.ndarray:
    """n unit vectors shaped like real embeddings: a random convex mix of two embedded texts plus a little noise.

    Embedding 100k texts with the local model takes ~15 min on 2 cores; the latency and recall benchmarks need the
    distribution of real vectors (clusters by topic), not those exact texts, so only the first pool's worth is
    embedded and the rest is drawn from it."""
    if n <= 0:
        return np.zeros((0, base.shape[1]), dtype=np.float32)
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, len(base), n), rng.integers(0, len(base), n)
    w = rng.uniform(0.5, 1.0, n)[:, None].astype(np.float32)
    mixed = w * base[a] + (1 - w) * base[b] + 0.04 * rng.standard_normal((n, base.shape[1])).astype(np.float32)
    return (mixed / np.linalg.norm(mixed, axis=1, keepdims=True)).astype(np.float32)
