"""The `mtl` Typer app and the one table of its commands (`COMMANDS`).

Imports run one way: this module is at the top of the CLI; the command modules below it define plain functions
and import what they share from `common.py`, never this. Adding a command is its function in its module and
one line here. Each command is imported, and its options built, only when it runs or shows its own help
(`lazy.py`), so `mtl --help` and `mtl GROUP --help` load typer, rich and the command modules, nothing heavy."""

from __future__ import annotations

from typing import Any

import typer

from mtl_graph.cli.common import settings
from mtl_graph.cli.lazy import Command, Entry, Group, LazyGroup

COMMANDS: tuple[Entry, ...] = (
    Command("run", "mtl_graph.cli.run:run_task"),
    Command("demo", "mtl_graph.cli.run:demo"),
    Command("ingest", "mtl_graph.cli.ingest:ingest"),
    Command("eval", "mtl_graph.cli.evaluation:eval_command"),
    Command("report", "mtl_graph.cli.evaluation:report_cmd"),
    Command("eval-learning", "mtl_graph.cli.evaluation:eval_learning_cmd"),
    Command("eval-baselines", "mtl_graph.cli.evaluation:eval_baselines_cmd"),
    Group("memories", "Manage the memory pool: add, search, list, show, delete, stats, export, import, flagged, "
                      "quarantined, superseded, release, screen.", (
        Command("add", "mtl_graph.cli.memories:memories_add"),
        Command("import", "mtl_graph.cli.memories:memories_import"),
        Command("search", "mtl_graph.cli.memories:memories_search"),
        Command("list", "mtl_graph.cli.memories:memories_list"),
        Command("delete", "mtl_graph.cli.memories:memories_delete"),
        Command("stats", "mtl_graph.cli.memories:memories_stats"),
        Command("export", "mtl_graph.cli.memories:memories_export"),
        Command("flagged", "mtl_graph.cli.memories:memories_flagged"),
        Command("screen", "mtl_graph.cli.memories:memories_screen"),
        Command("show", "mtl_graph.cli.memories_lifecycle:memories_show"),
        Command("quarantined", "mtl_graph.cli.memories_lifecycle:memories_quarantined"),
        Command("release", "mtl_graph.cli.memories_lifecycle:memories_release"),
        Command("superseded", "mtl_graph.cli.memories_lifecycle:memories_superseded"),
    )),
    Group("export", "Write the memories that measurably helped into the files coding agents read: AGENTS.md, "
                    "CLAUDE.md, skill folders.", (
        Command("agents-md", "mtl_graph.cli.export:agents_md"),
        Command("claude-md", "mtl_graph.cli.export:claude_md"),
        Command("skills", "mtl_graph.cli.export:skills"),
    )),
    Group("pool", "Maintain a pool: check and repair it, verify its memories against the code, snapshot and roll it back, consolidate and prune it, list "
                  "its namespaces.", (
        Command("check", "mtl_graph.cli.pool:check"),
        Command("verify", "mtl_graph.cli.pool:verify_cmd"),
        Command("diff", "mtl_graph.cli.snapshots:diff_cmd"),
        Command("consolidate", "mtl_graph.cli.consolidate:consolidate_cmd"),
        Command("prune", "mtl_graph.cli.consolidate:prune_cmd"),
        Command("namespaces", "mtl_graph.cli.pool:namespaces_cmd"),
        Group("snapshot", "Snapshots of a pool: create one, list them, restore one exactly (undoable).", (
            Command("create", "mtl_graph.cli.snapshots:create"),
            Command("list", "mtl_graph.cli.snapshots:list_cmd"),
            Command("restore", "mtl_graph.cli.snapshots:restore"),
        )),
    )),
)
"""Every command and group of `mtl`, in the order `mtl --help` lists them."""

HELP_ONLY = "mtl.help_only"
"""ctx.meta key: the command line asks for a command's help (nothing runs, no setting is read)."""


class MtlGroup(LazyGroup):
    """The `mtl` group: the commands of `COMMANDS`; a command line that asks for help reads no setting."""

    entries = COMMANDS

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        given = args[:args.index("--")] if "--" in args else args
        ctx.meta[HELP_ONLY] = any(arg in ctx.help_option_names for arg in given)
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=MtlGroup,
    help="Memory transfer for coding agents: a shared memory pool, runs, ingestion and evaluation.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def check_environment(ctx: typer.Context) -> None:
    """Every command reads MTL_* settings: a bad one is reported once, before the command starts (`--help`
    reads none: it must show even with a bad setting, and fast)."""
    if not ctx.meta.get(HELP_ONLY):
        settings()


def main() -> None:
    """The `mtl` console script."""
    app()
