"""Printing a run as it happens with rich: the graph's custom-stream events (see pipeline/events.py)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape


def stream_run(graph: Any, graph_input: dict[str, Any], render: Any = None, **kwargs: Any) -> dict[str, Any]:
    """Run `graph` with `stream_mode=["updates", "custom", "values"]`, hand each custom event to render, and
    return the run's output (the last `values` chunk, what `invoke` would have returned)."""
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream(graph_input, stream_mode=["updates", "custom", "values"], **kwargs):
        if mode == "custom" and render is not None:
            render(chunk)
        elif mode == "values":
            final = chunk
    return final


class RichProgress:
    """Prints plan, retrieved memories with scores, each command, the verdict and the memories written."""

    def __init__(self, console: Console | None = None, command_chars: int = 160) -> None:
        self.console = console or Console()
        self.command_chars = command_chars

    def __call__(self, event: dict[str, Any]) -> None:
        handler = getattr(self, f"on_{event.get('kind')}", None) if isinstance(event, dict) else None
        if handler is not None:
            handler(event)

    def on_plan(self, event: dict[str, Any]) -> None:
        self.console.print(f"[bold cyan]plan[/]  {escape(event['query'][:400])}")

    def on_retrieved(self, event: dict[str, Any]) -> None:
        stage = "re-retrieve" if event.get("refresh") else "retrieve"
        if not event["memories"]:
            self.console.print(f"[bold cyan]{stage}[/]  no memories matched")
            return
        for n, hit in enumerate(event["memories"], 1):
            domains, tasks = ",".join(hit["domains"]) or "-", ",".join(hit["source_task_ids"]) or "-"
            self.console.print(f"[bold cyan]{stage}[/]  Memory {n}: {hit['format']} {hit['id'][:8]} from "
                               f"[magenta]{escape(domains)}[/] (task {escape(tasks)}) "
                               f"cosine={hit['similarity']:.3f} found by {hit['retriever']}")

    def on_step(self, event: dict[str, Any]) -> None:
        action = event["command"]
        if event["tool"] == "submit":
            self.console.print(f"  [green]submit[/] {escape(action[: self.command_chars])}")
            return
        command = action if len(action) <= self.command_chars else action[: self.command_chars] + "…"
        first = command.splitlines()[0] if command else ""
        more = " …" if "\n" in command else ""
        code = "" if event["exit_code"] is None else f" [dim](exit {event['exit_code']})[/]"
        self.console.print(f"  [green]$[/] {escape(first)}{more}{code}")

    def on_agent(self, event: dict[str, Any]) -> None:
        color = "green" if event["exit_status"] == "submitted" else "yellow"
        tokens = event["tokens"]["input"] + event["tokens"]["output"]
        rejected = f", {event['malformed']} malformed replies" if event["malformed"] else ""
        error = f": {escape(event['error'][:300])}" if event["error"] else ""
        self.console.print(f"[bold cyan]agent[/]  [{color}]{event['exit_status']}[/] after {event['steps']} "
                           f"steps, {tokens} tokens{rejected}{error}")

    def on_distill_failed(self, event: dict[str, Any]) -> None:
        for failure in event["failures"]:
            self.console.print(f"[bold cyan]distill[/]  [yellow]not distilled[/] {escape(failure[:300])}")

    def on_verdict(self, event: dict[str, Any]) -> None:
        color = {"pass": "green", "fail": "red"}.get(event["status"], "yellow")
        self.console.print(f"[bold cyan]judge[/]  [{color}]{event['status'].upper()}[/] (by {event['source']})")
        if event["tests_modified"]:
            self.console.print(f"  [yellow]tests modified by the agent (restored before the check):[/] "
                               f"{escape(', '.join(event['tests_modified']))}")

    def on_written(self, event: dict[str, Any]) -> None:
        for r in event["memories"]:
            target = f" into {r['merged_into'][:8]}" if r["merged_into"] else ""
            held = " [yellow](flagged: held back from retrieval)[/]" if r["flagged"] else ""
            self.console.print(f"[bold cyan]write back[/]  memory {r['id'][:8]} {r['status']}{target}{held}")

    def on_credited(self, event: dict[str, Any]) -> None:
        self.console.print(f"[bold cyan]write back[/]  credited {len(event['ids'])} retrieved memories with "
                           f"{event['outcome']}")

    def on_reviewed(self, event: dict[str, Any]) -> None:
        counts = ", ".join(f"{len(event.get(k) or [])} {k}" for k in ("approved", "edited", "rejected"))
        self.console.print(f"[bold cyan]review[/]  {counts}")

    def on_warning(self, event: dict[str, Any]) -> None:
        self.console.print(f"[yellow]warning[/]  {escape(event['message'])}")
