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


def private_directory(path: Path) -> Path:
    """path as a directory of this user's that no one else may write to (made 0700 when absent); one someone else
    made first, a link or a file is refused with a PermissionError in one line (it could hold or redirect what
    goes into it)."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise PermissionError(f"{path} is not a private directory of this user (owner uid {st.st_uid}, mode "
                              f"{stat.S_IMODE(st.st_mode):o}); remove it or choose another directory")
    return path


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


SHRINK_ONLY_SLACK = _MIB
"""Bytes commands of a workspace over its quota may still add in all (directories, empty files) before the
sandbox refuses every command."""


class QuotaWatch:
    """Keeps the workspace within its quota across commands, not only within one, by polling: the fallback where
    it cannot live on a filesystem of the quota's size (quota_fs.py: as a user, say), which no write can pass.

    While a command runs, one that grows the workspace past the quota is killed. Walking the workspace on every
    poll would cost too much for large trees: the free space of its filesystem (one statvfs) is polled instead,
    and the workspace is measured only once the space lost since the last measurement could have taken it past
    the quota. So a command may overshoot by what it writes in one poll interval (or finishing before a poll).
    When a command ends, the workspace is measured (one walk), whatever the free space says.

    Between commands, a workspace left over its quota puts the sandbox in shrink-only mode until it is back
    under: every command then runs with a file-size limit of 0 (writing any byte to a file fails, "File too
    large"), so the agent may still list, read and delete (``rm``) but not grow it again; the observation says
    so. Directories and empty files do not need that limit: shrink-only commands may grow the workspace by
    ``SHRINK_ONLY_SLACK`` in all (a few directories), and once they grew it by more the sandbox is locked: every
    later command is refused. The total is so bounded by the quota, one command's overshoot and that slack,
    however many commands follow.
    """

    def __init__(self, workspace: Path, quota_mb: int) -> None:
        self.workspace = workspace
        self.quota = quota_mb * _MIB
        self.used = disk_usage(workspace)
        self.free = _free_bytes(workspace)
        self.used_at_begin = self.used
        self.shrink_only = False
        """The running command started over the quota: it may not write to files."""
        self.grown_while_over = 0
        """Bytes shrink-only commands added to the workspace, in all."""
        self.locked = False
        """Shrink-only commands grew the workspace past the slack: no command runs in this sandbox any more."""

    def _usage(self) -> str:
        return f"the workspace uses {self.used / _MIB:.1f} MiB, over its quota of {self.quota / _MIB:.0f} MiB"

    def begin(self) -> str | None:
        """Called when a command starts: why it is refused (None: it may run; see shrink_only)."""
        if self.locked:
            return (f"refused: {self._usage()}, and commands grew it further while writes were refused; this "
                    "sandbox runs no more commands")
        self.free = _free_bytes(self.workspace)
        if self.used > self.quota:  # measured again: the host or the last command may have shrunk it
            self.used = disk_usage(self.workspace)
        self.used_at_begin = self.used
        self.shrink_only = self.used > self.quota
        return None

    def shrink_note(self) -> str:
        """What a shrink-only command's observation starts with."""
        return (f"{self._usage()}: this command ran with file writes refused (File too large) until it is back "
                "under; delete files to continue")

    def check(self) -> str | None:
        """Why the command must stop (it grew the workspace past the quota), or None."""
        lost = self.free - _free_bytes(self.workspace)
        if lost <= 0 or self.used + lost <= self.quota:
            return None
        self.used = disk_usage(self.workspace)
        self.free = _free_bytes(self.workspace)
        if self.used <= self.quota or self.used <= self.used_at_begin + self._slack_left():
            return None  # a command deleting files of a workspace already over quota may run
        return f"killed: {self._usage()}"

    def _slack_left(self) -> int:
        return max(0, SHRINK_ONLY_SLACK - self.grown_while_over) if self.shrink_only else 0

    def end(self) -> str | None:
        """Called when a command ended: a note for its output when it left the workspace over the quota."""
        if self.shrink_only:  # measured whatever the free space says: other writers on the disk may hide growth
            self.used = disk_usage(self.workspace)
            self.free = _free_bytes(self.workspace)
            self.grown_while_over += max(0, self.used - self.used_at_begin)
            if self.grown_while_over > SHRINK_ONLY_SLACK:
                self.locked = True
                return f"{self._usage()}, and commands grew it while writes were refused: no more commands"
            return None if self.used > self.quota else "the workspace is back under its quota"
        # Measured, not inferred from the free space: another writer on the same disk freeing space while the
        # command ran would hide its growth, and the sandbox would go on without shrink-only mode.
        self.used = disk_usage(self.workspace)
        self.free = _free_bytes(self.workspace)
        if self.used <= self.quota:
            return None
        return (f"{self._usage()}: until files are deleted, the next commands run with file writes refused "
                "(File too large)")
