"""Escape attempts against every backend that runs here, as the caller (root in CI) and as uid 65534.

Each test states what the backend guarantees: where a backend does not contain an attack (the local backend
shares the host's filesystem, network and process table), the test asserts that the attack still works, so the
table in docs/security.md cannot drift from the truth.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from mtl_graph.sandbox import SandboxConfig, make_sandbox
from mtl_graph.sandbox.workspace import disk_usage
from helpers.sandbox_attack_kit import (
    needs_bwrap,
    NOBODY,
    kill_leftovers,
    marker,
    nobody_workspace,
    processes_with,
    run_unprivileged,
    start_child,
    unprivileged_python,
    wait_gone,
    wait_started,
)

pytestmark = pytest.mark.filterwarnings("ignore:local sandbox")

ROOT = os.geteuid() == 0
_unpriv = unprivileged_python()
needs_nobody = pytest.mark.skipif(isinstance(_unpriv, str), reason=str(_unpriv))
CASES = [
    pytest.param((kind, mode), id=f"{kind}-{mode}", marks=[m for m in (
        needs_bwrap if kind == "bwrap" else None, needs_nobody if mode == "nobody" else None) if m])
    for kind in ("bwrap", "local") for mode in ("caller", "nobody")
]  # fmt: skip


@dataclass
class Attacker:
    """Runs commands in a sandbox of kind, made by this process (caller) or by a child of uid 65534 (nobody)."""

    kind: str
    mode: str
    workspace: Path

    @property
    def same_user_as_host(self) -> bool:
        """Local commands run with the sandbox owner's own uid: nothing separates them from its files."""
        return self.kind == "local" and (self.mode == "nobody" or not ROOT)

    def run(self, *commands: str, config: dict | None = None, timeout: float = 30, env: dict | None = None):
        if self.mode == "nobody":
            return run_unprivileged(self.kind, self.workspace, list(commands), config=config, timeout=timeout, env=env)
        with make_sandbox(self.kind, self.workspace, SandboxConfig(**(config or {}))) as sb:
            return [sb.run(c, timeout=timeout).model_dump() for c in commands]


@pytest.fixture(params=CASES)
def attacker(request, tmp_path):
    kind, mode = request.param
    workspace = nobody_workspace() if mode == "nobody" else tmp_path / "ws"
    yield Attacker(kind, mode, workspace)
    if mode == "nobody":
        shutil.rmtree(workspace.parent, ignore_errors=True)


@pytest.fixture
def private_dir():
    """A directory outside /tmp (which bwrap replaces), so only the sandbox's own rules hide it."""
    path = Path(tempfile.mkdtemp(prefix="mtl-attack-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_commands_run_unprivileged_without_capabilities(attacker):
    (out,) = attacker.run("id -u; grep CapEff /proc/self/status; ulimit -u", config={"max_processes": 77})
    uid, caps, nproc = out["output"].split("\n")[:3]
    assert caps.split()[-1] == "0000000000000000"
    assert nproc == "77"
    if attacker.mode == "nobody" or ROOT:
        assert uid == str(NOBODY)


@needs_bwrap
@pytest.mark.parametrize("mode", ["caller", pytest.param("nobody", marks=needs_nobody)])
def test_bwrap_refuses_nested_user_namespaces_but_not_threads_or_processes(mode, tmp_path):
    attacker = Attacker("bwrap", mode, nobody_workspace() if mode == "nobody" else tmp_path / "ws")
    (out,) = attacker.run(
        "unshare -r id; unshare -rm id; echo unshare=$?; "
        "python3 -c 'import threading, subprocess; t = threading.Thread(target=print, args=(\"thread-ok\",)); "
        "t.start(); t.join(); subprocess.run([\"echo\", \"spawn-ok\"])'"
    )
    assert "uid=0" not in out["output"] and "unshare=1" in out["output"]
    assert "thread-ok" in out["output"] and "spawn-ok" in out["output"]


def test_remount_root_read_write_then_write_a_host_file(attacker):
    name = f"mtl-pwned-{marker()}"
    targets = [Path("/usr") / name, Path("/etc") / name, Path("/") / name]
    writes = "; ".join(f"echo pwned > {t}" for t in targets)
    command = (
        "mount -o remount,bind,rw / ; mount -o remount,bind,rw /usr; mount -o remount,rw /etc; "
        f"{writes}; unshare -rm sh -c 'mount -o remount,bind,rw /usr; echo pwned > {targets[0]}'; true"
    )
    try:
        attacker.run(command)
        assert not [t for t in targets if t.exists()]
    finally:
        for t in targets:
            t.unlink(missing_ok=True)


def test_unmount_the_mask_over_ssh_then_read_the_key(attacker, private_dir, monkeypatch):
    home = private_dir / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN KEY mtl-attack-key-material")
    (home / "notes.txt").write_text("plain notes")
    owner = NOBODY if attacker.mode == "nobody" else os.geteuid()
    for path in (home, home / ".ssh", home / ".ssh" / "id_rsa", home / "notes.txt"):
        os.chown(path, owner, owner)
    os.chmod(home, 0o755), os.chmod(home / ".ssh", 0o700), os.chmod(home / ".ssh" / "id_rsa", 0o600)
    monkeypatch.setenv("HOME", str(home))
    # bwrap gets the home as a toolchain directory, so the key is behind a mask the attack tries to remove
    config = {"toolchain_paths": [str(home)]}
    read = f"cat {home}/.ssh/id_rsa; cat {home}/notes.txt"
    attack = f"umount {home}/.ssh; umount -l {home}/.ssh; unshare -rm sh -c 'umount -l {home}/.ssh; {read}'; {read}"
    (out,) = attacker.run(attack, config=config, env={"HOME": str(home)})
    if attacker.same_user_as_host:
        assert "mtl-attack-key-material" in out["output"]  # not contained: the user's own files
        return
    assert "mtl-attack-key-material" not in out["output"]
    if attacker.kind == "bwrap":
        assert "plain notes" in out["output"]  # the directory was there, only the key hidden


def test_unmount_proc_to_see_host_processes(attacker):
    tag = marker()
    host = subprocess.Popen(["sleep", tag])
    try:
        (out,) = attacker.run(
            # the sleep's argument on its own line, matched without writing the tag into this command line
            "umount -l /proc; unshare -rm sh -c 'umount -l /proc; cat /proc/[0-9]*/cmdline' | tr '\\0' '\\n'"
            " | grep -E '^[0-9]{5}[.][0-9]{3}$'; cat /proc/[0-9]*/cmdline | tr '\\0' '\\n' | grep -E '^[0-9]{5}[.][0-9]{3}$'"
        )
    finally:
        host.kill()
        host.wait()
    if attacker.kind == "local":
        assert tag in out["output"]  # not contained: the host's process table is the command's
    else:
        assert tag not in out["output"]


def test_connect_to_a_host_unix_socket(attacker, private_dir):
    path = private_dir / "agent.sock"
    abstract = f"\0mtl-attack-{marker()}"
    servers = []
    for address in (str(path), abstract):
        server = socket.socket(socket.AF_UNIX)
        server.bind(address)
        server.listen(4)
        servers.append(server)
    os.chmod(private_dir, 0o755), os.chmod(path, 0o777)
    probe = (
        'import socket, sys; a = sys.argv[1]; a = "\\0" + a[1:] if a[0] == "@" else a; '
        "s = socket.socket(socket.AF_UNIX); s.connect(a); print(sys.argv[2])"
    )
    try:
        (out,) = attacker.run(
            f"python3 -c '{probe}' {path} PATH-CONNECTED; python3 -c '{probe}' @{abstract[1:]} ABSTRACT-CONNECTED"
        )
    finally:
        for server in servers:
            server.close()
    if attacker.kind == "local":  # not contained: the host's sockets are reachable
        assert "PATH-CONNECTED" in out["output"] and "ABSTRACT-CONNECTED" in out["output"]
    else:
        assert "CONNECTED" not in out["output"]


def test_read_the_parent_environment(attacker, monkeypatch):
    monkeypatch.setenv("MTL_ATTACK_SECRET", "sk-parent-secret")
    secret_env = {"MTL_ATTACK_SECRET": "sk-parent-secret"}
    parent, scan = attacker.run(
        "tr '\\0' '\\n' < /proc/$PPID/environ",
        "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done 2>/dev/null | grep MTL_ATTACK_SECRET",
        env=secret_env,
    )
    assert "sk-parent-secret" not in parent["output"]  # the supervisor is started with a minimal environment
    if attacker.same_user_as_host:
        assert "sk-parent-secret" in scan["output"]  # not contained: the host process is the same user's
    else:
        assert "sk-parent-secret" not in scan["output"]


ESCAPES = "setsid sleep {t} & nohup sleep {t} >/dev/null 2>&1 & (sleep {t} &); (setsid sh -c 'sleep {t} &' &); " \
          "(set -m; sleep {t} &); disown -a; echo started"  # fmt: skip
ESCAPEES = ESCAPES.count("sleep {t}")


def test_setsid_nohup_double_fork_leave_no_orphan(attacker):
    tag = marker()
    try:
        (out,) = attacker.run(ESCAPES.format(t=tag))
        assert out["exit_code"] == 0 and "started" in out["output"]
        assert wait_gone(tag) == []
    finally:
        kill_leftovers(tag)


def test_no_orphan_after_a_timeout(attacker):
    tag = marker()
    try:
        (out,) = attacker.run(ESCAPES.format(t=tag) + f"; sleep {tag}", timeout=1)
        assert out["timed_out"] and out["exit_code"] == 124
        assert wait_gone(tag) == []
    finally:
        kill_leftovers(tag)


@pytest.mark.parametrize("kind", [pytest.param("bwrap", marks=needs_bwrap), "local"])
@pytest.mark.parametrize("mode", ["caller", pytest.param("nobody", marks=needs_nobody)])
def test_no_orphan_when_the_parent_is_killed(kind, mode, tmp_path):
    tag = marker()
    command = ESCAPES.format(t=tag) + f"; sleep {tag}"
    workspace = nobody_workspace() if mode == "nobody" else tmp_path / "ws"
    proc = start_child(kind, workspace, [command], timeout=600, as_nobody=mode == "nobody")
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        # every escapee and the command's own last sleep (each a `sleep <tag>` once exec'd), however loaded
        started = wait_started(f"sleep {tag}", ESCAPEES + 1, proc)
        if len(started) < ESCAPEES + 1:
            proc.kill()
            pytest.fail(f"the command started {len(started)} of its {ESCAPEES + 1} sleeps: "
                        f"{proc.communicate()[1][-2000:]}")
        proc.kill()
        proc.wait()
        assert wait_gone(tag) == []
    finally:
        kill_leftovers(tag)
        if mode == "nobody":
            shutil.rmtree(workspace.parent, ignore_errors=True)


def test_fork_bomb_is_contained_and_the_host_survives(attacker):
    limit = 48
    config = {"max_processes": limit}
    (check,) = attacker.run("id -u; ulimit -u", config=config)
    uid, nproc = check["output"].split()[:2]
    # Only bomb when the limit binds: RLIMIT_NPROC does nothing for uid 0
    if uid == "0" or nproc != str(limit):
        pytest.fail(f"the process limit would not hold (uid {uid}, ulimit -u {nproc}); not running the bomb")
    tag = marker()
    try:
        (out,) = attacker.run(f": {tag}; bomb() {{ bomb | bomb & }}; bomb; sleep 2", config=config, timeout=3)
        assert "Resource temporarily unavailable" in out["output"]
        assert wait_gone(tag) == []
    finally:
        kill_leftovers(tag)
    (after,) = attacker.run("echo alive")
    assert after["output"] == "alive\n"


@needs_bwrap
@pytest.mark.parametrize("mode", ["caller", pytest.param("nobody", marks=needs_nobody)])
def test_filling_the_temp_directories_stops_at_their_size(mode, tmp_path):
    attacker = Attacker("bwrap", mode, nobody_workspace() if mode == "nobody" else tmp_path / "ws")
    (out,) = attacker.run(
        "head -c 64M /dev/zero > /tmp/fill; head -c 64M /dev/zero > /dev/shm/fill; "
        "du -sk /tmp/fill /dev/shm/fill",
        config={"tmp_size_mb": 8},
    )
    assert out["output"].count("No space left on device") == 2
    sizes = [int(line.split()[0]) for line in out["output"].splitlines() if line.endswith("fill")]
    assert len(sizes) == 2 and all(size <= 8 * 1024 for size in sizes)


def test_filling_the_workspace_stops_near_its_quota(attacker):
    config = {"workspace_quota_mb": 8, "max_file_size_mb": 4}
    big, fill = attacker.run(
        "head -c 16M /dev/zero > big",
        "for i in $(seq 400); do head -c 1M /dev/zero > f$i || exit 1; done; echo finished",
        config=config,
    )
    assert "File too large" in big["output"] or big["exit_code"] != 0
    assert (attacker.workspace / "big").stat().st_size <= 4 * 2**20
    # polled (not root): the command is stopped over its quota; on the quota filesystem (root) the writes fail
    assert "over its quota" in fill["output"] or "the workspace is full" in fill["output"]
    # without the watch the loop writes 400 MiB; it is stopped within a poll of crossing 8 MiB
    assert disk_usage(attacker.workspace) < 200 * 2**20
