"""Settings read from environment variables (MTL_*), with defaults that work offline.

The process's own settings (pool, engine, embeddings, sandbox, run log) are written here; every run setting of
`mtl_graph/config/schema.py` is added as an optional MTL_<NAME> variable (its flat name) (unset: the graph's default), so a new
run setting gets its variable without an edit here. Lists and model options are JSON
(MTL_EXCLUDE_DOMAINS='["math"]', MTL_MODEL_OPTIONS='{"temperature": 0}') or, for one option,
MTL_MODEL_OPTIONS__TEMPERATURE=0."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, ValidationError, create_model
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError as SourceError

from mtl_graph.config.names import RUN_SETTINGS, MTLContext, RunOverrides, SettingsError, describe_error
from mtl_graph.config.schema import optional_field

ENV_PREFIX = "MTL_"


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
    """Every MTL_* environment variable that is not a run setting; CLI flags override them."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", env_nested_delimiter="__")

    pool: str = ".mtl/pool"
    """Memory pool location: ":memory:", a directory (embedded Qdrant), or an http(s):// Qdrant URL."""
    engine: Literal["edge", "client"] = "edge"
    """Embedded engine for new directory pools: Qdrant Edge ("edge") or qdrant-client local mode ("client")."""
    embeddings: str = "local"
    """Embedding model: "local" (bundled MiniLM, offline) or an init_embeddings string like openai:text-embedding-3-small."""
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

    def run_context(self) -> Any:
        """The run settings given in the environment, as a run context (unset ones stay None)."""
        return MTLContext(**{name: getattr(self, name) for name in RUN_SETTINGS if getattr(self, name) is not None})


def env_name(loc: tuple) -> str:
    """The environment variable of a validation error's location."""
    return ENV_PREFIX + "__".join(str(part) for part in loc).upper()


def settings_model(run_settings: type[BaseModel]) -> type[ProcessSettings]:
    """The process's settings plus one optional MTL_<NAME> variable per field of `run_settings`."""
    fields = {name: optional_field(info, info.description) for name, info in run_settings.model_fields.items()}
    model = create_model("Settings", __base__=ProcessSettings, __module__=__name__, **fields)
    model.__doc__ = "Every MTL_* environment variable: the process's settings and one per run setting."
    return model


Settings = settings_model(RunOverrides)


def get_settings() -> Any:
    """The settings of this process's environment; a bad value is one SettingsError line naming the variable."""
    try:
        return Settings()
    except ValidationError as exc:
        hint = " (lists and options are JSON: MTL_EXCLUDE_DOMAINS='[\"math\"]')" if exc.errors()[0]["type"] in (
            "list_type", "dict_type", "model_type") else ""
        raise SettingsError(f"environment: {describe_error(exc, env_name)}{hint}") from None
    except SourceError as exc:  # a JSON variable that is not JSON
        raise SettingsError(f"environment: {exc}") from None
