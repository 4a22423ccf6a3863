"""Walking and removing a workspace the agent shaped: any depth, any names, never through a link.

``os.fwalk`` and ``shutil.rmtree`` recurse (a 1,500-deep tree raises RecursionError) and hold one descriptor per
level (a deep one exhausts them). This walk is a loop over an explicit stack: each level keeps the names of the
subdirectories it has yet to visit, only the deepest ``KEEP_OPEN`` levels keep their directory open, and a closed
one is opened again from its child's ``..``, checked to be the very directory left (device and inode), so a tree
moved meanwhile stops the walk instead of redirecting it. Every open is relative to its parent's descriptor with
O_NOFOLLOW: a link is an entry like a file, never followed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mtl_graph.core.errors import MTLError
from mtl_graph.sandbox.mounts import discard_under

KEEP_OPEN = 64
"""Directory descriptors one walk holds at most (the deepest levels of the current path)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Visit = Callable[[int, str, os.stat_result], None]
"""Called for every entry below the top: (descriptor of its directory, its name, its lstat)."""


class TreeMoved(MTLError, OSError):
    """A directory being walked was moved or replaced: the walk stops rather than follow it."""


@dataclass
class _Level:
    fd: int | None
    ident: tuple[int, int]
    name: str
    """Its name in the level above."""
    subdirs: list[str] = field(default_factory=list)
    rel: str = ""
    """Its path below the top ("" for the top itself)."""


def _ident(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _scan(level: _Level, visit: Visit | None, relative: bool = False) -> None:
    """Visit the entries of level's directory; note its subdirectories (not links to one) to descend into."""
    with os.scandir(level.fd) as entries:
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:  # gone, or in a directory its owner made unsearchable (mode 444): not ours to see
                continue
            if visit is not None:
                visit(level.fd, f"{level.rel}{entry.name}" if relative else entry.name, st)
            if stat.S_ISDIR(st.st_mode):
                level.subdirs.append(entry.name)


def _open_child(level: _Level, name: str, repair: bool) -> _Level | None:
    """The subdirectory name of level, opened; None when it is gone or no longer a directory (a link now)."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=level.fd)
    except PermissionError:
        if not repair:  # the owner's mode 000 (as a non-root host): not ours to look into
            return None
        _owner_may_list(name, level.fd)
        fd = os.open(name, _DIR_FLAGS, dir_fd=level.fd)
    except (FileNotFoundError, NotADirectoryError):  # gone, or swapped for a file since the scan
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a link since the scan
            return None
        raise
    if repair:
        _owner_may_write(fd)
    return _Level(fd, _ident(os.fstat(fd)), name)


def _owner_may_list(name: str, dir_fd: int) -> None:
    """Give the owner rwx on a directory it may not open (mode 000): through an O_PATH descriptor of that very
    directory (never a link: O_NOFOLLOW), as fchmodat cannot refuse to follow one."""
    fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(os.fstat(fd).st_mode) | 0o700)
    finally:
        os.close(fd)


def _owner_may_write(fd: int) -> None:
    """A directory the agent made read-only is still its owner's to empty."""
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if mode & 0o700 != 0o700:
        try:
            os.fchmod(fd, mode | 0o700)
        except OSError:
            pass


def _reopen_parent(child: _Level, parent: _Level) -> None:
    fd = os.open("..", _DIR_FLAGS, dir_fd=child.fd)
    if _ident(os.fstat(fd)) != parent.ident:
        os.close(fd)
        raise TreeMoved(f"directory {parent.name!r} moved during the walk")
    parent.fd = fd


def walk(top_fd: int, visit: Visit | None = None, leave: Callable[[int, str], None] | None = None,
         repair: bool = False, relative: bool = False) -> None:
    """Visit every entry below the directory open as top_fd (not closed here), depth first.

    leave(parent_fd, name) is called after a subdirectory's whole content was visited (to remove it); repair
    gives the owner rwx on the directories it may not list or change (to empty them); relative: visit gets each
    entry's path below the top instead of its name (its directory's descriptor is still the first argument)."""
    top = _Level(os.dup(top_fd), _ident(os.fstat(top_fd)), ".")
    stack = [top]
    try:
        _scan(top, visit, relative)
        while stack:
            level = stack[-1]
            if level.subdirs:
                child = _open_child(level, level.subdirs.pop(), repair)
                if child is None:
                    continue
                child.rel = f"{level.rel}{child.name}/"
                stack.append(child)
                if len(stack) > KEEP_OPEN and (far := stack[-KEEP_OPEN - 1]).fd is not None:
                    os.close(far.fd)
                    far.fd = None
                _scan(child, visit, relative)
                continue
            stack.pop()
            if stack:
                parent = stack[-1]
                if parent.fd is None:
                    _reopen_parent(level, parent)
                if leave is not None:
                    leave(parent.fd, level.name)
            os.close(level.fd)
            level.fd = None
    finally:
        for level in stack:
            if level.fd is not None:
                os.close(level.fd)


def remove_tree(path: str | Path) -> bool:
    """Remove path and everything below it (a link: only the link), at any depth; True when it is gone.

    Entries that cannot be removed are left and the rest still goes (like ``rmtree(ignore_errors=True)``). A
    workspace quota filesystem at or below path (one a killed process left mounted) is unmounted first."""
    path = Path(path)
    discard_under(path.absolute())
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    parent = os.open(path.parent, _DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(path.name, dir_fd=parent)
            return True
        top = os.open(path.name, _DIR_FLAGS, dir_fd=parent)
        try:
            _owner_may_write(top)

            def unlink(fd: int, name: str, entry: os.stat_result) -> None:
                if not stat.S_ISDIR(entry.st_mode):
                    try:
                        os.unlink(name, dir_fd=fd)
                    except OSError:  # left, like rmtree(ignore_errors=True); the rest still goes
                        pass

            def rmdir(fd: int, name: str) -> None:
                try:
                    os.rmdir(name, dir_fd=fd)
                except OSError:  # not empty: something below could not go; the rest still does
                    pass

            walk(top, unlink, rmdir, repair=True)
        finally:
            os.close(top)
        os.rmdir(path.name, dir_fd=parent)
    except OSError:
        return not os.path.lexists(path)
    finally:
        os.close(parent)
    return True
