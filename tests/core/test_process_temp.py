"""Per-process temporary entries: a dead owner's are removed when the next one is made, nobody else's ever."""

import os
import subprocess
import sys
import tempfile

import pytest

from mtl_graph.core.process_temp import pid_alive, process_dir, process_file, remove_orphans


@pytest.fixture
def dead_pid():
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    if pid_alive(child.pid):  # reused already: nothing to learn from it
        pytest.skip("the dead child's pid was reused")
    return child.pid


def test_a_dead_owners_entries_go_and_everyone_elses_stay(tmp_path, dead_pid):
    dead_dir, dead_file = tmp_path / f"mtl-x-{dead_pid}-a", tmp_path / f"mtl-x-{dead_pid}-b.bpf"
    dead_dir.mkdir()
    (dead_dir / "inner").mkdir()
    (dead_dir / "inner" / "f").write_text("x")
    dead_file.write_text("x")
    kept = [tmp_path / f"mtl-x-{os.getpid()}-mine", tmp_path / f"mtl-x-{os.getppid()}-parent",
            tmp_path / "mtl-x-notapid-c", tmp_path / f"mtl-y-{dead_pid}-other-prefix", tmp_path / f"mtl-x-{dead_pid}"]
    for path in kept:
        path.mkdir()
    spared = tmp_path / f"mtl-x-{dead_pid}-spared"
    spared.mkdir()
    link = tmp_path / f"mtl-x-{dead_pid}-link"
    link.symlink_to(tmp_path / "mtl-x-notapid-c")  # a link is never followed into, nor removed
    removed = remove_orphans("mtl-x-", tmp_path, keep=lambda entry: entry == spared)
    assert sorted(removed) == sorted([dead_dir, dead_file])
    assert not dead_dir.exists() and not dead_file.exists()
    assert all(p.exists() for p in [*kept, spared, link])


def test_making_one_sweeps_a_dead_processs_and_the_new_names_carry_the_pid(tmp_path, monkeypatch, dead_pid):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / f"mtl-etc-{dead_pid}-old").mkdir()
    (tmp_path / f"mtl-seccomp-{dead_pid}-old.bpf").write_text("x")
    made = process_dir("mtl-etc-")
    fd, name = process_file("mtl-seccomp-", ".bpf")
    os.close(fd)
    assert made.name.startswith(f"mtl-etc-{os.getpid()}-") and name.name.startswith(f"mtl-seccomp-{os.getpid()}-")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([made.name, name.name])
