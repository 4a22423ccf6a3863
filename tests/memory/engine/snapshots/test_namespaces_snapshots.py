"""Snapshots per namespace: teams sharing a directory pool keep their snapshots apart by construction (the default
namespace in `<pool>/snapshots`, as before namespaces; any other in `<pool>/snapshots/@<namespace>`), so the same
name never collides and one team can neither list, restore nor diff another's."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from mtl_graph.cli import app
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.engine.namespace import NamespaceError
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.engine.snapshots.format import MANIFEST, snapshot_root
from mtl_graph.memory.engine.snapshots.archive import (SnapshotError, create_snapshot, diff, list_snapshots, points_of,
                                        restore_snapshot)

runner = CliRunner()


def insight(title: str, task: str) -> InsightMemory:
    return InsightMemory(title=title, description=f"Applies when {title.lower()}.", content=f"Learned on {task}.",
                         outcome="success", sources=[Provenance(run_id=f"run-{task}", source_task_id=task, domain="d")])


A_MEMORY = insight("Run the tests before submitting", "a-task")
B_MEMORIES = [insight("Respect the exact output format", "b-task"), insight("Read the error before editing", "b2")]


@pytest.fixture
def pools(tmp_path, embeddings):
    """One directory pool, three namespaces of it: default (empty), team-a (one memory), team-b (two)."""
    location = tmp_path / "pool"
    opened = {ns: MemoryPool.open(location, embeddings, namespace=ns) for ns in ("default", "team-a", "team-b")}
    opened["team-a"].add(A_MEMORY)
    opened["team-b"].add_many(B_MEMORIES)
    yield opened
    for pool in opened.values():
        pool.close()


def files_under(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_the_same_name_in_two_namespaces_is_two_snapshots(pools, tmp_path):
    a = create_snapshot(pools["team-a"], "nightly")
    b = create_snapshot(pools["team-b"], "nightly")  # not "already exists": another namespace's name is not taken
    base = tmp_path / "pool" / "snapshots"
    assert Path(a.path) == base / "@team-a" / "nightly" and Path(b.path) == base / "@team-b" / "nightly"
    assert (a.count, b.count) == (1, 2) and a.checksum != b.checksum
    assert (a.namespace, b.namespace) == ("team-a", "team-b")
    assert json.loads((Path(a.path) / MANIFEST).read_text())["namespace"] == "team-a"
    # each restores its own: team-a gets its one memory back, team-b's two stay as they are
    pools["team-a"].add(insight("Check the exit code", "a-later"))
    kept_b = files_under(Path(b.path))
    report = restore_snapshot(pools["team-a"], "nightly")
    assert report.count_verified and report.checksum_verified and report.deleted == 1
    assert [m.id for m in pools["team-a"]] == [A_MEMORY.id]
    assert pools["team-b"].count() == 2 and files_under(Path(b.path)) == kept_b
    # the safety snapshot of team-a's restore is in team-a's folder, not in the default namespace's
    assert [i.name for i in list_snapshots(pools["team-a"])][-1] == report.safety_snapshot
    assert not any(i.name.startswith("before-restore-") for i in list_snapshots(pools["team-b"]))
    assert list_snapshots(pools["default"]) == []


def test_one_namespace_cannot_list_restore_or_diff_anothers(pools):
    create_snapshot(pools["team-a"], "only-a")
    assert [i.name for i in list_snapshots(pools["team-a"])] == ["only-a"]
    assert list_snapshots(pools["team-b"]) == [] and list_snapshots(pools["default"]) == []
    before = sorted(p.id for p in pools["team-b"].store.scroll_points())
    with pytest.raises(SnapshotError, match="no snapshot named only-a .*the pool was not changed"):
        restore_snapshot(pools["team-b"], "only-a")
    with pytest.raises(SnapshotError, match="no snapshot named only-a"):
        diff(points_of(pools["default"], "only-a"), points_of(pools["default"], "current"))
    assert sorted(p.id for p in pools["team-b"].store.scroll_points()) == before
    # a create of the same name in the other namespace is its own, and replaces nothing of team-a's
    assert create_snapshot(pools["team-b"], "only-a").count == 2
    assert list_snapshots(pools["team-a"])[0].count == 1


def test_dir_keeps_namespaces_apart_too(pools, tmp_path):
    shared = tmp_path / "shared-snaps"
    create_snapshot(pools["team-a"], "s", shared)
    create_snapshot(pools["team-b"], "s", shared)
    assert sorted(p.name for p in shared.iterdir()) == ["@team-a", "@team-b"]
    assert [i.count for i in list_snapshots(pools["team-b"], shared)] == [2]
    assert list_snapshots(pools["default"], shared) == []  # the '@' folders are never snapshots


def test_the_default_namespace_still_finds_snapshots_made_before_namespaces(pools, tmp_path):
    pools["default"].add(insight("Keep the diff small", "old-task"))
    info = create_snapshot(pools["default"], "from-last-month")
    assert Path(info.path) == tmp_path / "pool" / "snapshots" / "from-last-month"  # where they always were
    manifest_path = Path(info.path) / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    del manifest["namespace"]  # as written before namespaces (the checksum covers the points, not the manifest)
    manifest_path.write_text(json.dumps(manifest))
    [listed] = list_snapshots(pools["default"])
    assert (listed.name, listed.count, listed.namespace, listed.problem) == ("from-last-month", 1, "default", None)
    pools["default"].add(insight("Pin the versions", "new-task"))
    assert restore_snapshot(pools["default"], "from-last-month").checksum_verified
    assert pools["default"].count() == 1
    assert [i.name for i in list_snapshots(pools["team-a"])] == []  # and no other namespace sees it


HOSTILE = ["..", ".", "../team-a", "team-a/..", "a/b", "/etc", "@team-a", "~root", "a\\b", "x\0y", " team",
           "team a", "t\u2215eam", "t\u00e9am", "", "a" * 65, "-rf", ".hidden"]


@pytest.mark.parametrize("name", HOSTILE, ids=repr)
def test_a_namespace_name_cannot_leave_the_snapshot_folder(name, tmp_path, embeddings):
    base = tmp_path / "snaps"
    with pytest.raises(NamespaceError, match="invalid namespace"):
        snapshot_root(SimpleNamespace(location=str(tmp_path / "pool"), namespace=name), base)
    with pytest.raises(NamespaceError, match="invalid namespace"):
        MemoryPool.open(tmp_path / "pool", embeddings, namespace=name)
    assert sorted(os.listdir(tmp_path)) == []  # nothing was created, inside or outside


def test_a_linked_namespace_folder_is_refused(pools, tmp_path):
    create_snapshot(pools["team-a"], "mine")
    base = tmp_path / "pool" / "snapshots"
    (base / "@team-b").symlink_to(base / "@team-a", target_is_directory=True)  # team-b would see team-a's files
    for call in (lambda: list_snapshots(pools["team-b"]), lambda: create_snapshot(pools["team-b"], "x"),
                 lambda: restore_snapshot(pools["team-b"], "mine")):
        with pytest.raises(SnapshotError, match="must be a directory of its own, not a link"):
            call()
    assert [i.name for i in list_snapshots(pools["team-a"])] == ["mine"]


def test_the_cli_lists_and_restores_per_namespace(pools, tmp_path):
    location = str(tmp_path / "pool")
    made = runner.invoke(app, ["pool", "snapshot", "create", "weekly", "--pool", location, "--namespace", "team-a"])
    assert made.exit_code == 0, made.output
    assert "@team-a" in made.output
    listed = runner.invoke(app, ["pool", "snapshot", "list", "--json", "--pool", location, "--namespace", "team-b"])
    assert listed.exit_code == 0 and json.loads(listed.output) == []
    refused = runner.invoke(app, ["pool", "snapshot", "restore", "weekly", "--pool", location,
                                  "--namespace", "team-b"])
    assert refused.exit_code == 1
    assert refused.output.count("\n") == 1 and "no snapshot named weekly" in refused.output
    assert pools["team-b"].count() == 2
