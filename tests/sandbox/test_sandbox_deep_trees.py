"""Trees the agent shapes to break the host's walks: thousands of levels deep, paths past PATH_MAX, names that are
not UTF-8, links out of the workspace, directories it locked. Made by real commands in the real sandbox; the
host measures, hands over and removes them (sandbox/tree.py) without recursion, without following a link, as
root and as uid 65534."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mtl_graph.sandbox import SandboxConfig, make_sandbox
from mtl_graph.sandbox.tree import KEEP_OPEN, remove_tree, walk
from mtl_graph.sandbox.workspace import disk_usage, hand_over
from helpers.sandbox_attack_kit import NOBODY, needs_bwrap, nobody_workspace, run_unprivileged, unprivileged_python

# Run inside the sandbox: a chain of directories, names cycling through a plain one, one that is not UTF-8 and
# one of 255 bytes; every so often links out (absolute, to its parent, to /), a fifo and a file; on the way back
# up, some levels locked (read-only, or no access at all).
BUILD = r"""
import os, sys
depth, outside = int(sys.argv[1]), sys.argv[2]
names = [b"d", b"\xff\xfe", b"n" * 255]
for i in range(depth):
    os.mkdir(names[i % 3]); os.chdir(names[i % 3])
    if i % 397 == 5:
        os.symlink(outside, "out"); os.symlink("..", "up"); os.symlink("/", "root"); os.mkfifo("fifo")
        with open("data", "w") as fh: fh.write("x" * 5000)
        os.mkdir("sealed"); open("sealed/inside", "w").close(); os.chmod("sealed", 0)
for i in range(depth):
    os.chdir("..")
    if i % 211 == 3: os.chmod(".", 0o500)
print("built", depth)
"""


def build_command(depth: int, outside: Path) -> str:
    return f"python3 -c '{BUILD}' {depth} {outside}"


def canary(tmp: Path) -> Path:
    """A host directory the agent's links point to: a walk following one would empty it."""
    target = tmp / "canary"
    target.mkdir(exist_ok=True)
    (target / "keep").write_text("must survive")
    return target


def deepest(workspace: Path) -> int:
    """Levels of directories below workspace, counted with the same walk (and checked with fstat, not paths)."""
    levels = 0

    def visit(fd, name, st):
        nonlocal levels
        if stat.S_ISDIR(st.st_mode) and name in ("d", "\udcff\udcfe", "n" * 255):
            levels += 1

    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        walk(fd, visit)
    finally:
        os.close(fd)
    return levels


@needs_bwrap
@pytest.mark.parametrize("depth", [5_000])  # 1,500 levels are made by the run and unprivileged tests below
def test_a_deep_tree_the_agent_made_is_measured_and_removed(tmp_path, depth):
    target = canary(tmp_path)
    workspace = tmp_path / "ws"
    with make_sandbox("bwrap", workspace, SandboxConfig(timeout=300)) as sandbox:
        result = sandbox.run(build_command(depth, target))
        assert result.exit_code == 0 and f"built {depth}" in result.output, result.output
    assert deepest(workspace) == depth  # every level walked, none twice, no link followed
    assert disk_usage(workspace) > depth * 4096 * 0.9
    if os.geteuid() == 0:
        hand_over(workspace, NOBODY, NOBODY)
    assert remove_tree(workspace) is True
    assert not os.path.lexists(workspace)
    assert (target / "keep").read_text() == "must survive" and tmp_path.is_dir()


REMOVE_AS_NOBODY = r"""
import json, os, sys
from mtl_graph.sandbox.tree import remove_tree
from mtl_graph.sandbox.workspace import disk_usage
ws = sys.argv[1]
used = disk_usage(ws)
print(json.dumps({"used": used, "removed": remove_tree(ws), "left": os.path.lexists(ws)}))
"""


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to switch to uid 65534")
def test_an_unprivileged_host_removes_what_its_sandbox_locked(tmp_path):
    """As uid 65534 the host has no override of permissions: sealed (mode 000) and read-only directories at any
    depth are unlocked through the walk's own descriptors, and the rest still goes."""
    found = unprivileged_python()
    if isinstance(found, str):
        pytest.skip(found)
    exe, pythonpath = found
    workspace = nobody_workspace()
    target = canary(workspace.parent)
    [result] = run_unprivileged("bwrap", workspace, [build_command(1_500, target)], config={"timeout": 300})
    assert result["exit_code"] == 0, result["output"]
    assert os.stat(workspace / "d").st_uid == NOBODY  # made by the sandbox's uid
    os.chown(workspace.parent, NOBODY, NOBODY)  # so that uid may remove the workspace itself too
    proc = subprocess.run([exe, "-s", "-c", REMOVE_AS_NOBODY, str(workspace)], capture_output=True, text=True,
                          env={"PYTHONPATH": pythonpath, "PATH": os.defpath}, user=NOBODY, group=NOBODY,
                          extra_groups=[], cwd="/", timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["used"] > 0 and report == {**report, "removed": True, "left": False}
    assert (target / "keep").read_text() == "must survive"
    remove_tree(workspace.parent)


def test_a_link_given_as_the_tree_is_removed_not_followed(tmp_path):
    target = canary(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(target, target_is_directory=True)
    assert remove_tree(link) is True
    assert not os.path.lexists(link) and (target / "keep").is_file()
    assert remove_tree(tmp_path / "absent") is True


def test_a_host_made_deep_tree_is_handed_over_whole(tmp_path):
    """Task files nested deeper than recursion allows are all given to the commands' uid (root only)."""
    if os.geteuid() != 0:
        pytest.skip("hand_over changes owners only as root")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    depth = 1_500
    assert depth > sys.getrecursionlimit() and depth > KEEP_OPEN  # a recursive walk, or one fd a level, would fail
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("level", dir_fd=fd)
        child = os.open("level", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(os.open("leaf", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    os.close(fd)
    hand_over(workspace, NOBODY, NOBODY)
    owners = set()
    top = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        walk(top, lambda _fd, _name, st: owners.add(st.st_uid))
    finally:
        os.close(top)
    assert owners == {NOBODY}
    assert remove_tree(workspace) and not workspace.exists()


@pytest.fixture(scope="module")
def deep_run(embeddings, tmp_path_factory):
    """One run of the graph whose agent makes a 1,500-deep tree, then hello.txt: (its final state, its workspace
    root, its directory); the tests below read it, none changes it."""
    from mtl_graph.memory.pool.pool import MemoryPool

    tmp_path = tmp_path_factory.mktemp("deep-run")
    with pytest.MonkeyPatch.context() as env:  # as the per-test settings have it: no MTL_ variable steers the run
        for name in [n for n in os.environ if n.startswith("MTL_")]:
            env.delenv(name)
        env.setenv("MTL_POOL", str(tmp_path / "default-pool"))
        env.setenv("MTL_RUN_LOG", str(tmp_path / "runs.jsonl"))
        with MemoryPool.open(tmp_path / "pool", embeddings) as pool:
            final, root = run_deep(pool, tmp_path, 1_500)
    return final, root, tmp_path


def run_deep(pool, tmp_path, depth: int):
    from langchain_core.messages import AIMessage

    from mtl_graph.llm.scripted import ScriptedChatModel, bash_call, submit_call
    from mtl_graph.pipeline import build_mtl_graph
    from mtl_graph.core.task import Task

    task = Task(id="deep", domain="shell", instruction="Create hello.txt containing hi.",
                check="grep -qx hi hello.txt")
    model = ScriptedChatModel(responses=[AIMessage("Plan: make hello.txt."),
                                         bash_call(build_command(depth, canary(tmp_path)) + " && echo hi > hello.txt"),
                                         submit_call("done")])
    root = tmp_path / "workspaces"
    graph = build_mtl_graph(model, pool, memory_type="none", run_log=tmp_path / "runs.jsonl", workspace_root=root)
    return graph.invoke({"task": task}), root


@needs_bwrap
def test_a_run_whose_agent_made_a_deep_tree_leaves_no_workspace(deep_run):
    final, root, tmp_path = deep_run
    assert final["trajectory"]["steps"][0]["exit_code"] == 0
    assert list(root.iterdir()) == []  # removed after write back, whatever the verdict
    [record] = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert record["run_id"] == final["run_id"]
    assert (tmp_path / "canary" / "keep").is_file()


@needs_bwrap
def test_a_deep_tree_leaves_the_verdict_to_the_check(deep_run):
    final, _, _ = deep_run
    assert final["verdict"]["status"] == "pass", final["verdict"]
