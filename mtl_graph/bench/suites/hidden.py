"""What the adapters of released benchmarks share: hidden payloads passed to a check, the sandbox's Python, GPUs.

A check's hidden data (test cases, expected answers, test files) never enters the agent's workspace: it is packed
(zlib, then base85) into the check command's stdin script. The command line has a size limit, and past it the only
place left would be the workspace, so such a task is skipped with the reason instead of leaking its tests.
"""

from __future__ import annotations

import base64
import functools
import json
import shutil
import subprocess
import zlib
from importlib import resources
from typing import Any

from mtl_graph.bench.suites.base import SuiteError, hidden_python_check

PROBE_TIMEOUT_S = 30.0
_UNPACK = "import base64 as _b, json as _j, zlib as _z\nPAYLOAD = _j.loads(_z.decompress(_b.b85decode({blob!r})))\n"


class TaskSkip(SuiteError):
    """One task of a suite cannot run here; the suite lists it as skipped with this reason."""


def packed_check(script: str, payload: Any, call: str) -> str:
    """A check command running ``script`` with ``PAYLOAD`` (any JSON value) defined, then ``call``, all on stdin.

    Raises TaskSkip when the packed script is too large for a command line."""
    blob = base64.b85encode(zlib.compress(json.dumps(payload).encode("utf-8"), 9)).decode("ascii")
    check, files = hidden_python_check(f"{script}\n\n{_UNPACK.format(blob=blob)}\n{call}\n")
    if files:
        raise TaskSkip(f"its hidden tests are too large to pass outside the workspace ({len(blob) // 1024} KiB "
                       "packed), and in the workspace the agent could read them")
    return check


def yaml_problem(exc: Exception) -> str:
    """A YAML error in one line: what is wrong and where."""
    mark = getattr(exc, "problem_mark", None)
    return f"{getattr(exc, 'problem', None) or exc}" + (f" at line {mark.line + 1}" if mark is not None else "")


def script(name: str) -> str:
    """The text of a stdlib-only check script shipped beside the suites."""
    return resources.files("mtl_graph.bench.suites").joinpath(name).read_text(encoding="utf-8")


@functools.cache
def _sandbox_python() -> str | None:
    from mtl_graph.experience.check_env import trusted_python

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
