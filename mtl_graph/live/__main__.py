"""`python -m mtl_graph.live`: the example tasks through the whole pipeline with a real local model."""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from mtl_graph.live.server import LiveServerConfig, LiveServerError, LocalModelServer


def speed(server: LocalModelServer, max_tokens: int = 64) -> dict[str, float]:
    """Prompt and generation tokens per second of one short request (llama.cpp reports its own timings)."""
    body = json.dumps({"model": server.config.alias, "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": "Explain in two sentences what a unit test is."}]})
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=body.encode(),
                                     headers={"content-type": "application/json"})
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=600) as response:
        timings = json.load(response).get("timings", {})
    return {"prompt_tokens_per_s": float(timings.get("prompt_per_second", 0.0)),
            "generated_tokens_per_s": float(timings.get("predicted_per_second", 0.0)),
            "probe_s": time.monotonic() - started}


def run(args: argparse.Namespace, console: Console) -> list[dict[str, Any]]:
    from mtl_graph.cli.demo import run_demo
    from mtl_graph.config.names import MTLContext

    log = Path(args.log)
    log.parent.mkdir(parents=True, exist_ok=True)
    config = LiveServerConfig(log_file=log, max_answer_tokens=args.max_tokens)
    summary = []
    with LocalModelServer(config) as server:
        console.print(f"[bold]llama.cpp server[/] at {server.base_url} as {server.model} (log: {log})")
        rates = speed(server)
        console.print(f"speed: {rates['prompt_tokens_per_s']:.1f} prompt tokens/s, "
                      f"{rates['generated_tokens_per_s']:.1f} generated tokens/s")
        options = {"base_url": server.base_url, "max_tokens": args.max_tokens, "timeout": args.model_timeout}
        for action_format in args.formats:
            context = MTLContext(model=server.model, memory_type="insight", model_options=options,
                                 action_format=action_format, step_limit=args.steps, wall_time_limit=args.time_limit)
            console.rule(f"[bold]agent with {action_format} actions")
            started = time.monotonic()
            rows = run_demo(context=context, console=console)
            summary.append({"action_format": action_format, "wall_s": time.monotonic() - started, "rows": rows,
                            **rates})
    return summary


def report(summary: list[dict[str, Any]], console: Console) -> None:
    table = Table("agent actions", "tasks", "verdicts", "memories written", "rejected by the quality gate",
                  "other distill failures", "errors", "wall s", title="live tier")
    for part in summary:
        rows = part["rows"]
        failures = [f for row in rows for f in row["distill_failures"]]
        junk = [f for f in failures if "quality gate" in f]
        verdicts = ", ".join(str(row["verdict"]) for row in rows)
        table.add_row(part["action_format"], str(len(rows)), verdicts, str(sum(len(r["written"]) for r in rows)),
                      str(len(junk)), str(len(failures) - len(junk)), str(sum(1 for r in rows if r["error"])),
                      f"{part['wall_s']:.0f}")
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mtl_graph.live", description=__doc__)
    parser.add_argument("--formats", nargs="+", default=["tool_calls", "text"], choices=["tool_calls", "text"],
                        help="Agent action formats to run (default: both).")
    parser.add_argument("--steps", type=int, default=4, help="Agent step limit per task (default 4).")
    parser.add_argument("--time-limit", type=float, default=900.0, help="Agent seconds per task (default 900).")
    parser.add_argument("--max-tokens", type=int, default=256, help="Tokens per model answer (default 256).")
    parser.add_argument("--model-timeout", type=float, default=600.0, help="Seconds per model call (default 600).")
    parser.add_argument("--log", default=".mtl/live-server.log", help="Server log file.")
    args = parser.parse_args(argv)
    console = Console()
    try:
        summary = run(args, console)
    except LiveServerError as exc:
        console.print(f"[red]live tier unavailable:[/] {exc}")
        return 2
    report(summary, console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
