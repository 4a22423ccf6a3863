"""`mtl export agents-md | claude-md | skills`: the memories that measurably helped, into the files coding agents
read (mtl_graph/export/). app.py registers them. Only typer and the standard library load at import time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from mtl_graph.cli.common import JsonOption, NamespaceOption, PoolOption, fail, open_pool, settings
from mtl_graph.cli.format_options import formats_option

MinRunsOption = Annotated[int, typer.Option("--min-runs", min=1, max=100_000, help="Judged runs that must have cited a memory before its record counts as evidence it helped.")]
LimitOption = Annotated[int, typer.Option("--limit", min=1, max=1000, help="Most memories written, highest utility first.")]
DomainOption = Annotated[Optional[str], typer.Option("--domain", help="Only memories from runs of this domain (benchmark or repository).")]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Show the diff of what would be written; write nothing.")]
SHOWN = 10
"""Left-out memories listed per reason class in the text output (--json lists them all)."""


def _selection(pool: Optional[str], namespace: Optional[str], cfg: Any) -> tuple[Any, str]:
    from mtl_graph.export.selection import select_from

    location = pool or settings().pool
    if location != ":memory:" and not location.startswith(("http://", "https://")) and not Path(location).exists():
        fail(f"{location}: no pool there (an export reads a pool, it never makes one)")
    with open_pool(location, namespace) as opened:
        return select_from(opened, cfg), opened.namespace


def _config(min_runs: int, limit: int, domain: Optional[str], formats: Optional[list[str]]) -> Any:
    from mtl_graph.export.selection import ExportConfig
    from mtl_graph.memory.formats import find, listed, names

    for name in formats or []:
        if find(name) is None:
            fail(f"unknown memory format {name!r}; expected {listed(names())}")
    return ExportConfig(min_runs=min_runs, limit=limit, domain=domain, formats=formats or None)


def _scope(namespace: str, domain: Optional[str]) -> str:
    return f"namespace {namespace}" + (f", domain {domain}" if domain else "")


def _report(selection: Any, updates: list[Any], dry_run: bool, json_out: bool, extra: dict[str, Any]) -> None:
    if json_out:
        typer.echo(json.dumps({
            "dry_run": dry_run, "base_rate": round(selection.base_rate, 4),
            "written": [{"id": e.memory.id, "type": e.memory.type, **e.evidence.to_json()} for e in selection.kept],
            "left_out": [{"id": x.id, "kind": x.kind, "reason": x.reason} for x in selection.left_out],
            "files": [{"path": str(u.path), "action": u.action} for u in updates], **extra}, indent=2))
        return
    for update in updates:
        if dry_run and update.action != "unchanged":
            typer.echo(update.diff(), nl=False)
    verb = "would write" if dry_run else "wrote"
    for update in updates:
        typer.echo(f"{update.path}: {update.action}" + (" (dry run)" if dry_run and update.action != "unchanged" else ""))
    typer.echo(f"{verb} {len(selection.kept)} memories; the pool's base rate is {selection.base_rate:.2f}")
    by_kind: dict[str, list[Any]] = {}
    for item in selection.left_out:
        by_kind.setdefault(item.kind, []).append(item)
    for kind, items in sorted(by_kind.items()):
        typer.echo(f"left out ({kind}): {len(items)}")
        for item in items[:SHOWN]:
            typer.echo(f"  {item.id}: {item.reason}")
        if len(items) > SHOWN:
            typer.echo(f"  ... and {len(items) - SHOWN} more (--json lists them all)")


def _markdown(file: Path, command: str, pool: Optional[str], namespace: Optional[str], domain: Optional[str],
              min_runs: int, limit: int, formats: Optional[list[str]], dry_run: bool, json_out: bool) -> None:
    from mtl_graph.export.section import ExportError, export_section

    cfg = _config(min_runs, limit, domain, formats)
    selection, name = _selection(pool, namespace, cfg)
    try:
        update = export_section(file, selection, cfg, _scope(name, domain), command, dry_run=dry_run)
    except ExportError as exc:
        fail(str(exc))
    _report(selection, [update], dry_run, json_out, {})


FileOption = Annotated[Optional[Path], typer.Option("--file", dir_okay=False, help="The file to update (default: AGENTS.md / CLAUDE.md in the working directory).")]
MarkdownFormats = Annotated[Optional[list[str]], formats_option("--format", help="Only memories of this format ({formats}); repeat for more.")]


def _markdown_command(default: str, command: str) -> Any:
    """The command writing the memories that helped into one markdown file (AGENTS.md, CLAUDE.md)."""

    def write(file: FileOption = None, pool: PoolOption = None, namespace: NamespaceOption = None,
              domain: DomainOption = None, min_runs: MinRunsOption = 3, limit: LimitOption = 30,
              formats: MarkdownFormats = None, dry_run: DryRunOption = False, json_out: JsonOption = False) -> None:
        _markdown(file or Path(default), command, pool, namespace, domain, min_runs, limit, formats, dry_run,
                  json_out)

    write.__doc__ = (f"Write the memories that measurably helped into {default}, as a section between markers: a "
                     "re-export replaces it in place and leaves the rest of the file untouched.")
    return write


agents_md = _markdown_command("AGENTS.md", "mtl export agents-md")
claude_md = _markdown_command("CLAUDE.md", "mtl export claude-md")


def skills(directory: Annotated[Path, typer.Option("--dir", file_okay=False, help="The skills folder (Claude Code reads .claude/skills; Codex CLI .agents/skills).")] = Path(".claude/skills"),
           pool: PoolOption = None, namespace: NamespaceOption = None, domain: DomainOption = None,
           min_runs: MinRunsOption = 3, limit: LimitOption = 30, dry_run: DryRunOption = False,
           json_out: JsonOption = False) -> None:
    """Write one skill folder (SKILL.md) per workflow memory that measurably helped; the skills an earlier export
    wrote that no longer qualify are removed; skills a person wrote are never touched."""
    from mtl_graph.export.section import ExportError
    from mtl_graph.export.skills import export_skills

    cfg = _config(min_runs, limit, domain, ["workflow"])
    selection, name = _selection(pool, namespace, cfg)
    try:
        done = export_skills(directory, selection, name, dry_run=dry_run)
    except ExportError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{directory}: cannot write the skills ({exc.strerror})")
    selection.left_out.extend(done.left_out)
    selection.kept = [e for e in selection.kept if e.memory.id not in {x.id for x in done.left_out}]
    _report(selection, done.updates, dry_run, json_out,
            {"kept_with_other_files": [str(p) for p in done.kept_foreign]})
    for folder in done.kept_foreign:
        if not json_out:
            typer.echo(f"{folder}: no longer exported, kept (it holds files the export did not write)")
