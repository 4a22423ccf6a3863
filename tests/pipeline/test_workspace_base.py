"""The default workspace base is the user's own: private, and refused when someone else made it first."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from mtl_graph.pipeline.lease import workspace_base


def test_the_default_base_is_private_to_this_user(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    base = workspace_base(None)
    assert base == tmp_path / f"mtl-workspaces-{os.geteuid()}" and base.stat().st_mode & 0o777 == 0o700
    assert workspace_base(None) == base  # found again
    assert workspace_base(tmp_path / "mine") == tmp_path / "mine"  # a configured root is the caller's


@pytest.mark.parametrize("planted", ["world-writable", "a link", "a file", "another owner"])
def test_a_base_planted_by_someone_else_is_refused_in_one_line(monkeypatch, tmp_path, planted):
    if planted == "another owner" and os.geteuid() != 0:
        pytest.skip("only root can make a directory another user owns")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    base = tmp_path / f"mtl-workspaces-{os.geteuid()}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if planted == "a link":
        base.symlink_to(elsewhere)
    elif planted == "a file":
        base.write_text("")
    else:
        base.mkdir()
        os.chmod(base, 0o777) if planted == "world-writable" else os.chown(base, 65534, 65534)
    with pytest.raises(PermissionError, match="not a private directory of this user") as info:
        workspace_base(None)
    assert "\n" not in str(info.value) and list(elsewhere.iterdir()) == []


def test_a_snapshot_directory_planted_by_someone_else_is_refused(monkeypatch, tmp_path):
    """The pristine copy a check is made of never goes into a directory someone else controls."""
    from mtl_graph.judging.clean_room import pristine_path, take_snapshot

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "f.py").write_text("X = 1\n")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    pristine_path(workspace).parent.symlink_to(theirs)
    with pytest.raises(PermissionError, match="not a private directory"):
        take_snapshot(workspace)
    assert list(theirs.iterdir()) == []
    pristine_path(workspace).parent.unlink()
    assert (take_snapshot(workspace) / "f.py").read_text() == "X = 1\n"
    assert pristine_path(workspace).parent.stat().st_mode & 0o777 == 0o700
