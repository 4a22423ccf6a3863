"""Detecting a log's format from its content and importing files, strictly (first problem raises) or leniently
(every good run, one error per bad file or record)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Iterator

from mtl_graph.core.trajectory import Trajectory
from mtl_graph.importers.common import (HEAD_BYTES, MAX_FILE_BYTES, BadJSON, FileImport, Loaded,
                                                   NotARunError, TrajectoryImportError, UnknownFormatError, decode_utf8,
                                                   log_head, one_line, parse_json, read_log_bytes)
from mtl_graph.importers.registry import (Importer, detect_document, detect_lines, file_patterns,
                                                     format_names, get_importer, reads_file_name)


def _detect(text: str) -> Importer | None:
    try:
        return detect_document(parse_json(text))
    except BadJSON:
        return detect_lines(text.split("\n"))


def detect_format(text: str) -> str | None:
    """The format name of a log's text, or None when it is none of the known ones."""
    found = _detect(text)
    return found.name if found is not None else None


def _walk(paths: Iterable[str | Path]) -> Iterator[tuple[Path, bool]]:
    """(file, found in a directory): the files named, and under the directories named the files some registered
    importer declares it reads (`Importer.file_patterns`).

    Hidden directories and memory pool directories (a pool kept beside the logs holds JSON files of its own) are
    not searched; a hidden file is read only when a pattern for hidden names (Aider's ``.aider.chat.history.md``)
    matches it."""
    from mtl_graph.memory.engine.location import META_FILE

    patterns = file_patterns()  # read once per search: every name of the walk is matched against them
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            yield path, False
            continue
        if (path / META_FILE).is_file():
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (Path(root, d) / META_FILE).is_file())
            for name in sorted(files):
                if reads_file_name(name, patterns):
                    yield Path(root, name), True


def iter_log_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    """The files named, and under each directory named the files a registered importer reads (sorted; hidden
    directories skipped, hidden files unless an importer names them)."""
    return (path for path, _ in _walk(paths))


def _finish(runs: list[Trajectory], fmt: str, domain: str | None) -> list[Trajectory]:
    out = []
    for t in runs:
        update: dict[str, Any] = {"source_format": t.source_format or fmt}
        if domain and t.task.domain == "default":
            update["task"] = t.task.model_copy(update={"domain": domain})
        out.append(t.model_copy(update=update))
    return out


def _stream(path: Path, importer: Importer, domain: str | None) -> FileImport:
    """A JSONL log read line by line: a bad line (bytes included) costs only itself."""
    with path.open("rb") as fh:
        result = importer.parse_lines(fh, path)
    result.runs = _finish(result.runs, importer.name, domain)
    if not result.runs and not result.errors:
        raise TrajectoryImportError(path, "no runs in the file")
    return result


def _unknown(path: Path) -> UnknownFormatError:
    return UnknownFormatError(path, f"unknown log format (expected one of: {', '.join(format_names())})")


def _import(path: Path, format: str | None, domain: str | None, max_bytes: int) -> FileImport:
    forced = get_importer(format) if format is not None else None
    if format is not None and forced is None:
        raise TrajectoryImportError(path, f"unknown format {format!r}; expected one of: {', '.join(format_names())}")
    head = log_head(path)
    complete = head.split(b"\n")[:-1] if len(head) == HEAD_BYTES else head.split(b"\n")
    found = forced or detect_lines([ln.decode("utf-8", "replace") for ln in complete])
    if found is not None and found.jsonl:
        return _stream(path, found, domain)
    raw = read_log_bytes(path, max_bytes)
    loose = raw.decode("utf-8-sig", errors="replace")
    if not loose.strip():
        raise TrajectoryImportError(path, "empty file")
    found = forced or _detect(loose)
    if found is not None and found.jsonl:  # a JSONL log whose first line is longer than the head
        return _stream(path, found, domain)
    text = decode_utf8(path, raw)
    if found is None and text.lstrip()[:1] not in ("{", "["):
        raise _unknown(path)
    try:
        data = parse_json(text)
    except BadJSON as exc:
        raise TrajectoryImportError(path, exc.reason, line=exc.line) from None
    if found is None:
        raise _unknown(path)
    try:
        runs = found.parse(data, path)
    except TrajectoryImportError:
        raise
    except (ValueError, TypeError, AttributeError, KeyError) as exc:  # pydantic's ValidationError is a ValueError
        raise TrajectoryImportError(path, f"invalid {found.name} log ({one_line(exc)})") from None
    if not runs:
        raise TrajectoryImportError(path, "no runs in the file")
    return FileImport(path, runs=_finish(runs, found.name, domain))


def import_file(path: str | Path, format: str | None = None, *, domain: str | None = None,
                max_bytes: int = MAX_FILE_BYTES) -> FileImport:
    """Import one log file leniently: never raises for bad input; problems are in ``errors`` / ``skipped``."""
    path = Path(path)
    try:
        return _import(path, format, domain, max_bytes)
    except NotARunError as exc:
        return FileImport(path, skipped=exc)
    except TrajectoryImportError as exc:
        return FileImport(path, errors=[exc])
    except RecursionError:
        return FileImport(path, errors=[TrajectoryImportError(path, "nested too deeply to import")])
    except Exception as exc:  # a log shape no parser foresaw must cost this file only, never the batch
        return FileImport(path, errors=[TrajectoryImportError(path, f"cannot import ({one_line(exc)})")])


def load_file(path: str | Path, format: str | None = None, *, domain: str | None = None,
              max_bytes: int = MAX_FILE_BYTES) -> list[Trajectory]:
    """Import one log file strictly: its first problem (a bad record, or "not a run") raises."""
    result = import_file(path, format, domain=domain, max_bytes=max_bytes)
    if result.skipped is not None:
        raise result.skipped
    if result.errors:
        raise result.errors[0]
    return result.runs


def load_trajectories(path: str | Path, format: str | None = None, *, domain: str | None = None,
                      max_bytes: int = MAX_FILE_BYTES) -> list[Trajectory]:
    """Import a file, or every file of a directory; the first problem raises."""
    return [t for f in iter_log_files([path]) for t in load_file(f, format, domain=domain, max_bytes=max_bytes)]


def load_many(paths: Iterable[str | Path], format: str | None = None, *, domain: str | None = None,
              max_bytes: int = MAX_FILE_BYTES) -> tuple[list[Loaded], list[TrajectoryImportError]]:
    """Import files and directories leniently: every good run, and one error per bad file or record.

    Files that are not runs come back as `NotARunError` among the errors, so a caller can report them as skipped
    rather than failed: SWE-agent demonstrations, and JSON files of no known format found in a directory (the
    predictions and results agents write beside their logs); a file named explicitly must be a log.
    """
    loaded: list[Loaded] = []
    errors: list[TrajectoryImportError] = []
    for f, found in _walk(paths):
        result = import_file(f, format, domain=domain, max_bytes=max_bytes)
        lines = result.lines if len(result.lines) == len(result.runs) else [None] * len(result.runs)
        loaded.extend(Loaded(f, t, line) for t, line in zip(result.runs, lines))
        if found and len(result.errors) == 1 and isinstance(result.errors[0], UnknownFormatError):
            result.errors, result.skipped = [], NotARunError(f, "not a run: no known log format")
        errors.extend(result.errors)
        if result.skipped is not None:
            errors.append(result.skipped)
    return loaded, errors
