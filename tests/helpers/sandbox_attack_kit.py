"""Helpers of the sandbox attack tests: run a sandbox (or the CLI) as an unprivileged user, find leftover processes."""

from __future__ import annotations

import atexit
import functools
import json
import os
import random
import shutil
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import mtl_graph
from mtl_graph.sandbox import BwrapSandbox

NOBODY = 65534

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


def processes_with(text: str, *, exact: bool = False) -> list[int]:
    """Pids whose command line contains text, or is text when exact (any namespace: the host sees them all)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (cmdline.rstrip() == text if exact else text in cmdline) and state != "Z":
            found.append(int(name))
    return found


def wait_gone(text: str, seconds: float = 120.0) -> list[int]:
    """The processes still matching text once they are gone or the wait is over (a wait, not a timing assert:
    it returns as soon as they are gone, so only a real leftover waits out the generous deadline)."""
    deadline = time.monotonic() + seconds
    while (left := processes_with(text)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def wait_started(argv: str, count: int, child: subprocess.Popen, seconds: float = 240.0) -> list[int]:
    """Pids of processes running exactly argv, once count of them run, the child has exited, or the wait is over.

    Waits on the processes themselves, not on a guess at how long a loaded machine takes to start them."""
    deadline = time.monotonic() + seconds
    while len(found := processes_with(argv, exact=True)) < count and child.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def kill_leftovers(text: str) -> None:
    for pid in processes_with(text):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def _stage(src: Path, dst: Path) -> None:
    """A tree uid 65534 can read at dst: world-readable files hard-linked where the filesystem allows (the
    venv is large), the rest copied and opened up (a link shares its inode, so its mode is never touched)."""

    def place(a: str, b: str) -> None:
        if os.stat(a).st_mode & 0o004:
            try:
                return os.link(a, b)
            except OSError:  # another filesystem, or links refused
                pass
        shutil.copy2(a, b)
        mode = os.stat(b).st_mode
        os.chmod(b, mode | 0o444 | (0o111 if mode & 0o100 else 0))

    shutil.copytree(src, dst, copy_function=place, ignore=shutil.ignore_patterns("__pycache__"), symlinks=False)
    for root, dirs, _ in os.walk(dst):
        for d in [root, *(os.path.join(root, d) for d in dirs)]:
            os.chmod(d, 0o755)


def public_tmp(near: Path | None = None) -> str:
    """A temp directory every user can reach (TMPDIR may be private), on near's filesystem if one is (links)."""
    found = [c for c in dict.fromkeys([tempfile.gettempdir(), "/var/tmp", "/tmp"]) if os.path.isdir(c)
             and all(os.stat(p).st_mode & 0o001 for p in [c, *Path(c).parents])]
    assert found, "no temp directory that another user can reach"
    same = [c for c in found if near is not None and os.stat(c).st_dev == near.stat().st_dev]
    return (same or found)[0]


@functools.cache
def unprivileged_python() -> tuple[str, str] | str:
    """(interpreter, PYTHONPATH) with which uid 65534 can import mtl_graph and all it depends on, or why not.

    The checkout and its venv may lie under a directory that uid cannot enter (root's home, any 0700 directory),
    so the package and every site directory are staged in one it can; a staged PYTHONPATH ignores ``.pth``
    files, which is why the package itself is staged first even when it is installed in editable mode."""
    if os.geteuid() != 0:
        return "not root: cannot switch to another uid"
    found = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    sites = [Path(p) for p in dict.fromkeys(map(os.path.realpath, found)) if os.path.isdir(p)]
    stage = Path(tempfile.mkdtemp(prefix="mtl-unpriv-", dir=public_tmp(sites[0] if sites else None)))
    atexit.register(shutil.rmtree, stage, ignore_errors=True)
    os.chmod(stage, 0o755)
    _stage(Path(mtl_graph.__file__).parent, stage / "pkg" / "mtl_graph")
    for i, path in enumerate(sites):
        _stage(path, stage / f"site-{i}")
    pythonpath = os.pathsep.join([str(stage / "pkg"), *(str(stage / f"site-{i}") for i in range(len(sites)))])
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [os.path.realpath(sys.executable), f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    why = f"no Python {version} that uid {NOBODY} may run (the venv's interpreter lives in a private directory)"
    for exe in dict.fromkeys(candidates):
        try:
            probe = subprocess.run(
                [exe, "-s", "-c", "import mtl_graph.sandbox, mtl_graph.cli"],
                env={"PYTHONPATH": pythonpath, "PATH": os.defpath},
                user=NOBODY, group=NOBODY, extra_groups=[], capture_output=True, text=True, cwd="/",
            )  # fmt: skip
        except OSError:  # not executable by that uid
            continue
        if probe.returncode == 0:
            return exe, pythonpath
        why = f"{exe} as uid {NOBODY} cannot import mtl_graph: {(probe.stderr.strip().splitlines() or ['?'])[-1]}"
    return why


def nobody_workspace() -> Path:
    """A workspace the unprivileged user owns, reachable by it (pytest's tmp_path under root's 0700 is not)."""
    base = Path(tempfile.mkdtemp(prefix="mtl-unpriv-ws-", dir=public_tmp()))
    os.chmod(base, 0o755)
    atexit.register(shutil.rmtree, base, ignore_errors=True)
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
