"""The project's own run log: JSONL, one record per line; `record: "run"` lines are runs, other kinds are skipped.

Read line by line from the bytes (streamed from the file: the log grows with every run and has no size limit), so
one bad line (malformed, not UTF-8, a crash's cut last line) is reported
with its true line number and costs only itself. Lines are split on "\\n" alone: the log is written with
``ensure_ascii=False``, so U+2028 and friends may sit unescaped inside a string, where ``str.splitlines`` would
cut a record in two.

A run that ended with an ``error`` (the provider failed, the workspace could not be made, a person declined a
command) did not get a fair try: `mtl run` counts its outcome as ``error``, and so does the import, by giving it
the ``error`` verdict with that message (an ingest skips it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from pydantic import ValidationError

from mtl_graph.core.trajectory import Trajectory, Verdict
from mtl_graph.importers.common import BadJSON, BadRecordError, FileImport, one_line, parse_json
from mtl_graph.importers.registry import Importer, register

RUNLOG = "mtl-runlog"

_KNOWN = set(Trajectory.model_fields)
MAX_LISTED_LINES = 20
"""Bad lines of one file reported one by one; the rest are counted in one more error."""


def is_run_record(obj: Any) -> bool:
    """A run-log line holding a run (the task object and its steps)."""
    return isinstance(obj, dict) and isinstance(obj.get("task"), dict) and ("steps" in obj or "record" in obj)


def looks_like_runlog(lines: list[str]) -> bool:
    """JSONL whose readable head lines are objects, one of them a run or a tagged record (bad lines tolerated)."""
    objs = []
    for line in [ln for ln in lines if ln.strip()][:50]:
        try:
            objs.append(parse_json(line))
        except BadJSON:
            continue
    return bool(objs) and all(isinstance(o, dict) for o in objs) and any(
        is_run_record(o) or "record" in o for o in objs)


def parse_runlog(lines: Iterable[bytes], path: Path) -> FileImport:
    """Every run of the log, and one error per line that is not a readable record.

    lines are the file's lines with their line ends (an open binary file streams; the log has no size limit).
    """
    result = FileImport(path)
    unlisted = 0
    for n, chunk in enumerate(lines, 1):
        try:
            run = _record(chunk.rstrip(b"\r\n"), n, path, cut=not chunk.endswith(b"\n"))
        except BadRecordError as exc:
            if len(result.errors) < MAX_LISTED_LINES:
                result.errors.append(exc)
            else:
                unlisted += 1
            continue
        if run is not None:
            result.runs.append(run)
            result.lines.append(n)
    if unlisted:  # e.g. a file forced to be read as a run log that is not one: not one line per line
        result.errors.append(BadRecordError(path, f"{unlisted} more bad lines after line {result.errors[-1].line}"))
    return result


def _record(chunk: bytes, n: int, path: Path, *, cut: bool) -> Trajectory | None:
    try:
        line = chunk.decode("utf-8-sig" if n == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise BadRecordError(path, f"not UTF-8 text (invalid byte at column {exc.start + 1})", line=n) from None
    if not line.strip():
        return None
    try:
        obj = parse_json(line)
    except BadJSON as exc:
        reason = "the line is cut short (the writer stopped mid-line)" if cut else exc.reason
        raise BadRecordError(path, reason, line=n) from None
    if not isinstance(obj, dict):
        raise BadRecordError(path, "expected a JSON object per line", line=n)
    if obj.get("record", "run") != "run":
        return None  # other record kinds (sessions, events, summaries) share the log
    try:
        run = Trajectory.model_validate({k: v for k, v in obj.items() if k in _KNOWN})
    except ValidationError as exc:
        raise BadRecordError(path, f"not a run record: {one_line(exc)}", line=n) from None
    except RecursionError:
        raise BadRecordError(path, "record nested too deeply to read", line=n) from None
    error = obj.get("error")
    if error and not (run.verdict is not None and run.verdict.is_error):
        # one line for the report, every word kept
        run = run.model_copy(update={"verdict": Verdict.infrastructure_error(" ".join(str(error).split()))})
    return run


@register
class RunLogImporter(Importer):
    """The JSONL log `mtl run` appends every run to."""

    name = RUNLOG
    summary = "the JSONL run log `mtl run` writes"
    order = 10
    jsonl = True

    def sniff(self, data: Any) -> bool:
        return is_run_record(data)  # a one-line log whose line is longer than the head read to sniff_lines

    def sniff_lines(self, lines: list[str]) -> bool:
        return looks_like_runlog(lines)

    def parse_lines(self, lines: Iterable[bytes], path: Path) -> FileImport:
        return parse_runlog(lines, path)
