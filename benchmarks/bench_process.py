"""Process-level figures: `mtl --help` and `import mtl_graph` cold starts beside `python -c pass`, and the cost of
one sandboxed command beside the raw tool it wraps (the same bwrap argv run directly; `bash -c`)."""

from __future__ import annotations

import statistics
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable


def _median_s(fn: Callable[[], Any], runs: int) -> float:
    fn()  # warm the page cache: a cold disk is not what this measures
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _run(argv: list[str]) -> Callable[[], None]:
    return lambda: subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cold_start(runs: int) -> dict[str, float]:
    mtl = str(Path(sys.executable).parent / "mtl")
    return {
        "python_pass_s": _median_s(_run([sys.executable, "-c", "pass"]), runs),
        "import_s": _median_s(_run([sys.executable, "-c", "import mtl_graph"]), runs),
        "help_s": _median_s(_run([mtl, "--help"]), runs),
    }


def _fd_arg(arg: str, fds: list[int]) -> str:
    """The sandbox's placeholder for its n-th passed file, as the real descriptor number."""
    from mtl_graph.sandbox.reaper import FD_TOKEN

    return str(fds[int(arg[len(FD_TOKEN):])]) if arg.startswith(FD_TOKEN) else arg


def sandbox_costs(commands: int) -> dict[str, Any]:
    """Median ms per `true` through each backend and through its raw equivalent, in this process."""
    from mtl_graph.sandbox.bwrap import BwrapSandbox
    from mtl_graph.sandbox.factory import make_sandbox
    from mtl_graph.sandbox.process import scrubbed_env

    out: dict[str, Any] = {}
    workspace = Path(tempfile.mkdtemp(prefix="mtl-bench-sandbox-"))
    kinds = ["local"] + (["bwrap"] if BwrapSandbox.is_available() else [])
    for kind in kinds:
        sandbox = make_sandbox(kind, workspace)
        try:
            ours = _median_s(lambda: sandbox.run("true"), commands)
            if kind == "bwrap":
                argv = sandbox.argv("true", sandbox.config.timeout)
                env = scrubbed_env(sandbox.config, str(workspace))
                files = sandbox.passed_files()  # the seccomp filter, read by bwrap from an inherited fd
                fds = [os.open(f, os.O_RDONLY) for f in files]
                argv = [_fd_arg(a, fds) for a in argv]

                def raw_run() -> None:
                    for fd in fds:  # bwrap reads the filter to its end: each run needs it from the start
                        os.lseek(fd, 0, os.SEEK_SET)
                    subprocess.run(argv, cwd=str(workspace), env=env, check=True, stdout=subprocess.DEVNULL,
                                   pass_fds=fds)

                try:
                    raw = _median_s(raw_run, commands)
                finally:
                    for fd in fds:
                        os.close(fd)
                baseline = "the same bwrap argv via subprocess.run"
            else:
                raw = _median_s(_run(["bash", "-c", "true"]), commands)
                baseline = "bash -c true via subprocess.run"
        finally:
            sandbox.close()
        out[kind] = {"ms": ours * 1000, "raw_ms": raw * 1000, "baseline": baseline}
    try:
        subprocess.run(["docker", "info"], capture_output=True, timeout=5, check=True)
        out["docker"] = {"note": "docker present but not benchmarked"}
    except (OSError, subprocess.SubprocessError):
        out["docker"] = {"note": "no docker engine on this machine"}
    return out
