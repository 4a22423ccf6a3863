"""The CLI at 80 columns: every command's --help shows each of its option names whole with its help text in
lines of a readable width, and the memory tables keep 40 characters a line for a memory's text (or show one
record per memory). The cases are generated from the Typer app, so a new command is checked too."""

from __future__ import annotations

import math
import re

import pytest
import typer
from typer.testing import CliRunner

from mtl_graph.cli import app
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory

runner = CliRunner()
WIDTH = 80
ENV = {"COLUMNS": str(WIDTH)}  # what Rich and Click read a terminal's width from
READABLE = 40
"""Characters a line of help text or of a memory's text keeps at least."""


def all_commands() -> dict[tuple[str, ...], object]:
    """Every command and group of the app by its path (the app itself: ())."""
    found: dict[tuple[str, ...], object] = {}

    def walk(command: object, path: tuple[str, ...]) -> None:
        found[path] = command
        if hasattr(command, "list_commands"):
            ctx = typer.Context(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), (*path, name))

    walk(typer.main.get_command(app), ())
    return found


COMMANDS = all_commands()


def long_names(param: object) -> list[str]:
    return [n for n in (*param.opts, *getattr(param, "secondary_opts", ())) if n.startswith("--")]


OPTION_ROW = re.compile(r"^(?:│ )?\*?\s{0,4}((?:-{1,2}[\w-]+(?:,\s*|\s*/\s*|\s+|$))+)")
"""The line an option's row starts on, in Rich's panels or Click's layout: its names first (a name quoted in a
help text is further in, or not followed by a space)."""


def rows(lines: list[str]) -> dict[int, list[str]]:
    """Line number -> the option names the row starting there shows, whole."""
    found = {}
    for i, line in enumerate(lines):
        match = OPTION_ROW.match(line)
        if match:
            found[i] = re.findall(r"-{1,2}[\w-]+", match.group(1))
    return found


def test_the_cases_cover_the_app() -> None:
    assert {("run",), ("demo",), ("eval",), ("memories", "search"), ("pool", "snapshot", "list")} <= set(COMMANDS)


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=lambda path: " ".join(path) or "mtl")
def test_help_at_80_columns_shows_every_option_whole_and_readable(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"], env=ENV)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) <= WIDTH
    options = [p for p in COMMANDS[path].params if long_names(p) and not getattr(p, "hidden", False)]
    shown = rows(lines)
    starts = sorted(shown)
    for param in options:
        where = [i for i, names in shown.items() if long_names(param)[0] in names]
        assert where, f"{long_names(param)[0]} is cut or wrapped in `mtl {' '.join(path)} --help`"
        assert set(long_names(param)) <= set(shown[where[0]]), f"a name of {param.name} is cut: {lines[where[0]]}"
        # Its help takes about as many lines as it would at READABLE characters a line: a squeezed help column
        # (a dozen characters) takes three times as many.
        end = next((i for i in starts if i > where[0]), len(lines))
        block = [line for line in lines[where[0]:end] if line.strip(" │╰─╯")]
        allowed = math.ceil(len(param.help or "") / READABLE) + 3  # the env hint, a long name on its own line
        assert len(block) <= allowed, "\n".join(block)


LONG = ("Check the column widths of every table against the narrowest terminal a newcomer is likely to use today, "
        "and the text of each memory")


@pytest.fixture(scope="module")
def pool_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    from mtl_graph.memory.pool.pool import MemoryPool

    location = tmp_path_factory.mktemp("narrow") / "pool"
    with MemoryPool.open(location) as pool:
        pool.add_many([InsightMemory(title=f"{LONG} {n}", description="Tables at 80 columns.", content="Measure.",
                                     sources=[Provenance(domain="terminals-and-layouts", source_task_id=f"t{n}")])
                       for n in range(2)])
    return str(location)


@pytest.mark.parametrize("command", [["memories", "search", "column widths of every table"], ["memories", "list"]])
@pytest.mark.parametrize("width", [WIDTH, 200])
def test_memory_tables_keep_the_text_readable(command: list[str], width: int, pool_dir: str) -> None:
    result = runner.invoke(app, [*command, "--pool", pool_dir], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) <= width
    # The first READABLE characters of each memory's text stand on one line: the text column is that wide.
    assert sum(LONG[:READABLE] in line for line in lines) == 2, result.output
    assert "terminals-and-layouts" in result.output  # the short fields are all shown, whole
