"""Every MTL_* environment variable: `Settings`, the process's own settings (`ProcessSettings`, in
`mtl_graph/core/environment.py`) plus one optional MTL_<NAME> variable per run setting, and `get_settings()`.

Every run setting of `mtl_graph/config/schema.py` is added as an optional MTL_<NAME> variable (its flat name)
(unset: the graph's default), so a new run setting gets its variable without an edit here. Lists and model options
are JSON (MTL_EXCLUDE_DOMAINS='["math"]', MTL_MODEL_OPTIONS='{"temperature": 0}') or, for one option,
MTL_MODEL_OPTIONS__TEMPERATURE=0. Code below the configuration (the memory pool, the store) reads only the
process's settings, with `process_settings()`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, create_model

from mtl_graph.config.names import RUN_SETTINGS, MTLContext, RunOverrides
from mtl_graph.config.schema import optional_field
from mtl_graph.core.environment import ProcessSettings, read_environment
from mtl_graph.core.errors import SettingsError

__all__ = ["ProcessSettings", "Settings", "SettingsError", "get_settings", "settings_model"]


class _WithRunSettings(ProcessSettings):
    """The process's settings and, added by `settings_model`, the run settings given as MTL_<NAME> variables."""

    def run_context(self) -> MTLContext:
        """The run settings given in the environment, as a run context (unset ones stay None)."""
        return MTLContext(**{name: getattr(self, name) for name in RUN_SETTINGS if getattr(self, name) is not None})


def settings_model(run_settings: type[BaseModel]) -> type[_WithRunSettings]:
    """The process's settings plus one optional MTL_<NAME> variable per field of `run_settings`."""
    fields = {name: optional_field(info, info.description) for name, info in run_settings.model_fields.items()}
    model = create_model("Settings", __base__=_WithRunSettings, __module__=__name__, **fields)
    model.__doc__ = "Every MTL_* environment variable: the process's settings and one per run setting."
    return model


Settings = settings_model(RunOverrides)


def get_settings() -> Any:
    """The settings of this process's environment; a bad value is one SettingsError line naming the variable."""
    return read_environment(Settings)
