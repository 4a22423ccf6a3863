"""The environment a check's process owns: nothing of it comes from the grading directory.

The task's check command runs inside a prologue that gives it a fresh HOME and TMPDIR outside the directory (so no
user site, user config or tool cache the agent left can load), turns off bytecode writes (the room holds no bytecode
of the agent's to read: none is carried), user sites and pytest's plugin autoloading, makes `python3` the
interpreter the sandbox's checks run (sandbox/interpreter.py, the one the suites' package probes ask; never a
version-manager shim, which reads pin files such as `.python-version` from the working directory), and installs the
harness's test report hook (accounting.py). Tool caches (Go's build cache, npm's, pip's) live under that HOME and go
with it; a Cargo home the task's setup filled (`.cargo` of the snapshot) is the one the check builds against.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from mtl_graph.sandbox.interpreter import check_python

REPORT_ENV = "MTL_CHECK_REPORT"
HOOKS = ("sitecustomize.py", "mtl_check_report.py")
SCANNER = "mtl_tamper_scan.py"
"""tamper_scan.py itself, installed beside the hooks: text compiled at run time (eval, exec) is scanned too."""
_HEREDOC = "MTL_CHECK_HOOK_EOF"
SHIM_DIRS = ("shims",)
"""PATH entries of version managers (pyenv, rbenv, asdf, nodenv...): programs that pick a version from the cwd."""
UNSET = ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT", "PYTHONSAFEPATH", "PYTHONWARNINGS",
         "PYTHONBREAKPOINT", "PYENV_VERSION", "PYENV_DIR", "VIRTUAL_ENV", "PIP_CONFIG_FILE", "NODE_OPTIONS",
         "NODE_PATH", "GOFLAGS", "RUSTFLAGS", "CARGO_HOME", "CARGO_TARGET_DIR", "RUSTC_WRAPPER",
         "JAVA_TOOL_OPTIONS", "CLASSPATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "BASH_ENV", "ENV")


@functools.cache
def trusted_python() -> str | None:
    """The real interpreter `python3` stands for on this host, asked from a neutral directory (so a shim reads
    no pin file of the task's); None when there is none."""
    found = shutil.which("python3")
    if found is None:
        return None
    env = {k: v for k, v in os.environ.items() if k not in ("PYENV_VERSION", "PYTHONPATH", "PYTHONHOME")}
    try:
        out = subprocess.run([found, "-I", "-S", "-c", "import sys; print(sys.executable)"], cwd="/", env=env,
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    real = out.stdout.strip()
    return real if out.returncode == 0 and real and os.path.isabs(real) else None


def trusted_path(path: str | None = None, python: str | None = None) -> str:
    """PATH for a check: the interpreter's directory first (default: trusted_python's), version-manager shims
    left out."""
    entries = [p for p in (path if path is not None else os.environ.get("PATH", os.defpath)).split(os.pathsep)
               if p and Path(p).name not in SHIM_DIRS]
    python = python or trusted_python()
    if python is not None:
        entries.insert(0, str(Path(python).parent))
    return os.pathsep.join(dict.fromkeys(entries))


@functools.cache
def _hook_sources() -> dict[str, str]:
    folder = resources.files("mtl_graph.judging")
    hooks = {name: (folder / "check_hooks" / f"{name}.tmpl").read_text(encoding="utf-8") for name in HOOKS}
    return {**hooks, SCANNER: (folder / "tamper_scan.py").read_text(encoding="utf-8")}


def graded_command(check: str, report: str | Path, path: str | None = None, kind: str = "auto") -> str:
    """The check command inside the prologue; report is where the hook writes (a path the harness reads); kind:
    the sandbox it runs in, whose interpreter (interpreter.check_python) is the check's ``python3``."""
    q = shlex.quote
    python = check_python(kind, path)
    # `python3` is exactly that interpreter, even where its directory's own python3 is another one.
    bin_dir = '"$h/.mtl-bin":' if python else ""
    lines = [
        'h=$(mktemp -d "${TMPDIR:-/tmp}/mtl-check-home.XXXXXX") || exit 125',
        "unset " + " ".join(UNSET),
        'export HOME="$h" TMPDIR="$h/tmp" XDG_CACHE_HOME="$h/.cache" XDG_CONFIG_HOME="$h/.config" '
        'XDG_DATA_HOME="$h/.local/share" PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 '
        'PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 '
        "PYTEST_ADDOPTS='-p mtl_check_report -p no:cacheprovider' "
        f'PYTHONPATH="$h/.mtl-hooks" GOPATH="$h/go" GOCACHE="$h/.cache/go-build" {REPORT_ENV}={q(str(report))} '
        f"PATH={bin_dir}{q(trusted_path(path, python))}",
        'mkdir -p "$TMPDIR" "$h/.mtl-hooks" "$h/.mtl-bin"',
        # Crates the task's own setup fetched (into the workspace's HOME, before the agent): build against them.
        'if [ -d .cargo ] && [ ! -L .cargo ]; then export CARGO_HOME="$PWD/.cargo"; fi',
    ]
    if python:
        lines.append(f"printf '#!/bin/sh\\nexec %s \"$@\"\\n' {q(q(python))} > \"$h/.mtl-bin/python3\" "
                     '&& chmod 755 "$h/.mtl-bin/python3"')
    for name, source in _hook_sources().items():
        lines.append(f"cat > \"$h/.mtl-hooks/{name}\" <<'{_HEREDOC}'\n{source.rstrip()}\n{_HEREDOC}")
    lines += ["(", check, ")", "s=$?", 'rm -rf "$h"', "exit $s"]
    return "\n".join(lines)
