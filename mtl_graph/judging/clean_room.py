"""The clean room a check runs in: the pristine task, and of the agent's work only its solution.

The check never runs in the agent's workspace. Right after the task's setup (before the agent), the workspace is
copied aside (`take_snapshot`); the check gets a fresh copy of that snapshot (`build_room`) into which only the
solution is carried: the files the task declares as its solution (Exercism's `files.solution`, a `solution` list
in task.json), or, for a task that declares none, the regular files the agent created or changed, minus classes
of files that steer a test run instead of being solved code: tests, build and runner configuration, bytecode and
compiled objects, interpreter start-up hooks and pins, package metadata, hidden paths, and Python modules named
like the standard library, the test runner or the tests. Whatever the agent changed and was not carried is
reported as `dropped`. Nothing is followed through a link, so the room holds no file the agent chose.

Check-only files (`Task.check_files`: hidden test data too large for a command line) are a channel of the room
alone: `build_room` writes them last, into the fresh room, so they are never in the workspace, never in the
snapshot (taken before the agent, from the workspace), and no agent file is carried onto or around their paths.
The room is made after the agent's commands ended, outside the workspace (a bwrap sandbox has a /tmp of its own).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
import re
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from mtl_graph.sandbox.tree import remove_tree, walk
from mtl_graph.sandbox.workspace import private_directory
from mtl_graph.core.errors import MTLError
from mtl_graph.core.task import Task

MAX_ENTRIES = 200_000
"""Workspace entries examined for changes; past this the rest is dropped unexamined."""
MAX_LISTED = 100
"""Dropped paths named one by one on a verdict; the rest are counted."""
MAX_CARRIED_BYTES = 64 * 1024 * 1024
"""A carried file larger than this is dropped (a solution is source code)."""

SHADOWED = frozenset(sys.stdlib_module_names) | {"pytest", "_pytest", "pluggy", "conftest", "py", "sitecustomize",
                                                 "usercustomize", "setuptools", "pkg_resources", "mtl_check_report"}
"""Module names a Python file or package of the agent's may never take (it would run instead of the real one)."""
CONFIG_NAMES = frozenset({
    "pytest.ini", "pytest.toml", "tox.ini", "setup.cfg", "setup.py", "pyproject.toml", "noxfile.py", "conftest.py",
    "requirements.txt", "Pipfile", "Makefile", "makefile", "GNUmakefile", "CMakeLists.txt", "CMakeCache.txt",
    "meson.build", "package.json", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "tsconfig.json",
    "Cargo.toml", "Cargo.lock", "build.rs", "go.mod", "go.sum", "go.work", "build.gradle", "settings.gradle",
    "gradlew", "gradle.properties", "pom.xml", "mvnw", "rust-toolchain", "runtime.txt",
})
CONFIG_PREFIXES = ("jest.config.", "babel.config.", "vitest.config.", "karma.conf.", "webpack.config.", "rollup.config.")
COMPILED_SUFFIXES = frozenset({".pyc", ".pyo", ".so", ".pyd", ".o", ".a", ".obj", ".dylib", ".dll", ".class", ".jar",
                               ".exe", ".wasm", ".node", ".rlib", ".rmeta"})
MODULE_SUFFIXES = (".py", ".pyw", ".pyc", ".so", ".pyd")
METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg-link", ".egg")
_WORDS = re.compile(r"[_\-.]|(?<=[a-z0-9])(?=[A-Z])")
TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec", "testing"})


def excluded(rel: str, test_modules: frozenset[str], new: bool = True) -> str | None:
    """Why a file of the agent's is not a solution file (never carried without a declaration), or None. A module
    name is only refused for a new file: a file of the task's own that the agent changed already had its name."""
    path = PurePosixPath(rel)
    name, parts = path.name, path.parts
    if any(p.startswith(".") for p in parts):
        return "hidden path"
    if "__pycache__" in parts or path.suffix in COMPILED_SUFFIXES or ".cpython-" in name:
        return "bytecode or compiled object"
    if name.endswith(".pth") or name.endswith("customize.py"):
        return "interpreter start-up hook"
    if any(p.endswith(METADATA_SUFFIXES) for p in parts):
        return "package metadata"
    if name in CONFIG_NAMES or name.startswith(CONFIG_PREFIXES) or path.suffix in (".cmake", ".gradle", ".toml",
                                                                                   ".ini", ".cfg"):
        return "build or runner configuration"
    stem = name.split(".", 1)[0]
    words = {w.lower() for w in _WORDS.split(name) if w}
    if any(p.lower() in TEST_DIRS for p in parts[:-1]) or words & {"test", "tests", "spec", "specs"}:
        return "test file"
    modules = {p for p in parts[:-1]} | ({stem} if name.endswith(MODULE_SUFFIXES) else set())
    if new and modules & (SHADOWED | test_modules):
        return "named like a module the check imports"
    return None


def pristine_path(workspace: str | Path) -> Path:
    """Where the snapshot of a workspace lives: outside it, private to this user, found again from its path."""
    resolved = Path(workspace).absolute()
    digest = hashlib.sha256(str(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"mtl-pristine-{os.geteuid()}" / f"{digest}-{resolved.name[:60]}"


def _ignore_special(directory: str, names: list[str]) -> list[str]:
    """Copy regular files, directories and links; a FIFO, socket or device is left out."""
    keep_types = (stat.S_ISREG, stat.S_ISDIR, stat.S_ISLNK)
    out = []
    for name in names:
        try:
            mode = os.lstat(os.path.join(directory, name)).st_mode
        except OSError:
            out.append(name)
            continue
        if not any(kind(mode) for kind in keep_types):
            out.append(name)
    return out


def take_snapshot(workspace: str | Path) -> Path:
    """Copy the workspace as it is after setup (before the agent) aside; return where."""
    target = pristine_path(workspace)
    private_directory(target.parent)  # another user's directory (or a link) there would hold the pristine copy
    discard_snapshot(workspace)
    shutil.copytree(workspace, target, symlinks=True, ignore=_ignore_special)
    return target


def discard_snapshot(workspace: str | Path | None) -> None:
    """Remove a workspace's snapshot, if it has one."""
    if workspace:
        remove_tree(pristine_path(workspace))


@dataclass
class Room:
    """A built clean room: where it is, what was carried into it, what was left out."""

    path: Path
    carried: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    """Path -> why it was not carried."""
    more_dropped: int = 0
    """Dropped entries beyond those named (MAX_LISTED)."""

    def drop(self, rel: str, why: str) -> None:
        if len(self.dropped) < MAX_LISTED:
            self.dropped[rel] = why
        else:
            self.more_dropped += 1

    def dropped_list(self) -> list[str]:
        listed = [f"{rel} ({why})" for rel, why in sorted(self.dropped.items())]
        return listed + ([f"... and {self.more_dropped} more"] if self.more_dropped else [])

    def close(self) -> None:
        remove_tree(self.path)


def _read_regular(name: str, dir_fd: int) -> bytes | None:
    """The bytes of a regular file (never through a link, never blocking on a FIFO); None for anything else."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CARRIED_BYTES:
            return None
        return fh.read(MAX_CARRIED_BYTES + 1)


def _room_bytes(room: Path, rel: str) -> bytes | None:
    target = room / rel
    return target.read_bytes() if _is_plain_file(target) else None


def _place(room: Path, rel: str, content: bytes, executable: bool) -> bool:
    """Write a carried file into the room; False when a link or a non-directory of the task's is in the way."""
    target = room.joinpath(*PurePosixPath(rel).parts)
    try:
        for parent in reversed(target.relative_to(room).parents[:-1] if len(PurePosixPath(rel).parts) > 1 else []):
            here = room / parent
            if here.is_symlink() or (here.exists() and not here.is_dir()):
                return False
            here.mkdir(exist_ok=True)
        if target.is_symlink() or target.is_dir():
            return False
        target.write_bytes(content)
        os.chmod(target, 0o755 if executable else 0o644)
    except OSError:  # a path too long or deep to make: not carried
        return False
    return True


def _cargo_manifest_ok(pristine: bytes | None, carried: bytes) -> bool:
    """A solver's Cargo.toml may change its dependencies, nothing that steers the build (scripts, targets, lints)."""
    try:
        before = tomllib.loads((pristine or b"").decode("utf-8"))
        after = tomllib.loads(carried.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    strip = ("dependencies", "dev-dependencies")
    return {k: v for k, v in before.items() if k not in strip} == {k: v for k, v in after.items() if k not in strip}


def _changed_files(workspace: Path, room: Room) -> list[tuple[str, bytes | None, bool]]:
    """(relative path, its bytes or None when not a regular file, executable) of every workspace entry that differs
    from the room's pristine copy; one iterative, descriptor-based walk, so no depth, name or link breaks it."""
    found: list[tuple[str, bytes | None, bool]] = []
    seen = 0

    def visit(dir_fd: int, rel: str, st: os.stat_result) -> None:
        nonlocal seen
        if stat.S_ISDIR(st.st_mode):
            return
        seen += 1
        if seen > MAX_ENTRIES:
            room.drop(rel, f"past the first {MAX_ENTRIES} entries, unexamined")
            return
        name = rel.rsplit("/", 1)[-1]
        pristine = room.path / rel
        if stat.S_ISREG(st.st_mode) and _is_plain_file(pristine):
            ps = pristine.stat()
            if ps.st_size == st.st_size and ps.st_mtime_ns == st.st_mtime_ns:
                return  # copied untouched (copy2 keeps times); a reset time only keeps the pristine copy
        content = _read_regular(name, dir_fd) if stat.S_ISREG(st.st_mode) else None
        if content is not None and content == _room_bytes(room.path, rel):
            return
        found.append((rel, content, bool(st.st_mode & 0o111)))

    top = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        walk(top, visit, relative=True)
    finally:
        os.close(top)
    return sorted(found)


def _is_plain_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (OSError, ValueError):  # absent, or a name too long for the room (the agent's depth)
        return False


class RoomError(MTLError, RuntimeError):
    """The clean room could not be built as the task describes it."""


def build_room(task: Task, workspace: str | Path, snapshot: Path | None = None,
               prepare: Callable[[Path], None] | None = None) -> Room:
    """A fresh directory holding the pristine task and the solution: the snapshot's copy, else the task's own
    files made ready by prepare (its setup), then the solution carried in, then the task's check-only files."""
    room = Room(Path(tempfile.mkdtemp(prefix="mtl-check-")))
    try:
        if snapshot is not None and snapshot.is_dir():
            shutil.copytree(snapshot, room.path, symlinks=True, dirs_exist_ok=True, ignore=_ignore_special)
        else:
            task.materialize(room.path)
            if prepare is not None:
                prepare(room.path)
        _carry(task, Path(workspace), room)
        _write_check_files(task, room)
    except BaseException:
        room.close()
        raise
    return room


def _on_check_path(rel: str, check_paths: set[str]) -> bool:
    """Whether rel is a check-only path, a directory above one, or under one (carrying it would block the file)."""
    return any(rel == c or c.startswith(rel + "/") or rel.startswith(c + "/") for c in check_paths)


def _write_check_files(task: Task, room: Room) -> None:
    for rel, content in task.check_files.items():
        if not _place(room.path, rel, content.encode("utf-8"), executable=False):
            raise RoomError(f"task {task.id}: check-only file {rel} cannot be written into the clean room (a link or "
                            "file of the task's is in its way)")


def _carry(task: Task, workspace: Path, room: Room) -> None:
    declared = set(task.solution_files)
    tests = set(task.test_files)
    check_paths = set(task.check_files)
    test_modules = frozenset(PurePosixPath(t).name.split(".", 1)[0] for t in tests)
    for rel, content, executable in _changed_files(workspace, room):
        if rel in tests:  # reported as tests_modified; the room has the pristine copy
            continue
        if check_paths and _on_check_path(rel, check_paths):
            room.drop(rel, "on the path of a check-only file")
            continue
        if declared:
            why = None if rel in declared else "not a solution file"
            if why is None and PurePosixPath(rel).name == "Cargo.toml" and content is not None \
                    and not _cargo_manifest_ok(_room_bytes(room.path, rel), content):
                why = "build configuration beyond its dependencies"
        else:
            why = excluded(rel, test_modules, new=not _is_plain_file(room.path / rel))
        if why is None and content is None:
            why = "not a regular file"
        if why is None and not _place(room.path, rel, content, executable):
            why = "a link or file of the task's is in its way"
        if why is None:
            room.carried.append(rel)
        else:
            room.drop(rel, why)
