"""Format 2 of a snapshot: points in id order, in batches, each batch checked by its own checksum.

A format-2 snapshot directory holds, beside `manifest.json`:
- `payloads.jsonl.gz`: one canonical JSON line per point, `{"id", "payload", "sparse"}` (keys sorted, compact,
  UTF-8), in strictly increasing id order: `zcat payloads.jsonl.gz | jq` reads it;
- `dense.f32` (or `dense.f64`): the dense vectors as little-endian floats, one row of `dim` per point in the same
  order (`numpy.fromfile(path, "<f4").reshape(-1, dim)` reads it). Engines keep float32, so decimal JSON spent three
  quarters of a snapshot's time writing digits that say nothing more; a pool whose vectors are not all exact in
  float32 is written as float64 instead, so a snapshot never rounds;
- `batches.jsonl`: one line per batch of at most `batch_size` points: its index, count, first and last id, and the
  sha256 of its lines' bytes followed by its vectors' bytes.

The manifest's checksum is sha256 over the batch digests in order. Points are in id order (every engine scrolls in
id order; a stream that is not is an error), so the batches of a pool are a function of its contents: the checksum
recomputed from a live pool in batches of the same size equals the snapshot's exactly when every byte of every
point does. Every read is streaming with memory bounded by one batch: a reader checks each batch against its
record before yielding it, and the whole (count, batch count, checksum) at its end.
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import json
import os
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import orjson

from mtl_graph.core.errors import MTLError
from mtl_graph.memory.engine.snapshots.format import SnapshotError
from mtl_graph.memory.engine.storage import PointBatch, StoredPoint

LINES = "payloads.jsonl.gz"
BATCHES = "batches.jsonl"
DENSE_FILES = {"<f4": "dense.f32", "<f8": "dense.f64"}
DEFAULT_BATCH = 1024
"""Points per batch: large enough that per-batch work (a numpy conversion, a digest, a record) is amortised, small
enough that a batch of 384-dimension points is a few MB."""
MAX_BATCH = 65_536
"""Largest batch a reader accepts: a manifest declaring more is refused before anything is read."""
MAX_LINE = 64 * 1024 * 1024
"""Longest point line a reader accepts (a payload is a few KB): a longer one is corruption, not read into memory."""
_ID_PREFIX = b'{"id":'
_ID_QUOTED = len(_ID_PREFIX) + 1
_DECODER = json.JSONDecoder()
_LITTLE = sys.byteorder == "little"


RUN = 8 * DEFAULT_BATCH
"""Points sorted in memory at a time when a scroll is not in id order (about 20 MB of 384-dimension points)."""


class NotFloat32(SnapshotError):
    """A dense vector is not exact in float32: the writer starts again in float64."""


class OutOfOrder(SnapshotError):
    """A stream that should be in id order is not (a filtered scroll: a namespace's points come in index order)."""


@dataclass(slots=True)
class Encoded:
    """One point in its canonical form: its line (id, payload, sparse) and its dense vector's bytes."""

    id: str
    line: bytes
    """The canonical JSON line without its newline."""
    dense: bytes
    dtype: str
    """'<f4' or '<f8': how `dense` is written."""

    def vector(self) -> np.ndarray:
        return np.frombuffer(self.dense, self.dtype).astype(np.float64)

    def same_vector(self, other: "Encoded") -> bool:
        if self.dtype == other.dtype:
            return self.dense == other.dense
        return bool(np.array_equal(self.vector(), other.vector()))

    def point(self) -> StoredPoint:
        data = parse_line(self.line)
        sparse = data["sparse"]
        return StoredPoint(self.id, self.vector().tolist(), (sparse["indices"], sparse["values"]), data["payload"])


_TOKEN_START = frozenset(b":,[")
_NUMBER = frozenset(b"0123456789.")


def _small_float(line: bytes) -> bool:
    """Whether the compact JSON `line` may hold a number token orjson writes otherwise than json: the two differ
    only for floats below 1e-4 in magnitude (orjson `0.00001` / `1e-7`, json `1e-05` / `1e-07`; measured over
    300,000 floats of every magnitude), which orjson writes with `0.0000` or with `e-` after a token of digits that
    starts after ':', ',' or '['. A string holding such text only costs the slower encoder."""
    if b"0.0000" in line:
        return True
    at = line.find(b"e-")
    while at > 0:
        start = at
        while start > 0 and line[start - 1] in _NUMBER:
            start -= 1
        if start < at and start > 0 and (line[start - 1] in _TOKEN_START
                                         or (line[start - 1] == 45 and line[start - 2] in _TOKEN_START)):
            return True
        at = line.find(b"e-", at + 2)
    return False


def canonical_json(value: Any, parsed: bool = False) -> bytes:
    """`json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)` as UTF-8,
    the canonical form snapshots have always had, written by orjson (10x faster) wherever its bytes are provably
    the same: it refuses what json would not write alike (integers past 64 bits, non-string keys), a NaN or
    infinity it writes as null is caught by reading the line back (not needed for a value read from JSON, which
    holds none: `parsed`), and a line that may hold a float below 1e-4 is written by json. Raises TypeError or
    ValueError."""
    try:
        line = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        line = None
    if line is not None and not _small_float(line) and (parsed or orjson.loads(line) == value):
        return line
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


_DIGITS_AS_ZERO = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
"""A translation table: every digit becomes '0', every other byte a space."""
_LONG_INT = b"0" * 19


def _long_int(line: bytes) -> bool:
    """Whether `line` holds 19 digits in a row: orjson reads an integer past 64 bits as a float, so such a line is
    read by json instead (a translation and a substring search: a tenth of the time of the regular expression)."""
    return _LONG_INT in line.translate(_DIGITS_AS_ZERO)


def parse_line(line: bytes) -> Any:
    """One canonical line read back (orjson where it reads exactly what json would). Raises ValueError."""
    return json.loads(line) if _long_int(line) else orjson.loads(line)


def _line_value(point_id: str, sparse: tuple[Any, Any], payload: dict[str, Any]) -> dict[str, Any]:
    return {"id": point_id, "payload": payload, "sparse": {"indices": list(sparse[0]), "values": list(sparse[1])}}


def canonical_line(point: StoredPoint) -> bytes:
    return canonical_json(_line_value(point.id, point.sparse, point.payload))


def _rows(batch: PointBatch | list[StoredPoint], dim: int) -> np.ndarray:
    if isinstance(batch, PointBatch):
        rows = batch.dense
    else:
        try:
            rows = np.asarray([p.dense for p in batch], dtype=np.float64)
        except (TypeError, ValueError):
            raise SnapshotError("a point's dense vector is not a list of numbers") from None
    if rows.shape != (len(batch), dim):
        raise SnapshotError(f"a point's dense vector is not {dim} numbers")
    if not np.isfinite(rows).all():
        raise SnapshotError("a point's dense vector holds NaN or infinity")
    return rows


def encode_batch(batch: PointBatch | list[StoredPoint], dim: int, dtype: str, strict: bool = True) -> list[Encoded]:
    """The points (a batch as the engine reads it, or plain points) in canonical form. strict: a vector that is
    not exact in float32 raises NotFloat32 (the writer starts again in float64); not strict: such a batch is
    encoded in float64 (it then differs from a float32 snapshot's points, as its values do)."""
    rows = _rows(batch, dim)
    if dtype == "<f4":
        narrow = rows.astype("<f4")
        if not np.array_equal(narrow, rows):
            if strict:
                raise NotFloat32
            dtype, narrow = "<f8", rows.astype("<f8")
    else:
        narrow = rows.astype("<f8")
    if isinstance(batch, PointBatch):
        ids, sparse, payloads, parsed = batch.ids, batch.sparse, batch.payloads, batch.from_json
    else:
        ids, sparse, payloads = [p.id for p in batch], [p.sparse for p in batch], [p.payload for p in batch]
        parsed = False
    block, row = narrow.tobytes(), dim * narrow.itemsize  # one copy of the batch's vectors, sliced per point
    try:
        lines = _canonical_lines([_line_value(i, sp, pl) for i, sp, pl in zip(ids, sparse, payloads)], parsed)
    except (TypeError, ValueError) as exc:
        raise SnapshotError(f"a point's payload cannot be written as JSON ({exc})") from None
    return [Encoded(i, line, block[n * row:(n + 1) * row], dtype) for n, (i, line) in enumerate(zip(ids, lines))]


def _canonical_lines(values: list[Any], parsed: bool) -> list[bytes]:
    """`canonical_json` of each value, the check for small floats made once over the whole batch's lines (a line
    can only hold one where the joined lines do: each line starts with '{"id":'), and line by line only then."""
    if not parsed:
        return [canonical_json(v) for v in values]
    try:
        lines = [orjson.dumps(v, option=orjson.OPT_SORT_KEYS) for v in values]
    except TypeError:
        return [canonical_json(v, parsed) for v in values]
    if not _small_float(b"\n".join(lines)):
        return lines
    return [canonical_json(v, parsed) if _small_float(line) else line for v, line in zip(values, lines)]


def in_id_order(points: Iterable[Any], what: str) -> Iterator[Any]:
    """The points (anything with an `id`), checked to come in strictly increasing id order."""
    last = None
    for point in points:
        if last is not None and not point.id > last:
            raise OutOfOrder(f"{what} is not in strictly increasing id order ({point.id!r} after {last!r})")
        last = point.id
        yield point


def chunks(points: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for point in points:
        batch.append(point)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def sorted_by_id(batches: Iterable[list[Encoded]], scratch: Path, dtype: str, dim: int,
                 run: int | None = None) -> Iterator[Encoded]:
    """Encoded points (all of one dtype and dim) in any order, back in id order with bounded memory: runs of `run`
    points sorted in memory and spilled into `scratch` (lines and vector bytes, uncompressed), then merged."""
    run = RUN if run is None else run
    runs: list[Path] = []
    buffer: list[Encoded] = []

    def spill() -> None:
        buffer.sort(key=lambda e: e.id)
        path = scratch / f"run-{len(runs)}"
        with open(path.with_suffix(".lines"), "wb") as lines, open(path.with_suffix(".dense"), "wb") as dense:
            lines.write(b"".join(e.line + b"\n" for e in buffer))
            dense.write(b"".join(e.dense for e in buffer))
        runs.append(path)
        buffer.clear()

    for batch in batches:
        buffer.extend(batch)
        if len(buffer) >= run:
            spill()
    if not runs:
        buffer.sort(key=lambda e: e.id)
        yield from buffer
        return
    if buffer:
        spill()
    row = dim * np.dtype(dtype).itemsize
    yield from heapq.merge(*(_read_run(path, dtype, row) for path in runs), key=lambda e: e.id)


def _read_run(path: Path, dtype: str, row: int) -> Iterator[Encoded]:
    with open(path.with_suffix(".lines"), "rb") as lines, open(path.with_suffix(".dense"), "rb") as dense:
        for raw in lines:
            line = raw[:-1]
            point_id, _ = _DECODER.raw_decode(line.decode("utf-8"), len(_ID_PREFIX))
            yield Encoded(point_id, line, dense.read(row), dtype)


def batch_bytes(batch: list[Encoded]) -> tuple[bytes, bytes]:
    """A batch as its files hold it: its lines (each ending in a newline), its vectors."""
    return b"".join([e.line + b"\n" for e in batch]), b"".join([e.dense for e in batch])


def batch_digest(batch: list[Encoded], joined: tuple[bytes, bytes] | None = None) -> str:
    """sha256 of the batch's lines followed by its vectors (`joined`: its `batch_bytes`, when already made)."""
    h = hashlib.sha256()
    for part in joined or batch_bytes(batch):
        h.update(part)
    return h.hexdigest()


def total_checksum(digests: Iterable[str]) -> str:
    return "sha256:" + hashlib.sha256("".join(d + "\n" for d in digests).encode("ascii")).hexdigest()


# ------------------------------------------------------------------ writing
class Writer:
    """Writes encoded batches into a (temporary) snapshot directory; `close()` fsyncs and returns the totals."""

    def __init__(self, directory: Path, dtype: str) -> None:
        self.dtype = dtype
        self.count = 0
        self.digests: list[str] = []
        self._raw = open(directory / LINES, "wb")
        # level 1: JSON payloads compress well at it; the float bytes go uncompressed (random mantissas do not)
        self._lines = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=1, mtime=0)
        self._dense = open(directory / DENSE_FILES[dtype], "wb")
        self._batches = open(directory / BATCHES, "w", encoding="utf-8")

    def write(self, batch: list[Encoded]) -> None:
        lines, dense = joined = batch_bytes(batch)
        digest = batch_digest(batch, joined)
        self._lines.write(lines)
        self._dense.write(dense)
        self._batches.write(json.dumps({"batch": len(self.digests), "count": len(batch), "first": batch[0].id,
                                        "last": batch[-1].id, "sha256": digest}, ensure_ascii=False) + "\n")
        self.digests.append(digest)
        self.count += len(batch)

    def close(self) -> None:
        self._lines.close()
        for fh in (self._raw, self._dense, self._batches):
            fh.flush()
            os.fsync(fh.fileno())
            fh.close()

    def abort(self) -> None:
        for fh in (self._lines, self._raw, self._dense, self._batches):
            try:
                fh.close()
            except (OSError, ValueError):
                pass


# ------------------------------------------------------------------ reading
CHUNK = 256 * 1024
"""Bytes of decompressed lines read at a time."""


class LineTooLong(MTLError, ValueError):
    """A snapshot line longer than the reader's limit."""

    def __init__(self, before: int) -> None:
        super().__init__(f"the line after {before} lines is too long")
        self.before = before
        """Lines read whole (by this `take`) before the long one."""


class Lines:
    """The lines of a binary stream, read in chunks and split in C (a readline per line costs more than the rest of
    reading a snapshot); memory bounded by `limit`, the longest line it accepts, and one batch of lines."""

    def __init__(self, stream: Any, limit: int) -> None:
        self._stream, self._limit = stream, limit
        self._rest = b""
        """What was read after the last line taken."""

    def take(self, n: int) -> tuple[list[bytes], bytes]:
        """The next n lines without their newlines (fewer where the stream ends first; a last line without a newline
        is not one) and the bytes they were, newlines included. LineTooLong: one is longer than `limit`."""
        chunks, newlines = [self._rest], self._rest.count(b"\n")
        tail = len(self._rest) - self._rest.rfind(b"\n") - 1  # bytes of the line not yet ended
        while newlines < n:
            if tail > self._limit:
                raise LineTooLong(newlines)
            chunk = self._stream.read(CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
            found = chunk.count(b"\n")
            newlines += found
            tail = len(chunk) - chunk.rfind(b"\n") - 1 if found else tail + len(chunk)
        data = b"".join(chunks)
        pieces = data.split(b"\n", n)
        self._rest = pieces.pop()
        if pieces and max(map(len, pieces)) > self._limit:
            raise LineTooLong(next(k for k, line in enumerate(pieces) if len(line) > self._limit))
        return pieces, data[:len(data) - len(self._rest)]

    def more(self) -> bool:
        """Whether anything follows the lines taken."""
        return bool(self._rest) or bool(self._stream.read(1))


def check_manifest(name: str, manifest: dict[str, Any]) -> None:
    """The format-2 fields of a manifest (its common fields are checked by `read_manifest`)."""
    batch_size, batches, dtype = manifest.get("batch_size"), manifest.get("batches"), manifest.get("dense_dtype")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or not 1 <= batch_size <= MAX_BATCH:
        raise SnapshotError(f"snapshot {name}: its manifest's batch_size {batch_size!r} is not 1..{MAX_BATCH}")
    if not isinstance(batches, int) or isinstance(batches, bool) or batches < 0:
        raise SnapshotError(f"snapshot {name}: its manifest has no valid 'batches'")
    if dtype not in DENSE_FILES:
        raise SnapshotError(f"snapshot {name}: its manifest's dense_dtype {dtype!r} is not one of "
                            f"{', '.join(DENSE_FILES)}")
    if manifest["dim"] < 1 or manifest["count"] < 0:
        raise SnapshotError(f"snapshot {name}: its manifest's dim or count is out of range")
    if batches != -(-manifest["count"] // batch_size):
        raise SnapshotError(f"snapshot {name} is corrupt: {manifest['count']} points make "
                            f"{-(-manifest['count'] // batch_size)} batches of {batch_size}, its manifest says "
                            f"{batches}")


def _point_problem(data: Any) -> str | None:
    if not isinstance(data, dict) or set(data) != {"id", "payload", "sparse"}:
        return "not a point (expected id, payload, sparse)"
    sparse = data["sparse"]
    if not isinstance(data["id"], str) or not data["id"]:
        return "its id is not a string"
    if not isinstance(data["payload"], dict):
        return "its payload is not a JSON object"
    if (not isinstance(sparse, dict) or set(sparse) != {"indices", "values"}
            or not isinstance(sparse["indices"], list) or not isinstance(sparse["values"], list)
            or len(sparse["indices"]) != len(sparse["values"])):
        return "its sparse vector is not matching lists of indices and values"
    indices, values = sparse["indices"], sparse["values"]  # type() in C: bool is not int here, as intended
    if not set(map(type, indices)) <= {int} or (indices and not (min(indices) >= 0 and max(indices) < 2 ** 32)):
        return "its sparse indices are not unsigned integers"
    if not set(map(type, values)) <= {int, float}:
        return "its sparse values are not numbers"
    return None


class Reader:
    """Streams a format-2 snapshot's points, checking each batch before it is yielded."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path, self.manifest, self.name = path, manifest, path.name
        check_manifest(self.name, manifest)
        self.dtype: str = manifest["dense_dtype"]
        self.dim: int = manifest["dim"]
        self.row = self.dim * np.dtype(self.dtype).itemsize
        self.expected: list[str] | None = None
        """The batch digests of the first whole read: a later read must find the very same (file changed?)."""
        for file in (LINES, BATCHES, DENSE_FILES[self.dtype]):
            target = path / file
            if target.is_symlink() or not target.is_file():
                raise SnapshotError(f"snapshot {self.name} is corrupt: {file} is missing")
        size = (path / DENSE_FILES[self.dtype]).stat().st_size
        if size != manifest["count"] * self.row:
            raise SnapshotError(f"snapshot {self.name} is corrupt: {DENSE_FILES[self.dtype]} holds {size} bytes, "
                                f"{manifest['count']} points of {self.dim} dimensions are {manifest['count'] * self.row}")

    def _corrupt(self, why: str) -> SnapshotError:
        return SnapshotError(f"snapshot {self.name} is corrupt: {why}")

    def batches(self, validate: bool = False) -> Iterator[list[Encoded]]:
        """Every batch in order, each checked (count, ids in order, digest; validate: every line parsed and
        checked, every vector finite) before it is yielded; the whole checked at the end."""
        m, seen, digests, last = self.manifest, 0, [], None
        try:
            with open(self.path / BATCHES, "rb") as records, gzip.open(self.path / LINES, "rb") as unpacked, \
                    open(self.path / DENSE_FILES[self.dtype], "rb") as dense:
                lines = Lines(unpacked, MAX_LINE)
                for index in range(m["batches"]):
                    record = records.readline(64 * 1024)
                    try:
                        info = json.loads(record)
                        count, claimed = info["count"], info["sha256"]
                        if (info["batch"] != index or not isinstance(count, int) or isinstance(count, bool)
                                or not isinstance(claimed, str)):
                            raise ValueError
                    except (ValueError, KeyError, TypeError):
                        raise self._corrupt(f"{BATCHES} line {index + 1} is not a batch record") from None
                    expected_count = min(m["batch_size"], m["count"] - seen)
                    if count != expected_count:
                        raise self._corrupt(f"batch {index} declares {count} points, the manifest's count and "
                                            f"batch size make it {expected_count}")
                    block = dense.read(count * self.row)
                    if len(block) != count * self.row:
                        raise self._corrupt(f"{DENSE_FILES[self.dtype]} ends inside batch {index}")
                    try:
                        texts, raw = lines.take(count)
                    except LineTooLong as exc:
                        raise self._corrupt(f"{LINES} line {seen + exc.before + 1} is longer than {MAX_LINE} "
                                            "bytes") from None
                    if len(texts) < count:
                        raise self._corrupt(f"{LINES} ends inside batch {index}")
                    batch = []
                    for n, line in enumerate(texts):
                        point_id = self._id(line, seen + n + 1)
                        if last is not None and not point_id > last:
                            raise self._corrupt(f"{LINES} line {seen + n + 1}: id {point_id!r} is not after {last!r}")
                        last = point_id
                        batch.append(Encoded(point_id, line, block[n * self.row:(n + 1) * self.row], self.dtype))
                    digest = batch_digest(batch, (raw, block))
                    if (info.get("first", batch[0].id), info.get("last", batch[-1].id)) != (batch[0].id, batch[-1].id):
                        raise self._corrupt(f"batch {index}'s record names other first and last ids than its points")
                    if digest != claimed:
                        raise self._corrupt(f"batch {index} (lines {seen + 1}-{seen + count}) does not match its "
                                            "checksum")
                    if self.expected is not None and (index >= len(self.expected) or self.expected[index] != digest):
                        raise SnapshotError(f"snapshot {self.name} changed while it was being read (batch {index})")
                    if validate:
                        self._validate(batch, seen)
                    digests.append(digest)
                    seen += count
                    yield batch
                if records.readline(1) or lines.more() or dense.read(1):
                    raise self._corrupt(f"its files hold more than the manifest's {m['count']} points")
        except FileNotFoundError as exc:
            raise self._corrupt(f"{Path(exc.filename or '?').name} is missing") from None
        except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError; truncation is EOFError
            raise self._corrupt(f"{LINES} cannot be decompressed ({str(exc) or type(exc).__name__})") from None
        if total_checksum(digests) != m["checksum"]:
            raise self._corrupt("its batches do not match the manifest's checksum")
        if self.expected is None:
            self.expected = digests

    def _id(self, line: bytes, lineno: int) -> str:
        end = line.find(b'"', _ID_QUOTED)
        if line.startswith(_ID_PREFIX + b'"') and end > _ID_QUOTED and b"\\" not in line[_ID_QUOTED:end]:
            try:  # an id with no escape in it: its bytes between the quotes (a JSON string holds no raw '"')
                return line[_ID_QUOTED:end].decode("utf-8")
            except UnicodeDecodeError:
                raise self._corrupt(f"{LINES} line {lineno} is not a point line") from None
        if not line.startswith(_ID_PREFIX):
            raise self._corrupt(f"{LINES} line {lineno} is not a point line")
        try:
            point_id, _ = _DECODER.raw_decode(line.decode("utf-8"), len(_ID_PREFIX))
        except (ValueError, UnicodeDecodeError):
            raise self._corrupt(f"{LINES} line {lineno} is not a point line") from None
        if not isinstance(point_id, str) or not point_id:
            raise self._corrupt(f"{LINES} line {lineno}: its id is not a string")
        return point_id

    def _validate(self, batch: list[Encoded], seen: int) -> None:
        values = []
        for n, e in enumerate(batch):
            try:
                data = parse_line(e.line)
            except (ValueError, RecursionError) as exc:
                raise self._corrupt(f"{LINES} line {seen + n + 1}: {exc}") from None
            problem = _point_problem(data) or (None if data["id"] == e.id else "its id is not the line's first")
            if problem:
                raise self._corrupt(f"{LINES} line {seen + n + 1}: {problem}")
            values.append(data)
        try:
            canonical = _canonical_lines(values, parsed=True)
        except (TypeError, ValueError) as exc:
            raise self._corrupt(f"a line cannot be written back as JSON ({exc})") from None
        for n, (e, line) in enumerate(zip(batch, canonical)):
            if line != e.line:
                raise self._corrupt(f"{LINES} line {seen + n + 1}: it is not in canonical form")
        rows = np.frombuffer(b"".join(e.dense for e in batch), self.dtype)
        if not np.isfinite(rows).all():
            raise self._corrupt(f"batch {seen // self.manifest['batch_size']}: a dense vector holds NaN or infinity")

    def points(self) -> Iterator[Encoded]:
        for batch in self.batches():
            yield from batch

    def verify(self) -> None:
        """Read the whole snapshot once, every line parsed and checked (and its batch digests kept)."""
        for _ in self.batches(validate=True):
            pass


class FormatOneSource:
    """A format-1 snapshot (one JSON line per point, decimal vectors, an order-free checksum) read whole, as
    before, then streamed in id order like a format-2 one: old snapshots stay restorable and comparable."""

    def __init__(self, snap: Any) -> None:
        self.snapshot = snap
        self.name = snap.info.name
        self.manifest = {"count": snap.info.count, "checksum": snap.info.checksum, "dim": snap.info.dim}

    def verify(self) -> None:
        pass  # load_snapshot verified every line, the count and the checksum

    def points(self) -> Iterator[Encoded]:
        ordered = sorted(self.snapshot.points.values(), key=lambda p: p.id)
        for batch in chunks(ordered, DEFAULT_BATCH):
            yield from encode_batch(batch, self.snapshot.info.dim, "<f4", strict=False)


def open_source(path: Path, manifest: dict[str, Any]) -> "Reader | FormatOneSource":
    """The snapshot at `path` as a stream of encoded points in id order (format 1 is read whole first)."""
    if manifest["format_version"] == 1:
        from mtl_graph.memory.engine.snapshots.format import load_snapshot

        return FormatOneSource(load_snapshot(path.parent, path.name))
    return Reader(path, manifest)
