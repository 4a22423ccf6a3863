"""`mtl run` and `mtl demo`: one task, or the offline demo, through the MTL graph with the run settings as flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from mtl_graph.cli.common import JsonOption, PoolOption, check_model, console, fail, open_pool, settings
from mtl_graph.cli.options import with_run_settings

SandboxOption = Annotated[Optional[str], typer.Option("--sandbox", help="Where commands run: auto, bwrap, local or docker. \\[env: MTL_SANDBOX]")]
ApproveOption = Annotated[bool, typer.Option(
    "--approve-commands", help="Ask before each command the agent runs (y runs it, n stops the run).")]


@with_run_settings(from_env=True)
def run_task(
    task: Annotated[Path, typer.Argument(help="Task directory (task.md, optional task.json and files/).")],
    pool: PoolOption = None,
    sandbox: SandboxOption = None,
    json_out: JsonOption = False,
    approve_commands: ApproveOption = False,
    paper: Annotated[bool, typer.Option("--paper", help="The research's retrieval: top-k by similarity, no "
                                        "re-ranking, floor or quarantine (same as --lifecycle off).")] = False,
    run: Any = None,
) -> None:
    """Run one task through plan -> retrieve -> execute -> judge -> distill -> write back, streaming progress.

    Every run setting is a flag here, else its MTL_* environment variable, else the graph's default. With
    --approve-commands or --review-memories the run waits for your answers on the terminal."""
    if paper:
        run = run.model_copy(update={"lifecycle": "off"})
    if not run.model:
        from mtl_graph.llm.chat import NO_MODEL

        fail(NO_MODEL)
    from mtl_graph.cli import human

    asks = [flag for flag, on in (("--approve-commands", approve_commands),
                                  ("--review-memories", run.review_memories)) if on]
    if asks and not human.stdin_is_terminal():
        fail(human.NO_TERMINAL.format(what=" and ".join(asks)))
    from mtl_graph.core.task import Task, TaskError

    try:
        loaded = Task.from_dir(task)
    except TaskError as exc:
        fail(str(exc))
    check_model(run.model, run.model_options)
    from langgraph.checkpoint.memory import InMemorySaver

    from mtl_graph.pipeline import build_mtl_graph
    from mtl_graph.cli.progress import RichProgress, stream_run

    # Answers are waited for with the run's state in an in-memory checkpointer, on the run's own thread.
    paused = {"checkpointer": InMemorySaver(), "interrupt_before_tools": approve_commands} if asks else {}
    render = None if json_out else RichProgress()
    with open_pool(pool, run.namespace) as opened:  # --namespace is a run setting (also Studio's, MTL_NAMESPACE)
        graph = build_mtl_graph(None, opened, sandbox=sandbox or settings().sandbox, **paused)
        if asks:
            asker = human.Asker(console(stderr=json_out))  # --json keeps stdout for the result
            state = human.drive(graph, {"task": loaded}, stream_run, render=render, context=run,
                                review=human.MemoryReviewer(asker), approve=human.CommandApprover(asker))
        else:
            state = stream_run(graph, {"task": loaded}, render, context=run)
    if json_out:
        from mtl_graph.pipeline.state import OUTPUT_FIELDS  # what a run hands back, less its transcript

        result = {key: state.get(key) for key in OUTPUT_FIELDS if key != "trajectory"}
        typer.echo(json.dumps(result, indent=2, default=str))
    if state.get("error"):
        fail(state["error"])
    if asks and asker.unanswered:
        fail("stopped: a question got no answer (nothing was written without one)")


@with_run_settings(from_env=False)
def demo(
    pool: Annotated[str, typer.Option("--pool", help="Pool location (default: a temporary embedded pool).")] = ":memory:",
    sandbox: SandboxOption = None,
    run: Any = None,
) -> None:
    """The whole pipeline on examples/tasks, offline: a scripted model, real sandbox, real tests, real Qdrant pool.

    The run settings are flags as in `mtl run` (not read from MTL_*: the demo runs the same everywhere); without
    --model the tasks replay their stored scripts, with trajectory memories (insight with a live model)."""
    if run.review_memories:
        fail("--review-memories asks questions: use it with `mtl run` (the demo runs unattended)")
    if run.model:
        check_model(run.model, run.model_options)
    from mtl_graph.cli.demo import run_demo
    from mtl_graph.memory.engine.embeddings import EmbeddingError
    from mtl_graph.memory.pool.pool import PoolError

    try:
        rows = run_demo(pool_location=pool, sandbox=sandbox or "auto", context=run, namespace=run.namespace)
    except (PoolError, EmbeddingError, FileNotFoundError) as exc:
        fail(str(exc))
    if any(row["error"] for row in rows):
        raise typer.Exit(1)
