"""The polled workspace quota (QuotaWatch: where no filesystem of the quota's size can be mounted, or with
``workspace_filesystem`` off) holds across commands: once over it, commands run shrink-only until it is back under.

Writers of every kind the agent has (generated: shell redirections, dd, fallocate, Python, tee, appends, many
files, nested directories, attempts to lift the file-size limit first) each try to write past the quota, command
after command, in the real sandboxes (bwrap and local; made by root, whose commands run as uid 65534, and by
uid 65534 itself). What the commands after the first over it add is bounded by the slack, and each one's
observation says why it could not write."""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path
import pytest

from mtl_graph.sandbox import SandboxConfig, make_sandbox
from mtl_graph.sandbox.local import QUOTA_REFUSED_EXIT_CODE
from mtl_graph.sandbox.tree import remove_tree
from mtl_graph.sandbox.workspace import SHRINK_ONLY_SLACK, QuotaWatch, _free_bytes
from helpers.sandbox_attack_kit import needs_bwrap, nobody_workspace, public_tmp, run_unprivileged, unprivileged_python

pytestmark = pytest.mark.filterwarnings("ignore:local sandbox")
MIB = 2**20
QUOTA_MB, WRITE_MB = 2, 3
CONFIG = {"workspace_quota_mb": QUOTA_MB, "max_file_size_mb": 4, "timeout": 60, "workspace_filesystem": False}
MEASURE = "du -s -B1 . | cut -f1"
_nobody = unprivileged_python()
needs_nobody = pytest.mark.skipif(isinstance(_nobody, str), reason=str(_nobody))
CASES = [pytest.param(kind, mode, id=f"{kind}-{mode}",
                      marks=[m for m in (needs_bwrap if kind == "bwrap" else None,
                                         needs_nobody if mode == "nobody" else None) if m])
         for kind in ("bwrap", "local") for mode in ("caller", "nobody")]  # fmt: skip

WRITERS = [
    "head -c {size} /dev/zero > w{n}",
    "dd if=/dev/zero of=w{n} bs=64K count={blocks} status=none",
    "fallocate -l {size} w{n}",
    "python3 -c \"open('w{n}', 'wb').write(b'x' * {size})\"",
    "mkdir -p s{n}/a/b && head -c {size} /dev/urandom > s{n}/a/b/f",
    "for i in 1 2 3 4; do head -c {quarter} /dev/zero > m{n}-$i; done",
    "head -c {size} /dev/zero | tee t{n}a t{n}b > /dev/null",
    "head -c {half} /dev/zero >> a{n}; head -c {half} /dev/zero >> a{n}",
    "ulimit -f unlimited; head -c {size} /dev/zero > u{n}",
    "prlimit --pid $$ --fsize=unlimited; head -c {size} /dev/zero > u{n}",
    "python3 -c \"import resource as r\ntry: r.setrlimit(r.RLIMIT_FSIZE, (-1, -1))\nexcept Exception: pass\n"
    "open('p{n}', 'wb').write(b'x' * {size})\"",
    "exec 3> e{n}; head -c {size} /dev/zero >&3",
]


def writer(template: str, n: int) -> str:
    size = WRITE_MB * MIB
    return template.format(n=n, size=size, blocks=size // 65536, quarter=size // 4, half=size // 2)


def run_commands(kind: str, mode: str, commands: list[str], config: dict | None = None) -> list[dict]:
    config = {**CONFIG, **(config or {})}
    if mode == "nobody":
        workspace = nobody_workspace()
        try:
            return run_unprivileged(kind, workspace, commands, config=config, timeout=60)
        finally:
            remove_tree(workspace.parent)
    # Not under pytest's own directory: another pytest session starting makes it 0700 again, and the local
    # backend's uid 65534 must traverse the workspace's parents.
    base = Path(tempfile.mkdtemp(prefix="mtl-quota-", dir=public_tmp()))
    try:
        with make_sandbox(kind, base / "ws", SandboxConfig(**config)) as sb:
            return [sb.run(c).model_dump() for c in commands]
    finally:
        remove_tree(base)


def usage(result: dict) -> int:
    return int(result["output"].strip().splitlines()[-1])


@pytest.mark.parametrize("kind,mode", CASES)
def test_commands_after_the_quota_is_crossed_cannot_grow_the_workspace(kind, mode):
    rng = random.Random(f"{kind}-{mode}")
    templates = rng.sample(WRITERS, len(WRITERS))
    # A directory its owner may list but not search, one it may not open: a host of uid 65534 measures around them.
    commands = ["mkdir -p locked/sealed && echo x > locked/sealed/f && chmod 000 locked/sealed && chmod 444 locked",
                writer(templates[0], 0), MEASURE]
    for n, template in enumerate(templates[1:], 1):
        commands += [writer(template, n), MEASURE]
    results = run_commands(kind, mode, commands)
    assert results[0]["exit_code"] == 0, results[0]
    results = results[1:]
    crossed = usage(results[1])
    assert crossed > QUOTA_MB * MIB, results[0]
    assert "over its quota" in results[0]["output"]
    # Without the shrink-only mode each writer adds 3 MiB: 12 of them, 36 MiB.
    assert usage(results[-1]) <= crossed + SHRINK_ONLY_SLACK, [r["output"][-300:] for r in results]
    for template, result in zip(templates[1:], results[2::2]):
        assert result["output"].startswith("[the workspace uses "), (template, result["output"])
        assert "file writes refused" in result["output"].splitlines()[0]
        assert result["exit_code"] != QUOTA_REFUSED_EXIT_CODE  # they ran, only their writes were refused


@pytest.mark.parametrize("kind,mode", CASES)
def test_deleting_files_brings_the_sandbox_back(kind, mode):
    results = run_commands(kind, mode, [
        "echo kept > /tmp/marker; head -c 3M /dev/zero > big",
        "head -c 10K /dev/zero > small; echo $?",
        "ls; rm big; echo removed",
        "head -c 1M /dev/zero > after && echo wrote; cat /tmp/marker",
    ])
    over, refused, removed, after = (r["output"] for r in results)
    assert "next commands run with file writes refused" in over
    assert refused.startswith("[the workspace uses ") and refused.rstrip().splitlines()[-1] == "153"  # SIGXFSZ
    assert "big" in removed and "removed" in removed and removed.rstrip().endswith("back under its quota]")
    assert after.startswith("wrote") and "quota" not in after
    if kind == "bwrap":  # the persistent sandbox was not restarted by the mode change: its /tmp is the same
        assert after.rstrip().endswith("kept")


@pytest.mark.parametrize("kind,mode", CASES)
def test_growing_it_without_writing_data_locks_the_sandbox(kind, mode):
    """Directories need no file-size limit: past the slack, every later command is refused, not run."""
    results = run_commands(kind, mode, [
        "head -c 3M /dev/zero > big",
        "mkdir $(seq -f d%g 2000)",  # one process: thousands of directories, no data
        MEASURE,
        "rm -rf big d*; echo ran",
    ])
    for result in results[2:]:
        assert result["exit_code"] == QUOTA_REFUSED_EXIT_CODE
        assert result["output"].startswith("[refused: ") and "runs no more commands" in result["output"]
        assert "ran" not in result["output"]


def test_another_writer_freeing_disk_space_cannot_hide_a_command_crossing_the_quota(tmp_path):
    """The free-space poll is shared with every writer on the disk: one freeing more than the command wrote made
    the crossing invisible, and the next commands ran with writes allowed. The command's end measures instead."""
    workspace, elsewhere = tmp_path / "ws", tmp_path / "other"
    workspace.mkdir()
    other_file = elsewhere / "cache.bin"
    elsewhere.mkdir()
    other_file.write_bytes(b"\1" * (4 * WRITE_MB * MIB))  # real blocks, freed during the command
    watch = QuotaWatch(workspace, QUOTA_MB)
    assert watch.begin() is None and not watch.shrink_only
    (workspace / "big").write_bytes(b"\1" * (WRITE_MB * MIB))  # the command's write
    other_file.unlink()  # another process on the same disk, at the same time
    os.sync()
    assert watch.free - _free_bytes(workspace) <= 0  # the poll sees no space lost: it cannot tell
    note = watch.end()
    assert note is not None and "over its quota" in note and "writes refused" in note
    assert watch.begin() is None and watch.shrink_only
