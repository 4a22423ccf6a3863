"""Process-level figures: `mtl --help` and `import mtl_graph` cold starts beside `python -c pass`, and the cost of
one sandboxed command beside the raw tool it wraps (the bwrap argv of a new sandbox run directly; `bash -c`)."""

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


def _medians_ms(fns: dict[str, Callable[[], Any]], runs: int) -> dict[str, float]:
    """Median ms of each function, the calls interleaved so a change of the machine's load hits them all alike."""
    for fn in fns.values():
        fn()  # warm the page cache (and start a persistent sandbox: its first command is timed apart)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: statistics.median(ts) * 1000 for name, ts in times.items()}


def _raw_bwrap(sandbox: Any) -> Callable[[], None]:
    """The argv a per-command bwrap sandbox builds for `true`, run directly (the seccomp filter from an fd)."""
    from mtl_graph.sandbox.process import scrubbed_env
    from mtl_graph.sandbox.supervisor.server import with_fds

    files = sandbox.passed_files()
    fds = [os.open(f, os.O_RDONLY) for f in files]
    argv = with_fds(sandbox.argv("true", sandbox.config.timeout), fds)
    env = scrubbed_env(sandbox.config, str(sandbox.workspace))

    def run() -> None:
        for fd in fds:  # bwrap reads the filter to its end: each run needs it from the start
            os.lseek(fd, 0, os.SEEK_SET)
        subprocess.run(argv, cwd=str(sandbox.workspace), env=env, check=True, stdout=subprocess.DEVNULL, pass_fds=fds)

    return run


def sandbox_costs(commands: int) -> dict[str, Any]:
    """Median ms per `true` through each backend beside its raw equivalent, interleaved, in this process."""
    from mtl_graph.sandbox.bwrap import BwrapSandbox
    from mtl_graph.sandbox.factory import make_sandbox

    out: dict[str, Any] = {}
    workspace = Path(tempfile.mkdtemp(prefix="mtl-bench-sandbox-"))
    bash = _run(["bash", "-c", "true"])
    local = make_sandbox("local", workspace)
    try:
        m = _medians_ms({"ours": lambda: local.run("true"), "bash": bash}, commands)
    finally:
        local.close()
    out["local"] = {"ms": m["ours"], "raw_ms": m["bash"], "baseline": "bash -c true via subprocess.run"}
    if BwrapSandbox.is_available():
        out.update(_bwrap_costs(workspace, bash, commands))
    try:
        subprocess.run(["docker", "info"], capture_output=True, timeout=5, check=True)
        out["docker"] = {"note": "docker present but not benchmarked"}
    except (OSError, subprocess.SubprocessError):
        out["docker"] = {"note": "no docker engine on this machine"}
    return out


def _bwrap_costs(workspace: Path, bash: Callable[[], None], commands: int) -> dict[str, Any]:
    """The persistent sandbox (the default: one bwrap per sandbox) against the raw bwrap argv a new sandbox per
    command would run and against `bash -c true`; the per-command design (`bwrap_persistent=False`) against the
    same raw argv; the first command of a new persistent sandbox (bwrap and its runner starting) apart."""
    from mtl_graph.sandbox import SandboxConfig
    from mtl_graph.sandbox.factory import make_sandbox

    persistent = make_sandbox("bwrap", workspace)
    per_command = make_sandbox("bwrap", workspace, SandboxConfig(bwrap_persistent=False))
    try:
        m = _medians_ms({"ours": lambda: persistent.run("true"), "per_command": lambda: per_command.run("true"),
                         "raw": _raw_bwrap(per_command), "bash": bash}, commands)  # fmt: skip
        firsts = []
        for _ in range(max(3, commands // 20)):
            persistent.close()
            t = time.perf_counter()
            persistent.run("true")
            firsts.append(time.perf_counter() - t)
    finally:
        persistent.close()
        per_command.close()
    return {
        "bwrap": {"ms": m["ours"], "raw_ms": m["raw"], "bash_ms": m["bash"],
                  "first_ms": statistics.median(firsts) * 1000,
                  "baseline": "a new bwrap per command (the raw bwrap argv via subprocess.run)"},
        "bwrap, a new one per command": {"ms": m["per_command"], "raw_ms": m["raw"],
                                         "baseline": "the same bwrap argv via subprocess.run"},
    }  # fmt: skip
