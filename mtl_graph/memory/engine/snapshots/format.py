"""The snapshot format: names and places, the canonical form of a point, the checksum, reading one back whole.

`<root>/<NAME>/points.jsonl.gz` holds one canonical JSON line per point (id, dense, sparse, payload verbatim);
`<root>/<NAME>/manifest.json` holds name, created_at, count, checksum, embeddings and dim, pool, namespace, format
version. A pool's root is its namespace's own: `<base>` for the default namespace (where snapshots were before
namespaces), `<base>/@<namespace>` for any other, so teams sharing a pool cannot collide, list or restore each
other's (no snapshot name starts with '@', so the default namespace never lists another's folder).
The checksum is sha256 over the sorted sha256 digests of the lines: order-free, so it can be recomputed from a
live pool in whatever order the engine scrolls. Writing and restoring live in `snapshots.py`.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import zlib
from array import array
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

from mtl_graph.memory.errors import PoolError
from mtl_graph.memory.engine.namespace import DEFAULT_NAMESPACE, check_namespace
from mtl_graph.memory.engine.storage import StoredPoint

FORMAT = "mtl-pool-snapshot"
FORMAT_VERSION = 2
"""What `create_snapshot` writes (stream.py: points in id order, in checked batches, vectors as binary floats)."""
READABLE_VERSIONS = (1, 2)
"""Format 1 (one JSON line per point, decimal vectors) is still read: snapshots written before 2 stay restorable."""
MANIFEST = "manifest.json"
POINTS = "points.jsonl.gz"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
CURRENT = "current"
"""Not a snapshot name: `diff` reads it as the live pool."""
NAMESPACE_PREFIX = "@"
"""A non-default namespace's folder in the snapshot base: `@<namespace>` (never a snapshot name)."""


class SnapshotError(PoolError):
    """A snapshot cannot be written, read or restored (one line; the pool was not changed unless it says so)."""


@dataclass
class SnapshotInfo:
    """One snapshot as its manifest describes it."""

    name: str
    path: str
    created_at: str = ""
    count: int = 0
    checksum: str = ""
    embeddings: str = ""
    dim: int = 0
    pool: str = ""
    namespace: str = DEFAULT_NAMESPACE
    """The namespace the snapshot was taken in (snapshots made before namespaces: the default)."""
    problem: str | None = None
    """Why the manifest is unreadable (listed, never restorable); None for a sound manifest."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)



# ------------------------------------------------------------------ names and places
def check_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name) or ".." in name:
        raise SnapshotError(f"snapshot name {name!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
                            "starting with a letter or digit (no '/' or '..')")
    if name == CURRENT:
        raise SnapshotError(f"snapshot name {CURRENT!r} is reserved for the live pool (`mtl pool diff`)")
    return name


def snapshot_root(pool: Any, directory: str | Path | None = None) -> Path:
    """Where the pool's snapshots live: in `directory`, or `<pool dir>/snapshots` for a directory pool; a pool
    outside the default namespace keeps them in `@<namespace>` there."""
    if directory is not None:
        base = Path(directory).expanduser()
    else:
        location = str(pool.location)
        if location == ":memory:" or location.startswith(("http://", "https://")):
            raise SnapshotError(f"pool {location} has no directory to keep snapshots in: pass --dir DIR")
        base = Path(location) / "snapshots"
    namespace = check_namespace(getattr(pool, "namespace", DEFAULT_NAMESPACE))
    if namespace == DEFAULT_NAMESPACE:
        return base
    root = base / (NAMESPACE_PREFIX + namespace)
    # the name's characters keep it one path component; a link could still lead into another namespace's folder
    if root.parent != base or root.is_symlink() or (root.exists() and not root.is_dir()):
        raise SnapshotError(f"snapshots of namespace {namespace} ({root}) must be a directory of its own, not a link")
    return root


def snapshot_dir(root: Path, name: str) -> Path:
    path = root / check_name(name)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise SnapshotError(f"snapshot {name} ({path}) is not a snapshot directory")
    if not (path / MANIFEST).exists():
        known = ", ".join(i.name for i in list_snapshots(root)) or "none"
        raise SnapshotError(f"no snapshot named {name} in {root} (snapshots there: {known})")
    return path


# ------------------------------------------------------------------ canonical form and checksum
def canonical(point: StoredPoint) -> str:
    """The point as one JSON line: what the file holds and what the checksum covers."""
    return json.dumps({"id": point.id, "dense": list(point.dense),
                       "sparse": {"indices": list(point.sparse[0]), "values": list(point.sparse[1])},
                       "payload": point.payload},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def checksum(digests: Iterable[str]) -> str:
    """Order-free: the same points give the same checksum whatever order they are read in."""
    return "sha256:" + digest("".join(d + "\n" for d in sorted(digests)))


def snapshot_info(path: Path, manifest: dict[str, Any]) -> SnapshotInfo:
    return SnapshotInfo(name=manifest["name"], path=str(path), created_at=manifest["created_at"],
                        count=manifest["count"], checksum=manifest["checksum"], embeddings=manifest["embeddings"],
                        dim=manifest["dim"], pool=manifest.get("pool", ""),
                        namespace=manifest.get("namespace", DEFAULT_NAMESPACE))


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of the snapshot directory `path`, its fields checked; a SnapshotError naming what is wrong."""
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SnapshotError(f"snapshot {path.name}: cannot read {MANIFEST} ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"snapshot {path.name}: {MANIFEST} is not valid JSON ({exc})") from None
    expected = {"format": str, "format_version": int, "name": str, "created_at": str, "count": int,
                "checksum": str, "embeddings": str, "dim": int}
    if not isinstance(manifest, dict):
        raise SnapshotError(f"snapshot {path.name}: {MANIFEST} is not a JSON object")
    for key, kind in expected.items():
        if not isinstance(manifest.get(key), kind) or isinstance(manifest.get(key), bool):
            raise SnapshotError(f"snapshot {path.name}: {MANIFEST} has no valid {key!r}")
    if manifest["format"] != FORMAT or manifest["format_version"] not in READABLE_VERSIONS:
        raise SnapshotError(f"snapshot {path.name}: format {manifest['format']!r} version "
                            f"{manifest['format_version']} is not one this version reads ({FORMAT} "
                            f"{' or '.join(map(str, READABLE_VERSIONS))})")
    if manifest["name"] != path.name:
        raise SnapshotError(f"snapshot {path.name}: its manifest names it {manifest['name']!r}")
    return manifest


def list_snapshots(root_or_pool: Any, directory: str | Path | None = None) -> list[SnapshotInfo]:
    """The snapshots in a root directory (or a pool's), oldest first; an unreadable manifest is listed with its
    problem. Temporary directories of unfinished snapshots are hidden (their names start with '.')."""
    root = Path(root_or_pool) if isinstance(root_or_pool, (str, Path)) else snapshot_root(root_or_pool, directory)
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.iterdir()):
        if not NAME_PATTERN.fullmatch(path.name) or path.is_symlink() or not path.is_dir():
            continue
        try:
            found.append(snapshot_info(path, read_manifest(path)))
        except SnapshotError as exc:
            found.append(SnapshotInfo(name=path.name, path=str(path), problem=str(exc)))
    return sorted(found, key=lambda i: (i.created_at, i.name))


# ------------------------------------------------------------------ reading a snapshot whole
@dataclass
class Snapshot:
    info: SnapshotInfo
    points: dict[str, StoredPoint]
    digests: dict[str, str]
    """id -> sha256 of the point's canonical line."""


def _point(data: Any, dim: int) -> StoredPoint:
    if not isinstance(data, dict) or set(data) != {"id", "dense", "sparse", "payload"}:
        raise ValueError("not a point (expected id, dense, sparse, payload)")
    dense, sparse, payload = data["dense"], data["sparse"], data["payload"]
    if not isinstance(data["id"], str) or not data["id"]:
        raise ValueError("its id is not a string")
    try:  # array() refuses anything but numbers, in C; 8 bytes a component where a list holds float objects
        vector = array("d", dense if isinstance(dense, list) else ())
        indices, values = array("q", sparse["indices"]), array("d", sparse["values"])
        if set(sparse) != {"indices", "values"} or not isinstance(sparse["indices"], list):
            raise TypeError
    except (TypeError, KeyError, OverflowError):
        raise ValueError("its dense or sparse vector is not lists of numbers") from None
    if len(vector) != dim:
        raise ValueError(f"its dense vector is not {dim} numbers")
    if len(indices) != len(values) or (indices and min(indices) < 0):
        raise ValueError("its sparse vector is not matching lists of indices and values")
    if not isinstance(payload, dict):
        raise ValueError("its payload is not a JSON object")
    return StoredPoint(data["id"], vector, (sparse["indices"], sparse["values"]), payload)  # type: ignore[arg-type]


def check_embeddings(name: str, manifest: dict[str, Any], embeddings: tuple[str, int] | None) -> None:
    if embeddings is not None and (manifest["embeddings"], manifest["dim"]) != embeddings:
        raise SnapshotError(f"snapshot {name} was taken with embeddings {manifest['embeddings']!r} (dim "
                            f"{manifest['dim']}); this pool uses {embeddings[0]!r} (dim {embeddings[1]})")


def load_snapshot(root: str | Path, name: str, embeddings: tuple[str, int] | None = None) -> Snapshot:
    """Read and verify a whole format-1 snapshot: manifest (its embeddings' name and dim when given), every line,
    count and checksum (format 2 is streamed: stream.py)."""
    path = snapshot_dir(Path(root), name)
    manifest = read_manifest(path)
    if manifest["format_version"] != 1:
        raise SnapshotError(f"snapshot {name} is format {manifest['format_version']}: read it with stream.Reader")
    check_embeddings(name, manifest, embeddings)
    points: dict[str, StoredPoint] = {}
    digests: dict[str, str] = {}
    lineno = 0
    try:
        with gzip.open(path / POINTS, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                text = raw.decode("utf-8").rstrip("\n")
                point = _point(json.loads(text), manifest["dim"])
                if point.id in points:
                    raise ValueError(f"id {point.id} appears twice")
                points[point.id], digests[point.id] = point, digest(text)
    except FileNotFoundError:
        raise SnapshotError(f"snapshot {name} is corrupt: {POINTS} is missing") from None
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError; truncation is EOFError
        raise SnapshotError(f"snapshot {name} is corrupt: {POINTS} cannot be decompressed "
                            f"({str(exc) or type(exc).__name__})") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise SnapshotError(f"snapshot {name} is corrupt: {POINTS} line {lineno}: {exc}") from None
    if len(points) != manifest["count"]:
        raise SnapshotError(f"snapshot {name} is corrupt: it holds {len(points)} points, its manifest says "
                            f"{manifest['count']}")
    if checksum(digests.values()) != manifest["checksum"]:
        raise SnapshotError(f"snapshot {name} is corrupt: its points do not match the manifest's checksum")
    return Snapshot(snapshot_info(path, manifest), points, digests)
