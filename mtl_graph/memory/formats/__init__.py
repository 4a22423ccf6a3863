"""Memory formats as a registry: each format declares itself once, in its own module of this package.

A declaration (`MemoryFormat`) names the format, its pydantic memory model, how a run becomes one (a distilling
model's draft and prompts, or a `build` function needing no model), its retrieval key, how it is shown to an
agent, and whether the graph plans a query for it. Everything else is derived from the registry: the memory union
`parse_memory` validates, the distill table, the run settings' choices (`MemoryChoice`, `FormatName`), Studio's
form, the CLI help and every "does this need a model" check.

The modules of this package are imported (pkgutil) the first time the registry is read, so a new format is one
module here, named after the format and calling `register(...)`, its prompt templates and its test. Modules whose
name starts with an underscore hold shared helpers and register nothing. This module imports only the standard
library: the CLI reads `help_names()` to write its help at every start without loading a model class.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterable, Iterator, Literal, get_args

from mtl_graph.core.errors import MTLError

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic_core import CoreSchema

    from mtl_graph.core.trajectory import Outcome, Trajectory

DISTILL_PROMPTS = "mtl_graph.distill"
"""The package whose prompts/ folder holds the distill templates (`prompt_dir` overrides it per format)."""
CONSOLIDATE_PROMPTS = "mtl_graph.memory.lifecycle"
"""The package whose prompts/ folder holds the merge (consolidation) templates."""
_NAME = re.compile(r"[a-z][a-z0-9_]{0,30}")


class FormatError(MTLError, ValueError):
    """A format declaration that cannot be registered, or a name that is not a registered format."""


@dataclass(frozen=True)
class MemoryFormat:
    """One memory format, declared once (see the module docstring)."""

    name: str
    """The memory's `type`, stored in every payload (lowercase)."""
    memory: type[BaseModel]
    """Its pydantic model, a `MemoryBase` subclass whose `type` field is `Literal[name]` (typed as a pydantic model
    here: `memory.base` reads this registry, so the registry names nothing of it)."""
    summary: str
    """What it holds, in a few words (CLI help)."""
    key: Callable[[Any], str]
    """The retrieval key of a memory: the text embedded and searched."""
    label: Callable[[Any], str]
    """What a memory is, for its heading when shown (e.g. "workflow (outcome: success)")."""
    body: Callable[[Any, int], str]
    """A memory's own text as shown to an agent (observations cut to the given number of characters)."""
    draft: type[BaseModel] | None = None
    """What a distilling model answers (validated, retried); its fields are the memory's content fields."""
    prompts: tuple[str, str] | None = None
    """The distill templates for a successful and for a failed run (the same name twice is fine)."""
    build: Callable[[Trajectory, Outcome, Any], tuple[BaseModel, list[str]]] | None = None
    """Makes the memory from a run and its `Provenance` without a model (memory, warnings); raises ValueError when
    it cannot."""
    task_free: bool = False
    """Must transfer to other tasks: checked for the run's specifics and must not copy the task text."""
    uses_plan: bool = True
    """The graph asks the model for a plan to search with; False: the task text is the query."""
    query_template: str | None = None
    """With uses_plan False: a template (distill prompts folder) making the query from the task text (`$task`),
    e.g. an instruction prefix for instruction-aware retrieval; None: the task text as it is."""
    from_run: Callable[[Trajectory], dict[str, Any]] | None = None
    """Fields a model-written memory takes from the (redacted) run rather than from the draft (e.g. its task)."""
    consolidate_prompt: str | None = None
    """The template a model merges near-duplicates with (None: a format with `build` keeps its best original;
    one without cannot be consolidated)."""
    prompt_dir: Path | None = None
    """A folder holding this format's templates (None: the packaged prompts folders)."""
    given: tuple[str, ...] = ()
    """Content fields holding text the agent was given rather than advice (the task, what a command printed), as
    dotted paths through lists ("steps.observation"): screening reads them as quoted text (memory/screening). The
    model's GIVEN_FIELDS (redaction's example values) name only the task's fields; this also covers tool output."""
    rank: int = 100
    """Where it is listed (choices, help): lower first; the built-ins go from concrete to abstract."""

    @property
    def needs_model(self) -> bool:
        """A model writes it (it has no `build`)."""
        return self.build is None

    def check(self) -> None:
        """Raise FormatError when the declaration is inconsistent (named in one line)."""
        where = f"memory format {self.name!r}"
        if not _NAME.fullmatch(self.name) or self.name == "none":
            raise FormatError(f"{where}: a name is lowercase letters, digits and _ (and not 'none')")
        declared = self.memory.model_fields.get("type")
        if declared is None or declared.default != self.name:
            raise FormatError(f"{where}: {self.memory.__name__}.type must default to {self.name!r}")
        if self.build is None and (self.draft is None or self.prompts is None):
            raise FormatError(f"{where}: a format without build needs a draft schema and its two prompts")
        from mtl_graph.core.templates import load_template

        templates = [(DISTILL_PROMPTS, name) for name in (*(self.prompts or ()), self.query_template) if name]
        if self.consolidate_prompt:
            templates.append((CONSOLIDATE_PROMPTS, self.consolidate_prompt))
        for package, template in templates:
            try:
                load_template(package, template, self.prompt_dir)
            except FileNotFoundError as exc:
                raise FormatError(f"{where}: {exc}") from None


_REGISTRY: dict[str, MemoryFormat] = {}
_state: dict[str, Any] = {"discovered": False, "version": 0}
_lock = threading.RLock()


def _discover() -> None:
    if _state["discovered"] is True:
        return
    with _lock:  # another thread waits for the whole registry rather than reading half of it
        if _state["discovered"]:  # done, or under way in this thread (a format module reading the registry)
            return
        _state["discovered"] = "under way"
        try:
            for name in _module_names():
                importlib.import_module(f"{__name__}.{name}")
                if name not in _REGISTRY:
                    raise FormatError(f"module {__name__}.{name} registers no memory format named {name!r}")
        except BaseException:
            _state["discovered"] = False
            raise
        _state["discovered"] = True


def _module_names() -> list[str]:
    return [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]


def register(fmt: MemoryFormat) -> MemoryFormat:
    """Add a format (its module calls this at import); a name taken by another declaration is an error."""
    fmt.check()
    known = _REGISTRY.get(fmt.name)
    if known is not None and known.memory.__qualname__ != fmt.memory.__qualname__:
        raise FormatError(f"memory format {fmt.name!r} is already registered (by {known.memory.__module__})")
    _REGISTRY[fmt.name] = fmt
    _state["version"] += 1
    return fmt


def unregister(name: str) -> None:
    """Remove a format (a test's own format, afterwards); an unknown name is ignored."""
    if _REGISTRY.pop(name, None) is not None:
        _state["version"] += 1


@contextmanager
def registered(fmt: MemoryFormat) -> Iterator[MemoryFormat]:
    """The format registered for the duration of a with block."""
    _discover()
    register(fmt)
    try:
        yield fmt
    finally:
        unregister(fmt.name)


def version() -> int:
    """Changes whenever a format is registered or removed (what derived tables cache on)."""
    _discover()
    return _state["version"]


def all_formats() -> list[MemoryFormat]:
    """Every registered format, in listing order."""
    _discover()
    return sorted(_REGISTRY.values(), key=lambda f: (f.rank, f.name))


def names() -> list[str]:
    """The registered format names, in listing order."""
    return [f.name for f in all_formats()]


def help_names() -> list[str]:
    """The format names for a help text, without importing a format module: this package's format modules and
    the formats registered so far (one registered by a test or a plugin), by name."""
    return sorted({*_module_names(), *_REGISTRY})


def listed(items: list[str], conjunction: str = "or") -> str:
    """Names for a sentence: "insight, summary or workflow"."""
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


def get(name: str) -> MemoryFormat:
    """The format called name (any case, spaces stripped); FormatError names the known ones."""
    _discover()
    fmt = _REGISTRY.get(str(name).strip().lower())
    if fmt is None:
        raise FormatError(f"unknown memory type {str(name)!r}; expected one of: {', '.join(names())}")
    return fmt


def find(name: str) -> MemoryFormat | None:
    """The format called name exactly, or None."""
    _discover()
    return _REGISTRY.get(str(name))


def needs_model(formats: Iterable[str]) -> bool:
    """Whether any of the formats needs a model to distil."""
    return any(get(f).needs_model for f in formats)


def model_written(formats: Iterable[str]) -> list[str]:
    """The formats a model must write, in the order given."""
    return [get(f).name for f in formats if get(f).needs_model]


def uses_plan(choice: str) -> bool:
    """Whether retrieval for a run setting's memory choice plans its query ("none" retrieves nothing)."""
    fmt = find(str(choice))
    return fmt is not None and fmt.uses_plan


def query_for(choice: str, task_text: str) -> str:
    """The retrieval query of a run that plans none: the task text, through its format's query template if any."""
    fmt = find(str(choice))
    if fmt is None or fmt.query_template is None:
        return task_text
    from mtl_graph.core.templates import render_template

    return render_template(DISTILL_PROMPTS, fmt.query_template, fmt.prompt_dir, task=task_text)


class _Registered:
    """Pydantic metadata: the value must be a format registered when it arrives (or one of `extra`), and JSON
    schemas (Studio's form) list the formats registered when the schema is made."""

    def __init__(self, extra: tuple[str, ...] = ()) -> None:
        self.extra = extra

    def choices(self) -> list[str]:
        return [*names(), *self.extra]

    def check(self, value: Any) -> str:
        from pydantic_core import PydanticCustomError

        options = self.choices()
        if not isinstance(value, str) or value not in options:
            raise PydanticCustomError("literal_error", "Input should be {expected}",
                                      {"expected": ", ".join(repr(o) for o in options)})
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> CoreSchema:
        from pydantic_core import core_schema

        checked = core_schema.no_info_plain_validator_function(self.check)  # replaces the import-time Literal
        # derived all-optional models (run overrides) move this metadata onto `Literal[...] | None`
        return core_schema.nullable_schema(checked) if type(None) in get_args(source) else checked

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        return {"type": "string", "enum": self.choices()}


# The Literal is the formats of this package (for type checkers, introspection and the CLI's metavar, known
# without importing a format module); validation and JSON schemas follow the registry as it is at the time.
FormatName = Annotated[Literal[tuple(help_names())], _Registered()]
"""A pydantic type: a registered format's name."""
MemoryChoice = Annotated[Literal[(*help_names(), "none")], _Registered(("none",))]
"""A pydantic type: a registered format's name, or "none" (zero-shot)."""
