"""``mtl eval``, ``mtl report``, ``mtl eval-learning`` and ``mtl eval-baselines`` as typer command functions (heavy
imports happen inside them; app.py registers them). They call the evaluation harness (mtl_graph.bench), which never
imports the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from mtl_graph.cli.common import USAGE, NamespaceOption, fail
from mtl_graph.cli.options import with_run_settings

ALL = "all"
LIST = "list"
PROTOCOL_SETTINGS = ("model", "memory_type", "top_k", "online", "exclude_domains", "hold_one_out", "exclude_task_ids",
                     "only_ids", "judge_also", "namespace")
"""Run settings the evaluation sets itself, per condition; the CLI gives `mtl eval` the others as flags, and
eval_cmd receives them as `run`."""


def _split(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def _formats(value: str) -> list:
    from mtl_graph.memory.base import MemoryType, memory_type_of

    if value.strip().lower() == ALL:
        return list(MemoryType)
    if value.strip().lower() in ("", "none"):
        return []
    return [memory_type_of(v) for v in _split(value)]


def eval_cmd(
    suites: str = typer.Option(
        ..., "--suites", help="Comma list: humaneval, exercism:PATH, jsonl:PATH, dir:PATH, swebench, "
                              "livecodebench:PATH, terminalbench:PATH, replicationbench:PATH, mlgym:PATH; "
                              "`--suites list` shows each with what it needs."),
    out: Optional[Path] = typer.Option(None, "--out", help="Results directory (created; a rerun resumes it)."),
    model: Optional[str] = typer.Option(None, "--model", help="PROVIDER:MODEL for the graph-backed agent."),
    agent: Optional[str] = typer.Option(None, "--agent", help="Offline agent instead of a model: oracle or noop."),
    formats: str = typer.Option(ALL, "--formats", help="Memory formats for phase 3: all, none, or a comma list."),
    k: int = typer.Option(1, "--k", min=1, help="Pass@k."),
    samples: Optional[int] = typer.Option(
        None, "--samples", min=1, help="Attempts per task and condition (>= k; default k)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Seeded sample of tasks per suite."),
    seed: int = typer.Option(42, "--seed", help="Seed of sampling and scaling subsets."),
    pool_fractions: str = typer.Option(
        "", "--pool-fractions", help="Scaling: pool fractions below 1, e.g. 0.25,0.5,0.75."),
    source_domains: str = typer.Option("", "--source-domains", help="Scaling: numbers of source domains, e.g. 1,2."),
    source_model: Optional[str] = typer.Option(
        None, "--source-model", help="Cross-model: use only memories from this model's runs."),
    holdout: bool = typer.Option(True, "--holdout/--no-holdout", help="Hold-one-out by domain."),
    top_k: int = typer.Option(3, "--top-k", min=1, help="Memories retrieved per run."),
    concurrency: int = typer.Option(1, "--concurrency", min=1, help="Runs in parallel."),
    server: Optional[str] = typer.Option(None, "--server", help="URL of a LangGraph server running the MTL graph."),
    pool: Optional[str] = typer.Option(
        None, "--pool", help="Memory pool of phases 2-3 (default OUT/pool; with --server, the pool the server "
                             "reads, MTL_POOL by default: a Qdrant URL or a directory the server has not opened)."),
    namespace: NamespaceOption = None,
    sandbox: str = typer.Option("auto", "--sandbox", help="Where agent commands and checks run: auto (bwrap when available), bwrap, local, docker."),
    price_in: float = typer.Option(0.0, "--price-in", help="USD per million input tokens."),
    price_out: float = typer.Option(0.0, "--price-out", help="USD per million output tokens."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bars per phase."),
    judge_accuracy: bool = typer.Option(
        False, "--judge-accuracy", help="Also run the LLM judge where tests decide, to report its accuracy."),
    languages: Optional[str] = typer.Option(
        None, "--languages", help="Exercism suites: only these languages, e.g. python,rust."),
    run: Any = None,
) -> None:
    """Run the protocol: zero-shot, distill, memory transfer per format; then write the report.

    Run settings the protocol does not vary (agent limits, model options, re-retrieval) are flags, shared by every
    run of the graph runner (MTL_* variables do not apply: the command line says what ran)."""
    from pydantic import ValidationError

    from mtl_graph.bench.harness import run_eval
    from mtl_graph.bench.records import EvalConfig
    from mtl_graph.bench.report import render_report
    from mtl_graph.bench.runners import RunnerUnavailable, make_runner
    from mtl_graph.bench.results import StoreError
    from mtl_graph.bench.suites import SuiteError, filter_languages
    from mtl_graph.memory.engine.location import PoolError

    if suites.strip().lower() == LIST:
        list_suites()
        return
    if out is None:
        fail("--out is required: the results directory", USAGE)
    if model and not agent:  # a bad model string is one line now, not after the suites are loaded and sampled
        from mtl_graph.llm.chat import ModelNotConfigured, check_model

        try:
            check_model(model, getattr(run, "model_options", None))
        except ModelNotConfigured as exc:
            fail(str(exc), USAGE)
    try:
        specs = filter_languages(_split(suites), _split(languages)) if languages is not None else _split(suites)
        config = EvalConfig(
            suites=specs, runner=agent or "graph", model=model, formats=_formats(formats), k=k,
            samples=samples, seed=seed, limit=limit, pool_fractions=[float(x) for x in _split(pool_fractions)],
            source_domain_counts=[int(x) for x in _split(source_domains)], source_model=source_model,
            holdout=holdout, top_k=top_k, price_input_per_mtok=price_in, price_output_per_mtok=price_out)
        # A local eval keeps its own pool next to its results, so a resumed phase 3 finds phase 2's memories.
        pool = pool or (None if server else str(out / "pool"))
        runner, distill = make_runner(agent=agent, model=model, server=server, sandbox=sandbox, pool=pool,
                                      run_log=out / "runs.jsonl", formats=[f.value for f in config.formats],
                                      judge_also=judge_accuracy, context=run, namespace=namespace)
        try:
            summary = run_eval(config, runner, str(out), distill=distill, concurrency=concurrency,
                               progress=progress)
        finally:
            getattr(runner, "close", lambda: None)()  # the graph runner's pool handle
    except (RunnerUnavailable, SuiteError, StoreError, PoolError) as exc:
        fail(str(exc), USAGE)
    except ValidationError as exc:
        fail("invalid options: " + "; ".join(e["msg"] for e in exc.errors()), USAGE)
    except ValueError as exc:  # malformed numbers or format names in comma lists
        fail(str(exc), USAGE)
    except KeyboardInterrupt:
        typer.echo(f"interrupted; rerun the same command to resume from {out}", err=True)
        raise typer.Exit(code=130) from None
    for spec, reason in summary.skipped_suites.items():
        typer.echo(f"skipped suite {spec}: {reason}")
    if summary.stopped:
        typer.echo(f"stopped before distillation: {summary.stopped}", err=True)
    elif config.formats and not summary.pool_size:
        typer.echo("note: phase 3 ran with an empty pool, so no memory was retrieved"
                   + (f" (offline agent {agent}: no distiller)" if agent else ""), err=True)
    paths = render_report(out)
    ran = sum(summary.ran.values())
    typer.echo(f"{ran} runs ({sum(summary.resumed.values())} resumed, {summary.errors} errors, "
               f"{summary.leaks} provenance violations); report: {paths['md']}")
    if summary.errors or summary.leaks:
        raise typer.Exit(code=1)


eval_command = with_run_settings(from_env=False, exclude=PROTOCOL_SETTINGS)(eval_cmd)
"""`mtl eval`: eval_cmd with the run settings it does not set itself as flags."""


def list_suites() -> None:
    """The suites `--suites` takes: the spec, and what each reads and needs on this machine."""
    from mtl_graph.bench.suites import SUITE_INFO

    width = max(len(spec) for spec, _ in SUITE_INFO.values())
    typer.echo(f"{'suite'.ljust(width)}  needs")
    for spec, needs in SUITE_INFO.values():
        typer.echo(f"{spec.ljust(width)}  {needs}")


def report_cmd(out: Path = typer.Argument(..., help="Results directory of `mtl eval`.")) -> None:
    """Re-render report.md, report.json and the plots of a results directory."""
    from mtl_graph.bench.report import render_report
    from mtl_graph.bench.results import StoreError

    try:
        paths = render_report(out)
    except StoreError as exc:
        fail(str(exc), USAGE)
    typer.echo(f"report: {paths['md']}")


def eval_learning_cmd(
    sequence: str = typer.Option("both", "--sequence", help="Scripted sequence: negative, positive or both."),
    out: Path = typer.Option(..., "--out", help="Directory for learning.md, learning.json, learning.png."),
    tasks: int = typer.Option(30, "--tasks", min=1, max=40, help="Tasks in each sequence."),
    seed: int = typer.Option(7, "--seed", help="Seed of the scripted agent's coin flips."),
    sandbox: str = typer.Option("auto", "--sandbox", help="auto, bwrap, local or docker."),
    min_cited: int = typer.Option(5, "--min-cited", min=1, help="Cited runs before a memory can be quarantined."),
) -> None:
    """The learning condition: the same task sequence with a frozen pool and with the online loop, pass rate
    over the sequence (docs/evaluation.md)."""
    from mtl_graph.bench.learning import run_and_report

    names = ["negative", "positive"] if sequence == "both" else [sequence]
    try:
        paths = run_and_report(names, out, tasks, seed, sandbox, min_cited)
    except ValueError as exc:
        fail(str(exc), USAGE)
    typer.echo(paths["md"].read_text(encoding="utf-8").rstrip())
    typer.echo(f"report: {paths['md']} (plot: {paths['png']})")


def eval_baselines_cmd(
    out: Path = typer.Option(..., "--out", help="Directory for baselines.md, baselines.json, baselines.png."),
    condition: list[str] = typer.Option([], "--condition", help="reasoningbank, awm, mtl, mtl+lifecycle or "
                                        "mtl+tool (repeat it; default: the first four)."),
    suite: list[str] = typer.Option([], "--suite", help="A suite spec (mtl eval --suites list), its tasks in order "
                                    "(repeat it); default: the scripted sequence."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="provider:model or scripted:FILE.json for the "
                                        "agent and every stage (with --suite)."),
    pool: Optional[Path] = typer.Option(None, "--pool", help="Starting pool directory, copied for every condition "
                                        "and pass (with --suite; default: empty)."),
    tasks: int = typer.Option(12, "--tasks", help="Scripted: tasks in the sequence (1-40); suites: tasks per suite."),
    attempts: int = typer.Option(1, "--attempts", help="Passes of the sequence (the k of pass@k)."),
    top_k: int = typer.Option(3, "--top-k", help="Memories retrieved per run, for every condition."),
    sandbox: str = typer.Option("auto", "--sandbox", help="auto, bwrap, local or docker."),
    start: str = typer.Option("positive", "--start", help="Scripted: the starting pool, positive or transfer "
                              "(also the verify lesson from another domain)."),
) -> None:
    """The baselines (ReasoningBank, AWM) and MTL over one task sequence: pass@k beside the pool and the extra
    model calls and tokens per run (docs/evaluation.md, Baselines)."""
    from mtl_graph.bench.baselines import run_and_report

    try:
        paths = run_and_report(out, condition, suites=suite, model=model, pool=pool, tasks=tasks,
                               attempts=attempts, top_k=top_k, sandbox=sandbox, start=start)
    except ValueError as exc:  # an unknown condition, a suite that cannot run, no usable model: one line
        fail(str(exc), USAGE)
    typer.echo(paths["md"].read_text(encoding="utf-8").rstrip())
    typer.echo(f"report: {paths['md']} (plot: {paths['png']})")
