"""`mtl pool check`, `mtl pool verify` and `mtl pool namespaces`: an embedded pool checked (and repaired), its
memories' code links verified against a checkout, a pool's namespaces. The
other `mtl pool` commands are in snapshots.py and consolidate.py; app.py registers them all. Only typer and the
standard library load at import time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from mtl_graph.cli.common import JsonOption, NamespaceOption, PoolOption, fail, open_pool

SHOWN = 20
"""Unreadable points listed in the text output."""

def check(
    location: Annotated[Optional[str], typer.Argument(help="Pool directory. [env: MTL_POOL]")] = None,
    repair: Annotated[bool, typer.Option("--repair", help="Rebuild the pool from every readable memory; the damaged one is kept beside it.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of text.")] = False,
) -> None:
    """Read every memory without changing the pool, compare counts, list what is unreadable (exit 1 if damaged)."""
    from mtl_graph.memory.engine.check import check_pool
    from mtl_graph.memory.engine.embeddings import EmbeddingError
    from mtl_graph.memory.errors import PoolError
    from mtl_graph.config.environment import get_settings

    location = location or get_settings().pool
    if location == ":memory:" or location.startswith(("http://", "https://")):
        fail(f"{location}: `mtl pool check` checks an embedded pool directory (a server checks its own storage)")
    try:
        report = check_pool(location, repair=repair)
    except (PoolError, EmbeddingError, OSError) as exc:
        fail(str(exc))
    if json_out:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        _print(report, repair)
    if (report.damaged and report.repaired is None) or report.stale_stats:
        raise typer.Exit(1)


def _print(report, repair: bool) -> None:  # type: ignore[no-untyped-def]
    def known(n: int | None) -> str:
        return "?" if n is None else str(n)

    typer.echo(f"pool {report.location} ({report.engine}): {known(report.recorded)} recorded, engine counts "
                f"{known(report.engine_count)}, {report.readable} readable, {len(report.unreadable)} unreadable, "
                f"{report.lost} lost")
    for problem in report.problems:
        typer.echo(f"problem: {problem}")
    for point in report.unreadable[:SHOWN]:
        typer.echo(f"unreadable: {point['id']}: {point['why']}")
    if len(report.unreadable) > SHOWN:
        typer.echo(f"... and {len(report.unreadable) - SHOWN} more unreadable (--json lists them all)")
    if report.reembedded:
        typer.echo(f"{len(report.reembedded)} readable memories need their vectors embedded again")
    for problem in report.stats_problems[:SHOWN]:
        typer.echo(f"statistics: {problem}")
    if report.stats_repaired is not None:
        typer.echo(f"repaired the statistics: {', '.join(report.stats_repaired)}")
    elif report.stale_stats:
        typer.echo("the memories are intact; `mtl pool check --repair` recomputes the statistics")
    if report.repaired is not None:
        done = report.repaired
        typer.echo(f"repaired: rebuilt {done['rebuilt']} memories ({done['reembedded']} embedded again), "
                   f"{done['lost']} lost; the damaged pool is kept at {done['backup']}")
    elif report.damaged:
        typer.echo(f"damaged: run `mtl pool check --repair {report.location}` to rebuild it from the "
                   f"{report.readable} readable memories (the damaged copy is kept)")
    elif not report.stale_stats:
        typer.echo("ok" + (": nothing to repair" if repair and report.stats_repaired is None else ""))


def namespaces_cmd(pool: PoolOption = None, json_out: JsonOption = False) -> None:
    """The pool's namespaces (teams or projects sharing it) with how many memories each holds."""
    with open_pool(pool) as opened:
        counts = opened.namespaces()
    if json_out:
        typer.echo(json.dumps(counts, indent=2))
        return
    width = max(len(name) for name in counts)
    for name, count in counts.items():
        typer.echo(f"{name:<{width}}  {count}")


def verify_cmd(
    repo: Annotated[Path, typer.Option("--repo", help="A git checkout of the repository the memories' runs worked on.")],
    pool: PoolOption = None, namespace: NamespaceOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report what is stale; change nothing.")] = False,
    json_out: JsonOption = False,
) -> None:
    """Mark memories stale whose runs' files changed in REPO since (ranked lower, shown in the trace), and current
    again those whose files did not; memories with no code link are never stale."""
    from mtl_graph.memory.lifecycle.verify import VerifyError, verify

    with open_pool(pool, namespace) as opened:
        try:
            report = verify(opened, repo, dry_run=dry_run)
        except VerifyError as exc:
            fail(str(exc))
    if json_out:
        typer.echo(json.dumps(report.to_json(), indent=2))
        return
    verb = "would mark" if dry_run else "marked"
    for memory_id, changed in report.stale.items():
        typer.echo(f"stale: {memory_id}: {', '.join(changed[:SHOWN])}" + (" ..." if len(changed) > SHOWN else ""))
    for memory_id, why in report.unverifiable.items():
        typer.echo(f"not verified: {memory_id}: {why}")
    typer.echo(f"{verb} {len(report.stale)} stale, {len(report.current)} current; {len(report.unverifiable)} not "
               f"verifiable here, {report.elsewhere} linked to other repositories, {report.unlinked} with no code link")
