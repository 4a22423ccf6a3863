"""The person in the loop of `mtl run`: approving each command (`--approve-commands`) and reviewing the memories a
run proposes (`--review-memories`), asked on the terminal while the run waits on an in-memory checkpointer."""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any, Callable

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.prompt import Prompt

BODY_CHARS = 1200
"""How much of a proposed memory's text is shown."""
NO_TERMINAL = ("{what} asks questions on the terminal, but stdin is not a terminal: run it interactively, or "
               "without {what}")


def stdin_is_terminal() -> bool:
    """Whether questions can be asked (a person at a terminal is on stdin)."""
    return sys.stdin is not None and sys.stdin.isatty()


class Asker:
    """Asks the person at the terminal; an answer that never comes (end of input, Ctrl-C) counts as "no"."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.unanswered = False

    def choose(self, question: str, choices: tuple[str, ...]) -> str | None:
        """One of `choices` (asked again until it is one), or None when no answer comes."""
        try:
            return Prompt.ask(question, choices=list(choices), console=self.console)
        except (EOFError, KeyboardInterrupt):
            self.unanswered = True
            self.console.print()
            return None


class MemoryReviewer:
    """Shows each proposed memory (format, outcome, its text) and asks approve / reject, or all at once."""

    CHOICES = ("y", "n", "a", "r")

    def __init__(self, asker: Asker) -> None:
        self.asker = asker

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        memories = request.get("memories") or []
        console = self.asker.console
        console.print(f"[bold cyan]review[/]  {len(memories)} memories proposed (verdict: {request.get('verdict')}); "
                      "y = approve, n = reject, a = approve this and the rest, r = reject this and the rest")
        if request.get("error"):  # an earlier answer could not be applied (not one of ours: said by the graph)
            console.print(f"[yellow]review[/]  {escape(str(request['error']))}")
        decisions: list[str] = []
        for n, raw in enumerate(memories, 1):
            console.print(self._panel(raw, f"{n}/{len(memories)}"))
            answer = self.asker.choose(f"Write memory {n}?", self.CHOICES)
            if answer in ("a", "r", None):
                decisions += ["approve" if answer == "a" else "reject"] * (len(memories) - n + 1)
                break
            decisions.append("approve" if answer == "y" else "reject")
        return {"decisions": decisions}

    @staticmethod
    def _panel(raw: Any, number: str) -> Panel:
        """The memory as a person reads it; one that is not a valid memory is shown as it came, to be judged too."""
        from pydantic import ValidationError

        from mtl_graph.memory.base import parse_memory

        try:
            memory = parse_memory(raw)
        except (ValidationError, TypeError, ValueError):
            title, body = f"{number} not a valid memory", json.dumps(raw, indent=1, default=str)
        else:
            title, body = f"{number} {memory.type} ({memory.outcome.value}) {memory.label()}", memory.body()
        body = body if len(body) <= BODY_CHARS else body[:BODY_CHARS] + "…"
        return Panel(escape(body), title=escape(title), title_align="left")


class CommandApprover:
    """Shows each command the agent is about to run and asks y / n; "n" stops the run before it runs."""

    def __init__(self, asker: Asker) -> None:
        self.asker = asker

    def __call__(self, calls: list[dict[str, Any]]) -> str | None:
        """None to run the calls, or the reason the run stops."""
        for call in calls:
            shown = call["args"].get("command") if call["name"] == "bash" else call["args"]
            self.asker.console.print(Panel(escape(str(shown)), title=f"the agent wants to run: {call['name']}",
                                           title_align="left", border_style="yellow"))
            if self.asker.choose("Run it?", ("y", "n")) != "y":
                summary = str(shown).splitlines()[0][:120] if str(shown) else ""
                how = "no answer" if self.asker.unanswered else "declined"
                return f"stopped before running {call['name']} ({how}): {summary}"
        return None


def drive(graph: Any, graph_input: dict[str, Any], stream: Callable[..., dict[str, Any]], *,
          review: Callable[[dict[str, Any]], Any] | None, approve: Callable[[list[dict[str, Any]]], str | None] | None,
          **kwargs: Any) -> dict[str, Any]:
    """Stream the run on a new thread; at each pause ask (`approve` before commands, `review` before write back)
    and resume, until the run ends. Returns the run's output."""
    from langgraph.types import Command

    from mtl_graph.pipeline.approval import decline, pending_calls

    config = {"configurable": {"thread_id": f"mtl-run-{uuid.uuid4().hex}"}}
    payload: Any = graph_input
    while True:
        state = stream(graph, payload, config=config, **kwargs)
        snapshot = graph.get_state(config)
        if not snapshot.next:
            return state
        requests = [i.value for t in snapshot.tasks for i in t.interrupts
                    if isinstance(i.value, dict) and i.value.get("kind") == "review_memories"]
        calls = pending_calls(graph, config) if not requests else []
        if requests and review is not None:
            payload = Command(resume=review(requests[0]))
        elif calls and approve is not None:
            reason = approve(calls)
            if reason is not None:
                decline(graph, config, reason)
            payload = None
        else:  # a pause nobody here can answer: say where, rather than loop
            raise RuntimeError(f"the run paused at {', '.join(snapshot.next)} with nothing to ask")
