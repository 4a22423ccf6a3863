"""The interpreter a check's ``python3`` is, per sandbox kind: one answer for the check's PATH and for the package
probes of the suites, so a package found at load time is there at check time.

Candidates are the ``python3`` programs along PATH, in order, each asked from a neutral directory for its real
interpreter (a version manager's shim reads pin files such as ``.python-version`` from the working directory, so
it is asked once, never trusted in a check). The first one a sandbox's commands can run is the one:

- ``local``: any, unless mtl_graph runs as root: commands then run as an unprivileged uid, for which every
  directory down to the interpreter and its prefixes must be traversable (``/root`` is not, so a pyenv under it is
  passed over).
- ``bwrap``: one whose real path and prefixes lie in what the sandbox binds (/usr and the toolchain directories,
  bwrap.toolchain_dirs); as root, traversable below the bound directory (bwrap opens its parents).
- ``docker``: the container's own, not known here (None).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import NamedTuple

PROBE_TIMEOUT_S = 30.0
_ASK = "import json, sys; print(json.dumps([sys.executable, sys.prefix, sys.base_prefix]))"
_NEUTRAL_ENV_DROP = ("PYENV_VERSION", "PYTHONPATH", "PYTHONHOME")


class Interpreter(NamedTuple):
    """A real Python interpreter: its executable and the prefixes its standard library and packages live in."""

    executable: str
    """sys.executable, as the interpreter reports it (a venv's keeps its own path)."""
    prefix: str
    """sys.prefix (a venv's directory for a venv)."""
    base_prefix: str
    """sys.base_prefix (the installation a venv was made from)."""


@functools.cache
def ask(program: str) -> Interpreter | None:
    """The real interpreter behind a ``python3`` program (a shim, a link, the interpreter itself), asked from a
    neutral directory; None when it does not answer."""
    env = {k: v for k, v in os.environ.items() if k not in _NEUTRAL_ENV_DROP}
    try:
        # -I, never -S: the site module is what sets a venv's sys.prefix.
        out = subprocess.run([program, "-I", "-c", _ASK], cwd="/", env=env, capture_output=True, text=True,
                             timeout=PROBE_TIMEOUT_S)
        found = json.loads(out.stdout) if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
        return None
    if not (isinstance(found, list) and len(found) == 3 and all(isinstance(p, str) and os.path.isabs(p)
                                                                 for p in found)):
        return None
    return Interpreter(*found)


def candidates(path: str | None = None) -> list[Interpreter]:
    """The real interpreters of the ``python3`` programs along PATH, in PATH order, without repeats."""
    seen: dict[tuple[str, str], Interpreter] = {}
    for entry in (path if path is not None else os.environ.get("PATH", os.defpath)).split(os.pathsep):
        program = shutil.which("python3", path=entry) if entry else None
        found = ask(program) if program else None
        if found is not None:  # /bin/python3 and /usr/bin/python3 of a merged /usr are one (a venv is another)
            seen.setdefault((os.path.realpath(found.executable), os.path.realpath(found.prefix)), found)
    return list(seen.values())


def _traversable(path: Path, below: Path | None = None) -> bool:
    """Whether every directory holding path (down from ``below`` when given) is searchable by others, and path
    readable and, for a file, executable by them."""
    try:
        mode = path.stat().st_mode
        if not mode & stat.S_IROTH or (not stat.S_ISDIR(mode) and not mode & stat.S_IXOTH):
            return False
        for parent in path.parents:
            if below is not None and not parent.is_relative_to(below):
                break  # bwrap makes the parents of what it binds traversable
            if not parent.stat().st_mode & stat.S_IXOTH:
                return False
    except OSError:
        return False
    return True


def _paths(found: Interpreter) -> list[Path]:
    """What a command must reach to run it: the executable as named (a venv's link) and where it leads, and the
    prefixes."""
    named = [Path(found.executable), Path(found.executable).parent.resolve() / Path(found.executable).name]
    return list(dict.fromkeys(named + [Path(p).resolve() for p in (found.executable, found.prefix, found.base_prefix)]))


def runnable(found: Interpreter, kind: str) -> bool:
    """Whether commands of a sandbox of this kind can run the interpreter (see the module's docstring)."""
    as_root = os.geteuid() == 0
    if kind == "local":
        return not as_root or all(_traversable(p) for p in _paths(found))
    if kind == "bwrap":
        from mtl_graph.sandbox.bwrap import SYSTEM_DIRS, toolchain_dirs
        from mtl_graph.sandbox.config import SandboxConfig

        bound = [Path(d).resolve() for d in SYSTEM_DIRS if Path(d).exists()] + toolchain_dirs(SandboxConfig())
        for path in _paths(found):
            root = next((b for b in bound if path.is_relative_to(b)), None)
            if root is None or as_root and not _traversable(path, root):
                return False
        return True
    return False


def resolved_kind(kind: str) -> str:
    """The backend a kind names: ``auto`` is bwrap where it works, else local (as make_sandbox decides)."""
    if kind != "auto":
        return kind
    from mtl_graph.sandbox.bwrap import BwrapSandbox

    return "bwrap" if BwrapSandbox.is_available() else "local"


@functools.cache
def _check_python(kind: str, path: str) -> str | None:
    return next((c.executable for c in candidates(path) if runnable(c, kind)), None)


def check_python(kind: str = "auto", path: str | None = None) -> str | None:
    """The interpreter a check's ``python3`` runs in a sandbox of this kind (the first along PATH its commands can
    run); None when there is none, or for a container (its own, unknown here)."""
    return _check_python(resolved_kind(kind), path if path is not None else os.environ.get("PATH", os.defpath))


def clear_cache() -> None:
    """Forget what was asked (a test changing PATH or the interpreters on it)."""
    ask.cache_clear()
    _check_python.cache_clear()
