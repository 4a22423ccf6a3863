"""What the `mtl memories` commands share (memories.py, memories_lifecycle.py): a memory as a table row, a memory
found by its id or a unique prefix, and the memories held back from retrieval printed with their reasons. Only
typer and the standard library load at import time."""

from __future__ import annotations

import json
from typing import Any, Callable

import typer

from mtl_graph.cli.common import console, fail
from mtl_graph.cli.tables import print_records


def memory_row(memory: Any) -> tuple[str, str, str, str, str]:
    """A memory's id (its first 8 characters), type, outcome, domains and key text, as table cells."""
    from rich.markup import escape  # memory text is data: "[...]" in it must not act as rich markup

    return (memory.id[:8], memory.type, memory.outcome.value, escape(",".join(memory.domains) or "-"),
            escape(memory.key_text()[:80]))


def resolve_id(opened: Any, prefix: str) -> Any:
    """The memory of the open pool with this id, or the one whose id starts with it; one error line for none or
    an ambiguous prefix."""
    memory = opened.get(prefix) if len(prefix) == 36 else None
    if memory is None:
        matches = [m for m in opened if m.id.startswith(prefix)]
        if len(matches) > 1:
            fail(f"id prefix {prefix!r} is ambiguous ({len(matches)} memories)")
        memory = matches[0] if matches else None
    if memory is None:
        fail(f"no memory with id {prefix!r}")
    return memory


def print_held(held: list[Any], what: str, reasons: Callable[[Any], list[str]], json_out: bool) -> None:
    """Memories held back from retrieval (flagged, quarantined) as JSON or a table with their reasons."""
    if json_out:
        typer.echo(json.dumps([m.model_dump(mode="json") for m in held], indent=2))
        return
    from rich.markup import escape

    rows = [(*memory_row(memory), escape("; ".join(reasons(memory)))) for memory in held]
    print_records(console(), ("id", "type", "outcome", "domains", "key", "reasons"), rows, text=("key", "reasons"),
                  title=f"{len(held)} {what} memories")
