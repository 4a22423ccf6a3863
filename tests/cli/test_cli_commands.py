"""The commands of `mtl`, registered in one table (mtl_graph/cli/app.py: COMMANDS): every command and group shows
its help, `mtl --help` lists them all, and imports run one way (app above the command modules, the command
modules above what they share). The cases are generated from the app, so a new command is checked too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import mtl_graph.cli
from mtl_graph.cli import app
from mtl_graph.cli.app import COMMANDS
from mtl_graph.cli.lazy import Command, Group, walk

runner = CliRunner()
CLI = Path(mtl_graph.cli.__file__).parent
TOP = ["run", "demo", "ingest", "eval", "report", "eval-learning", "eval-baselines", "memories", "export", "pool"]
"""What `mtl --help` lists, in its order."""

ALL = dict(walk(typer.main.get_command(app)))


def long_names(param: object) -> list[str]:
    return [n for n in (*param.opts, *getattr(param, "secondary_opts", ())) if n.startswith("--")]


def test_mtl_lists_its_commands_in_order() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = [line.strip("│ ").split(" ")[0] for line in result.output.splitlines() if line.startswith("│ ")]
    assert [row for row in rows if row in TOP] == TOP
    assert [entry.name for entry in COMMANDS] == TOP


def test_the_table_and_the_app_agree() -> None:
    def paths(entries, prefix=()):
        for entry in entries:
            yield (*prefix, entry.name)
            if isinstance(entry, Group):
                yield from paths(entry.commands, (*prefix, entry.name))

    assert set(paths(COMMANDS)) == set(ALL) - {()}
    assert {("memories", "show"), ("memories", "release"), ("pool", "snapshot", "restore"), ("pool", "diff"),
            ("eval-baselines",)} <= set(ALL)
    for path, command in ALL.items():
        if path and not hasattr(command, "list_commands"):
            assert command.callback is not None and command.help, path


@pytest.mark.parametrize("path", sorted(ALL), ids=lambda path: " ".join(["mtl", *path]))
def test_every_command_and_group_shows_its_help(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    command = ALL[path]
    assert "Usage:" in result.output and (command.help or "").split("\n")[0][:40] in result.output
    for param in command.params:
        if long_names(param) and not getattr(param, "hidden", False):
            assert long_names(param)[0] in result.output, (path, long_names(param))
    if hasattr(command, "list_commands"):
        for name in command.list_commands(typer.Context(command)):
            assert name in result.output, (path, name)


def test_help_shows_with_a_bad_setting_and_a_command_reports_it(tmp_path: Path) -> None:
    bad = {"MTL_TOP_K": "lots", "COLUMNS": "200"}
    for argv in (["--help"], ["pool", "--help"], ["memories", "list", "--help"]):
        shown = runner.invoke(app, argv, env=bad)
        assert shown.exit_code == 0 and "Usage:" in shown.output, (argv, shown.output)
    ran = runner.invoke(app, ["memories", "list", "--pool", str(tmp_path / "pool")], env=bad)
    assert ran.exit_code == 1 and ran.output.startswith("error: ") and "MTL_TOP_K" in ran.output, ran.output
    # a "--help" after "--" is an argument, not a question
    assert runner.invoke(app, ["memories", "search", "--pool", str(tmp_path / "p"), "--", "--help"],
                         env=bad).exit_code == 1


def test_a_command_is_built_once_per_app_call_when_it_is_used() -> None:
    group = typer.main.get_command(app)
    assert not group.commands.is_built("run")
    assert group.commands["run"] is group.get_command(typer.Context(group), "run")
    assert [name for name in group.commands if group.commands.is_built(name)] == ["run"]


def imports(path: Path) -> set[str]:
    """The modules a file imports, at the top or inside a function (`from mtl_graph.cli import x`: the package and
    mtl_graph.cli.x, which may be a module or a name the package gives)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_imports_run_one_way() -> None:
    modules = {p.stem: imports(p) for p in CLI.glob("*.py")}
    top = {"__init__", "__main__", "app"}
    for name, found in modules.items():
        if name not in top:  # a command module, or what commands share: never the app, nor the package's face
            assert "mtl_graph.cli.app" not in found, name
            assert not {m for m in found if m.startswith("mtl_graph.cli.")} & {f"mtl_graph.cli.{n}" for n in
                                                                             mtl_graph.cli.__all__}, name
    shared = {"common", "lazy", "help", "tables", "format_options", "memory_views", "options"}
    commands = {target.target.split(":")[0].rsplit(".", 1)[-1] for target in _commands(COMMANDS)}
    for name in shared:  # what commands share imports no command module
        assert not {f"mtl_graph.cli.{c}" for c in commands} & modules[name], name
    assert "memories_lifecycle" in commands and "mtl_graph.cli.memories" not in modules["memories_lifecycle"]
    assert "mtl_graph.cli.memories_lifecycle" not in modules["memories"]


def _commands(entries):
    for entry in entries:
        if isinstance(entry, Command):
            yield entry
        else:
            yield from _commands(entry.commands)
