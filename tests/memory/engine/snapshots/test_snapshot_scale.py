"""The fast paths of snapshots hold the old guarantees: points read in column batches equal points read one by one,
canonical lines written by orjson are byte for byte json's, round trips are bit-exact at every batch boundary, and
the streaming diff names exactly what a whole-read diff names, on generated edits."""

import json
import math
import random
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from mtl_graph.memory.engine.snapshots.archive import (
    changed_fields,
    create_snapshot,
    diff,
    points_of,
    restore_snapshot,
)
from mtl_graph.memory.engine.snapshots.stream import canonical_json, parse_line
from mtl_graph.memory.engine.storage import PointBatch, StoredPoint, point_batches

sys.path.insert(0, str(Path(__file__).parent))
from test_pool_snapshots import dump, memories  # noqa: E402

BATCH = 4


def _template(pool) -> StoredPoint:
    [memory] = memories(0, 1)
    pool.add(memory)
    [point] = list(pool.store.scroll_points())
    pool.delete(memory.id)
    return point


def _points(template: StoredPoint, rng: random.Random, n: int) -> list[StoredPoint]:
    """n points of random float32 unit vectors and payloads holding what json and orjson write differently."""
    out = []
    for _ in range(n):
        point_id = str(uuid.UUID(int=rng.getrandbits(128)))
        row = np.array([rng.gauss(0, 1) for _ in range(len(template.dense))], np.float32)
        payload = json.loads(json.dumps(template.payload))
        payload["memory"]["id"] = point_id
        payload["score"] = rng.choice([1e-7, -3.5e-5, 0.1, 12345.678, 1e16, 0, 2 ** 63])
        payload["note"] = rng.choice(["caf\u00e9 \u2028", "ratio:1e-5,0.00001", "tab\there", ""])
        out.append(StoredPoint(point_id, (row / np.linalg.norm(row)).tolist(), ([rng.randrange(1000)], [0.5]),
                               payload))
    return out


def _edit(pool, rng: random.Random, template: StoredPoint) -> None:
    """Random edits: deletes, new points, payload changes, new dense or sparse vectors."""
    points = list(pool.store.scroll_points())
    doomed = [p.id for p in points if rng.random() < 0.15]
    if doomed:
        pool.store.delete(doomed)
    changed = []
    for p in points:
        if p.id in doomed or rng.random() > 0.3:
            continue
        what = rng.choice(["payload", "status", "dense", "sparse"])
        if what == "payload":
            p.payload["memory"]["title"] += " (edited)"
        elif what == "status":
            p.payload["status"] = "archived"
        elif what == "dense":
            p.dense = list(reversed(p.dense))
        else:
            p.sparse = ([7, 9], [0.25, 1.0])
        changed.append(p)
    pool.store.upsert(changed + _points(template, rng, rng.randrange(4)))


def _reference_diff(a: dict, b: dict) -> tuple:
    """A whole-read diff (both sides in memory, compared as values): what the streaming diff must equal."""
    def point(i, d):
        dense, sparse, payload = d[i]
        return StoredPoint(i, dense, sparse, payload)
    both = sorted(a.keys() & b.keys())
    changed = {i: changed_fields(point(i, a), point(i, b)) for i in both}
    changed = {i: names for i, names in changed.items() if names}
    return sorted(b.keys() - a.keys()), sorted(a.keys() - b.keys()), changed, len(both) - len(changed)


@pytest.mark.parametrize("n", [0, 1, BATCH - 1, BATCH, BATCH + 1, 2 * BATCH + 1])
def test_a_round_trip_is_bit_exact_at_every_batch_boundary(pool, n):
    rng = random.Random(n)
    template = _template(pool)
    if n:
        pool.store.upsert(_points(template, rng, n))
    before = dump(pool)
    info = create_snapshot(pool, "s", batch_size=BATCH)
    assert info.count == n
    vectors = np.fromfile(Path(info.path) / "dense.f32", "<f4").reshape(-1, len(template.dense))
    ids = sorted(before)
    assert np.array_equal(vectors, np.array([before[i][0] for i in ids], np.float32).reshape(-1, vectors.shape[1]))
    _edit(pool, rng, template)
    pool.store.upsert(_points(template, rng, 2))
    report = restore_snapshot(pool, "s")
    assert dump(pool) == before  # every float, every payload key and value
    assert report.count_verified and report.checksum_verified and report.renormalised == 0


@pytest.mark.parametrize("seed", range(4))
def test_the_streaming_diff_equals_a_whole_read_diff_on_random_edits(pool, seed):
    rng = random.Random(seed)
    template = _template(pool)
    pool.store.upsert(_points(template, rng, 3 * BATCH + 2))
    create_snapshot(pool, "a", batch_size=BATCH)
    a = dump(pool)
    _edit(pool, rng, template)
    b = dump(pool)
    expected = _reference_diff(a, b)
    for changes in (diff(points_of(pool, "a"), points_of(pool, "current")),
                    diff(points_of(pool, "a"), (create_snapshot(pool, "b", batch_size=BATCH + 1),
                                                points_of(pool, "b"))[1]),
                    diff([StoredPoint(i, *a[i]) for i in a], pool.store.scroll_points())):
        assert (sorted(changes.added), sorted(changes.removed), changes.changed, changes.unchanged) == expected


def test_points_read_in_batches_equal_points_read_one_by_one(pool):
    rng = random.Random(5)
    pool.store.upsert(_points(_template(pool), rng, 11))

    class OneByOne:  # a store with no batch read of its own: the protocol's points, gathered
        def __init__(self, inner):
            self.scroll_points = inner.scroll_points

    expected = [(p.id, p.dense, p.sparse, p.payload) for p in pool.store.scroll_points(3)]
    for store in (pool.store, OneByOne(pool.store)):
        batches = list(point_batches(store, 3))
        assert [len(b) for b in batches] == [3, 3, 3, 2]
        got = [(p.id, p.dense, (list(p.sparse[0]), list(p.sparse[1])), p.payload) for b in batches for p in b.points()]
        assert got == [(i, d, (list(s[0]), list(s[1])), pl) for i, d, s, pl in expected]
    with pytest.raises(ValueError, match="not 3 numbers"):
        PointBatch.of([StoredPoint("a", [1.0, 2.0, 3.0], ([], []), {}), StoredPoint("b", [1.0], ([], []), {})])


def _value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rng.choice([1, -1]) * 10 ** rng.uniform(-320, 300) * rng.random()
    if kind == 1:
        return rng.choice([0, 1, -7, 2 ** 53 + 1, 2 ** 64 - 1, -2 ** 63, 2 ** 70, True, False, None])
    if kind == 2:
        return "".join(rng.choice(["e-", "0.0000", ":1e-5", ",", "[", "\u00e9", "\u2028", "\x01", "\"", "\\", "a",
                                   "7", "\U0001f600"]) for _ in range(rng.randrange(6)))
    if kind in (3, 4):
        return rng.choice([1e-5, -1e-7, 0.0001, 5e-324, 1e16, -0.0, 0.1, 123456.789e-12])
    if kind in (5, 6):
        return {_key(rng): _value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def _key(rng: random.Random) -> str:
    return rng.choice(["a", "b", "e-", "\u00e9", "Z", "0.0000", "aa", "\U0001f600", ""])


def test_canonical_lines_are_json_dumps_byte_for_byte():
    rng = random.Random(32)
    for _ in range(3000):
        value = {"id": _key(rng), "payload": _value(rng), "sparse": _value(rng)}
        want = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode("utf-8")
        assert canonical_json(value) == want, value
        assert parse_line(want) == value and canonical_json(parse_line(want), parsed=True) == want
    for refused in ({"a": math.nan}, {"a": [math.inf]}, {"a": {"b": -math.inf}}):
        with pytest.raises(ValueError):
            canonical_json(refused)
    assert canonical_json({1: "a", 2: "b"}) == b'{"1":"a","2":"b"}'  # what json writes (orjson refuses int keys)
