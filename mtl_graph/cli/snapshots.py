"""`mtl pool snapshot create|list|restore` and `mtl pool diff`. Only typer and the standard library load at import
time (the pool, the engines and rich load inside each command)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from mtl_graph.cli.common import NamespaceOption, PoolOption, console, open_pool

DirOpt = Annotated[
    Optional[str],
    typer.Option("--dir", help="Where the snapshots live (default: <pool directory>/snapshots; required for "
                               "a :memory: or server pool); a namespace other than the default uses its "
                               "@NAMESPACE folder there."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of text.")]
NameArg = Annotated[str, typer.Argument(help="Snapshot name: letters, digits, '.', '_' or '-' (at most 64).")]
SHOWN = 20
"""Ids listed per kind of change in the text output of diff."""


def create(name: NameArg, pool: PoolOption = None, namespace: NamespaceOption = None, directory: DirOpt = None,
           force: Annotated[bool, typer.Option("--force", help="Replace a snapshot of that name (once the new one "
                                                               "is complete).")] = False,
           json_out: JsonOpt = False) -> None:
    """Snapshot every memory of the pool (vectors and whole payloads) under NAME."""
    from mtl_graph.memory.engine.snapshots.archive import create_snapshot

    with open_pool(pool, namespace) as opened:
        info = create_snapshot(opened, name, directory, force=force)
    if json_out:
        typer.echo(json.dumps(info.to_json(), indent=2))
    else:
        typer.echo(f"snapshot {info.name}: {info.count} memories, {info.checksum} ({info.path})")


def list_cmd(pool: PoolOption = None,
             namespace: NamespaceOption = None, directory: DirOpt = None, json_out: JsonOpt = False) -> None:
    """The pool's snapshots, oldest first (a snapshot with an unreadable manifest is listed with its problem)."""
    from mtl_graph.memory.engine.snapshots.archive import list_snapshots

    with open_pool(pool, namespace) as opened:
        found = list_snapshots(opened, directory)
    if json_out:
        typer.echo(json.dumps([i.to_json() for i in found], indent=2))
        return
    if not found:
        typer.echo("no snapshots")
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table("name", "created (UTC)", "memories", "checksum", "embeddings")
    for info in found:
        if info.problem:
            table.add_row(escape(info.name), "-", "-", "[red]unreadable[/red]", escape(info.problem))
        else:
            table.add_row(escape(info.name), info.created_at, str(info.count), info.checksum[:19] + "...",
                          escape(f"{info.embeddings} ({info.dim})"))
    console().print(table)


def restore(name: NameArg, pool: PoolOption = None,
            namespace: NamespaceOption = None, directory: DirOpt = None, json_out: JsonOpt = False,
            full_check: Annotated[bool, typer.Option("--full-check", help="Read the whole pool again afterwards and "
                                                     "compare every memory (by default: every memory written is "
                                                     "read back, the count checked).")] = False) -> None:
    """Give the pool back exactly snapshot NAME (memories added since are removed). The snapshot is verified
    first; the pool as it was is kept as snapshot before-restore-<time>, so a restore can be undone."""
    from mtl_graph.memory.engine.snapshots.archive import restore_snapshot

    with open_pool(pool, namespace) as opened:
        report = restore_snapshot(opened, name, directory, full_check=full_check)
    if json_out:
        typer.echo(json.dumps(report.to_json(), indent=2))
        return
    exact = ("checksum verified" if report.checksum_verified else
             f"checksum equal but for {report.renormalised} dense vectors the engine normalised again")
    typer.echo(f"restored {report.name}: {report.count} memories (count verified, {exact}); {report.deleted} "
               f"deleted, {report.written} written, {report.payloads} payloads rewritten, {report.unchanged} "
               f"unchanged in {report.seconds:.2f}s")
    typer.echo(f"undo: mtl pool snapshot restore {report.safety_snapshot}")


def diff_cmd(a: Annotated[str, typer.Argument(help="A snapshot name, or `current` for the live pool.")],
             b: Annotated[str, typer.Argument(help="A snapshot name, or `current` for the live pool.")] = "current",
             pool: PoolOption = None,
             namespace: NamespaceOption = None, directory: DirOpt = None, json_out: JsonOpt = False) -> None:
    """What changed from A to B: memories added, removed, and changed (with the fields that differ)."""
    from mtl_graph.memory.engine.snapshots.archive import diff, points_of

    with open_pool(pool, namespace) as opened:
        result = diff(points_of(opened, a, directory), points_of(opened, b, directory))
    if json_out:
        typer.echo(json.dumps({"a": a, "b": b, **result.to_json()}, indent=2))
        return
    typer.echo(f"{a} -> {b}: {len(result.added)} added, {len(result.removed)} removed, {len(result.changed)} "
               f"changed, {result.unchanged} unchanged")
    rows = ([f"+ {i}" for i in result.added], [f"- {i}" for i in result.removed],
            [f"~ {i}: {', '.join(fields)}" for i, fields in result.changed.items()])
    for lines in rows:
        for line in lines[:SHOWN]:
            typer.echo(line)
        if len(lines) > SHOWN:
            typer.echo(f"  ... and {len(lines) - SHOWN} more (--json lists them all)")
