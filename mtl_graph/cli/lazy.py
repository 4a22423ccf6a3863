"""Command groups whose commands are built when they are used, from a table of where each command's function is.

Typer builds every command of an app, options and all, each time the app is called: for `mtl --help` that
would import the run settings (pydantic and the whole configuration) to build the forty flags of `mtl run`, the
log importers to write the help of `mtl ingest --format`, and so on for every command. A `LazyGroup` holds
entries instead (`Command`: a name and the "module:attribute" of its function; `Group`: a name, its help and its
own entries); the click command of an entry is built from its function the first time the group is asked for it
(a command run, or its own `--help`), once per group. A group's help lists its commands by their summaries,
the first paragraph of each function's docstring: that imports the command modules, which import only typer
and the standard library at the top, and builds none of them.

`app.py` holds the one table of every command; a command module defines plain functions and registers nothing."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any, Callable, Union

import typer
from typer.core import TyperCommand

from mtl_graph.cli.help import FittingCommand, FittingGroup


@dataclass(frozen=True)
class Command:
    """A command: its name on the command line and where its function is ("package.module:attribute")."""

    name: str
    target: str

    def load(self) -> Callable[..., Any]:
        """The command's function (its module imported now)."""
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


@dataclass(frozen=True)
class Group:
    """A group of commands: its name, its help, and its commands and groups in the order its help lists them."""

    name: str
    help: str
    commands: tuple["Entry", ...]


Entry = Union[Command, Group]


class LazyCommands(MutableMapping):
    """A group's commands by name, each built on first access; iterating gives the names and builds nothing.

    Click and Typer read a group's commands through this mapping (`group.commands[name]`, `.get(name)`); a
    command added the usual way (`add_command`) is kept as given."""

    def __init__(self, group: "LazyGroup", entries: dict[str, Entry], built: dict[str, Any]) -> None:
        self._group, self._entries, self._built = group, entries, built

    def entry(self, name: str) -> Entry | None:
        return self._entries.get(name)

    def is_built(self, name: str) -> bool:
        return name in self._built

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            self._built[name] = self._group.build(self._entries[name])  # KeyError: no such command
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self._entries and name not in self._built:
            raise KeyError(name)
        self._entries.pop(name, None)
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._entries, *self._built]))

    def __len__(self) -> int:
        return len(dict.fromkeys([*self._entries, *self._built]))


class LazyGroup(FittingGroup):
    """A Typer group (help fitted to the terminal, see help.py) whose commands are `Command` and `Group` entries,
    built when used. `entries`: given, or the class's (for a Typer app's own group: `typer.Typer(cls=...)`)."""

    entries: tuple[Entry, ...] = ()

    def __init__(self, *args: Any, entries: tuple[Entry, ...] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        table = {entry.name: entry for entry in (self.entries if entries is None else entries)}
        self.commands = LazyCommands(self, table, dict(self.commands))
        self._markup = self.rich_markup_mode  # help.py switches the attribute off while it renders Click's layout
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self._listing:
            return self.summary(cmd_name)
        return self.commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The group's help: its commands listed by their summaries (see `summary`), none of them built."""
        listing, self._listing = self._listing, True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = listing

    def summary(self, name: str) -> Any:
        """What the group's help shows of a command: its name and help (its function's docstring), no options.
        A group is built (that imports nothing); a command already built is itself."""
        entry = self.commands.entry(name)
        if entry is None or isinstance(entry, Group) or self.commands.is_built(name):
            return self.commands.get(name)
        return TyperCommand(name=name, help=inspect.getdoc(entry.load()))

    def build(self, entry: Entry) -> Any:
        """The click command (or group) of an entry, as Typer makes it from the function."""
        if isinstance(entry, Group):
            return LazyGroup(name=entry.name, help=entry.help, entries=entry.commands, no_args_is_help=True,
                             rich_markup_mode=self._markup)
        one = typer.Typer(add_completion=False, rich_markup_mode=self._markup)
        one.command(entry.name, cls=FittingCommand)(entry.load())
        return typer.main.get_command(one)


def walk(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group under `group` (itself first, at `path`), each built: for tests and tools."""
    yield path, group
    if hasattr(group, "list_commands"):
        ctx = typer.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is not None:
                yield from walk(command, (*path, name))
