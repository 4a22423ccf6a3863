"""The long-lived runners: one bwrap, its runner pid 1 inside, serves every command of a sandbox; the local
backend as root has a runner of the commands' uid on the host.

A runner has the commands' uid, so these tests attack it the way a command can (signals, stop, ptrace, its /proc
entries), and from the host the way nothing inside bwrap can (stop or kill it), checking that each command still
ends within its deadline, leaves nothing behind, and that the next one gets a working sandbox.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from mtl_graph.sandbox import BwrapSandbox, SandboxConfig, make_sandbox
from helpers.sandbox_attack_kit import (
    needs_bwrap,
    kill_leftovers,
    marker,
    nobody_workspace,
    run_unprivileged,
    unprivileged_python,
    wait_gone,
)

pytestmark = pytest.mark.filterwarnings("ignore:local sandbox")
_unpriv = unprivileged_python()
needs_nobody = pytest.mark.skipif(isinstance(_unpriv, str), reason=str(_unpriv))
MODES = ["caller", pytest.param("nobody", marks=needs_nobody)]


def run_in_one_sandbox(mode: str, tmp_path: Path, commands: list[str], timeout: float = 30) -> list[dict]:
    """Results of commands run one after the other in one bwrap sandbox, made by this process or by uid 65534."""
    if mode == "nobody":
        workspace = nobody_workspace()
        try:
            return run_unprivileged("bwrap", workspace, commands, timeout=timeout)
        finally:
            shutil.rmtree(workspace.parent, ignore_errors=True)
    with make_sandbox("bwrap", tmp_path / "ws") as sb:
        return [sb.run(c, timeout=timeout).model_dump() for c in commands]


def runner_pid(sb: BwrapSandbox) -> int:
    """The host pid of the sandbox's runner: the child of bwrap, the child of the outer supervisor."""
    pid = sb.supervisor.pid
    for _ in range(2):
        (pid,) = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    assert "/run/mtl/supervisor.py" in Path(f"/proc/{pid}/cmdline").read_text()
    return pid


@needs_bwrap
def test_tmp_persists_between_commands_of_a_sandbox_not_into_another(tmp_path):
    keep = "echo kept > /tmp/note && echo kept > /dev/shm/note"
    read = "cat /tmp/note /dev/shm/note"
    with make_sandbox("bwrap", tmp_path / "ws") as sb:
        assert sb.run(keep).exit_code == 0
        assert sb.run(read).output == "kept\nkept\n"
        with make_sandbox("bwrap", tmp_path / "ws") as other:  # the judge's check runs in a sandbox like this
            assert "No such file" in other.run(read).output
    with make_sandbox("bwrap", tmp_path / "ws", SandboxConfig(bwrap_persistent=False)) as fresh:
        assert fresh.run(keep).exit_code == 0
        assert "No such file" in fresh.run(read).output


@needs_bwrap
def test_a_persistent_sandbox_that_cannot_start_falls_back_to_one_bwrap_per_command(tmp_path):
    with make_sandbox("bwrap", tmp_path / "ws") as sb:
        sb.supervisor._launch["argv"].insert(1, "--an-option-this-bwrap-lacks")  # what an older bwrap would say
        with pytest.warns(RuntimeWarning, match="an-option-this-bwrap-lacks.*new bwrap per command"):
            first = sb.run("echo kept > /tmp/note; echo ran")
        assert first.exit_code == 0 and first.output == "ran\n"
        assert "No such file" in sb.run("cat /tmp/note").output  # each command in a fresh sandbox now


@needs_bwrap
def test_sysv_ipc_objects_do_not_outlive_their_command(tmp_path):
    """Unlike /tmp they have no size limit: a persistent sandbox must not keep them from one command to the next."""
    make = (
        "import ctypes; c = ctypes.CDLL(None); "
        "print(c.shmget(0, 1 << 20, 0o1600), c.msgget(0, 0o1600), c.semget(0, 2, 0o1600))"
    )
    count = "tail -q -n +2 /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem | wc -l"
    with make_sandbox("bwrap", tmp_path / "ws") as sb:
        made = sb.run(f"python3 -c '{make}' && {count}")
        assert made.output.split() == ["0", "0", "0", "3"], made.output  # three objects while it runs
        assert sb.run(count).output == "0\n"


@needs_bwrap
@pytest.mark.parametrize("mode", MODES)
def test_commands_cannot_signal_stop_or_trace_the_runner(mode, tmp_path):
    ptrace = (
        "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
        "[print(name, libc.ptrace(req, 1, 0, 0), os.strerror(ctypes.get_errno())) "
        "for name, req in ((\"attach\", 16), (\"seize\", 0x4206))]"
    )
    results = run_in_one_sandbox(mode, tmp_path, [
        "echo mark > /tmp/mark; tr '\\0' ' ' < /proc/1/cmdline",
        "for s in KILL STOP TERM INT HUP QUIT SEGV USR1 ABRT; do kill -s $s 1; done; echo sent",
        # every process the shell may signal but itself: never pid 1
        "sleep 100 & kill -STOP -1; kill -KILL -1; echo survived",
        f"python3 -c '{ptrace}'",
        "cat /proc/1/environ; ls /proc/1/fd; head -c1 /proc/1/mem; echo tried",
        "cat /tmp/mark",
    ], timeout=5)  # fmt: skip
    first, signalled, everyone, traced, proc, last = results
    assert "/run/mtl/supervisor.py" in first["output"]  # pid 1 is the runner
    assert signalled["exit_code"] == 0 and signalled["output"] == "sent\n", signalled
    assert everyone["exit_code"] == 0 and everyone["output"] == "survived\n", everyone
    assert traced["output"].count("-1 Operation not permitted") == 2, traced["output"]
    assert proc["output"].count("Permission denied") == 3, proc["output"]
    assert last["exit_code"] == 0 and last["output"] == "mark\n"  # the same runner, /tmp and all, served them all


@needs_bwrap
def test_a_runner_stopped_from_outside_fails_the_command_and_is_replaced(tmp_path):
    with make_sandbox("bwrap", tmp_path / "ws") as sb:
        assert sb.run("echo mark > /tmp/mark").exit_code == 0
        pid = runner_pid(sb)
        results = []
        worker = threading.Thread(target=lambda: results.append(sb.run("sleep 300", timeout=2)))
        worker.start()
        os.kill(pid, signal.SIGSTOP)  # only root outside can: the runner no longer answers
        worker.join(60)
        assert results and results[0].timed_out and results[0].exit_code == 124
        assert wait_gone_pid(pid)
        again = sb.run("cat /tmp/mark; echo again")
        assert again.output.endswith("again\n") and "No such file" in again.output  # a fresh sandbox
        assert runner_pid(sb) != pid


@needs_bwrap
def test_a_runner_killed_between_commands_is_replaced_transparently(tmp_path):
    with make_sandbox("bwrap", tmp_path / "ws") as sb:
        assert sb.run("echo mark > /tmp/mark").exit_code == 0
        pid = runner_pid(sb)
        os.kill(pid, signal.SIGKILL)
        assert wait_gone_pid(pid)
        again = sb.run("cat /tmp/mark; echo again")
        assert again.exit_code == 0 and again.output.endswith("again\n") and "No such file" in again.output


@needs_bwrap
def test_closing_kills_the_whole_sandbox(tmp_path):
    sb = make_sandbox("bwrap", tmp_path / "ws")
    assert sb.run("true").exit_code == 0
    pid = runner_pid(sb)
    sb.close()
    assert wait_gone_pid(pid)


@pytest.mark.parametrize("kind", ["local", pytest.param("bwrap", marks=needs_bwrap)])
def test_cpu_time_is_limited_per_command_not_summed_over_commands(kind, tmp_path):
    burn = "python3 -c 'import time\nwhile time.process_time() < 1.3: pass\nprint(\"burnt\")'"
    with make_sandbox(kind, tmp_path / "ws", SandboxConfig(cpu_seconds=2)) as sb:
        for _ in range(2):  # 2.6 s in all: over the limit were it counted across commands
            result = sb.run(burn, timeout=60)
            assert result.exit_code == 0 and result.output == "burnt\n", result


def wait_gone_pid(pid: int, seconds: float = 10.0) -> bool:
    """True once pid is gone or a zombie (a wait, not a timing assert)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(os.geteuid() != 0, reason="the local backend has a runner only as root")
def test_a_command_killing_or_stopping_the_local_runner_leaves_nothing_behind(tmp_path):
    """On the host the runner shares the commands' uid and no pid namespace protects it: a command may kill or
    stop it, and must gain nothing: its processes die, the deadline holds, the next command gets a new runner."""
    tag, stop_tag = marker(), marker()
    ptrace = "import ctypes, sys; print(ctypes.CDLL(None, use_errno=True).ptrace(16, int(sys.argv[1]), 0, 0))"
    workspace = nobody_workspace()  # outside pytest's tmp_path, whose 0700 parent another pytest run may restore
    try:
        with make_sandbox("local", workspace) as sb:
            traced = sb.run(f"python3 -c '{ptrace}' $PPID; tr '\\0' ' ' < /proc/$PPID/environ", timeout=10)
            killed = sb.run(f"sleep {tag} & kill -9 $PPID; sleep 30", timeout=20)
            stopped = sb.run(f"sleep {stop_tag} & kill -STOP $PPID; sleep 300", timeout=2)
            again = sb.run("echo again")
    finally:
        kill_leftovers(tag)
        kill_leftovers(stop_tag)
        shutil.rmtree(workspace.parent, ignore_errors=True)
    assert traced.output.startswith("-1\n") and "Permission denied" in traced.output, traced.output
    assert killed.exit_code == 137 and "supervisor was killed" in killed.output
    assert stopped.timed_out and stopped.exit_code == 124
    assert again.output == "again\n"
    assert wait_gone(tag) == [] and wait_gone(stop_tag) == []
