"""The run settings as command-line flags: one set, generated from the configuration (`MTLConfig`), shared by
`mtl run` and `mtl demo`.

Each run setting becomes a flag named after its flat name (plus the names in its `Flags` marker), typed after it,
with its docstring as help; a settings model (model_options) becomes one flag per sub-field. Values are read as text and validated by
the run context model, so a bad value is one error line naming the flag. The flags are built when the command
line is parsed, not when this module is imported, so importing the CLI stays light."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, Callable, Literal, Optional, get_args, get_origin

import typer

if TYPE_CHECKING:
    from pydantic import BaseModel

MAX_METAVAR = 36
"""Longest choice list shown as an option's metavar; a longer one is listed in its help instead."""
RUN_PARAMETER = "run"
"""The parameter of a decorated command that receives the flags given, as a run context."""


@dataclass(frozen=True)
class FlagSpec:
    """One generated flag."""

    param: str
    """Python name of the command parameter."""
    path: tuple[str, ...]
    """Where the value goes in the run context: (field,) or (field, sub-field)."""
    flags: tuple[str, ...]
    """The flag's names, the canonical one first."""
    help: str
    """Help text (the field's docstring)."""
    annotation: Any
    """The field's type."""


def _kebab(name: str) -> str:
    return "--" + name.replace("_", "-")


def flag_specs(context_model: type[BaseModel]) -> list[FlagSpec]:
    """The flags of every field of a run-context model (nested settings models: one flag per sub-field)."""
    from pydantic import BaseModel

    from mtl_graph.config.schema import Flags, non_none

    specs = []
    for name, info in context_model.model_fields.items():
        marker = next((m for m in info.metadata if isinstance(m, Flags)), Flags())
        inner = non_none(info.annotation)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            renamed = dict(marker.nested)
            for sub, sub_info in inner.model_fields.items():
                specs.append(FlagSpec(f"{name}__{sub}", (name, sub), (renamed.get(sub, _kebab(sub)),),
                                      sub_info.description or sub, non_none(sub_info.annotation)))
        else:
            names = dict.fromkeys((*marker.names, _kebab(name)))  # a long name in the marker is the canonical one
            flags = (*(n for n in names if n.startswith("--")), *(n for n in names if not n.startswith("--")))
            specs.append(FlagSpec(name, (name,), flags, info.description or name, inner))
    return specs


def _metavar(annotation: Any) -> str:
    if get_origin(annotation) is Literal:
        return "[" + "|".join(map(str, get_args(annotation))) + "]"
    return {int: "INTEGER", float: "NUMBER"}.get(annotation, "TEXT")


def parameter(spec: FlagSpec, from_env: bool = True) -> inspect.Parameter:
    """The Typer parameter of a flag: bools are --x/--no-x, lists repeat, everything else is text validated later."""
    env = f" \\[env: MTL_{'__'.join(spec.path).upper()}]" if from_env else ""
    help_text = spec.help + env
    if spec.annotation is bool:
        option = typer.Option(f"{spec.flags[0]}/--no-{spec.flags[0][2:]}", *spec.flags[1:], help=help_text)
        annotation: Any = Annotated[Optional[bool], option]
    elif get_origin(spec.annotation) is list:
        item = _metavar(get_args(spec.annotation)[0])
        option = typer.Option(*spec.flags, help=f"{help_text} (repeatable)", metavar=item)
        annotation = Annotated[Optional[list[str]], option]
    else:
        metavar = _metavar(spec.annotation)
        if len(metavar) > MAX_METAVAR:  # a long choice list would push the option past 80 columns: listed in the help
            help_text = f"{spec.help} One of: {', '.join(map(str, get_args(spec.annotation)))}.{env}"
            metavar = "CHOICE"
        annotation = Annotated[Optional[str], typer.Option(*spec.flags, help=help_text, metavar=metavar)]
    return inspect.Parameter(spec.param, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)


def parse_flags(specs: list[FlagSpec], values: dict[str, Any], context_model: type[BaseModel]) -> Any:
    """The run context of the flags given (None: not given); a bad value raises one SettingsError line."""
    from pydantic import ValidationError

    from mtl_graph.core.errors import SettingsError, describe_error

    data: dict[str, Any] = {}
    for spec in specs:
        if values.get(spec.param) is not None:
            target = data
            for part in spec.path[:-1]:
                target = target.setdefault(part, {})
            target[spec.path[-1]] = values[spec.param]
    try:
        return context_model.model_validate(data)
    except ValidationError as exc:
        def flag(loc: tuple) -> str:
            matches = [s for s in specs if tuple(loc[:len(s.path)]) == s.path]
            return max(matches, key=lambda s: len(s.path)).flags[0] if matches else ".".join(map(str, loc))

        raise SettingsError(describe_error(exc, flag)) from None


def with_run_settings(from_env: bool = True, exclude: tuple[str, ...] = ()
                      ) -> Callable[[Callable[..., Any]], "RunSettingsCommand"]:
    """Decorator: the command gets every run setting (but `exclude`) as a flag and receives them as `run` (a run
    context): the flags given over the MTL_* environment settings (from_env), or the flags given alone."""
    return lambda command: RunSettingsCommand(command, from_env, exclude)


class RunSettingsCommand:
    """A command with the run settings as flags (see `with_run_settings`)."""

    def __init__(self, command: Callable[..., Any], from_env: bool, exclude: tuple[str, ...] = ()) -> None:
        self.command, self.from_env, self.exclude = command, from_env, exclude
        self.__name__, self.__doc__, self.__module__ = command.__name__, command.__doc__, command.__module__

    @cached_property
    def specs(self) -> list[FlagSpec]:
        from mtl_graph.config.names import RunOverrides

        return [spec for spec in flag_specs(RunOverrides) if spec.path[0] not in self.exclude]

    @property
    def __signature__(self) -> inspect.Signature:  # read by Typer when it builds the command
        own = [p for p in inspect.signature(self.command, eval_str=True).parameters.values()
               if p.name != RUN_PARAMETER]
        return inspect.Signature([*own, *(parameter(spec, self.from_env) for spec in self.specs)])

    @property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]
        return {p.name: p.annotation for p in self.__signature__.parameters.values()}

    def __call__(self, **kwargs: Any) -> Any:
        from mtl_graph.cli.common import fail, settings
        from mtl_graph.config.names import MTLContext, RunOverrides, merged
        from mtl_graph.core.errors import SettingsError

        values = {spec.param: kwargs.pop(spec.param, None) for spec in self.specs}
        try:
            run = MTLContext(**parse_flags(self.specs, values, RunOverrides).given())
        except SettingsError as exc:
            fail(str(exc))
        if self.from_env:
            run = merged(settings().run_context(), run)
        return self.command(**kwargs, **{RUN_PARAMETER: run})
