"""The importer registry: one `Importer` per log format, registered by its own module with ``@register``.

Detection, ``mtl ingest --format`` (its choices and help), the format list and which files a directory search
reads (each importer's `file_patterns`) all come from here, so a new format is one module in this package (and its
test): the package's modules are imported on first use
(`pkgutil`), which runs their ``@register``. Nothing else names the formats.
"""

from __future__ import annotations

import fnmatch
import importlib
import pkgutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, TypeVar

from mtl_graph.core.errors import MTLError

if TYPE_CHECKING:
    from mtl_graph.core.trajectory import Trajectory
    from mtl_graph.importers.common import FileImport


class RegistrationError(MTLError, ValueError):
    """An importer class that cannot be registered (no name, or a name another importer has)."""


DEFAULT_PATTERNS: tuple[str, ...] = ("*.json", "*.jsonl", "*.traj")
"""What an importer that declares no `file_patterns` reads: the JSON and JSONL logs most agents write."""


class Importer:
    """One log format. Set `name`, `summary` (and `file_patterns` when its files are not JSON), implement `sniff` and
    `parse` (or, for a JSONL log streamed line by line, set ``jsonl`` and implement `sniff_lines` and
    `parse_lines`), and decorate the class with `register`."""

    name: ClassVar[str]
    """The format's name, as ``--format`` takes it and ``Trajectory.source_format`` records it."""
    summary: ClassVar[str] = ""
    """A few words for ``mtl ingest --help``: which files."""
    order: ClassVar[int] = 50
    """Detection asks importers in this order: a format whose shape is a special case of another's comes first."""
    file_patterns: ClassVar[tuple[str, ...]] = DEFAULT_PATTERNS
    """File names a directory search reads for this format (``fnmatch`` patterns on the name, case-sensitive). A
    hidden file (a name starting with ``.``) is read only when a pattern that itself starts with ``.`` matches it,
    so ``*.json`` never reads ``.env.json``; hidden directories are never searched."""
    jsonl: ClassVar[bool] = False
    """Records one per line, streamed (no size limit; a bad line costs only itself) instead of one JSON document:
    JSONL logs, and line-based text logs (Aider's markdown history), whose `sniff_lines` recognises their text."""

    def sniff(self, data: Any) -> bool:
        """Whether a parsed JSON document is a log of this format."""
        return False

    def parse(self, data: Any, path: Path) -> list["Trajectory"]:
        """The runs of a parsed JSON document; raise `TrajectoryImportError` (or `NotARunError`) for bad input."""
        raise NotImplementedError(f"{self.name} logs are JSONL, read with parse_lines")

    def sniff_lines(self, lines: list[str]) -> bool:
        """(JSONL importers) Whether the first lines of a file, the last one maybe cut, are a log of this format."""
        return False

    def parse_lines(self, lines: Iterable[bytes], path: Path) -> "FileImport":
        """(JSONL importers) Every run of the file's lines (bytes, with their line ends), one error per bad line."""
        raise NotImplementedError(f"{self.name} logs are one JSON document, read with parse")


_REGISTRY: dict[str, Importer] = {}
_LOCK = threading.RLock()
_discovered = False
I = TypeVar("I", bound=type[Importer])


def register(cls: I) -> I:
    """Class decorator: add the importer to the registry (a name taken by another importer class is refused)."""
    name = getattr(cls, "name", "")
    if not isinstance(name, str) or not name or name != name.strip() or "," in name:
        raise RegistrationError(f"importer {cls.__qualname__} needs a name (no spaces around it, no commas)")
    patterns = getattr(cls, "file_patterns", None)
    if not isinstance(patterns, tuple) or not patterns or not all(
            isinstance(p, str) and p.strip() == p and p and "/" not in p and "\0" not in p for p in patterns):
        raise RegistrationError(f"importer {cls.__qualname__}: file_patterns must be a non-empty tuple of file-name "
                                f"patterns (no '/', no spaces around them), got {patterns!r}")
    with _LOCK:
        known = _REGISTRY.get(name)
        if known is not None and type(known).__qualname__ != cls.__qualname__:
            raise RegistrationError(f"importer name {name!r} is taken by {type(known).__qualname__}")
        _REGISTRY[name] = cls()  # a module imported again (reload) replaces its own importer
    return cls


def unregister(name: str) -> None:
    """Remove an importer (a test's own, after the test)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


AGENTS = f"{__package__}.agents"
"""The package of the importers, one module per log format, each registering itself when imported."""


def _discover() -> None:
    global _discovered
    with _LOCK:
        if _discovered:
            return
        # Only agents/ holds importers: the engine beside it (ingest) is heavy and must not load with a registry read.
        package = importlib.import_module(AGENTS)
        for module in pkgutil.iter_modules(package.__path__):
            if not module.name.startswith("_"):
                importlib.import_module(f"{AGENTS}.{module.name}")
        _discovered = True


def importers() -> list[Importer]:
    """Every registered importer, in detection order."""
    _discover()
    with _LOCK:
        return sorted(_REGISTRY.values(), key=lambda imp: (imp.order, imp.name))


def format_names() -> tuple[str, ...]:
    """The names ``--format`` accepts, in detection order."""
    return tuple(imp.name for imp in importers())


def file_patterns() -> tuple[str, ...]:
    """Every file-name pattern a registered importer reads, each once, in detection order."""
    return tuple(dict.fromkeys(p for imp in importers() for p in imp.file_patterns))


def reads_file_name(name: str, patterns: tuple[str, ...] | None = None) -> bool:
    """Whether a directory search reads a file of this name: a registered pattern matches it (a hidden name only
    by a pattern that starts with ``.``)."""
    hidden = name.startswith(".")
    return any(fnmatch.fnmatchcase(name, p) for p in (patterns if patterns is not None else file_patterns())
               if p.startswith(".") or not hidden)


def get_importer(name: str) -> Importer | None:
    """The importer of that name, or None."""
    _discover()
    with _LOCK:
        return _REGISTRY.get(name)


def detect_document(data: Any) -> Importer | None:
    """The first importer (in detection order) that recognises a parsed JSON document."""
    return next((imp for imp in importers() if imp.sniff(data)), None)


def detect_lines(lines: list[str]) -> Importer | None:
    """The first JSONL importer that recognises a file's first lines."""
    return next((imp for imp in importers() if imp.jsonl and imp.sniff_lines(lines)), None)
