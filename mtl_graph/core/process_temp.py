"""Per-process temporary files and directories that a killed process does not leave behind for good.

`atexit` removes them on a normal exit, but a SIGKILL (a served graph's process group killed, an OOM kill) runs
no hook. So each name carries its owner's pid (`<prefix><pid>-<random>`), and making a new one first removes
those whose owner is gone: a crashed server's leftovers go the next time any process of ours makes one. A reused
pid keeps its entry (the safe side); `keep` lets a caller spare an entry some other process still uses.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_orphans(prefix: str, root: Path | None = None,
                   keep: Callable[[Path], bool] = lambda _: False) -> list[Path]:
    """Remove `<prefix><pid>-*` entries under root (the temp dir) whose pid is gone and that `keep` spares not."""
    removed = []
    for entry in Path(root or tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = entry.name[len(prefix):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or pid_alive(int(pid)) or entry.is_symlink() or keep(entry):
            continue
        try:
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except OSError:  # another process swept it first, or it is not ours to remove
            continue
        removed.append(entry)
    return removed


def process_dir(prefix: str) -> Path:
    """A new private directory `<prefix><pid>-*` in the temp dir, removed at exit (or by a later sweep)."""
    remove_orphans(prefix)
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def process_file(prefix: str, suffix: str = "") -> tuple[int, Path]:
    """A new private file `<prefix><pid>-*<suffix>` in the temp dir (its open descriptor), removed at exit."""
    remove_orphans(prefix)
    fd, name = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}-", suffix=suffix)
    atexit.register(_unlink, name)
    return fd, Path(name)


def _unlink(name: str) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass
