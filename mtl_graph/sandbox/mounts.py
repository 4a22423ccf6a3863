"""The workspace quota filesystems (quota_fs.py) as the mount table shows them: found by their source name."""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

SOURCE = "mtl-workspace"
"""The source name of our mounts in /proc/self/mountinfo: only a mount of this name is ever adopted or unmounted."""

_MNT_DETACH, _UMOUNT_NOFOLLOW = 0x2, 0x8
_LIBC = ctypes.CDLL(None, use_errno=True)


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _table() -> list[tuple[str, int | None]]:
    """(mount point, size in bytes when it is ours, else None) of every mount, in the table's order."""
    rows = []
    try:
        fh = open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape")
    except OSError:  # no /proc: no mount of ours can be seen, none is made either
        return rows
    with fh:
        for line in fh:
            fields = line.split()
            if "-" not in fields[5:]:
                continue
            tail = fields[fields.index("-", 5) + 1:]
            size = None
            if tail[:2] == ["tmpfs", SOURCE]:
                found = re.search(r"(?:^|,)size=(\d+)k(?:,|$)", tail[2] if len(tail) > 2 else "")
                size = int(found.group(1)) * 1024 if found else None
            rows.append((_unescape(fields[4]), size))
    return rows


def mounted_size(path: str | Path) -> int | None:
    """Bytes of our quota filesystem mounted on path (the topmost mount there), or None when it is not ours."""
    target, found = str(path), None
    for point, size in _table():
        if point == target:
            found = size
    return found


def unmount(path: str | Path) -> None:
    """Detach the mount on path (never through a link); what still has it open keeps it until it closes."""
    if _LIBC.umount2(os.fsencode(path), _MNT_DETACH | _UMOUNT_NOFOLLOW) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"umount {path}: {os.strerror(code)}")


def discard_under(path: str | Path) -> int:
    """Unmount every quota filesystem at or below path, its files discarded (the tree is being removed); how many.

    Those a killed process left behind would otherwise keep their files in memory and the directory busy."""
    top = str(path).rstrip("/") or "/"
    gone = 0
    for point, size in reversed(_table()):  # deepest, latest first
        if size is not None and (point == top or point.startswith(top + "/")):
            try:
                unmount(point)
                gone += 1
            except OSError:
                pass
    return gone
