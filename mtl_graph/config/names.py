"""The flat names of the configuration, and the run context written with them.

Every field of `MTLConfig`'s groups (`mtl_graph/config/schema.py`) has one flat name, unique across the groups:
`SETTINGS` (the schema's `settings_table`) maps each to where it lives (`top_k` -> `retrieval.top_k`). Derived
from that table:
- `MTLContext`, the LangGraph `context_schema`: every run setting, optional (None keeps the build's value), with
  the field's type, constraints and docstring, so Studio's form and a bad value's error line come from the
  definition;
- `configured(config, values)`: a config with settings given by flat name applied over it, a settings model
  (model_options, retry) merged field by field: what the factories' keywords and a run's context do;
- `effective(config, context)`: the config of one run;
- the CLI's flags (`mtl_graph/cli/options.py`) and the MTL_* variables (`mtl_graph/config/environment.py`).

A bad value or an unknown name is one `SettingsError` line (`describe_error`; both in `mtl_graph/core/errors.py`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from mtl_graph.core.errors import SettingsError, describe_error
from mtl_graph.config.schema import MTLConfig, optional_field, settings_table

M = TypeVar("M", bound=BaseModel)


def run_settings(config_model: type[MTLConfig] = MTLConfig) -> tuple[str, ...]:
    """The flat names a run's context may set."""
    return tuple(name for name, setting in settings_table(config_model).items() if setting.run)


SETTINGS = settings_table()
"""Every setting of MTLConfig by its flat name."""
RUN_SETTINGS = run_settings()
"""The flat names a run's context may set."""


def value_of(config: MTLConfig, name: str) -> Any:
    """The value of the setting `name` in `config`."""
    value: Any = config
    for part in settings_table(type(config))[name].path:
        value = getattr(value, part)
    return value


def dotted(loc: tuple) -> str:
    return ".".join(map(str, loc))


class Overrides(BaseModel):
    """Base of the all-optional models of flat settings (None: not given)."""

    model_config = ConfigDict(extra="forbid")

    def given(self) -> dict[str, Any]:
        """The settings this holds a value for."""
        return {name: getattr(self, name) for name in type(self).model_fields if getattr(self, name) is not None}


def overrides_model(names: tuple[str, ...] | list[str], name: str, doc: str,
                    config_model: type[MTLConfig] = MTLConfig) -> type[Overrides]:
    """The settings `names`, each optional (None: not given), with their types, constraints, docstrings, flags."""
    table = settings_table(config_model)
    fields = {n: optional_field(table[n].info, table[n].info.description) for n in names}
    model = create_model(name, __base__=Overrides, __module__=__name__, **fields)
    model.__doc__ = doc
    return model


BuildOverrides = overrides_model(list(SETTINGS), "BuildOverrides", "Any setting by its flat name (a factory's "
                                 "keywords); None: not given.")
RunOverrides = overrides_model(RUN_SETTINGS, "RunOverrides", "Some run settings (None: not given); raw validation "
                               "errors, for callers that name the setting their own way (flags, env).")


class MTLContext(RunOverrides):  # type: ignore[misc,valid-type]
    """Run-time settings (LangGraph `context_schema`); None keeps the graph's build-time value."""

    def __init__(self, **data: Any) -> None:
        # LangGraph builds the context with MTLContext(**context) (Studio sends JSON): a bad value or an unknown
        # name is one line, not pydantic's report.
        try:
            super().__init__(**data)
        except ValidationError as exc:
            first = exc.errors()[0]
            line = describe_error(exc, dotted)
            if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
                line += f" (known: {', '.join(type(self).model_fields)})"
            raise SettingsError(f"run context: {line}") from None


def as_context(context: Any) -> MTLContext | None:
    """The run's context as an MTLContext; None stays None.

    A dict reaches a node only when the graph's context schema is someone else's (an agent running
    MemoryTransferMiddleware): its other keys are that agent's, so only ours are taken, and validated. (The MTL
    graph's own schema is MTLContext, which LangGraph builds before any node runs: there an unknown key is an
    error.)"""
    if context is None or isinstance(context, MTLContext):
        return context
    if isinstance(context, dict):
        return MTLContext(**{name: value for name, value in context.items() if name in MTLContext.model_fields})
    return MTLContext(**{name: getattr(context, name) for name in MTLContext.model_fields
                         if getattr(context, name, None) is not None})


def _merge(current: Any, value: Any) -> Any:
    """`value` over `current`; a settings model given in part keeps the current one's other fields."""
    if isinstance(value, BaseModel) and isinstance(current, BaseModel):
        return current.model_copy(update=value.model_dump(exclude_unset=True, exclude_none=True))
    return value


def merged(base: M, *overrides: BaseModel | None) -> M:
    """Flat settings `base` (a context) with the given settings of each override applied in turn, field by field."""
    updates: dict[str, Any] = {}
    for override in overrides:
        for name, value in (override.given() if override is not None else {}).items():
            updates[name] = _merge(updates.get(name, getattr(base, name, None)), value)
    return base.model_copy(update=updates) if updates else base


def configured(config: MTLConfig, values: dict[str, Any]) -> MTLConfig:
    """`config` with `values` (validated settings by flat name) applied, nested settings merged field by field."""
    groups: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    table = settings_table(type(config))
    for name, value in values.items():
        path = table[name].path
        if len(path) == 1:
            top[path[0]] = _merge(getattr(config, path[0]), value)
        else:
            groups.setdefault(path[0], {})[path[1]] = _merge(value_of(config, name), value)
    for group, updates in groups.items():
        top[group] = getattr(config, group).model_copy(update=updates)
    return config.model_copy(update=top) if top else config


def make_config(config: MTLConfig | None = None, **settings: Any) -> MTLConfig:
    """The build-time configuration every factory takes: `config` (default: `MTLConfig()`) with `settings`, by flat
    name, over it (model_options, lifecycle_settings, retry merged field by field; None: not given). An unknown
    name or a bad value is one `SettingsError` line."""
    base = config if config is not None else MTLConfig()
    if not isinstance(base, MTLConfig):
        raise SettingsError(f"config must be an MTLConfig, not {type(base).__name__}")
    raw = {name: value.model_dump(exclude_unset=True) if isinstance(value, BaseModel) else value
           for name, value in settings.items()}
    try:
        given = BuildOverrides(**raw).given()
    except ValidationError as exc:
        raise SettingsError(f"build settings: {describe_error(exc, dotted)}") from None
    return configured(base, given)


def effective(config: MTLConfig, context: Any) -> MTLConfig:
    """The build-time config with the run's context applied (nested settings merge field by field)."""
    context = as_context(context)
    return config if context is None else configured(config, context.given())
