"""Help that stays readable in a narrow terminal (80 columns): Rich's panels where every option name fits in them
whole, Click's plain layout otherwise.

Rich lays the options out as a table of six columns (names, short names, --no- names, types, help) and, when the
terminal is too narrow for them, cuts the names ("--approve-comman…") and squeezes the help to a dozen characters
a line; `mtl run` has some 40 options and needs ~160 columns. Click's layout puts a long name on its own line and
the help under it, so nothing is cut at any width. Which one a command gets is decided by rendering Rich's first,
off screen, and looking for each name in it. Every command and group of `mtl` gets these classes where
lazy.py builds it."""

from __future__ import annotations

import io
import re
from contextlib import redirect_stdout
from typing import Any

from typer.core import TyperCommand, TyperGroup


def option_names(command: Any, ctx: Any) -> list[str]:
    """Every long option name the command's help shows (--x and its --no-x), hidden options left out."""
    return [name for param in command.get_params(ctx) if not getattr(param, "hidden", False)
            for name in (*param.opts, *getattr(param, "secondary_opts", ())) if name.startswith("--")]


def shows_whole(text: str, names: list[str]) -> bool:
    """Whether each name appears in `text` unbroken (not cut with an ellipsis, not wrapped over two lines)."""
    return all(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) for name in names)


class _FittingHelp:
    """Mixin for Typer's command and group classes (see the module docstring)."""

    rich_markup_mode: Any

    def format_help(self, ctx: Any, formatter: Any) -> None:
        if self.rich_markup_mode is not None:
            with redirect_stdout(io.StringIO()) as rendered:  # Rich measures the real terminal, not this buffer
                super().format_help(ctx, formatter)  # type: ignore[misc]
            plain = ctx.make_formatter()
            self._plain_help(ctx, plain)
            if self.rich_fits(rendered.getvalue(), plain.getvalue(), ctx):
                return super().format_help(ctx, formatter)  # type: ignore[misc]  # again, in colour
        self._plain_help(ctx, formatter)

    def _plain_help(self, ctx: Any, formatter: Any) -> None:
        mode, self.rich_markup_mode = self.rich_markup_mode, None  # Typer's own switch to Click's layout
        plain = ctx.make_formatter()
        try:
            super().format_help(ctx, plain)  # type: ignore[misc]
        finally:
            self.rich_markup_mode = mode
        formatter.write(plain.getvalue().replace("\\[", "["))  # Rich's escape of a literal "[" in help texts

    def rich_fits(self, rich: str, plain: str, ctx: Any) -> bool:
        return shows_whole(rich, option_names(self, ctx))


class FittingCommand(_FittingHelp, TyperCommand):
    """A command whose help fits the terminal."""

    def rich_fits(self, rich: str, plain: str, ctx: Any) -> bool:
        """Names whole, and help not squeezed: a squeezed help column takes more lines than Click's layout, which
        Rich's frame (blank lines around the usage, a border above and below each panel) does not explain."""
        frame = 3 + 2 * rich.count("╭")
        return super().rich_fits(rich, plain, ctx) and len(rich.splitlines()) <= len(plain.splitlines()) + frame


class FittingGroup(_FittingHelp, TyperGroup):
    """A group whose help fits the terminal (its commands' panel wraps their summaries, Click's cuts them)."""

