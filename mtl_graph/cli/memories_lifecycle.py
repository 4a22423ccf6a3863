"""`mtl memories show | quarantined | superseded | release`: why a memory is (or is not) served, its record and its
history.

A memory is active, flagged (write-time screening holds it back), quarantined (the online loop stopped serving it
because runs that cited it failed more often than the pool's runs do, or it descends from such a memory),
superseded (a newer near-duplicate memory contradicts it: kept, not served with the lifecycle on) or archived
(kept, never retrieved). `show` explains one: its status with the reasons, its record, its utility
against the pool's base rate and the runs that credited it.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from mtl_graph.cli.common import JsonOption, NamespaceOption, PoolOption, console, open_pool
from mtl_graph.cli.memory_views import print_held, resolve_id

HISTORY_ROWS = 20
"""History rows `show` prints (the latest; --json prints all of them)."""


def explain(opened, memory) -> dict[str, Any]:
    """What `show` reports beside the memory itself: status, utility against the base rate, evidence, history."""
    from mtl_graph.memory.lifecycle.policy import LifecycleConfig, evidence, utility

    cfg, rate = LifecycleConfig(), opened.base_rate()
    return {"status": memory.status, "utility": round(utility(memory.stats, rate.rate, cfg), 4),
            "evidence": round(evidence(memory.stats, cfg), 2), "min_evidence": cfg.min_evidence,
            "base_rate": {"rate": round(rate.rate, 4), "success": rate.success, "failure": rate.failure},
            "history": opened.history(memory.id)}


def memories_show(memory_id: Annotated[str, typer.Argument(help="Memory id (or a unique prefix).")],
                  json_out: JsonOption = False, pool: PoolOption = None, namespace: NamespaceOption = None) -> None:
    """Show one memory: status with reasons, provenance, record, utility against the pool's base rate, history."""
    with open_pool(pool, namespace) as opened:
        memory = resolve_id(opened, memory_id)
        why = explain(opened, memory)
    if json_out:  # the memory's own fields as before, what `show` adds beside them
        typer.echo(json.dumps({**memory.model_dump(mode="json"), **why}, indent=2))
        return
    out = console()
    plain = {"markup": False, "highlight": False}  # reasons and memory text are data, never rich markup
    out.print(f"[bold]{memory.id}[/bold]  {memory.type}  outcome={memory.outcome.value}  status={memory.status}")
    if memory.flagged:
        out.print("flagged (not retrieved): " + "; ".join(memory.flagged), **plain)
    if memory.quarantined:
        out.print("quarantined (not served by the online loop): " + "; ".join(memory.quarantined), **plain)
    if memory.archived:
        out.print(f"archived (never retrieved): {memory.archived}", **plain)
    if memory.stale:
        out.print("stale (served, ranked lower): " + "; ".join(memory.stale), **plain)
    if memory.last_verified is not None:
        out.print(f"code last verified {memory.last_verified:%Y-%m-%d %H:%M}", **plain)
    if memory.superseded_by:
        out.print(f"superseded by {memory.superseded_by} (kept; the newer one is served; "
                  f"`mtl memories release {memory.id}` reverses it): {memory.superseded_why}", **plain)
    if memory.supersedes:
        out.print("supersedes (newer than these, which it contradicts): " + ", ".join(memory.supersedes), **plain)
    for what, reasons in (("screening", memory.released), ("quarantine", memory.quarantine_released)):
        if reasons:
            out.print(f"released by a person ({what}): " + "; ".join(reasons), **plain)
    out.print(memory.render(1), **plain)
    _print_record(memory.stats, why)
    for src in memory.sources:
        out.print(f"source: task={src.source_task_id} domain={src.domain} model={src.task_model} "
                  f"distilled by={src.distill_model} run={src.run_id} at {src.created_at:%Y-%m-%d %H:%M}", **plain)
        if src.code is not None:
            code = src.code
            out.print(f"  code: {code.repository} at {code.commit or code.at}; files: {', '.join(code.paths[:5])}"
                      + (f" and {len(code.paths) - 5} more" if len(code.paths) > 5 else ""), **plain)
    _print_history(why["history"])


def _print_record(s, why: dict[str, Any]) -> None:
    base = why["base_rate"]
    typer.echo(f"shown {s.retrieved}× ({s.retrieved_success} in successful runs, {s.retrieved_failure} in failed); "
               f"cited {s.cited}× ({s.cited_success} succeeded, {s.cited_failure} failed); "
               f"{s.by_judge} verdicts by an LLM judge; shown {s.shown_since_cited}× uncited since last cited")
    moves = "moves its ranking" if why["evidence"] >= why["min_evidence"] else \
        f"too little to move its ranking (needs {why['min_evidence']:g})"
    typer.echo(f"utility {why['utility']:.2f} against the pool's base rate {base['rate']:.2f} "
               f"({base['success']} successful, {base['failure']} failed runs); evidence {why['evidence']:g} "
               f"weighted runs: {moves}")


def _print_history(rows: list[dict[str, Any]]) -> None:
    if not rows:
        typer.echo("history: no credited runs")
        return
    from rich.markup import escape
    from rich.table import Table

    earlier = len(rows) - HISTORY_ROWS
    title = f"{len(rows)} credited runs" + (f" (last {HISTORY_ROWS}; {earlier} earlier)" if earlier > 0 else "")
    table = Table("run", "when", "cited", "outcome", "verdict by", title=title)
    for row in rows[-HISTORY_ROWS:]:
        table.add_row(escape(row["run_id"]), row["at"], "yes" if row["cited"] else "no", row["outcome"],
                      row["verdict_by"])
    console().print(table)


def memories_quarantined(json_out: JsonOption = False, pool: PoolOption = None,
                         namespace: NamespaceOption = None) -> None:
    """List memories the online loop stopped serving (their cited runs failed), with the reasons and evidence."""
    with open_pool(pool, namespace) as opened:
        held = opened.quarantined()
    print_held(held, "quarantined", lambda m: m.quarantined, json_out)


def memories_superseded(json_out: JsonOption = False, pool: PoolOption = None,
                        namespace: NamespaceOption = None) -> None:
    """List memories a newer near-duplicate contradicts (kept, not served with the lifecycle on), with the newer
    memory and why."""
    with open_pool(pool, namespace) as opened:
        held = opened.superseded()
    print_held(held, "superseded", lambda m: [f"by {m.superseded_by}: {m.superseded_why}"], json_out)


def memories_release(memory_id: Annotated[str, typer.Argument(help="Memory id (or a unique prefix).")],
                     json_out: JsonOption = False, pool: PoolOption = None, namespace: NamespaceOption = None) -> None:
    """Serve a flagged, quarantined or superseded memory again (read it first: `mtl memories show ID`).

    The memories quarantined only because they descend from it are released with it; a superseded memory leaves
    the newer memory's `supersedes` and is served beside it."""
    with open_pool(pool, namespace) as opened:
        memory = resolve_id(opened, memory_id)
        flagged, quarantined = list(memory.flagged), list(memory.quarantined)
        superseded_by = memory.superseded_by
        before = {m.id for m in opened.quarantined()} if quarantined else set()
        memory = opened.release(memory.id) or memory
        descendants = sorted(before - {m.id for m in opened.quarantined()} - {memory.id})
    if json_out:
        extra = {"quarantine_reasons": quarantined, "descendants": descendants} if quarantined else {}
        if superseded_by:
            extra["superseded_by"] = superseded_by
        typer.echo(json.dumps({"id": memory.id, "released": bool(flagged or quarantined or superseded_by),
                               "reasons": memory.released, **extra}, indent=2))
        return
    if not flagged and not quarantined and not superseded_by:
        note = " (archived: release does not bring it back)" if memory.archived else ""
        typer.echo(f"{memory.id} was not flagged, quarantined or superseded; nothing to release{note}")
        return
    if superseded_by:
        typer.echo(f"restored {memory.id}: no longer superseded by {superseded_by}; both are served")
    if flagged:
        typer.echo(f"released {memory.id} from screening ({'; '.join(flagged)})")
    if quarantined:
        typer.echo(f"released {memory.id} from quarantine ({'; '.join(quarantined)}); it is judged only on "
                   "evidence from now on")
        typer.echo(f"released with it, as its descendants: {', '.join(descendants)}" if descendants else
                   "no descendants were quarantined because of it")
