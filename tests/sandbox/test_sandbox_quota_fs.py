"""The workspace quota held by a filesystem of its size: no writer, however fast, leaves more than the quota.

Writers of every class an agent has (generated with random sizes: fallocate bursts, dd with big blocks, parallel
writers, sparse files made dense, one big write, mmap'd pages, hard links, reflinks, many small files, many
directories and links) run in the real sandboxes (bwrap and local, made by root); the workspace is measured while
the sandbox is open and again on the disk after the files went back. The writer sees ENOSPC (or SIGBUS for mmap),
the next command still runs, and the judge, the clean room and the snapshot read the workspace as before."""

from __future__ import annotations

import os
import random
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from mtl_graph.core.task import Task
from mtl_graph.judging.clean_room import discard_snapshot, pristine_path, take_snapshot
from mtl_graph.judging.ground_truth import run_check
from mtl_graph.sandbox import SandboxConfig, make_sandbox
from mtl_graph.sandbox.quota_fs import QuotaFilesystem, QuotaFilesystemUnavailable, mounted_size
from mtl_graph.sandbox.tree import remove_tree, walk
from helpers.sandbox_attack_kit import needs_bwrap, nobody_workspace, public_tmp, run_unprivileged, unprivileged_python

pytestmark = pytest.mark.filterwarnings("ignore:local sandbox")
MIB = 2**20
QUOTA_MB = 4
QUOTA = QUOTA_MB * MIB
SLACK = 64 * 1024  # what a filesystem of the quota's size may hold beyond the data: nothing, on tmpfs


def _mount_reason() -> str | None:
    if os.geteuid() != 0:
        return "mounting the workspace's filesystem needs root"
    probe = Path(tempfile.mkdtemp(prefix="mtl-quota-probe-"))
    try:
        QuotaFilesystem.open(probe, MIB).close()
    except QuotaFilesystemUnavailable as exc:
        return str(exc)
    finally:
        remove_tree(probe)
    return None


_REASON = _mount_reason()
needs_mount = pytest.mark.skipif(_REASON is not None, reason=f"no quota filesystem here: {_REASON}")
KINDS = [pytest.param("bwrap", marks=needs_bwrap), "local"]


def _size(rng: random.Random, low: float, high: float) -> int:
    return int(rng.uniform(low, high) * QUOTA)


def _python(code: str) -> str:
    return f"python3 -c {subprocess.list2cmdline([textwrap.dedent(code)])}"


# Each class writes several times the quota in one command, the sizes drawn for each case.
WRITER_CLASSES = {
    "fallocate": lambda r: "; ".join(f"fallocate -l {_size(r, 1.5, 6)} f{i}" for i in range(r.randint(2, 4))),
    "dd": lambda r: (lambda bs: f"dd if=/dev/zero of=d bs={bs} count={4 * QUOTA // bs + 1} status=none")(
        r.choice([MIB, 4 * MIB, 16 * MIB])),
    "parallel": lambda r: " ".join(f"head -c {_size(r, 0.5, 1.5)} /dev/zero > p{i} &" for i in range(r.randint(4, 12)))
    + " wait",
    "sparse_dense": lambda r: r.choice([
        f"truncate -s {_size(r, 3, 20)} s && cp --sparse=never s dense",
        f"truncate -s {_size(r, 3, 20)} s && dd if=/dev/zero of=s bs=1M conv=notrunc status=none count={4 * QUOTA_MB}",
        f"truncate -s {_size(r, 3, 20)} s && fallocate -l {_size(r, 2, 3)} s"]),
    "one_write": lambda r: _python(f"open('w', 'wb').write(b'x' * {_size(r, 2, 8)})"),
    "mmap": lambda r: _python(f"""
        import mmap, os
        size = {_size(r, 2, 8)}
        fd = os.open('m', os.O_RDWR | os.O_CREAT)
        os.ftruncate(fd, size)
        m = mmap.mmap(fd, size)
        for i in range(0, size, 4096):
            m[i] = 1
        m.flush()"""),
    "hard_links": lambda r: f"head -c {_size(r, 0.3, 0.9)} /dev/urandom > h && "
    f"for i in $(seq {r.randint(200, 2000)}); do ln h h$i || break; done; head -c {_size(r, 1, 2)} /dev/zero > more",
    "reflinks": lambda r: f"head -c {_size(r, 0.2, 0.5)} /dev/urandom > r && "
    f"for i in $(seq {r.randint(5, 20)}); do cp --reflink=auto r r$i || break; done",
    "small_files": lambda r: _python(f"""
        for i in range({r.randint(3000, 20000)}):
            open(f'n{{i}}', 'w').write('{"y" * r.randint(0, 100)}')"""),
    "dirs_and_links": lambda r: f"mkdir -p $(seq -f 'x/d%g' {r.randint(1500, 4000)}) 2>&1 | tail -1; "
    f"for i in $(seq {r.randint(1500, 3000)}); do ln -s {'t' * r.randint(1, 200)} l$i || break; done",
}
WRITERS = [(name, seed) for name in WRITER_CLASSES for seed in range(2)]


def _workspace() -> Path:
    base = Path(tempfile.mkdtemp(prefix="mtl-quota-fs-", dir=public_tmp()))
    os.chmod(base, 0o755)  # the local backend's uid 65534 walks the workspace's parents
    (base / "ws").mkdir()
    return base / "ws"


def disk_use(path: Path) -> tuple[int, int]:
    """(bytes of disk, entries) below path, each inode's blocks counted once (like du)."""
    seen: set[tuple[int, int]] = set()
    total = entries = 0

    def add(_fd: int, _name: str, st: os.stat_result) -> None:
        nonlocal total, entries
        entries += 1
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        walk(fd, add)
    finally:
        os.close(fd)
    return total, entries


def _config(**extra) -> SandboxConfig:
    return SandboxConfig(workspace_quota_mb=QUOTA_MB, timeout=60, **extra)


@needs_mount
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("writer,seed", WRITERS, ids=[f"{w}-{s}" for w, s in WRITERS])
def test_no_writer_leaves_more_than_the_quota(kind, writer, seed):
    command = WRITER_CLASSES[writer](random.Random(f"{writer}-{seed}"))
    ws = _workspace()
    try:
        (ws / "task.py").write_text("X = 1\n")
        with make_sandbox(kind, ws, _config()) as sandbox:
            assert sandbox.quota_filesystem is not None and sandbox.quota is None  # nothing polls
            result = sandbox.run(command)
            open_use, _ = disk_use(ws)
            assert open_use <= QUOTA + SLACK, (command, open_use)
            output = result.output
            assert "No space left on device" in output or result.exit_code == 135 or "Bus error" in output, \
                (command, result.exit_code, output[-500:])  # fmt: skip
        # What the writer left went back onto the disk no larger: holes stay holes, hard links stay links.
        assert mounted_size(ws) is None
        closed_use, _ = disk_use(ws)
        assert closed_use <= QUOTA + SLACK, (command, closed_use)
        with make_sandbox(kind, ws, _config()) as sandbox:  # the files go in again, and the next command runs
            after = sandbox.run("cat task.py; find . -mindepth 1 ! -name task.py -delete; echo fresh > after; cat after")
            assert after.exit_code == 0 and after.output.split() == ["X", "=", "1", "fresh"], after.output
            refill = sandbox.run(f"head -c {QUOTA // 2} /dev/zero > half && echo wrote")
            assert refill.output.startswith("wrote") and "full" not in refill.output
        assert (ws / "after").read_text() == "fresh\n" and (ws / "half").stat().st_size == QUOTA // 2
    finally:
        remove_tree(ws.parent)


@needs_mount
@pytest.mark.parametrize("kind", KINDS)
def test_the_observation_says_the_workspace_is_full(kind):
    ws = _workspace()
    try:
        with make_sandbox(kind, ws, _config()) as sandbox:
            result = sandbox.run(f"head -c {2 * QUOTA} /dev/zero > big")
            assert "No space left on device" in result.output
            assert f"the workspace is full: its filesystem holds its quota of {QUOTA_MB} MiB" in result.output
            assert "full" not in sandbox.run("rm big; echo gone").output
    finally:
        remove_tree(ws.parent)


@needs_mount
@needs_bwrap
def test_the_run_goes_on_to_its_verdict_after_a_flood(tmp_path):
    """Snapshot taken while the sandbox is open, the solution written beside a flood, the check in its clean room."""
    task = Task(id="q", instruction="set X to 2", check="python3 -m unittest -q test_mod", test_files=["test_mod.py"],
                files={"mod.py": "X = 1\n", "test_mod.py": "import unittest\nimport mod\n\nclass T(unittest.TestCase):\n"
                       "    def test_x(self):\n        self.assertEqual(mod.X, 2)\n"})  # fmt: skip
    ws = _workspace()
    try:
        task.materialize(ws)
        with make_sandbox("bwrap", ws, _config()) as sandbox:
            take_snapshot(ws)
            assert (pristine_path(ws) / "mod.py").read_text() == "X = 1\n"
            flood = sandbox.run(f"fallocate -l {8 * QUOTA} a; dd if=/dev/zero of=b bs=8M count=4 status=none")
            assert "No space left on device" in flood.output
            sandbox.run("rm -f a b")
            assert sandbox.run("echo 'X = 2' > mod.py && cat mod.py").output.startswith("X = 2")
            assert sandbox.read_file("mod.py") == "X = 2\n"
        verdict = run_check(task, ws, lambda room: make_sandbox("bwrap", room, _config(bwrap_persistent=False)))
        assert verdict.status == "pass", verdict.reason
    finally:
        discard_snapshot(ws)
        remove_tree(ws.parent)


@needs_mount
@pytest.mark.parametrize("kind", KINDS)
def test_files_go_in_and_come_back_as_they_were(kind):
    ws = _workspace()
    try:
        (ws / "src").mkdir()
        (ws / "src" / "run.sh").write_text("#!/bin/sh\necho ran\n")
        os.chmod(ws / "src" / "run.sh", 0o755)
        os.utime(ws / "src" / "run.sh", (1_000_000, 1_000_000))
        (ws / "link").symlink_to("src/run.sh")
        os.mkfifo(ws / "fifo")
        with make_sandbox(kind, ws, _config()) as sandbox:
            assert not (ws / "fifo").exists()  # special files are not copied in
            result = sandbox.run("./link && stat -c %Y src/run.sh && truncate -s 1G sparse && head -c 1M /dev/urandom"
                                 " > data && ln data data2 && cp data suid && chmod 4755 suid && mkfifo pipe"
                                 " && ln -s /etc/shadow shadow && mkdir -p $(printf 'd/%.0s' $(seq 200)) && echo end"
                                 " > $(printf 'd/%.0s' $(seq 200))end")  # fmt: skip
            assert result.output.split() == ["ran", "1000000"], result.output
        shadow_before = os.stat("/etc/shadow") if os.path.exists("/etc/shadow") else None
        assert (ws / "sparse").stat().st_size == 2**30 and (ws / "sparse").stat().st_blocks == 0  # still a hole
        assert (ws / "data").stat().st_nlink == 2 and (ws / "data").stat().st_ino == (ws / "data2").stat().st_ino
        assert (ws / "data").read_bytes() == (ws / "data2").read_bytes()
        assert not (ws / "suid").stat().st_mode & (stat.S_ISUID | stat.S_ISGID)
        assert not (ws / "pipe").exists() and not (ws / "fifo").exists()
        assert (ws / "shadow").is_symlink() and os.readlink(ws / "shadow") == "/etc/shadow"  # a link, not followed
        if shadow_before is not None:
            assert os.stat("/etc/shadow") == shadow_before
        assert (ws / ("d/" * 200) / "end").read_text() == "end\n"
        assert (ws / "src" / "run.sh").stat().st_mtime == 1_000_000 and os.access(ws / "src" / "run.sh", os.X_OK)
        assert (ws / "data").stat().st_uid == (65534 if os.geteuid() == 0 else os.geteuid())
        assert ws.stat().st_uid == 65534  # the workspace stays the commands' uid's, as a polled one does
    finally:
        remove_tree(ws.parent)


@needs_mount
def test_files_over_the_quota_at_open_fall_back_to_polling():
    ws = _workspace()
    try:
        (ws / "big").write_bytes(b"z" * (QUOTA + MIB))
        (ws / "small").write_text("kept\n")
        with make_sandbox("local", ws, _config()) as sandbox:
            assert sandbox.quota_filesystem is None and sandbox.quota is not None
            assert "do not fit" in sandbox.quota_polled_because
            assert mounted_size(ws) is None
            assert "over its quota" in sandbox.run("echo x > y").output  # the poll's shrink-only mode holds it
        assert (ws / "small").read_text() == "kept\n" and (ws / "big").stat().st_size == QUOTA + MIB
    finally:
        remove_tree(ws.parent)


@needs_mount
def test_sandboxes_on_one_workspace_share_it_and_the_last_one_copies_back():
    ws = _workspace()
    try:
        first = make_sandbox("local", ws, _config())
        second = make_sandbox("local", ws, _config())
        assert first.quota_filesystem is second.quota_filesystem
        first.run("echo one > one")
        first.close()
        assert mounted_size(ws) == QUOTA  # the second is still open on it
        assert "No space left on device" in second.run(f"head -c {2 * QUOTA} /dev/zero > big").output
        second.run("rm big; cat one > two")
        second.close()
        assert mounted_size(ws) is None and (ws / "two").read_text() == "one\n"
        with pytest.raises(QuotaFilesystemUnavailable, match="more than"):  # a larger one would not hold this quota
            held = QuotaFilesystem.open(ws, 2 * QUOTA)
            try:
                QuotaFilesystem.open(ws, QUOTA)
            finally:
                held.close()
    finally:
        remove_tree(ws.parent)


@needs_mount
def test_a_mount_left_by_a_killed_process_is_adopted_with_its_files():
    ws = _workspace()
    child = textwrap.dedent(f"""
        import os, warnings
        warnings.simplefilter('ignore')
        from mtl_graph.sandbox import SandboxConfig, make_sandbox
        sandbox = make_sandbox('local', {str(ws)!r}, SandboxConfig(workspace_quota_mb={QUOTA_MB}))
        assert sandbox.run('echo work > work').exit_code == 0
        os._exit(0)  # killed before it closed: no finalizer runs
    """)
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        subprocess.run([sys.executable, "-c", child], check=True, env=env, timeout=60)
        assert mounted_size(ws) == QUOTA and (ws / "work").read_text() == "work\n"
        with make_sandbox("local", ws, _config()) as sandbox:
            assert sandbox.quota_filesystem is not None
            assert sandbox.run("cat work").output.strip() == "work"
        assert mounted_size(ws) is None and (ws / "work").read_text() == "work\n"
        subprocess.run([sys.executable, "-c", child], check=True, env=env, timeout=60)
        assert mounted_size(ws) == QUOTA
        assert remove_tree(ws.parent) and mounted_size(ws) is None  # removing the tree discards a mount left in it
    finally:
        remove_tree(ws.parent)


@needs_mount
@pytest.mark.parametrize("kind", KINDS)
def test_commands_cannot_unmount_or_grow_it(kind):
    ws = _workspace()
    try:
        with make_sandbox(kind, ws, _config()) as sandbox:
            result = sandbox.run("umount -l . ; mount -o remount,size=1G . ; umount -l $PWD; df -k --output=size . "
                                 "| tail -1")  # fmt: skip
            assert result.output.split()[-1] == str(QUOTA // 1024), result.output
            assert "No space left on device" in sandbox.run(f"fallocate -l {2 * QUOTA} f").output
    finally:
        remove_tree(ws.parent)


def test_with_the_filesystem_off_the_quota_is_polled_and_says_why():
    ws = _workspace()
    try:
        with make_sandbox("local", ws, _config(workspace_filesystem=False)) as sandbox:
            assert sandbox.quota_filesystem is None and sandbox.quota is not None
            assert sandbox.quota_polled_because == "workspace_filesystem is off"
    finally:
        remove_tree(ws.parent)


_nobody = unprivileged_python()


@pytest.mark.skipif(isinstance(_nobody, str), reason=str(_nobody))
@pytest.mark.parametrize("kind", KINDS)
def test_as_a_user_the_sandbox_falls_back_to_polling_by_itself(kind):
    """No mount without root: the same config polls, and the poll's shrink-only mode follows the overshoot."""
    ws = nobody_workspace()
    try:
        first, second = run_unprivileged(kind, ws, [f"fallocate -l {4 * QUOTA} a; echo done", "echo x > y"],
                                         config={"workspace_quota_mb": QUOTA_MB}, timeout=60)
        assert "over its quota" in first["output"] and "No space left on device" not in first["output"]
        assert "file writes refused" in second["output"]
    finally:
        remove_tree(ws.parent)
