"""Printing a run as it happens (the `on_event` hook of the graph) with rich."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape


class RichProgress:
    """Prints plan, retrieved memories with scores, each command, the verdict and the memories written."""

    def __init__(self, console: Console | None = None, command_chars: int = 160) -> None:
        self.console = console or Console()
        self.command_chars = command_chars

    def __call__(self, kind: str, payload: Any) -> None:
        handler = getattr(self, f"on_{kind}", None)
        if handler is not None:
            handler(payload)

    def on_plan(self, query: str) -> None:
        self.console.print(f"[bold cyan]plan[/]  {escape(query[:400])}")

    def on_retrieved(self, hits: list[dict[str, Any]]) -> None:
        if not hits:
            self.console.print("[bold cyan]retrieve[/]  no memories matched")
            return
        for n, hit in enumerate(hits, 1):
            domains = ",".join(hit["domains"]) or "-"
            self.console.print(f"[bold cyan]retrieve[/]  Memory {n}: {hit['type']} {hit['id'][:8]} from "
                               f"[magenta]{escape(domains)}[/] (task {','.join(hit['source_task_ids']) or '-'}) "
                               f"cosine={hit['similarity']:.3f} found by {hit['retriever']}")

    def on_step(self, step: Any) -> None:
        if step.tool == "submit":
            self.console.print(f"  [green]submit[/] {escape(step.action[: self.command_chars])}")
            return
        command = step.action if len(step.action) <= self.command_chars else step.action[: self.command_chars] + "…"
        first = command.splitlines()[0] if command else ""
        more = " …" if "\n" in command else ""
        code = "" if step.exit_code is None else f" [dim](exit {step.exit_code})[/]"
        self.console.print(f"  [green]$[/] {escape(first)}{more}{code}")

    def on_agent(self, result: Any) -> None:
        color = "green" if result.exit_status == "submitted" else "yellow"
        tokens = result.tokens.input + result.tokens.output
        rejected = f", {result.format_errors} malformed replies" if result.format_errors else ""
        error = f": {escape(result.error[:300])}" if result.error else ""
        self.console.print(f"[bold cyan]agent[/]  [{color}]{result.exit_status}[/] after {len(result.steps)} "
                           f"steps, {tokens} tokens{rejected}{error}")

    def on_distill_failed(self, failures: list[str]) -> None:
        for failure in failures:
            self.console.print(f"[bold cyan]distill[/]  [yellow]not distilled[/] {escape(failure[:300])}")

    def on_verdict(self, verdict: Any) -> None:
        color = {"pass": "green", "fail": "red"}.get(verdict.status.value, "yellow")
        self.console.print(f"[bold cyan]judge[/]  [{color}]{verdict.status.value.upper()}[/] (by {verdict.source})")
        if verdict.tests_modified:
            self.console.print(f"  [yellow]tests modified by the agent (restored before the check):[/] "
                               f"{escape(', '.join(verdict.tests_modified))}")

    def on_written(self, results: list[Any]) -> None:
        for r in results:
            target = f" into {r.merged_into[:8]}" if r.merged_into else ""
            self.console.print(f"[bold cyan]write back[/]  memory {r.id[:8]} {r.status}{target}")

    def on_warning(self, message: str) -> None:
        self.console.print(f"[yellow]warning[/]  {escape(message)}")
