"""`mtl pool consolidate` and `mtl pool prune` (dry runs unless --apply). Only typer and the standard library load
at import time (the pool, the models and rich load inside each command)."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Annotated, Any, Iterator, Optional

import typer

from mtl_graph.cli.common import JsonOption, NamespaceOption, PoolOption, console, fail, open_pool
from mtl_graph.cli.format_options import formats_option

ApplyOpt = Annotated[bool, typer.Option("--apply", help="Write the changes (without it: a dry run that changes "
                                                        "nothing).")]
SHOWN = 8
"""Original ids listed per cluster in the table."""


@contextmanager
def _progress(description: str, quiet: bool) -> Iterator[Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = console(stderr=True)  # a bar only on a terminal: piped output and --json stay clean
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=quiet or not err.is_terminal) as progress:
        bar = progress.add_task(description, total=None)
        yield lambda done, total: progress.update(bar, completed=done, total=total)


def consolidate_cmd(
    type_: Annotated[Optional[str], formats_option("--type", help="Only this format: {formats}.")] = None,
    threshold: Annotated[float, typer.Option("--threshold", help="Cosine of key texts at or above which two "
                                                                 "memories are near-duplicates (0-1].")] = 0.9,
    apply_: ApplyOpt = False,
    full: Annotated[bool, typer.Option("--full", help="Compare every live memory (without it: only those added or "
                                                      "changed since the last applied pass at this threshold).")]
    = False,
    model: Annotated[Optional[str], typer.Option("--model", help="PROVIDER:MODEL that writes the merged memories "
                                                                 "of the formats a model writes.")] = None,
    pool: PoolOption = None, namespace: NamespaceOption = None,
    json_out: JsonOption = False,
) -> None:
    """Merge near-duplicate memories (per type and outcome) into one each; the originals are archived, never
    deleted, and their records summed into the merged memory. Each memory is compared with its nearest
    neighbours in the pool's index; by default only the memories added or changed since the last applied pass
    (--full: all of them). A dry run shows the clusters and, with --model, the proposals."""
    from mtl_graph.memory.lifecycle import consolidate as c
    from mtl_graph.memory.base import memory_type_of

    try:
        kind = memory_type_of(type_) if type_ is not None else None
    except ValueError as exc:
        fail(f"--type: {exc}")
    if not 0.0 < threshold <= 1.0:
        fail(f"--threshold must be a cosine above 0 and at most 1, not {threshold}")
    chat = None
    if model is not None:
        from mtl_graph.llm.chat import chat_model

        try:
            chat = chat_model(model)
        except Exception as exc:  # unknown provider, missing package or key: init_chat_model's errors vary
            fail(f"cannot use model {model!r}: {exc}")
    report = None
    with open_pool(pool, namespace) as opened:
        with _progress("comparing memories", json_out) as tick:
            done = c.compare(opened, kind, threshold, incremental=not full, on_progress=tick)
        clusters = done.clusters
        waiting = [cl for cl in clusters if c.model_written(cl.type) and chat is None]
        if apply_ and waiting:
            fail(f"--model PROVIDER:MODEL is required with --apply: {len(waiting)} cluster(s) of "
                 f"{', '.join(sorted({cl.type.value for cl in waiting}))} memories need a model to write their "
                 "merged memory (or pass --type trajectory)")
        todo = [cl for cl in clusters if cl not in waiting]
        with _progress("proposing merged memories", json_out) as tick:
            proposals = c.propose_all(todo, chat, on_progress=tick)
        if apply_:
            with _progress("applying", json_out) as tick:
                report = c.apply(opened, proposals, on_progress=tick)
            with _progress("marking the compared memories", json_out) as tick:
                c.finish(opened, done, on_progress=tick)
    by_cluster = {id(p.cluster): p for p in proposals}
    rows = [(cl, by_cluster.get(id(cl))) for cl in clusters]
    failed = [ids for ids, _ in report.failed] if report else [p.cluster.ids for p in proposals if p.error]
    if json_out:
        typer.echo(json.dumps({**_json(rows, report, threshold, apply_), "compared": len(done.compared),
                               "full": full}, indent=2))
    else:
        _print(rows, report, threshold, apply_)
        console().print(f"compared {len(done.compared)} memories "
                          f"({'all live ones' if full else 'added or changed since the last pass'})")
    if failed:
        raise typer.Exit(1)


def _json(rows: list, report: Any, threshold: float, applied: bool) -> dict[str, Any]:
    clusters = []
    for cluster, proposal in rows:
        clusters.append({"type": cluster.type.value, "outcome": cluster.outcome.value, "ids": cluster.ids,
                         "similarity": round(cluster.similarity, 4),
                         "proposal": proposal.merged.model_dump(mode="json") if proposal and proposal.merged else None,
                         "error": (proposal.error if proposal else "needs --model to propose a merged memory")})
    out: dict[str, Any] = {"dry_run": not applied, "threshold": threshold, "clusters": clusters}
    if report is not None:
        out["applied"] = [{"originals": ids, "into": new} for ids, new in report.applied]
        out["failed"] = [{"originals": ids, "why": why} for ids, why in report.failed]
    return out


def _print(rows: list, report: Any, threshold: float, applied: bool) -> None:
    from rich.markup import escape  # memory text is data: "[...]" in it must not act as rich markup

    from mtl_graph.cli.tables import print_records

    out = console()
    if not rows:
        out.print(f"no near-duplicates at cosine >= {threshold:g}: nothing to consolidate")
        return
    cells = []
    for n, (cluster, proposal) in enumerate(rows, 1):
        ids = " ".join(i[:8] for i in cluster.ids[:SHOWN]) + (" ..." if len(cluster.ids) > SHOWN else "")
        if proposal is None:
            what = "[dim]needs --model to propose[/dim]"
        elif proposal.merged is None:
            what = f"[red]failed: {escape(proposal.error)}[/red]"
        else:
            s = proposal.merged.stats
            what = f"{escape(proposal.merged.key_text()[:80])} [dim](shown {s.retrieved}, cited {s.cited})[/dim]"
        cells.append((str(n), cluster.type.value, cluster.outcome.value, str(len(cluster.ids)),
                      f"{cluster.similarity:.3f}", ids, what))
    print_records(out, ("#", "type", "outcome", "n", "min cos", "originals", "proposal"), cells, text=("proposal",),
                  title=f"near-duplicate clusters (cosine >= {threshold:g})", right=("#", "n", "min cos"))
    if report is None:
        out.print(f"dry run: {len(rows)} cluster(s), {sum(len(c.ids) for c, _ in rows)} memories; nothing "
                  "changed (--apply writes the proposals)")
        return
    archived = sum(len(ids) - (new in ids) for ids, new in report.applied)
    out.print(f"applied {len(report.applied)} cluster(s): {archived} memories archived into "
              f"{len(report.applied)}; {len(report.failed)} failed")
    for ids, why in report.failed:
        out.print(f"failed: {ids[0][:8]} (+{len(ids) - 1}): {escape(why)}")


def prune_cmd(
    min_shown: Annotated[int, typer.Option("--min-shown", help="Showings without a citation that make a memory "
                                                               "stale.")] = 20,
    apply_: ApplyOpt = False,
    pool: PoolOption = None, namespace: NamespaceOption = None,
    json_out: JsonOption = False,
) -> None:
    """Archive stale memories (shown again and again but never cited, or clearly below the pool's success rate
    with enough evidence); a dry run lists them. Archived memories keep their record and are never retrieved."""
    from mtl_graph.memory.lifecycle.consolidate import PruneConfig, prune, stale

    if min_shown < 1:
        fail(f"--min-shown must be at least 1, not {min_shown}")
    with open_pool(pool, namespace) as opened:
        found = stale(opened, PruneConfig(min_shown=min_shown))
        done = prune(opened, found) if apply_ else []
    if json_out:
        typer.echo(json.dumps({"dry_run": not apply_, "stale": [{"id": m.id, "type": m.type, "why": why}
                                                                for m, why in found], "archived": done}, indent=2))
        return
    from rich.markup import escape

    from mtl_graph.cli.tables import print_records

    out = console()
    if not found:
        out.print("nothing stale: nothing to prune")
        return
    print_records(out, ("id", "type", "shown", "cited", "why"),
                  [(m.id[:8], m.type, str(m.stats.retrieved), str(m.stats.cited), escape(why)) for m, why in found],
                  text=("why",), title="stale memories", right=("shown", "cited"))
    out.print(f"archived {len(done)} memories" if apply_ else
              f"dry run: {len(found)} stale; nothing changed (--apply archives them)")
