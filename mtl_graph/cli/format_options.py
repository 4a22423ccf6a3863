"""CLI options whose help names the memory formats, written each time the CLI is built (so a format registered
after the command's module was imported is named too). Imports only typer and the standard library."""

from __future__ import annotations

from typing import Any

import typer
from typer.models import OptionInfo

from mtl_graph.memory.formats import help_names, listed

FORMATS = "{formats}"
"""Placeholder in a help text: the format names, joined with "or" ("{formats_and}": with "and")."""


class _FormatsHelp(OptionInfo):
    """An option whose help is its template with the format names filled in when read."""

    @property  # type: ignore[override]
    def help(self) -> str:
        names = help_names()
        return self.__dict__["_template"].replace("{formats_and}", listed(names, "and")).replace(
            FORMATS, listed(names))

    @help.setter
    def help(self, value: str) -> None:
        self.__dict__["_template"] = value


def formats_option(*flags: str, help: str) -> Any:
    """`typer.Option(*flags, help=help)` with "{formats}" in help replaced by the registered formats' names."""
    option = typer.Option(*flags)
    option.__class__ = _FormatsHelp
    option.help = help
    return option
