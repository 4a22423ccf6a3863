"""The configuration, defined once: plain nested pydantic models, one group per concern.

`MTLConfig` is everything a graph is built with:
- `model` (`ModelSettings`): which chat model the stages call, and its `init_chat_model` options;
- `retrieval` (`RetrievalSettings`): which memories a run gets, how many, how they are ranked and shown;
- `agent` (`AgentSettings`): the agent's limits for a run (unset: the agent's own `AgentConfig` value);
- `retry` (`RetrySettings`): how a model call that failed transiently is tried again (the one owner of retries);
- `sandbox` (`SandboxSettings`): where the agent's commands run and what is kept of a run's workspace;
- `loop` (`LoopSettings`): what follows the agent: the judge, distillation, review and write back, the run log.

The stages read it nested (`cfg.retrieval.top_k`). Each field also has one flat name, unique across the groups
(its own, or the one its `Named` marker gives): the name a factory keyword, a run's context (Studio's form), a
CLI flag (`--top-k`) and an environment variable (`MTL_TOP_K`) write it with. Fields marked `BUILD_ONLY` are set
when a graph is built, never by a run. `settings_table` maps every flat name to its place (`top_k` ->
`retrieval.top_k`); the flat layer (`mtl_graph/config/names.py`: the run context, keywords, flags, variables) is
derived from that table, so this module imports nothing of it.

To add a setting, add a field (with its docstring) to its group; the keyword, the context field, the flag, the
variable and the settings doc follow.
"""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic.fields import FieldInfo

from mtl_graph.agent.config import AgentConfig
from mtl_graph.llm.retry import RetrySettings
from mtl_graph.llm.chat import ModelOptions
from mtl_graph.memory.formats import FormatName, MemoryChoice  # registered formats, checked when a value arrives
from mtl_graph.memory.lifecycle.policy import LifecycleConfig


@dataclass(frozen=True)
class Flags:
    """Extra CLI names of a setting (its flat name in kebab case is always a flag too)."""

    names: tuple[str, ...] = ()
    """More flags for the setting, e.g. ("--memory",); the first long one is the name errors use."""
    nested: tuple[tuple[str, str], ...] = ()
    """For a settings-model field: (sub-field, flag) pairs naming its sub-fields' flags."""


@dataclass(frozen=True)
class Named:
    """The flat name of a field whose own name would be unclear outside its group (`ModelSettings.name`: model)."""

    name: str
    """The setting's name as a keyword, a context key, a flag and an MTL_* variable."""


@dataclass(frozen=True)
class BuildOnly:
    """Marks a field only a graph's build sets (a run's context, flags and MTL_* variables do not name it)."""


BUILD_ONLY = BuildOnly()


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


def _namespace(value: str | None) -> str | None:
    from mtl_graph.memory.engine.namespace import NamespaceError, check_namespace  # the one rule for namespace names

    try:
        return None if value is None else check_namespace(value)
    except NamespaceError as exc:  # the setting's error line names the value already: keep only what is wrong
        raise ValueError(str(exc).split(": ", 1)[-1]) from None


class SettingsGroup(BaseModel):
    """Base of the configuration's groups: unknown names refused, each field documented by its docstring."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ModelSettings(SettingsGroup):
    """Which chat model the run's stages call (plan, agent, judge, distillers), and how."""

    name: Annotated[Optional[str], Named("model"), Flags(("-m",))] = None
    """Chat model as provider:model (e.g. openai:gpt-5-mini), or scripted:FILE.json to replay an action script."""
    options: Annotated[ModelOptions, Named("model_options"), Flags(nested=(("timeout", "--model-timeout"),))] = \
        Field(default_factory=ModelOptions)
    """init_chat_model settings for provider:model strings: base_url, max_tokens, temperature, timeout, max_retries."""


class RetrievalSettings(SettingsGroup):
    """Which memories a run gets: the format, how many, from where, how they are ranked, filtered and shown."""

    memory_type: Annotated[MemoryChoice, Flags(("--memory",))] = "insight"
    """Memory format retrieved into the agent's prompt ("none" = zero-shot)."""
    top_k: Annotated[int, Field(ge=0, le=50), Flags(("--top-k", "--k", "-k"))] = 3
    """How many memories to retrieve."""
    mode: Annotated[Literal["inject", "tool", "both"], Named("retrieval")] = "inject"
    """How memories reach the agent: inject (top-k in its system prompt, the paper's), tool (it calls search_memories), or both."""
    retriever: Literal["hybrid", "dense", "bm25"] = "hybrid"
    """How every search of the run ranks: dense + BM25 fused (hybrid), cosine only (dense), or keywords only (bm25)."""
    search_budget: Annotated[int, Field(ge=0, le=20)] = 3
    """Calls of search_memories a run may make (retrieval tool or both); each may follow up on what came back."""
    namespace: Annotated[Optional[str], AfterValidator(_namespace)] = None
    """The pool namespace (team or project) the run retrieves from and writes to (unset: the pool's own)."""
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
    lifecycle_settings: Annotated[LifecycleConfig, BUILD_ONLY] = Field(default_factory=LifecycleConfig)
    """How the online loop ranks, floors, decays and quarantines (lifecycle on); relevance_floor overrides its floor."""
    plan_max_chars: Annotated[int, Field(ge=100), BUILD_ONLY] = 2000
    """Plans longer than this (untrusted model output) are cut before being used as a query."""
    observation_chars: Annotated[int, Field(ge=20), BUILD_ONLY] = 300
    """Trajectory memories show at most this many characters of each observation."""


AGENT_KNOBS = ("action_format", "step_limit", "wall_time_limit", "token_limit", "command_timeout",
               "max_consecutive_format_errors", "observation_cap")
"""AgentConfig fields a run may set (unset: the agent's own value); their types and docs come from AgentConfig."""
AGENT_FLAGS = {"wall_time_limit": Flags(("--time-limit",))}
"""Extra CLI names of agent settings."""


def _agent_fields() -> dict[str, Any]:
    def field(name: str) -> tuple[Any, Any]:
        info = AgentConfig.model_fields[name]
        flags = (AGENT_FLAGS[name],) if name in AGENT_FLAGS else ()
        return optional_field(info, f"{info.description} Unset: the agent's own setting.", flags)

    return {name: field(name) for name in AGENT_KNOBS}


# The agent's fields, their types, constraints and docstrings, are AgentConfig's: here each is optional.
_AgentFields = create_model("_AgentFields", __base__=SettingsGroup, __module__=__name__, **_agent_fields())


class AgentSettings(_AgentFields):  # type: ignore[misc,valid-type]
    """The agent's limits for a run (each unset one: the agent's own `AgentConfig` value)."""


class SandboxSettings(SettingsGroup):
    """Where the agent's commands run, and what is kept of a run's workspace."""

    kind: Annotated[str, Named("sandbox"), BUILD_ONLY] = "auto"
    """Sandbox backend: auto, bwrap, local or docker."""
    workspace_root: Annotated[Optional[Path], BUILD_ONLY] = None
    """Where task workspaces are created (None: a temporary directory)."""
    keep_workspaces: Annotated[bool, BUILD_ONLY] = False
    """Keep each run's workspace after the run (for inspection)."""


class LoopSettings(SettingsGroup):
    """What follows the agent: the judge, distillation, a person's review, write back and the run log."""

    online: bool = True
    """Distil each run and write the memories back into the pool."""
    judge_also: bool = False
    """Also run the LLM judge on runs the tests decide; kept as judge_verdict to measure the judge's accuracy."""
    review_memories: bool = False
    """Pause before write back (LangGraph interrupt) so a person approves, edits or rejects each new memory."""
    distill_formats: Annotated[Optional[list[FormatName]], BUILD_ONLY] = None
    """Formats distilled after a run (default: the retrieved format; insight when zero-shot)."""
    run_log: Annotated[Optional[Path], BUILD_ONLY] = None
    """JSONL file every run is appended to (None: MTL_RUN_LOG)."""


RETRY_FLAGS = Flags(nested=(("attempts", "--retry-attempts"), ("initial_delay", "--retry-initial-delay"),
                            ("max_delay", "--retry-max-delay")))


class MTLConfig(SettingsGroup):
    """A graph's configuration, one group per concern; a run's context overrides any run setting of it, by its
    flat name (`{"top_k": 5}`), field by field."""

    model: ModelSettings = Field(default_factory=ModelSettings)
    """Which chat model the stages call, and how."""
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    """Which memories a run gets, and how."""
    agent: AgentSettings = Field(default_factory=AgentSettings)
    """The agent's limits for a run (unset: the agent's own)."""
    retry: Annotated[Optional[RetrySettings], RETRY_FLAGS] = None
    """How a model call that failed transiently (429, 5xx, timeout, dropped connection) is tried again. Unset: the agent's own setting."""
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    """Where commands run and what is kept of a workspace."""
    loop: LoopSettings = Field(default_factory=LoopSettings)
    """The judge, distillation, review, write back and the run log."""

    @model_validator(mode="before")
    @classmethod
    def _flat_names_name_their_group(cls, data: Any) -> Any:
        """A flat name given here is an error that says where the setting lives (pydantic would only say "extra")."""
        if isinstance(data, dict) and any(name not in cls.model_fields for name in data):
            table = settings_table(cls)
            for name in data:
                if name not in cls.model_fields and name in table:
                    group, field = table[name].path
                    raise ValueError(f"{name} is in the {group} group: MTLConfig({group}={{{field!r}: ...}}), or "
                                     f"make_config({name}=...) and the factories' keywords, which take flat names")
        return data


@dataclass(frozen=True)
class Setting:
    """One setting: its flat name and where it lives in `MTLConfig`."""

    name: str
    """The flat name (keyword, context key, flag, MTL_* variable)."""
    path: tuple[str, ...]
    """Its place in MTLConfig: (group, field), or (field,) for a top-level setting (retry)."""
    info: FieldInfo
    """The field: type, constraints, default, docstring, markers."""
    run: bool
    """A run's context may set it (False: only a graph's build)."""


@functools.cache
def settings_table(config_model: type[MTLConfig] = MTLConfig) -> dict[str, Setting]:
    """Every setting of a configuration model by its flat name, in the order of its groups; two fields with one
    flat name are a TypeError when the model is first used. Built here, from the fields and their markers, so the
    schema's own validator can name a flat name's group; the flat layer (`names.py`) is derived from it."""
    table: dict[str, Setting] = {}
    for top, top_info in config_model.model_fields.items():
        group = non_none(top_info.annotation)
        members = (((top, field), info) for field, info in group.model_fields.items()) if (
            isinstance(group, type) and issubclass(group, SettingsGroup)) else [((top,), top_info)]
        for path, info in members:
            name = next((m.name for m in info.metadata if isinstance(m, Named)), path[-1])
            if name in table:
                raise TypeError(f"two settings are named {name}: {'.'.join(table[name].path)} and {'.'.join(path)}")
            table[name] = Setting(name, path, info, not any(isinstance(m, BuildOnly) for m in info.metadata))
    return table


def lifecycle_of(cfg: MTLConfig) -> LifecycleConfig | None:
    """The run's lifecycle settings; None when the lifecycle is off (the research's retrieval)."""
    retrieval = cfg.retrieval
    if retrieval.lifecycle == "off":
        return None
    if retrieval.relevance_floor is None:
        return retrieval.lifecycle_settings
    return retrieval.lifecycle_settings.model_copy(update={"relevance_floor": retrieval.relevance_floor})


def agent_config(cfg: MTLConfig, base: AgentConfig | None = None) -> AgentConfig:
    """The agent's config for a run: `base` (the agent's own) with the run's agent settings and retry that are set."""
    base = base if base is not None else AgentConfig()
    updates: dict[str, Any] = {name: value for name in AGENT_KNOBS if (value := getattr(cfg.agent, name)) is not None}
    if cfg.retry is not None:  # given in part, it keeps the agent's other retry fields
        updates["retry"] = base.retry.model_copy(update=cfg.retry.model_dump(exclude_unset=True))
    return base.model_copy(update=updates) if updates else base
