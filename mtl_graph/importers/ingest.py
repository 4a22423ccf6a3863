"""The ingest engine: logs -> trajectories -> verdicts -> memories -> pool, in parallel and resumable.

Resumability uses a ledger: a JSONL file of (content hash, format, memory id) lines, appended and flushed as
soon as a run's memories are in the pool. A ledger rather than a payload on the memories because (1) the pool
merges near-duplicates, so a memory cannot say which runs it was made from by content alone; (2) the memory
models are closed (extra fields are rejected); (3) keying by (run, format) lets a resume redo only the formats
that failed. For a directory pool the ledger lives *inside* the pool directory, so deleting the pool deletes
the ledger and the two can never disagree. In-memory and server pools get a ledger only when a path is given.
A run interrupted between the pool write and the ledger line is distilled again on resume; the pool's content
ids and near-duplicate merge absorb that repeat.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import nullcontext
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor, as_completed
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field

from mtl_graph.distill.distillers import DistillConfig, distill
from mtl_graph.importers import MAX_FILE_BYTES, BadRecordError, Loaded, NotARunError, load_many
from mtl_graph.importers.common import one_line
from mtl_graph.judging.judges import Judge, JudgeConfig, LLMJudge
from mtl_graph.redaction.redact import RedactionConfig, Redactor
from mtl_graph.llm.chat import chat_model, model_label
from mtl_graph.core.trajectory import INFRASTRUCTURE_EXIT_STATUSES, TokenUsage, Trajectory, Verdict, VerdictStatus
from mtl_graph.memory import formats as registry
from mtl_graph.memory.base import MemoryType
from mtl_graph.memory.engine.storage import DEFAULT_NAMESPACE

LEDGER_FILE = "ingest-ledger.jsonl"
Status = Literal["ingested", "skipped", "failed", "planned"]
Skip = Literal["in_pool", "same_file", "other_file", "infrastructure", "uncertain"]
"""Why a run was skipped: already in the pool (the ledger has it), a repeat of a run earlier in the same file or in
another file, ended by the infrastructure (nothing to learn), or judged uncertain with --skip-uncertain."""
ALREADY_INGESTED = "already ingested"


class IngestConfig(BaseModel):
    """What to ingest and how."""

    model_config = ConfigDict(extra="forbid")

    formats: list[MemoryType] = Field(default_factory=lambda: [MemoryType.INSIGHT], min_length=1)
    """Memory formats to make from each run."""
    domain: str | None = None
    """Domain label for runs whose log names none."""
    log_format: str | None = None
    """Force one log format instead of detecting it per file."""
    judge: bool = False
    """Judge every run with the LLM judge; False keeps labels that came with the logs (unlabelled runs are
    still judged when a model is available)."""
    skip_uncertain: bool = False
    """Skip runs whose verdict is uncertain instead of keeping them with outcome unknown."""
    concurrency: int = Field(default=4, ge=1, le=64)
    """Runs judged and distilled at the same time."""
    dry_run: bool = False
    """Import and plan only: no model calls, no pool writes, no ledger lines."""
    max_file_bytes: int = Field(default=MAX_FILE_BYTES, ge=1)
    """Larger log files are rejected."""
    distill: DistillConfig = Field(default_factory=DistillConfig)
    """Distiller settings."""
    judge_config: JudgeConfig = Field(default_factory=JudgeConfig)
    """LLM judge settings."""
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)
    """Secret redaction settings (extra patterns)."""


class RunRecord(BaseModel):
    """What happened to one run."""

    path: str
    """The log file."""
    line: int | None = None
    """The run's line in a JSONL log."""
    task_id: str
    """The run's task."""
    content_hash: str
    """The run's content hash."""
    status: Status
    """ingested / skipped / failed / planned (dry run)."""
    reason: str = ""
    """Why skipped or failed (or what a dry run would do)."""
    skip: Skip | None = None
    """Why skipped, as a kind a report can count."""
    outcome: str | None = None
    """The outcome the memories carry."""
    memory_ids: list[str] = Field(default_factory=list)
    """Ids of the memories written (or merged into)."""
    written: dict[str, int] = Field(default_factory=dict)
    """What the pool did with the run's memories: added / merged / identical / flagged counts."""
    usage: TokenUsage = Field(default_factory=TokenUsage)
    """Tokens spent judging and distilling."""


class FileFailure(BaseModel):
    """A log file that could not be imported."""

    path: str
    """The file."""
    reason: str
    """Why (names the line for JSONL)."""
    line: int | None = None
    """The line of a JSONL log when one record of it is bad (the file's other records are imported)."""


class IngestReport(BaseModel):
    """The outcome of one ingest."""

    files: int = 0
    """Log files read (bad and skipped ones included)."""
    runs: list[RunRecord] = Field(default_factory=list)
    """One record per run found."""
    file_failures: list[FileFailure] = Field(default_factory=list)
    """Files, or records of a JSONL log, that could not be imported (the file's other records still are)."""
    skipped_files: list[FileFailure] = Field(default_factory=list)
    """Files that hold no run (e.g. SWE-agent demonstrations): skipped, not failed."""
    interrupted: bool = False
    """The ingest was interrupted: the report holds the runs finished before it stopped."""
    log_bytes: int = 0
    """Bytes of log text read (every file found, bad ones included)."""
    seconds: float = 0.0
    """Wall time of the ingest: loading, judging, distilling and writing."""
    embedding_seconds: float = 0.0
    """The part of `seconds` the pool's embedder took (the rest is what the ingest itself costs)."""

    def throughput(self) -> dict[str, float]:
        """MB/s of log text over the whole ingest and before embedding (the embedder's time left out), memories
        written (added or merged) per second."""
        mb = self.log_bytes / 2**20
        own = self.seconds - self.embedding_seconds
        written = self.written()
        return {"mb_per_s": mb / self.seconds if self.seconds > 0 else 0.0,
                "mb_per_s_before_embedding": mb / own if own > 0 else 0.0,
                "memories_per_s": (written["added"] + written["merged"]) / self.seconds if self.seconds > 0 else 0.0}

    def count(self, status: Status) -> int:
        return sum(r.status == status for r in self.runs)

    def skipped(self, kind: Skip) -> list[RunRecord]:
        """The runs skipped for that reason."""
        return [r for r in self.runs if r.status == "skipped" and r.skip == kind]

    def written(self) -> dict[str, int]:
        """Memories added / merged / identical / flagged over every run: explains "N runs -> M memories"."""
        totals = dict.fromkeys(("added", "merged", "identical", "flagged"), 0)
        for run in self.runs:
            for status, n in run.written.items():
                totals[status] = totals.get(status, 0) + n
        return totals

    @property
    def usage(self) -> TokenUsage:
        return sum((r.usage for r in self.runs), TokenUsage())

    @property
    def ok(self) -> bool:
        """Nothing failed: every file imported and every run ingested, skipped or planned."""
        return not self.file_failures and self.count("failed") == 0


class IngestInterrupted(KeyboardInterrupt):
    """Ctrl-C during an ingest; ``report`` holds what finished (already in the pool and the ledger)."""

    def __init__(self, report: IngestReport, pending: int) -> None:
        super().__init__(f"ingest interrupted with {pending} runs not done")
        self.report, self.pending = report, pending


class Ledger:
    """The (run hash, format) pairs already in the pool; thread-safe, append-only."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._done: dict[str, set[str]] = {}
        if path is not None and path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    rec = json.loads(line)
                    self._done.setdefault(rec["hash"], set()).add(rec["format"])
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a line cut by a crash: that run is simply redone

    @classmethod
    def for_pool(cls, location: str, explicit: str | Path | None = None, namespace: str = DEFAULT_NAMESPACE) -> "Ledger":
        """The ledger inside a directory pool, at an explicit path, or in memory for other pools. A namespace other
        than the default has its own (ingest-ledger@NAME.jsonl): what one team ingested is still new to another."""
        if explicit is not None:
            return cls(Path(explicit))
        if location == ":memory:" or location.startswith(("http://", "https://")):
            return cls(None)
        name = LEDGER_FILE if namespace == DEFAULT_NAMESPACE else LEDGER_FILE.replace(".", f"@{namespace}.", 1)
        return cls(Path(location).expanduser() / name)

    def done(self, content_hash: str) -> set[str]:
        with self._lock:
            return set(self._done.get(content_hash, ()))

    def record(self, content_hash: str, task_id: str, entries: list[tuple[str, str]]) -> None:
        """Mark (format, memory id) pairs of a run as ingested, durably before returning."""
        at = datetime.now(timezone.utc).isoformat()
        lines = [json.dumps({"hash": content_hash, "format": fmt, "task_id": task_id, "memory_id": mid, "at": at})
                 for fmt, mid in entries]
        with self._lock:
            self._done.setdefault(content_hash, set()).update(fmt for fmt, _ in entries)
            if self.path is not None and lines:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a+b") as fh:
                    fh.seek(0, 2)
                    if fh.tell():  # a line cut by a crash must not swallow the next record
                        fh.seek(-1, 2)
                        if fh.read(1) != b"\n":
                            fh.write(b"\n")
                    fh.write(("\n".join(lines) + "\n").encode("utf-8"))
                    fh.flush()


class _Worker:
    """Judges, distils and stores one run at a time (shared by the thread pool)."""

    def __init__(self, pool: Any, model: Any, label: str | None, config: IngestConfig, ledger: Ledger,
                 judge: Judge | None) -> None:
        self.pool, self.model, self.label, self.config, self.ledger = pool, model, label, config, ledger
        self.redactor = Redactor(config.redaction)
        self.judge = judge or (LLMJudge(model, config.judge_config, self.redactor) if model is not None else None)
        self.stop = threading.Event()

    def verdict(self, run: Trajectory) -> tuple[Verdict, TokenUsage]:
        if run.verdict is not None and not self.config.judge:
            return run.verdict, TokenUsage()
        if self.judge is None:
            return Verdict(status=VerdictStatus.UNCERTAIN, reason="unlabelled and no judge"), TokenUsage()
        if isinstance(self.judge, LLMJudge):
            return self.judge.judge_with_usage(run)
        return self.judge.judge(run), TokenUsage()

    def __call__(self, item: Loaded, wanted: list[MemoryType]) -> RunRecord:
        if self.stop.is_set():
            raise CancelledError("ingest interrupted")
        try:
            return self.run(item, wanted)
        except Exception:
            raise
        except BaseException:  # an interrupt: queued runs must not start after it
            self.stop.set()
            raise

    def run(self, item: Loaded, wanted: list[MemoryType]) -> RunRecord:
        run = item.trajectory
        rec = RunRecord(path=str(item.path), line=item.line, task_id=run.task.id, content_hash=run.content_hash(),
                        status="failed")
        verdict, rec.usage = self.verdict(run)
        rec.outcome = verdict.outcome.value
        if verdict.is_error:  # a judge that could not judge: the run is kept out, and judged again next time
            rec.status, rec.skip, rec.reason = "skipped", "infrastructure", infrastructure_reason(verdict.reason)
            return rec
        if verdict.status == VerdictStatus.UNCERTAIN and self.config.skip_uncertain:
            rec.status, rec.skip, rec.reason = "skipped", "uncertain", f"uncertain verdict ({verdict.reason})"
            return rec
        result = distill(run.model_copy(update={"verdict": verdict}), wanted, self.model,
                         config=self.config.distill, redactor=self.redactor, distill_model=self.label)
        rec.usage += result.total_usage
        added = self.pool.add_many(result.memories) if result.memories else []
        rec.memory_ids = [a.merged_into or a.id for a in added]
        rec.written = added.counts if added else {}
        self.ledger.record(rec.content_hash, run.task.id,
                           [(m.type, a.merged_into or a.id) for m, a in zip(result.memories, added)])
        if result.failures:
            rec.reason = "; ".join(f"{f.format.value}: {f.reason}" for f in result.failures)
        else:
            rec.status = "ingested"
            rec.reason = "; ".join(result.warnings)
        return rec


def ingest(paths: Iterable[str | Path], pool: Any, model: Any = None, config: IngestConfig | None = None, *,
           ledger: Ledger | None = None, judge: Judge | None = None, model_name: str | None = None,
           on_start: Callable[[int], None] | None = None,
           on_run: Callable[[RunRecord], None] | None = None) -> IngestReport:
    """Ingest logs into pool (a MemoryPool; may be None for a dry run).

    model is a chat model or a "provider:model" string (needed for model-written formats and judging).
    model_name names the distilling model in provenance (default: the model string or the model's name).
    on_start gets the number of runs to process; on_run gets each run's record as it finishes.
    """
    started, embedded = time.perf_counter(), getattr(pool, "embedding_seconds", 0.0)
    report = _ingest(paths, pool, model, config, ledger, judge, model_name, on_start, on_run)
    report.seconds = time.perf_counter() - started
    report.embedding_seconds = getattr(pool, "embedding_seconds", 0.0) - embedded
    return report


def _ingest(paths: Iterable[str | Path], pool: Any, model: Any, config: IngestConfig | None, ledger: Ledger | None,
            judge: Judge | None, model_name: str | None, on_start: Callable[[int], None] | None,
            on_run: Callable[[RunRecord], None] | None) -> IngestReport:
    config = config or IngestConfig()
    needs_model = config.judge or registry.needs_model(config.formats)
    if needs_model and model is None and not config.dry_run:
        raise ValueError("a model is needed to judge or to distil " + ", ".join(registry.model_written(config.formats)))
    if pool is None and not config.dry_run:
        raise ValueError("a pool is needed unless dry_run is set")
    ledger = ledger or Ledger.for_pool(getattr(pool, "location", ":memory:"))
    loaded, errors = load_many(paths, config.log_format, domain=config.domain, max_bytes=config.max_file_bytes)
    report = IngestReport(
        files=len({str(item.path) for item in loaded} | {e.path for e in errors}),
        file_failures=[FileFailure(path=e.path, reason=str(e), line=e.line if isinstance(e, BadRecordError) else None)
                       for e in errors if not isinstance(e, NotARunError)],
        skipped_files=[FileFailure(path=e.path, reason=str(e)) for e in errors if isinstance(e, NotARunError)],
        log_bytes=_size({str(item.path) for item in loaded} | {e.path for e in errors}))
    todo, report.runs = _plan(loaded, config, ledger)
    if on_start:
        on_start(len(todo))
    if not todo:
        return report

    label = model_name or (model if isinstance(model, str) else model_label(model))
    worker = _Worker(pool, chat_model(model) if model is not None else None, label, config, ledger, judge)
    before = len(report.runs)  # the runs skipped or planned without a worker
    reported: set[Future[RunRecord]] = set()
    # the pool's statistics record changes once for the whole ingest, not twice per run (a kill leaves it pending)
    held = pool.statistics_held() if hasattr(pool, "statistics_held") else nullcontext()
    with held, ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="mtl-ingest") as executor:
        futures: dict[Future[RunRecord], Loaded] = {executor.submit(worker, item, wanted): item
                                                    for item, wanted in todo}
        try:
            for future in as_completed(futures):
                reported.add(future)
                _report_run(future, futures[future], report, on_run)
        except BaseException as exc:
            worker.stop.set()
            executor.shutdown(wait=True, cancel_futures=True)  # runs in flight finish and reach the ledger
            if not isinstance(exc, KeyboardInterrupt):
                raise
            for future, item in futures.items():  # runs that finished while the interrupt was handled
                if future not in reported and future.done() and not future.cancelled() \
                        and not isinstance(future.exception(), (KeyboardInterrupt, CancelledError)):
                    _report_run(future, item, report, on_run)
            report.interrupted = True
            raise IngestInterrupted(report, len(todo) - (len(report.runs) - before)) from None
    return report


def _size(paths: Iterable[str]) -> int:
    total = 0
    for path in paths:
        try:
            total += Path(path).stat().st_size
        except OSError:  # gone since it was read: its runs are counted, its size is not
            continue
    return total


def infrastructure_reason(detail: str) -> str:
    return f"not a fair try: the run ended in an infrastructure error ({detail or 'no detail'})"


def _infrastructure_error(run: Trajectory) -> str | None:
    """Why the run says nothing about the agent (its verdict is `error`, or the provider ended it), or None."""
    if run.verdict is not None and run.verdict.is_error:
        return infrastructure_reason(run.verdict.reason)
    if run.exit_status in INFRASTRUCTURE_EXIT_STATUSES:
        return infrastructure_reason(f"exit status {run.exit_status}")
    return None


def _where(item: Loaded) -> str:
    return f"line {item.line}" if item.line is not None else str(item.path)


def _plan(loaded: list[Loaded], config: IngestConfig,
          ledger: Ledger) -> tuple[list[tuple[Loaded, list[MemoryType]]], list[RunRecord]]:
    """(the runs to distil with the formats each still needs, the runs skipped or planned without a worker).

    A run the ledger has is "in the pool" before it is a repeat: a rerun of the same log says so of every run."""
    todo: list[tuple[Loaded, list[MemoryType]]] = []
    records: list[RunRecord] = []
    first: dict[str, Loaded] = {}
    for item in loaded:
        h = item.trajectory.content_hash()
        base = RunRecord(path=str(item.path), line=item.line, task_id=item.trajectory.task.id, content_hash=h,
                         status="skipped")
        wanted = [f for f in config.formats if f.value not in ledger.done(h)]
        earlier = first.setdefault(h, item)
        if (why := _infrastructure_error(item.trajectory)) is not None:
            base.skip, base.reason = "infrastructure", why
        elif not wanted:
            base.skip, base.reason = "in_pool", ALREADY_INGESTED
        elif earlier is not item and earlier.path == item.path:
            base.skip, base.reason = "same_file", f"same run as {_where(earlier)} of the same file"
        elif earlier is not item:
            base.skip, base.reason = "other_file", f"same run as in {earlier.path}"
        elif config.dry_run:
            base.status, base.reason = "planned", "would distil " + ", ".join(f.value for f in wanted)
        else:
            todo.append((item, wanted))
            continue
        records.append(base)
    return todo, records


def _report_run(future: Future[RunRecord], item: Loaded, report: IngestReport,
                on_run: Callable[[RunRecord], None] | None) -> None:
    try:
        rec = future.result()
    except Exception as exc:  # one broken run (pool error, model crash) must not sink the batch
        rec = RunRecord(path=str(item.path), line=item.line, task_id=item.trajectory.task.id,
                        content_hash=item.trajectory.content_hash(), status="failed", reason=one_line(exc))
    report.runs.append(rec)
    if on_run:
        on_run(rec)
