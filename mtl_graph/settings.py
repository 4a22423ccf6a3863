"""Settings read from environment variables (MTL_*), with defaults that work offline."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every MTL_* environment variable in one place; CLI flags override them."""

    model_config = SettingsConfigDict(env_prefix="MTL_", extra="ignore")

    pool: str = ".mtl/pool"
    """Memory pool location: ":memory:", a directory (embedded Qdrant), or an http(s):// Qdrant URL."""
    engine: Literal["edge", "client"] = "edge"
    """Embedded engine for new directory pools: Qdrant Edge ("edge") or qdrant-client local mode ("client")."""
    embeddings: str = "local"
    """Embedding model: "local" (bundled MiniLM, offline) or an init_embeddings string like openai:text-embedding-3-small."""
    model: str | None = None
    """Chat model as provider:model (e.g. openai:gpt-5-mini); runs without one fail with a clear message."""
    memory_type: str = "insight"
    """Memory format retrieved into runs: insight, summary, workflow or trajectory."""
    top_k: int = Field(default=3, ge=0, le=50)
    """Memories retrieved per run."""
    sandbox: str = "auto"
    """Where commands run: auto (bwrap when available), bwrap, local or docker."""
    run_log: str = ".mtl/runs.jsonl"
    """Run log (JSONL) appended after every run."""
    qdrant_api_key: str | None = Field(default=None, validation_alias="QDRANT_API_KEY")
    """API key for a Qdrant server (read from QDRANT_API_KEY)."""


def get_settings() -> Settings:
    return Settings()
