"""The workspace on the host: handed to the unprivileged uid commands run as, and its disk use kept in bounds."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mtl_graph.sandbox.tree import TreeMoved, Visit, walk

_MIB = 1024 * 1024


def hand_over(workspace: Path, uid: int, gid: int) -> None:
    """Give the entries the host created (task files, write_file) to uid:gid, so commands can change them.

    Walks with directory fds and never follows a symlink, so a link swapped in cannot redirect the chown; only
    entries owned by this process's uid are touched, and never a regular file with other hard links (a link to a
    host file must not change that file's owner).
    """
    me = os.geteuid()
    top = os.stat(workspace, follow_symlinks=False)
    if top.st_uid == me:
        os.chown(workspace, uid, gid, follow_symlinks=False)
    # Root without capabilities (bwrap before setpriv) must still enter it; mkdtemp made it 0700.
    os.chmod(workspace, stat.S_IMODE(top.st_mode) | 0o711)

    def give(dir_fd: int, name: str, st: os.stat_result) -> None:
        if st.st_uid != me or (stat.S_ISREG(st.st_mode) and st.st_nlink > 1):
            return
        try:
            os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            pass

    _walk_workspace(workspace, give)


def _walk_workspace(workspace: Path, visit: Visit) -> None:
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        walk(fd, visit)  # any depth, never through a link (tree.py)
    except TreeMoved:  # a command moving directories while it is measured: what was seen counts
        pass
    finally:
        os.close(fd)


def make_reachable(workspace: Path) -> list[Path]:
    """Let other users traverse (not list) the workspace's parents, so an unprivileged uid can reach it by its
    absolute path (interpreters resolve their script's path); the directories changed."""
    changed = []
    for parent in workspace.parents:
        mode = os.stat(parent).st_mode
        if not mode & stat.S_IXOTH:
            os.chmod(parent, stat.S_IMODE(mode) | stat.S_IXOTH)
            changed.append(parent)
    return changed


def disk_usage(workspace: Path) -> int:
    """Bytes of disk the workspace's files occupy (allocated blocks, symlinks not followed)."""
    total = 0

    def add(_fd: int, _name: str, st: os.stat_result) -> None:
        nonlocal total
        total += st.st_blocks * 512

    _walk_workspace(workspace, add)
    return total


def _free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class QuotaWatch:
    """Kills a command that grows the workspace past its quota.

    Walking the workspace on every poll would cost too much for large trees: the free space of its filesystem
    (one statvfs) is polled instead, and the workspace is measured only once the space lost since the last
    measurement could have taken it past the quota. The overshoot is what a command writes in one poll
    interval, plus at most one file of the size limit.
    """

    def __init__(self, workspace: Path, quota_mb: int) -> None:
        self.workspace = workspace
        self.quota = quota_mb * _MIB
        self.used = disk_usage(workspace)
        self.free = _free_bytes(workspace)
        self.used_at_begin = self.used

    def begin(self) -> None:
        """Called when a command starts."""
        self.free = _free_bytes(self.workspace)
        self.used_at_begin = self.used

    def check(self) -> str | None:
        """Why the command must stop (it grew the workspace past the quota), or None."""
        lost = self.free - _free_bytes(self.workspace)
        if lost <= 0 or self.used + lost <= self.quota:
            return None
        self.used = disk_usage(self.workspace)
        self.free = _free_bytes(self.workspace)
        if self.used <= self.quota or self.used <= self.used_at_begin:
            return None  # a command deleting files of a workspace already over quota may run
        return (
            f"killed: the workspace uses {self.used / _MIB:.1f} MiB, over its quota of {self.quota / _MIB:.0f} MiB; "
            "delete files to continue"
        )
