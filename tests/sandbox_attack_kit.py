"""Helpers of the sandbox attack tests: run a sandbox as an unprivileged user, find leftover processes."""

from __future__ import annotations

import atexit
import functools
import importlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import mtl_graph
from mtl_graph.sandbox import BwrapSandbox

NOBODY = 65534
# Imported by mtl_graph.sandbox: copied next to it for an interpreter that cannot read this checkout's venv.
_DEPENDENCIES = ("pydantic", "pydantic_core", "typing_extensions", "annotated_types", "typing_inspection")

CHILD = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
from mtl_graph.sandbox import SandboxConfig, make_sandbox
job = json.load(sys.stdin)
sb = make_sandbox(job["kind"], job["workspace"], SandboxConfig(**job["config"]))
print("READY", flush=True)
results = [sb.run(cmd, timeout=job.get("timeout")).model_dump() for cmd in job["commands"]]
sb.close()
print(json.dumps(results), flush=True)
"""


def marker() -> str:
    """A sleep duration no other process on the machine uses, to find a test's processes by command line."""
    return f"{random.randint(10_000, 99_999)}.{random.randint(100, 999)}"


def processes_with(text: str) -> list[int]:
    """Pids whose command line contains text (any namespace: the host sees them all)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(int(name))
    return found


def wait_gone(text: str, seconds: float = 10.0) -> list[int]:
    """The processes still matching text once they are gone or the wait is over (a wait, not a timing assert)."""
    deadline = time.monotonic() + seconds
    while (left := processes_with(text)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def kill_leftovers(text: str) -> None:
    for pid in processes_with(text):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


@functools.cache
def unprivileged_python() -> tuple[str, str] | str:
    """(interpreter, PYTHONPATH) with which uid 65534 can import mtl_graph.sandbox, or why there is none."""
    if os.geteuid() != 0:
        return "not root: cannot switch to another uid"
    stage = Path(tempfile.mkdtemp(prefix="mtl-unpriv-"))
    atexit.register(shutil.rmtree, stage, ignore_errors=True)
    os.chmod(stage, 0o755)
    shutil.copytree(Path(mtl_graph.__file__).parent, stage / "mtl_graph", ignore=shutil.ignore_patterns("__pycache__"))
    for name in _DEPENDENCIES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        path = Path(module.__file__)
        if path.name == "__init__.py":
            shutil.copytree(path.parent, stage / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, stage / path.name)
    subprocess.run(["chmod", "-R", "a+rX", str(stage)], check=True)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [os.path.realpath(sys.executable), f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    for exe in dict.fromkeys(candidates):
        try:
            probe = subprocess.run(
                [exe, "-s", "-c", "import mtl_graph.sandbox"], env={"PYTHONPATH": str(stage), "PATH": os.defpath},
                user=NOBODY, group=NOBODY, extra_groups=[], capture_output=True, cwd="/",
            )  # fmt: skip
        except OSError:  # not executable by that uid
            continue
        if probe.returncode == 0:
            return exe, str(stage)
    return f"no Python {version} that uid {NOBODY} may run (the venv's interpreter lives in a private directory)"


def nobody_workspace() -> Path:
    """A workspace the unprivileged user owns, reachable by it (pytest's tmp_path under root's 0700 is not)."""
    base = Path(tempfile.mkdtemp(prefix="mtl-unpriv-ws-"))
    os.chmod(base, 0o755)
    ws = base / "ws"
    ws.mkdir()
    os.chown(ws, NOBODY, NOBODY)
    return ws


def start_child(kind: str, workspace: Path, commands: list[str], *, config: dict | None = None,
                timeout: float | None = None, env: dict[str, str] | None = None, as_nobody: bool = True
                ) -> subprocess.Popen:
    """A child process (uid 65534, or this uid) that makes the sandbox and runs commands (prints READY, results)."""
    if as_nobody:
        found = unprivileged_python()
        assert not isinstance(found, str), found
        exe, path = found
        child_env = {"PYTHONPATH": path, "PATH": os.environ.get("PATH", os.defpath), "HOME": str(workspace.parent)}
        switch: dict = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    else:
        exe, child_env, switch = sys.executable, dict(os.environ), {}
    proc = subprocess.Popen(
        [exe, "-s", "-c", CHILD], env={**child_env, **(env or {})}, cwd="/", stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **switch,
    )  # fmt: skip
    job = {"kind": kind, "workspace": str(workspace), "config": config or {}, "commands": commands, "timeout": timeout}
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(job))
    proc.stdin.close()
    proc.stdin = None  # so communicate() does not flush it
    return proc


def run_unprivileged(kind: str, workspace: Path, commands: list[str], **kwargs) -> list[dict]:
    """Results of commands run in a sandbox made by uid 65534."""
    proc = start_child(kind, workspace, commands, **kwargs)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err
    return json.loads(out.splitlines()[-1])


needs_bwrap = pytest.mark.skipif(not BwrapSandbox.is_available(), reason="bubblewrap cannot run here")
