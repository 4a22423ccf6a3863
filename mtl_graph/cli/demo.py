"""`mtl demo`: the whole pipeline offline on examples/tasks, with a scripted model replaying stored actions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

DEMO_ORDER = ("slugify", "primes", "csv-totals")
SCRIPT_FILE = "demo_script.json"


def examples_dir() -> Path:
    """examples/tasks next to the package (a source checkout), or in the working directory."""
    for base in (Path(__file__).resolve().parent.parent, Path.cwd()):
        candidate = base / "examples" / "tasks"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("examples/tasks not found: run `mtl demo` from a checkout of the project")


def run_demo(pool_location: str = ":memory:", sandbox: str = "auto", context: Any = None,
             console: Console | None = None, namespace: str | None = None) -> list[dict[str, Any]]:
    """Run the example tasks in order; each later task can retrieve memories of earlier ones (other domains).

    context holds the run settings (an MTLContext or a dict); without a model the tasks replay their scripts.
    namespace: the pool's (None: MTL_NAMESPACE, else the default)."""
    from mtl_graph.llm.scripted import ScriptedChatModel
    from mtl_graph.pipeline import build_mtl_graph
    from mtl_graph.config.names import MTLContext, as_context
    from mtl_graph.cli.progress import RichProgress, stream_run
    from mtl_graph.memory.pool.pool import MemoryPool
    from mtl_graph.core.task import Task

    console = console or Console()
    root = examples_dir()
    context = as_context(context) or MTLContext()
    model = context.model
    memory_type = context.memory_type or ("trajectory" if model is None else "insight")
    if model is None:
        console.print("[bold yellow]Offline demo:[/] the model is a [bold]scripted model[/] that replays the action "
                      f"scripts in {root}/*/{SCRIPT_FILE}. Everything else is real: commands run in the sandbox, "
                      "the tasks' unit tests judge each run, trajectory memories are distilled (no model call) and "
                      "written to an embedded Qdrant pool, and later tasks retrieve them across domains.\n")
    else:
        console.print(f"[bold]Live demo[/] with {model}, memory format {memory_type}.\n")
    rows = []
    with MemoryPool.open(pool_location, namespace=namespace) as pool:
        progress = RichProgress(console)
        for name in DEMO_ORDER:
            task = Task.from_dir(root / name)
            chat = model or ScriptedChatModel.from_script(root / name / SCRIPT_FILE)  # its plan and answers too
            graph = build_mtl_graph(chat, pool, memory_type=memory_type, hold_one_out=True, sandbox=sandbox,
                                    distill_formats=[memory_type])
            console.rule(f"[bold]{task.id}[/] (domain: {task.domain})")
            state = stream_run(graph, {"task": task}, progress, context=context)
            if state.get("error"):
                console.print(f"[red]error:[/] {state['error']}")
            rows.append({"task": task.id, "domain": task.domain, "verdict": (state.get("verdict") or {}).get("status"),
                         "retrieved": state.get("retrieved", []), "written": state.get("new_memory_ids", []),
                         "distill_failures": state.get("distill_failures", []), "error": state.get("error")})
        total = pool.count()
    table = Table("task", "domain", "verdict", "memories retrieved (domain, cosine)", "written",
                  title=f"demo summary — pool now holds {total} memories")
    for row in rows:
        got = ", ".join(f"{','.join(r['domains'])} {r['similarity']:.2f}" for r in row["retrieved"]) or "-"
        table.add_row(row["task"], row["domain"], str(row["verdict"] or row["error"]), got, str(len(row["written"])))
    console.print(table)
    if pool_location == ":memory:":
        console.print("[dim]The pool was temporary; pass --pool DIR to keep it and inspect it with "
                      "`mtl memories list --pool DIR`.[/]")
    return rows
