"""`mtl memories add | import | search | list | delete | stats | export | flagged | screen`; show, quarantined and
release (a memory's status, record and history) are in memories_lifecycle.py, what both print and look up in
memory_views.py, and app.py registers them all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from mtl_graph.cli.common import JsonOption, NamespaceOption, PoolOption, console, fail, open_pool
from mtl_graph.cli.format_options import formats_option
from mtl_graph.cli.memory_views import memory_row, print_held, resolve_id
from mtl_graph.cli.tables import print_records

STATUSES = ("active", "stale", "flagged", "quarantined", "superseded", "archived")
"""A memory's status (Memory.status): active and stale (ranked lower) memories are served with the online loop on."""


def _status_of(value: str | None) -> str | None:
    """A --status value checked, with one clear line for one that is not a status."""
    if value is None:
        return None
    status = value.strip().lower()
    if status not in STATUSES:
        fail(f"unknown status {value!r}; expected one of: {', '.join(STATUSES)}")
    return status


def _type_of(value: str | None) -> str | None:
    from mtl_graph.memory.base import memory_type_of

    try:
        return None if value is None else memory_type_of(value).value
    except ValueError as exc:
        fail(str(exc))


def memories_add(file: Annotated[Path, typer.Argument(help="JSONL file, one memory per line (or a directory: its *.jsonl files).")],
                 pool: PoolOption = None, namespace: NamespaceOption = None) -> None:
    """Add memories from a JSONL file (usage stats reset). Bad lines are reported; good lines are still added."""
    _import(file, pool, namespace, keep_stats=False)


def memories_import(file: Annotated[Path, typer.Argument(help="JSONL file written by `mtl memories export` (or a directory: its *.jsonl files).")],
                    pool: PoolOption = None, namespace: NamespaceOption = None) -> None:
    """Import an exported JSONL file exactly, usage stats included."""
    _import(file, pool, namespace, keep_stats=True)


MAX_ERROR_LINES = 20
"""Bad lines listed per import; the rest are counted (a wrong file would otherwise print one line per line)."""


def _jsonl_files(path: Path) -> list[Path]:
    """The file, or the *.jsonl files directly inside a directory (name order); a clear error otherwise."""
    from mtl_graph.memory.engine.location import META_FILE

    if path.is_dir():
        if (path / META_FILE).is_file():
            fail(f"{path} is a memory pool directory, not an export: run `mtl memories export FILE --pool {path}` "
                 "and import FILE")
        files = sorted(p for p in path.glob("*.jsonl") if p.is_file())
        if not files:
            fail(f"{path} is a directory with no .jsonl files in it")
        return files
    if not path.is_file():
        fail(f"{path}: no such file")
    with path.open("rb") as fh:
        if b"\x00" in fh.read(8192):
            fail(f"{path}: binary file, not a JSONL file of memories")
    return [path]


def _import(file: Path, location: str | None, namespace: str | None, keep_stats: bool) -> None:
    files = _jsonl_files(file)
    with open_pool(location, namespace) as pool:
        report = pool.import_jsonl(files[0], keep_stats=keep_stats)
        for more in files[1:]:  # a directory: all its files in one report
            other = pool.import_jsonl(more, keep_stats=keep_stats)
            report.results.extend(other.results)
            report.errors.extend(other.errors)
    counts = report.results.counts
    typer.echo(f"{counts['added']} added, {counts['merged']} merged into memories with the same content, "
               f"{counts['identical']} already present" + (f"; {counts['flagged']} flagged by screening "
                                                           "(see `mtl memories flagged`)" if counts["flagged"] else ""))
    _print_import_errors(report.errors, files, nothing_imported=not report.results)
    if report.errors:
        raise typer.Exit(1)


def _print_import_errors(errors: list[str], files: list[Path], nothing_imported: bool) -> None:
    for error in errors[:MAX_ERROR_LINES]:
        typer.secho(error, fg=typer.colors.RED, err=True)
    if len(errors) > MAX_ERROR_LINES:
        typer.secho(f"... and {len(errors) - MAX_ERROR_LINES} more bad lines ({len(errors)} in all)",
                    fg=typer.colors.RED, err=True)
    if errors and nothing_imported:
        _hint_agent_logs(files)


def _hint_agent_logs(files: list[Path]) -> None:
    """Point to `mtl ingest` when the files given are agent logs rather than memories."""
    from mtl_graph.importers import MAX_FILE_BYTES, detect_format

    for path in files:
        if path.stat().st_size <= MAX_FILE_BYTES:
            fmt = detect_format(path.read_bytes().decode("utf-8", errors="replace"))
            if fmt is not None:
                typer.secho(f"{path} looks like a {fmt} agent log: make memories from it with `mtl ingest {path}`",
                            err=True)


def memories_search(
    text: Annotated[str, typer.Argument(help="What to look for (a task, a plan, an error message).")],
    type: Annotated[Optional[str], formats_option("--type", "-t", help="Only this format: {formats}.")] = None,
    k: Annotated[int, typer.Option("--k", "-k", min=1, max=100, help="How many memories.")] = 3,
    exclude_domain: Annotated[Optional[list[str]], typer.Option("--exclude-domain", help="Drop memories from this domain (repeatable).")] = None,
    dense_only: Annotated[bool, typer.Option("--dense-only", help="Dense vectors only (no BM25 fusion).")] = False,
    include_flagged: Annotated[bool, typer.Option("--include-flagged", help="Also return memories flagged by screening.")] = False,
    json_out: JsonOption = False,
    pool: PoolOption = None, namespace: NamespaceOption = None,
) -> None:
    """Search the pool (hybrid dense + BM25 by default) and show memories with scores."""
    with open_pool(pool, namespace) as opened:
        try:
            hits = opened.search(text, type=type, k=k, exclude_domains=exclude_domain or (),
                                 retriever="dense" if dense_only else "hybrid", include_flagged=include_flagged)
        except ValueError as exc:
            fail(str(exc))
    if json_out:
        typer.echo(json.dumps([{"score": h.score, "similarity": h.similarity, "retriever": h.retriever,
                                "memory": h.memory.model_dump(mode="json")} for h in hits], indent=2))
        return
    from rich.markup import escape

    rows = [(*memory_row(h.memory), f"{h.similarity:.3f}", h.retriever) for h in hits]
    print_records(console(), ("id", "type", "outcome", "domains", "key", "cosine", "found by"), rows, text=("key",),
                  title=f"top {k} for: {escape(text[:60])}")


def memories_list(
    type: Annotated[Optional[str], formats_option("--type", "-t", help="Only this format: {formats}.")] = None,
    status: Annotated[Optional[str], typer.Option("--status", "-s", help="Only this status: active, flagged, quarantined, superseded, archived.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Archived memories too (hidden otherwise).")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 50,
    json_out: JsonOption = False,
    pool: PoolOption = None, namespace: NamespaceOption = None,
) -> None:
    """List memories in the pool with their status (archived ones only with --status archived or --all)."""
    from itertools import islice

    type, status = _type_of(type), _status_of(status)

    def wanted(m) -> bool:
        if type is not None and m.type != type:
            return False
        return m.status == status if status is not None else all_ or m.status != "archived"

    with open_pool(pool, namespace) as opened:
        chosen = list(islice(filter(wanted, opened), limit))
    if json_out:
        typer.echo(json.dumps([{**m.model_dump(mode="json"), "status": m.status} for m in chosen], indent=2))
        return
    print_records(console(), ("id", "type", "outcome", "domains", "key", "status"),
                  [(*memory_row(memory), memory.status) for memory in chosen], text=("key",))


def memories_delete(memory_id: Annotated[str, typer.Argument(help="Memory id (or a unique prefix).")],
                    pool: PoolOption = None, namespace: NamespaceOption = None) -> None:
    """Delete one memory."""
    with open_pool(pool, namespace) as opened:
        memory = resolve_id(opened, memory_id)
        opened.delete(memory.id)
    typer.echo(f"deleted {memory.id}")


def memories_stats(json_out: JsonOption = False, pool: PoolOption = None, namespace: NamespaceOption = None) -> None:
    """Counts by type, domain, outcome, screening and status; the base rate (runs shown memories that succeeded)."""
    with open_pool(pool, namespace) as opened:
        stats, total, rate = opened.stats(), opened.count(), opened.base_rate()
    base = {"rate": round(rate.rate, 4), "success": rate.success, "failure": rate.failure}
    if json_out:
        typer.echo(json.dumps({"total": total, **stats, "base_rate": base}, indent=2))
        return
    from rich.table import Table

    table = Table("by", "value", "memories", title=f"{total} memories")
    for group, counts in stats.items():
        for value, n in sorted(counts.items()):
            table.add_row(group, value, str(n))
    console().print(table)
    typer.echo(f"base rate {rate.rate:.0%}: {rate.success} successful and {rate.failure} failed runs memories "
               "were shown in")


def memories_export(file: Annotated[Path, typer.Argument(help="JSONL file to write.")],
                    pool: PoolOption = None, namespace: NamespaceOption = None) -> None:
    """Export every memory (provenance and stats included) as JSONL."""
    with open_pool(pool, namespace) as opened:
        try:
            n = opened.export(file)
        except OSError as exc:
            fail(f"cannot write {file}: {exc.strerror}")
    typer.echo(f"exported {n} memories to {file}")


def memories_flagged(json_out: JsonOption = False, pool: PoolOption = None, namespace: NamespaceOption = None) -> None:
    """List memories that write-time screening holds back from retrieval, with the reasons."""
    with open_pool(pool, namespace) as opened:
        held = opened.flagged()
    print_held(held, "flagged", lambda m: m.flagged, json_out)


def memories_screen(json_out: JsonOption = False, pool: PoolOption = None, namespace: NamespaceOption = None) -> None:
    """Screen every memory in the pool again (after a rules update, or for a pool written before screening)."""
    with open_pool(pool, namespace) as opened:
        newly, held = opened.rescreen(), len(opened.flagged())
    if json_out:
        typer.echo(json.dumps({"newly_flagged": newly, "flagged": held}, indent=2))
        return
    typer.echo(f"{len(newly)} newly flagged, {held} flagged in all (see `mtl memories flagged`)")

