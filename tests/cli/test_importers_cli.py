"""`mtl memories import/add` given the wrong thing: a binary file, a directory, a pool directory, a file of junk."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from mtl_graph.cli import MAX_ERROR_LINES, app
from mtl_graph.memory.base import Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from helpers.paths import LOGS

runner = CliRunner()


LESSONS = [
    ("Read the exit status", "A command can fail quietly.", "Check $? after every build step."),
    ("Pin the toolchain", "Builds drift when compilers update.", "Record the compiler version in the lockfile."),
    ("Reproduce before fixing", "A fix without a failing case proves nothing.", "Write the failing test first."),
]


def memory(i: int) -> InsightMemory:
    title, description, content = LESSONS[i - 1]
    return InsightMemory(title=title, description=description, content=content, outcome="success",
                         sources=[Provenance(domain="shell", source_task_id=f"t{i}")])


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def test_binary_file_is_one_line(tmp_path: Path) -> None:
    blob = tmp_path / "pool.tar.gz"
    blob.write_bytes(bytes(range(256)) * 400)
    result = invoke("memories", "import", blob, "--pool", tmp_path / "pool")
    assert result.exit_code == 1 and result.output.strip().count("\n") == 0
    assert f"{blob}: binary file, not a JSONL file of memories" in result.output


def test_text_junk_lists_a_bounded_number_of_lines(tmp_path: Path) -> None:
    junk = tmp_path / "notes.jsonl"
    junk.write_text("".join(f"line {i} of prose\n" for i in range(500)))
    result = invoke("memories", "add", junk, "--pool", tmp_path / "pool")
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == MAX_ERROR_LINES + 2  # the count line, the first bad lines, "... and N more"
    assert lines[-1] == f"... and {500 - MAX_ERROR_LINES} more bad lines (500 in all)"


def test_directory_imports_its_jsonl_files(tmp_path: Path) -> None:
    exports = tmp_path / "exports"
    exports.mkdir()
    (exports / "a.jsonl").write_text(memory(1).model_dump_json() + "\n")
    (exports / "b.jsonl").write_text(memory(2).model_dump_json() + "\n" + memory(3).model_dump_json() + "\n")
    (exports / "README.md").write_text("not imported")
    result = invoke("memories", "import", exports, "--pool", tmp_path / "pool")
    assert result.exit_code == 0, result.output
    assert "3 added, 0 merged into memories with the same content, 0 already present" in result.output

    empty = tmp_path / "empty"
    empty.mkdir()
    none = invoke("memories", "import", empty, "--pool", tmp_path / "pool")
    assert none.exit_code == 1 and f"{empty} is a directory with no .jsonl files in it" in none.output


def test_pool_directory_is_refused_with_the_way_out(tmp_path: Path) -> None:
    pool = tmp_path / "pool"
    seed = tmp_path / "seed.jsonl"
    seed.write_text(memory(1).model_dump_json() + "\n")
    assert invoke("memories", "add", seed, "--pool", pool).exit_code == 0
    result = invoke("memories", "import", pool, "--pool", tmp_path / "other")
    assert result.exit_code == 1 and "is a memory pool directory, not an export" in result.output
    assert f"mtl memories export FILE --pool {pool}" in result.output


def test_an_agent_log_given_to_import_points_to_ingest(tmp_path: Path) -> None:
    log = LOGS / "swe_agent" / "django__django-11099.traj"
    result = invoke("memories", "import", log, "--pool", tmp_path / "pool")
    assert result.exit_code == 1
    assert f"{log} looks like a swe-agent agent log: make memories from it with `mtl ingest {log}`" in result.output
    assert len(result.output.strip().splitlines()) <= MAX_ERROR_LINES + 3
