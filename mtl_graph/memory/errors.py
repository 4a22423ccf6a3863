"""The pool's error types (a module of their own so the location, integrity and pool modules share them)."""

from __future__ import annotations

from mtl_graph.core.errors import MTLError


class PoolError(MTLError, RuntimeError):
    """The pool cannot be opened or used."""


class PoolLockedError(PoolError):
    """Another process holds the embedded pool."""


class EmbeddingMismatchError(PoolError):
    """The pool was built with other embeddings."""
