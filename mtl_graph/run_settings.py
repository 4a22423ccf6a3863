"""The run settings, defined once, and what is derived from them.

`RunSettings` is the one definition of every per-run knob (one field, one docstring each). Derived from it:
`MTLConfig` (the graph's build-time values: RunSettings plus build-only fields), `MTLContext` (the LangGraph
`context_schema`: every field optional, None keeps the build-time value), `effective()` (config + context),
`agent_config()` (the agent's per-run settings), the flags of `mtl run` / `mtl demo` (`mtl_graph/cli/options.py`),
the MTL_* environment settings (`mtl_graph/settings.py`) and the evaluation runner's context
(`mtl_graph/bench/graph_runner.py`).

To add a knob, add a field to `PipelineKnobs` (or its name to `AGENT_KNOBS` for an `AgentConfig` field) and read
it in a node as `effective(config, runtime.context).<name>`; the flag, the env variable and Studio's form follow.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Annotated, Callable, Literal, Optional, TypeVar, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model

from mtl_graph.agent.config import AgentConfig
from mtl_graph.chat import ModelOptions
from mtl_graph.core.errors import MTLError
from mtl_graph.memory.formats import MemoryChoice  # a registered format or "none", checked when a value arrives

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Flags:
    """Extra CLI names of a run setting (its own name in kebab case is always a flag too)."""

    names: tuple[str, ...] = ()
    """More flags for the setting, e.g. ("--memory",); the first long one is the name errors use."""
    nested: tuple[tuple[str, str], ...] = ()
    """For a settings-model field: (sub-field, flag) pairs naming its sub-fields' flags."""


def _namespace(value: str | None) -> str | None:
    from mtl_graph.memory.namespace import NamespaceError, check_namespace  # the one rule for namespace names

    try:
        return None if value is None else check_namespace(value)
    except NamespaceError as exc:  # the setting's error line names the value already: keep only what is wrong
        raise ValueError(str(exc).split(": ", 1)[-1]) from None


class PipelineKnobs(BaseModel):
    """Per-run settings of the pipeline's stages (the agent's own are added from AgentConfig below)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: Annotated[Optional[str], Flags(("-m",))] = None
    """Chat model as provider:model (e.g. openai:gpt-5-mini), or scripted:FILE.json to replay an action script."""
    memory_type: Annotated[MemoryChoice, Flags(("--memory",))] = "insight"
    """Memory format retrieved into the agent's prompt ("none" = zero-shot)."""
    top_k: Annotated[int, Field(ge=0, le=50), Flags(("--top-k", "--k", "-k"))] = 3
    """How many memories to retrieve."""
    retrieval: Literal["inject", "tool", "both"] = "inject"
    """How memories reach the agent: inject (top-k in its system prompt, the paper's), tool (it calls search_memories), or both."""
    retriever: Literal["hybrid", "dense", "bm25"] = "hybrid"
    """How every search of the run ranks: dense + BM25 fused (hybrid), cosine only (dense), or keywords only (bm25)."""
    search_budget: Annotated[int, Field(ge=0, le=20)] = 3
    """Calls of search_memories a run may make (retrieval tool or both); each may follow up on what came back."""
    namespace: Annotated[Optional[str], AfterValidator(_namespace)] = None
    """The pool namespace (team or project) the run retrieves from and writes to (unset: the pool's own)."""
    online: bool = True
    """Distil each run and write the memories back into the pool."""
    exclude_domains: Annotated[list[str], Flags(("--exclude-domain",))] = Field(default_factory=list)
    """Never retrieve memories whose source domain is one of these."""
    hold_one_out: bool = False
    """Also exclude memories from the task's own domain (the research protocol's cross-domain setting)."""
    same_domain: bool = False
    """Retrieve only memories from the task's own domain (the same-domain baselines: ReasoningBank, AWM)."""
    exclude_task_ids: Annotated[list[str], Flags(("--exclude-task-id",))] = Field(default_factory=list)
    """Never retrieve memories made from these tasks (the task's own id is always excluded)."""
    only_ids: Annotated[Optional[list[str]], Flags(("--only-id",))] = None
    """Retrieve only among these memory ids (seeded pool subsets, cross-model experiments)."""
    lifecycle: Annotated[Literal["on", "off"], Flags(("--lifecycle",))] = "on"
    """The online loop: re-rank by utility, a relevance floor, quarantine (off, or --paper: the research's top-k)."""
    relevance_floor: Annotated[Optional[float], Field(ge=-1.0, le=1.0)] = None
    """Cosine similarity under which a memory is not injected (unset: calibrated from the pool; lifecycle on)."""
    re_retrieve: bool = False
    """Retrieve once more, matched to the error, when a test run fails mid-task (off: the paper's protocol)."""
    judge_also: bool = False
    """Also run the LLM judge on runs the tests decide; kept as judge_verdict to measure the judge's accuracy."""
    review_memories: bool = False
    """Pause before write back (LangGraph interrupt) so a person approves, edits or rejects each new memory."""
    model_options: Annotated[ModelOptions, Flags(nested=(("timeout", "--model-timeout"),))] = Field(
        default_factory=ModelOptions)
    """init_chat_model settings for provider:model strings: base_url, max_tokens, temperature, timeout, max_retries."""


AGENT_KNOBS = ("action_format", "step_limit", "wall_time_limit", "token_limit", "command_timeout",
               "max_consecutive_format_errors", "observation_cap", "retry")
"""AgentConfig fields a run may set (unset: the agent's own value); their types and docs come from AgentConfig."""
AGENT_FLAGS = {"wall_time_limit": Flags(("--time-limit",)),
               "retry": Flags(nested=(("attempts", "--retry-attempts"), ("initial_delay", "--retry-initial-delay"),
                                      ("max_delay", "--retry-max-delay")))}
"""Extra CLI names of agent knobs."""


def non_none(annotation: Any) -> Any:
    """`X` of `X | None` (the annotation itself otherwise)."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else Union[tuple(args)]
    return annotation


def optional_field(info: Any, description: str | None, extra: tuple = ()) -> tuple[Any, Any]:
    """A `create_model` field definition: the same type and constraints, optional, default None."""
    annotation, metadata = Optional[non_none(info.annotation)], (*info.metadata, *extra)
    return (Annotated[annotation, *metadata] if metadata else annotation, Field(default=None, description=description))


def _agent_fields() -> dict[str, Any]:
    fields = {}
    for name in AGENT_KNOBS:
        flags = (AGENT_FLAGS[name],) if name in AGENT_FLAGS else ()
        fields[name] = optional_field(AgentConfig.model_fields[name],
                                      f"{AgentConfig.model_fields[name].description} Unset: the agent's own setting.",
                                      flags)
    return fields


RunSettings = create_model("RunSettings", __base__=PipelineKnobs, __module__=__name__, **_agent_fields())
RunSettings.__doc__ = ("Every per-run knob, defined once: the pipeline's (memory format, k, filters, online, model "
                       "options) and the agent's (AgentConfig fields in AGENT_KNOBS).")


MAX_SHOWN = 80
"""Characters of a bad value shown in its error line."""


class SettingsError(MTLError, ValueError):
    """A run setting (context, flag or environment variable) has a bad value or an unknown name: one line."""


def describe_error(exc: ValidationError, label: Callable[[tuple], str]) -> str:
    """One line for a validation error: the setting (named by `label(loc)`), the value given and what is wrong."""
    errors = exc.errors()
    first = errors[0]
    what = label(tuple(first["loc"]))
    if first["type"] == "extra_forbidden":
        line = f"unknown setting {what}"
    else:
        message = first["msg"].removeprefix("Value error, ")  # a validator's own words, without pydantic's tag
        message = message[0].lower() + message[1:]
        given = repr(first["input"])  # repr keeps it on one line; a long one is cut
        line = f"invalid {what} {given if len(given) <= MAX_SHOWN else given[:MAX_SHOWN] + '...'}: {message}"
    return line + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")


class _Overrides(BaseModel):
    """Base of the derived all-optional models (None: not given)."""

    model_config = ConfigDict(extra="forbid")

    def given(self) -> dict[str, Any]:
        """The settings this holds a value for."""
        return {name: getattr(self, name) for name in type(self).model_fields if getattr(self, name) is not None}


def overrides_model(settings: type[BaseModel], name: str, doc: str) -> type[_Overrides]:
    """`settings` with every field optional (None: not given), same types, constraints, descriptions and flags."""
    fields = {field: optional_field(info, info.description) for field, info in settings.model_fields.items()}
    model = create_model(name, __base__=_Overrides, __module__=__name__, **fields)
    model.__doc__ = doc
    return model


RunOverrides = overrides_model(RunSettings, "RunOverrides", "Some run settings (None: not given); raw "
                               "validation errors, for callers that name the setting their own way (flags, env).")


class MTLContext(RunOverrides):  # type: ignore[misc,valid-type]
    """Run-time settings (LangGraph `context_schema`); None keeps the graph's build-time value."""

    def __init__(self, **data: Any) -> None:
        # LangGraph builds the context with MTLContext(**context) (Studio sends JSON): a bad value or an unknown
        # name is one line, not pydantic's report.
        try:
            super().__init__(**data)
        except ValidationError as exc:
            first = exc.errors()[0]
            line = describe_error(exc, lambda loc: ".".join(map(str, loc)))
            if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
                line += f" (known: {', '.join(type(self).model_fields)})"
            raise SettingsError(f"run context: {line}") from None


def as_context(context: Any) -> BaseModel | None:
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


def merged(base: M, *overrides: BaseModel | None) -> M:
    """`base` with the given (non-None) settings of each override applied in turn; nested settings merge by field."""
    updates: dict[str, Any] = {}
    for override in overrides:
        for name, value in (override.given() if override is not None else {}).items():
            current = updates.get(name, getattr(base, name, None))
            if isinstance(value, BaseModel) and isinstance(current, BaseModel):
                value = current.model_copy(update=value.model_dump(exclude_unset=True, exclude_none=True))
            updates[name] = value
    return base.model_copy(update=updates) if updates else base


def agent_config(settings: BaseModel, base: AgentConfig | None = None) -> AgentConfig:
    """The agent's config for this run: `base` (the agent's own) with the run's agent knobs that are set."""
    base = base if base is not None else AgentConfig()
    updates = {name: getattr(settings, name) for name in AGENT_KNOBS if getattr(settings, name, None) is not None}
    for name, value in updates.items():  # a settings model (retry) given in part keeps the agent's other fields
        if isinstance(value, BaseModel):
            updates[name] = getattr(base, name).model_copy(update=value.model_dump(exclude_unset=True))
    return base.model_copy(update=updates) if updates else base
