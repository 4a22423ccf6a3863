"""The local backend as root refuses new user namespaces, like bwrap as root: its runner wears the same seccomp
filter (sandbox/seccomp.py) and no_new_privs, and every command inherits both.

Every route to a user namespace a command has is tried (generated from the syscalls and flag sets that make one,
through util-linux, Python's os and raw syscalls), and ordinary work (threads, processes, pipes, a compiler)
still runs."""

from __future__ import annotations

import itertools
import os
import platform
import shutil
import tempfile
from pathlib import Path

import pytest

from mtl_graph.sandbox import SandboxConfig, make_sandbox
from mtl_graph.sandbox.seccomp import CLONE_NEWUSER, filter_program
from mtl_graph.sandbox.tree import remove_tree
from helpers.sandbox_attack_kit import public_tmp

pytestmark = [
    pytest.mark.filterwarnings("ignore:local sandbox"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the local backend switches uid and filters only as root"),
    pytest.mark.skipif(filter_program() is None, reason=f"no seccomp filter for {platform.machine()}"),
]
SYSCALLS = {"x86_64": {"unshare": 272, "clone": 56, "clone3": 435},
            "aarch64": {"unshare": 97, "clone": 220, "clone3": 435}}[platform.machine()]
OTHER_NAMESPACES = {"mount": 0x00020000, "uts": 0x04000000, "ipc": 0x08000000, "pid": 0x20000000,
                    "net": 0x40000000}


def util_linux_routes() -> list[str]:
    """unshare(1) with --user and any combination of the other namespaces it would then be allowed to make."""
    extra = ["-m", "-n", "-p -f", "-i", "-u", "-C"]
    combos = [c for r in range(0, 3) for c in itertools.combinations(extra, r)]
    maps = ["-r", "-U", "--map-root-user", "--user --map-current-user"]
    return [f"unshare {m} {' '.join(c)} true" for m, c in zip(itertools.cycle(maps), combos)]


def raw_routes() -> list[str]:
    """unshare(2) and clone(2) with CLONE_NEWUSER alone or with other flags, clone3(2), through ctypes."""
    flag_sets = [CLONE_NEWUSER | sum(c) for r in range(0, 3)
                 for c in itertools.combinations(OTHER_NAMESPACES.values(), r)]
    routes = []
    for flags in flag_sets:
        routes.append(f"libc.syscall({SYSCALLS['unshare']}, {flags})")
        routes.append(f"libc.syscall({SYSCALLS['clone']}, {flags | 17}, 0, 0, 0, 0)")  # | SIGCHLD
    routes.append(f"libc.unshare({CLONE_NEWUSER})")
    routes.append(f"libc.syscall({SYSCALLS['clone3']}, ctypes.byref(ctypes.c_uint64({CLONE_NEWUSER})), 88)")
    return routes


PROBE = (
    "import ctypes, os, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "rc = {call}\n"
    "if rc == 0: os._exit(0)  # a clone's child leaves at once\n"
    "print('result', rc, ctypes.get_errno())\n"
)


@pytest.fixture(scope="module")
def sandbox():
    # Not under pytest's own directory: another pytest session starting makes it 0700 again, and uid 65534 must
    # traverse the workspace's parents.
    base = Path(tempfile.mkdtemp(prefix="mtl-userns-", dir=public_tmp()))
    with make_sandbox("local", base / "ws", SandboxConfig(timeout=30)) as sb:
        yield sb
    remove_tree(base)


def test_unshare_Urm_fails(sandbox):
    result = sandbox.run("unshare -Urm true")
    assert result.exit_code != 0 and "Operation not permitted" in result.output


@pytest.mark.parametrize("command", util_linux_routes())
def test_util_linux_cannot_make_a_user_namespace(sandbox, command):
    result = sandbox.run(f"{command}; echo rc=$?")
    assert "rc=0" not in result.output and "Operation not permitted" in result.output, result.output


@pytest.mark.parametrize("call", raw_routes())
def test_raw_syscalls_cannot_make_a_user_namespace(sandbox, call):
    result = sandbox.run(f"python3 -c \"{PROBE.format(call=call)}\"")
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.output.splitlines() if line.startswith("result")]
    _, rc, errno = line.split()
    assert rc == "-1" and errno in ("1", "38"), result.output  # EPERM, or ENOSYS for clone3


def test_the_filter_and_no_new_privs_are_inherited_and_ordinary_work_runs(sandbox):
    status = sandbox.run("grep -E '^(Uid|NoNewPrivs|Seccomp):' /proc/self/status").output
    assert "NoNewPrivs:\t1" in status and "Seccomp:\t2" in status and "\t65534\t" in status
    work = sandbox.run(
        "python3 -c 'import threading, subprocess, multiprocessing as m\n"
        "t = threading.Thread(target=print, args=(\"thread-ok\",)); t.start(); t.join()\n"
        "subprocess.run([\"echo\", \"spawn-ok\"])\n"
        "p = m.get_context(\"fork\").Process(target=print, args=(\"fork-ok\",)); p.start(); p.join()'; "
        "echo pipe | cat; (sleep 0 &) ; wait; echo shell-ok"
    )
    for word in ("thread-ok", "spawn-ok", "fork-ok", "pipe", "shell-ok"):
        assert word in work.output, work.output


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_a_compiler_still_builds_and_runs(sandbox):
    sandbox.write_file("main.c", '#include <stdio.h>\nint main(void) { puts("built"); return 0; }\n')
    result = sandbox.run("gcc -o main main.c && ./main")
    assert result.output.strip() == "built", result.output
