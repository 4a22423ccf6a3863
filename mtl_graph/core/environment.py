"""The process's own environment: `ProcessSettings`, the MTL_* variables that are not run settings (the pool, its
engine and embeddings, the sandbox, the run log, the served graphs' policy), read by `process_settings()`.

It lives in core, below every package that reads it, so the memory pool and store take their defaults (MTL_POOL,
MTL_ENGINE, MTL_EMBEDDINGS, MTL_NAMESPACE, QDRANT_API_KEY) from the environment without importing the
configuration, which sits above memory. `mtl_graph/config/environment.py` builds the full `Settings` on it: these
plus one MTL_<NAME> variable per run setting. Both read the environment when asked (nothing is cached), and a bad
value is one `SettingsError` line naming the variable."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BeforeValidator, Field, ValidationError
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError as SourceError

from mtl_graph.core.errors import SettingsError, describe_error

ENV_PREFIX = "MTL_"

S = TypeVar("S", bound=BaseSettings)


def _names(value: Any) -> Any:
    """A JSON list, or names separated by commas (MTL_ALLOWED_PROVIDERS=openai,anthropic)."""
    if not isinstance(value, str):
        return value
    if value.lstrip().startswith("["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise ValueError("not a JSON list") from None
    return [part.strip() for part in value.split(",") if part.strip()]


NameList = Annotated[list[str], NoDecode, BeforeValidator(_names)]


class ProcessSettings(BaseSettings):
    """Every MTL_* environment variable that is not a run setting (and MTL_NAMESPACE, which pools read too); CLI
    flags override them."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", env_nested_delimiter="__")

    pool: str = ".mtl/pool"
    """Memory pool location: ":memory:", a directory (embedded Qdrant), or an http(s):// Qdrant URL."""
    engine: Literal["edge", "client"] = "edge"
    """Embedded engine for new directory pools: Qdrant Edge ("edge") or qdrant-client local mode ("client")."""
    embeddings: str = "local"
    """Embedding model: "local" (bundled MiniLM, offline) or an init_embeddings string like openai:text-embedding-3-small."""
    namespace: str | None = None
    """The namespace a pool opens in when none is named (unset: the default one). It is also the run setting
    `namespace`, whose rule the full `Settings` checks; a pool checks it when it opens."""
    sandbox: str = "auto"
    """Where commands run: auto (bwrap when available), bwrap, local or docker."""
    store: str | None = None
    """Served graphs' LangGraph store (graphs/store.py): a directory, ":memory:" or a Qdrant URL (unset: beside the pool)."""
    run_log: str = ".mtl/runs.jsonl"
    """Run log (JSONL) appended after every run."""
    approve_commands: bool = False
    """Served graphs (graphs/mtl.py) pause before each command of the agent for a person to approve it."""
    task_roots: str | None = None
    """Served graphs: directories (os.pathsep-separated) a client's task path, source_dir or scripted: file must be in."""
    allowed_base_urls: NameList = Field(default_factory=list)
    """Served graphs: model endpoints a run's context may name as model_options.base_url (none: only the server's)."""
    allowed_namespaces: NameList = Field(default_factory=list)
    """Served graphs: pool namespaces a run's context may name as `namespace` (none: only the server's own)."""
    allowed_providers: Annotated[list[str] | None, NoDecode, BeforeValidator(_names)] = None
    """Served graphs: providers a run's context may name in `model` (unset: any provider)."""
    allow_setup_network: bool = False
    """Served graphs: a client's task may run its setup with network access (setup_network)."""
    qdrant_api_key: str | None = Field(default=None, validation_alias="QDRANT_API_KEY")
    """API key for a Qdrant server (read from QDRANT_API_KEY)."""


def env_name(loc: tuple) -> str:
    """The environment variable of a validation error's location."""
    return ENV_PREFIX + "__".join(str(part) for part in loc).upper()


def read_environment(model: type[S]) -> S:
    """`model` read from this process's environment; a bad value is one SettingsError line naming the variable."""
    try:
        return model()
    except ValidationError as exc:
        hint = " (lists and options are JSON: MTL_EXCLUDE_DOMAINS='[\"math\"]')" if exc.errors()[0]["type"] in (
            "list_type", "dict_type", "model_type") else ""
        raise SettingsError(f"environment: {describe_error(exc, env_name)}{hint}") from None
    except SourceError as exc:  # a JSON variable that is not JSON
        raise SettingsError(f"environment: {exc}") from None


def process_settings() -> ProcessSettings:
    """The process's own settings (pool, engine, embeddings, ...), read from the environment now."""
    return read_environment(ProcessSettings)
