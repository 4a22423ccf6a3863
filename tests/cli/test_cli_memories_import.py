"""`mtl memories import` / `add` (the real CLI in a subprocess, a real pool) on hostile JSONL: deep nesting, BOMs.

A bad line costs one clear error line, never the lines or files after it."""

import json
import os
import random
import subprocess
import sys

from mtl_graph.memory.formats.insight import InsightMemory

DEPTHS = (50, 999, 1_000, 5_000, 100_000)


def nested(depth: int, rng: random.Random) -> str:
    """A JSON value nested depth levels deep, arrays and objects mixed at random."""
    opens, closes = [], []
    for _ in range(depth):
        if rng.random() < 0.5:
            opens.append("[")
            closes.append("]")
        else:
            opens.append('{"k":')
            closes.append("}")
    return "".join(opens) + "1" + "".join(reversed(closes))


def hostile_lines(rng: random.Random) -> list[str]:
    """Deep values alone, as a memory's field and as an unknown field of an otherwise valid memory."""
    lines = []
    for depth in DEPTHS:
        value = nested(depth, rng)
        lines += [value, '{"type": "insight", "title": ' + value + ', "description": "d", "content": "c"}',
                  '{"type": "insight", "title": "t", "description": "d", "content": "c", "extra": ' + value + "}"]
    return lines


def memory_line(i: int) -> str:
    return InsightMemory(title=f"Import survivor {i}", description=f"Memory number {i} after a bad line.",
                         content=f"Keep line {i}.").model_dump_json()


def mtl(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "mtl_graph.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600)


def test_deeply_nested_lines_are_one_error_each_and_the_rest_imports(tmp_path):
    rng = random.Random(5)
    bad = hostile_lines(rng)
    folder = tmp_path / "exports"
    folder.mkdir()
    good, lines_of = 0, {}
    for f, chunk in enumerate([bad[:5], bad[5:10], bad[10:]]):  # bad lines first, between and last in each file
        lines = []
        for line in chunk:
            lines += [line, memory_line(good)]
            good += 1
        lines_of[folder / f"{f}.jsonl"] = lines
        (folder / f"{f}.jsonl").write_text("\n".join(lines) + "\n")
    for command in ("import", "add"):
        result = mtl("memories", command, folder, "--pool", tmp_path / f"pool-{command}")
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
        assert f"{good} added" in result.stdout
        errors = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(errors) == min(len(bad), 20) + (len(bad) > 20)
        expected = [f"{path}:{n}:" for path, lines in lines_of.items() for n, line in enumerate(lines, 1)
                    if line in bad]
        assert [e.split(" ", 1)[0] for e in errors[:20]] == expected[:20]
        assert all(len(e) < 300 for e in errors)  # one line each, never the line itself
    listed = json.loads(mtl("memories", "list", "--json", "--limit", 1000, "--pool", tmp_path / "pool-import").stdout)
    assert sorted(m["title"] for m in listed) == sorted(f"Import survivor {i}" for i in range(good))


def test_a_bom_is_accepted_like_ingest_does(tmp_path):
    bom = "\ufeff"
    first = tmp_path / "editor.jsonl"
    first.write_text(bom + memory_line(0) + "\n" + memory_line(1) + "\n", encoding="utf-8")
    joined = tmp_path / "joined.jsonl"  # two BOM-prefixed exports joined with cat
    joined.write_bytes(first.read_bytes() + (bom + memory_line(2) + "\n").encode())
    crlf = tmp_path / "crlf.jsonl"
    crlf.write_bytes((bom + memory_line(3) + "\r\n").encode())
    for path in (first, joined, crlf):
        result = mtl("memories", "import", path, "--pool", tmp_path / f"pool-{path.stem}")
        assert result.returncode == 0, result.stderr
        assert result.stderr.strip() == ""
        assert f"{len(path.read_bytes().splitlines())} added" in result.stdout
