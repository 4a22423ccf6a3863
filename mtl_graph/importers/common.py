"""What every importer shares: the errors, reading a log file safely, JSON parsing, and the small text helpers."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mtl_graph.core.trajectory import TokenUsage, Trajectory, Verdict, VerdictStatus
from mtl_graph.memory.base import first_validation_error
from mtl_graph.core.errors import MTLError

MAX_FILE_BYTES = 64 * 1024 * 1024
_SHELL_TOOLS = {"bash", "shell", "sh", "terminal", "run", "execute", "exec", "run_command", "execute_bash"}
_COMMAND_ARGS = ("command", "cmd", "script", "code")


class TrajectoryImportError(MTLError, ValueError):
    """A log file (or one record of it) could not be imported; the message names the file (and line)."""

    def __init__(self, path: str | Path, message: str, line: int | None = None) -> None:
        self.path, self.line, self.reason = str(path), line, message
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


class BadRecordError(TrajectoryImportError):
    """One record (line) of a JSONL log could not be imported; the file's other records are."""


class UnknownFormatError(TrajectoryImportError):
    """The content is none of the known log formats."""


class NotARunError(TrajectoryImportError):
    """A well-formed file that holds no run to learn from (e.g. a SWE-agent demonstration): skipped, not failed."""


@dataclass
class FileImport:
    """What one file gave: its runs, and the records that could not be imported (the rest still are)."""

    path: Path
    runs: list[Trajectory] = field(default_factory=list)
    errors: list[TrajectoryImportError] = field(default_factory=list)
    skipped: NotARunError | None = None
    lines: list[int] = field(default_factory=list)
    """For a JSONL log, the line of each run (a report can point at the record); empty for one JSON document."""


@dataclass
class Loaded:
    """One imported trajectory and the file it came from."""

    path: Path
    trajectory: Trajectory
    line: int | None = None
    """The run's line in a JSONL log."""


# --- reading --------------------------------------------------------------------------------------------------
HEAD_BYTES = 64 * 1024
"""How much of a file is read to recognise a JSONL run log before streaming it."""


def log_head(path: Path) -> bytes:
    """The first bytes of a log file, or a clear error for missing, directory, empty and binary files."""
    if path.is_dir():
        raise TrajectoryImportError(path, "is a directory (pass it as a path to import every file inside)")
    if not path.exists():
        raise TrajectoryImportError(path, "no such file")
    if not path.is_file():
        raise TrajectoryImportError(path, "not a regular file")
    try:
        with path.open("rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError as exc:
        raise TrajectoryImportError(path, f"cannot read ({exc.strerror})") from None
    if not head:
        raise TrajectoryImportError(path, "empty file")
    if b"\x00" in head[:8192]:
        raise TrajectoryImportError(path, "binary file, not a text log")
    return head


def read_log_bytes(path: Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The file's bytes, or a clear error for missing, directory, empty, huge and binary files."""
    log_head(path)
    size = path.stat().st_size
    if size > max_bytes:
        raise TrajectoryImportError(path, f"file too large ({size} bytes; the limit is {max_bytes})")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TrajectoryImportError(path, f"cannot read ({exc.strerror})") from None


def decode_utf8(path: Path, raw: bytes) -> str:
    """Strict UTF-8 text (a BOM is dropped); a bad byte is reported with its line."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise TrajectoryImportError(path, f"not UTF-8 text (invalid byte at offset {exc.start})", line=line) from None


def read_log_text(path: Path, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The file's text, or a clear error for missing, empty, huge, binary or non-UTF-8 files."""
    text = decode_utf8(path, read_log_bytes(path, max_bytes))
    if not text.strip():
        raise TrajectoryImportError(path, "empty file")
    return text


class BadJSON(MTLError, ValueError):
    """Text that is not JSON, with a one-line reason and the line it fails on."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        self.reason, self.line = reason, line
        super().__init__(reason)


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _scrub(obj: Any) -> Any:
    """Lone UTF-16 surrogates (JSON allows "\\ud800"; UTF-8 cannot hold it) replaced by U+FFFD."""
    if isinstance(obj, str):
        return _LONE_SURROGATE.sub("\ufffd", obj)
    if isinstance(obj, list):
        return [_scrub(v) for v in obj]
    if isinstance(obj, dict):
        return {_scrub(k): _scrub(v) for k, v in obj.items()}
    return obj


def parse_json(text: str) -> Any:
    """json.loads with its two failure modes (syntax, nesting too deep for the parser) as one BadJSON; lone
    surrogates escaped in the text are replaced, so a run is not lost for one unencodable character."""
    try:
        obj = json.loads(text)
        return _scrub(obj) if _ESCAPED_SURROGATE.search(text) else obj
    except json.JSONDecodeError as exc:
        raise BadJSON(f"malformed JSON ({exc.msg} at column {exc.colno})", exc.lineno) from None
    except RecursionError:
        raise BadJSON("JSON nested too deeply to read") from None


def one_line(exc: BaseException) -> str:
    """An exception as one line: pydantic errors summarised, others cut at their first line."""
    if isinstance(exc, ValidationError):
        return first_validation_error(exc)
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{exc.__class__.__name__}: {first}" if first else exc.__class__.__name__


# --- small helpers shared by the parsers ----------------------------------------------------------------------
def text_of(content: Any) -> str:
    """Message content as text (OpenAI/Anthropic content-part lists flattened)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else str(p.get("text") or "") for p in content if isinstance(p, (str, dict))]
        return "\n".join(p for p in parts if p)
    return "" if content is None else str(content)


def count(value: Any, where: str) -> int:
    """A token count as an int: missing is 0, integral numbers and digit strings are accepted, the rest refused."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        raise ValueError(f"{where} is not a token count ({value!r})")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise ValueError(f"{where} is not a token count ({str(value)[:40]!r})")


def usage_of(usage: Any, where: str, in_keys: tuple[str, ...] = ("prompt_tokens", "input_tokens"),
             out_keys: tuple[str, ...] = ("completion_tokens", "output_tokens")) -> TokenUsage:
    """Token usage from an OpenAI- or Anthropic-style usage dict."""
    if not isinstance(usage, dict):
        return TokenUsage()

    def pick(keys: tuple[str, ...]) -> int:
        key = next((k for k in keys if usage.get(k) is not None), keys[0])
        return count(usage.get(key), f"{where}.{key}")

    return TokenUsage(input=pick(in_keys), output=pick(out_keys))


_EXIT_RE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>|^(?:exit[ _]code|exit status|return ?code)\s*[:=]?\s*(-?\d+)",
                      re.I | re.M)


def exit_code_of(observation: str) -> int | None:
    """The exit code an observation reports, if it reports one."""
    m = _EXIT_RE.search(observation)
    return int(m.group(1) or m.group(2)) if m else None


def render_call(name: str, args: dict[str, Any]) -> str:
    """A tool call as an action: the command itself for shell tools, else name(json args)."""
    for key in _COMMAND_ARGS:
        if isinstance(args.get(key), str) and (name.lower() in _SHELL_TOOLS or len(args) == 1):
            return args[key]
    return f"{name}({json.dumps(args, ensure_ascii=False, sort_keys=True)})"


def given_verdict(*sources: Any) -> Verdict | None:
    """A label that came with the log (resolved / success / passed), if any."""
    for src in sources:
        if not isinstance(src, dict):
            continue
        for key in ("resolved", "success", "passed", "solved"):
            if isinstance(src.get(key), bool):
                status = VerdictStatus.PASS if src[key] else VerdictStatus.FAIL
                return Verdict(status=status, reason=f"log label {key}={src[key]}", source="given")
    return None


def stem(path: Path) -> str:
    """The file name without the log suffixes agents use (``.traj.json``, ``.traj``, ``.jsonl``, ``.json``)."""
    name = path.name
    for suffix in (".traj.json", ".traj", ".jsonl", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def dig(obj: Any, *keys: str) -> Any:
    """obj[k1][k2]..., or None where a level is missing or not a dict."""
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj
