"""`mtl ingest`: turn agent logs into memories. Only typer and the standard library load at import time."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.models import OptionInfo

from mtl_graph.cli.common import USAGE, NamespaceOption, fail
from mtl_graph.cli.format_options import formats_option

_FORMATS_HELP = "Comma-separated memory formats: {formats_and}."


class _LogFormatsHelp(OptionInfo):
    """The --format option, its help naming the registered importers when read (the CLI is built): importing them
    when this module loads would load pydantic for every `mtl` command."""

    @property  # type: ignore[override]
    def help(self) -> str:
        from mtl_graph.importers import importers

        return ("Force the log format (default: detect it from the content): "
                + "; ".join(f"{imp.name}" + (f" ({imp.summary})" if imp.summary else "") for imp in importers()) + ".")

    @help.setter
    def help(self, value: str) -> None:  # typer's constructor assigns the help it was given (none here)
        pass


def _log_format_option() -> Any:
    option = typer.Option("--format")
    option.__class__ = _LogFormatsHelp
    return option


def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Log files or directories (every file inside is imported).")],
    formats: Annotated[str, formats_option("--formats", help=_FORMATS_HELP)] = "insight",
    model: Annotated[Optional[str], typer.Option("--model", help="PROVIDER:MODEL for judging and distilling.")] = None,
    domain: Annotated[Optional[str], typer.Option("--domain", help="Domain label for runs whose log names none.")] = None,
    pool: Annotated[Optional[str], typer.Option("--pool", help="Pool location: directory, :memory: or http(s) URL.")] = None,
    namespace: NamespaceOption = None,
    judge: Annotated[bool, typer.Option("--judge/--keep-labels",
                                        help="Re-judge every run with the LLM judge, or keep the logs' labels.")] = False,
    skip_uncertain: Annotated[bool, typer.Option("--skip-uncertain",
                                                 help="Skip runs judged uncertain (default: keep as outcome unknown).")] = False,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=64, help="Runs processed in parallel.")] = 4,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Import and plan only: no model calls, no writes.")] = False,
    log_format: Annotated[Optional[str], _log_format_option()] = None,
    ledger: Annotated[Optional[Path], typer.Option("--ledger",
                                                   help="Ledger of ingested runs (default: inside a directory pool).")] = None,
) -> None:
    """Distil agent logs into memories and add them to the pool (resumable; exits 1 if anything failed)."""
    from pydantic import ValidationError
    from rich.console import Console

    from mtl_graph.importers import format_names, iter_log_files
    from mtl_graph.importers.ingest import IngestConfig, Ledger
    from mtl_graph.memory.base import first_validation_error, memory_type_of
    from mtl_graph.config.environment import get_settings

    console = Console(stderr=True)

    settings = get_settings()
    try:
        kinds = list(dict.fromkeys(memory_type_of(f) for f in formats.split(",") if f.strip()))
        if log_format is not None and log_format not in format_names():
            raise ValueError(f"unknown log format {log_format!r}; expected one of: {', '.join(format_names())}")
        config = IngestConfig(formats=kinds, domain=domain, log_format=log_format, judge=judge,
                              skip_uncertain=skip_uncertain, concurrency=concurrency, dry_run=dry_run)
    except (ValueError, ValidationError) as exc:
        fail(f"invalid option: {first_validation_error(exc)}" if isinstance(exc, ValidationError) else str(exc), USAGE)
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        fail(f"no such file or directory: {', '.join(missing)}", USAGE)
    if next(iter_log_files(paths), None) is None:
        fail(f"no log files in {', '.join(map(str, paths))}", USAGE)
    model = model or settings.model
    location = pool or settings.pool
    namespace = namespace or settings.namespace or "default"  # MTL_NAMESPACE, the run setting
    from mtl_graph.importers.ingest import IngestInterrupted

    try:
        report = _run(paths, location, model, config, Ledger.for_pool(location, ledger, namespace), console,
                      namespace)
    except IngestInterrupted as stop:  # Ctrl-C: what finished is in the pool and the ledger
        _print_report(stop.report, Console())
        console.print(f"[yellow]interrupted:[/] {stop.pending} runs not done; "
                      "run the same command again to resume (runs already ingested are skipped)")
        raise typer.Exit(130) from None
    except KeyboardInterrupt:  # before the runs started, or a second Ctrl-C while the runs in flight finished
        console.print("[yellow]interrupted:[/] runs that finished are in the pool and its ledger; "
                      "run the same command again to resume")
        raise typer.Exit(130) from None
    _print_report(report, Console())
    if not report.ok:
        raise typer.Exit(1)


def _run(paths, location, model, config, ledger, console, namespace):  # type: ignore[no-untyped-def]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from mtl_graph.importers.ingest import ingest as run_ingest
    from mtl_graph.llm.chat import chat_model
    from mtl_graph.memory import formats as registry

    chat = None
    if model is not None and not config.dry_run:
        try:
            chat = chat_model(model)
        except Exception as exc:  # init_chat_model raises ValueError/ImportError for unknown providers
            fail(f"cannot use model {model!r}: {exc}", USAGE)
    elif not config.dry_run and (config.judge or registry.needs_model(config.formats)):
        fail(f"--model is required to judge or to distil {registry.listed(registry.model_written(registry.names()))}"
             " memories", USAGE)
    opened = None if config.dry_run else _open_pool(location, namespace)
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=False) as progress:
            bar = progress.add_task("ingesting", total=None)
            report = run_ingest(paths, opened, chat, config, ledger=ledger, model_name=model,
                                on_start=lambda n: progress.update(bar, total=n),
                                on_run=lambda rec: progress.advance(bar))
    finally:
        if opened is not None:
            opened.close()
    return report


def _open_pool(location: str, namespace: str) -> Any:
    from mtl_graph.memory.engine.embeddings import EmbeddingError
    from mtl_graph.memory.pool.pool import MemoryPool, PoolError

    try:
        return MemoryPool.open(location, namespace=namespace)
    except (PoolError, EmbeddingError, OSError) as exc:
        fail(f"cannot open pool {location}: {exc}", USAGE)


def _print_report(report, console) -> None:  # type: ignore[no-untyped-def]
    from rich.table import Table

    summary = Table(title="mtl ingest")
    summary.add_column("")
    summary.add_column("count", justify="right")
    summary.add_row("log files", str(report.files))
    summary.add_row("runs found", str(len(report.runs)))
    for status in ("ingested", "planned", "skipped", "failed"):
        if report.count(status) or status in ("ingested", "failed"):
            summary.add_row(status, str(report.count(status)))
    summary.add_row("bad files or lines", str(len(report.file_failures)))
    if report.skipped_files:
        summary.add_row("files that are not runs", str(len(report.skipped_files)))  # demonstrations, predictions
    written = report.written()
    if any(written.values()):  # what "N runs -> M memories" is made of
        for status in ("added", "merged", "identical", "flagged"):
            summary.add_row(f"memories {status}", str(written[status]))
    usage = report.usage
    summary.caption = f"tokens: {usage.input} in / {usage.output} out"
    console.print(summary)
    speed = report.throughput()
    console.print(f"throughput: {report.log_bytes / 2**20:.1f} MB of logs in {report.seconds:.1f} s, "
                  f"{speed['mb_per_s']:.2f} MB/s ({speed['mb_per_s_before_embedding']:.2f} MB/s before embedding), "
                  f"{speed['memories_per_s']:.1f} memories/s", soft_wrap=True)
    _print_problems(report, console)


def _print_problems(report, console) -> None:  # type: ignore[no-untyped-def]
    """One line per failure, never folded, so a path can be copied (and grepped) whole; skips that only repeat
    what is known (in the pool, a repeated run, an infrastructure error) are counted in one line per kind, not one
    per run (a rerun would otherwise print one per run)."""
    from rich.markup import escape

    def line(status: str, path: str, task_id: str, reason: str) -> None:
        where = "" if reason.startswith(str(path)) else f"{path}{f' [{task_id}]' if task_id else ''}: "
        console.print(f"[red]{status}[/]: {escape(where + reason)}", soft_wrap=True)

    def runs(n: int) -> str:
        return f"{n} {'run' if n == 1 else 'runs'}"

    for r in report.runs:
        if r.status == "failed" or (r.status == "skipped" and r.skip in (None, "uncertain")):
            line(r.status, _at(r.path, r.line), r.task_id, r.reason)
    for f in report.file_failures:
        line("bad line" if f.line is not None else "bad file", f.path, "", f.reason)
    counted = {"in_pool": "already in the pool (ingested before), skipped",
               "same_file": "{repeat} an earlier run of the same file, skipped",
               "other_file": "{repeat} another file's run, skipped"}
    for kind, says in counted.items():
        if n := len(report.skipped(kind)):
            console.print(f"{runs(n)} {says.format(repeat='repeats' if n == 1 else 'repeat')}")
    by_reason: dict[str, list[str]] = {}
    for r in report.skipped("infrastructure"):  # not failures: the run itself says the agent got no fair try
        by_reason.setdefault(r.reason, []).append(_at(r.path, r.line))
    _grouped(console, by_reason, lambda n: f"{runs(n)} skipped")
    by_reason = {}
    for f in report.skipped_files:
        by_reason.setdefault(f.reason.removeprefix(f"{f.path}: "), []).append(f.path)
    # one line per kind: a directory of demonstrations is not 100 lines
    _grouped(console, by_reason, lambda n: f"{n} {'file' if n == 1 else 'files'} skipped")


def _at(path: str, line: int | None) -> str:
    return f"{path}:{line}" if line is not None else path


def _grouped(console, by_reason: dict[str, list[str]], counted) -> None:  # type: ignore[no-untyped-def]
    from rich.markup import escape

    for reason, where in by_reason.items():
        more = f" and {len(where) - 3} more" if len(where) > 3 else ""
        console.print(f"{counted(len(where))}, {escape(reason)}: {escape(', '.join(where[:3]))}{more}",
                      soft_wrap=True)
