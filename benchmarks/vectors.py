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
