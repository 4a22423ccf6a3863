"""The workspace on a filesystem whose size is its quota: no write of any speed can pass it.

While a sandbox is open, its workspace directory has a tmpfs of ``workspace_quota_mb`` mounted on it (``nosuid``,
``nodev``, one inode per ``BYTES_PER_INODE`` of quota so that empty files and links are bounded too). What the
directory held is copied in first; when the last sandbox of this process on it closes, what the workspace then
holds is copied back onto the directory beneath and the tmpfs is unmounted. So whatever reads the workspace after
the sandbox (the judge, the clean room, a snapshot, a resumed run) sees a plain directory, and a write past the
quota fails in the kernel with ENOSPC ("No space left on device"), however fast: ``fallocate``, big ``dd``
blocks, parallel writers and ``mmap`` (SIGBUS) alike.

The copy back can never exceed the quota either: holes stay holes (a sparse file of 1 TB is not made dense on
the host's disk), hard links stay links, FIFOs, sockets and devices are left out, setuid and setgid bits are
dropped. Mounting needs CAP_SYS_ADMIN (root on the host, or a container given it); without it
``QuotaFilesystemUnavailable`` says why and the sandbox polls the workspace instead (workspace.QuotaWatch).

A mount a crashed process left (it was killed between opening and closing a sandbox) is adopted by the next
sandbox opened on the same path, its files intact.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import stat
import threading
from pathlib import Path

from mtl_graph.core.errors import MTLError
from mtl_graph.sandbox.mounts import SOURCE, mounted_size, unmount as _unmount
from mtl_graph.sandbox.tree import walk
BYTES_PER_INODE = 16 * 1024
"""Quota bytes per inode of the filesystem: a repository's files average more, an attack of empty files no less."""
MIN_INODES = 1024
FULL_FRACTION = 0.02
"""Free space below this share of the quota makes the command's observation say the workspace is full."""

_MS_NOSUID, _MS_NODEV, _MS_PRIVATE = 0x2, 0x4, 1 << 18
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_MODE_BITS = 0o1777  # never setuid or setgid, whoever made the file
_CHUNK = 1 << 20
_LIBC = ctypes.CDLL(None, use_errno=True)
_LOCK = threading.Lock()
_HELD: dict[str, "QuotaFilesystem"] = {}


class QuotaFilesystemUnavailable(MTLError, OSError):
    """The workspace cannot have a filesystem of its quota's size here: the message says why."""


def _errno_error(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


def _mount_tmpfs(target_fd: int, size: int, inodes: int, mode: int, uid: int, gid: int) -> None:
    # Through the descriptor: a link swapped in for the directory cannot redirect the mount.
    target = f"/proc/self/fd/{target_fd}".encode()
    options = f"size={size},nr_inodes={inodes},mode={mode:o},uid={uid},gid={gid}".encode()
    if _LIBC.mount(SOURCE.encode(), target, b"tmpfs", _MS_NOSUID | _MS_NODEV, options) != 0:
        raise _errno_error("mount")
    # Not propagated to the mount namespaces that share the host's (a shared / would show it in all of them).
    _LIBC.mount(None, target, None, _MS_PRIVATE, None)


class QuotaFilesystem:
    """The quota filesystem of one workspace, shared by the sandboxes of this process open on it."""

    def __init__(self, workspace: Path, size: int, dev: int) -> None:
        self.workspace, self.size, self.dev = workspace, size, dev
        self.users = 0
        self.copy_errors: list[str] = []
        """What could not be copied back when it was released (the first few)."""

    @classmethod
    def open(cls, workspace: Path, quota_bytes: int) -> "QuotaFilesystem":
        """Mount it on workspace (an absolute, resolved directory) with what it holds, or join the one there."""
        key = str(workspace)
        with _LOCK:
            held = _HELD.get(key)
            if held is None:
                held = cls._mount(workspace, quota_bytes)
                _HELD[key] = held
            elif held.size > quota_bytes:
                raise QuotaFilesystemUnavailable(f"the workspace is already open on a filesystem of "
                                                 f"{held.size >> 20} MiB, more than this sandbox's quota")
            held.users += 1
            return held

    @classmethod
    def _mount(cls, workspace: Path, quota_bytes: int) -> "QuotaFilesystem":
        left = mounted_size(workspace)
        if left is not None:  # a process that crashed left it: its files are the run's
            if left > quota_bytes:
                raise QuotaFilesystemUnavailable(f"a filesystem of {left >> 20} MiB, more than the quota, is "
                                                 "already mounted on the workspace")
            return cls(workspace, left, os.stat(workspace).st_dev)
        if os.geteuid() != 0:
            raise QuotaFilesystemUnavailable("mounting the workspace's filesystem needs root (CAP_SYS_ADMIN)")
        covered = os.open(workspace, _DIR_FLAGS)
        try:
            st = os.fstat(covered)
            size = -(-quota_bytes // 4096) * 4096
            inodes = max(MIN_INODES, quota_bytes // BYTES_PER_INODE)
            try:
                _mount_tmpfs(covered, size, inodes, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
            except OSError as exc:
                raise QuotaFilesystemUnavailable(f"cannot mount a tmpfs on the workspace ({exc.strerror})") from exc
            top = os.open(workspace, _DIR_FLAGS)
            try:
                dev = os.fstat(top).st_dev
                if dev == st.st_dev:  # not the mount we just made: leave everything as it was
                    raise QuotaFilesystemUnavailable("the workspace's new filesystem is not where it was mounted")
                errors: list[str] = []
                copy_tree(covered, top, errors, strict=True)
            except (OSError, QuotaFilesystemUnavailable) as exc:
                _unmount(workspace)
                if isinstance(exc, QuotaFilesystemUnavailable):
                    raise
                raise QuotaFilesystemUnavailable(f"the workspace's files do not fit in its quota filesystem "
                                                 f"({exc})") from exc
            finally:
                os.close(top)
            empty_tree(covered)  # every byte is in the new filesystem now: the disk beneath keeps none of it
        finally:
            os.close(covered)
        return cls(workspace, size, dev)

    def free(self) -> int:
        st = os.statvfs(self.workspace)
        return st.f_bavail * st.f_frsize

    def full(self) -> bool:
        """Whether writes are about to fail (or failed) for want of space."""
        return self.free() < self.size * FULL_FRACTION

    def close(self) -> None:
        """One sandbox fewer on it; the last one copies the workspace back onto the disk and unmounts it."""
        with _LOCK:
            self.users -= 1
            if self.users > 0 or _HELD.get(str(self.workspace)) is not self:
                return
            del _HELD[str(self.workspace)]
            self._release()

    def _release(self) -> None:
        try:
            top = os.open(self.workspace, _DIR_FLAGS)
        except OSError as exc:
            self.copy_errors.append(f"the workspace is gone: {exc}")
            return
        try:
            if os.fstat(top).st_dev != self.dev or mounted_size(self.workspace) is None:
                self.copy_errors.append("the workspace is no longer its quota filesystem: left as it is")
                return
            # Detached, the tmpfs lives on while it is open here: the directory beneath shows at the path again.
            _unmount(self.workspace)
            beneath = os.open(self.workspace, _DIR_FLAGS)
            try:
                copy_tree(top, beneath, self.copy_errors, strict=False)
                own = os.fstat(top)  # the workspace's own owner (run_as_uid as root), mode and times
                if os.geteuid() == 0:
                    os.fchown(beneath, own.st_uid, own.st_gid)
                os.fchmod(beneath, stat.S_IMODE(own.st_mode) & _FILE_MODE_BITS)
                os.utime(beneath, ns=(own.st_atime_ns, own.st_mtime_ns))
            except OSError as exc:
                self.copy_errors.append(f"the workspace's own owner and mode: {exc.strerror or exc}")
            finally:
                os.close(beneath)
        finally:
            os.close(top)


def _more_descriptors() -> None:
    """A copy holds two descriptors per level of depth: let a deep tree have them (up to the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _copy_data(src: int, dst: int, size: int) -> None:
    """The data of src into dst, holes left holes (SEEK_DATA / SEEK_HOLE): the copy takes no more disk."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(src, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                break
            raise
        end = os.lseek(src, start, os.SEEK_HOLE)
        at = start
        while at < end:
            try:  # in the kernel, no bytes through Python
                copied = os.copy_file_range(src, dst, min(_CHUNK * 64, end - at), at, at)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    raise
                chunk = os.pread(src, min(_CHUNK, end - at), at)
                copied = os.pwrite(dst, chunk, at) if chunk else 0
            if not copied:
                break
            at += copied
        offset = end
    os.ftruncate(dst, size)


def _same_metadata(name: str, dir_fd: int, st: os.stat_result, link: bool = False) -> None:
    if os.geteuid() == 0:
        os.chown(name, st.st_uid, st.st_gid, dir_fd=dir_fd, follow_symlinks=False)
    if not link:
        os.chmod(name, stat.S_IMODE(st.st_mode) & _FILE_MODE_BITS, dir_fd=dir_fd)
    os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dir_fd, follow_symlinks=False)


def copy_tree(src_top: int, dst_top: int, errors: list[str], strict: bool) -> None:
    """Copy what is below src_top into dst_top: directories, regular files, links as links (never followed).

    strict: the first failure raises; otherwise it is noted in errors (the first 20) and the rest still goes."""
    _more_descriptors()
    linked: dict[tuple[int, int], str] = {}  # a file of several links: the path of its first copy, from dst_top

    def failed(rel: str, exc: OSError) -> None:
        if strict:
            raise exc
        if len(errors) < 20:
            errors.append(f"{rel}: {exc.strerror or exc}")

    # Each level: (source fd, destination fd, its path, its names left, the source's lstat).
    stack = [(os.dup(src_top), os.dup(dst_top), "", sorted(os.listdir(src_top)), None)]
    try:
        while stack:
            src, dst, rel, names, dir_st = stack[-1]
            if not names:
                stack.pop()
                if dir_st is not None and stack:
                    try:
                        _same_metadata(os.path.basename(rel[:-1]), stack[-1][1], dir_st)
                    except OSError as exc:
                        failed(rel, exc)
                os.close(src)
                os.close(dst)
                continue
            name = names.pop()
            path = rel + name
            try:
                st = os.lstat(name, dir_fd=src)
                if stat.S_ISDIR(st.st_mode):
                    os.mkdir(name, 0o700, dir_fd=dst)
                    child_src = os.open(name, _DIR_FLAGS, dir_fd=src)
                    try:
                        child_dst = os.open(name, _DIR_FLAGS, dir_fd=dst)
                    except OSError:
                        os.close(child_src)
                        raise
                    stack.append((child_src, child_dst, path + "/", sorted(os.listdir(child_src)), st))
                elif stat.S_ISLNK(st.st_mode):
                    os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
                    _same_metadata(name, dst, st, link=True)
                elif stat.S_ISREG(st.st_mode):
                    first = linked.get((st.st_dev, st.st_ino)) if st.st_nlink > 1 else None
                    if first is not None:
                        os.link(first, name, src_dir_fd=dst_top, dst_dir_fd=dst, follow_symlinks=False)
                        continue
                    _copy_file(name, src, dst, st)
                    if st.st_nlink > 1:
                        linked[(st.st_dev, st.st_ino)] = path
                # FIFOs, sockets and devices are left out, as the clean room's snapshot leaves them
            except OSError as exc:
                failed(path, exc)
    finally:
        for src, dst, *_ in stack:
            os.close(src)
            os.close(dst)


def _copy_file(name: str, src_dir: int, dst_dir: int, st: os.stat_result) -> None:
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src_dir)
    try:
        dst = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                      dir_fd=dst_dir)  # fmt: skip
        try:
            _copy_data(src, dst, os.fstat(src).st_size)
        finally:
            os.close(dst)
    finally:
        os.close(src)
    _same_metadata(name, dst_dir, st)


def empty_tree(top: int) -> None:
    """Remove everything below the directory open as top (not top itself); what cannot go is left."""

    def unlink(fd: int, name: str, entry: os.stat_result) -> None:
        if not stat.S_ISDIR(entry.st_mode):
            try:
                os.unlink(name, dir_fd=fd)
            except OSError:
                pass

    def rmdir(fd: int, name: str) -> None:
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError:
            pass

    walk(top, unlink, rmdir, repair=True)
