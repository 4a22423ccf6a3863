"""What the adapters of released benchmarks share: hidden payloads passed to a check, the sandbox's Python, GPUs.

A check's hidden data (test cases, expected answers, test files) never enters the agent's workspace: it is packed
(zlib, then base85) into the check command's stdin script. Past a command line's size limit the packed data goes
into a check-only file instead (`Task.check_files`, clean_room.py): the clean room alone has it, never the
workspace or its snapshot, and the check deletes it before any graded code runs in that room.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import shutil
import subprocess
import zlib
from importlib import resources
from typing import Any, NamedTuple

from mtl_graph.bench.suites.base import SuiteError, hidden_python_check

PROBE_TIMEOUT_S = 30.0
CHECK_ONLY_DIR = ".mtl_check_only"
PAYLOAD_FILE = f"{CHECK_ONLY_DIR}/payload.b85"
"""Where a payload too large for the command line lies in the clean room (relative to it: the check's cwd)."""
_UNPACK = "import base64 as _b, json as _j, zlib as _z\nPAYLOAD = _j.loads(_z.decompress(_b.b85decode({blob!r})))\n"
# Read, then deleted before the call: the graded solution runs in this room and must not find its expected outputs.
_UNPACK_FILE = f"""\
import base64 as _b, json as _j, os as _o, zlib as _z
with open({PAYLOAD_FILE!r}, "rb") as _fh:
    _blob = _fh.read()
_o.unlink({PAYLOAD_FILE!r})
try:
    _o.rmdir({CHECK_ONLY_DIR!r})
except OSError:
    pass
PAYLOAD = _j.loads(_z.decompress(_b.b85decode(_blob)))
del _blob
"""


class TaskSkip(SuiteError):
    """One task of a suite cannot run here; the suite lists it as skipped with this reason."""


class HiddenCheck(NamedTuple):
    """A check command and the check-only files it reads (Task.check and Task.check_files)."""

    command: str
    """The check command (its script on stdin)."""
    check_files: dict[str, str]
    """Check-only files for the clean room: the packed payload when the command line cannot hold it."""

    def task_fields(self) -> dict[str, Any]:
        """The Task fields it sets: ``Task(..., **hidden.task_fields())``."""
        return {"check": self.command, "check_files": self.check_files}


def packed_check(script: str, payload: Any, call: str) -> HiddenCheck:
    """A check running ``script`` with ``PAYLOAD`` (any JSON value) defined, then ``call``, the script on stdin; the
    payload is inline, or, past the command line's limit, a check-only file the script reads and deletes.

    Raises TaskSkip when even the script without its payload is too large for a command line."""
    blob = base64.b85encode(zlib.compress(json.dumps(payload).encode("utf-8"), 9)).decode("ascii")
    check, files = hidden_python_check(f"{script}\n\n{_UNPACK.format(blob=blob)}\n{call}\n")
    if not files:
        return HiddenCheck(check, {})
    check, files = hidden_python_check(f"{script}\n\n{_UNPACK_FILE}\n{call}\n")
    if files:
        raise TaskSkip("its check script is too large to pass outside the workspace, and in the workspace the agent "
                       "could read it")
    return HiddenCheck(check, {PAYLOAD_FILE: blob})


def yaml_problem(exc: Exception) -> str:
    """A YAML error in one line: what is wrong and where."""
    mark = getattr(exc, "problem_mark", None)
    return f"{getattr(exc, 'problem', None) or exc}" + (f" at line {mark.line + 1}" if mark is not None else "")


def relative_to_container_dir(text: str, directory: str) -> str:
    """Absolute paths under an upstream container's directory made relative to it, for a harness whose working
    directory stands in for that one (``/app/x`` -> ``./x``, ``/app`` -> ``.``; ``/application`` is left alone)."""
    pattern = re.compile(rf"(?<![\w./-]){re.escape(directory.rstrip('/'))}(/|(?![\w.-]))")
    return pattern.sub(lambda m: "./" if m.group(1) == "/" else ".", text)


def script(name: str) -> str:
    """The text of a stdlib-only check script shipped beside the suites."""
    return resources.files("mtl_graph.bench.suites.checks").joinpath(name).read_text(encoding="utf-8")


@functools.cache
def _sandbox_python() -> str | None:
    from mtl_graph.judging.check_env import trusted_python

    return trusted_python()


_PROBE = """\
import importlib.metadata as m, importlib.util as u, json, sys
names = json.loads(sys.argv[1])
def has(n):
    try:
        m.distribution(n)
        return True
    except m.PackageNotFoundError:
        pass
    try:
        return u.find_spec(n.replace("-", "_")) is not None
    except (ImportError, ValueError):
        return False
print(json.dumps([n for n in names if not has(n)]))
"""


@functools.cache
def _missing(names: tuple[str, ...]) -> tuple[str, ...]:
    python = _sandbox_python()
    if python is None:
        return names
    try:
        proc = subprocess.run([python, "-I", "-c", _PROBE, json.dumps(list(names))], capture_output=True,
                              text=True, timeout=PROBE_TIMEOUT_S, cwd="/")
        return tuple(json.loads(proc.stdout)) if proc.returncode == 0 else names
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
        return names


def missing_python(names: list[str]) -> list[str]:
    """Of these distributions or top-level modules, those the checks' interpreter (``python3``) lacks."""
    wanted = tuple(sorted({n.strip() for n in names if n and n.strip()}))
    return list(_missing(wanted)) if wanted else []


def python_reason(names: list[str], where: str) -> str | None:
    """Why a task needing these Python packages cannot run here, or None."""
    if _sandbox_python() is None:
        return "no python3 on PATH to run it"
    missing = missing_python(names)
    return f"needs Python packages {', '.join(missing)} ({where})" if missing else None


@functools.cache
def sandbox_python_version() -> str | None:
    """The version (``3.11.7``) of the checks' interpreter, or None when there is none or it does not answer."""
    python = _sandbox_python()
    if python is None:
        return None
    try:
        proc = subprocess.run([python, "-I", "-c", "import platform; print(platform.python_version())"],
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, cwd="/")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def gpu_reason() -> str | None:
    """Why a GPU task cannot run here, or None (nvidia-smi lists a GPU)."""
    if shutil.which("nvidia-smi") is None:
        return "needs a GPU (no nvidia-smi on PATH)"
    try:
        out = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return "needs a GPU (nvidia-smi did not answer)"
    return None if out.returncode == 0 and out.stdout.strip() else "needs a GPU (nvidia-smi lists none)"


@functools.cache
def docker_reason() -> str | None:
    """Why Docker cannot run a task here, or None (a reachable engine)."""
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    try:
        ok = subprocess.run(["docker", "info"], capture_output=True, timeout=PROBE_TIMEOUT_S).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return None if ok else "no Docker engine reachable (docker info failed)"
