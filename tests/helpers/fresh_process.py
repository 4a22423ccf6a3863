"""New processes for the resume tests, forked from a zygote that has only imported the library.

A resume test proves that nothing but the checkpointer and the workspace on disk carries a run from one process to
the next: each driver run must be a process of its own (its own pid; graph, model, checkpointer and sandbox made
in it; SIGKILL ends it). Starting Python afresh for each spends seconds importing LangChain and LangGraph, so one
zygote per test module imports them once, runs nothing, and forks a child per driver run: a child holds what the
imports made and nothing of any earlier child, which is all a fresh interpreter would hold.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

_ZYGOTE = r"""
import json, os, runpy, sys, traceback
for name in sys.argv[1:]:
    __import__(name)
requests, answers = sys.stdin, os.fdopen(os.dup(1), "w")
devnull = os.open(os.devnull, os.O_RDWR)
os.dup2(devnull, 1)  # nothing but answers on the pipe, whatever an import or a child prints
for line in requests:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.dup2(devnull, 0)
            for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            os.chdir(req["cwd"])
            os.environ.clear()
            os.environ.update(req["env"])
            sys.argv = req["argv"]
            sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))  # as `python SCRIPT` has it
            try:
                runpy.run_path(req["argv"][0], run_name="__main__")
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
                if code == 1 and not isinstance(exc.code, int):
                    print(exc.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    answers.write(json.dumps({"pid": pid}) + "\n")
    answers.flush()
    _, status = os.waitpid(pid, 0)
    answers.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
    answers.flush()
"""


class Child:
    """One driver run in a forked child: its pid while it runs, then its CompletedProcess."""

    def __init__(self, zygote: Zygote, args: list[str], out: Path, err: Path) -> None:
        self.zygote, self.args, self.out, self.err = zygote, args, out, err
        self.pid = zygote.answer(30)["pid"]
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit code once it has ended (negative: the signal that ended it), else None."""
        if self.returncode is None:
            try:
                self.returncode = self.zygote.answer(0)["returncode"]
            except TimeoutError:
                pass
        return self.returncode

    def wait(self, timeout: float = 120) -> subprocess.CompletedProcess:
        if self.returncode is None:
            try:
                self.returncode = self.zygote.answer(timeout)["returncode"]
            except TimeoutError:
                os.kill(self.pid, signal.SIGKILL)
                self.returncode = self.zygote.answer(30)["returncode"]
                raise
        return subprocess.CompletedProcess([sys.executable, *self.args], self.returncode, self.out.read_text(),
                                           self.err.read_text())


class Zygote:
    """A Python process that imported `preload` and forks a child per `start` (one child at a time)."""

    def __init__(self, preload: list[str], scratch: Path) -> None:
        self.scratch, self.runs = scratch, 0
        self.proc = subprocess.Popen([sys.executable, "-c", _ZYGOTE, *preload], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.answers: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.answers.put(line)
        self.answers.put("")

    def start(self, *args: str, cwd: str | Path | None = None) -> Child:
        """Run `python ARGS...` (a script and its arguments) in a new child, with this process's environment."""
        self.runs += 1
        out, err = self.scratch / f"child-{self.runs}.out", self.scratch / f"child-{self.runs}.err"
        for path in (out, err):  # there from the start: a caller may read them while the child runs
            path.write_text("")
        request = {"argv": [str(a) for a in args], "stdout": str(out), "stderr": str(err),
                   "cwd": str(cwd or os.getcwd()), "env": dict(os.environ)}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return Child(self, list(request["argv"]), out, err)

    def run(self, *args: str, cwd: str | Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        """Like subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout)."""
        return self.start(*args, cwd=cwd).wait(timeout)

    def answer(self, timeout: float) -> dict:
        try:
            line = self.answers.get(timeout=timeout) if timeout else self.answers.get_nowait()
        except queue.Empty:
            raise TimeoutError(f"no answer from the zygote in {timeout:.0f} s") from None
        if not line:
            raise RuntimeError(f"the zygote exited with {self.proc.wait()}")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
