"""Reading a snapshot's lines in chunks: the same lines and bytes as reading them one by one, for generated streams,
chunk sizes and batch sizes; a line past the limit refused without reading it whole."""

import io
import random

import pytest

from mtl_graph.memory.engine.snapshots import stream
from mtl_graph.memory.engine.snapshots.stream import Lines, LineTooLong


def _stream(rng: random.Random) -> bytes:
    lines = [bytes(rng.choice(b'{}":,abc\\\r 0123456789') for _ in range(rng.choice([0, 1, 2, 7, 40, 300])))
             for _ in range(rng.randrange(0, 60))]
    data = b"".join(line + b"\n" for line in lines)
    return data + (b"unended" if rng.random() < 0.3 else b"")


@pytest.mark.parametrize("seed", range(40))
def test_chunked_lines_equal_readline(seed, monkeypatch):
    rng = random.Random(seed)
    monkeypatch.setattr(stream, "CHUNK", rng.choice([1, 2, 3, 17, 64, 4096]))
    data = _stream(rng)
    expected = io.BytesIO(data)
    lines = Lines(io.BytesIO(data), limit=10_000)
    while True:
        n = rng.randrange(1, 9)
        got, raw = lines.take(n)
        want = [expected.readline() for _ in range(n)]
        ended = [w for w in want if w.endswith(b"\n")]  # a last line without a newline is not a line
        assert got == [w[:-1] for w in ended] and raw == b"".join(ended)
        if len(got) < n:
            break
    assert lines.more() == data.endswith(b"unended")


@pytest.mark.parametrize("seed", range(20))
def test_a_line_past_the_limit_is_refused_with_its_number(seed, monkeypatch):
    rng = random.Random(seed)
    monkeypatch.setattr(stream, "CHUNK", rng.choice([1, 5, 64, 1024]))
    limit = rng.choice([8, 50, 200])
    short = [b"x" * rng.randrange(0, limit + 1) for _ in range(rng.randrange(0, 6))]
    long = b"y" * rng.randrange(limit + 1, 3 * limit)
    data = b"".join(line + b"\n" for line in short + [long] + [b"z"])
    lines = Lines(io.BytesIO(data), limit)
    with pytest.raises(LineTooLong) as raised:
        lines.take(len(short) + 2)
    assert raised.value.before == len(short)
